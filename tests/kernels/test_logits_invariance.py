"""Batch invariance and determinism of `rejection_sample_logits`: a request's outputs depend only on
its own inputs, seed and offset — not on its position in the batch, the batch size, the other
requests, or the run. All comparisons are bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.kernels import logits as _kl
from specsample.stats import current_test_seed
from tests.kernels.test_logits_cases import make_batch, sample_logits, subset

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter


def _outputs(case: dict) -> list[np.ndarray]:
    return [t.numpy() for t in sample_logits(**case)]


def _assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    for name, g, w in zip(("tokens", "num_accepted", "fallback", "valid"), got, want, strict=True):
        bad = np.flatnonzero((g != w).reshape(g.shape[0], -1).any(axis=1))
        assert bad.size == 0, f"{what}: {name} differs on rows {bad[:8]}"


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_permuting_splitting_padding_leave_each_request_unchanged(classic):
    """n = 1000 requests with every edge case; permuted, split into batches of 1 / 7 / 333 / rest, and
    padded with 500 unrelated requests: every request's outputs are bit-identical to the full run."""
    seed = current_test_seed()
    case = make_batch(seed, 1000, 3, 29, classic=classic)
    full = _outputs(case)
    perm = np.random.default_rng(seed).permutation(1000)
    _assert_same(_outputs(subset(case, perm)), [f[perm] for f in full], "permuted batch")
    parts, start = [], 0
    for size in (1, 7, 333, 659):
        parts.append(_outputs(subset(case, np.arange(start, start + size))))
        start += size
    _assert_same([np.concatenate(p) for p in zip(*parts, strict=True)], full, "split batches")
    other = make_batch(seed + 1, 500, 3, 29, classic=classic)
    padded = {k: (torch.cat([v, other[k]]) if isinstance(v, torch.Tensor) else v) for k, v in case.items()}
    _assert_same([f[:1000] for f in _outputs(padded)], full, "padded batch")


def test_bit_deterministic_across_runs_and_keyed_by_offset():
    """Two runs are bit-identical (as on two tensor-parallel ranks with the same seeds); advancing
    every offset by one redraws the randomness: on n = 2000 sampled requests (T = 1, one-hot, V = 50,
    where a fresh draw changes the token with probability > 0.5) more than 25% of rows change."""
    seed = current_test_seed()
    case = make_batch(seed, 2000, 2, 50, classic=False, edges=False, ragged=False)
    case["temperature"] = torch.ones(2000)
    first, second = _outputs(case), _outputs(case)
    _assert_same(second, first, "second run")
    moved = dict(case, offsets=case["offsets"] + 1)
    changed = (_outputs(moved)[0] != first[0]).any(axis=1).mean()
    assert changed > 0.25, f"offset + 1 changed only {changed:.1%} of the rows: is the offset used?"


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_int32_lanes_give_the_same_outputs(classic):
    """The stats pass's 32-bit column offsets (lane_i32, on by default on the GPU since H200 run 21)
    change only address arithmetic: on n = 300 requests with every edge case, V = 29 over chunks of
    2 tiles x 8 columns (several chunks and a ragged last one), outputs are bit-identical to the
    64-bit path. With a vocabulary stride too large for int32 offsets the launcher keeps the 64-bit
    path (stats_lane_i32, int32_offsets_fit); an unknown config key is an error, not silently
    ignored."""
    from specsample.kernels import logits as kl
    from specsample.kernels._launch import int32_offsets_fit

    case = make_batch(current_test_seed(), 300, 3, 29, classic=classic)
    chunks = {"stats_block": 8, "stats_tiles": 2, "race_block": 32, "race_tiles": 1}
    wide = _outputs_with(case, dict(chunks, lane_i32=False))
    _assert_same(_outputs_with(case, dict(chunks, lane_i32=True)), wide, "lane_i32")
    assert int32_offsets_fit(29 + 16, 1, 1)
    assert not int32_offsets_fit(29 + 16, 2**26, 1) and not int32_offsets_fit(2**31 + 6, 1)
    cfg = dict(chunks, lane_i32=True)
    assert kl.stats_lane_i32(cfg, 29, 1, 1) and not kl.stats_lane_i32(dict(cfg, lane_i32=False), 29, 1, 1)
    assert not kl.stats_lane_i32(cfg, 29, 2**26, 1) and not kl.stats_lane_i32(cfg, 29, 1, 2**26)
    with pytest.raises(ValueError, match="lane_stats"):
        kl.launch_config(300, 4, 29, {"lane_stats": True})


def _outputs_with(case: dict, config: dict) -> list[np.ndarray]:
    return [t.numpy() for t in sample_logits(**case, _config=config)]


def test_race_tiles_rule():
    """The GPU race pass reads chunks of 4096 tokens (8 tiles of 512) per program at (64, 4, 151936)
    and 8192 (16 tiles) at (128, 8, 128256) (H200 run 41's fastest chunk lengths), the longest of
    16 / 8 / 4 / 2 tiles that still gives >= 2048 programs elsewhere, 1 for small batches, and never
    more tiles than the row has."""
    assert _kl._race_tiles(64, 151936, 512) == 8 and _kl._race_tiles(128, 128256, 512) == 16
    assert _kl._race_tiles(32, 151936, 512) == 4 and _kl._race_tiles(16, 151936, 512) == 2
    assert _kl._race_tiles(1, 151936, 512) == 1 and _kl._race_tiles(4, 151936, 512) == 1
    assert _kl._race_tiles(4096, 1000, 512) == 2 and _kl._race_tiles(4096, 2000, 256) == 8


def test_launch_plan_follows_the_live_buffers():
    """The launcher caches its plan (scratch buffers, grids, constexprs) per shape, config and stream,
    keyed by kernels/_stream_buffers.generation(): after the buffers are discarded (as the mutant
    harness does after a kernel that leaves counters dirty) the next call builds a new plan on fresh
    buffers instead of reusing the forgotten ones, and outputs are unchanged."""
    from specsample.kernels import _stream_buffers as sb

    case = make_batch(current_test_seed(), 40, 2, 29, classic=True)
    first = _outputs(case)
    before = set(_kl._PLANS)
    again = _outputs(case)
    assert set(_kl._PLANS) == before, "a repeat call built a new plan"
    _assert_same(again, first, "repeat call")
    gen = sb.generation()
    sb.discard_stream_buffers()
    assert sb.generation() != gen
    _assert_same(_outputs(case), first, "after discard")
    new_keys = set(_kl._PLANS) - before
    assert new_keys and all(k[2] == sb.generation() for k in new_keys), "no plan for the new generation"
    old_scratch = {id(t) for k in before for t in _kl._PLANS[k][2]}
    new_scratch = {id(t) for k in new_keys for t in _kl._PLANS[k][2]}
    assert not old_scratch & new_scratch, "the new plan reuses discarded buffers"
