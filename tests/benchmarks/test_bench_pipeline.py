"""The whole pipeline on the CPU with host-clock timers: harness session -> records -> run_h200 outputs.
Only the plain-PyTorch providers run here (ours under the interpreter would only measure the interpreter)."""

import json
import os

import pytest

from benchmarks import run_h200
from benchmarks.floors import Case
from benchmarks.harness import BenchSession
from benchmarks.providers import PROVIDERS, Provider, providers_for
from benchmarks.records import load_records


@pytest.fixture(scope="module")
def session():
    return BenchSession.create(dry_run=True)


def test_session_measures_available_providers_and_skips_the_rest_with_reasons(session):
    assert session.device == "cpu" and session.copy_bandwidth > 0
    case = Case("chain", 2, 2, 64, "float32")
    names = ("torch", "sglang", "vllm", "flashinfer")
    records, skips = session.measure(case, providers_for(case.kernel, names))
    assert [r.provider for r in records] == ["torch"]
    assert records[0].median_us > 0 and records[0].graph_us is None and records[0].gpu == "cpu"
    assert {s.provider for s in skips} == {"sglang", "vllm", "flashinfer"}
    assert all(s.reason and s.case == case.label for s in skips)


def test_session_turns_a_provider_error_into_a_skip(session):
    case = Case("fast_sample", 2, 0, 64, "float32")

    def broken(case, x):
        raise RuntimeError("kernel exploded")

    provider = Provider("broken", ("fast_sample",), broken, lambda case: None)
    records, skips = session.measure(case, [provider, PROVIDERS["torch_multinomial"]])
    assert [r.provider for r in records] == ["torch_multinomial"]
    assert [(s.provider, s.reason) for s in skips] == [("broken", "RuntimeError: kernel exploded")]


def test_run_h200_dry_run_writes_results_baseline_and_targets(tmp_path, capsys, monkeypatch):
    # --dry-run does os.environ.setdefault("TRITON_INTERPRET", "1"): pin the variable so that a GPU
    # test session is not switched to the interpreter by this test (monkeypatch restores it)
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    out = tmp_path / "out"
    argv = ["--dry-run", "--out", str(out), "--only", "chain,fast_sample", "--no-plot"]
    assert run_h200.main(argv + ["--providers", "torch,torch_gumbel,torch_multinomial,flashinfer"]) == 0
    records, _ = load_records(out / "cpu.json")
    assert {(r.kernel, r.provider) for r in records} == {
        ("chain", "torch"),
        ("fast_sample", "torch_gumbel"),
        ("fast_sample", "torch_multinomial"),
    }
    multinomial = [r for r in records if r.provider == "torch_multinomial"]
    assert all(r.baseline == "torch_gumbel" and r.speedup is not None for r in multinomial)
    base_records, machine = load_records(out / "baselines" / "cpu" / "baseline.json")
    assert base_records == records and machine["gpu"] == "cpu" and machine["copy_bandwidth_GBps"] > 0
    skipped = json.loads((out / "bench_skipped.json").read_text())
    assert {s["provider"] for s in skipped} == {"flashinfer"}
    assert (out / "bench_targets.md").read_text().count("| 4 | chain |") == 4
    printed = capsys.readouterr().out
    assert "median_us" in printed and "floor_frac" in printed and "not measured" in printed
