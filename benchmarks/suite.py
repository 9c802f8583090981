"""What every pytest-benchmark test does: time one (case, provider) as CUDA-graph replays.

`benchmark.pedantic` times `GraphRunner.replay_us` (one replay of a CUDA graph holding many launches
over rotated input copies, then a sync on its end event), so the host-timed round is dominated by
GPU work; the per-launch GPU microseconds from CUDA events go to extra_info["gpu_us_per_launch"]
(median over the rounds), with the do_bench median and the whole record (benchmarks/records.py) in
extra_info["record"]. Records are also collected in RECORDS, which benchmarks/conftest.py writes to
the records file the regression gate reads.

Selection: benchmarks/shapes.py "target" shapes, every shape when SPECSAMPLE_BENCH_FULL=1.
"""

from __future__ import annotations

import statistics

import pytest

from benchmarks.harness import BenchSession, Skip
from benchmarks.providers import PROVIDERS, providers_for
from benchmarks.records import Record
from benchmarks.shapes import full_requested, selected_cases
from benchmarks.timing import CudaTimer, GraphRunner, choose_launches, warm_up_cuda

ROUNDS = 20
WARMUP_ROUNDS = 2
RECORDS: list[Record] = []
SKIPS: list[Skip] = []


def params(kernels: tuple[str, ...]) -> list:
    """pytest params (case, provider name) for `kernels`, id '<case label>-<provider>'."""
    out = []
    for case in selected_cases("target", full=full_requested(), kernels=kernels):
        for p in providers_for(case.kernel):
            out.append(pytest.param(case, p.name, id=f"{case.label}-{p.name}"))
    return out


def run_benchmark(benchmark, session: BenchSession, case, provider_name: str) -> Record:
    """Time `provider_name` on `case` (module docstring); pytest.skip with the reason when it cannot run."""
    provider = PROVIDERS[provider_name]
    reason = provider.unavailable(case)
    if reason:
        SKIPS.append(Skip(case.label, provider_name, reason))
        pytest.skip(reason)
    benchmark.group = case.label
    timer = session.timer
    if not isinstance(timer, CudaTimer):
        raise TypeError(f"the pytest suite times the GPU; session timer is {type(timer).__name__}")
    copies = session.input_copies(case)
    calls = [provider.build(case, x) for x in copies]
    warm_up_cuda(calls)
    median_us = timer.do_bench_us(calls[0])
    launches, used = choose_launches(median_us, len(calls), target_ms=timer.graph_target_ms)
    try:
        runner = GraphRunner(calls[:used], launches)
    except Exception as exc:
        record = session.record(case, provider_name, median_us, None)
        RECORDS.append(record)
        why = f"not CUDA-graph capturable: {type(exc).__name__}: {exc}"[:300]
        SKIPS.append(Skip(case.label, provider_name, why))
        pytest.skip(f"{why} (do_bench median {median_us:.1f} us recorded)")
    benchmark.pedantic(runner.replay_us, rounds=ROUNDS, warmup_rounds=WARMUP_ROUNDS, iterations=1)
    graph_us = statistics.median(runner.samples_us[-ROUNDS:])
    record = session.record(case, provider_name, median_us, graph_us)
    RECORDS.append(record)
    benchmark.extra_info.update(
        gpu_us_per_launch=graph_us,
        do_bench_median_us=median_us,
        floor_us=record.floor_us,
        floor_fraction=record.floor_fraction,
        launches_per_graph=launches,
        input_copies=used,
        record=record.to_dict(),
    )
    return record
