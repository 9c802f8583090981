"""The benchmark harness: time every provider of a case on the device and turn the timings into records.

    session = BenchSession.create()            # CUDA: measures the copy bandwidth once per run
    records, skips = session.measure(case, providers_for(case.kernel))

For each case the inputs are generated once (benchmarks/inputs.py) and cloned into enough copies that
the bytes a launch must read, summed over the copies, exceed the L2 cache three times
(timing.choose_copies); every provider is timed on the same copies (timing.CudaTimer: do_bench median
and CUDA-graph replays), and each timing becomes a Record with its floor (records.make_record).
A provider that cannot run (not importable, unsupported dtype, error, out of memory) becomes a Skip
with the reason; nothing aborts the run.

`BenchSession.create(dry_run=True)` runs the same pipeline on the CPU with host-clock timers and
CPU tensors: it exercises everything but the device timing (tests, `run_h200.py --dry-run`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from benchmarks.floors import Case, must_read_bytes
from benchmarks.inputs import allocated_bytes, clone_inputs, make_inputs
from benchmarks.machine import gpu_name, l2_cache_bytes
from benchmarks.providers import Provider, slowed_kernels
from benchmarks.records import OURS, Record, make_record
from benchmarks.timing import (
    CudaTimer,
    WallTimer,
    choose_copies,
    measure_copy_bandwidth_cuda,
    measure_copy_bandwidth_wall,
)


@dataclass
class Skip:
    """A (case, provider) that produced no record, and why."""

    case: str
    provider: str
    reason: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class BenchSession:
    device: str
    timer: CudaTimer | WallTimer
    copy_bandwidth: float  # bytes/s, read + written
    gpu: str
    l2_bytes: int
    rotate: bool = True

    @classmethod
    def create(cls, *, dry_run: bool = False) -> BenchSession:
        """A CUDA session (copy bandwidth measured now), or with dry_run a CPU stand-in."""
        if dry_run:
            return cls("cpu", WallTimer(), measure_copy_bandwidth_wall(), "cpu", 60 << 20, rotate=False)
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(
                "no CUDA device: GPU benchmarks cannot run here (use --dry-run to test the pipeline)"
            )
        return cls("cuda", CudaTimer(), measure_copy_bandwidth_cuda(), gpu_name(), l2_cache_bytes())

    def input_copies(self, case: Case) -> list[dict]:
        """The case's inputs and enough clones to rotate past the L2 (one copy without rotation)."""
        first = make_inputs(case, self.device)
        n = 1
        if self.rotate:
            n = choose_copies(must_read_bytes(case), allocated_bytes(first), self.l2_bytes)
        return [first] + [clone_inputs(first) for _ in range(n - 1)]

    def record(self, case: Case, provider: str, median_us: float, graph_us: float | None) -> Record:
        slowed = provider == OURS and case.kernel in slowed_kernels()
        return make_record(
            case,
            provider,
            median_us=median_us,
            graph_us=graph_us,
            copy_bandwidth_bytes_per_s=self.copy_bandwidth,
            gpu=self.gpu,
            slowed=slowed,
        )

    def measure(self, case: Case, providers: list[Provider]) -> tuple[list[Record], list[Skip]]:
        """Time every provider of `case` on shared input copies; records for those that ran."""
        records: list[Record] = []
        skips: list[Skip] = []
        runnable = []
        for p in providers:
            reason = p.unavailable(case)
            if reason:
                skips.append(Skip(case.label, p.name, reason))
            else:
                runnable.append(p)
        if not runnable:
            return records, skips
        try:
            copies = self.input_copies(case)
        except Exception as exc:  # e.g. out of memory at FULL sizes
            self._release()
            return records, skips + [Skip(case.label, p.name, f"inputs: {_why(exc)}") for p in runnable]
        for p in runnable:
            try:
                calls = [p.build(case, x) for x in copies]
                timing = self.timer.time(calls)
                records.append(self.record(case, p.name, timing.median_us, timing.graph_us))
                if timing.note and self.device == "cuda":
                    skips.append(Skip(case.label, p.name, f"graph_us missing: {timing.note}"))
            except Exception as exc:
                skips.append(Skip(case.label, p.name, _why(exc)))
            finally:
                calls = None
                self._release()
        del copies
        self._release()
        return records, skips

    def _release(self) -> None:
        if self.device == "cuda":
            import torch

            try:
                torch.cuda.synchronize()
            finally:
                torch.cuda.empty_cache()


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
