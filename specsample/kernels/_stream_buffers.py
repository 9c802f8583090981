"""Persistent device buffers per (device, stream, name): kernel scratch and arrival counters without
an allocation per call.

Every launcher needs scratch that lives only while its kernels run (per-chunk partial sums, race
candidates, row statistics). A `torch.empty` per scratch tensor costs host time on every eager call
(a few µs each on the H200 host: logits had seven), so each kind of scratch is one buffer per
stream, grown geometrically and reused. Launches on one stream run in order, so two launches never
use one buffer at once; launches on different streams get different buffers.

A replaced (outgrown) buffer is never freed: a CUDA graph captured earlier holds its address, and
freeing it would let the allocator hand that memory to another tensor, which every replay of the
graph would then overwrite. Geometric growth bounds what is kept at twice the largest buffer.

Caveat (docs/api.md): a graph keeps the buffers of the stream it was captured on; replaying two
graphs captured on one stream concurrently on two other streams would share them, which no capture
API of torch does by itself.
"""

from __future__ import annotations

import torch

_LIVE: dict[tuple, torch.Tensor] = {}
_RETIRED: list[torch.Tensor] = []  # outgrown buffers, kept alive for graphs that captured them
_GENERATION = [0]  # bumped whenever a live buffer is replaced or forgotten


def generation() -> int:
    """A number that changes whenever any live buffer is replaced (outgrown) or discarded: a launcher
    that caches the buffers it got may reuse them only while this is unchanged."""
    return _GENERATION[0]


def _stream_key(device: torch.device) -> tuple:
    """(device type, index, raw handle of the current stream or None on the CPU): whose buffers a
    launch on `device` gets."""
    if device.type == "cuda":
        index = torch.cuda.current_device() if device.index is None else device.index
        return ("cuda", index, torch._C._cuda_getCurrentRawStream(index))
    return (device.type, device.index, None)


class KeptBuffers:
    """The persistent buffers a remembered launch fetched last, reused while they are still what
    `stream_buffer` would return: same stream, no buffer replaced or discarded since (`generation`).
    Saves a launcher's repeat calls one lookup per buffer (kernels/_call_signature.py).

    Safe under threads: one memo entry serves every thread that repeats the call, each possibly on
    its own stream. The key and the buffers are kept as one tuple, swapped in by one assignment, and
    `get` returns the buffers it read or fetched itself, never what another thread stored meanwhile
    (tests/kernels/test_stream_buffers.py)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: tuple = (None, ())  # (stream key and generation at the fetch, fetch's buffers)

    @property
    def buffers(self) -> tuple:
        """What `fetch` returned last (in any thread)."""
        return self._kept[1]

    def get(self, device: torch.device, fetch) -> tuple:
        """The kept buffers, or `fetch()`'s (a tuple of stream_buffer results) when the stream or the
        generation changed since they were fetched."""
        stream, kept = _stream_key(device), self._kept
        if kept[0] != (stream, _GENERATION[0]):
            buffers = fetch()
            kept = self._kept = ((stream, _GENERATION[0]), buffers)  # fetching may bump the generation
        return kept[1]


def stream_buffer(device: torch.device, name: str, numel: int, dtype: torch.dtype, zeroed: bool = False):
    """A buffer of at least `numel` elements of `dtype` for launches on the current stream of
    `device`, the same tensor on every call with that (device, stream, name) while it is large
    enough. `zeroed`: filled with zeros when (re)allocated; kernels that use it must then leave it
    zero (arrival counters), since nothing re-zeroes it between calls."""
    key = (*_stream_key(device), name)
    buf = _LIVE.get(key)
    if buf is None or buf.numel() < numel:
        size = max(numel, 2 * (0 if buf is None else buf.numel()), 256)
        new = (torch.zeros if zeroed else torch.empty)(size, dtype=dtype, device=device)
        if buf is not None:
            _RETIRED.append(buf)
            _GENERATION[0] += 1
        buf = _LIVE[key] = new
    return buf


def discard_stream_buffers(name: str | None = None) -> None:
    """Forget the live buffers (all, or those called `name`), so the next launch allocates fresh
    ones. For harnesses that run deliberately broken kernels: a mutant that leaves arrival counters
    non-zero would otherwise leak its bug into every later launch in the process."""
    for key in [k for k in _LIVE if name is None or k[3] == name]:
        _RETIRED.append(_LIVE.pop(key))
    _GENERATION[0] += 1
