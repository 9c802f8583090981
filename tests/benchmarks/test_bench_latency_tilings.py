"""benchmarks/diagnostics/latency_tilings.py: every configuration it times is a launch the launchers
accept on the GPU for every case of its set (chain: one chunk per program unless the set says how
many; fast_sample: whole groups per tile and the merge in the chunk kernel), and each set holds the
launcher's own GPU tiling of its cases, the baseline the others are read against."""

import pytest

from benchmarks.diagnostics.latency_tilings import CASES, CONFIGS, chunks_per_program
from specsample.kernels import chain as chain_module
from specsample.kernels import gumbel
from specsample.kernels._launch import cdiv, next_pow2

CHAIN_SETS = sorted(name for name in CONFIGS if name != "fast_sample")


@pytest.mark.parametrize("name", CHAIN_SETS)
def test_every_chain_configuration_plans_on_the_gpu(monkeypatch, name):
    monkeypatch.setattr(chain_module, "interpreting", lambda: False)
    plan = chain_module._plan.__wrapped__  # uncached: the cache may hold interpreter plans
    defaults = set()
    for kernel, batch, k, vocab, dtype in CASES[name]:
        classic = kernel == "chain"
        row_bytes = (4 if dtype == "float32" else 2) * (2 if classic else 1)
        cfg = chain_module._launch_config(batch, vocab, row_bytes=row_bytes)
        defaults.add((cfg.block_v, cfg.num_warps))
        for config in CONFIGS[name]:
            (block_v, warps), tiles = config[:2], chunks_per_program(config)
            overrides = (("block_v", block_v), ("num_warps", warps), ("tiles", tiles))
            p = plan(batch, k + 1, vocab, classic, False, False, False, row_bytes, overrides)
            assert p.tiles == tiles and p.grid == (batch, cdiv(cdiv(vocab, block_v), tiles))
            assert p.meta["BLOCK_V"] == block_v and p.meta["num_warps"] == warps
    one_chunk = {c[:2] for c in CONFIGS[name] if chunks_per_program(c) == 1}
    assert defaults <= one_chunk, (name, defaults)


def test_fast_sample_tilings_are_valid_and_hold_the_default(monkeypatch):
    monkeypatch.setattr(gumbel, "interpreting", lambda: False)
    for _, batch, _, vocab, _ in CASES["fast_sample"]:
        default = gumbel.grouped_race_tiling.__wrapped__(batch, vocab)  # uncached: the GPU branch
        assert default.pick_in_chunk and default.block_rows == 1
        assert (default.block_v, default.tiles_per_chunk, default.num_warps) in CONFIGS["fast_sample"]
        for block_v, tiles, warps in CONFIGS["fast_sample"]:
            assert block_v in (256, 512, 1024)  # whole groups per tile (_fast_sample's rule)
            assert gumbel.fuse_merge(next_pow2(cdiv(vocab, block_v * tiles)), warps)
