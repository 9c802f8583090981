"""External `fast_sample`-signature samplers on a random stream of their own, for
`specsample verify --target ... --family gumbel`: one correct, two with FlashInfer's seeding bugs.

    specsample verify --target specsample.verify.examples.gumbel_own_stream:fast_sample_own_stream

Each draws one Gumbel race per row, argmax / top-n of log p_v - log E_v, with E_v = -log u_v and u_v
a splitmix64 hash of (seed, offset, v): a counter-based stream that is not specsample's Philox, so
the verifier cannot couple draws with its reference (they declare no `specsample_noise`) and
certifies them by their laws alone (gof, plackett_luce, zero_mass). The planted bugs:
- `fast_sample_frozen_offsets`: the offset never reaches the stream, so advancing it draws nothing
  new (FlashInfer's randomness frozen across CUDA-graph replays);
- `fast_sample_seed_index0`: every row uses seeds[0] (FlashInfer's per-request seeds read only at
  index 0).
The verifier must pass the first and fail the other two. Do not use them for anything else.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (uint64 in, uint64 out; wraps modulo 2^64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _uniforms(seeds: np.ndarray, offsets: np.ndarray, vocab: int) -> np.ndarray:
    """u [B, V] in (0, 1): one splitmix64 word per (seed, offset, column)."""
    with np.errstate(over="ignore"):
        key = _mix(np.asarray(seeds).astype(np.uint64) + _GOLDEN)
        key = _mix(key ^ (np.asarray(offsets).astype(np.uint64) * _GOLDEN))
        cols = np.arange(vocab, dtype=np.uint64) + np.uint64(1)
        words = _mix(key[:, None] + cols[None, :] * _GOLDEN)
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def _race(probs, num_samples: int, seeds, offsets) -> np.ndarray:
    """indices [B, num_samples] of the top scores log p - log E (-1 where a row runs out of mass)."""
    p = np.nan_to_num(np.asarray(probs, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    e = -np.log(_uniforms(seeds, offsets, p.shape[1]))
    with np.errstate(divide="ignore"):
        score = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)) - np.log(e), -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")[:, :num_samples]
    won = np.take_along_axis(score, order, axis=1) > -np.inf
    return np.where(won, order, -1).astype(np.int64)


def fast_sample_own_stream(probs, num_samples, seeds, offsets):
    """Correct: the race on (seed, offset, v)'s own stream."""
    return _race(probs, num_samples, seeds, offsets)


def fast_sample_frozen_offsets(probs, num_samples, seeds, offsets):
    """Bug: the offset is dropped, so the same seed draws the same token for ever."""
    return _race(probs, num_samples, seeds, np.zeros_like(np.asarray(offsets)))


def fast_sample_seed_index0(probs, num_samples, seeds, offsets):
    """Bug: every row reads seeds[0]."""
    seeds = np.asarray(seeds)
    return _race(probs, num_samples, np.full_like(seeds, seeds[0]), offsets)


for _fn in (fast_sample_own_stream, fast_sample_frozen_offsets, fast_sample_seed_index0):
    _fn.specsample_family = "gumbel"
    _fn.specsample_inputs = "numpy"
