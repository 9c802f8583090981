"""benchmarks/diagnostics/read_sweep.py: every Triton reader of the sweep reads every element once
(its partial sums add up to the buffer's sum), so its time is a read of the must-read bytes."""

import torch

from benchmarks.diagnostics.read_sweep import readers


def test_every_reader_reads_every_element(device):
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(3, 5000, generator=gen).to(device)  # rows end in partial tiles and chunks
    checked = 0
    for name, call, out in readers(x, sms=2, per_thread=(8,), tiles_options=(1, 2)):
        call()
        if out is None:
            continue
        torch.testing.assert_close(out.sum(), x.sum(), rtol=1e-5, atol=0.0, msg=name)
        checked += 1
    assert checked == 2 * 4 * (2 * 2 + 5)  # policies x warps x (rows and flat per tiling + persistents)
