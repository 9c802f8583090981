"""Arrival counters for kernels whose last program per row block finishes the work.

A kernel that splits each row block over several programs counts arrivals with an atomic add on
one int32 per row block; the program that arrives last does the row's final step and resets the
counter to zero. The counters must therefore be zero when a launch starts. Allocating them with
`torch.zeros` on every call costs a memset launch: 5 µs of device time per call in a CUDA graph at
(B, K, V) = (1, 4, 32000) on the H200 (benchmarks/NOTES.md, run 11), as much as the kernel itself.
So they live in a persistent buffer per (device, stream), zeroed once and kept zero by the kernels
(kernels/_stream_buffers.py: why per stream, why an outgrown buffer is never freed).
"""

from __future__ import annotations

import torch

from specsample.kernels._stream_buffers import discard_stream_buffers, stream_buffer

# every persistent buffer that kernels keep zero between calls: these counters, the lazy logits statistics
# pass's flags and arrival counters (kernels/logits.py, stats_lazy), and the screened race's shared
# thresholds (race_tau "shared")
COUNTER_BUFFERS = ("arrivals", "logits_lazy_state", "logits_stats_arrivals", "logits_race_tau")


def arrival_counters(device: torch.device, count: int) -> torch.Tensor:
    """A zeroed int32 tensor of at least `count` counters for launches on the current stream of
    `device` (a persistent buffer, kernels/_stream_buffers.py). Every kernel that uses it must leave
    each counter it touched at zero."""
    return stream_buffer(device, "arrivals", count, torch.int32, zeroed=True)


def discard_arrival_counters() -> None:
    """Forget every persistent counter buffer, so the next launch allocates zeroed counters. For
    harnesses that run deliberately broken kernels (the mutant catalogue's `kernel_arrival_counter_kept`
    leaves counters non-zero on purpose): without it the planted bug would leak into every later
    launch in the process and make the next mutants, or the real kernel, fail for its reason."""
    for name in COUNTER_BUFFERS:
        discard_stream_buffers(name)
