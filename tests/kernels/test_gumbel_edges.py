"""Edge semantics of the Gumbel kernels: no-mass tokens never win (tile tails included), rows
without mass return -1, ties go to the smallest id, randomness plumbing, argument validation.
All checks here are deterministic (no statistical tolerance)."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from specsample.kernels import gumbel as kg
from specsample.kernels._launch import interpreting
from specsample.reference import gumbel as rg
from specsample.reference import philox as rp
from specsample.stats import current_test_seed
from tests.kernels.test_gumbel_coupling import kernel_noise

BLOCK = 64  # tile width forced in the zero-mass tests


def _tiling(tiles_per_chunk: int) -> kg.RaceTiling:
    return kg.RaceTiling(4096 if interpreting() else 1, BLOCK, tiles_per_chunk, 1 if BLOCK <= 128 else 4)


def _keys(rng, batch, device):
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=batch, dtype=np.int64)).to(device)
    return seeds, torch.from_numpy(rng.integers(0, 2**62, size=batch, dtype=np.int64)).to(device)


def _edge_rows(rng, batch: int, vocab: int, kinds: int, device):
    """(probs [batch, vocab], a view of a buffer poisoned with 1e30 past V; p as numpy; kind = row % kinds).
    Kind 0 rows hold mass only on the last token (the last, partial tile or group), kind 1 rows none at
    all (zeros, NaN, -inf, +inf, negatives), the others positive values on a random half and that
    junk elsewhere."""
    buf = np.full((batch, vocab + 7), 1e30, dtype=np.float32)  # poison past V
    p = rng.random((batch, vocab)).astype(np.float32)
    junk = rng.choice(np.array([0.0, np.nan, -np.inf, np.inf, -0.5], dtype=np.float32), size=(batch, vocab))
    p = np.where(rng.random((batch, vocab)) < 0.5, junk, p)
    kind = np.arange(batch) % kinds
    p[kind == 0] = 0.0
    p[kind == 0, vocab - 1] = 0.25
    p[kind == 1] = junk[kind == 1]
    p[kind == 1, 0] = np.nan
    buf[:, :vocab] = p
    return torch.from_numpy(buf).to(device)[:, :vocab], p, kind


@pytest.mark.parametrize("vocab", [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 1])
@pytest.mark.parametrize("tiles_per_chunk", [1, 2])
def test_zero_mass_never_wins_at_tile_edges(device, vocab, tiles_per_chunk):
    """V = BLOCK - 1, BLOCK, BLOCK + 1, 2 BLOCK + 1 with BLOCK = 64 forced. Rows: mass only on the
    last token (the last, partial tile); mass on a random half with zeros, NaN, -inf, +inf and
    negatives elsewhere; no mass at all (-> -1, sample_p 0). The row buffer continues past V with
    huge values, so reading a tail lane would pick an id >= V. 2000 rows x 3 samples each: every
    returned id has 0 < p < inf (or is -1 exactly for the no-mass rows)."""
    rng = np.random.default_rng(current_test_seed())
    batch = 2000
    probs, p, kind = _edge_rows(rng, batch, vocab, 4, device)
    seeds, offsets = _keys(rng, batch, device)
    for n in (1, 3):
        tiling = _tiling(1 if n > 1 else tiles_per_chunk)
        sample_p, ids, _ = kg._fast_sample(probs, n, None, seeds, offsets, tiling=tiling)
        ids = ids.cpu().numpy()
        assert ids.min() >= -1 and ids.max() < vocab
        picked = np.take_along_axis(p, np.maximum(ids, 0), axis=1)
        has_mass = (p > 0) & np.isfinite(p)
        counts = has_mass.sum(1)
        for j in range(n):
            expect_token = counts > j
            assert np.array_equal(ids[:, j] >= 0, expect_token), (
                f"slot {j}: -1 exactly when fewer than {j + 1}"
            )
            ok = picked[:, j][expect_token]
            assert np.all((ok > 0) & np.isfinite(ok)), f"a no-mass token won at V={vocab}, slot {j}"
        assert np.all(ids[kind == 0, 0] == vocab - 1)
        assert np.all(sample_p.cpu().numpy()[ids < 0] == 0)
        assert np.all(ids[kind == 1] == -1)


@pytest.mark.parametrize("vocab", [255, 256, 257, 513, 1025])
@pytest.mark.parametrize("block_v, tiles_per_chunk, pick", [(256, 1, False), (256, 2, True), (1024, 1, False),
                                                            (1024, 1, True)])  # fmt: skip
def test_grouped_race_zero_mass_at_group_edges(device, vocab, block_v, tiles_per_chunk, pick):
    """The one-sample grouped race at group and tile edges: V = 255, 256, 257, 513 and 1025 (groups
    of 256, tiles of 1 or 4 groups, the token drawn in each chunk or in the merge). Rows: mass only
    on the last token (the last, partial group); mass on a random half with zeros, NaN, -inf, +inf
    and negatives elsewhere; no mass at all (-> -1, sample_p 0). The row buffer continues past V
    with huge values, so a group sum or a draw reading past V would show. 1200 rows: every returned
    id has 0 < p < inf, and exactly the rows without mass return -1."""
    rng = np.random.default_rng(current_test_seed())
    batch = 1200
    probs, p, kind = _edge_rows(rng, batch, vocab, 3, device)
    seeds, offsets = _keys(rng, batch, device)
    tiling = kg.RaceTiling(512 if interpreting() else 1, block_v, tiles_per_chunk, 1, grouped=True,
                           pick_in_chunk=pick)  # fmt: skip
    sample_p, ids, _ = kg._fast_sample(probs, 1, None, seeds, offsets, tiling=tiling)
    ids = ids.cpu().numpy()[:, 0]
    has_mass = ((p > 0) & np.isfinite(p)).any(axis=1)
    assert np.array_equal(ids >= 0, has_mass), "-1 exactly for the rows without mass"
    assert ids.max() < vocab
    picked = p[np.arange(batch), np.maximum(ids, 0)][has_mass]
    assert np.all((picked > 0) & np.isfinite(picked)), f"a no-mass token was drawn at V={vocab}"
    assert np.all(ids[kind == 0] == vocab - 1)
    assert np.all(sample_p.cpu().numpy()[ids < 0] == 0)
    assert np.array_equal(sample_p.cpu().numpy()[has_mass, 0], picked)


@pytest.mark.parametrize("vocab", [BLOCK - 1, BLOCK + 1, 2 * BLOCK + 1])
@pytest.mark.parametrize("tiles_per_chunk", [2, 1])
def test_logits_zero_mass_and_tail_lanes(device, vocab, tiles_per_chunk):
    """sample_from_logits at the same edges: -inf / NaN / +inf logits never win, the poisoned
    buffer past V is never read, a row whose only finite logit is the last one returns it, a row
    without a finite logit returns -1 and a zero probs_out row; T = 0 rows are greedy; T = inf rows'
    probs_out is uniform over the finite logits (-inf ones weigh nothing). 1 or 2 tiles per chunk:
    1, 2 or 3 chunks (3: a merge over fewer parts than its power-of-two block). Some rows hold one
    logit 200 above the others."""
    rng = np.random.default_rng(current_test_seed())
    batch = 2000  # 500 rows each at T = 1.3 and T = inf, 1000 greedy
    buf = np.full((batch, vocab + 5), 1e30, dtype=np.float32)
    l = rng.normal(size=(batch, vocab)).astype(np.float32)
    junk = rng.choice(np.array([-np.inf, np.nan, np.inf], dtype=np.float32), size=(batch, vocab))
    l = np.where(rng.random((batch, vocab)) < 0.5, junk, l)
    kind = np.arange(batch) % 3
    l[kind == 0] = -np.inf
    l[kind == 0, vocab - 1] = -3.0
    l[kind == 1] = np.nan
    # a logit 200 above the rest (T = 1.3 rows): 2^(200 log2(e) / T) overflows float32, so the chunks'
    # softmax sums must merge relative to the largest chunk maximum
    l[(kind == 2) & (np.arange(batch) % 8 == 5), 0] = 200.0
    buf[:, :vocab] = l
    logits = torch.from_numpy(buf).to(device)[:, :vocab]
    t = np.array([0.0, 1.3, 0.0, np.inf], dtype=np.float32)[np.arange(batch) % 4]
    temps = torch.from_numpy(t).to(device)
    seeds, offsets = _keys(rng, batch, device)
    probs_out = torch.full((batch, vocab), -7.0, device=device)
    tiling = _tiling(tiles_per_chunk)
    tokens = kg._sample_from_logits(logits, temps, seeds, offsets, probs_out, tiling=tiling).cpu().numpy()
    valid = np.isfinite(l)
    assert np.array_equal(tokens >= 0, valid.any(1))
    assert np.all(valid[np.flatnonzero(tokens >= 0), tokens[tokens >= 0]])
    assert np.all(tokens[kind == 0] == vocab - 1) and np.all(tokens[kind == 1] == -1)
    out = probs_out.cpu().numpy()
    assert np.all(out[~valid] == 0) and np.all(out[kind == 1] == 0)
    sums = out.sum(1)[valid.any(1)]
    assert np.allclose(sums, 1.0, atol=1e-5)
    uniform = (t == np.inf) & valid.any(1)  # T = inf: every finite logit weighs the same, -inf none
    expect = np.where(valid, 1.0 / np.maximum(valid.sum(1, keepdims=True), 1), 0.0)[uniform]
    assert uniform.sum() > batch // 8 and np.allclose(out[uniform], expect, rtol=1e-6, atol=0)
    greedy = (np.arange(batch) % 2 == 0) & valid.any(1)
    first_max = np.argmax(np.where(valid, l, -np.inf), axis=1)
    assert np.array_equal(tokens[greedy], first_max[greedy])


def test_greedy_ties_go_to_the_smallest_id(device):
    """T = 0: equal maximal logits in different tiles and chunks -> the smallest id wins; the same
    for renorm_draft_probs' one-hot. Also T = 0 from a float and from a tensor agree."""
    vocab = 3 * BLOCK + 5
    # lanes of four tokens, BLOCK / 4 per tile: (4, BLOCK + 4) and (BLOCK + 9, 2 BLOCK + 9) share a lane
    # and a word position (the later token compared with the lane's best at its own position)
    ties = [(5, BLOCK + 1), (BLOCK + 2, 2 * BLOCK + 3), (vocab - 2, vocab - 1), (0, vocab - 1),
            (4, BLOCK + 4), (BLOCK + 9, 2 * BLOCK + 9)]  # fmt: skip
    logits = torch.zeros((len(ties), vocab), device=device)
    for row, (a, b) in enumerate(ties):
        logits[row, a] = logits[row, b] = 9.0
    seeds = torch.zeros(len(ties), dtype=torch.int64, device=device)
    for tiling in (_tiling(1), _tiling(3), None):
        got = kg._sample_from_logits(logits, 0.0, seeds, seeds, None, tiling=tiling)
        assert got.tolist() == [a for a, _ in ties]
    temps = torch.zeros(len(ties), device=device)
    assert kg.sample_from_logits(logits, temps, seeds=seeds, offsets=seeds).tolist() == [a for a, _ in ties]
    hot = kg.renorm_draft_probs(logits, 0.0)
    assert hot.argmax(1).tolist() == [a for a, _ in ties] and torch.all(hot.sum(1) == 1)


# (a, b), a < b, with BLOCK = 64 (16 lanes of four tokens): the same lane and Philox block, words 0 / 1 and
# 2 / 3; the same lane one and two tiles later; other lanes of the same tile; another lane and tile
_TIE_PAIRS = [(0, 1), (6, 7), (5, BLOCK + 5), (9, 2 * BLOCK + 9), (8, 12), (3, 2 * BLOCK + 1),
              (BLOCK - 1, BLOCK)]  # fmt: skip


@pytest.mark.parametrize("tiles_per_chunk, screen", [(3, False), (3, True), (1, False), (1, True)])
def test_exact_ratio_ties_go_to_the_smallest_id(device, tiles_per_chunk, screen):
    """Two tokens whose ratios p / E tie exactly, as the kernel computes them: p_v = c E_v with the
    kernel's own float32 E_v (c = 2^-6, the race's prescale, so the cross-multiplied products
    p_b (c E_a) and p_a (c E_b) are the same two factors; lanes' scores log2(p) - log2(c E) - 6 are
    -6 exactly). Every other token has no mass. The smaller id wins whether the two share a lane
    (the running best's comparison), a tile, a chunk (3 tiles, screened or not) or only the merge
    (1 tile per chunk). top-3 with p_v = E_v (scores log2(p) - log2(E) = 0 exactly): [a, b, -1].
    The returned score (the winners' p / E) is c, resp. 1, exactly."""
    vocab = 3 * BLOCK
    rows = len(_TIE_PAIRS)
    seeds = np.arange(rows, dtype=np.int64) * 7919 + 11
    offsets = np.arange(rows, dtype=np.int64) + 3
    words = rp.token_words(seeds, offsets, vocab, rp.STREAM_GUMBEL)
    keys = torch.from_numpy(seeds).to(device), torch.from_numpy(offsets).to(device)
    a, b = np.array(_TIE_PAIRS).T
    r = np.arange(rows)
    for scale, n in ((0.015625, 1), (1.0, 3)):
        noise = kernel_noise(words, device, scale)
        p = np.zeros((rows, vocab), dtype=np.float32)
        p[r, a], p[r, b] = noise[r, a], noise[r, b]
        tiling = kg.RaceTiling(4096 if interpreting() else 1, BLOCK, tiles_per_chunk if n == 1 else 1, 1,
                               screen=screen)  # fmt: skip
        sample_p, ids, score = kg._fast_sample(
            torch.from_numpy(p).to(device), n, None, *keys, tiling=tiling, with_score=True
        )
        ids, score = ids.cpu().numpy(), score.cpu().numpy()
        assert ids[:, 0].tolist() == a.tolist(), f"n = {n}: a tie went to the larger id"
        assert np.array_equal(sample_p.cpu().numpy()[:, 0], p[r, a])
        assert np.all(score[:, :2] == scale), "the winners' p / E is the scale exactly"
        if n == 3:
            assert ids[:, 1].tolist() == b.tolist() and np.all(ids[:, 2] == -1) and np.all(score[:, 2] == 0)


@triton.jit
def _pick_in_group_kernel(probs_ptr, u_ptr, out_ptr, B, stride_b, V, R: tl.constexpr):
    # probs_ptr [B, >= V] fp32 (row stride stride_b); u_ptr [B] fp64; out_ptr [B] int64: the token
    # _pick_in_group draws in group 0 of each row
    rows = tl.arange(0, R)
    ok = rows < B
    u = tl.load(u_ptr + rows, mask=ok, other=0.0)
    token = kg._pick_in_group(probs_ptr, rows, ok, rows * 0, u, stride_b, 1, V, 256)
    tl.store(out_ptr + rows, token.to(tl.int64), mask=ok)


@pytest.mark.parametrize("vocab", [256, 200])
def test_in_group_draw_ties_and_rounding_guard(device, vocab):
    """The grouped race's draw inside its group (`_pick_in_group`, also the logits pick's `_cdf_pick`):
    the first token with C_v > u C_last and p_v > 0, or the last token with mass if rounding leaves
    none, as `reference.gumbel.inverse_cdf_in_group`. Integer weights summing to a power of two
    (every C_v and u C_last exact in float64) with zeros and junk (NaN, inf, -1: no mass); one
    group of 256 lanes, V = 256 or 200 (lanes past V poisoned with 1e30, masked). Uniforms: exact
    ties u C_last = C_v (strict: the next token with mass), u = 0 (the first token with mass),
    u = 1 (no C_v exceeds C_last: the guard's last token with mass, never a lane past V) and random
    52-bit ones."""
    rng = np.random.default_rng(current_test_seed())
    batch = 96
    w = rng.choice(np.array([0, 0, 1, 2, 3], dtype=np.float64), size=(batch, vocab))
    w[:, vocab - 1] = 0.0  # the last lane never has mass: the guard must find the last one that has
    total = w.sum(1)
    last = vocab - 2 - np.argmax(w[:, vocab - 2 :: -1] > 0, axis=1)
    w[np.arange(batch), last] += 2.0 ** np.ceil(np.log2(total + 1)) - total  # total: a power of two
    cdf = np.cumsum(w, axis=1)
    total = cdf[:, -1]
    kind = np.arange(batch) % 4
    u = rng.integers(0, 2**52, size=batch) / 2.0**52
    lane = np.array([rng.choice(np.flatnonzero(row[:-1] > 0)) for row in w])  # has mass, not the last
    u[kind == 0] = (cdf[np.arange(batch), lane] / total)[kind == 0]  # exact: total is a power of two
    u[kind == 1], u[kind == 2] = 0.0, 1.0
    assert np.all(u[kind == 0] * total[kind == 0] == cdf[np.arange(batch), lane][kind == 0])
    junk = rng.choice(np.array([np.nan, np.inf, -np.inf, -1.0]), size=(batch, vocab))
    p = np.where((w == 0) & (rng.random((batch, vocab)) < 0.3), junk, w).astype(np.float32)
    buf = np.full((batch, 256 + 8), 1e30, dtype=np.float32)
    buf[:, :vocab] = p
    expect, _ = rg.inverse_cdf_in_group(rg.group_blocks(rg.clean_probs(p), 0.0)[:, 0], u)
    # the rows do what they claim: ties move past their lane, u = 1 takes the guard
    assert np.all(expect[kind == 0] > lane[kind == 0]) and np.all(expect[kind == 2] == last[kind == 2])
    out = torch.empty(batch, dtype=torch.int64, device=device)
    probs = torch.from_numpy(buf).to(device)
    _pick_in_group_kernel[(1,)](probs, torch.from_numpy(u).to(device), out, batch, buf.shape[1], vocab, R=128)
    assert out.cpu().numpy().tolist() == expect.tolist()


def test_seeded_draws_are_deterministic_and_keyed(device):
    """Same (seed, offset) -> same tokens; a [1] seed broadcasts like a repeated [B] one; a different
    offset gives a different draw for most rows (uniform p over V = 1000: collision chance 1e-3
    per row, the assertion allows 5% of 500 rows)."""
    batch, vocab = 500, 1000
    p = torch.full((batch, vocab), 1.0 / vocab, device=device)
    seed = torch.tensor([1234], dtype=torch.int64, device=device)
    offset = torch.tensor([7], dtype=torch.int64, device=device)
    _, a = kg.fast_sample(p, seeds=seed, offsets=offset)
    _, b = kg.fast_sample(p, seeds=seed.expand(batch).contiguous(), offsets=offset.expand(batch).contiguous())
    assert torch.equal(a, b) and torch.all(a == a[0])  # same key, same row -> same token
    _, c = kg.fast_sample(
        p, seeds=seed.expand(batch).contiguous(), offsets=torch.arange(batch, device=device)
    )
    assert (c[1:] != c[0]).float().mean() > 0.95


def test_generator_path_draws_fresh_keys(device):
    """Without seeds: keys come from torch.randint on the device; the same generator state gives
    the same draws, and successive calls differ (uniform over V = 1000, 200 rows: >= 95% differ)."""
    batch, vocab = 200, 1000
    p = torch.full((batch, vocab), 1.0, device=device)
    gen = torch.Generator(device=device)
    gen.manual_seed(current_test_seed() % 2**62)
    state = gen.get_state()
    _, a = kg.fast_sample(p, generator=gen)
    _, b = kg.fast_sample(p, generator=gen)
    gen.set_state(state)
    _, a2 = kg.fast_sample(p, generator=gen)
    assert torch.equal(a, a2)
    assert (a != b).float().mean() >= 0.95
    _, d = kg.fast_sample(p)  # torch's default generator
    assert d.shape == (batch, 1) and d.min() >= 0


def test_empty_batch_and_shapes(device):
    p = torch.rand((0, 10), device=device)
    sample_p, ids = kg.fast_sample(p, 4)
    assert sample_p.shape == (0, 4) and ids.shape == (0, 4)
    seeds = torch.zeros(0, dtype=torch.int64, device=device)
    assert kg.sample_from_logits(p, 1.0, seeds=seeds, offsets=seeds).shape == (0,)
    assert kg.renorm_draft_probs(torch.rand((2, 0, 10), device=device), 1.0).shape == (2, 0, 10)
    sample_p, ids = kg.fast_sample(torch.ones((3, 2), device=device), 5)  # n > V: -1 padded
    assert (ids[:, 2:] == -1).all() and sorted(ids[0, :2].tolist()) == [0, 1]


def test_validation_names_the_argument(device):
    p = torch.rand((4, 10), device=device)
    s = torch.zeros(4, dtype=torch.int64, device=device)
    cases = [
        (lambda: kg.fast_sample(p[0]), ValueError, "probs"),
        (lambda: kg.fast_sample(p.double()), TypeError, "probs"),
        (lambda: kg.fast_sample(p, 0), ValueError, "num_samples"),
        (lambda: kg.fast_sample(p, kg.MAX_SAMPLES + 1), ValueError, "num_samples"),
        (lambda: kg.fast_sample(p, 1.0), TypeError, "num_samples"),
        (lambda: kg.fast_sample(p, seeds=s), ValueError, "offsets"),
        (lambda: kg.fast_sample(p, seeds=s.int(), offsets=s), TypeError, "seeds"),
        (lambda: kg.fast_sample(p, seeds=s[:3], offsets=s), ValueError, "seeds"),
        (lambda: kg.fast_sample(p, seeds=5, offsets=s), TypeError, "seeds"),
        (
            lambda: kg.fast_sample(p, generator=torch.Generator(device=device), seeds=s, offsets=s),
            ValueError,
            "generator",
        ),
        (lambda: kg.sample_from_logits(p, 1.0, seeds=None, offsets=None), ValueError, "seeds"),
        (
            lambda: kg.sample_from_logits(p, torch.ones(3, device=device), seeds=s, offsets=s),
            ValueError,
            "temperature",
        ),
        (
            lambda: kg.sample_from_logits(
                p, torch.ones(4, dtype=torch.int64, device=device), seeds=s, offsets=s
            ),
            TypeError,
            "temperature",
        ),
        (
            lambda: kg.sample_from_logits(
                p, 1.0, seeds=s, offsets=s, probs_out=torch.empty(4, 9, device=device)
            ),
            ValueError,
            "probs_out",
        ),
        (lambda: kg.renorm_draft_probs(p.int(), 1.0), TypeError, "draft_logits"),
        (
            lambda: kg.renorm_draft_probs(p.reshape(2, 2, 10), torch.ones(3, device=device)),
            ValueError,
            "temperature",
        ),
    ]
    for call, error, name in cases:
        with pytest.raises(error, match=name):
            call()
    if device == "cpu" and not interpreting():
        with pytest.raises(ValueError, match="probs"):
            kg.fast_sample(p)


def test_grouped_tiling_is_validated(device):
    """A grouped tiling must cut the row into whole groups of 256 (tiles of 256, 512 or 1024 tokens)
    or be one tile >= V per chunk; anything else is a ValueError naming block_v, before any launch."""
    p = torch.rand(3, 100, device=device)
    seeds = torch.arange(3, device=device)
    rows = 4 if interpreting() else 1
    ok = kg.RaceTiling(rows, 128, 1, 1, grouped=True)
    assert kg._fast_sample(p, 1, None, seeds, seeds, tiling=ok)[1].min() >= 0
    for bad in (kg.RaceTiling(rows, 128, 2, 1, grouped=True), kg.RaceTiling(rows, 2048, 1, 1, grouped=True)):
        with pytest.raises(ValueError, match="block_v"):
            kg._fast_sample(p, 1, None, seeds, seeds, tiling=bad)
    with pytest.raises(ValueError, match="block_v = 64"):
        kg._fast_sample(torch.rand(3, 300, device=device), 1, None, seeds, seeds,
                        tiling=kg.RaceTiling(rows, 64, 5, 1, grouped=True))  # fmt: skip
