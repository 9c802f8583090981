"""Coupling: the Gumbel kernels return the float64 reference's tokens on the same Philox stream.

Kernel and reference see bit-identical Philox words (tests/kernels/test_philox.py), so their
Exp(1) noise agrees to float32 precision and their tokens agree except where the reference's two
best scores are within float32 error of each other. The tolerance REL_TOL = 1e-5 on the relative
score gap covers: the kernel's Exp(1) evaluation (relative error <= 1e-6 under the interpreter,
<= 4e-6 with the GPU's approximate log2, measured by test_exponential_noise_accuracy), the
float32 products p * E of the cross-multiplied comparison (2 x 2^-24) and bf16/fp16 inputs
(converted exactly), with a 2x margin. Every mismatch must be such a near-tie; the certificate
is the Clopper-Pearson bound on the mismatch rate (coupling inequality: TV <= P(mismatch)).
"""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from specsample.kernels import gumbel as kg
from specsample.kernels._launch import interpreting
from specsample.reference import gumbel as rg
from specsample.reference import philox as rp
from specsample.stats import current_test_seed, tv_ucb_from_coupling

REL_TOL = 1e-5  # relative score gap below which a mismatch is a float32 near-tie (module docstring)
# grouped race (fast_sample, one sample): the kernel's float64 scan and the reference's sequential
# cumulative sum of <= 256 values differ by <= 256 x 2^-53 relative to C_last (~3e-14); 1e-12 is a
# 30x margin. A mismatch closer than that to a CDF boundary is explained, any other is a bug.
CDF_TOL = 1e-12
DELTA = 1e-6  # confidence of the TV certificates
TV_MAX = 2e-3  # asserted TV(kernel, reference) upper bound; 0 mismatches in n rows give ~13.8 / n


def _rows(rng, batch, vocab, zero_frac=0.3):
    """Dirichlet rows with a fraction of exact zeros, some peaked, some with no mass at all."""
    alpha = rng.choice([0.05, 0.5, 3.0], size=(batch, 1))
    p = rng.gamma(alpha, size=(batch, vocab))
    p[rng.random((batch, vocab)) < zero_frac] = 0.0
    p[rng.random(batch) < 0.01] = 0.0  # rows without mass
    return p / np.maximum(p.sum(1, keepdims=True), 1e-300)


def _seeds(rng, batch):
    return (
        torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=batch, dtype=np.int64)),
        torch.from_numpy(rng.integers(0, 2**40, size=batch, dtype=np.int64)),
    )


def _certify(got, ref, margin, label, cdf_margin=None):
    """Mismatched rows must all be near-ties (a score gap <= REL_TOL, or for the grouped race a
    distance <= CDF_TOL between u C_last and a C_v of the winning group); returns the coupling
    certificate."""
    differ = np.any(got != ref, axis=1) if got.ndim == 2 else got != ref
    near_tie = margin <= REL_TOL
    if cdf_margin is not None:
        near_tie = near_tie | (cdf_margin <= CDF_TOL)
    bad = np.flatnonzero(differ & ~near_tie)
    assert bad.size == 0, (
        f"{label}: {bad.size} rows differ from the reference with a score gap > {REL_TOL} "
        f"(first rows {bad[:5].tolist()}: kernel {got[bad[:5]].tolist()}, reference {ref[bad[:5]].tolist()})"
    )
    cert = tv_ucb_from_coupling(int(differ.sum()), differ.size, DELTA, label=label)
    assert cert.tv_bound <= TV_MAX, f"{label}: {cert.summary()} (near-ties {int(near_tie.sum())})"
    return cert


@pytest.mark.parametrize(
    "dtype, num_samples, layout, vocab",
    [
        (torch.float32, 1, "contiguous", 97),
        (torch.float32, 1, "contiguous", 1000),
        (torch.float32, 3, "contiguous", 97),
        (torch.bfloat16, 1, "contiguous", 97),
        (torch.bfloat16, 1, "contiguous", 777),
        (torch.float16, 2, "transposed", 97),
        (torch.float32, 1, "transposed", 97),
        (torch.float32, 1, "transposed", 513),
    ],
)
def test_fast_sample_matches_reference(device, dtype, num_samples, layout, vocab):
    """n = 10000 rows, V = 97 (one group of the grouped race) and 513-1000 (3-4 groups, the last
    partial): kernel ids == reference ids except at float32 near-ties (gap <= 1e-5) or, n = 1, within
    1e-12 of a CDF boundary of the winning group; certifies TV(kernel, reference) <= 2e-3 at
    confidence 1 - 1e-6 (0 mismatches: 1.4e-3)."""
    rng = np.random.default_rng(current_test_seed())
    batch = 10000
    p = torch.from_numpy(_rows(rng, batch, vocab)).to(dtype)
    if layout == "transposed":
        p = p.t().contiguous().t()  # stride (1, B)
    p = p.to(device)
    seeds, offsets = _seeds(rng, batch)
    sample_p, ids = kg.fast_sample(p, num_samples, seeds=seeds.to(device), offsets=offsets.to(device))
    p64 = p.float().cpu().numpy().astype(np.float64)
    ref_p, ref_ids = rg.fast_sample_reference(p64, seeds.numpy(), offsets.numpy(), num_samples)
    if num_samples == 1:
        margin, cdf_margin = rg.grouped_margin(p64, *rg.group_noise(seeds.numpy(), offsets.numpy(), vocab))
    else:
        margin = rg.race_margin(
            p64, rp.gumbel_exponentials(seeds.numpy(), offsets.numpy(), vocab), num_samples
        )
        cdf_margin = None
    got = ids.cpu().numpy()
    _certify(got, ref_ids, margin, f"fast_sample {dtype} n={num_samples} {layout} V={vocab}", cdf_margin)
    same = np.all(got == ref_ids, axis=1)
    got_p = sample_p.float().cpu().numpy()
    assert np.array_equal(got_p[same], ref_p[same].astype(np.float32)), "sample_p is not p at the index"
    assert sample_p.dtype == dtype and ids.dtype == torch.int64


@pytest.mark.parametrize(
    "block_v, tiles_per_chunk, block_rows, warps, pick",
    [(256, 1, 512, 1, False), (256, 3, 512, 1, True), (512, 2, 1024, 2, False), (1024, 1, 256, 4, True),
     (1024, 2, 512, 1, False), (1024, 2, 512, 1, True)],
)  # fmt: skip
def test_fast_sample_tiling_does_not_change_tokens(device, block_v, tiles_per_chunk, block_rows, warps, pick):
    """Chunk-invariance of the grouped race: tokens are a function of (probs, seed, offset) only.
    One to four groups per tile, several tiles per chunk, partial row blocks and the token drawn
    in each chunk (pick) or in the merge give exactly the default launch's tokens (the same float32
    group masses, summed per group, so not even near-ties may differ): 1000 rows, V = 2001 (8
    groups, the last one partial)."""
    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 1000, 2001
    p = torch.from_numpy(_rows(rng, batch, vocab)).float().to(device)
    seeds, offsets = (t.to(device) for t in _seeds(rng, batch))
    _, base, _ = kg._fast_sample(p, 1, None, seeds, offsets)
    tiling = kg.RaceTiling(
        block_rows if interpreting() else 1, block_v, tiles_per_chunk, warps, grouped=True, pick_in_chunk=pick
    )
    _, tiled, _ = kg._fast_sample(p, 1, None, seeds, offsets, tiling=tiling)
    assert torch.equal(base, tiled)
    # batch invariance: a row's token does not depend on the other rows
    perm = torch.from_numpy(rng.permutation(batch)).to(device)
    _, permuted = kg.fast_sample(p[perm], seeds=seeds[perm], offsets=offsets[perm])
    assert torch.equal(permuted, base[perm])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("pick", [False, True])
def test_sample_p_comes_from_the_draw(device, dtype, pick):
    """sample_p is probs at the drawn index, bit for bit in the input dtype, whichever program drew
    the token: the merge (pick = False) or every chunk (pick = True); 0 on a row without mass. 400
    rows x V = 1101 (5 groups, the last partial), 256-token tiles, 2 per chunk."""
    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 400, 1101
    p = _rows(rng, batch, vocab)
    p[-1] = 0.0
    p = torch.from_numpy(p).to(dtype).to(device)
    seeds, offsets = (t.to(device) for t in _seeds(rng, batch))
    tiling = kg.RaceTiling(128 if interpreting() else 1, 256, 2, 1, grouped=True, pick_in_chunk=pick)
    sample_p, ids, _ = kg._fast_sample(p, 1, None, seeds, offsets, tiling=tiling)
    assert sample_p.dtype == dtype and int(ids[-1, 0]) == -1 and bool((ids >= 0).any())
    zero = torch.zeros((), dtype=dtype, device=device)
    expected = torch.where(ids >= 0, p.gather(1, ids.clamp(min=0)), zero)
    assert torch.equal(sample_p, expected)


@pytest.mark.parametrize(
    "num_samples, tiles_per_chunk, grouped, pick",
    [(1, 1, False, False), (1, 3, False, False), (3, 1, False, False), (1, 1, True, False),
     (1, 2, True, False), (1, 2, True, True)],
)  # fmt: skip
def test_fused_merge_equals_two_launch_merge(device, num_samples, tiles_per_chunk, grouped, pick):
    """The one-launch race (the last program of a row block merges the chunks' candidates) returns
    exactly what the two-launch race returns: same ids, sample_p and scores, on 300 rows x V = 101
    split into 4-7 chunks (grouped race: V = 1101 in 2-5 chunks of 256-token tiles) and a partial last
    row block; and it leaves every arrival counter at zero (a counter left non-zero would make the
    next call skip its merge)."""
    from specsample.kernels._arrivals import arrival_counters

    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 300, 1101 if grouped else 101
    p = _rows(rng, batch, vocab)
    p[-1] = 0.0  # a row without mass, whatever the draw
    p = torch.from_numpy(p).float().to(device)
    seeds, offsets = (t.to(device) for t in _seeds(rng, batch))
    tiling = kg.RaceTiling(
        128 if interpreting() else 1,
        256 if grouped else 16,
        tiles_per_chunk,
        1,
        grouped=grouped,
        pick_in_chunk=pick,
    )
    two = kg._fast_sample(
        p, num_samples, None, seeds, offsets, tiling=tiling, with_score=True, fused_merge=False
    )
    for _ in range(2):  # the second call needs the counters the first one left behind to be zero
        one = kg._fast_sample(
            p, num_samples, None, seeds, offsets, tiling=tiling, with_score=True, fused_merge=True
        )
        for a, b in zip(one, two, strict=True):
            assert torch.equal(a, b)
    assert (two[1] >= 0).any() and (two[1] == -1).any()  # live rows and rows without mass both present
    assert int(arrival_counters(p.device, 1).abs().sum()) == 0


def test_merge_launch_choice():
    """One launch while the candidates fit 8 per thread (every num_samples = 1 default tiling: at most
    1320 chunks, 8 warps); a second launch beyond, where the merge's registers would be the whole
    kernel's (num_samples = 64 over 297 chunks of 512 tokens at V = 151936, 4 warps)."""
    assert kg.fuse_merge(2048, 8) and kg.fuse_merge(256, 1)
    assert not kg.fuse_merge(32768, 4) and not kg.fuse_merge(512, 1)
    if not interpreting():
        t = kg.race_tiling(1, 151936, 64)
        assert not kg.fuse_merge(1 << (triton.cdiv(151936, t.block_v) * 64 - 1).bit_length(), t.num_warps)


def test_gpu_tiling_choice(monkeypatch):
    """The GPU defaults. One sample: the grouped race, one-warp programs over 1024-token tiles (one
    power of two >= V below that), at most 32 programs per SM and 256 chunks per row, one wave,
    merge fused. Top-n: the wide per-token tiling. The per-token one-sample tiling kept for comparisons
    (run 28): one-warp 256-token screened tiles at 32 programs per SM once a batch has >= 4 x 32 x 132
    tiles of work; the wide unscreened tiling below that."""
    monkeypatch.setattr(kg, "interpreting", lambda: False)
    caches = (kg.race_tiling, kg.wide_race_tiling, kg.token_race_tiling, kg.grouped_race_tiling)
    for cache in caches:
        cache.cache_clear()
    try:
        grouped_cases = ((1, 151936, 1024), (3, 151936, 1024), (4, 151936, 1024), (64, 151936, 1024),
                         (256, 128256, 1024), (4096, 32000, 1024), (1, 200, 256), (1, 7, 8))  # fmt: skip
        for batch, vocab, block_v in grouped_cases:
            t = kg.race_tiling(batch, vocab)
            assert t.grouped and (t.block_v, t.num_warps, t.block_rows) == (block_v, 1, 1), (batch, vocab, t)
            assert t.pick_in_chunk == (batch * triton.cdiv(vocab, t.block_v) < 4 * 132), (batch, vocab, t)
            chunks = triton.cdiv(triton.cdiv(vocab, t.block_v), t.tiles_per_chunk)
            assert batch * chunks <= 32 * 132 + batch, (batch, vocab, t)  # one wave (rounding: < 1 row)
            assert kg.fuse_merge(1 << (chunks - 1).bit_length(), t.num_warps), (batch, vocab, t)
        for batch, vocab in ((64, 151936), (256, 128256), (29, 151936), (4096, 32000)):
            t = kg.token_race_tiling(batch, vocab)
            chunks = triton.cdiv(triton.cdiv(vocab, 256), t.tiles_per_chunk)
            assert (t.block_v, t.num_warps, t.screen) == (256, 1, True), (batch, vocab, t)
            assert batch * chunks <= 32 * 132 + batch, (batch, vocab, t)  # one wave (rounding: < 1 row)
            assert kg.fuse_merge(1 << (chunks - 1).bit_length(), t.num_warps), (batch, vocab, t)
        for batch, vocab in ((1, 151936), (16, 32000)):
            assert kg.token_race_tiling(batch, vocab) == kg.wide_race_tiling(batch, vocab)
            assert not kg.token_race_tiling(batch, vocab).screen
        for batch, vocab, n in ((1, 151936, 4), (64, 151936, 4)):
            assert kg.race_tiling(batch, vocab, n) == kg.wide_race_tiling(batch, vocab, n)
            assert not kg.race_tiling(batch, vocab, n).screen and not kg.race_tiling(batch, vocab, n).grouped
    finally:
        for cache in caches:
            cache.cache_clear()


@pytest.mark.parametrize("per_row_temperature", [False, True])
def test_sample_from_logits_matches_reference(device, per_row_temperature):
    """n = 10000 rows, V = 83, logits N(0, 3^2) with NaN / +-inf entries, T in {0, 0.3, 1, 2.5} per
    row (or 0.7 for all): tokens == reference except where the reference's two best log-space
    scores are within 4e-6 + 4 * 2^-24 * max|l / T| (float32 error of l / T and of ln E); certifies
    TV <= 2e-3 at confidence 1 - 1e-6 (0 mismatches: 1.4e-3).
    probs_out == softmax(l / T) (one-hot for T = 0) to 1e-5."""
    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 10000, 83
    logits = rng.normal(0.0, 3.0, size=(batch, vocab)).astype(np.float32)
    logits[rng.random((batch, vocab)) < 0.05] = -np.inf
    logits[rng.random((batch, vocab)) < 0.01] = np.nan
    logits[rng.random((batch, vocab)) < 0.002] = np.inf
    logits[rng.random(batch) < 0.01] = -np.inf  # rows without mass
    if per_row_temperature:
        temps = rng.choice(np.array([0.0, 0.3, 1.0, 2.5], dtype=np.float32), size=batch)
        temperature = torch.from_numpy(temps).to(device)
    else:
        temps = np.float32(0.7)
        temperature = 0.7
    seeds, offsets = _seeds(rng, batch)
    probs_out = torch.empty((batch, vocab), dtype=torch.float32, device=device)
    got = kg.sample_from_logits(
        torch.from_numpy(logits).to(device),
        temperature,
        seeds=seeds.to(device),
        offsets=offsets.to(device),
        probs_out=probs_out,
    )
    ref = rg.sample_from_logits_reference(logits, temps, seeds.numpy(), offsets.numpy())
    noise = rp.gumbel_exponentials(seeds.numpy(), offsets.numpy(), vocab)
    gap = rg.logits_margin(logits, temps, noise)
    t = np.broadcast_to(np.asarray(temps, dtype=np.float64), (batch,))
    scale = np.where(t > 0, 1.0 / np.where(t > 0, t, 1.0), 1.0)
    finite = np.where(np.isfinite(logits), np.abs(logits), 0.0).max(axis=1)
    tol = 4e-6 + 4 * 2.0**-24 * finite * scale
    got_np = got.cpu().numpy()
    differ = got_np != ref
    bad = np.flatnonzero(differ & (gap > tol))
    assert bad.size == 0, f"{bad.size} genuine mismatches, rows {bad[:5].tolist()}"
    cert = tv_ucb_from_coupling(int(differ.sum()), batch, DELTA, label="sample_from_logits")
    assert cert.tv_bound <= TV_MAX, cert.summary()
    soft = rg.softmax_with_temperature(logits, temps)
    greedy = ~(t > 0)
    soft[greedy] = 0.0
    hot = got_np[greedy]
    soft[np.flatnonzero(greedy)[hot >= 0], hot[hot >= 0]] = 1.0  # one-hot at the returned token
    assert np.abs(probs_out.cpu().numpy() - soft).max() < 1e-5


def test_sample_from_logits_is_fast_sample_of_the_softmax(device):
    """sample_from_logits shares the per-token race's noise (fast_sample's top-n race, also reachable
    for one sample through token_race_tiling): sample_from_logits(l, T) == that race on
    softmax(l / T) with the same seeds except at float32 near-ties (4000 rows, V = 64, T = 0.9; at
    most 0.5% of rows may differ, and only where the reference's relative score gap is <= 1e-4)."""
    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 4000, 64
    logits = rng.normal(0.0, 2.0, size=(batch, vocab)).astype(np.float32)
    seeds, offsets = (t.to(device) for t in _seeds(rng, batch))
    tokens = kg.sample_from_logits(torch.from_numpy(logits).to(device), 0.9, seeds=seeds, offsets=offsets)
    probs = rg.softmax_with_temperature(logits, 0.9)
    tiling = kg.token_race_tiling(batch, vocab)
    _, ids, _ = kg._fast_sample(
        torch.from_numpy(probs).float().to(device), 1, None, seeds, offsets, tiling=tiling
    )
    differ = (tokens != ids[:, 0]).cpu().numpy()
    noise = rp.gumbel_exponentials(seeds.cpu().numpy(), offsets.cpu().numpy(), vocab)
    margin = rg.race_margin(probs, noise)
    assert not np.any(differ & (margin > 1e-4)) and differ.mean() <= 5e-3


def test_renorm_draft_probs_matches_reference(device):
    """[B, K, V] = [50, 3, 70] logits with non-finite entries, temperature [B] with zeros:
    softmax(l / T) (one-hot argmax for T = 0, zeros without mass) to 1e-6 absolute."""
    rng = np.random.default_rng(current_test_seed())
    logits = rng.normal(0.0, 4.0, size=(50, 3, 70)).astype(np.float32)
    logits[rng.random(logits.shape) < 0.05] = -np.inf
    logits[rng.random(logits.shape) < 0.02] = np.nan
    logits[3, 1] = np.nan
    logits[4, 0, :5] = 100.0  # greedy tie: first id wins
    temps = rng.choice(np.array([0.0, 0.5, 1.0, 3.0], dtype=np.float32), size=50)
    temps[4] = 0.0
    out = kg.renorm_draft_probs(torch.from_numpy(logits).to(device), torch.from_numpy(temps).to(device))
    ref = rg.softmax_with_temperature(logits, np.repeat(temps, 3))
    assert out.shape == (50, 3, 70) and out.dtype == torch.float32
    assert np.abs(out.cpu().numpy() - ref).max() < 1e-6
    assert out[4, 0, 0] == 1.0 and out[3, 1].abs().sum() == 0


@triton.jit
def _noise_probe_kernel(words_ptr, out_ptr, N: tl.constexpr, FAST_LOG2: tl.constexpr, SCALE: tl.constexpr):
    # words_ptr [N] int32 (uint32 bit patterns); out_ptr [N] fp32: SCALE * E
    i = tl.arange(0, N)
    w = tl.load(words_ptr + i).to(tl.uint32, bitcast=True)
    tl.store(out_ptr + i, kg._exponential_noise(w, FAST_LOG2, SCALE))


def kernel_noise(words: np.ndarray, device, scale: float = 1.0) -> np.ndarray:
    """The float32 SCALE * E the kernels compute from each uint32 word, any shape (the same jit function
    as the races', so bit for bit theirs where the compiler treats it alike)."""
    flat = np.ascontiguousarray(words, dtype=np.uint32).reshape(-1)
    padded = np.zeros(triton.next_power_of_2(flat.size), dtype=np.uint32)
    padded[: flat.size] = flat
    out = torch.empty(padded.size, dtype=torch.float32, device=device)
    w = torch.from_numpy(padded.view(np.int32)).to(device)
    _noise_probe_kernel[(1,)](w, out, N=padded.size, FAST_LOG2=not interpreting(), SCALE=scale)
    return out.cpu().numpy()[: flat.size].reshape(np.shape(words))


def test_exponential_noise_accuracy(device):
    """The kernels' Exp(1) = -ln(1 - t) from a word agrees with the float64 definition to
    relative 1e-6 (interpreter) / 4e-6 (GPU, approximate log2) on 2^16 random words plus both
    ends and both sides of the series / logarithm switch at t = 1/16; never 0, never inf."""
    rng = np.random.default_rng(current_test_seed())
    special = np.array(
        [
            0,
            1,
            2,
            255,
            256,
            2**24,
            2**28 - 2,
            2**28 - 1,
            2**28,
            2**28 + 1,
            2**31 - 1,
            2**31,
            2**32 - 2,
            2**32 - 1,
        ],
        dtype=np.uint64,
    )
    words = np.concatenate([special, rng.integers(0, 2**32, size=2**16 - special.size, dtype=np.uint64)])
    words = words.astype(np.uint32)
    got = kernel_noise(words, device).astype(np.float64)
    ref = rp.exponential_from_word(words)
    rel = np.abs(got / ref - 1.0)
    tolerance = 1e-6 if interpreting() else 4e-6
    assert np.all(np.isfinite(got)) and np.all(got > 0)
    assert rel.max() < tolerance, f"max relative error {rel.max():.3g} at word {words[np.argmax(rel)]}"


def _screening_rows(rng, batch, vocab):
    """Rows on which the screen has work and pitfalls: equal heavy tokens spread over the tiles (the
    winner is often within a few percent of an earlier best in ratio: a screen bound too high
    skips it), a dominant token late (nothing skipped before it), flat rows, weights near FLT_MAX and
    near the bottom of float32's normal range, NaN / inf / negative entries, and rows without mass."""
    p = rng.gamma(0.3, size=(batch, vocab))
    kind = np.arange(batch) * 8 // batch  # one kind per row block of batch / 8 rows
    p[kind == 0, 5::9] = 1e3 * p[kind == 0].sum(1, keepdims=True)
    p[kind == 7, ::4] = 1.0
    p[kind == 1, -2] = 1e4 * p[kind == 1].sum(1)
    p[kind == 2] = 1.0
    p[kind == 3] *= 3e37
    p[kind == 4] *= 1e-30
    p[kind == 5, ::7] = np.nan
    p[kind == 5, 1::11] = np.inf
    p[kind == 5, 2::13] = -1.0
    p[kind == 6] = 0.0
    return p


@pytest.mark.parametrize("block_v, tiles_per_chunk", [(16, 20), (64, 3)])
def test_screening_does_not_change_tokens(device, block_v, tiles_per_chunk):
    """The screened race (SCREEN: tiles whose tokens cannot beat the chunk's best so far skip the
    exponentials) returns exactly the unscreened race's ids, sample_p and winning scores, on 32 rows x
    V = 320 of _screening_rows: a screen that skipped a tile holding the winner, or let a skipped
    token change a tie, would differ here (on peaked rows nearly every tile after the first is
    skipped). Exact equality: the winners are the same tokens with the same float32 scores."""
    rng = np.random.default_rng(current_test_seed())
    batch, vocab = 32, 320
    p = torch.from_numpy(_screening_rows(rng, batch, vocab)).float().to(device)
    seeds, offsets = (t.to(device) for t in _seeds(rng, batch))
    rows = batch // 8 if interpreting() else 1  # the interpreter screens a row block as a whole
    plain, screened = (
        kg._fast_sample(p, 1, None, seeds, offsets, with_score=True,
                        tiling=kg.RaceTiling(rows, block_v, tiles_per_chunk, 1, screen=screen))
        for screen in (False, True)
    )  # fmt: skip
    for a, b in zip(plain, screened, strict=True):
        assert torch.equal(a, b)
    assert (plain[1] == -1).any() and (plain[1] >= 0).sum() > batch // 2


@triton.jit
def _screen_probe_kernel(best_p_ptr, best_e_ptr, p_ptr, word_ptr, hot_ptr, N, BLOCK: tl.constexpr):
    # best_*, p, word, hot: [N]; row i has one lane holding (best_p[i], best_e[i]) and one token
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)[:, None]
    ok = i < N
    best_p = tl.load(best_p_ptr + i, mask=ok, other=0.0)
    bound = kg._screen_bound(best_p, tl.load(best_e_ptr + i, mask=ok, other=1.0))
    word = tl.load(word_ptr + i, mask=ok, other=0).to(tl.uint32, bitcast=True)  # Philox words are uint32
    hot = kg._may_win(tl.load(p_ptr + i, mask=ok, other=0.0), word, bound)
    tl.store(hot_ptr + i, hot.to(tl.int8), mask=ok)


def test_screen_predicate_is_sound_and_sharp(device):
    """The screen's predicate on 2^16 tokens placed around the boundary: best ratio r = best_p /
    best_e (best_e = 2^-6 E), token p = r 2^-6 E_v (1 + d), d uniform in [-2^-4, 2^-4], words over all
    32-bit magnitudes (so t_v = E_v to 2^-33 for small words, t_v < E_v for large). Sound: a token
    screened out has p / (2^-6 E_v) <= r (1 - 2^-11) in float64 (it can neither win nor tie; a bound
    off by more than 2^-11 upward fails here). Sharp: every token with p <= r 2^-6 t_v (1 - 2^-9) is
    screened out (a bound that lost more than 2^-9 would screen less and fail here). Deterministic."""
    from specsample.reference import philox as rp

    rng = np.random.default_rng(current_test_seed())
    n = 1 << 16
    words = (rng.random(n) * 2.0 ** rng.uniform(0, 32, n)).astype(np.uint32)
    e = rp.exponential_from_word(words)  # float64 E_v
    t = (words.astype(np.float64) + 0.5) * 2.0**-32
    best_e = (2.0**-6 * rng.exponential(size=n)).astype(np.float32)
    best_p = (10.0 ** rng.uniform(-20, 20, n)).astype(np.float32)
    r = best_p.astype(np.float64) / best_e.astype(np.float64)
    p = (r * 2.0**-6 * e * (1 + rng.uniform(-(2.0**-4), 2.0**-4, n))).astype(np.float32)
    hot = torch.empty(n, dtype=torch.int8, device=device)
    args = [torch.from_numpy(a).to(device) for a in (best_p, best_e, p, words.view(np.int32))]
    _screen_probe_kernel[(triton.cdiv(n, 1024),)](*args, hot, n, BLOCK=1024)
    hot = hot.cpu().numpy().astype(bool)
    ratio = p.astype(np.float64) / (2.0**-6 * e)
    unsound = ~hot & (ratio > r * (1 - 2.0**-11))
    assert not unsound.any(), f"{unsound.sum()} tokens screened out within 2^-11 of the best"
    blunt = hot & (p.astype(np.float64) <= r * 2.0**-6 * t * (1 - 2.0**-9))
    assert not blunt.any(), f"{blunt.sum()} tokens kept that cannot win by 2^-9"
    assert 0.2 < hot.mean() < 0.8  # the tokens straddle the boundary
