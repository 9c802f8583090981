"""The regression gate (benchmarks/compare.py) on synthetic records, and the slowed provider it must catch."""

import pytest

from benchmarks import compare as gate
from benchmarks import providers
from benchmarks.floors import Case
from benchmarks.records import make_record, save_records

H200 = "NVIDIA H200"
CASES = [
    Case("chain", 64, 4, 151936, "float32"),
    Case("fast_sample", 1, 0, 151936, "float32"),
    Case("logits", 128, 8, 128256, "bfloat16"),
]


def run(scale=None, gpu=H200, torch_scale=1.0, graph=True, cases=CASES):
    """Synthetic run: ours at 10*(j+1) us for CASES[j] (times scale[i] for the i-th of `cases`),
    torch 50x slower (times torch_scale)."""
    scale = scale or [1.0] * len(cases)
    out = []
    for i, case in enumerate(cases):
        j = CASES.index(case) + 1
        for provider, base, s in (("specsample", 10.0 * j, scale[i]), ("torch", 500.0 * j, torch_scale)):
            t = base * s
            out.append(
                make_record(
                    case,
                    provider,
                    median_us=t,
                    graph_us=t * 0.8 if graph else None,
                    copy_bandwidth_bytes_per_s=4.2e12,
                    gpu=gpu,
                )
            )
    return out


def test_unchanged_and_small_noise_pass():
    assert not gate.compare(run(), run()).failed
    result = gate.compare(run([1.05, 0.9, 1.099]), run())
    assert not result.failed
    assert len(result.compared) == len(CASES)  # graph_us (device time) for each of ours


def test_regression_over_ten_percent_fails_on_the_right_record():
    result = gate.compare(run([1.0, 1.11, 1.0]), run())
    assert result.failed
    assert {(c.key[0], c.metric) for c in result.regressions} == {("fast_sample", "graph_us")}
    assert all(c.ratio == pytest.approx(1.11) for c in result.regressions)


def test_twice_slower_kernel_fails():
    """What the SPECSAMPLE_BENCH_SLOWED=chain demonstration produces: our chain at 2x."""
    result = gate.compare(run([2.0, 1.0, 1.0]), run())
    assert result.failed and {c.key[0] for c in result.regressions} == {"chain"}


def test_threshold_is_strict_and_configurable():
    assert not gate.compare(run([1.10, 1, 1]), run()).failed  # exactly +10% is not "> 10%"
    assert gate.compare(run([1.06, 1, 1]), run(), threshold=0.05).failed
    with pytest.raises(ValueError, match="threshold"):
        gate.compare(run(), run(), threshold=-0.1)
    with pytest.raises(ValueError, match="unknown metric"):
        gate.compare(run(), run(), metrics=("p99_us",))


def test_only_gated_providers_and_present_metrics_count():
    assert not gate.compare(run(torch_scale=3.0), run()).failed  # torch got slower: not our regression
    assert gate.compare(run(torch_scale=3.0), run(), providers=("specsample", "torch")).failed
    result = gate.compare(run([1.5, 1, 1], graph=False), run(), metrics=("median_us",))
    assert result.failed and {c.metric for c in result.compared} == {"median_us"}


def test_eager_launch_jitter_is_not_gated_by_default():
    """H200 run 6: an unchanged rerun moved do_bench's eager median by up to 1.9x (Python launch
    path) but graph_us by <= 2.5%; the default gate looks at graph_us only, both when asked."""
    current = run()
    for r in current:
        r.median_us *= 1.9
    assert not gate.compare(current, run()).failed
    assert gate.compare(current, run(), metrics=("median_us", "graph_us")).failed


def test_missing_and_new_records_are_reported_not_failed():
    result = gate.compare(run(cases=CASES[:2]), run(cases=CASES[1:]))
    assert not result.failed
    assert [k[0] for k in result.missing] == ["logits"]
    assert [k[0] for k in result.new] == ["chain"]
    text = gate.report(result)
    assert "missing from this run" in text and "new in this run" in text


def _baseline_dir(tmp_path, records, gpu=H200):
    path = tmp_path / "baselines" / "h200" / "baseline.json"
    save_records(path, records, {"gpu": gpu})
    return tmp_path / "baselines"


def test_cli_exit_codes(tmp_path, capsys):
    bdir = _baseline_dir(tmp_path, run())
    same = save_records(tmp_path / "same.json", run([1.02, 0.97, 1.0]))
    slow = save_records(tmp_path / "slow.json", run([2.0, 1.0, 1.0]))
    assert gate.main([str(same), "--baseline-dir", str(bdir)]) == 0
    assert gate.main([str(slow), "--baseline-dir", str(bdir)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "FAIL: 1 regression(s)" in out  # graph_us of the slowed chain
    assert gate.main([str(slow), "--baseline-dir", str(bdir), "--threshold", "1.5"]) == 0


def test_cli_never_compares_across_gpu_models(tmp_path):
    h100 = save_records(tmp_path / "h100.json", run(gpu="NVIDIA H100 80GB HBM3"))
    wrong = tmp_path / "wrong.json"
    save_records(wrong, run(gpu="NVIDIA H100 80GB HBM3"), {"gpu": "NVIDIA H100 80GB HBM3"})
    bdir = _baseline_dir(tmp_path, run())
    # the H100 run looks under baselines/h100-80gb-hbm3/: none there
    assert gate.main([str(h100), "--baseline-dir", str(bdir)]) == 0
    assert gate.main([str(h100), "--baseline-dir", str(bdir), "--require-baseline"]) == 2
    # an explicit baseline from another GPU model is refused
    assert gate.main([str(h100), "--baseline", str(bdir / "h200" / "baseline.json")]) == 2
    mixed = save_records(tmp_path / "mixed.json", run() + run(gpu="NVIDIA H100 80GB HBM3", cases=CASES[:1]))
    assert gate.main([str(mixed), "--baseline-dir", str(bdir)]) == 2
    assert wrong.exists()


def test_cli_cpu_run_and_empty_gpu_run(tmp_path):
    bdir = _baseline_dir(tmp_path, run())
    cpu = tmp_path / "cpu.json"
    save_records(cpu, [], {"gpu": "cpu"})
    assert gate.main([str(cpu), "--baseline-dir", str(bdir)]) == 0
    empty_gpu = tmp_path / "empty.json"
    save_records(empty_gpu, [], {"gpu": H200})
    assert gate.main([str(empty_gpu), "--baseline-dir", str(bdir)]) == 1  # measured nothing it should have
    partial = save_records(tmp_path / "partial.json", run(cases=CASES[:1]))
    assert gate.main([str(partial), "--baseline-dir", str(bdir)]) == 0
    assert gate.main([str(partial), "--baseline-dir", str(bdir), "--require-all"]) == 1
    assert gate.main([str(tmp_path / "absent.json"), "--baseline-dir", str(bdir)]) == 2


def test_slowed_provider_calls_our_launcher_twice(monkeypatch):
    """SPECSAMPLE_BENCH_SLOWED makes the "specsample" provider do the work twice, nothing else."""
    calls = []
    monkeypatch.setattr(providers, "_ours_function", lambda kernel: lambda *a, **k: calls.append(kernel))
    case = Case("chain", 2, 1, 8, "float32")
    names = ("target_probs", "draft_token_ids", "draft_probs", "uniforms", "target_logits", "temperature")
    x = dict.fromkeys(names + ("seeds", "offsets"))
    ours = providers.PROVIDERS["specsample"]
    monkeypatch.delenv(providers.SLOWED_ENV, raising=False)
    ours.build(case, x)()
    assert calls == ["chain"]
    monkeypatch.setenv(providers.SLOWED_ENV, "chain,fast_sample")
    calls.clear()
    ours.build(case, x)()
    assert calls == ["chain", "chain"]
    calls.clear()
    ours.build(
        Case("logits", 2, 1, 8, "float32"), x | {"temperature": None, "seeds": None, "offsets": None}
    )()
    assert calls == ["logits"]  # not named: not slowed
    monkeypatch.setenv(providers.SLOWED_ENV, "all")
    assert providers.slowed_kernels() == frozenset(providers.KERNELS)
    monkeypatch.setenv(providers.SLOWED_ENV, "chian")
    with pytest.raises(ValueError, match="unknown kernels"):
        providers.slowed_kernels()
