"""benchmarks/diagnostics/host_breakdown.py: the parts it times rebuild the repeat call (the decomposed
path returns what the call returns, classic and one-hot), a planted difference is reported, and the script
writes one row per case with every part."""

import json

import pytest

from benchmarks.diagnostics import host_breakdown
from benchmarks.diagnostics.ab_device_time import parse_case
from benchmarks.floors import Case
from benchmarks.inputs import make_inputs

SMALL = ("logits:3:2:70:float32", "logits_onehot:3:2:70:bfloat16")
PARTS = ("call", "signature", "memo_get", "empty_result", "empty_one", "kernel_args", "launches")


def _inputs(text, device):
    return make_inputs(Case(*parse_case(text)), device)


@pytest.mark.parametrize("text", SMALL)
def test_decomposed_equals_the_call(text, device):
    x = _inputs(text, device)
    host_breakdown._call(x)  # the first call is remembered: the repeat path exists
    host_breakdown.check_decomposed(x)


def test_a_changed_result_is_reported(device, monkeypatch):
    x = _inputs(SMALL[1], device)
    host_breakdown._call(x)
    real = host_breakdown.decomposed

    def off_by_one(x):
        result = real(x)
        result.tokens[0, 0] += 1
        return result

    monkeypatch.setattr(host_breakdown, "decomposed", off_by_one)
    with pytest.raises(AssertionError, match="tokens"):
        host_breakdown.check_decomposed(x)


def test_main_writes_every_part(tmp_path, device):
    out = tmp_path / "host.jsonl"
    argv = ["--out", str(out), "--case", SMALL[1], "--calls", "1", "--rounds", "1", "--device", str(device)]
    assert host_breakdown.main(argv) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["case"] == SMALL[1] and all(row[f"{p}_us"] > 0 for p in PARTS)
