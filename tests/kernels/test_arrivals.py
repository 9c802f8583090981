"""The persistent arrival counters (kernels/_arrivals.py): zero before every launch, because each
kernel that counts in them resets what it touched. If a kernel left a counter non-zero, the next
call's last program would never see the final count and the row would not be emitted."""

from __future__ import annotations

import numpy as np
import torch

from specsample.kernels._arrivals import arrival_counters
from specsample.kernels.chain import _launch
from specsample.reference.chain import chain_rejection_reference

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def test_counters_are_zero_after_split_launches_and_repeat_calls_agree():
    """A row split over 5 programs (V = 40, chunks of 8, one chunk per program), called 3 times
    with different uniforms: every call equals the float64 reference and the counters are all zero
    after each call."""
    rng = np.random.default_rng(3)
    batch, num_k, vocab = 6, 2, 40
    p = rng.dirichlet(np.ones(vocab), size=(batch, num_k + 1)).astype(np.float32)
    q = rng.dirichlet(np.ones(vocab), size=(batch, num_k)).astype(np.float32)
    x = rng.integers(0, vocab, size=(batch, num_k))
    for call in range(3):
        u = rng.random((batch, num_k + 1)).astype(np.float32)
        got = _launch(*(torch.from_numpy(a).to(DEVICE) for a in (p, x, q)), None,
                      torch.from_numpy(u).to(DEVICE), None, None, block_v=8, tiles=1)  # fmt: skip
        ref = chain_rejection_reference(p.astype(float), x, q.astype(float), uniforms=u.astype(float))
        assert np.array_equal(got.tokens.cpu().numpy(), ref.tokens), f"call {call}"
        counters = arrival_counters(DEVICE, batch)
        assert int(counters.abs().sum()) == 0, f"counters left non-zero after call {call}"


def test_buffers_grow_and_are_per_device_and_stream():
    small = arrival_counters(DEVICE, 4)
    big = arrival_counters(DEVICE, 10_000)
    assert big.numel() >= 10_000 and int(big.abs().sum()) == 0
    assert arrival_counters(DEVICE, 4) is big  # grown buffer reused for smaller requests
    assert small.numel() >= 4
    if DEVICE.type == "cuda":
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            other = arrival_counters(DEVICE, 4)
        assert other.data_ptr() != big.data_ptr()


def test_outgrown_buffers_stay_allocated_and_discard_forgets():
    """An outgrown buffer is kept alive (a CUDA graph captured earlier still writes to its address;
    freed, its memory could be handed to another tensor), and discard_stream_buffers(name) forgets
    only the buffers of that name."""
    from specsample.kernels import _stream_buffers as sb

    first = sb.stream_buffer(DEVICE, "test_scratch", 300, torch.float64)
    ptr = first.data_ptr()
    grown = sb.stream_buffer(DEVICE, "test_scratch", 10 * first.numel(), torch.float64)
    assert grown.data_ptr() != ptr and grown.numel() >= 10 * first.numel()
    assert any(t.data_ptr() == ptr for t in sb._RETIRED)
    keep = sb.stream_buffer(DEVICE, "test_other", 8, torch.int32)
    sb.discard_stream_buffers("test_scratch")
    assert sb.stream_buffer(DEVICE, "test_other", 8, torch.int32) is keep
    assert sb.stream_buffer(DEVICE, "test_scratch", 8, torch.float64) is not grown
    sb.discard_stream_buffers("test_other")
    sb.discard_stream_buffers("test_scratch")
