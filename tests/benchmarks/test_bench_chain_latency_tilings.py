"""benchmarks/diagnostics/chain_latency_tilings.py: every configuration it times is a launch the chain
launcher accepts on the GPU for every case it times (one chunk per program), and each configuration
set holds the launcher's own latency-regime tiling of its cases, the baseline the others are read
against."""

import pytest

from benchmarks.diagnostics.chain_latency_tilings import CASES, CONFIGS
from specsample.kernels import chain as chain_module


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_configuration_plans_on_the_gpu(monkeypatch, name):
    monkeypatch.setattr(chain_module, "interpreting", lambda: False)
    plan = chain_module._plan.__wrapped__  # uncached: the cache may hold interpreter plans
    defaults = set()
    for kernel, batch, k, vocab, dtype in CASES[name]:
        classic = kernel == "chain"
        item = 4 if dtype == "float32" else 2
        row_bytes = item * (2 if classic else 1)
        cfg = chain_module._launch_config(batch, vocab, row_bytes=row_bytes)
        defaults.add((cfg.block_v, cfg.num_warps))
        for block_v, warps in CONFIGS[name]:
            overrides = (("block_v", block_v), ("num_warps", warps), ("tiles", 1))
            p = plan(batch, k + 1, vocab, classic, False, False, False, row_bytes, overrides)
            assert p.tiles == 1 and p.grid == (batch, -(-vocab // block_v))
            assert p.meta["BLOCK_V"] == block_v and p.meta["num_warps"] == warps
    assert defaults <= set(CONFIGS[name]), (name, defaults)
