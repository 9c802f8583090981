"""The lazy statistics pass (`stats_lazy`, kernels/logits.py `_stats_block`) changes no output.

With `stats_lazy` the stats programs skip the rows (b, i) of a request after a draft f < i that the
last program of row f found certainly rejected. The accept kernel uses the statistics of rows up to
the first rejection j only, so the outputs must equal the eager pass's (`stats_lazy=False`, which
reads every row) bit for bit, on every row: both kernels compute the same statistics of every row
they read and the same decisions from them. These are exact comparisons, not statistical ones.

What a skipped row would hold is made visible: the statistics scratch is filled with NaN before the
lazy call, so a row the pass skipped keeps NaN (and a skipped row the accept kernel did use would
change tokens). The tests also assert that no row at or before a request's emit position was
skipped and, under the interpreter (one program at a time, so every decision precedes the later
positions' programs), that skipping happened, else equality would say little; there five planted
bugs must fail the comparison. On a GPU which rows are skipped depends on timing: the equality runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import specsample.kernels.logits as kl
from specsample.kernels._launch import interpreting
from specsample.kernels._stream_buffers import stream_buffer
from specsample.kernels.result import SampleResult
from specsample.stats import current_test_seed
from specsample.verify.mutants import KERNEL_PATCHES, patched_module
from tests.kernels.test_logits_cases import DEVICE, _to_device, make_batch, row_mismatch

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

BATCH, NUM_K, VOCAB = 24, 3, 300
TILINGS = {
    # one row per program and 2 chunks per row (192 columns each), as the GPU's programs
    "row-per-program": {"stats_rows": 1, "stats_block": 64, "stats_tiles": 3},
    # the interpreter's default: 16 rows (B rounded down to a power of two) per program, one chunk
    "default": {},
}


def _lazy_call(module, case: dict, config: dict) -> tuple:
    """The lazy kernel's outputs (numpy) and its target chunk maxima [B, K+1, NC] after the call,
    the scratch having been NaN before it."""
    _chunk_maxima_buffer(case, config).fill_(float("nan"))
    res = module.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()}, _config=config)
    return tuple(t.cpu().numpy() for t in res), _chunk_maxima(case, config)


def _chunk_maxima_buffer(case: dict, config: dict) -> torch.Tensor:
    """The scratch of the target chunk maxima (allocated here at its size if it is not yet: the
    kernel's plan then takes the same buffer) as [B, K+1, NC]."""
    batch, k_plus_1, vocab = case["target_logits"].shape
    cfg = kl.launch_config(batch, k_plus_1, vocab, config)
    nc = -(-vocab // (cfg["stats_block"] * cfg["stats_tiles"]))
    buf = stream_buffer(torch.device(DEVICE), "logits_tmax", batch * k_plus_1 * nc, torch.float32)
    return buf[: batch * k_plus_1 * nc].view(batch, k_plus_1, nc)


def _chunk_maxima(case: dict, config: dict) -> np.ndarray:
    """The target chunk maxima [B, K+1, NC] the last call left in the scratch (a copy)."""
    return _chunk_maxima_buffer(case, config).cpu().numpy().copy()


def _eager(case: dict, config: dict) -> tuple:
    res = kl.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()},
                                     _config={**config, "stats_lazy": False})  # fmt: skip
    return tuple(t.cpu().numpy() for t in res)


def _needed_rows(case: dict) -> np.ndarray:
    """[B, K+1] the rows the eager pass computes statistics of: requests with a usable temperature,
    positions up to their (clamped) draft count. A lazy pass that skips none of them but the rows
    nobody reads (invalid requests, positions past n) has skipped nothing by its flags."""
    temps = case["temperature"].float().numpy()
    usable = (temps >= 0) & np.isfinite(temps)
    n = case.get("num_draft_tokens")
    n = np.full(len(temps), NUM_K) if n is None else np.clip(n.numpy(), 0, NUM_K)
    return usable[:, None] & (np.arange(NUM_K + 1)[None, :] <= n[:, None])


def _emit_positions(case: dict, result) -> np.ndarray:
    """[B] the last row each request's outputs depend on: its emit position num_accepted (rows of
    invalid requests: -1, none)."""
    temps = case["temperature"].float().numpy()
    usable = (temps >= 0) & np.isfinite(temps)
    return np.where(usable, result[1], -1)


# (tiling, dtype, classic, stats_recheck): the default (recheck) in every combination, and one case without
LAZY_CASES = [
    pytest.param(tiling, dtype, classic, True, id=f"{tiling}-{dtype}-{'classic' if classic else 'one-hot'}")
    for tiling in sorted(TILINGS)
    for dtype in ("fp32", "bf16")
    for classic in (True, False)
] + [pytest.param("row-per-program", "fp32", True, False, id="row-per-program-fp32-classic-no-recheck")]


@pytest.mark.parametrize(("tiling", "dtype", "classic", "recheck"), LAZY_CASES)
def test_lazy_stats_pass_equals_eager(tiling, dtype, classic, recheck):
    """n = 24 requests, K = 3, V = 300, make_batch's edge cases (NaN / inf logits, rows without
    mass, p == q drafts, invalid ids and temperatures, ragged counts; half the drafts the target
    argmax). Asserts: lazy == eager on every row (all four outputs); no row at or before a
    request's emit position was skipped (its statistics equal the eager pass's); under the
    interpreter, at least 5 rows that the eager pass computes were skipped (by the flags, not rows
    nobody reads). With and without `stats_recheck` (rows that started live read the flag again tile by
    tile: under the interpreter no flag changes while a program runs, so only a wrong test shows)."""
    config = {**TILINGS[tiling], "stats_lazy": True, "stats_recheck": recheck}
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic, dtype=dtype)
    faults, flagged = _lazy_faults(kl, case, config)
    assert not faults, "; ".join(faults)
    if interpreting():  # one program at a time: every decision is made before later positions start
        assert flagged >= 5, f"only {flagged} needed rows skipped: the comparison tests little"


def _lazy_faults(module, case: dict, config: dict) -> tuple[list[str], int]:
    """What test_lazy_stats_pass_equals_eager finds wrong with `module`'s lazy pass on `case` (rows
    whose outputs differ from the eager pass's; rows skipped, wholly or in part, yet used), and how
    many rows that the eager pass computes it skipped."""
    lazy, stats = _lazy_call(module, case, config)
    eager = _eager(case, config)
    eager_stats = _chunk_maxima(case, config)
    faults = []
    differ = np.flatnonzero(row_mismatch(lazy, SampleResult(*eager)))
    if differ.size:
        faults.append(
            f"lazy differs from eager on rows {differ[:5]}: {lazy[0][differ[:3]]} vs {eager[0][differ[:3]]}"
        )
    # [B, K+1]: rows whose statistics the lazy pass did not compute (NaN: the program skipped; -inf:
    # its block's other rows were read, this one masked out; else partial: stats_recheck stopped it)
    skipped = ~np.all((stats == eager_stats) | (np.isnan(stats) & np.isnan(eager_stats)), axis=2)
    used = np.arange(NUM_K + 1)[None, :] <= _emit_positions(case, eager)[:, None]
    if (skipped & used).any():
        faults.append(f"rows skipped yet used: {np.argwhere(skipped & used)[:5]}")
    return faults, int((skipped & _needed_rows(case)).sum())


def _greedy_rejecting_batch() -> dict:
    """Greedy requests whose drafts are rarely the target argmax (make_batch's argmax drafts shifted
    by one token), so that most reject draft 0: a call that sets many flags."""
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=True, edges=False, ragged=False)
    case["draft_token_ids"] = (case["draft_token_ids"] + 1) % VOCAB
    case["temperature"] = torch.zeros(BATCH)
    return case


def test_flags_do_not_outlive_the_call():
    """A call whose drafts are mostly rejected early, then a call of the same shape whose drafts are
    all accepted (greedy requests whose drafts are the target argmax): the second equals the eager
    pass on every row (flags left from the first would skip its rows)."""
    config = {**TILINGS["row-per-program"], "stats_lazy": True}
    first = _greedy_rejecting_batch()
    second = make_batch(current_test_seed() + 1, BATCH, NUM_K, VOCAB, classic=True, edges=False, ragged=False)
    second["draft_token_ids"] = second["target_logits"][:, :NUM_K].argmax(-1)
    second["temperature"] = torch.zeros(BATCH)
    lazy_first, _ = _lazy_call(kl, first, config)
    assert (lazy_first[1] == 0).mean() > 0.9, "the first call does not reject early"
    lazy, _ = _lazy_call(kl, second, config)
    assert (lazy[1] == NUM_K).all(), "greedy drafts equal to the argmax must all be accepted"
    assert not row_mismatch(lazy, SampleResult(*_eager(second, config))).any()


# the mutant catalogue's lazy-pass bug (verify/mutants.py), one (pattern, replacement) per draft kind:
# classic first, then one-hot
_ACCEPTED_AS_REJECTED = {name: patches for name, _, _, patches in KERNEL_PATCHES}[
    "kernel_logits_lazy_accepted_as_rejected"
]

PLANTED = {  # bugs the tests above must catch
    # classic: a draft accepted by the accept kernel's test is taken for certainly rejected
    "classic-accepted-as-rejected": (True, *_ACCEPTED_AS_REJECTED[0]),
    # one-hot: the same
    "one-hot-accepted-as-rejected": (False, *_ACCEPTED_AS_REJECTED[1]),
    # greedy: a draft equal to the argmax is taken for certainly rejected
    "greedy-accepted-as-rejected": (
        True,
        r"reject_greedy = \(x != arg\) \| \(big_m == _NEG_INF\)",
        "reject_greedy = (x == arg) | (big_m == _NEG_INF)",
    ),
    # stats_recheck: the tile-by-tile test reversed, so rows still needed stop after their first tile
    "recheck-reversed": (False, r"return live & \(flag <= flag_at\)", "return live & (flag > flag_at)"),
}


ON_GPU_TIMING = (
    "on a GPU which rows are skipped depends on when programs start relative to the decisions; "
    "the equality above, which holds whatever is skipped, is what runs there"
)


@pytest.mark.skipif(not interpreting(), reason=ON_GPU_TIMING)
@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_lazy_bugs_are_caught(bug):
    """The equality above can fail: a copy of the kernel module whose lazy pass skips rows the accept
    kernel needs, wholly or in part, differs from the eager pass on some rows of the same kind of
    batch (fp32, one row per program), in its outputs or in the statistics of rows it used."""
    classic, pattern, replacement = PLANTED[bug]
    planted = patched_module("specsample.kernels.logits", [(pattern, replacement)])
    config = {**TILINGS["row-per-program"], "stats_lazy": True}
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic)
    faults, _ = _lazy_faults(planted, case, config)
    assert faults, f"planted bug {bug} went unnoticed"


@pytest.mark.skipif(not interpreting(), reason=ON_GPU_TIMING)
def test_state_kept_is_caught():
    """A copy whose accept kernel leaves the decisions set fails the between-calls comparison."""
    kept = (r"tl\.store\(state_ptr \+ req \* _STATE_WORDS, 0, mask=req_ok\)",
            "tl.store(state_ptr + req * _STATE_WORDS, 0, mask=req_ok & False)")  # fmt: skip
    planted = patched_module("specsample.kernels.logits", [kept])
    config = {**TILINGS["row-per-program"], "stats_lazy": True}
    first = _greedy_rejecting_batch()
    second = dict(first, draft_token_ids=first["target_logits"][:, :NUM_K].argmax(-1))
    try:
        _lazy_call(planted, first, config)
        lazy, _ = _lazy_call(planted, second, config)
        assert row_mismatch(lazy, SampleResult(*_eager(second, config))).any(), "flags kept went unnoticed"
    finally:
        from specsample.kernels._arrivals import discard_arrival_counters

        discard_arrival_counters()


@pytest.mark.parametrize(("value", "lazy"), [("0", False), ("1", True), ("yes", None)])
def test_lazy_stats_environment_switch(value, lazy):
    """SPECSAMPLE_LAZY_STATS, read at import, sets the default of stats_lazy ('0' or '1'; anything else
    fails the import with the variable named)."""
    import os
    import subprocess
    import sys

    code = "import specsample.kernels.logits as kl; print(kl.launch_config(4, 3, 100)['stats_lazy'])"
    env = {**os.environ, "SPECSAMPLE_LAZY_STATS": value}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if lazy is None:
        assert done.returncode != 0 and "SPECSAMPLE_LAZY_STATS" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == str(lazy)


@pytest.mark.parametrize(
    ("batch", "k_plus_1", "vocab", "logit_bytes", "overrides", "tiles"),
    [
        (64, 5, 151936, 2, None, 8),  # issue 6's (64, 4, 151936): 320 rows x 38 chunks = 12,160 < 16,384
        (64, 9, 128256, 2, None, 16),  # 576 x 32 = 18,432 >= 16,384
        (1024, 4, 16384, 2, None, 16),  # 1024 x 4 x 4 = 16,384: the bound itself
        (1023, 4, 16384, 2, None, 8),  # 16,368
        (128, 5, 151936, 4, None, 8),  # fp32: 640 x 38 = 24,320 < 32,768
        (128, 9, 128256, 4, None, 16),  # 1152 x 32 = 36,864
        (128, 9, 128256, 2, {"stats_lazy": False}, 8),  # the eager pass keeps 8 (run 48)
        (128, 9, 128256, 2, {"stats_recheck": False}, 8),
        (128, 9, 128256, 2, {"stats_tiles": 4}, 4),  # an override wins
    ],
)
def test_long_chunks_on_large_lazy_grids(monkeypatch, batch, k_plus_1, vocab, logit_bytes, overrides, tiles):
    """The GPU plan takes 16-tile statistics chunks where the lazy pass with stats_recheck has
    B (K+1) cdiv(V, 4096) >= 8192 x logit bytes (H200 runs 233 and 235, kernels/logits.py _config),
    8 elsewhere, and never overrides an explicit stats_tiles."""
    monkeypatch.setattr(kl, "interpreting", lambda: False)
    cfg = kl.launch_config(batch, k_plus_1, vocab, overrides, logit_bytes=logit_bytes)
    assert cfg["stats_block"] == 512
    assert cfg["stats_tiles"] == tiles
