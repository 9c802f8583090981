"""pytest configuration of the GPU benchmark suites (bench_*.py).

- bench_*.py files are collected as test modules (pyproject's python_files only names test_*.py).
- Without a CUDA device, or with TRITON_INTERPRET=1, every benchmark is skipped with the reason:
  the interpreter's speed means nothing. The harness itself is unit-tested on CPU in tests/benchmarks.
- pytest-benchmark's machine info gains the GPU name, SM count, driver, CUDA, torch and triton
  versions and the commit (pytest-benchmark's own machine id knows nothing about the GPU).
- At the end of the session the records of every benchmark, with same-run baselines attached, are
  written to $SPECSAMPLE_BENCH_RECORDS (default .benchmarks/records.json) as
  {"machine": ..., "records": [...], "skipped": [...]}: the input of benchmarks/compare.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).resolve().parent
RECORDS_ENV = "SPECSAMPLE_BENCH_RECORDS"
DEFAULT_RECORDS = BENCH_DIR.parent / ".benchmarks" / "records.json"


def _skip_reason() -> str | None:
    try:
        import torch
    except ImportError as exc:
        return f"torch not importable: {exc}"
    if not torch.cuda.is_available():
        return "benchmarks time the GPU and there is no CUDA device (tests/benchmarks unit-tests the harness)"
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return "TRITON_INTERPRET=1: benchmarks would time the Triton interpreter, which means nothing"
    return None


SKIP_REASON = _skip_reason()


def pytest_collect_file(file_path, parent):
    if file_path.suffix == ".py" and file_path.name.startswith("bench_") and file_path.parent == BENCH_DIR:
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config, items):
    if SKIP_REASON is None:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if BENCH_DIR in Path(item.path).resolve().parents:
            item.add_marker(skip)


def pytest_benchmark_update_machine_info(config, machine_info):
    from benchmarks.machine import machine_info as specsample_machine_info

    machine_info.update({f"specsample_{k}": v for k, v in specsample_machine_info().items()})
    machine_info["gpu"] = machine_info["specsample_gpu"]


@pytest.fixture(scope="session")
def bench_session():
    """One BenchSession per pytest session: the device copy bandwidth is measured once, up front."""
    from benchmarks.harness import BenchSession

    return BenchSession.create()


@pytest.fixture(autouse=True)
def _free_device_memory():
    """Give each benchmark's graphs and input copies back to the device before the next one."""
    yield
    if SKIP_REASON is None:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()


def pytest_sessionfinish(session, exitstatus):
    from benchmarks import suite

    if not suite.RECORDS and not suite.SKIPS and SKIP_REASON is not None:
        payload_skipped = [{"case": "*", "provider": "*", "reason": SKIP_REASON}]
    else:
        payload_skipped = [s.to_dict() for s in suite.SKIPS]
    from benchmarks.machine import machine_info
    from benchmarks.records import attach_baselines

    records = attach_baselines(list(suite.RECORDS))
    path = Path(os.environ.get(RECORDS_ENV, DEFAULT_RECORDS))
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": machine_info(),
        "records": [r.to_dict() for r in records],
        "skipped": payload_skipped,
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
