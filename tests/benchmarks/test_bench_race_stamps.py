"""benchmarks/diagnostics/race_stamps.py: the stamped copy of the classic logits race kernel, generated from
specsample/kernels/logits.py's source, computes what the production kernel computes (bit for bit) on a grid of
one-row programs of four 256-token tiles (the screened race, the shared threshold, with race_tau_lazy and
race_noise_once on and off, and the streamed race); it counts the tiles a program read and the request block's
merging program; on a GPU its stamps are in the order the kernel passes them. `timeline` turns stamps into the
documented fields."""

import json

import numpy as np
import pytest
import torch

from benchmarks.diagnostics.race_stamps import (
    STAMPS,
    WORDS,
    load_stamped_kernel,
    race_grid,
    stamping,
    timeline,
)
from benchmarks.floors import Case
from benchmarks.inputs import make_inputs
from specsample.kernels import logits as kl
from specsample.kernels._launch import interpreting

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

_GRID = {"race_block": 256, "race_tiles": 4, "race_rows": 1, "race_screen": True}  # 4 programs per row
CONFIGS = {
    "screened": _GRID,
    "atomic-tau-noise-drawn": {**_GRID, "race_tau_lazy": False, "race_noise_once": False},
    "streamed": {**_GRID, "race_screen": False},
}


@pytest.fixture(scope="module")
def stamped_kernel(device):
    return load_stamped_kernel(device == "cpu" or interpreting())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_stamped_kernel_equals_production(device, stamped_kernel, name):
    config = CONFIGS[name]
    x = make_inputs(Case("logits", 8, 2, 4096, "float32"), device)
    blocks, chunks, tiles = race_grid(x, config)
    assert (blocks, chunks, tiles) == (8, 4, 4)
    stamps = torch.zeros(blocks * chunks, WORDS, dtype=torch.int64, device=device)
    with stamping(stamped_kernel, stamps):
        got = kl.rejection_sample_logits(**x, _config=dict(config))
    assert kl._logits_race_kernel is not stamped_kernel, "stamping left the stamped kernel in place"
    want = kl.rejection_sample_logits(**x, _config=dict(config))
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    st = stamps.cpu().numpy()
    nread, arrived = st[:, len(STAMPS)], st[:, len(STAMPS) + 1]
    assert ((nread >= 0) & (nread <= tiles)).all()
    if name == "streamed":
        assert (nread == tiles).all(), "the streamed race reads every tile of its chunk"
    else:
        assert 0 < nread.sum() < nread.size * tiles, "the screen read nothing or everything: says little"
    # each request block's programs see the arrival counter at 0 .. chunks - 1, once each
    assert (np.sort(arrived.reshape(blocks, chunks), axis=1) == np.arange(chunks)).all()
    if device == "cuda":
        assert (np.diff(st[:, : len(STAMPS)], axis=1) >= 0).all() and (st[:, 0] > 0).all()


def test_timeline_fields():
    # three programs (tiles of 4): starts 1000 / 1100 / 1200 ns, ready 2000 / 3000 / 9000, candidates 4000 /
    # 5000 / 11000, merged 4500 / 5500 / 14000, after the pass's end 9500 / 9600 / 14100 (the pass ends at
    # 9500, the first program's final wait); tiles read 1 / 0 / 2
    st = np.array(
        [
            [1000, 2000, 4000, 4500, 9500, 1, 0, 5],
            [1100, 3000, 5000, 5500, 9600, 0, 1, 6],
            [1200, 9000, 11000, 14000, 14100, 2, 2, 7],
        ],
        dtype=np.int64,
    )
    t = timeline(st, 4)
    assert t["start_last"] == pytest.approx(0.2)
    assert t["ready_median"] == pytest.approx(2.0) and t["ready_last"] == pytest.approx(8.0)
    assert t["pass_end"] == pytest.approx(8.5) and t["early_programs"] == 2
    assert t["race_end"] == pytest.approx(13.0) and t["race_after_pass"] == pytest.approx(4.5)
    assert t["ready_last_to_pass_end"] == pytest.approx(0.5)
    assert t["read_median"] == pytest.approx(2.0) and t["read_max"] == pytest.approx(2.0)
    assert t["late_programs"] == 1 and t["late_reading"] == 1
    assert t["late_ready_to_pass_end"] == pytest.approx(-0.5)
    assert t["late_read_median"] == pytest.approx(2.0) and t["late_merge_median"] == pytest.approx(3.0)
    assert t["tiles_read_frac"] == pytest.approx(3 / 12) and t["programs_reading"] == 2
    assert t["end"] == pytest.approx(13.1)


def test_main_records_config_and_counts(tmp_path, device):
    # --config is recorded and reaches the stamped call (4 one-row programs of 4 tiles per request)
    if device == "cuda":
        pytest.skip("main times 30+ calls per config on a GPU; the stamped grid is checked above")
    from benchmarks.diagnostics.race_stamps import main

    out = tmp_path / "s.jsonl"
    assert main(["--out", str(out), "--case", "logits:8:2:4096:float32", "--config", json.dumps(_GRID)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["config"] == _GRID and record["programs"] == 8 * 4 and record["tiles"] == 4
    assert record["equal_to_production"] is True
    assert record["merges"] == 8 and 0 < record["tiles_read"] < 8 * 4 * 4
