"""benchmarks/diagnostics/dirty_l2.py: its read kernel reads every element once under both load
policies (what makes its time a read of S MB), including a partial last program."""

import pytest
import torch

from benchmarks.diagnostics.dirty_l2 import BLOCK, read_call


@pytest.mark.parametrize("evict_first", [True, False])
def test_read_kernel_reads_every_element(evict_first, device):
    gen = torch.Generator().manual_seed(11)
    x = torch.rand(2 * BLOCK + 777, generator=gen).to(device)  # three programs, the last partial
    call, out = read_call(x, evict_first)
    call()
    assert out.shape == (3,)
    torch.testing.assert_close(out, torch.stack([x[i * BLOCK:(i + 1) * BLOCK].sum() for i in range(3)]),
                               rtol=1e-5, atol=1e-3)  # fmt: skip
