"""Coupling: `rejection_sample_logits` equals the float64 reference on the same Philox stream.

Tolerance. The reference flags a row ambiguous when a decision is within relative tol = 1e-4 of
flipping (reference/logits.py docstring). The kernel's float32 error on the compared quantities is far
below that for these inputs: log p_v = (l_v - M) / T - log S carries ~|l_v - M| / T * 2^-23 <= 1e-5
absolute error (|l - M| <= 40 and T >= 0.35 here), the Exp(1) noise ~1e-7, and the residual
log(p - q) adds the cancellation factor (p + q) / r that the reference's race tolerance includes.
So: rows the reference does not flag must match exactly, and the Clopper-Pearson certificate counts
every mismatching row, flagged or not: TV(kernel, reference) <= P(row differs).
"""

from __future__ import annotations

import numpy as np
import pytest

from specsample.kernels import logits as kl
from specsample.stats import current_test_seed, tv_ucb_from_coupling
from tests.kernels.test_logits_cases import make_batch, row_mismatch, run_both

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

N_ROWS = 6_000
DELTA = 1e-6
TV_EPS = 4e-3  # zero mismatches give CP 2.3e-3 at n = 6000; the assertion fails from 5 mismatches


@pytest.mark.parametrize(
    "classic,dtype,vocab",
    [(False, "fp32", 40), (True, "fp32", 40), (False, "bf16", 40), (True, "fp16", 40),
     (True, "fp32", 700), (False, "bf16", 700)],
    ids=str,
)  # fmt: skip
def test_coupling_with_float64_reference(classic, dtype, vocab):
    """n = 6000 requests, K = 3, V = 40 (one group of the residual draw) and 700 (three groups, the
    draw's group race decides), temperatures {0, 0.35, 1, 2.5} mixed with invalid ones, ragged
    counts, NaN/inf logits, empty rows, bad draft ids, p == q drafts. Asserts: no mismatch outside
    reference-ambiguous rows; TV(kernel, reference) <= 4e-3 at confidence 1 - 1e-6 (Clopper-Pearson,
    every mismatch counted); emitted ids in [0, V) or -1, never a token with a non-finite logit."""
    seed = current_test_seed()
    case = make_batch(seed, N_ROWS, 3, vocab, classic=classic, dtype=dtype)
    kernel, ref = run_both(case)
    differ = row_mismatch(kernel, ref)
    unexplained = np.flatnonzero(differ & ~ref.ambiguous)
    assert unexplained.size == 0, (
        f"{unexplained.size} rows differ outside the reference's ambiguity flags (seed {seed}); "
        f"first {unexplained[:5]}: kernel {kernel[0][unexplained[:3]]} "
        f"vs reference {ref.tokens[unexplained[:3]]}"
    )
    cert = tv_ucb_from_coupling(int(differ.sum()), N_ROWS, DELTA, seed=seed,
                                label=f"logits {'classic' if classic else 'one-hot'} {dtype}")  # fmt: skip
    assert cert.tv_bound <= TV_EPS, f"{cert.what}: {int(differ.sum())}/{N_ROWS} rows differ (seed {seed})"

    tokens, accepted = kernel[0], kernel[1]
    assert np.all((tokens >= -1) & (tokens < vocab))
    lg = case["target_logits"].float().numpy()
    rows = np.arange(N_ROWS)
    emitted = tokens[rows, accepted]
    shown = emitted >= 0
    assert np.all(np.isfinite(lg[rows[shown], accepted[shown], emitted[shown]])), "emitted a zero-mass token"


_SMALL_STATS = {"stats_block": 16, "stats_tiles": 2}
CHUNKINGS = {
    "classic-race-1-group": (True, {**_SMALL_STATS, "race_block": 256, "race_tiles": 1}),
    "classic-race-2-groups": (True, {**_SMALL_STATS, "race_block": 256, "race_tiles": 2}),
    # the unscreened race: every race program reads its whole chunk (2 groups) of row j
    "classic-streamed-2-groups": (
        True,
        {**_SMALL_STATS, "race_block": 256, "race_tiles": 2, "race_screen": False},
    ),
    # unscreened, the race over p (the fallback's) left to the merge, over race chunks of one group
    "classic-p-in-merge": (
        True,
        {**_SMALL_STATS, "race_block": 256, "race_tiles": 1, "race_p_in_merge": True, "race_screen": False},
    ),
    # one-hot drafts: the pick combines 16 parts of 16 tokens per group (each part's sum against its
    # own chunk's running max), or reads one part per group with one group per stats chunk
    "one-hot-16-parts": (False, dict(_SMALL_STATS)),
    "one-hot-1-part": (False, {"stats_block": 256, "stats_tiles": 1}),
    # the pick's race over slabs of 1 group (3 steps) or of 2 groups of 16 parts (a full slab, then a
    # partial one): the best group carried across slabs, each slab's group ids offset by its start
    "one-hot-slabs-of-1": (False, {"stats_block": 256, "stats_tiles": 1, "pick_slab_parts": 1}),
    "one-hot-slabs-of-2": (False, {**_SMALL_STATS, "pick_slab_parts": 32}),
    # 175 phase-1 chunks of 4 columns: the accept kernel combines them in 3 loads of <= 64 chunks
    "classic-175-chunks": (True, {"stats_block": 4, "stats_tiles": 1}),
    # the stats pass with tile t + 1 loaded before tile t's arithmetic, three tiles per chunk (the
    # first load, a loop step, the last tile after the loop)
    "classic-prefetch": (True, {"stats_block": 16, "stats_tiles": 3, "stats_prefetch": True}),
    "one-hot-prefetch": (False, {"stats_block": 16, "stats_tiles": 3, "stats_prefetch": True}),
}


@pytest.mark.parametrize("chunking", sorted(CHUNKINGS))
def test_chunking_leaves_tokens_unchanged(chunking):
    """Tile and chunk sizes (phase-1 chunks of 2 x 16 or 4 columns, race chunks of 1 or 2 groups of
    256, vs one chunk per row; one-hot: the pick's groups from 16 parts or from 1, in slabs of 1, 2
    or all 3 groups) change no output outside reference-ambiguous rows: the draw's noise is keyed
    by group id only, chunk (and slab) winners combine in group order and part statistics combine
    to the group's mass. n = 1500 requests, K = 2, V = 700 (three groups, the last partial), all
    edge cases on."""
    classic, small = CHUNKINGS[chunking]
    seed = current_test_seed()
    case = make_batch(seed, 1500, 2, 700, classic=classic)
    whole, ref = run_both(case)
    chunked, _ = run_both(case, config=small)
    differ = row_mismatch(chunked, ref) | row_mismatch(whole, ref)
    assert not np.any(differ & ~ref.ambiguous), f"chunking changed tokens on {np.flatnonzero(differ)[:5]}"
    assert np.array_equal(whole[0][~ref.ambiguous], chunked[0][~ref.ambiguous])


UNMASKED = {  # requests, stats config: 256-column chunks at V = 700, so chunks 0 and 1 lie inside the row
    # one-hot drafts: many rows per program, every one needed
    "one-hot": (600, {"stats_block": 256, "stats_tiles": 1}),
    # classic drafts: one row per program (as on the GPU), so a sampled request's draft rows, which
    # have programs of their own, take the unmasked path too, and a bonus row's draft is skipped;
    # two tiles per chunk, so both paths rescale the running sum
    "classic": (120, {"stats_block": 128, "stats_tiles": 2, "stats_rows": 1}),
    # the same with tile t + 1 loaded before tile t's arithmetic (128-column parts for one-hot drafts)
    "one-hot-prefetch": (600, {"stats_block": 128, "stats_tiles": 2, "stats_prefetch": True}),
    "classic-prefetch": (
        120,
        {"stats_block": 128, "stats_tiles": 2, "stats_rows": 1, "stats_prefetch": True},
    ),
}


@pytest.mark.parametrize("mode", sorted(UNMASKED))
def test_unmasked_stats_chunks_couple(mode):
    """Every row needed (no edge cases, no ragged counts), 256-column stats chunks at V = 700:
    chunks 0 and 1 take the stats pass's unmasked loads, chunk 2 (the row's tail) the masked ones;
    outputs equal the float64 reference outside ambiguous rows (K = 2; 600 one-hot requests, 120
    classic ones at one row per program). Fails when the unmasked path stores no part statistics
    (one-hot), drops a tile or skips the running sum's rescale (classic)."""
    batch, config = UNMASKED[mode]
    case = make_batch(
        current_test_seed(), batch, 2, 700, classic=mode == "classic", edges=False, ragged=False
    )
    got, ref = run_both(case, config=config)
    differ = row_mismatch(got, ref)
    assert not np.any(differ & ~ref.ambiguous), f"unexplained mismatches on {np.flatnonzero(differ)[:5]}"


@pytest.mark.parametrize("vocab", [1, 2, 3, 7, 255, 256, 257, 700, 151936])
def test_gpu_default_config_is_valid(monkeypatch, vocab):
    """The GPU branch of launch_config (not run by the interpreter) gives a valid config at every
    vocabulary size, short rows included: H200 run 44's corpus hit race_block = 1 at V = 1."""
    monkeypatch.setattr(kl, "interpreting", lambda: False)
    cfg = kl.launch_config(3, 4, vocab)
    assert cfg["race_block"] >= 4 and cfg["race_block"] & (cfg["race_block"] - 1) == 0
    assert cfg["race_block"] % 256 == 0 or (cfg["race_block"] >= vocab and cfg["race_tiles"] == 1)
    assert cfg["stats_block"] >= 4 and cfg["stats_block"] & (cfg["stats_block"] - 1) == 0
    assert 1 <= cfg["stats_tiles"] and (cfg["stats_tiles"] - 1) * cfg["stats_block"] < vocab
    # both draft kinds: one-warp stats programs over 512-column tiles, 8 per chunk (H200 runs 48, 54)
    big = kl.launch_config(64, 5, 151936)
    assert (big["stats_block"], big["stats_tiles"], big["stats_warps"]) == (512, 8, 1)
    # 16-bit logits (H200 runs 68-69): the stats pass loads a tile ahead, the race over p runs in the
    # merge; 32-bit logits keep both off (measured within the noise or slower there)
    half = kl.launch_config(64, 5, 151936, logit_bytes=2)
    assert half["stats_prefetch"] and half["race_p_in_merge"]
    assert not big["stats_prefetch"] and not big["race_p_in_merge"]
    # the screened race where race programs hold >= 8 tiles (H200 runs 126-131 measured 8 and 16),
    # the full race for smaller batches (unmeasured)
    assert big["race_tiles"] == 8 and big["race_screen"] and half["race_screen"]
    assert kl.launch_config(128, 9, 128256)["race_screen"]
    assert not kl.launch_config(16, 5, 151936)["race_screen"] and not cfg["race_screen"]
    # the rule reads the race_tiles in effect, overrides included (before session 20 it read the
    # default tiling, so tests/kernels/test_logits_screen.py's 16-tile configs ran unscreened on the GPU)
    assert kl.launch_config(3, 4, 4096, {"race_block": 256, "race_tiles": 16})["race_screen"]
    assert not kl.launch_config(64, 5, 151936, {"race_tiles": 4})["race_screen"]
    assert not kl.launch_config(3, 4, 4096, {"race_tiles": 16, "race_screen": False})["race_screen"]


def test_race_block_must_hold_whole_groups():
    """A race tile narrower than a 256-token group is accepted only when one tile covers the row
    (groups never straddle chunks); anything else is a ValueError before launch. So is a pick slab
    (`pick_slab_parts`) that is not a power of two."""
    assert kl.launch_config(4, 3, 37, {"race_block": 64, "race_tiles": 1})["race_block"] == 64
    for bad in ({"race_block": 32, "race_tiles": 1}, {"race_block": 64, "race_tiles": 2}):
        with pytest.raises(ValueError, match="256-token group"):
            kl.launch_config(4, 3, 37 if bad["race_block"] == 32 else 60, bad)
    with pytest.raises(ValueError, match="256-token group"):
        kl.launch_config(4, 3, 700, {"race_block": 128, "race_tiles": 8})
    for bad in (0, 3, 48):  # the pick's slab of groups is an arange: a power of two
        with pytest.raises(ValueError, match="pick_slab_parts"):
            kl.launch_config(4, 3, 700, {"pick_slab_parts": bad})


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
def test_fast_log_race_couples_with_reference(classic):
    """The opt-in fast_log race (approximate division in log E; on a GPU also the hardware log2,
    which the interpreter does not have) keeps every output equal to the
    float64 reference outside its ambiguous rows. n = 1500 requests, K = 2, V = 100."""
    seed = current_test_seed()
    case = make_batch(seed, 1500, 2, 100, classic=classic)
    got, ref = run_both(case, config={"fast_log": True})
    differ = row_mismatch(got, ref)
    assert not np.any(differ & ~ref.ambiguous), f"fast_log changed tokens on {np.flatnonzero(differ)[:5]}"
