"""Arrival counters for kernels whose last program per row block finishes the work.

A kernel that splits each row block over several programs counts arrivals with an atomic add on
one int32 per row block; the program that arrives last does the row's final step and resets the
counter to zero. The counters must therefore be zero when a launch starts. Allocating them with
`torch.zeros` on every call costs a memset launch: 5 µs of device time per call in a CUDA graph at
(B, K, V) = (1, 4, 32000) on the H200 (benchmarks/NOTES.md, run 11), as much as the kernel itself.
So they live in a persistent buffer per (device, stream), zeroed once and kept zero by the kernels.

One buffer per stream because launches on one stream run in order, so two launches never count
into the same buffer at once; launches on different streams get different buffers. A graph
captured on a stream keeps the buffer it was captured with; replaying two graphs captured on the
same stream concurrently on two other streams would share counters, which no capture API of torch
does by itself (document-level caveat, docs/api.md).
"""

from __future__ import annotations

import torch

_BUFFERS: dict[tuple, torch.Tensor] = {}


def arrival_counters(device: torch.device, count: int) -> torch.Tensor:
    """A zeroed int32 tensor of at least `count` counters for launches on the current stream of
    `device`. Every kernel that uses it must leave each counter it touched at zero."""
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None
    key = (device, stream)
    buf = _BUFFERS.get(key)
    if buf is None or buf.numel() < count:
        # grown geometrically; a replaced buffer is freed in stream order (safe on this stream)
        size = max(count, 2 * (0 if buf is None else buf.numel()), 256)
        buf = _BUFFERS[key] = torch.zeros(size, dtype=torch.int32, device=device)
    return buf


def discard_arrival_counters() -> None:
    """Forget every persistent buffer, so the next launch allocates zeroed counters. For harnesses
    that run deliberately broken kernels (the mutant catalogue's `kernel_arrival_counter_kept`
    leaves counters non-zero on purpose): without it the planted bug would leak into every later
    launch in the process and make the next mutants, or the real kernel, fail for its reason."""
    _BUFFERS.clear()
