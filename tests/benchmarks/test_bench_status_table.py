"""benchmarks/diagnostics/status_table.py: each target's row combines several processes by their
median, takes the better bare read, shares the floor against zero_pause_us, judges the issue's
criterion on do_bench and on zero_pause, and marks do_bench readings the host set."""

import json

from benchmarks.diagnostics.status_table import main, status_rows

BW = 4.0  # TB/s: chain (1, 4, 32000) reads 2 * 32000 * 4 bytes -> floor 0.064 µs


def _ours(label, do_bench, pause, graph, case="chain-B1-K4-V32000-float32"):
    return dict(label=label, case=case, median_us=do_bench, zero_pause_us=pause, graph_us=graph)


READ = [
    {"copy_bandwidth_tb_s": BW},
    {"case": "chain-B1-K4-V32000-float32", "reader": "read_1w", "median_us": 7.0},
    {"case": "chain-B1-K4-V32000-float32", "reader": "read_4w", "median_us": 5.1},
    {"case": "chain-B1-K4-V32000-float32", "reader": "empty", "median_us": 3.4},  # not a read
    {"case": "fast_sample-B256-K0-V128256-float32", "reader": "read_4w", "median_us": 38.0},
]


def test_rows_combine_processes_and_judge_the_criterion():
    ours = [_ours("head", 9.0, 9.5, 6.0), _ours("head", 11.0, 10.5, 7.0), _ours("head", 10.5, 10.0, 6.5),
            _ours("head", 43.0, 42.0, 34.0, case="fast_sample-B256-K0-V128256-float32")]  # fmt: skip
    rows = {r["case"]: r for r in status_rows(READ, ours)}
    chain = rows["chain-B1-K4-V32000-float32"]
    assert (chain["do_bench"], chain["zero_pause"], chain["graph"]) == (10.5, 10.0, 6.5)  # medians
    assert chain["bare_read"] == 5.1  # the better pure read, not the empty kernel
    assert abs(chain["floor"] - 2 * 32000 * 4 / (BW * 1e12) * 1e6) < 1e-12
    assert chain["met"] is False and chain["met_pause"] is True  # 10.5 > 10 >= 10.0
    assert chain["host_bound"] is False  # 0.5 µs above zero_pause: within max(1 µs, 5%)
    fast = rows["fast_sample-B256-K0-V128256-float32"]
    floor = 256 * 128256 * 4 / (BW * 1e12) * 1e6  # 32.8 µs
    assert abs(fast["share"] - floor / 42.0) < 1e-12
    assert fast["met"] is True  # 43 <= 44 and 32.8 / 43 >= 0.70
    assert rows["chain-B16-K4-V128256-float32"]["met"] is None  # not measured


def test_label_filter(tmp_path, capsys):
    rf, ab = tmp_path / "rf.jsonl", tmp_path / "ab.jsonl"
    rf.write_text("\n".join(json.dumps(r) for r in READ))
    both = (_ours("base", 9.0, 9.0, 6.0), _ours("new", 12.0, 12.0, 8.0))
    ab.write_text("\n".join(json.dumps(r) for r in both))
    assert main(["--read-floor", str(rf), "--ab", str(ab), "--label", "base"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "chain-B1-K4-V32000" in ln)
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[3:6] == ["9.0", "9.0", "6.0"] and cells[-2:] == ["yes", "yes"]


def test_host_set_do_bench_is_marked(tmp_path, capsys):
    """A do_bench 2 µs (> 5%) above zero_pause is the host's; 1 µs above (10%) is not marked."""
    rows = {r["case"]: r for r in status_rows(READ, [_ours("head", 12.0, 10.0, 6.0)])}
    assert rows["chain-B1-K4-V32000-float32"]["host_bound"] is True
    rows = {r["case"]: r for r in status_rows(READ, [_ours("head", 10.9, 9.9, 6.0)])}
    assert rows["chain-B1-K4-V32000-float32"]["host_bound"] is False
    rf, ab = tmp_path / "rf.jsonl", tmp_path / "ab.jsonl"
    rf.write_text("\n".join(json.dumps(r) for r in READ))
    ab.write_text(json.dumps(_ours("head", 67.7, 9.9, 6.8)))
    assert main(["--read-floor", str(rf), "--ab", str(ab)]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "chain-B1-K4-V32000" in ln)
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[3] == "67.7 (host)" and cells[-2:] == ["no", "yes"]
