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
import triton
import triton.language as tl

import specsample.kernels.logits as kl
from specsample.kernels._arrivals import discard_arrival_counters
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
    # stats_late_chunks: one row per program, 5 chunks of 64 columns; rows of positions >= 1 read 2 chunks a
    # program (a row's last program 1)
    "late-chunks": {
        "stats_rows": 1,
        "stats_block": 64,
        "stats_tiles": 1,
        "stats_late_chunks": 2,
        "stats_late_from": 1,
    },
    # ... 4 rows per program, 3 chunks of 128 columns, from position 2 on (the default) 2 chunks a program
    "late-chunks-blocks": {"stats_rows": 4, "stats_block": 64, "stats_tiles": 2, "stats_late_chunks": 2},
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
    """The eager pass's outputs (numpy) under `config`; race_tau "seeded", which the eager pass has no tail
    to seed, becomes its default there."""
    seeded = config.get("race_tau") == "seeded"
    res = kl.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()},
                                     _config={**config, "stats_lazy": False,
                                              **({"race_tau": None} if seeded else {})})  # fmt: skip
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


# the tilings of test_lazy_stats_pass_equals_eager (the late-chunks ones: test_late_chunks_equal_eager)
BASE_TILINGS = ("default", "row-per-program")
# one-hot drafts' paths other than the default (stats_tail: the decisions and outputs in the stats pass, the
# pick kernel after it, waiting per request: pick_poll): the accept kernel after the pass; the pick waiting
# for the whole pass
TAILS = {"no-tail": {"stats_tail": False}, "no-poll": {"pick_poll": False}}
# classic drafts' tail (classic_tail, the default since session 47): their decisions and outputs in the stats
# pass too, the race kernel after it (its screen's threshold then shared by the race programs, race_tau
# "shared"), each race program waiting for its own request's emit (race_poll)
CLASSIC_TAIL = {"classic_tail": True}
# classic drafts' paths other than the default: the accept kernel after the pass (no tail); the tail with
# the race waiting for the whole pass (race_poll off); the tail's emitters seeding the race's threshold
CLASSIC_TAILS = {
    "no-tail": {"classic_tail": False},
    "no-poll": {"race_poll": False},
    "seeded": {"race_tau": "seeded"},
}
# (tiling, dtype, classic, extra config): the default (recheck; one-hot drafts: stats_tail) in every
# combination, one case without recheck, and one-hot drafts without the tail in every tiling and dtype
LAZY_CASES = (
    [
        pytest.param(tiling, dtype, classic, {}, id=f"{tiling}-{dtype}-{'classic' if classic else 'one-hot'}")
        for tiling in BASE_TILINGS
        for dtype in ("fp32", "bf16")
        for classic in (True, False)
    ]
    + [
        pytest.param(
            "row-per-program", "fp32", True, {"stats_recheck": False}, id="row-per-program-fp32-no-recheck"
        )
    ]
    + [
        pytest.param(tiling, dtype, False, TAILS[tail], id=f"{tiling}-{dtype}-one-hot-{tail}")
        for tiling in BASE_TILINGS
        for dtype in ("fp32", "bf16")
        for tail in sorted(TAILS)
    ]
    + [
        pytest.param(tiling, dtype, True, CLASSIC_TAILS[tail], id=f"{tiling}-{dtype}-classic-{tail}")
        for tiling in BASE_TILINGS
        for dtype in ("fp32", "bf16")
        for tail in sorted(CLASSIC_TAILS)
    ]
)


@pytest.mark.parametrize(("tiling", "dtype", "classic", "extra"), LAZY_CASES)
def test_lazy_stats_pass_equals_eager(tiling, dtype, classic, extra):
    """n = 24 requests, K = 3, V = 300, make_batch's edge cases (NaN / inf logits, rows without
    mass, p == q drafts, invalid ids and temperatures, ragged counts; half the drafts the target
    argmax). Asserts: lazy == eager on every row (all four outputs); no row at or before a
    request's emit position was skipped (its statistics equal the eager pass's); under the
    interpreter, at least 5 rows that the eager pass computes were skipped (by the flags, not rows
    nobody reads). With and without `stats_recheck` (rows that started live read the flag again tile by
    tile: under the interpreter no flag changes while a program runs, so only a wrong test shows), and
    one-hot drafts with and without their tail in the stats pass (`stats_tail`, the default: the
    decisions exact there, the outputs written by the program that fixes a request's emit position), and
    classic drafts with theirs (`classic_tail`)."""
    config = {**TILINGS[tiling], "stats_lazy": True, **extra}
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


def _greedy_rejecting_batch(classic: bool = True) -> dict:
    """Greedy requests whose drafts are rarely the target argmax (make_batch's argmax drafts shifted
    by one token), so that most reject draft 0: a call that sets many flags."""
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic, edges=False, ragged=False)
    case["draft_token_ids"] = (case["draft_token_ids"] + 1) % VOCAB
    case["temperature"] = torch.zeros(BATCH)
    return case


@pytest.mark.parametrize("drafts", ["classic", "one-hot", "classic-no-tail"])
def test_flags_do_not_outlive_the_call(drafts):
    """A call whose drafts are mostly rejected early, then a call of the same shape whose drafts are
    all accepted (greedy requests whose drafts are the target argmax): the second equals the eager
    pass on every row (flags left from the first would skip its rows; with the one-hot tail, the
    default for one-hot drafts, decided and rejected bits left from it would fix the second's emit
    positions)."""
    classic = drafts != "one-hot"
    config = {
        **TILINGS["row-per-program"],
        "stats_lazy": True,
        **(CLASSIC_TAILS["no-tail"] if drafts == "classic-no-tail" else {}),
    }
    first = _greedy_rejecting_batch(classic)
    second = make_batch(
        current_test_seed() + 1, BATCH, NUM_K, VOCAB, classic=classic, edges=False, ragged=False
    )
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

PLANTED = {  # bugs the tests above must catch: (classic, pattern, replacement, extra config)
    # classic: a draft accepted by the accept kernel's test is taken for certainly rejected
    "classic-accepted-as-rejected": (True, *_ACCEPTED_AS_REJECTED[0], CLASSIC_TAILS["no-tail"]),
    # one-hot, without the tail (whose test is exact): the same
    "one-hot-accepted-as-rejected": (False, *_ACCEPTED_AS_REJECTED[1], TAILS["no-tail"]),
    # greedy: a draft equal to the argmax is taken for certainly rejected
    "greedy-accepted-as-rejected": (
        True,
        r"reject_greedy = \(x != arg\) \| \(big_m == _NEG_INF\)",
        "reject_greedy = (x == arg) | (big_m == _NEG_INF)",
        {},
    ),
    # stats_recheck: the tile-by-tile test reversed, so rows still needed stop after their first tile
    "recheck-reversed": (False, r"return live & \(flag <= flag_at\)", "return live & (flag > flag_at)", {}),
    # stats_tail: a request's emit position taken as fixed at its first decided row (the mutant
    # catalogue's kernel_logits_tail_emits_before_prefix): its program emits, at its own row's rejection
    # or at n
    "tail-prefix-ignored": (
        False,
        r"return j, \(word\.to\(tl\.int64\) & prefix\) == prefix",
        "return j, word != 0",
        {"stats_tail": True},
    ),
    # stats_tail: the exact test reversed (drafts accepted where they should be rejected, and back)
    "tail-sampled-test-reversed": (
        False,
        r"reject_sampled = ~\(u < p_x\)",
        "reject_sampled = ~(u > p_x)",
        {"stats_tail": True},
    ),
    # classic_tail: the classic exact test reversed
    "classic-tail-sampled-test-reversed": (
        True,
        r"reject_sampled = \(d_x == _NEG_INF\) \| ~\(u < ratio\)",
        "reject_sampled = (d_x == _NEG_INF) | ~(u > ratio)",
        CLASSIC_TAIL,
    ),
    # classic_tail: a row decided once its target programs have arrived, before its draft programs
    "classic-tail-draft-programs-uncounted": (True, r"arrivals = NC \* 2", "arrivals = NC", CLASSIC_TAIL),
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
    classic, pattern, replacement, extra = PLANTED[bug]
    planted = patched_module("specsample.kernels.logits", [(pattern, replacement)])
    config = {**TILINGS["row-per-program"], "stats_lazy": True, **extra}
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic)
    faults, _ = _lazy_faults(planted, case, config)
    assert faults, f"planted bug {bug} went unnoticed"


# (tiling, classic, extra config) of test_late_chunks_equal_eager: both late-chunk tilings with the default
# paths in both draft kinds, and the passes without a tail (`_lazy_arrival` counts the chunks too)
LATE_CASES = [
    pytest.param(tiling, classic, extra, id=f"{tiling}-{'classic' if classic else 'one-hot'}{name}")
    for tiling in ("late-chunks", "late-chunks-blocks")
    for classic, extra, name in (
        (False, {}, ""),
        (True, {}, ""),
        (False, TAILS["no-tail"], "-no-tail"),
        (True, CLASSIC_TAILS["no-tail"], "-no-tail"),
    )
]


def _late_batch(classic: bool) -> dict:
    """make_batch's batch (fp32, edge cases, ragged counts) with its first half made greedy requests whose
    drafts are the target argmax: those accept every draft they have, so their rows past position 1, which
    the late chunks read, are used (make_batch's sampled requests seldom get that far)."""
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic)
    half = BATCH // 2
    logits = case["target_logits"][:half, :NUM_K].float()
    clean = torch.where(torch.isfinite(logits), logits, float("-inf"))  # NaN and +-inf carry no mass
    case["draft_token_ids"][:half] = clean.argmax(-1)
    case["temperature"][:half] = 0.0
    return case


@pytest.mark.parametrize(("tiling", "classic", "extra"), LATE_CASES)
def test_late_chunks_equal_eager(tiling, classic, extra):
    """stats_late_chunks (the lazy pass's rows from position stats_late_from on read by programs of 2
    chunks, a row's last program 1 where its chunks are odd) changes no output: _late_batch's n = 24
    requests, K = 3, V = 300. Asserts, as test_lazy_stats_pass_equals_eager: lazy == eager on every row,
    no used row skipped and (interpreter) >= 5 needed rows skipped; and that >= 4 requests emit at a
    position >= 2, so the late programs' statistics are used."""
    config = {**TILINGS[tiling], "stats_lazy": True, **extra}
    case = _late_batch(classic)
    faults, flagged = _lazy_faults(kl, case, config)
    assert not faults, "; ".join(faults)
    eager = _eager(case, config)
    assert (_emit_positions(case, eager) >= 2).sum() >= 4, "too few requests use the late rows"
    if interpreting():
        assert flagged >= 5, f"only {flagged} needed rows skipped: the comparison tests little"


# bugs test_late_chunks_equal_eager must catch: (classic, pattern, replacement), in the "late-chunks" tiling
LATE_PLANTED = {
    # stats_late_chunks: a late program counts one arrival whatever chunks it covered (its rows never decided)
    "late-arrival-counted-once": (
        False,
        r"old = tl\.atomic_add\(cnt_ptr \+ at, chunks, mask=row_ok",
        "old = tl.atomic_add(cnt_ptr + at, 1, mask=row_ok",
    ),
    # stats_late_chunks: a late program's chunks start at its index, not at LATE_CHUNKS times it (chunks read
    # twice, others never)
    "late-chunks-misplaced": (
        True,
        r"late_chunk = \(late // SIDES\) % per_row \* LATE_CHUNKS",
        "late_chunk = (late // SIDES) % per_row",
    ),
    # stats_late_chunks: a late program stops before its last chunk (arriving for it all the same)
    "late-last-chunk-unread": (False, r"for k in range\(chunks\):", "for k in range(chunks - 1):"),
}


@pytest.mark.skipif(not interpreting(), reason=ON_GPU_TIMING)
@pytest.mark.parametrize("bug", sorted(LATE_PLANTED))
def test_planted_late_chunk_bugs_are_caught(bug):
    """The late-chunks comparison can fail: a copy of the kernel module that miscounts a late program's
    arrivals, misplaces its chunks or leaves one unread differs from the eager pass on _late_batch (the
    "late-chunks" tiling, one row per program), in its outputs or in the statistics of rows it used."""
    classic, pattern, replacement = LATE_PLANTED[bug]
    planted = patched_module("specsample.kernels.logits", [(pattern, replacement)])
    config = {**TILINGS["late-chunks"], "stats_lazy": True}
    faults, _ = _lazy_faults(planted, _late_batch(classic), config)
    assert faults, f"planted bug {bug} went unnoticed"


STATE_KEPT = {  # (classic, pattern, replacement[, extra config]): a call's state left for the next one
    # the accept kernel (classic drafts without the tail) leaves the decisions set
    "accept-kernel-flags": (
        True,
        r"tl\.store\(state_ptr \+ req \* _STATE_WORDS, 0, mask=req_ok\)",
        "tl.store(state_ptr + req * _STATE_WORDS, 0, mask=req_ok & False)",
        CLASSIC_TAILS["no-tail"],
    ),
    # stats_tail (one-hot drafts): the pick kernel's reset after the pass leaves the flag set
    "tail-flag": (
        False,
        r"tl\.store\(flags, 0, mask=req_ok\)",
        "tl.store(flags, 0, mask=req_ok & False)",
    ),
    # stats_tail: ... or the request's decided and rejected bits
    "tail-word": (
        False,
        r"tl\.store\(flags \+ 1, 0, mask=req_ok\)",
        "tl.store(flags + 1, 0, mask=req_ok & False)",
    ),
    # classic_tail: the race kernel's reset leaves the flag set
    "classic-tail-flag": (
        True,
        r"tl\.store\(flags, 0, mask=req_ok\)",
        "tl.store(flags, 0, mask=req_ok & False)",
        CLASSIC_TAIL,
    ),
    # stats_tail: the reset leaves the rows' arrival counters as the pass left them (at NC where a row's
    # programs all arrived)
    "tail-counter": (
        False,
        r"tl\.store\(counters, 0, mask=req_ok\[:, None\] & \(pos <= K\)\)",
        "tl.store(counters, 0, mask=req_ok[:, None] & (pos <= K) & False)",
    ),
}


@pytest.mark.skipif(not interpreting(), reason=ON_GPU_TIMING)
@pytest.mark.parametrize("bug", sorted(STATE_KEPT))
def test_state_kept_is_caught(bug):
    """A copy that leaves a call's state for the next (the accept kernel's flags; with the one-hot tail,
    its flag, its word of decided and rejected bits, or a row's arrival counter) fails the between-calls
    comparison of test_flags_do_not_outlive_the_call: greedy calls that mostly reject draft 0, then the
    same calls with every draft the target argmax."""
    classic, pattern, replacement, *extra = STATE_KEPT[bug]
    planted = patched_module("specsample.kernels.logits", [(pattern, replacement)])
    config = {**TILINGS["row-per-program"], "stats_lazy": True, **(extra[0] if extra else {})}
    first = _greedy_rejecting_batch(classic)
    second = dict(first, draft_token_ids=first["target_logits"][:, :NUM_K].argmax(-1))
    try:
        _lazy_call(planted, first, config)
        lazy, _ = _lazy_call(planted, second, config)
        assert row_mismatch(lazy, SampleResult(*_eager(second, config))).any(), f"{bug} went unnoticed"
    finally:
        discard_arrival_counters()


def _state_words_after_call(module, config: dict, classic: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """[B, 3 + K+1] the lazy state's words (flag, the tail's word, the ready word of pick_poll / race_poll,
    on a line of its own past the B lines of the first two), then the arrival counters of rows (b, 0..K), of
    every request after one one-hot (or classic) call of make_batch's (edge cases included) by `module` with
    `config`, and the call's num_accepted [B]."""
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=classic)
    device = torch.device(DEVICE)
    state = stream_buffer(device, "logits_lazy_state", 2 * BATCH * kl.STATE_WORDS, torch.int32, zeroed=True)
    rows = BATCH * (NUM_K + 1)
    counters = stream_buffer(device, "logits_stats_arrivals", rows * kl.STATE_WORDS, torch.int32, zeroed=True)
    result, _ = _lazy_call(module, case, config)
    lines = state[: 2 * BATCH * kl.STATE_WORDS].view(2, BATCH, kl.STATE_WORDS).cpu().numpy()
    counts = counters[: rows * kl.STATE_WORDS].view(BATCH, NUM_K + 1, kl.STATE_WORDS)[:, :, 0].cpu().numpy()
    return np.concatenate([lines[0, :, :2], lines[1, :, :1], counts], axis=1), result[1]


# the pick (pick_poll) or the race's last program (race_poll) leaves a request's ready word set (the next
# call's pick or race would not wait for its emit)
_READY_KEPT = {
    "one-hot": (
        r'tl\.atomic_xchg\(ready, 0, mask=req_ok, sem="relaxed"\)',
        'tl.atomic_xchg(ready, 0, mask=req_ok & False, sem="relaxed")',
    ),
    "classic": (
        r'tl\.atomic_xchg\(ready_word, 0, mask=req_ok, sem="relaxed"\)',
        'tl.atomic_xchg(ready_word, 0, mask=req_ok & False, sem="relaxed")',
    ),
}


@pytest.mark.parametrize("planted", [False, True], ids=["kernel", "ready-kept"])
@pytest.mark.parametrize("drafts", ["one-hot", "classic"])
def test_poll_leaves_the_state_zero(drafts, planted):
    """With the tail's per-request waits (pick_poll for one-hot drafts, race_poll for classic ones) every
    request's emit sets its ready word and its pick, or the last of its race programs, zeroes it: after a
    call the flag, the tail's word and the ready word are 0 for every request (a ready word left set would
    let the next call's pick or race read that call's row j before its emit; under the interpreter, where
    the pass ends before the pick starts, only this check sees it), and so are the rows' arrival counters,
    which the pick or race zeroes after the pass. The copy that leaves the ready words set must fail it."""
    classic = drafts == "classic"
    config = {**TILINGS["row-per-program"], "stats_lazy": True, "pick_poll": True, "race_poll": True,
              "race_screen": True}  # fmt: skip
    module = patched_module("specsample.kernels.logits", [_READY_KEPT[drafts]]) if planted else kl
    try:
        words, _ = _state_words_after_call(module, config, classic=classic)
    finally:
        discard_arrival_counters()  # the state a call cut short, or a planted copy, leaves set
    if planted:  # every word as its emit released it (2 j + 1; j is num_accepted only until the pick, which
        # rewrites the outputs of rows it finds without mass)
        assert (words[:, 2] % 2 == 1).all(), f"the planted copy left ready words {words[:, 2]}"
    else:
        assert not words.any(), f"state left after the call: {np.argwhere(words)[:5]}"


def test_pick_poll_emits_release_every_ready_word(monkeypatch):
    """With pick_poll, the statistics pass alone (the pick's launch left out) leaves every request's ready
    word at 2 j + 1, j its emit position (= its num_accepted): each request's emit released it, which the
    pick waits for (a request without it would spin). The pick clears them afterwards, with the flag and the
    tail's word (test_poll_leaves_the_state_zero), which the pass leaves set since the programs of rows an
    earlier rejection made unused do not arrive."""
    config = {**TILINGS["row-per-program"], "stats_lazy": True, "pick_poll": True}
    original = kl.launch_keyed
    monkeypatch.setattr(kl, "_REPEATS", kl.call_memo())  # a remembered call launches without launch_keyed
    monkeypatch.setattr(kl, "launch_keyed", lambda kernel, grid, key, args, meta: None if key[0] == "pick"
                        else original(kernel, grid, key, args, meta))  # fmt: skip
    try:
        words, accepted = _state_words_after_call(kl, config)
    finally:
        discard_arrival_counters()  # the state a call cut short, or a planted copy, leaves set
    assert (words[:, 2] == 2 * accepted + 1).all(), f"ready words {words[:, 2]}, num_accepted {accepted}"


@pytest.mark.parametrize("tail", ["default", "no-tail", "no-poll"])
def test_classic_tail_launches(monkeypatch, tail):
    """Classic drafts (the classic tail, the default) launch the stats pass and the race alone, the race's
    screen (on everywhere under the interpreter, forced here for the GPU) taking its threshold from the
    race programs (SHARED_TAU), since no accept kernel computes one, the emitters releasing the ready
    words (PICK_POLL) that the race waits on (POLL; with race_poll off, neither); without the tail, the
    stats pass, the accept kernel and the race, which waits for the accept kernel's threshold."""
    config = {**TILINGS["row-per-program"], "stats_lazy": True, "race_screen": True,
              **({"default": {}, **CLASSIC_TAILS}[tail])}  # fmt: skip
    launched = []
    original = kl.launch_keyed
    monkeypatch.setattr(kl, "_REPEATS", kl.call_memo())  # a remembered call launches without launch_keyed
    monkeypatch.setattr(kl, "launch_keyed", lambda kernel, grid, key, args, meta: (
        launched.append((key[0], *(meta.get(k) for k in ("SHARED_TAU", "TAIL", "PICK_POLL", "POLL")))),
        original(kernel, grid, key, args, meta)))  # fmt: skip
    case = make_batch(current_test_seed(), BATCH, NUM_K, VOCAB, classic=True)
    kl.rejection_sample_logits(**{k: _to_device(v) for k, v in case.items()}, _config=config)
    poll = tail == "default"
    if tail != "no-tail":
        assert launched == [("stats", None, True, poll, None), ("race", True, None, None, poll)], launched
    else:
        expected = [("stats", None, None, None, None), ("accept", None, None, None, None),
                    ("race", False, None, None, False)]  # fmt: skip
        assert launched == expected, launched


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


@triton.jit
def _emit_position_probe(word_ptr, n_ptr, j_ptr, done_ptr, N, K: tl.constexpr, BLOCK: tl.constexpr):
    """kl._emit_position on N (word, n) pairs."""
    at = tl.arange(0, BLOCK)
    ok = at < N
    word = tl.load(word_ptr + at, mask=ok, other=0)
    n = tl.load(n_ptr + at, mask=ok, other=0).to(tl.int64)
    j, done = kl._emit_position(word, n, K)
    tl.store(j_ptr + at, j.to(tl.int32), mask=ok)
    tl.store(done_ptr + at, done.to(tl.int32), mask=ok)


def test_emit_position_is_fixed_once_and_for_all():
    """stats_tail's emit position from a request's word (kernels/logits.py `_emit_position`), K = 3, on
    every word its programs can build: decided bits D over rows 0..K, rejected bits R within D on
    drafted rows (< n), n in 0..K. Asserts, exactly: j = the lowest rejected row, else n, and the
    position is determined iff rows 0..j are all decided (against this test's model); and the
    property that makes one program emit once: a determined word keeps its j and stays determined
    whatever rows decide after it (every superset word the protocol can reach). Under the interpreter
    programs finish in position order, so the out-of-order words are tested here, not by the calls."""
    k = 3
    words, ns = [], []
    for n in range(k + 1):
        for decided in range(1 << (k + 1)):
            for rejected in range(1 << n):
                if rejected & ~decided:
                    continue
                words.append(decided | (rejected << 16))
                ns.append(n)
    word_t = torch.tensor(words, dtype=torch.int32, device=DEVICE)
    n_t = torch.tensor(ns, dtype=torch.int32, device=DEVICE)
    j_t = torch.empty_like(word_t)
    done_t = torch.empty_like(word_t)
    block = 1 << (len(words) - 1).bit_length()
    _emit_position_probe[(1,)](word_t, n_t, j_t, done_t, len(words), K=k, BLOCK=block)
    table = {}
    for word, n, j, done in zip(words, ns, j_t.tolist(), done_t.tolist(), strict=True):
        rejected = word >> 16
        want_j = min([p for p in range(k + 1) if rejected >> p & 1] + [n])
        want_done = all(word >> p & 1 for p in range(want_j + 1))
        assert (j, bool(done)) == (want_j, want_done), f"word {word:#x}, n = {n}"
        table[word, n] = (j, bool(done))
    for (word, n), (j, done) in table.items():
        if not done:
            continue
        for (later, n2), (j2, done2) in table.items():
            grows = n2 == n and later & word == word and (later >> 16) & (word & 0xFFFF) == word >> 16
            if grows:  # more rows decided; the rows decided before keep their rejected bits
                assert done2 and j2 == j, f"{word:#x} -> {later:#x} (n = {n}) moved j {j} -> {j2}"


@pytest.mark.parametrize(
    ("k_plus_1", "classic", "overrides", "stages"),
    [
        (16, False, {}, (0, 2)),  # one-hot drafts: the stats pass, then the pick
        (17, False, {}, (0, 1, 2)),  # the word holds 16 positions' bits: three launches past that
        (5, True, {}, (0, 2)),  # classic drafts (classic_tail): the stats pass, then the race
        (5, True, CLASSIC_TAILS["no-tail"], (0, 1, 2)),  # without it the accept kernel and the race
        (17, True, CLASSIC_TAIL, (0, 1, 2)),
        (5, True, {**CLASSIC_TAIL, "stats_tail": False}, (0, 1, 2)),
        (5, False, {"stats_tail": False}, (0, 1, 2)),
        (5, False, {"stats_lazy": False}, (0, 1, 2)),  # the tail lives in the lazy pass
        (5, True, {**CLASSIC_TAIL, "stats_lazy": False}, (0, 1, 2)),
    ],
)
def test_tail_plan(k_plus_1, classic, overrides, stages):
    """Which kernels a call launches (the plan's stages: 0 stats, 1 accept, 2 race or pick): the one-hot
    tail (and with classic_tail the classic one) where K+1 <= 16 (its word has 16 decided and 16 rejected
    bits), on the lazy pass only."""
    cfg = kl.launch_config(4, k_plus_1, 300, overrides)
    device = torch.empty(0, device=DEVICE).device  # as the launcher gets it: a CUDA device with its index
    plan = kl._plan(device, 4, k_plus_1, 300, classic, False, False, cfg)
    assert plan[-1] == stages
    assert len(plan[1]) == len(plan[3]) == len(stages)  # a grid and a launch config per launch


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"stats_late_chunks": 0}, "stats_late_chunks"),
        ({"stats_late_chunks": 2.0}, "stats_late_chunks"),
        ({"stats_late_chunks": True}, "stats_late_chunks"),
        ({"stats_late_from": -1}, "stats_late_from"),
        ({"stats_late_from": "2"}, "stats_late_from"),
    ],
)
def test_late_chunks_config_is_checked(overrides, message):
    """stats_late_chunks must be an int >= 1 and stats_late_from an int >= 0 (a position): anything else is a
    ValueError naming the key, not a kernel compiled with a float or a negative head."""
    with pytest.raises(ValueError, match=message):
        kl.launch_config(4, 5, 300, overrides)


@pytest.mark.parametrize(
    ("overrides", "programs"),
    [
        ({}, 24 * 4 * 5),  # B (K+1) rows x 5 chunks of 64 columns, a program each
        ({"stats_late_chunks": 2}, 48 * 5 + 48 * 3),  # positions 0-1 a program a chunk; 2-3 three (2, 2, 1)
        ({"stats_late_chunks": 2, "stats_late_from": 1}, 24 * 5 + 72 * 3),
        ({"stats_late_chunks": 8}, 48 * 5 + 48 * 1),  # more chunks than a row has: one program a row
        ({"stats_late_chunks": 2, "stats_late_from": 9}, 24 * 4 * 5),  # past the last position: unchanged
        ({"stats_late_chunks": 2, "stats_lazy": False}, None),  # the eager pass keeps its 3-D grid
    ],
)
def test_late_chunks_grid(overrides, programs):
    """The lazy pass's grid with stats_late_chunks (one-hot drafts, B = 24, K = 3, V = 300, one row and 64
    columns a program and tile): cdiv(NC, C) programs for each row from position stats_late_from on, NC for
    the rows before it; the eager pass's grid is not changed."""
    config = {"stats_rows": 1, "stats_block": 64, "stats_tiles": 1, "stats_lazy": True, **overrides}
    cfg = kl.launch_config(BATCH, NUM_K + 1, VOCAB, config)
    device = torch.empty(0, device=DEVICE).device
    grids = kl._plan(device, BATCH, NUM_K + 1, VOCAB, False, False, False, cfg)[1]
    if programs is None:
        assert grids[0] == (BATCH * (NUM_K + 1), 5, 1)
    else:
        assert grids[0] == (programs,)
