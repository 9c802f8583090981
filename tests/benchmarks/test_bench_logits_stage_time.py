"""benchmarks/diagnostics/logits_stage_time.py: `limit_launches` keeps a prefix of the call's three
launches (statistics, accept, race or pick) and restores the module afterwards. The launches are
recorded, not run: the timing itself needs the GPU."""

from __future__ import annotations

import pytest
import torch

import specsample.kernels.logits as kl
from benchmarks.diagnostics.logits_stage_time import config_call, limit_launches


def _call(classic: bool, device: str) -> None:
    b, k, v = 3, 2, 40
    draft = torch.randn(b, k, v, device=device) if classic else None
    ids = torch.zeros(b, k, dtype=torch.int64, device=device)
    seeds, offsets = torch.arange(b, device=device), torch.zeros(b, dtype=torch.int64, device=device)
    target, temperature = torch.randn(b, k + 1, v, device=device), torch.ones(b, device=device)
    kl.rejection_sample_logits(target, ids, draft, temperature=temperature, seeds=seeds, offsets=offsets)


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "one-hot"])
def test_limit_launches_keeps_a_prefix(monkeypatch, classic, device):
    """stages = 1, 2, 3 launch (stats), (stats, accept), (stats, accept, race | pick), on repeat calls
    too (the launcher's repeat-call memo would launch all three without `launch_keyed`). Both draft kinds
    here take the lazy pass's tail (stats_tail, classic_tail): the call has no accept launch, so stages
    = 2 launches the statistics pass alone and 3 adds the race or the pick."""
    seen = []
    monkeypatch.setattr(kl, "launch_keyed", lambda kernel, grid, key, args, meta: seen.append(key[0]))
    recorder, memo = kl.launch_keyed, kl._REPEATS
    last = "race" if classic else "pick"
    expected = ((1, ["stats"]), (2, ["stats"]), (3, ["stats", last]))
    for stages, want in expected:
        seen.clear()
        restore = limit_launches(kl, stages)
        try:
            _call(classic, device)
        finally:
            restore()
        assert seen == want  # every call took the full path: the repeat-call memo was off
        assert kl.launch_keyed is recorder and kl._REPEATS is memo


def test_config_call_passes_the_override(monkeypatch, device):
    """--config's calls take the override: classic drafts without the classic tail launch the statistics
    pass, the accept kernel and the race, and limit_launches(1) keeps the pass alone."""
    seen = []
    monkeypatch.setattr(kl, "launch_keyed", lambda kernel, grid, key, args, meta: seen.append(key[0]))
    b, k, v = 3, 2, 40
    inputs = dict(
        target_logits=torch.randn(b, k + 1, v, device=device),
        draft_token_ids=torch.zeros(b, k, dtype=torch.int64, device=device),
        draft_logits=torch.randn(b, k, v, device=device),
        temperature=torch.ones(b, device=device),
        seeds=torch.arange(b, device=device),
        offsets=torch.zeros(b, dtype=torch.int64, device=device),
    )
    call = config_call(kl, inputs, {"stats_lazy": True, "classic_tail": False})
    for stages, want in ((3, ["stats", "accept", "race"]), (1, ["stats"])):
        seen.clear()
        restore = limit_launches(kl, stages)
        try:
            call()
        finally:
            restore()
        assert seen == want
