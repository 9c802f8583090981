"""Every public launcher runs on its inputs' device, as a torch op does, whatever device is current.

Triton launches on the current device and its current stream. Before the launchers switched to
their inputs' device (kernels/_launch.py: other_cuda_device), tensors on cuda:1 called while cuda:0
was current were launched from cuda:0, on cuda:0's stream, unordered with the cuda:1 stream that
produced them. Needs two GPUs (skipped otherwise); deterministic: each call (explicit uniforms or
seeds) must equal, bit for bit, the same call made with cuda:1 current, on the first call of a shape
and on a repeat call (the memo), and its outputs must live on cuda:1.
"""

from __future__ import annotations

import pytest
import torch

import specsample as ss
from specsample.kernels._compiled_launch import clear_launch_cache

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA devices"
)


def _calls(dev):
    g = torch.Generator(device=dev).manual_seed(7)
    batch, k, vocab = 16, 3, 5000
    p = torch.softmax(3 * torch.randn(batch, k + 1, vocab, device=dev, generator=g), -1)
    q = torch.softmax(3 * torch.randn(batch, k, vocab, device=dev, generator=g), -1)
    x = torch.randint(0, vocab, (batch, k), device=dev, generator=g)
    u = torch.rand(batch, k + 1, device=dev, generator=g)
    seeds = torch.randint(0, 2**62, (batch,), device=dev, generator=g)
    offsets = torch.arange(batch, device=dev, dtype=torch.int64)
    logits = torch.randn(batch, k + 1, vocab, device=dev, generator=g)
    draft_logits = torch.randn(batch, k, vocab, device=dev, generator=g)
    temperature = torch.rand(batch, device=dev, generator=g) + 0.5
    return {
        "chain": lambda: ss.chain_rejection_sample(p, x, q, uniforms=u),
        "chain_seeded": lambda: ss.chain_rejection_sample(p, x, seeds=seeds, offsets=offsets),
        "fast_sample": lambda: ss.fast_sample(p[:, 0], seeds=seeds, offsets=offsets),
        "sample_from_logits": lambda: ss.sample_from_logits(logits[:, 0], 0.8, seeds=seeds, offsets=offsets),
        "renorm_draft_probs": lambda: ss.renorm_draft_probs(draft_logits, temperature),
        "logits": lambda: ss.rejection_sample_logits(
            logits, x, draft_logits, temperature=temperature, seeds=seeds, offsets=offsets
        ),
    }


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if hasattr(out, "tokens"):
        return [out.tokens, out.num_accepted, out.fallback, out.valid]
    return list(out)


@pytest.mark.parametrize(
    "name", ["chain", "chain_seeded", "fast_sample", "sample_from_logits", "renorm_draft_probs", "logits"]
)
def test_inputs_on_another_gpu_run_there(name):
    dev = torch.device("cuda", 1)
    with torch.cuda.device(dev):
        call = _calls(dev)[name]
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
