"""benchmarks/diagnostics/logits_stage_time.py: `limit_launches` keeps a prefix of the call's three
launches (statistics, accept, race or pick) and restores the module afterwards. The launches are
recorded, not run: the timing itself needs the GPU."""

from __future__ import annotations

import pytest
import torch

import specsample.kernels.logits as kl
from benchmarks.diagnostics.logits_stage_time import limit_launches


def _call(classic: bool) -> None:
    b, k, v = 3, 2, 40
    draft = torch.randn(b, k, v) if classic else None
    ids = torch.zeros(b, k, dtype=torch.int64)
    seeds, offsets = torch.arange(b), torch.zeros(b, dtype=torch.int64)
    kl.rejection_sample_logits(torch.randn(b, k + 1, v), ids, draft, temperature=torch.ones(b), seeds=seeds,
                               offsets=offsets)  # fmt: skip


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "one-hot"])
def test_limit_launches_keeps_a_prefix(monkeypatch, classic):
    """stages = 1, 2, 3 launch (stats), (stats, accept), (stats, accept, race | pick)."""
    seen = []
    monkeypatch.setattr(kl, "launch_keyed", lambda kernel, grid, key, args, meta: seen.append(key[0]))
    recorder = kl.launch_keyed
    last = "race" if classic else "pick"
    for stages, want in ((1, ["stats"]), (2, ["stats", "accept"]), (3, ["stats", "accept", last])):
        seen.clear()
        restore = limit_launches(kl, stages)
        try:
            _call(classic)
        finally:
            restore()
        assert seen == want
        assert kl.launch_keyed is recorder
