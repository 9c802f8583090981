"""Numpy Philox4x32-10, bit-identical with the in-kernel generator (`specsample.kernels.philox`).

Every random number a specsample kernel draws on its seeded path is a 32-bit word of
Philox4x32-10 (Salmon et al., SC'11) with

    key     = (seed & 0xffffffff, seed >> 32)                       # per-request int64 seed
    counter = (index, (stream << 24) | position, offset & 0xffffffff, offset >> 32)

`stream` names the purpose of the draw (one id per kernel family, below), `position` the draft
position (or sample column) and `index` the column or the token group. Nothing in the key or the
counter depends on the batch layout, the tile size or the number of programs, so a request's draws
are batch-invariant and chunk-invariant. Conversions from words to floats are defined here once and
mirrored exactly in the kernels.
"""

from __future__ import annotations

import numpy as np

# Philox4x32 constants (Random123), the same as Triton's `tl.philox_impl` for uint32.
PHILOX_ROUND_A = np.uint64(0xD2511F53)
PHILOX_ROUND_B = np.uint64(0xCD9E8D57)
PHILOX_KEY_A = np.uint32(0x9E3779B9)
PHILOX_KEY_B = np.uint32(0xBB67AE85)
N_ROUNDS = 10

# Stream ids (bits 24..31 of counter word 1).
STREAM_CHAIN_UNIFORM = 1  # chain rejection: index = column i in [0, K]; word 0 -> uniform
STREAM_GUMBEL = 2  # fast_sample / sample_from_logits: index = token // 4, word = token % 4
STREAM_LOGITS_UNIFORM = 3  # rejection_sample_logits acceptance uniforms: index = column
# 4 (the per-token residual race of rejection_sample_logits until session 8) is retired
STREAM_GUMBEL_GROUP = 5  # fast_sample, one sample: index = token group (256 tokens); words 0, 1, 2
STREAM_LOGITS_GROUP = 6  # rejection_sample_logits residual draw: index = token group, position = j

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
# Elements per block of the round loop: its eight uint64 work arrays (4 MiB) stay in cache, so the
# ~100 array operations of ten rounds run from cache instead of memory (7-9x faster than whole
# arrays on the development machine; block sizes 2^15-2^16 were fastest there).
_BLOCK = 1 << 16


def _u32(x) -> np.ndarray:
    return (np.asarray(x).astype(np.int64).astype(np.uint64) & _MASK32).astype(np.uint32)


def _flat(a: np.ndarray, shape) -> np.ndarray:
    """`a` broadcast to `shape` and flattened (a view where numpy can; one element stays one)."""
    return a.reshape(1) if a.size == 1 else np.broadcast_to(a, shape).reshape(-1)


def philox4x32(c0, c1, c2, c3, k0, k1, n_rounds: int = N_ROUNDS):
    """Philox4x32 on broadcastable uint32 arrays; returns four uint32 arrays of the broadcast shape.

    One round: (c0, c1, c2, c3) <- (hi(B c2) ^ c1 ^ k0, lo(B c2), hi(A c0) ^ c3 ^ k1, lo(A c0)), then
    the key advances by the Weyl constants. Products are exact in uint64 (both factors < 2^32). The
    rounds run over blocks of _BLOCK elements with in-place operations."""
    args = [_u32(a) for a in (c0, c1, c2, c3, k0, k1)]
    shape = np.broadcast_shapes(*(a.shape for a in args))
    flat = [_flat(a, shape) for a in args]
    n = int(np.prod(shape, dtype=np.int64))
    out = [np.empty(n, np.uint32) for _ in range(4)]
    width = max(1, min(n, _BLOCK))
    work = [np.empty(width, np.uint64) for _ in range(8)]
    for start in range(0, n, _BLOCK):
        stop = min(n, start + _BLOCK)
        x0, x1, x2, x3, key0, key1, hi_lo0, hi_lo1 = (w[: stop - start] for w in work)
        for dst, src in zip((x0, x1, x2, x3, key0, key1), flat, strict=True):
            dst[...] = src[0] if src.size == 1 else src[start:stop]
        for r in range(n_rounds):
            np.multiply(x2, PHILOX_ROUND_B, out=hi_lo0)
            np.multiply(x0, PHILOX_ROUND_A, out=hi_lo1)
            np.right_shift(hi_lo0, _SHIFT32, out=x0)
            x0 ^= x1
            x0 ^= key0
            np.right_shift(hi_lo1, _SHIFT32, out=x2)
            x2 ^= x3
            x2 ^= key1
            np.bitwise_and(hi_lo0, _MASK32, out=x1)
            np.bitwise_and(hi_lo1, _MASK32, out=x3)
            if r + 1 < n_rounds:
                key0 += np.uint64(PHILOX_KEY_A)
                key0 &= _MASK32
                key1 += np.uint64(PHILOX_KEY_B)
                key1 &= _MASK32
        for o, x in zip(out, (x0, x1, x2, x3), strict=True):
            o[start:stop] = x
    return tuple(o.reshape(shape) for o in out)


def philox_words(seed, offset, index, stream: int, position=0):
    """The four words for (seed, offset, stream, position, index); arrays broadcast."""
    seed = np.asarray(seed, dtype=np.int64).astype(np.uint64)
    offset = np.asarray(offset, dtype=np.int64).astype(np.uint64)
    ctr1 = (np.uint64(stream) << np.uint64(24)) | np.asarray(position, dtype=np.uint64)
    return philox4x32(
        np.asarray(index, dtype=np.int64),
        ctr1,
        offset & _MASK32,
        offset >> np.uint64(32),
        seed & _MASK32,
        seed >> np.uint64(32),
    )


def uniform_from_word(word) -> np.ndarray:
    """u = (word >> 8) * 2^-24: exactly representable in float32, in [0, 1), 0 included."""
    return ((np.asarray(word, dtype=np.uint32) >> np.uint32(8)).astype(np.float64)) * 2.0**-24


def exponential_from_word(word) -> np.ndarray:
    """E = -log(1 - t), t = (word + 1/2) 2^-32 in (0, 1): an Exp(1) draw, float64.

    The kernels compute the same quantity in float32: for word < 2^31 as log1p(-t) (small E keeps
    full relative precision, which is what decides rare tokens), otherwise as -log((s + 1/2) 2^-32)
    with s = 2^32 - 1 - word (large E without cancellation).
    """
    t = (np.asarray(word, dtype=np.uint32).astype(np.float64) + 0.5) * 2.0**-32
    return -np.log1p(-t)


def uniform52_from_words(high, low) -> np.ndarray:
    """u = (high * 2^20 + (low >> 12)) * 2^-52: 52 random bits, exact in float64, in [0, 1 - 2^-52]."""
    high = np.asarray(high, dtype=np.uint32).astype(np.float64)
    low = (np.asarray(low, dtype=np.uint32) >> np.uint32(12)).astype(np.float64)
    return (high * 2.0**20 + low) * 2.0**-52


def chain_uniforms(seeds, offsets, num_columns: int, stream: int = STREAM_CHAIN_UNIFORM) -> np.ndarray:
    """[B, num_columns] float64 uniforms the seeded chain kernel draws: column i is word 0 of
    philox(seed_b, offset_b, stream, position=0, index=i)."""
    seeds = np.asarray(seeds, dtype=np.int64)[:, None]
    offsets = np.asarray(offsets, dtype=np.int64)[:, None]
    cols = np.arange(num_columns, dtype=np.int64)[None, :]
    w0, _, _, _ = philox_words(seeds, offsets, cols, stream)
    return uniform_from_word(w0)


def token_words(seeds, offsets, vocab_size: int, stream: int, position=0) -> np.ndarray:
    """[B, V] uint32: the word token v draws, word (v % 4) of philox(index = v // 4)."""
    seeds = np.asarray(seeds, dtype=np.int64)[:, None]
    offsets = np.asarray(offsets, dtype=np.int64)[:, None]
    position = np.asarray(position, dtype=np.int64)
    if position.ndim == 1:
        position = position[:, None]
    groups = np.arange((vocab_size + 3) // 4, dtype=np.int64)[None, :]
    words = np.stack(philox_words(seeds, offsets, groups, stream, position), axis=-1)
    return words.reshape(words.shape[0], -1)[:, :vocab_size]


def gumbel_exponentials(seeds, offsets, vocab_size: int, stream: int = STREAM_GUMBEL, position=0):
    """[B, V] float64 Exp(1) noise that the seeded Gumbel kernels draw."""
    return exponential_from_word(token_words(seeds, offsets, vocab_size, stream, position))
