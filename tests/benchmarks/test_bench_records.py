"""Records: derived fields from fake timings, same-run baselines, the three file shapes, targets table."""

import json

import pytest

from benchmarks.floors import Case, must_read_bytes
from benchmarks.records import Record, attach_baselines, load_records, make_record, save_records
from benchmarks.targets import TARGETS, evaluate, targets_markdown

BW = 4.0e12  # bytes/s
GPU = "NVIDIA H200"


def rec(case, provider, median_us, graph_us=None, **kw):
    return make_record(
        case, provider, median_us=median_us, graph_us=graph_us, copy_bandwidth_bytes_per_s=BW, gpu=GPU, **kw
    )


def test_make_record_derives_floor_fraction_and_bandwidth():
    case = Case("chain", 64, 4, 151936, "float32")
    r = rec(case, "specsample", 40.0, graph_us=30.0)
    nbytes = 2 * 64 * 151936 * 4
    assert r.must_read_bytes == nbytes == must_read_bytes(case)
    assert r.floor_us == pytest.approx(nbytes / BW * 1e6)
    assert r.floor_fraction == pytest.approx(r.floor_us / 40.0)
    assert r.graph_floor_fraction == pytest.approx(r.floor_us / 30.0)
    assert r.bandwidth_GBps == pytest.approx(nbytes / 40e-6 / 1e9)
    assert r.copy_bandwidth_GBps == pytest.approx(4000.0)
    assert (r.baseline, r.baseline_median_us, r.speedup) == (None, None, None)
    assert r.key == ("chain", "specsample", 64, 4, 151936, "float32")


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_make_record_rejects_nonpositive_times(bad):
    case = Case("fast_sample", 1, 0, 100, "float32")
    with pytest.raises(ValueError, match="median_us must be > 0"):
        rec(case, "specsample", bad)
    with pytest.raises(ValueError, match="graph_us must be > 0"):
        rec(case, "specsample", 1.0, graph_us=bad)


def test_attach_baselines_uses_each_kernels_torch_provider():
    chain = Case("chain", 16, 4, 128256, "float32")
    fast = Case("fast_sample", 64, 0, 151936, "float32")
    lonely = Case("logits", 64, 4, 151936, "bfloat16")
    records = [
        rec(chain, "specsample", 10.0),
        rec(chain, "torch", 400.0),
        rec(chain, "flashinfer", 50.0),
        rec(fast, "specsample", 12.0),
        rec(fast, "torch_multinomial", 150.0),
        rec(fast, "torch_gumbel", 96.0),
        rec(lonely, "specsample", 70.0),
    ]
    attach_baselines(records)
    ours_chain, torch_chain, fi_chain, ours_fast, multinomial, gumbel, ours_lonely = records
    assert (ours_chain.baseline, ours_chain.baseline_median_us, ours_chain.speedup) == ("torch", 400.0, 40.0)
    assert torch_chain.baseline is None and torch_chain.speedup is None
    assert fi_chain.baseline == "torch" and fi_chain.speedup == pytest.approx(8.0)
    assert (ours_fast.baseline, ours_fast.baseline_median_us) == ("torch_gumbel", 96.0)
    assert ours_fast.speedup == pytest.approx(8.0)
    assert multinomial.baseline == "torch_gumbel"
    assert gumbel.baseline is None
    assert (ours_lonely.baseline, ours_lonely.baseline_median_us, ours_lonely.speedup) == (
        "torch",
        None,
        None,
    )


def test_records_round_trip_through_all_three_file_shapes(tmp_path):
    records = attach_baselines(
        [
            rec(Case("chain", 1, 4, 32000, "float32"), p, t, graph_us=t / 2)
            for p, t in (("specsample", 5.0), ("torch", 600.0))
        ]
    )
    machine = {"gpu": GPU, "torch": "2.11"}
    bare = save_records(tmp_path / "a.json", records)
    with_machine = save_records(tmp_path / "sub" / "b.json", records, machine)
    report = tmp_path / "c.json"
    report.write_text(
        json.dumps(
            {
                "machine_info": machine,
                "benchmarks": [{"name": "x", "extra_info": {"record": r.to_dict()}} for r in records]
                + [{"name": "no record", "extra_info": {}}],
            }
        )
    )
    for path, want_machine in ((bare, {}), (with_machine, machine), (report, machine)):
        got, got_machine = load_records(path)
        assert got == records
        assert got_machine == want_machine
    assert isinstance(json.loads(bare.read_text()), list)


def test_load_records_rejects_other_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"something": 1}))
    with pytest.raises(ValueError, match="not a records list"):
        load_records(path)
    path.write_text(json.dumps([{"kernel": "chain"}]))
    with pytest.raises(ValueError, match="missing fields"):
        load_records(path)


def test_targets_table_judges_time_and_floor_targets():
    t_time = next(t for t in TARGETS if t.case == Case("chain", 64, 4, 151936, "float32"))  # <= 26 us
    t_both = next(
        t for t in TARGETS if t.case == Case("fast_sample", 256, 0, 128256, "float32")
    )  # <= 44, 70%
    # at 8 TB/s the fast_sample floor is 16.4 us: 30 us meets "<= 44 us" but is only 55% of the floor
    fast = make_record(
        t_both.case, "specsample", median_us=30.0, graph_us=None, copy_bandwidth_bytes_per_s=8e12, gpu=GPU
    )
    assert fast.floor_us == pytest.approx(must_read_bytes(t_both.case) / 8e12 * 1e6)
    assert fast.floor_fraction < 0.7
    records = attach_baselines([rec(t_time.case, "specsample", 25.0), rec(t_time.case, "torch", 500.0), fast])
    rows = {row.target.case: row for row in evaluate(TARGETS, records)}
    assert rows[t_time.case].meets is True
    assert rows[t_time.case].baselines == {"torch": 500.0}
    assert rows[t_both.case].meets is False
    assert all(row.meets is None for case, row in rows.items() if case not in (t_time.case, t_both.case))
    text = targets_markdown(list(rows.values()))
    assert "torch 500.0 (20.0x)" in text
    assert "| NO |" in text and "| yes |" in text and "not measured" in text


def test_record_from_dict_ignores_unknown_fields():
    r = rec(Case("chain", 1, 1, 10, "float32"), "specsample", 1.0)
    d = r.to_dict() | {"future_field": 3}
    assert Record.from_dict(d) == r
