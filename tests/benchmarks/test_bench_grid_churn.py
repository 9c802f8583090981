"""benchmarks/diagnostics/grid_churn.py: its grid and persistent kernels read exactly the rows whose flag is
clear, chunk by chunk (a partial last chunk included), and visit every item once: with arrivals, each row's
last arrival stores the row's gathered logit and leaves the counters zero for the next call. The grid whose
skipped programs do not arrive, and the coarse tail (the rows after READ_ROWS launched C chunks a program),
do the same for the rows they read and leave the skipped rows untouched."""

import pytest
import torch
import triton

from benchmarks.diagnostics.grid_churn import _coarse_tail_kernel, _grid_kernel, _persistent_kernel

V, ROWS, READ_ROWS, BLOCK, TILES = 300, 6, 4, 16, 4  # 5 chunks of 64 columns per row, the last partial


def _inputs(device):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(ROWS, V, generator=gen)
    ids = torch.randint(0, V, (ROWS,), generator=gen)
    flag = torch.zeros(ROWS, dtype=torch.int32)
    flag[READ_ROWS:] = 1  # rows after READ_ROWS skipped, as positions >= 2 in the script
    nc = triton.cdiv(V, BLOCK * TILES)
    sums = torch.nn.functional.pad(x, (0, nc * BLOCK * TILES - V)).view(ROWS, nc, -1).sum(-1)
    return [t.to(device) for t in (x, ids, flag)], sums, x[torch.arange(ROWS), ids], nc


@pytest.mark.parametrize("kind", ["grid", "persistent-1", "persistent-3"])
@pytest.mark.parametrize("arrive", [False, True])
def test_reads_flagged_rows_and_visits_every_item(kind, arrive, device):
    (x, ids, flag), sums, gathered, nc = _inputs(device)
    out = torch.full((ROWS * nc,), float("nan"), device=device)
    cnt = torch.zeros(ROWS * 32, dtype=torch.int32, device=device)
    if kind == "grid":
        _grid_kernel[(ROWS * nc,)](x, flag, out, ids, cnt, V, nc, BLOCK=BLOCK, TILES=TILES, ARRIVE=arrive)
    else:
        programs = int(kind.split("-")[1])
        _persistent_kernel[(programs,)](x, flag, out, ids, cnt, V, nc, ROWS * nc, BLOCK=BLOCK, TILES=TILES,
                                        ARRIVE=arrive)  # fmt: skip
    out = out.view(ROWS, nc).cpu()
    if not arrive:
        torch.testing.assert_close(out[:READ_ROWS], sums[:READ_ROWS], rtol=1e-5, atol=1e-4)
        assert torch.isnan(out[READ_ROWS:]).all(), "a flagged row was read"
    else:  # the row's last arrival overwrote its own item with the gathered logit: exactly one per row
        hits = (out - gathered[:, None]).abs() < 1e-6
        assert (hits.sum(dim=1) == 1).all(), "each row must have exactly one last arrival"
        assert (cnt == 0).all(), "the arrival counters must be zero after the call"


@pytest.mark.parametrize("kind", ["grid-read-arrive", "coarse-2", "coarse-5"])
@pytest.mark.parametrize("skip", [False, True])
def test_read_rows_arrive_and_skipped_rows_are_untouched(kind, skip, device):
    (x, ids, flag), sums, gathered, nc = _inputs(device)
    if not skip:
        flag.zero_()
    out = torch.full((ROWS * nc,), float("nan"), device=device)
    cnt = torch.zeros(ROWS * 32, dtype=torch.int32, device=device)
    if kind == "grid-read-arrive":
        _grid_kernel[(ROWS * nc,)](x, flag, out, ids, cnt, V, nc, BLOCK=BLOCK, TILES=TILES, ARRIVE=True,
                                   ARRIVE_SKIPPED=False)  # fmt: skip
    else:
        c = int(kind.split("-")[1])
        per_row = triton.cdiv(nc, c)
        programs = READ_ROWS * nc + (ROWS - READ_ROWS) * per_row
        _coarse_tail_kernel[(programs,)](x, flag, out, ids, cnt, V, nc, READ_ROWS, per_row, BLOCK=BLOCK,
                                         TILES=TILES, C=c)  # fmt: skip
    out = out.view(ROWS, nc).cpu()
    read = READ_ROWS if skip else ROWS
    hits = (out[:read] - gathered[:read, None]).abs() < 1e-6
    assert (hits.sum(dim=1) == 1).all(), "each read row must have exactly one last arrival"
    torch.testing.assert_close(out[:read][~hits], sums[:read][~hits], rtol=1e-5, atol=1e-4)
    assert torch.isnan(out[read:]).all(), "a flagged row was read"
    assert (cnt == 0).all(), "the arrival counters must be zero after the call"
