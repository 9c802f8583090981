"""Sizing of the device timing (input copies for L2 rotation, launches per CUDA graph) and the
host-clock stand-in timer. The CUDA parts themselves run only on the GPU (benchmarks/)."""

import pytest

from benchmarks.timing import Timing, WallTimer, choose_copies, choose_launches

L2 = 60 << 20


@pytest.mark.parametrize(
    ("touched", "alloc"),
    [(256_000, 1_150_000), (4 << 20, 8 << 20), (77_791_232, 400 << 20), (2 << 30, 5 << 30), (1, 1)],
)
def test_copies_rotate_past_l2_within_limits(touched, alloc):
    n = choose_copies(touched, alloc, L2, max_copies=1024, max_alloc_bytes=4 << 30)
    assert n >= 2  # two consecutive launches never share buffers
    assert n <= 1024
    limited = n == 1024 or n * alloc > (4 << 30) - alloc or n == 2
    assert n * touched >= 3 * L2 or limited, (n, touched)
    if n > 2:
        assert n * alloc <= 4 << 30


def test_copies_small_case_is_capped_by_max_copies_and_memory():
    assert choose_copies(1000, 2000, L2, max_copies=64) == 64
    assert choose_copies(1000, 1 << 30, L2, max_alloc_bytes=4 << 30) == 4
    with pytest.raises(ValueError, match="byte counts must be > 0"):
        choose_copies(0, 1, L2)


@pytest.mark.parametrize("est_us", [0.8, 5.0, 40.0, 300.0, 5000.0])
@pytest.mark.parametrize("copies", [1, 2, 7, 1024])
def test_launches_cover_copies_evenly_and_bound_the_graph(est_us, copies):
    launches, used = choose_launches(est_us, copies, target_ms=10.0, max_launches=4096, max_graph_ms=50.0)
    assert 1 <= used <= copies
    assert launches % used == 0 and launches >= used
    assert launches <= 4096
    if launches * est_us > 50_000:  # only allowed when one pass over the copies cannot be shorter
        assert used == 1 or launches == used
    if used == copies and launches < 4096 - used:
        assert launches * est_us >= 10_000  # about target_ms of work per replay


def test_launches_slow_calls_cycle_fewer_copies():
    launches, used = choose_launches(1000.0, 1024, max_graph_ms=50.0)
    assert used == 50 and launches == 50
    with pytest.raises(ValueError, match="est_us must be > 0"):
        choose_launches(0.0, 2)


def test_wall_timer_cycles_copies_and_reports_no_graph():
    seen = []
    calls = [lambda i=i: seen.append(i) for i in range(3)]
    t = WallTimer(reps=6).time(calls)
    assert isinstance(t, Timing) and t.median_us > 0 and t.graph_us is None
    assert seen == [0, 0, 1, 2, 0, 1, 2]  # one warm-up call, then round robin
