"""Device timers: what the GPU spends per call, never what Python spends launching it.

`CudaTimer.time(calls)` takes one zero-argument call per copy of the inputs and returns two numbers:
- median_us: `triton.testing.do_bench` median on calls[0]. do_bench clears the L2 cache (a 256 MB
  write) before every call and brackets the call with CUDA events, so each call reads from HBM and
  the launcher's Python cost hides behind the clearing kernel.
- graph_us: one CUDA graph holding `launches` back-to-back calls that cycle over the input copies,
  replayed `replays` times, each replay bracketed by CUDA events; per-launch time = replay time /
  launches, median over replays. Enough copies are used that the bytes touched between two uses of
  one copy exceed the L2 several times (`choose_copies`), so this is also L2-cold, and free of launch
  overhead: the regime of an engine's CUDA-graph decode step.
`measure_copy_bandwidth_cuda` is the floor's denominator: a 1 GiB device-to-device copy, bytes read
+ written over the event-timed median.

`WallTimer` / `measure_copy_bandwidth_wall` are host-clock stand-ins that let the whole pipeline
run on a CPU (`run_h200.py --dry-run`, the unit tests); their numbers mean nothing for a GPU.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Call = Callable[[], object]


@dataclass
class Timing:
    """median_us: do_bench median (or wall median); graph_us: CUDA-graph per-launch median or None
    (note says why); launches / copies: the graph's size and how many input copies it cycled."""

    median_us: float
    graph_us: float | None
    launches: int
    copies: int
    note: str | None = None


def choose_copies(
    touched_bytes: int,
    alloc_bytes: int,
    l2_bytes: int,
    *,
    l2_multiple: float = 3.0,
    max_copies: int = 1024,
    max_alloc_bytes: int = 4 << 30,
) -> int:
    """Input copies to rotate so that copies * touched_bytes >= l2_multiple * L2 (each launch finds
    its inputs evicted), within max_copies and max_alloc_bytes of allocation; never fewer than 2,
    so two consecutive launches never read the same buffers."""
    if touched_bytes <= 0 or alloc_bytes <= 0 or l2_bytes <= 0:
        raise ValueError(
            f"byte counts must be > 0, got touched={touched_bytes}, alloc={alloc_bytes}, l2={l2_bytes}"
        )
    want = math.ceil(l2_multiple * l2_bytes / touched_bytes)
    fit = max_alloc_bytes // alloc_bytes
    return max(2, min(want, max_copies, fit))


def choose_launches(
    est_us: float,
    copies: int,
    *,
    target_ms: float = 10.0,
    max_launches: int = 4096,
    max_graph_ms: float = 50.0,
) -> tuple[int, int]:
    """(launches, copies_used) for one CUDA graph: about target_ms of work, every copy used equally
    often (launches is a multiple of copies_used), and a graph no longer than max_graph_ms, which
    for slow calls means cycling fewer copies (slow calls evict the L2 by themselves)."""
    if not est_us > 0:
        raise ValueError(f"est_us must be > 0, got {est_us!r}")
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    used = max(1, min(copies, int(max_graph_ms * 1e3 // est_us)))
    used = min(used, max_launches)
    launches = max(used, math.ceil(target_ms * 1e3 / est_us))
    launches = math.ceil(launches / used) * used
    if launches > max_launches:
        launches = (max_launches // used) * used
    return launches, used


class GraphRunner:
    """One CUDA graph of `launches` calls cycling over `calls`; `replay_us()` times one replay."""

    def __init__(self, calls: Sequence[Call], launches: int):
        import torch

        self.launches = launches
        self.samples_us: list[float] = []
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            for i in range(launches):
                calls[i % len(calls)]()
        self.graph.replay()
        torch.cuda.synchronize()

    def replay_us(self) -> float:
        """Replay once; device time per launch in microseconds (CUDA events around the replay)."""
        import torch

        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        self.graph.replay()
        end.record()
        end.synchronize()
        us = start.elapsed_time(end) * 1e3 / self.launches
        self.samples_us.append(us)
        return us


def warm_up_cuda(calls: Sequence[Call]) -> None:
    """Compile and autotune outside any timing or capture: call the first copy twice and the last
    once on a side stream (what torch.cuda.graph's documentation asks before capture), then wait."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for call in (calls[0], calls[0], calls[-1]):
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


@dataclass
class CudaTimer:
    """do_bench median + CUDA-graph replays (module docstring). do_bench's warmup/rep are time
    budgets in milliseconds, not counts."""

    do_bench_warmup_ms: int = 25
    do_bench_rep_ms: int = 100
    graph_target_ms: float = 10.0
    graph_replays: int = 20

    def time(self, calls: Sequence[Call]) -> Timing:
        import torch

        warm_up_cuda(calls)
        median_us = self.do_bench_us(calls[0])
        launches, used = choose_launches(median_us, len(calls), target_ms=self.graph_target_ms)
        try:
            runner = self.graph_runner(calls[:used], launches)
            graph_us = statistics.median(runner.replay_us() for _ in range(self.graph_replays))
            note = None
        except Exception as exc:  # a provider that cannot be captured still has its do_bench time
            torch.cuda.synchronize()
            graph_us, note = None, f"CUDA-graph capture failed: {type(exc).__name__}: {exc}"[:300]
        return Timing(median_us, graph_us, launches, used, note)

    def do_bench_us(self, call: Call) -> float:
        """triton.testing.do_bench median of `call` in microseconds (L2 cleared before each call)."""
        import triton.testing

        median_ms = triton.testing.do_bench(
            call, warmup=self.do_bench_warmup_ms, rep=self.do_bench_rep_ms, return_mode="median"
        )
        return float(median_ms) * 1e3

    @staticmethod
    def graph_runner(calls: Sequence[Call], launches: int) -> GraphRunner:
        return GraphRunner(calls, launches)


def measure_copy_bandwidth_cuda(nbytes: int = 1 << 30, reps: int = 30) -> float:
    """Device copy bandwidth in bytes/s: bytes read + written by an nbytes device-to-device copy
    over the median of `reps` event-timed copies."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    pairs = [
        (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)
    ]
    for start, end in pairs:
        start.record()
        dst.copy_(src)
        end.record()
    torch.cuda.synchronize()
    ms = statistics.median(start.elapsed_time(end) for start, end in pairs)
    moved = 2 * src.numel() * src.element_size()
    del src, dst
    return moved / (ms * 1e-3)


@dataclass
class WallTimer:
    """Host-clock median over `reps` calls cycling the copies (CPU dry runs and tests only)."""

    reps: int = 5

    def time(self, calls: Sequence[Call]) -> Timing:
        calls[0]()
        samples = []
        for i in range(self.reps):
            t0 = time.perf_counter()
            calls[i % len(calls)]()
            samples.append((time.perf_counter() - t0) * 1e6)
        return Timing(statistics.median(samples), None, 0, len(calls), "wall clock (no GPU)")


def measure_copy_bandwidth_wall(nbytes: int = 64 << 20, reps: int = 5) -> float:
    """Host memory copy bandwidth in bytes/s (read + written), the CPU stand-in for the floor."""
    import torch

    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        dst.copy_(src)
        samples.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(samples)
