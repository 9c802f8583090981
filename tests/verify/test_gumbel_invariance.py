"""The Gumbel family's determinism and batch-invariance certificates (verify/gumbel_family.py): the
references, an own-stream sampler and our kernel (interpreter) pass them; FlashInfer's two seeding bugs
(offsets that never reach the stream, seeds read at index 0) fail the one each breaks. Deterministic
verdicts: no alpha (the freshness threshold's margin is checked below)."""

import numpy as np
import pytest

from specsample.verify import gumbel_family as G
from specsample.verify.budgets import get_budget
from specsample.verify.cases import case_rng
from specsample.verify.examples import gumbel_own_stream as E
from specsample.verify.protocol import (
    external_gumbel_sampler,
    reference_grouped_gumbel_sampler,
    reference_gumbel_sampler,
    specsample_gumbel_sampler,
)

CI = get_budget("ci")
CERTS = {"determinism": G.certify_gumbel_determinism, "batch_invariance": G.certify_gumbel_batch_invariance}


@pytest.mark.parametrize("law", sorted(CERTS))
def test_references_own_stream_and_kernel_pass(law):
    samplers = [
        reference_gumbel_sampler(),
        reference_grouped_gumbel_sampler(),
        external_gumbel_sampler(E.fast_sample_own_stream, "own", "cpu"),
        specsample_gumbel_sampler("auto"),
    ]
    for sampler in samplers:
        rec = CERTS[law](sampler, CI)
        assert rec.status == "pass", (sampler.name, rec.detail)


@pytest.mark.parametrize(
    "fn, law, words",
    [
        (E.fast_sample_frozen_offsets, "determinism", "offset ignored"),
        (E.fast_sample_seed_index0, "batch_invariance", "changed some request's draws"),
    ],
)
def test_flashinfer_seeding_bugs_fail(fn, law, words):
    rec = CERTS[law](external_gumbel_sampler(fn, fn.__name__, "cpu"), CI)
    assert rec.status == "fail" and words in rec.detail, rec.detail


def test_freshness_threshold_design():
    """The determinism certificate fails above GUMBEL_FRESH_MAX_SAME of rows repeating after offsets + 1;
    on its own requests the reference repeats far fewer (about 0.03), so a correct sampler cannot fail."""
    p, seeds, offsets = G._gumbel_requests(case_rng("gumbel-determinism", 0), 512)
    ref = reference_gumbel_sampler()
    same = float(np.mean(np.all(ref(p, 2, seeds, offsets) == ref(p, 2, seeds, offsets + 1), axis=1)))
    assert same < 0.4 < G.GUMBEL_FRESH_MAX_SAME
