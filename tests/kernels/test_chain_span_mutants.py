"""The chain emit's span path (programs that stream several chunks: the GPU's grids outside the
latency regime, e.g. B >= 16 at V = 128256) under planted bugs. The verifier's CPU cases cannot reach
it (the interpreter runs one program per row block, one span per row), so the mutant catalogue
(tests/verify/test_mutants.py) cannot prove these bugs caught; here each patched copy of the kernel
module runs the coupling of test_chain_coupling.py with three 16-column chunks per program and must
disagree with the float64 reference on some unambiguous row, while the unpatched kernel agrees on
every one."""

from __future__ import annotations

import numpy as np
import pytest

from specsample.stats import seeding
from specsample.verify.mutants import patched_module
from tests.kernels.test_chain_coupling import coupling_differences, dev, make_case

# (pattern, replacement) in specsample/kernels/chain.py, each occurring once
SPAN_MUTANTS = {
    "mass before the chunk without the earlier spans'": [
        (r"before = span_before \+ tl\.max\(", "before = tl.max("),
    ],
    "chunk sums stored instead of running sums": [
        (r"tl\.store\(part, run_r, mask=part_ok\)", "tl.store(part, tl.sum(r, axis=1), mask=part_ok)"),
    ],
    "the last span with mass, always": [
        (r"span = tl\.where\(first_span < EMIT_LANES, first_span, last_span\)", "span = last_span"),
    ],
    "chunk crossing without the earlier spans' mass": [
        (r"reached = span_before\[:, None\] \+ sel", "reached = sel"),
    ],
}


def _unambiguous_differences(launch, case) -> int:
    """Rows where `launch` (a chain `_launch`) and the float64 reference differ, outside the reference's
    CDF-boundary tolerance; 16-column chunks, 3 per program, one row per program."""
    differ, ref, _ = coupling_differences(case, 16, tiles=3, block_rows=1, launch=launch)
    return int(np.sum(differ & ~ref.ambiguous))


@pytest.fixture(scope="module")
def case():
    # 16 requests, K = 2, V = 200: 13 chunks, 5 spans per row; Dirichlet rows spread each residual's
    # mass over every span, so most emitted tokens lie past the first span
    return make_case(seeding.current_test_seed(), 16, 2, 200, "dirichlet", "dirichlet", "fp32",
                     False, False, True, False)  # fmt: skip


def test_unpatched_kernel_couples(case):
    from specsample.kernels.chain import _launch

    assert _unambiguous_differences(_launch, case) == 0


@pytest.mark.parametrize("name", list(SPAN_MUTANTS))
def test_span_mutant_is_caught(case, name):
    mutant = patched_module("specsample.kernels.chain", SPAN_MUTANTS[name])
    assert _unambiguous_differences(mutant._launch, case) > 0, f"planted bug survived: {name}"


def test_design_rows_reach_past_the_first_span(case):
    """Design check: with 5 spans per row the emitted tokens of most rows lie in a later span, so
    every mutant above changes some row's token unless the kernel ignores it."""
    from specsample.kernels.chain import _launch

    got = _launch(dev(case["p"]), dev(case["x"]), dev(case["q"]), None, dev(case["u"]), None, None,
                  block_v=16, tiles=3, block_rows=1)  # fmt: skip
    tokens = got.tokens.cpu().numpy()
    emitted = tokens[np.arange(tokens.shape[0]), got.num_accepted.cpu().numpy()]
    assert np.mean(emitted >= 48) > 0.5, emitted  # past span 0 (chunks 0-2: columns 0-47)
