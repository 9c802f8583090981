"""The screened classic race (`race_screen`, kernels/logits.py `_screened_race`) changes no output.

A race program reads a tile of row j only where one of its groups has a bound log P_g - log E_g
(from the stats pass's part statistics, + slack) that reaches the best residual score read so far.
A skipped group's residual score is below that best, so it cannot win: on every row whose token
comes from the residual race (sampled, rejected, not the fallback) the screened kernel's output
must equal the streamed kernel's (`race_screen=False`, which reads the whole row) bit for bit,
ambiguous rows included. Rows raced over p (bonus rows, the fallback) take log P_g from the part
statistics instead of a re-read, so there the two may differ only where the float64 reference flags
the row ambiguous; both must couple with the reference.

These are exact comparisons, not statistical ones. The race programs here hold 4 or 16 tiles of 256
tokens (V = 4096, 16 groups), so that most tiles of most rows are skipped; with one tile per
program (the interpreter's default chunking) nothing can be skipped.

The threshold that tiles must reach comes from the accept kernel (race_tau "accept", which needs the accept
kernel: classic_tail off) or from what the request's other race programs have read (race_tau "shared", the
default with the classic tail), which needs more than one race program per row (the 4-tile chunks: four per
row), and under the interpreter, which runs them one after another, every program but the first screens
with what the earlier ones published.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import specsample.kernels.logits as kl
from specsample.kernels._arrivals import discard_arrival_counters
from specsample.kernels._stream_buffers import stream_buffer
from specsample.kernels.result import SampleResult
from specsample.stats import current_test_seed
from specsample.verify.mutants import patched_module
from tests.kernels.test_logits_cases import (
    DEVICE,
    _to_device,
    make_batch,
    row_mismatch,
    run_both,
    sample_logits,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

VOCAB = 4096
BATCH = 600
# explicit: the GPU's default screens only programs of >= 8 tiles; the accept kernel's threshold (no classic
# tail) but in "4-tiles-shared"
_ON = {"race_screen": True, "classic_tail": False}
SCREENED = {  # race programs of 16 tiles (the whole row) or 4, over 256-token tiles (one group each)
    "16-tiles": {**_ON, "stats_block": 256, "stats_tiles": 2, "race_block": 256, "race_tiles": 16},
    "4-tiles": {**_ON, "stats_block": 256, "stats_tiles": 2, "race_block": 256, "race_tiles": 4},
    # 512-token tiles (two groups each, as on the GPU) and 64-column stats parts (4 per group)
    "2-groups-per-tile": {**_ON, "stats_block": 64, "stats_tiles": 4, "race_block": 512, "race_tiles": 8},
}
_FOUR_TILES = SCREENED["4-tiles"]
SCREENED["4-tiles-shared"] = {**_FOUR_TILES, "classic_tail": True}  # the default: the tail, shared threshold
# race_tau "seeded": the tail's emitter seeds the shared threshold; with 16-tile programs (one per row) the
# seed is all a program screens its first tile with
SCREENED["4-tiles-seeded"] = {**SCREENED["4-tiles-shared"], "race_tau": "seeded"}
SCREENED["16-tiles-seeded"] = {**SCREENED["16-tiles"], "classic_tail": True, "race_tau": "seeded"}
# race_tau_lazy and race_noise_once are the defaults (the lead tile's best published without waiting, the word
# read only where a later tile could pass; a read tile's noise from the bounds', slots [t, k] with k = 0, 1 on
# 2-group tiles); these keep their alternatives (the atomic's old value, the noise drawn again) tested
SCREENED["4-tiles-shared-atomic"] = {
    **SCREENED["4-tiles-shared"],
    "race_tau_lazy": False,
    "race_noise_once": False,
}
SCREENED["2-groups-noise-drawn"] = {**SCREENED["2-groups-per-tile"], "race_noise_once": False}


def _streamed(case: dict, config: dict) -> SampleResult:
    """The unscreened race's result (numpy fields) on the case: row_mismatch's right-hand side."""
    return SampleResult(*(t.numpy() for t in sample_logits(**case, _config={**config, "race_screen": False})))


def _assert_screens(config: dict) -> None:
    """The config runs the screened race on this device (else screened == streamed says nothing:
    H200 run 133 found these configs unscreened on the GPU, the default rule having read the default
    tiling instead of the overridden one; run 134 found the 4-tile one unscreened by the rule itself)."""
    assert kl.launch_config(BATCH, 3, VOCAB, config)["race_screen"], f"{config} does not screen here"


def _residual_rows(case: dict, result) -> np.ndarray:
    """[B] bool: requests whose emitted token comes from the residual race (sampled temperature,
    a rejected draft, not the fallback)."""
    temps = case["temperature"].float().numpy()
    num_k = case["draft_token_ids"].shape[1]
    n = case.get("num_draft_tokens")
    n = np.full(len(temps), num_k) if n is None else np.clip(n.numpy(), 0, num_k)
    sampled = (temps > 0) & np.isfinite(temps)
    _, accepted, fallback, _ = result
    return sampled & (accepted < n) & ~fallback


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("chunking", sorted(SCREENED))
def test_screened_race_equals_streamed_race(chunking, dtype):
    """n = 600 requests, K = 2, V = 4096, the edge cases of make_batch (NaN / inf logits, empty rows,
    p == q drafts, invalid temperatures and ids; every request uses both drafts, so that ~25% of
    the rows are residual-race rows). Asserts: screened == streamed on every residual-race row
    (exactly) and on every row the reference does not flag ambiguous; the screened kernel equals the
    float64 reference outside ambiguous rows; at least 60 residual-race rows (else the exact
    comparison would say little)."""
    config = SCREENED[chunking]
    _assert_screens(config)
    case = make_batch(current_test_seed(), BATCH, 2, VOCAB, classic=True, dtype=dtype, ragged=False)
    screened, ref = run_both(case, config=config)
    streamed = _streamed(case, config)
    differ = row_mismatch(screened, streamed)
    residual = _residual_rows(case, streamed)
    assert residual.sum() >= BATCH // 10, f"only {residual.sum()} residual rows: the case tests little"
    bad = np.flatnonzero(differ & (residual | ~ref.ambiguous))
    assert bad.size == 0, (
        f"screening changed {bad.size} rows ({int((differ & residual).sum())} residual-race rows): "
        f"first {bad[:5]}, screened {screened[0][bad[:3]]} vs streamed {streamed[0][bad[:3]]}"
    )
    unexplained = np.flatnonzero(row_mismatch(screened, ref) & ~ref.ambiguous)
    assert unexplained.size == 0, f"screened kernel differs from the reference on {unexplained[:5]}"


OVERTIGHT = {  # planted bugs: screens that skip groups which could still win
    # every bound 2 nats low
    "bound-low": (
        r"_SCREEN_SLACK: tl\.constexpr = tl\.constexpr\(2\.0\*\*-10\)",
        "_SCREEN_SLACK: tl.constexpr = tl.constexpr(-2.0)",
    ),
    # the accept kernel's threshold 2 nats above the score its groups attain
    "threshold-high": (
        r"tau = tl\.maximum\(tau, tl\.max\(score, axis=1\)\)",
        "tau = tl.maximum(tau, tl.max(score, axis=1) + 2.0)",
    ),
    # race_tau "shared" without race_tau_lazy: every race program publishes a score 2 nats above its best
    "shared-high": (
        r"tl\.atomic_max\(tau_word, _tau_key\(best\)",
        "tl.atomic_max(tau_word, _tau_key(best + 2.0)",
    ),
    # race_tau_lazy: every race program publishes a score 2 nats above its best
    "lazy-shared-high": (r"key = _tau_key\(best\)", "key = _tau_key(best + 2.0)"),
    # race_noise_once: a read tile's noise taken from the next tile's slots
    "noise-wrong-slot": (
        r"tl\.where\(tile_ids\[:, :, None\] == t, log_e_tiles",
        "tl.where(tile_ids[:, :, None] == (t + 1) % TILES_P2, log_e_tiles",
    ),
    # race_tau "seeded": the emitter's seed 2 nats above the argmax group's score
    "seed-high": (
        r"_tau_key\(score\), mask=use_q & \(score > _NEG_INF\)",
        "_tau_key(score + 2.0), mask=use_q & (score > _NEG_INF)",
    ),
}
_OVERTIGHT_CONFIG = {
    "bound-low": "16-tiles",
    "threshold-high": "16-tiles",
    "shared-high": "4-tiles-shared-atomic",
    "seed-high": "16-tiles-seeded",
    "lazy-shared-high": "4-tiles-shared",
    "noise-wrong-slot": "2-groups-per-tile",
}


@pytest.mark.parametrize("bug", sorted(OVERTIGHT))
def test_an_overtight_screen_fails_the_comparison(bug):
    """The comparison above can fail: a copy of the kernel module whose screen skips groups that
    could still win (every bound 2 nats low, or the accept kernel's threshold 2 nats high, or a published
    score 2 nats high) or whose race_noise_once takes a read tile's noise from the next tile's slots, must
    differ from the streamed race on some residual-race rows of the same kind of batch (16-tile programs,
    fp32; 4-tile programs for the shared threshold, which needs several programs per row)."""
    overtight = patched_module("specsample.kernels.logits", [OVERTIGHT[bug]])
    config = SCREENED[_OVERTIGHT_CONFIG[bug]]
    _assert_screens(config)
    case = make_batch(current_test_seed(), BATCH, 2, VOCAB, classic=True, ragged=False)
    res = overtight.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()}, _config=config)
    planted = tuple(t.cpu().numpy() for t in res)
    streamed = _streamed(case, config)
    residual = _residual_rows(case, streamed)
    assert np.any(row_mismatch(planted, streamed) & residual), "an over-tight screen went unnoticed"


# race_tau "shared": the last race program of a request block leaves the words set (the next call would
# screen with this call's scores)
_TAU_KEPT = (
    r'tl\.atomic_xchg\(tau_word, 0, mask=req_ok, sem="relaxed"\)',
    'tl.atomic_xchg(tau_word, 0, mask=req_ok & False, sem="relaxed")',
)


@pytest.mark.parametrize(
    "planted, chunking",
    [
        (False, "4-tiles-shared"),
        (False, "16-tiles-seeded"),
        (False, "4-tiles-shared-atomic"),
        (True, "4-tiles-shared"),
    ],
    ids=["kernel", "kernel-seeded", "kernel-atomic-tau", "tau-kept"],
)
def test_shared_tau_words_are_zero_after_a_call(planted, chunking):
    """race_tau "shared" and "seeded": after a call every request's word is 0 again ("nothing read yet"),
    as the next call needs it: a word left at this call's score would screen the next call's rows with it
    (outputs wrong wherever its winner scores lower). The copy whose last program leaves the words must fail
    it, with some residual-race row's word set."""
    module = patched_module("specsample.kernels.logits", [_TAU_KEPT]) if planted else kl
    case = make_batch(current_test_seed(), BATCH, 2, VOCAB, classic=True, ragged=False)
    words = stream_buffer(torch.device(DEVICE), "logits_race_tau", BATCH * kl.TAU_WORDS, torch.int64,
                          zeroed=True)  # fmt: skip
    try:
        res = module.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()},
                                             _config=SCREENED[chunking])  # fmt: skip
        kept = words[: BATCH * kl.TAU_WORDS].view(BATCH, kl.TAU_WORDS).cpu().numpy()
    finally:
        discard_arrival_counters()
    residual = _residual_rows(case, SampleResult(*(t.cpu().numpy() for t in res)))
    assert not kept[:, 1:].any(), "only word 0 of each request's line is used"
    if planted:
        assert kept[residual, 0].any(), "the planted copy left no word set: the check would say nothing"
    else:
        assert not kept.any(), f"words left after the call: requests {np.flatnonzero(kept[:, 0])[:5]}"


@triton.jit
def _tau_keys_kernel(score_ptr, key_ptr, back_ptr, N: tl.constexpr):
    """key_ptr [N] <- _tau_key(score), back_ptr [2N] <- _tau_score(key), _tau_score(0)."""
    at = tl.arange(0, N)
    key = kl._tau_key(tl.load(score_ptr + at))
    tl.store(key_ptr + at, key)
    tl.store(back_ptr + at, kl._tau_score(key))
    tl.store(back_ptr + N + at, kl._tau_score(key * 0))


def test_tau_keys_order_as_the_scores():
    """_tau_key maps float32 scores to int64 keys > 0 in the same order (so an atomic max on keys keeps the
    largest score) and _tau_score maps them back exactly; key 0 reads as -inf. Scores: -inf, +-0,
    subnormals, +-1, +-FLT_MAX and 2,039 random floats of every sign and exponent (none of them 0)."""
    rng = np.random.default_rng(current_test_seed())
    special = np.array(
        [-np.inf, -0.0, 0.0, 1e-45, -1e-45, 1.0, -1.0, 3.4028235e38, -3.4028235e38], np.float32
    )
    random = (rng.choice([-1, 1], 2039) * 2.0 ** rng.uniform(-148, 127, 2039)).astype(np.float32)
    scores = np.concatenate([special, random])
    score = torch.from_numpy(scores).to(DEVICE)
    key = torch.empty(2048, dtype=torch.int64, device=DEVICE)
    back = torch.empty(4096, dtype=torch.float32, device=DEVICE)
    _tau_keys_kernel[(1,)](score, key, back, N=2048)
    key, back = key.cpu().numpy(), back.cpu().numpy()
    assert (key > 0).all(), "a key at or below 0 would read as 'nothing published'"
    order = np.argsort(scores, kind="stable")
    assert (np.diff(key[order]) >= 0).all(), "keys out of the scores' order"
    assert (np.diff(key[order])[np.diff(scores[order]) > 0] > 0).all(), "distinct scores with equal keys"
    assert np.array_equal(back[:2048].view(np.int32), scores.view(np.int32)), (
        "scores not recovered bit for bit"
    )
    assert np.isneginf(back[2048:]).all(), "key 0 must read as -inf"


def test_race_tau_must_be_known():
    """An unknown race_tau is a ValueError naming the key, before any launch. Its default is "shared" where
    the classic tail applies (which leaves no accept kernel to compute the threshold) and "accept" where
    it does not (classic_tail off, or K+1 > 16); an explicit "accept" where the tail applies is a
    ValueError naming classic_tail; "seeded" needs the classic tail, whose emitters seed the threshold."""
    with pytest.raises(ValueError, match="race_tau"):
        kl.launch_config(4, 3, 700, {"race_tau": "accept-kernel"})
    assert kl.launch_config(4, 3, 700)["race_tau"] == "shared"
    assert kl.launch_config(4, 3, 700, {"classic_tail": False})["race_tau"] == "accept"
    assert kl.launch_config(4, 17, 700)["race_tau"] == "accept"
    assert kl.launch_config(4, 3, 700, {"classic_tail": False, "race_tau": "shared"})["race_tau"] == "shared"
    with pytest.raises(ValueError, match="classic_tail"):
        kl.launch_config(4, 3, 700, {"race_tau": "accept"})
    assert kl.launch_config(4, 3, 700, {"race_tau": "seeded"})["race_tau"] == "seeded"
    for no_tail in ({"classic_tail": False}, {"stats_tail": False}, {"stats_lazy": False}):
        with pytest.raises(ValueError, match="seeded"):  # no emitter to seed it
            kl.launch_config(4, 3, 700, {**no_tail, "race_tau": "seeded"})
    with pytest.raises(ValueError, match="seeded"):  # K+1 > 16: no tail
        kl.launch_config(4, 17, 700, {"race_tau": "seeded"})
