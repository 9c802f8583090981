"""Repeat calls (kernels/_call_signature.py): the launchers' memo from the tensors' metadata to a
prepared launch.

Deterministic tests (no statistics): what the signature tells apart; that a remembered call gives
the full path's outputs bit for bit (every launcher with explicit uniforms or seeds, so its outputs
are deterministic functions of its inputs: chain, fast_sample in both launch forms,
rejection_sample_logits classic and one-hot, sample_from_logits with a float or tensor temperature,
renorm_draft_probs); that it skips the checks, yet a call with other metadata (or another float
temperature) still gets them; and that it follows the persistent scratch when the buffers are
replaced. Under the interpreter the remembered launch goes through `launch_keyed` (Triton's path);
the GPU test in test_compiled_launch.py covers the C launcher.
"""

from __future__ import annotations

import pytest
import torch

from specsample.kernels import _compiled_launch as cl
from specsample.kernels import chain as kc
from specsample.kernels import gumbel as kg
from specsample.kernels import logits as kl
from specsample.kernels._call_signature import tensor_signature
from specsample.kernels._stream_buffers import discard_stream_buffers, stream_buffer


class _Sub(torch.Tensor):
    pass


def test_signature_tells_apart_what_the_checks_and_the_plan_read():
    base = torch.zeros(2, 64)
    t = base[:, :32]
    same = torch.ones(2, 64)[:, :32]  # other values, same metadata
    assert tensor_signature(t, None) == tensor_signature(same, None)
    others = [
        t.double(),  # dtype
        base[:1, :32],  # shape
        base[:, ::2],  # strides
        base.view(-1)[1:].as_strided((2, 32), (64, 1)),  # 4-byte offset: not 16-byte aligned
        t.as_subclass(_Sub),  # class
    ]
    sigs = {tensor_signature(t, None)} | {tensor_signature(o, None) for o in others}
    assert len(sigs) == 1 + len(others)
    assert tensor_signature(t, None) != tensor_signature(None, t)  # position of the absent argument
    assert tensor_signature(t, [1, 2]) is None and tensor_signature(3.0) is None  # not tensors
    assert tensor_signature(t.to_sparse()) is None  # no strides


def test_meta_tensor_after_a_valid_call_is_checked(device):
    """CPU and meta tensors share the device index -1: the signature keeps the device itself, so a
    meta tensor of a remembered call's metadata still meets the launcher's device check."""
    cl.clear_launch_cache()
    probs, seeds = torch.rand(3, 6, device=device), torch.zeros(3, dtype=torch.int64, device=device)
    kg.fast_sample(probs, 1, seeds=seeds, offsets=seeds)  # remembered
    assert len(kg._REPEATS) == 1
    with pytest.raises(ValueError, match="probs"):
        kg.fast_sample(probs.to("meta"), 1, seeds=seeds, offsets=seeds)


def _chain_inputs(seed: int, device: str, batch: int = 3, k: int = 2, vocab: int = 40):
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(batch, k + 1, vocab, generator=g)
    q = torch.rand(batch, k, vocab, generator=g)
    x = torch.randint(0, vocab, (batch, k), generator=g)
    u = torch.rand(batch, k + 1, generator=g)
    return tuple(t.to(device) for t in (p / p.sum(-1, keepdim=True), x, q / q.sum(-1, keepdim=True), u))


def _no_checks(monkeypatch, module, name):
    def refuse(*args, **kwargs):
        raise AssertionError(f"{name} ran on a remembered call")

    monkeypatch.setattr(module, name, refuse)


def test_chain_repeat_call_equals_the_full_path_without_its_checks(monkeypatch, device):
    cl.clear_launch_cache()
    p, x, q, u = _chain_inputs(0, device)
    kc.chain_rejection_sample(p, x, q, uniforms=u)  # remembered
    assert len(kc._REPEATS) == 1
    p, x, q, u = _chain_inputs(1, device)
    want = kc._launch(p, x, q, None, u, None, None)  # the full path's launch, not remembered
    _no_checks(monkeypatch, kc, "check_target_rows")
    got = kc.chain_rejection_sample(p, x, q, uniforms=u)
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)
    assert len(kc._REPEATS) == 1


def test_chain_call_with_other_metadata_is_checked(device):
    """A bad call after a good one of nearly the same metadata still fails its checks."""
    cl.clear_launch_cache()
    p, x, q, u = _chain_inputs(2, device)
    kc.chain_rejection_sample(p, x, q, uniforms=u)
    with pytest.raises(ValueError, match="draft_token_ids"):
        kc.chain_rejection_sample(p, x[:, :1], q, uniforms=u)
    with pytest.raises(TypeError, match="uniforms"):
        kc.chain_rejection_sample(p, x, q, uniforms=u.double())
    with pytest.raises(ValueError, match="randomness"):
        seeds = torch.zeros(3, dtype=torch.int64, device=device)
        kc.chain_rejection_sample(p, x, q, uniforms=u, seeds=seeds, offsets=seeds)
    assert len(kc._REPEATS) == 1


def test_chain_repeat_call_takes_replaced_scratch(device):
    """After the persistent buffers are replaced, a remembered launch uses the new ones (a kept
    arrival counter buffer could be one a broken kernel left non-zero)."""
    cl.clear_launch_cache()
    p, x, q, u = _chain_inputs(3, device)
    want = kc.chain_rejection_sample(p, x, q, uniforms=u)  # remembered
    kc.chain_rejection_sample(p, x, q, uniforms=u)  # the remembered launch fetches and keeps its scratch
    discard_stream_buffers()
    got = kc.chain_rejection_sample(p, x, q, uniforms=u)
    (repeat,) = kc._REPEATS.values()
    assert repeat.scratch.buffers[1] is stream_buffer(p.device, "arrivals", 1, torch.int32, zeroed=True)
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("two_launches", [False, True])
def test_fast_sample_repeat_call_equals_the_full_path_without_its_checks(monkeypatch, device, two_launches):
    """Both forms of the race: the merge in the chunk kernel's last program, or (many candidates per
    row; forced here) a second launch."""
    cl.clear_launch_cache()
    if two_launches:
        monkeypatch.setattr(kg, "_FUSED_MERGE_PARTS_PER_THREAD", 0)
    g = torch.Generator().manual_seed(4)
    probs, probs2 = (torch.rand(5, 700, generator=g).to(device) for _ in range(2))
    seeds, offsets = torch.arange(5, device=device), torch.full((5,), 3, device=device)
    kg.fast_sample(probs, 1, seeds=seeds, offsets=offsets)  # remembered
    want = kg._fast_sample(probs2, 1, None, seeds, offsets)[:2]  # the full path, not remembered
    _no_checks(monkeypatch, kg, "check_device")
    got = kg.fast_sample(probs2, 1, seeds=seeds, offsets=offsets)
    assert torch.equal(want[0], got[0]) and torch.equal(want[1], got[1])
    (repeat,) = kg._REPEATS.values()
    assert (repeat.go[1] is not None) == two_launches
    monkeypatch.undo()
    with pytest.raises(ValueError, match="num_samples"):
        kg.fast_sample(probs2, 0, seeds=seeds, offsets=offsets)  # another num_samples: checked
    with pytest.raises(ValueError, match="offsets"):
        kg.fast_sample(probs2, 1, seeds=seeds, offsets=offsets[:2])


def _logits_inputs(seed: int, device: str, classic: bool, batch: int = 3, k: int = 2, vocab: int = 300):
    g = torch.Generator().manual_seed(seed)
    lg = torch.randn(batch, k + 1, vocab, generator=g) * 3
    dl = lg[:, :k] + torch.randn(batch, k, vocab, generator=g) if classic else None
    x = torch.randint(0, vocab, (batch, k), generator=g)
    temperature = torch.tensor([0.0, 0.7, 1.3])[:batch]  # a greedy row among sampled ones
    seeds, offsets = torch.arange(batch) + seed, torch.full((batch,), 5)
    return tuple(None if t is None else t.to(device) for t in (lg, x, dl, temperature, seeds, offsets))


@pytest.mark.parametrize("classic", [True, False])
def test_logits_repeat_call_equals_the_full_path_without_its_checks(monkeypatch, device, classic):
    cl.clear_launch_cache()
    lg, x, dl, temperature, seeds, offsets = _logits_inputs(5, device, classic)
    kl.rejection_sample_logits(lg, x, dl, temperature=temperature, seeds=seeds, offsets=offsets)  # remembered
    assert len(kl._REPEATS) == 1
    lg, x, dl, temperature, seeds, offsets = _logits_inputs(6, device, classic)
    cfg = kl.launch_config(*lg.shape, None, logit_bytes=lg.element_size())
    want = kl._launch(lg, x, dl, temperature, seeds, offsets, None, cfg)  # the full path, not remembered
    _no_checks(monkeypatch, kl, "check_target_rows")
    got = kl.rejection_sample_logits(lg, x, dl, temperature=temperature, seeds=seeds, offsets=offsets)
    for a, b in zip(want, got, strict=True):
        assert torch.equal(a, b)
    assert len(kl._REPEATS) == 1
    monkeypatch.undo()
    with pytest.raises(ValueError, match="temperature"):
        kl.rejection_sample_logits(lg, x, dl, temperature=temperature[:2], seeds=seeds, offsets=offsets)


@pytest.mark.parametrize("form", ["float", "tensor", "tensor_probs_out"])
def test_sample_from_logits_repeat_call_equals_the_full_path_without_its_checks(monkeypatch, device, form):
    cl.clear_launch_cache()
    g = torch.Generator().manual_seed(7)
    logits, logits2 = (torch.randn(4, 500, generator=g).mul(3).to(device) for _ in range(2))
    seeds, offsets = torch.arange(4, device=device), torch.full((4,), 2, device=device)
    temp = 0.8 if form == "float" else torch.tensor([0.8, 0.0, 1.5, 1.0], device=device)
    out = torch.empty(4, 500, device=device) if form == "tensor_probs_out" else None
    kg.sample_from_logits(logits, temp, seeds=seeds, offsets=offsets, probs_out=out)  # remembered
    want_out = None if out is None else torch.empty_like(out)
    want = kg._sample_from_logits(logits2, temp, seeds, offsets, want_out)  # the full path, not remembered
    _no_checks(monkeypatch, kg, "_check_logits")
    got = kg.sample_from_logits(logits2, temp, seeds=seeds, offsets=offsets, probs_out=out)
    assert torch.equal(want, got) and (out is None or torch.equal(want_out, out))
    assert len(kg._REPEATS_FROM_LOGITS) == 1
    monkeypatch.undo()
    if form == "float":  # another temperature value is another call: the full path, at that value
        hot = kg.sample_from_logits(logits2, 5.0, seeds=seeds, offsets=offsets)
        assert torch.equal(hot, kg._sample_from_logits(logits2, 5.0, seeds, offsets, None))
        assert len(kg._REPEATS_FROM_LOGITS) == 2


def test_renorm_draft_probs_repeat_call_equals_the_full_path_without_its_checks(monkeypatch, device):
    cl.clear_launch_cache()
    g = torch.Generator().manual_seed(8)
    draft, draft2 = (torch.randn(3, 2, 400, generator=g).to(device) for _ in range(2))
    temp = torch.tensor([0.5, 0.0, 2.0], device=device)
    kg.renorm_draft_probs(draft, temp)  # remembered
    want = kg.renorm_draft_probs(draft2, temp)  # a remembered call, checked against the full path below
    cl.clear_launch_cache()
    full = kg.renorm_draft_probs(draft2, temp)  # the full path (memo cleared)
    assert torch.equal(want, full)
    _no_checks(monkeypatch, kg, "_check_logits")
    assert torch.equal(kg.renorm_draft_probs(draft2, temp), full)  # remembered by the full-path call
    assert len(kg._REPEATS_RENORM) == 1
