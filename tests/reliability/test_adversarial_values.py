"""Device side: adversarial values (reliability_batches.py) through every public op. Whatever the
values, no access outside the tensors (CPU memcheck), no id outside [-1, V), -1 padding, and
tokens / num_accepted / fallback / valid equal to the float64 reference on every row that is not
within float tolerance of a decision boundary (reliability_oracle.py). Inputs are non-contiguous
views with poisoned neighbours. Every test is deterministic: its inputs are seeded from the test id
(specsample.stats.seeding) and every comparison is exact, so there is no alpha; at most
MAX_AMBIGUOUS_FRACTION of the rows may be set aside as float near-ties (the reference is conservative:
at V = 1 a rejected classic draft leaves a residual p - q = 0 that a perturbation could make
non-empty; a uniform put at 1 - 2^-24 sits on the last CDF boundary)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reliability_batches import (
    LOGIT_POISON,
    PROB_POISON,
    TEMPERATURES,
    draft_ids,
    guarded,
    logit_rows,
    prob_kinds,
    prob_rows,
    ragged_counts,
    seeds_offsets,
    temperatures,
)
from reliability_oracle import (
    check_chain,
    check_fast_sample,
    check_logits,
    check_renorm,
    check_sample_from_logits,
)

import specsample as ss
from specsample.stats import seeding

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
IDS = {"int32": torch.int32, "int64": torch.int64}
BATCH, NUM_K = 96, 3
MAX_AMBIGUOUS_FRACTION = 0.25  # the comparison covers at least 3/4 of the rows


def _rng(request) -> np.random.Generator:
    return np.random.default_rng(seeding.test_seed(request.node.nodeid))


def _few_ambiguous(outcome, label):
    allowed = MAX_AMBIGUOUS_FRACTION * outcome.rows
    assert outcome.ambiguous <= allowed, f"{label}: {outcome.ambiguous} of {outcome.rows} rows are near-ties"


@pytest.mark.parametrize(
    "vocab, dtype, ids, classic, seeded",
    [
        (1, "fp32", "int64", True, True),
        (7, "fp32", "int32", True, False),
        (7, "bf16", "int64", False, True),
        (33, "fp16", "int32", True, True),
        (33, "fp32", "int64", False, False),
        (1025, "bf16", "int32", True, False),
        (1025, "fp32", "int64", False, True),
    ],
)
@pytest.mark.parametrize("ragged", [False, True], ids=["full", "ragged"])
def test_chain_on_hostile_values(request, vocab, dtype, ids, classic, seeded, ragged):
    rng = _rng(request)
    kinds = prob_kinds(DTYPES[dtype])
    p = guarded(prob_rows(rng, (BATCH, NUM_K + 1, vocab), kinds), DTYPES[dtype], PROB_POISON)
    q = guarded(prob_rows(rng, (BATCH, NUM_K, vocab), kinds), DTYPES[dtype], PROB_POISON) if classic else None
    x = draft_ids(rng, BATCH, NUM_K, vocab, IDS[ids])
    n = ragged_counts(rng, BATCH, NUM_K, IDS[ids]) if ragged else None
    if seeded:
        seeds, offsets = seeds_offsets(rng, BATCH)
        out = check_chain(p, x, q, n, seeds=seeds, offsets=offsets)
    else:
        u = torch.from_numpy(rng.random((BATCH, NUM_K + 1)).astype(np.float32))
        u[::7] = 0.0  # u = 0 exactly: a zero-probability draft must still be rejected
        u[1::7] = 1.0 - 2.0**-24  # the largest float32 below 1: the last CDF boundary, a near-tie
        out = check_chain(p, x, q, n, uniforms=u)
    _few_ambiguous(out, "chain")
    assert 0 < out.valid < out.rows  # the batch holds both valid and invalid rows


@pytest.mark.parametrize(
    "vocab, dtype, ids, classic",
    [(1, "fp32", "int64", True), (7, "bf16", "int32", True), (33, "fp32", "int64", False),
     (33, "fp16", "int32", True), (1025, "fp32", "int32", False)],
)  # fmt: skip
@pytest.mark.parametrize("ragged", [False, True], ids=["full", "ragged"])
def test_rejection_sample_logits_on_hostile_values(request, vocab, dtype, ids, classic, ragged):
    rng = _rng(request)
    lg = guarded(logit_rows(rng, (BATCH, NUM_K + 1, vocab)), DTYPES[dtype], LOGIT_POISON)
    dl = guarded(logit_rows(rng, (BATCH, NUM_K, vocab)), DTYPES[dtype], LOGIT_POISON) if classic else None
    x = draft_ids(rng, BATCH, NUM_K, vocab, IDS[ids])
    n = ragged_counts(rng, BATCH, NUM_K, IDS[ids]) if ragged else None
    seeds, offsets = seeds_offsets(rng, BATCH)
    out = check_logits(lg, x, dl, n, temperature=temperatures(rng, BATCH), seeds=seeds, offsets=offsets)
    _few_ambiguous(out, "rejection_sample_logits")
    assert 0 < out.valid < out.rows


@pytest.mark.parametrize(
    "vocab, dtype, num_samples",
    [(1, "fp32", 1), (1, "bf16", 3), (7, "fp16", 1), (7, "fp32", 9), (33, "bf16", 2), (1025, "fp32", 1),
     (1025, "fp32", 4)],
)  # fmt: skip
def test_fast_sample_on_hostile_values(request, vocab, dtype, num_samples):
    """num_samples may exceed V (and the rows' positive-mass count): the extra slots are -1 / 0."""
    rng = _rng(request)
    probs = guarded(prob_rows(rng, (BATCH, vocab), prob_kinds(DTYPES[dtype])), DTYPES[dtype], PROB_POISON)
    seeds, offsets = seeds_offsets(rng, BATCH)
    out = check_fast_sample(probs, num_samples, seeds=seeds, offsets=offsets)
    _few_ambiguous(out, "fast_sample")
    assert 0 < out.valid < out.rows


@pytest.mark.parametrize("vocab, dtype", [(1, "fp32"), (7, "bf16"), (33, "fp16"), (1025, "fp32")])
@pytest.mark.parametrize("per_row", [False, True], ids=["scalar_T", "row_T"])
def test_sample_from_logits_on_hostile_values(request, vocab, dtype, per_row):
    """probs_out is a view into a poisoned buffer too: the poison must be intact afterwards."""
    rng = _rng(request)
    logits = guarded(logit_rows(rng, (BATCH, vocab)), DTYPES[dtype], LOGIT_POISON)
    seeds, offsets = seeds_offsets(rng, BATCH)
    temperature = temperatures(rng, BATCH, TEMPERATURES) if per_row else float(rng.choice([0.0, 0.7, 1e-30]))
    probs_out = guarded(np.full((BATCH, vocab), 7.0), torch.float32, -3.0)
    out = check_sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out)
    _few_ambiguous(out, "sample_from_logits")
    buffer = probs_out.as_strided((BATCH, vocab + 2), (vocab + 2, 1), probs_out.storage_offset() - 1)
    assert (buffer[:, 0] == -3.0).all() and (buffer[:, -1] == -3.0).all(), "probs_out written out of bounds"


@pytest.mark.parametrize("vocab, dtype", [(1, "fp32"), (7, "bf16"), (33, "fp16"), (1025, "fp32")])
def test_renorm_draft_probs_on_hostile_values(request, vocab, dtype):
    rng = _rng(request)
    logits = guarded(logit_rows(rng, (BATCH // 4, NUM_K, vocab)), DTYPES[dtype], LOGIT_POISON)
    check_renorm(logits, temperatures(rng, BATCH // 4, TEMPERATURES))


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["chain", "fast_sample"])
def test_bf16_subnormal_mass_survives_on_gpu(op, device):
    """A bf16 row whose only mass is subnormal (2^-130 ~ 7e-40) has mass: valid, and the token is
    one of the subnormal lanes (the interpreter cannot check this, see reliability_batches.prob_kinds)."""
    vocab = 7
    p = torch.zeros(4, 2, vocab, dtype=torch.bfloat16, device=device)
    p[:, :, 2] = 2.0**-130
    p[:, :, 5] = 2.0**-131
    assert p[0, 0, 2].item() > 0  # representable in bf16
    seeds = torch.arange(4, dtype=torch.int64, device=device)
    offsets = torch.zeros(4, dtype=torch.int64, device=device)
    if op == "chain":
        x = torch.full((4, 1), 3, dtype=torch.int64, device=device)  # p(x) = 0: rejected, residual = p
        res = ss.chain_rejection_sample(p, x, seeds=seeds, offsets=offsets)
        assert res.valid.all() and set(res.tokens[:, 0].tolist()) <= {2, 5}
    else:
        _, idx = ss.fast_sample(p[:, 0], 2, seeds=seeds, offsets=offsets)
        assert sorted(idx[0].tolist()) == [2, 5]
