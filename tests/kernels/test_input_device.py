"""Every public launcher runs on its inputs' device, as a torch op does, whatever device is current.

Triton launches on the current device and its current stream. Before the launchers switched to
their inputs' device (kernels/_launch.py: other_cuda_device), tensors on cuda:1 called while cuda:0
was current were launched from cuda:0, on cuda:0's stream, unordered with the cuda:1 stream that
produced them. Now each public launcher calls itself again under torch.cuda.device(inputs' device).

Deterministic tests (explicit uniforms, seeds, or a generator seeded afresh in each call), every
argument chosen so that dropping it changes the outputs (ragged draft counts, num_samples = 3,
probs_out, per-request temperatures):
- anywhere (the CPU interpreter): the re-entry passes every argument through. The device choice is
  stubbed to say "another device" once, torch.cuda.device to a recorder; the outputs must equal a
  direct call's bit for bit, and the launcher must have switched exactly once.
- two GPUs (skipped otherwise): tensors on cuda:1 called with cuda:0 current give, bit for bit, the
  outputs of the same call with cuda:1 current, on the first call of a shape and on repeat calls
  (the memo), and the outputs live on cuda:1.
Planted faults in the re-entry, each failing the first test: chain's or the logits' draft counts
dropped, sample_from_logits' probs_out dropped, fast_sample's generator dropped.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import specsample as ss
from specsample.kernels import chain as kc
from specsample.kernels import gumbel as kg
from specsample.kernels import logits as kl
from specsample.kernels._compiled_launch import clear_launch_cache

CPU = torch.device("cpu")
NAMES = [
    "chain",
    "chain_onehot_seeded_validated",
    "chain_generator",
    "fast_sample",
    "fast_sample_generator",
    "sample_from_logits",
    "renorm_draft_probs",
    "logits",
    "logits_onehot",
]


def _calls(dev, batch, vocab):
    g = torch.Generator(device=dev).manual_seed(7)
    k = 3
    p = torch.softmax(3 * torch.randn(batch, k + 1, vocab, device=dev, generator=g), -1)
    q = torch.softmax(3 * torch.randn(batch, k, vocab, device=dev, generator=g), -1)
    x = torch.randint(0, vocab, (batch, k), device=dev, generator=g)
    x_likely = p[:, :k].argmax(-1)  # one-hot drafts often accepted, so the draft counts matter
    n = torch.arange(batch, device=dev) % (k + 1)  # ragged draft counts 0..K
    u = torch.rand(batch, k + 1, device=dev, generator=g)
    seeds = torch.randint(0, 2**62, (batch,), device=dev, generator=g)
    offsets = torch.arange(batch, device=dev, dtype=torch.int64)
    logits = torch.randn(batch, k + 1, vocab, device=dev, generator=g)
    draft_logits = torch.randn(batch, k, vocab, device=dev, generator=g)
    temperature = torch.rand(batch, device=dev, generator=g) + 0.5

    def fresh():
        return torch.Generator(device=dev).manual_seed(3)

    def from_logits():
        probs_out = torch.zeros(batch, vocab, device=dev)
        tokens = ss.sample_from_logits(
            logits[:, 0], temperature, seeds=seeds, offsets=offsets, probs_out=probs_out
        )
        return tokens, probs_out

    return {
        "chain": lambda: ss.chain_rejection_sample(p, x, q, num_draft_tokens=n, uniforms=u),
        "chain_onehot_seeded_validated": lambda: ss.chain_rejection_sample(
            p, x_likely, num_draft_tokens=n, seeds=seeds, offsets=offsets, validate=True
        ),
        "chain_generator": lambda: ss.chain_rejection_sample(p, x, q, generator=fresh()),
        "fast_sample": lambda: ss.fast_sample(p[:, 0], 3, seeds=seeds, offsets=offsets),
        "fast_sample_generator": lambda: ss.fast_sample(p[:, 0], generator=fresh()),
        "sample_from_logits": from_logits,
        "renorm_draft_probs": lambda: ss.renorm_draft_probs(draft_logits, temperature),
        "logits": lambda: ss.rejection_sample_logits(
            logits, x, draft_logits, temperature=temperature, seeds=seeds, offsets=offsets, num_draft_tokens=n
        ),
        "logits_onehot": lambda: ss.rejection_sample_logits(
            logits, x, temperature=temperature, seeds=seeds, offsets=offsets, num_draft_tokens=n
        ),
    }


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "tokens"):
        return [out.tokens, out.num_accepted, out.fallback, out.valid]
    return list(out)


@pytest.mark.parametrize("name", NAMES)
def test_the_switch_to_the_inputs_device_passes_every_argument(monkeypatch, name):
    dev = torch.device("cuda", 0) if torch.cuda.is_available() else CPU
    call = _calls(dev, 8, 48)[name]
    expected = _tensors(call())
    clear_launch_cache()  # the call below takes the full path, where the switch is
    asked, entered = [], []

    def another_device_once(t):
        asked.append(t)
        return torch.device("cuda", 1) if len(asked) == 1 else None

    @contextlib.contextmanager
    def record(device):
        entered.append(device)
        yield

    for module in (kc, kg, kl):
        monkeypatch.setattr(module, "other_cuda_device", another_device_once)
    monkeypatch.setattr(torch.cuda, "device", record)
    got = _tensors(call())
    assert entered == [torch.device("cuda", 1)], f"{name}: switched {entered}"
    assert len(asked) == 2, f"{name}: the re-entered call did not ask again ({len(asked)})"
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b), f"{name}: the re-entered call's outputs differ from a direct call's"


@pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
)
@pytest.mark.parametrize("name", NAMES)
def test_inputs_on_another_gpu_run_there(name):
    dev = torch.device("cuda", 1)
    with torch.cuda.device(dev):
        call = _calls(dev, 16, 5000)[name]
        expected = _tensors(call())
    torch.cuda.synchronize(dev)
    clear_launch_cache()  # the first call below takes the full path
    with torch.cuda.device(0):
        got = [_tensors(call()) for _ in range(3)]  # the first call of the shape, then repeats
    torch.cuda.synchronize(dev)
    for i, outs in enumerate(got):
        for a, b in zip(outs, expected, strict=True):
            assert a.device == dev, f"{name} call {i}: output on {a.device}"
            assert torch.equal(a, b), f"{name} call {i}: differs from the call made on cuda:1"
