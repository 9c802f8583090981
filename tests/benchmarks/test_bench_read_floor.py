"""benchmarks/diagnostics/read_floor.py: its pure-read kernels read every element of the rows once
(what makes their time a read of the must-read bytes), including a partial last chunk."""

import pytest
import torch

from benchmarks.diagnostics.read_floor import READ_TILINGS, row_sum_reader


@pytest.mark.parametrize("name", sorted(READ_TILINGS))
def test_row_sum_reader_reads_every_element(name, device):
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(3, 5000, generator=gen).to(device)  # 2 chunks of 4096 columns, the second partial
    call, out = row_sum_reader(x, name)
    call()
    assert out.shape == (3, 2)
    torch.testing.assert_close(out.sum(dim=1), x.sum(dim=1), rtol=1e-5, atol=0.0)
