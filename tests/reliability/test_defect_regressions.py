"""Defects found by the reliability suite, one deterministic test each. Fixed ones stay as
regression tests; open ones are marked xfail(strict=True) with the owner's file (an XPASS fails the
run: remove the mark once fixed). Each docstring says the input, what happened (or happens) and
what should happen."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reliability_memcheck import memcheck

import specsample as ss
from specsample.reference import gumbel as rg
from specsample.reference.logits import rejection_sample_logits_reference
from specsample.stats import seeding


def test_fast_sample_race_with_weights_near_float32_max():
    """Fixed in c1f948d. probs rows [3e38, 3e38, 0] (unnormalised weights are allowed): the
    cross-multiplied race comparison p * E' > p' * E overflowed to inf > inf, so the earlier token
    kept winning and token 0 came out more often than token 1. Must: the same winner as the float64
    race p / E for every seed (fast_sample_reference); every row here has a race margin far above
    float32 error."""
    batch = 64
    probs = torch.tensor([[3e38, 3e38, 0.0]]).expand(batch, 3).contiguous()
    seeds = torch.arange(batch, dtype=torch.int64)
    offsets = torch.zeros(batch, dtype=torch.int64)
    _, got = ss.fast_sample(probs, 1, seeds=seeds, offsets=offsets)
    _, want = rg.fast_sample_reference(probs.double().numpy(), seeds.numpy(), offsets.numpy())
    assert got[:, 0].tolist() == want[:, 0].tolist()


@pytest.mark.parametrize("logits, temperature", [([3e38, 1.0, 0.0], 1.0), ([1e30, 0.0, -1e30], 1e-30)])
def test_softmax_of_logits_whose_scaled_value_overflows(logits, temperature):
    """Fixed in c1f948d. renorm_draft_probs (and sample_from_logits' probs_out, same kernel): when
    l * log2(e) / T overflowed float32 (|l| > ~2.3e38 at T = 1, or l = 1e30 at T = 1e-30) the
    output row was NaN. Must: softmax(l / T) = [1, 0, 0] (scale l - max instead of l and max separately)."""
    out = ss.renorm_draft_probs(torch.tensor([logits]), torch.tensor([temperature]))
    probs_out = torch.zeros(1, 3)
    ss.sample_from_logits(torch.tensor([logits]), temperature, seeds=torch.tensor([1]),
                          offsets=torch.tensor([0]), probs_out=probs_out)  # fmt: skip
    assert out.tolist() == [[1.0, 0.0, 0.0]] and probs_out.tolist() == [[1.0, 0.0, 0.0]]


def test_logits_reference_accepts_a_draft_whose_q_underflows():
    """Fixed in 58c9914. rejection_sample_logits_reference, classic, T = 1e-30, target logits
    [0, 0] (p = [1/2, 1/2] at any T), draft logits [0, -10], x = 1: q(1) = e^(-1e31) / (1 + ...)
    underflows float64 to 0, so the reference rejected (q(x) = 0 has no mass), while the exact
    q(1) > 0 makes p(1) / q(1) astronomically large: accept for every u. The kernel (log p - log q)
    accepts. Must: both accept."""
    batch = 8
    lg = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]]).expand(batch, 2, 2).contiguous()
    dl = torch.tensor([[[0.0, -10.0]]]).expand(batch, 1, 2).contiguous()
    x = torch.ones(batch, 1, dtype=torch.int64)
    kw = dict(temperature=torch.full((batch,), 1e-30), seeds=torch.arange(batch), offsets=torch.zeros(batch,
              dtype=torch.int64))  # fmt: skip
    res = ss.rejection_sample_logits(lg, x, dl, **kw)
    assert res.num_accepted.tolist() == [1] * batch  # the kernel: exact
    ref = rejection_sample_logits_reference(
        lg.numpy(), x.numpy(), dl.numpy(), **{k: v.numpy() for k, v in kw.items()}
    )
    assert np.asarray(ref.num_accepted).tolist() == [1] * batch


@pytest.mark.parametrize("layout", ["1-element", "0-d", "strided [B]"])
def test_gumbel_temperature_tensor_layouts(request, layout):
    """Fixed in c1f948d. sample_from_logits / renorm_draft_probs with a temperature tensor that is
    documented as accepted but not contiguous [B]: a 1-element or 0-d tensor became a stride-0
    expand and a strided [B] view was kept, and the kernels loaded `temperature_ptr + row`, ignoring
    the stride. 1-element / 0-d: rows >= 1 read past the tensor (the CPU memcheck reported it; on
    the GPU an out-of-bounds read) and got garbage temperatures (NaN probabilities, wrong tokens);
    strided: rows read the wrong element. Here every intended temperature is 0 (greedy): the token
    must be the argmax and renorm's row its one-hot, with no access outside the tensors."""
    batch, vocab = 6, 5
    logits = torch.tensor(
        np.random.default_rng(seeding.test_seed(request.node.nodeid)).normal(size=(batch, vocab)),
        dtype=torch.float32,
    )
    temperature = {"1-element": torch.zeros(1), "0-d": torch.tensor(0.0),
                   "strided [B]": torch.tensor([0.0, 9.0] * batch)[::2]}[layout]  # fmt: skip
    seeds, offsets = torch.arange(batch), torch.zeros(batch, dtype=torch.int64)
    with memcheck() as report:
        token = ss.sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets)
        probs = ss.renorm_draft_probs(logits, temperature)
    argmax = logits.argmax(1)
    assert token.tolist() == argmax.tolist()
    assert torch.equal(probs, torch.nn.functional.one_hot(argmax, vocab).float())
    report.assert_clean()


def test_softmax_at_infinite_temperature_is_uniform():
    """Fixed in 4393d04 (appeared with c1f948d). renorm_draft_probs(l, T = inf) and
    sample_from_logits' probs_out at T = inf returned all zeros for a row like
    [1.5, 0.3, -2.0, NaN] (while [1e30, -1e30, 0, 0] came out uniform): the softmax sums took
    2^((l - max) * scale) with scale = 0, and a -inf lane (NaN logit, tail past V) made -inf * 0 =
    NaN. The row [3e38, -3e38, -inf, 0] has finite logits whose difference overflows float32 to
    -inf, the same NaN. Must: 1 / (number of finite logits) on every finite logit, 0 elsewhere
    (reference.gumbel.softmax_with_temperature)."""
    logits = torch.tensor([[1.5, 0.3, -2.0, float("nan")], [1e30, -1e30, 0.0, 0.0],
                           [3e38, -3e38, float("-inf"), 0.0]])  # fmt: skip
    want = np.array([[1 / 3, 1 / 3, 1 / 3, 0.0], [0.25, 0.25, 0.25, 0.25], [1 / 3, 1 / 3, 0.0, 1 / 3]])
    assert np.allclose(rg.softmax_with_temperature(logits.numpy(), float("inf")), want)
    out = ss.renorm_draft_probs(logits, float("inf"))
    probs_out = torch.zeros(3, 4)
    ss.sample_from_logits(logits, float("inf"), seeds=torch.tensor([1, 2, 3]), offsets=torch.zeros(3,
                          dtype=torch.int64), probs_out=probs_out)  # fmt: skip
    assert np.allclose(out.numpy(), want) and np.allclose(probs_out.numpy(), want)


@pytest.mark.parametrize("tiles_per_chunk", [1, 3])
def test_softmax_at_infinite_temperature_across_tiles_and_chunks(request, tiles_per_chunk):
    """Fixed in 4393d04, the same defect where the row spans several tiles (tiles_per_chunk = 3:
    the running (max, sum) merge inside a chunk) or several chunks (tiles_per_chunk = 1: the merge
    kernel), with tiles of 8 tokens, V = 21 (a partial last tile) and the buffer poisoned past V.
    Rows mix finite logits, NaN, +-inf and +-3e38 (differences that overflow float32); per-row
    temperatures inf, 1, 0 and NaN, so the finite and greedy rows check that the fix leaves them
    as they were. Must match reference.gumbel.softmax_with_temperature to 1e-6 (float32 rounding;
    deterministic, no alpha)."""
    from specsample.kernels import gumbel as kg
    from specsample.kernels._launch import interpreting

    batch, vocab = 64, 21
    rng = np.random.default_rng(seeding.test_seed(request.node.nodeid))
    buf = np.full((batch, vocab + 3), 1e30, dtype=np.float32)  # poison past V
    l = rng.normal(size=(batch, vocab)).astype(np.float32) * 4
    junk = rng.choice(np.array([np.nan, np.inf, -np.inf, 3e38, -3e38], dtype=np.float32), size=(batch, vocab))
    l = np.where(rng.random((batch, vocab)) < 0.3, junk, l)
    l[0] = np.nan  # a row without a finite logit
    buf[:, :vocab] = l
    logits = torch.from_numpy(buf)[:, :vocab]
    temperature = torch.tensor([float("inf"), 1.0, 0.0, float("nan")] * (batch // 4))
    tiling = kg.RaceTiling(batch if interpreting() else 1, 8, tiles_per_chunk, 1)
    probs_out = torch.full((batch, vocab), -1.0)
    kg._sample_from_logits(logits, temperature, torch.arange(batch), torch.zeros(batch, dtype=torch.int64),
                           probs_out, tiling)  # fmt: skip
    want = rg.softmax_with_temperature(l, temperature.numpy())
    err = np.abs(probs_out.numpy() - want).max(axis=1)
    assert (err <= 1e-6).all(), f"rows {np.flatnonzero(err > 1e-6).tolist()}: max error {err.max():.3g}"


@pytest.mark.parametrize("bad_id", [2**40, 2**32, -(2**40)])
def test_logits_one_hot_rejection_of_an_id_beyond_int32(bad_id):
    """Fixed in a164a2c. rejection_sample_logits, one-hot drafts, int64 draft id 2^40 (out of range,
    so rejected): the accept kernel stored the rejected id as int32, 2^40 became token 0, and the
    residual (p, nothing excluded for an invalid id) lost token 0. Row [0, -inf, -inf]: all the mass
    on token 0, so the draw gave fallback = True instead of emitting 0 with fallback False; uniform
    rows drew from the wrong support. Must: token 0, fallback False, valid; uniform rows equal the
    float64 reference (64 seeds)."""
    batch, vocab = 64, 5
    lg = torch.full((batch, 2, vocab), 0.0)
    lg[0, 0] = torch.tensor([0.0, float("-inf"), float("-inf"), float("-inf"), float("-inf")])
    x = torch.full((batch, 1), bad_id, dtype=torch.int64)
    t = torch.ones(batch)
    seeds = torch.arange(batch, dtype=torch.int64)
    offsets = torch.zeros(batch, dtype=torch.int64)
    res = ss.rejection_sample_logits(lg, x, temperature=t, seeds=seeds, offsets=offsets)
    assert res.tokens[0].tolist() == [0, -1] and not bool(res.fallback[0]) and bool(res.valid[0])
    ref = rejection_sample_logits_reference(lg, x, temperature=t, seeds=seeds, offsets=offsets)
    assert res.tokens.tolist() == ref.tokens.tolist() and res.fallback.tolist() == ref.fallback.tolist()
