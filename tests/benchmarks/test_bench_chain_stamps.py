"""benchmarks/diagnostics/chain_stamps.py: the stamped copy of the chain kernel, generated from
specsample/kernels/chain.py's source, computes what the production kernel computes (bit for bit), on
the interpreter's one-program grid and on a grid of one-row programs with several chunks per span (the
emit's span path); on a GPU its stamps are in the order the kernel passes them. `timeline` turns stamps
into the documented fields."""

import numpy as np
import pytest
import torch

from benchmarks.diagnostics.chain_stamps import load_stamped_kernel, stamped_call, timeline
from benchmarks.floors import Case
from benchmarks.inputs import make_inputs
from specsample import chain_rejection_sample
from specsample.kernels._launch import interpreting

_SPAN_GRID = (("block_rows", 1), ("block_v", 128), ("tiles", 2))  # 8 chunks of 128, spans of 2


@pytest.fixture(scope="module")
def stamped_kernel(device):
    return load_stamped_kernel(device == "cpu" or interpreting())


@pytest.mark.parametrize("overrides", [(), _SPAN_GRID], ids=["default-grid", "span-grid"])
def test_stamped_kernel_equals_production(device, stamped_kernel, overrides):
    inputs = make_inputs(Case("chain", 3, 2, 1000, "float32"), device)
    p, x, q, u = (inputs[k] for k in ("target_probs", "draft_token_ids", "draft_probs", "uniforms"))
    call, programs, emits, result = stamped_call(stamped_kernel, p, x, q, u, overrides)
    call()
    want = chain_rejection_sample(p, x, q, uniforms=u)
    for got, expected in zip(result, want, strict=True):
        assert torch.equal(got, expected)
    if overrides:
        assert programs.shape == (3 * 4, 5)  # 3 rows x 4 spans of 2 chunks; s0..s3 and the SM
        assert emits.shape == (3, 6)
    if device == "cuda":
        prog = programs.cpu().numpy()
        assert (np.diff(prog[:, :4], axis=1) >= 0).all() and (prog[:, 0] > 0).all()
        assert (np.diff(emits.cpu().numpy(), axis=1) >= 0).all()


def test_timeline_fields():
    # two programs of one row block: starts 1000 / 1100 ns, prologue ends 2000 / 2500, streams end
    # 5000 / 9000, arrivals 5500 / 9600; the emit (the second program) 9700 .. 12000
    programs = np.array([[1000, 2000, 5000, 5500, 7], [1100, 2500, 9000, 9600, 8]], dtype=np.int64)
    emits = np.array([[9700, 10000, 10500, 11100, 11800, 12000]], dtype=np.int64)
    t = timeline(programs, emits)
    assert t["start_last"] == pytest.approx(0.1)
    assert t["prologue_median"] == pytest.approx(1.25) and t["prologue_last"] == pytest.approx(1.5)
    assert t["stream_median"] == pytest.approx(6.0) and t["stream_last"] == pytest.approx(8.0)
    assert t["arrival_last"] == pytest.approx(8.6) and t["emit_entry_last_row"] == pytest.approx(8.7)
    assert t["span_totals_step_last_row"] == pytest.approx(0.3)
    assert t["chunk_located_step_last_row"] == pytest.approx(0.5)
    assert t["reread_step_last_row"] == pytest.approx(0.6)
    assert t["token_step_last_row"] == pytest.approx(0.7)
    assert t["stores_step_last_row"] == pytest.approx(0.2)
    assert t["end"] == pytest.approx(11.0) and t["emit_median"] == pytest.approx(2.3)


def test_main_records_config_and_stamps_that_plan(tmp_path, device):
    # --config is recorded and reaches the stamped call (its grid: 3 rows x 4 spans, where the interpreter's
    # default is one program); the production call under the same plan computes the same outputs
    if device == "cuda":
        pytest.skip("main times 30+ calls per shape on a GPU; the stamped grid is checked above")
    import json

    from benchmarks.diagnostics.chain_stamps import main

    out = tmp_path / "s.jsonl"
    config = [arg for name, value in _SPAN_GRID for arg in ("--config", f"{name}={value}")]
    assert main(["--out", str(out), "--shape", "3:2:1000", *config]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["config"] == dict(_SPAN_GRID)
    assert record["programs"] == 3 * 4
    assert record["equal_to_production"] is True
    with pytest.raises(SystemExit):  # not NAME=INT: a usage error, not a traceback
        main(["--out", str(out), "--config", "tiles"])
