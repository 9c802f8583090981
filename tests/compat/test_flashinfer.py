"""specsample.compat.flashinfer: FlashInfer's chain_speculative_sampling contract over our kernels.

Exact checks only: the materialised seeded uniforms equal the numpy Philox twin bit for bit; the
adapter's tokens equal `chain_rejection_sample`'s on the same uniforms or the same seeds; the two
counters follow FlashInfer's documented meaning (recomputed here by a plain loop) and accumulate in
place; FlashInfer's own docstring example gives its documented output.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.compat import flashinfer
from specsample.compat._uniforms import seeded_chain_uniforms
from specsample.kernels.chain import chain_rejection_sample
from specsample.reference.philox import chain_uniforms
from specsample.stats.seeding import current_test_seed

V = 20


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(current_test_seed())


def inputs(gen, device, batch=64, num_k=3):
    logits = 2.0 * torch.randn(batch, num_k + 1, V, generator=gen)
    target = torch.softmax(logits, -1)
    draft = torch.softmax(logits[:, :num_k] + torch.randn(batch, num_k, V, generator=gen), -1)
    ids = torch.multinomial(draft.reshape(-1, V), 1, generator=gen).view(batch, num_k).to(torch.int32)
    ids[:4, 1] = -1  # padding ids: rejected, never read (FlashInfer reads them out of bounds, #879)
    return draft.to(device), ids.to(device), target.to(device)


def loop_acceptances(target, ids, draft, u):
    """FlashInfer's output_accepted_token_num, position by position, in float32 as the kernel tests."""
    t, x, q, uu = target.cpu(), ids.cpu().long(), draft.cpu(), u.cpu()
    out = torch.zeros(x.shape[0], dtype=torch.int64)
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            xi = int(x[b, i])
            if 0 <= xi < V and float(q[b, i, xi]) > 0 and uu[b, i] * q[b, i, xi] < t[b, i, xi]:
                out[b] += 1
    return out


def test_seeded_uniforms_equal_numpy_philox(gen, device):
    """The materialised uniforms are the kernel's seeded-path uniforms (numpy twin), offsets across
    2^32 and 2^40, bit for bit."""
    seeds = torch.randint(0, 2**62, (300,), generator=gen)
    offsets = torch.cat([torch.arange(100) + 2**32 - 50, torch.randint(0, 2**40, (200,), generator=gen)])
    got = seeded_chain_uniforms(seeds.to(device), offsets.to(device), 5).cpu().numpy()
    want = chain_uniforms(seeds.numpy(), offsets.numpy(), 5)
    assert np.array_equal(got.astype(np.float64), want)


def test_adapter_equals_native_on_uniforms(gen, device):
    """Same uniforms -> native tokens; emitted = num_accepted; accepted = the independent count."""
    draft, ids, target = inputs(gen, device)
    u = torch.rand(ids.shape[0], ids.shape[1] + 1, generator=gen).to(device)
    out, accepted, emitted = flashinfer.chain_speculative_sampling(draft, ids, target, uniforms=u)
    native = chain_rejection_sample(target, ids, draft, uniforms=u)
    assert torch.equal(out, native.tokens) and out.dtype == torch.int32
    assert torch.equal(emitted, native.num_accepted)
    assert torch.equal(accepted.cpu().long(), loop_acceptances(target, ids, draft, u))
    assert bool((accepted > emitted).any()), "no row accepted a draft after its first rejection: weak inputs"


def test_adapter_seeded_equals_native_seeded(gen, device):
    """seed/offset tensors of length B -> exactly the native seeded path (same Philox stream); a
    single seed keys row b by seed + b * 0x9E3779B97F4A7C15."""
    draft, ids, target = inputs(gen, device, batch=32)
    seeds = torch.randint(0, 2**62, (32,), generator=gen).to(device)
    offsets = (torch.arange(32) + 2**32 - 16).to(device)
    out, _, emitted = flashinfer.chain_speculative_sampling(draft, ids, target, seed=seeds, offset=offsets)
    native = chain_rejection_sample(target, ids, draft, seeds=seeds, offsets=offsets)
    assert torch.equal(out, native.tokens) and torch.equal(emitted, native.num_accepted)

    seed = int(seeds[0])
    out1, _, _ = flashinfer.chain_speculative_sampling(draft, ids, target, seed=seed, offset=7)
    row_keys = torch.tensor(seed) + torch.arange(32) * flashinfer._ROW_KEY_STEP
    native1 = chain_rejection_sample(target, ids, draft, seeds=row_keys.to(device),
                                     offsets=torch.full((32,), 7).to(device))  # fmt: skip
    assert torch.equal(out1, native1.tokens)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_counters_accumulate_in_place(dtype, gen, device):
    """Counters passed in are the tensors returned, incremented by this call (FlashInfer's `+=`)."""
    draft, ids, target = inputs(gen, device, batch=16)
    u = torch.rand(16, 4, generator=gen).to(device)
    acc0 = torch.full((16,), 5, dtype=dtype, device=device)
    emi0 = torch.full((16,), 7, dtype=dtype, device=device)
    _, acc, emi = flashinfer.chain_speculative_sampling(draft, ids, target, acc0, emi0, uniforms=u)
    _, acc_fresh, emi_fresh = flashinfer.chain_speculative_sampling(draft, ids, target, uniforms=u)
    assert acc is acc0 and emi is emi0
    assert torch.equal(acc.long(), acc_fresh.long() + 5) and torch.equal(emi.long(), emi_fresh.long() + 7)


def test_flashinfer_docstring_example(device):
    """FlashInfer's documented example: output [[2, 0, -1]], accepted 1, emitted 1 for any randomness
    (draft 2 passes surely, draft 1 has p = 0, the residual is a point mass on token 0)."""
    draft = torch.tensor([[[0.1, 0.2, 0.3, 0.4], [0.2, 0.3, 0.4, 0.1]]], device=device)
    ids = torch.tensor([[2, 1]], dtype=torch.int32, device=device)
    target = torch.tensor([[[0.0, 0.1, 0.6, 0.3], [1.0, 0.0, 0.0, 0.0], [0.7, 0.1, 0.1, 0.1]]], device=device)
    out, accepted, emitted = flashinfer.chain_speculative_sampling(draft, ids, target)
    assert out.tolist() == [[2, 0, -1]] and accepted.tolist() == [1] and emitted.tolist() == [1]


def test_reverse_wrapper_round_trip(gen, device):
    """chain_sampler() with our adapter as the engine (uniforms injected) returns the native tokens
    for classic and one-hot drafts."""
    draft, ids, target = inputs(gen, device, batch=32)
    u = torch.rand(32, 4, generator=gen).to(device)
    wrapped = flashinfer.chain_sampler(engine_fn=flashinfer.chain_speculative_sampling)
    for q in (draft, None):
        native = chain_rejection_sample(target, ids, q, uniforms=u)
        got = wrapped(target, ids, q, uniforms=u)
        assert torch.equal(got["tokens"], native.tokens.long())
        assert torch.equal(got["num_accepted"], native.num_accepted.long())


def test_adapter_generator_path_equals_native(gen, device):
    """generator=g draws the [B, S+1] uniforms with torch.rand(generator=g): the tokens equal the
    native sampler's on uniforms drawn from an identically seeded generator."""
    draft, ids, target = inputs(gen, device, batch=16)
    seed = current_test_seed("generator")
    g1 = torch.Generator(device=device).manual_seed(seed)
    g2 = torch.Generator(device=device).manual_seed(seed)
    out, _, emitted = flashinfer.chain_speculative_sampling(draft, ids, target, generator=g1)
    u = torch.rand((16, 4), generator=g2, dtype=torch.float32, device=device)
    native = chain_rejection_sample(target, ids, draft, uniforms=u)
    assert torch.equal(out, native.tokens) and torch.equal(emitted, native.num_accepted)
