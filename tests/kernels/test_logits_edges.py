"""Edge semantics of `rejection_sample_logits`: metadata validation, greedy rows (exact), mixed
greedy/sampled batches, invalid temperatures, rows without mass, +inf/NaN logits, the empty-residual
fallback, K = 0, B = 0 and stride-0 inputs. Every expectation here is deterministic."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.reference.logits import rejection_sample_logits_reference
from specsample.stats import current_test_seed
from specsample.verify.mutants import patched_module
from tests.kernels.test_logits_cases import (
    DEVICE,
    _to_device,
    make_batch,
    row_mismatch,
    run_both,
    sample_logits,
    subset,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

B, K, V = 4, 3, 11
_L = torch.zeros(B, K + 1, V)
_X = torch.zeros(B, K, dtype=torch.int64)
_T = torch.ones(B)
_S = torch.zeros(B, dtype=torch.int64)


def _call(**over):
    args = dict(target_logits=_L, draft_token_ids=_X, draft_logits=None, temperature=_T, seeds=_S, offsets=_S)
    args.update(over)
    return sample_logits(**args)


@pytest.mark.parametrize(
    "name,kind,over",
    [
        ("target_logits", TypeError, {"target_logits": _L.to(torch.int32)}),
        ("target_logits", ValueError, {"target_logits": _L[0]}),
        ("target_logits", TypeError, {"target_logits": _L.numpy()}),
        ("draft_token_ids", ValueError, {"draft_token_ids": _X[:, :2]}),
        ("draft_token_ids", TypeError, {"draft_token_ids": _X.float()}),
        ("draft_logits", ValueError, {"draft_logits": torch.zeros(B, K, V + 1)}),
        ("draft_logits", TypeError, {"draft_logits": torch.zeros(B, K, V, dtype=torch.float64)}),
        ("temperature", TypeError, {"temperature": _T.double()}),
        ("temperature", ValueError, {"temperature": torch.ones(B + 1)}),
        ("seeds", TypeError, {"seeds": _S.int()}),
        ("offsets", ValueError, {"offsets": torch.zeros(B, 1, dtype=torch.int64)}),
        ("num_draft_tokens", TypeError, {"num_draft_tokens": torch.ones(B)}),
        ("num_draft_tokens", ValueError, {"num_draft_tokens": torch.ones(B + 1, dtype=torch.int32)}),
    ],
)
def test_metadata_errors_name_the_argument(name, kind, over):
    with pytest.raises(kind, match=name):
        _call(**over)


def _greedy_expected(lg: np.ndarray, x: np.ndarray, n: np.ndarray):
    """Greedy semantics written out per row: accept x_i iff it is the first argmax of a row with a
    finite logit; emit the first argmax of row a (-1 if that row has none)."""
    batch, k_plus_1, vocab = lg.shape
    clean = np.where(np.isfinite(lg), lg, -np.inf)
    tokens = np.full((batch, k_plus_1), -1)
    accepted = np.zeros(batch, dtype=np.int64)
    for b in range(batch):
        a = 0
        while a < n[b]:
            row = clean[b, a]
            if not (np.isfinite(row).any() and 0 <= x[b, a] < vocab and x[b, a] == int(np.argmax(row))):
                break
            a += 1
        tokens[b, :a] = x[b, :a]
        row = clean[b, a]
        tokens[b, a] = int(np.argmax(row)) if np.isfinite(row).any() else -1
        accepted[b] = a
    return tokens, accepted


@pytest.mark.parametrize("chunked", [False, True], ids=["one-chunk", "chunks-of-8"])
def test_greedy_rows_exact(chunked):
    """T = 0 rows, integer logits in {0..3} (ties everywhere, also across chunk boundaries), NaN/inf
    holes, ragged counts, bad ids: tokens and counts equal the per-row greedy semantics exactly."""
    rng = np.random.default_rng(current_test_seed())
    batch, num_k, vocab = 600, 3, 37
    lg = rng.integers(0, 4, (batch, num_k + 1, vocab)).astype(np.float64)
    hole = rng.random(lg.shape) < 0.1
    lg[hole] = rng.choice([np.nan, np.inf, -np.inf], hole.sum())
    lg[rng.random((batch, num_k + 1)) < 0.05] = np.nan
    clean = np.where(np.isfinite(lg[:, :num_k]), lg[:, :num_k], -np.inf)
    x = np.where(
        rng.random((batch, num_k)) < 0.8, clean.argmax(-1), rng.integers(-1, vocab + 1, (batch, num_k))
    )
    n = rng.integers(0, num_k + 1, batch)
    config = {"stats_block": 4, "stats_tiles": 2, "race_block": 64, "race_tiles": 1} if chunked else None
    res = sample_logits(
        torch.tensor(lg, dtype=torch.float32), torch.tensor(x), temperature=torch.zeros(batch),
        seeds=torch.tensor(rng.integers(0, 2**62, batch)), offsets=torch.zeros(batch, dtype=torch.int64),
        num_draft_tokens=torch.tensor(n), _config=config,
    )  # fmt: skip
    tokens, accepted = _greedy_expected(lg, x, n)
    assert np.array_equal(res.num_accepted.numpy(), accepted)
    assert np.array_equal(res.tokens.numpy(), tokens)
    emitted_ok = tokens[np.arange(batch), accepted] >= 0
    assert np.array_equal(res.valid.numpy(), emitted_ok)
    assert not res.fallback.any()


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_mixed_greedy_and_sampled_batch(classic):
    """Greedy rows of a mixed batch are exact; sampled rows equal the same requests run without the
    greedy rows (bit for bit) and the float64 reference outside its ambiguity flags."""
    seed = current_test_seed()
    case = make_batch(seed, 1200, 3, 30, classic=classic, edges=False)
    temps = case["temperature"].numpy()
    kernel, ref = run_both(case)
    greedy = temps == 0
    lg = case["target_logits"].numpy()
    x = case["draft_token_ids"].numpy()
    n = np.clip(case["num_draft_tokens"].numpy(), 0, 3)
    tokens, accepted = _greedy_expected(lg, x, n)
    assert greedy.sum() > 100 and (~greedy).sum() > 100
    assert np.array_equal(kernel[0][greedy], tokens[greedy])
    assert np.array_equal(kernel[1][greedy], accepted[greedy])
    assert not np.any(row_mismatch(kernel, ref) & ~ref.ambiguous)
    alone = sample_logits(**subset(case, np.flatnonzero(~greedy)))
    assert np.array_equal(alone.tokens.numpy(), kernel[0][~greedy])
    assert np.array_equal(alone.num_accepted.numpy(), kernel[1][~greedy])


def test_invalid_temperatures_give_invalid_rows():
    """T < 0, NaN or inf: tokens all -1, num_accepted 0, valid False, fallback False."""
    temps = torch.tensor([-1.0, float("nan"), float("inf"), -0.0])
    res = _call(temperature=temps)
    assert np.array_equal(res.tokens[:3].numpy(), np.full((3, K + 1), -1))
    assert res.num_accepted[:3].tolist() == [0, 0, 0]
    assert res.valid.tolist() == [False, False, False, True]  # -0.0 == 0: greedy
    assert not res.fallback.any()


def test_rows_without_finite_logits_emit_minus_one():
    """A bonus row of NaN/+-inf emits -1 (valid False); a rejected row without mass emits -1 with
    fallback set (its residual and p are both empty); greedy rows likewise emit -1."""
    lg = torch.randn(4, 2, 6)
    lg[:, 1] = torch.tensor([float("nan"), float("inf"), -float("inf")] * 2)
    lg[2:, 0] = float("nan")
    x = torch.tensor([[7], [7], [0], [0]])  # rows 0-1: bad id -> reject at 0; rows 2-3: empty row 0
    temps = torch.tensor([1.0, 0.0, 1.0, 0.0])
    res = sample_logits(lg, x, temperature=temps, seeds=torch.arange(4), offsets=torch.zeros(4).long())
    assert res.num_accepted.tolist() == [0, 0, 0, 0]
    assert res.tokens[:, 0].tolist()[2:] == [-1, -1]
    assert res.valid.tolist() == [True, True, False, False]
    assert res.fallback.tolist() == [False, False, True, False]
    n0 = torch.zeros(4, dtype=torch.int32)  # no drafts: the bonus row 0 decides; rows 0-1 fine
    res = sample_logits(lg, x, temperature=temps, seeds=torch.arange(4),
                                  offsets=torch.zeros(4).long(), num_draft_tokens=n0)  # fmt: skip
    assert res.valid.tolist() == [True, True, False, False]
    lg[:, 0] = lg[:, 1]
    res = sample_logits(lg, x, temperature=temps, seeds=torch.arange(4),
                                  offsets=torch.zeros(4).long(), num_draft_tokens=n0)  # fmt: skip
    assert res.tokens[:, 0].tolist() == [-1] * 4 and not res.valid.any()


def test_plus_inf_logit_carries_no_mass():
    """+inf is treated as an invalid logit (like NaN): never emitted, never the greedy argmax, and a
    draft at that id is never accepted, over 2000 seeded requests at T = 1 and T = 0."""
    batch, vocab = 2000, 9
    lg = torch.randn(1, 2, vocab).expand(batch, 2, vocab).clone()
    lg[:, :, 4] = float("inf")
    x = torch.full((batch, 1), 4)
    temps = torch.where(torch.arange(batch) % 2 == 0, 1.0, 0.0)
    res = sample_logits(lg, x, temperature=temps, seeds=torch.arange(batch),
                                  offsets=torch.zeros(batch).long())  # fmt: skip
    assert not (res.num_accepted > 0).any()
    assert not (res.tokens == 4).any()
    assert res.valid.all()


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_statistics_read_nan_chunks_again_cleaned(classic):
    """The statistics passes read a chunk as loaded and again through _clean_logits only where its
    sum comes out NaN (kernels/logits.py `_any_nan`). 300 requests, K = 2, V = 300 with make_batch's
    NaN / +-inf logits and rows without a finite logit: the kernel couples with the reference on
    every row not flagged ambiguous, and a planted copy that never re-reads (its test always False)
    differs from the reference on some such row, so the coupling sees the re-read."""
    case = make_batch(current_test_seed(), 300, 2, 300, classic=classic, ragged=False)
    got, ref = run_both(case)
    assert not (row_mismatch(got, ref) & ~ref.ambiguous).any()
    never = patched_module("specsample.kernels.logits", [(r"return tl\.max\(bad, axis=0\) > 0",
                                                           "return tl.max(bad, axis=0) > 1")])  # fmt: skip
    res = never.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()})
    planted = tuple(t.cpu().numpy() for t in res)
    assert (row_mismatch(planted, ref) & ~ref.ambiguous).any(), "no cleaned re-read, and no row differs"


_STREAMED = {"race_screen": False}  # the unscreened race (every program reads its whole chunk of row j)
FALLBACK_RACES = {  # vocabulary, config: where the fallback's race over p runs
    # screened race (the interpreter's default): from the part statistics, in every race program
    "screened": (13, {}),
    "screened-3-chunks": (700, {"race_block": 256, "race_tiles": 1}),
    "screened-2-tiles": (700, {"race_block": 256, "race_tiles": 2}),
    # the target rows' statistics summed part by part (the screened race's bounds), the draft rows, equal to
    # them, by _chunk_stats: the fallback needs p - q to be 0, not rounding. Default tiling (GPU: 512-token
    # tiles of two parts; interpreter: one tile of 2048, eight parts), float32 and bf16 logits (the GPU's
    # stats loop for 16-bit logits prefetches), then 512-token tiles. (Runs 272-273, H100 and H200: every row
    # fell back, fp32 and bf16, as with the draft rows summed by parts, run 272's trial.)
    "screened-parts": (1500, {}),
    "screened-parts-bf16": (1500, {}, torch.bfloat16),
    "screened-2-parts-per-tile": (1500, {"stats_block": 512, "stats_tiles": 1}),
    # unscreened: beside the residual's, in every race program
    "race-programs": (13, {**_STREAMED, "race_p_in_merge": False}),
    # unscreened: in the last-arriving program, only for rows without r
    "merge": (13, {**_STREAMED, "race_p_in_merge": True}),
    # the merge's loop over row j: three 256-token tiles (the last partial), from three race chunks
    "merge-3-tiles": (700, {**_STREAMED, "race_p_in_merge": True, "race_block": 256, "race_tiles": 1}),
    "race-programs-3-chunks": (
        700,
        {**_STREAMED, "race_p_in_merge": False, "race_block": 256, "race_tiles": 1},
    ),
}


@pytest.mark.parametrize("where", sorted(FALLBACK_RACES))
def test_empty_residual_falls_back_to_p(where):
    """Classic drafts equal to the target logits and an out-of-range draft id: draft 0 is rejected,
    max(0, p - q) = 0 everywhere, so the token is raced over p (fallback True, valid True), exactly as
    the float64 reference (same Philox stream) says; over 3000 requests every token is a p-token.
    The race over p runs in every race program (from the part statistics when screened) or,
    unscreened, where the residual has no mass, in the merge."""
    vocab, config, dtype = (*FALLBACK_RACES[where], torch.float32)[:3]
    rng = np.random.default_rng(current_test_seed())
    batch = 3000
    lg = rng.normal(0, 2, (batch, 2, vocab))
    lg[:, :, 5] = -np.inf
    case = {
        "target_logits": torch.tensor(lg, dtype=dtype),
        "draft_token_ids": torch.full((batch, 1), vocab),
        "draft_logits": torch.tensor(lg[:, :1], dtype=dtype),
        "temperature": torch.full((batch,), 0.8),
        "seeds": torch.tensor(rng.integers(0, 2**62, batch)),
        "offsets": torch.tensor(rng.integers(0, 2**62, batch)),
    }
    kernel, ref = run_both(case, config=config)
    assert kernel[2].all() and kernel[3].all() and ref.fallback.all()
    assert np.array_equal(kernel[0], ref.tokens)
    assert not (kernel[0][:, 0] == 5).any()


def test_no_drafts_and_empty_batch():
    """K = 0 is plain sampling from p (equal to the reference); B = 0 returns empty outputs."""
    seed = current_test_seed()
    case = make_batch(seed, 500, 0, 17, classic=False, edges=False, ragged=False)
    kernel, ref = run_both(case)
    assert not np.any(row_mismatch(kernel, ref) & ~ref.ambiguous)
    assert (kernel[1] == 0).all()
    empty = _call(
        target_logits=_L[:0], draft_token_ids=_X[:0], temperature=_T[:0], seeds=_S[:0], offsets=_S[:0]
    )
    assert empty.tokens.shape == (0, K + 1) and empty.valid.shape == (0,)


def test_stride_zero_and_strided_inputs_are_read_in_place():
    """A stride-0 broadcast target, a transposed draft tensor and strided draft ids give the same
    outputs as contiguous copies of the same values."""
    rng = np.random.default_rng(current_test_seed())
    batch, num_k, vocab = 64, 2, 23
    f32 = dict(dtype=torch.float32, device=DEVICE)  # strided views made on the device itself
    lg = torch.tensor(rng.normal(0, 2, (1, num_k + 1, vocab)), **f32).expand(batch, -1, -1)
    dl = torch.tensor(rng.normal(0, 2, (num_k, batch, vocab)), **f32).transpose(0, 1)
    x = torch.tensor(rng.integers(0, vocab, (batch, 2 * num_k)), device=DEVICE)[:, ::2]
    assert lg.stride(0) == 0 and not dl.is_contiguous() and not x.is_contiguous()
    kw = dict(
        temperature=torch.full((batch,), 0.9), seeds=torch.arange(batch), offsets=torch.ones(batch).long()
    )
    strided = sample_logits(lg, x, dl, **kw)
    dense = sample_logits(lg.contiguous(), x.contiguous(), dl.contiguous(), **kw)
    for a, b in zip(strided, dense, strict=True):
        assert torch.equal(a, b)
    ref = rejection_sample_logits_reference(lg, x, dl, **kw)
    assert np.array_equal(strided.tokens.numpy()[~ref.ambiguous], ref.tokens[~ref.ambiguous])


def test_extreme_temperatures_follow_reference():
    """T in {1e-30, 1e-6, 1e6, 1e38} (sampled; T is clamped to [2^-126, 2^100] in both) on 800 requests
    with small-integer logits (exact ties): the kernel equals the float64 reference outside its
    ambiguity flags. Tiny T makes p the uniform law over the tied maxima, huge T the uniform law
    over the finite logits."""
    seed = current_test_seed()
    case = make_batch(seed, 800, 2, 19, classic=True)
    rng = np.random.default_rng(seed)
    case["target_logits"] = torch.tensor(rng.integers(-3, 3, (800, 3, 19)), dtype=torch.float32)
    case["draft_logits"] = torch.tensor(rng.integers(-3, 3, (800, 2, 19)), dtype=torch.float32)
    case["temperature"] = torch.tensor(rng.choice([1e-30, 1e-6, 1e6, 1e38], 800), dtype=torch.float32)
    kernel, ref = run_both(case)
    assert not np.any(row_mismatch(kernel, ref) & ~ref.ambiguous)
    assert kernel[3].all()


@pytest.mark.parametrize("classic", [True, False])
def test_zero_uniform_rejects_a_draft_of_negligible_ratio(classic):
    """Acceptance compares the uniform's cell midpoint u + 2^-25 (docs/semantics.md): with u_0 = 0
    exactly (seed 32188800, offset 0: checked below) a draft whose p(x) / q(x) is ~1e-18 is rejected.
    Comparing u itself accepts it (0 < p / q), a bias of 2^-24 towards negligible events."""
    from specsample.reference.philox import STREAM_LOGITS_UNIFORM, chain_uniforms

    seeds, offsets = torch.tensor([32188800]), torch.tensor([0])
    assert chain_uniforms(seeds.numpy(), offsets.numpy(), 1, stream=STREAM_LOGITS_UNIFORM)[0, 0] == 0.0
    lg = torch.tensor([[[0.0, 0.0, 0.0, -40.0], [0.0, 0.0, 0.0, 0.0]]])  # p(3) = e^-40 / 3 ~ 1.4e-18
    dl = torch.zeros(1, 1, 4) if classic else None  # q(3) = 1/4
    args = dict(target_logits=lg, draft_token_ids=torch.tensor([[3]]), draft_logits=dl,
                temperature=torch.ones(1), seeds=seeds, offsets=offsets)  # fmt: skip
    out = sample_logits(**args)
    ref = rejection_sample_logits_reference(**{k: (v.numpy() if isinstance(v, torch.Tensor) else v)
                                               for k, v in args.items()})  # fmt: skip
    assert out.num_accepted.tolist() == [0] and ref.num_accepted.tolist() == [0]
    assert out.tokens[0, 0].item() != 3
