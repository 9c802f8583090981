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
STREAM_LOGITS_RESIDUAL = 4  # rejection_sample_logits residual race: index = token // 4

_MASK32 = np.uint64(0xFFFFFFFF)


def _u32(x) -> np.ndarray:
    return (np.asarray(x).astype(np.int64).astype(np.uint64) & _MASK32).astype(np.uint32)


def philox4x32(c0, c1, c2, c3, k0, k1, n_rounds: int = N_ROUNDS):
    """Philox4x32 on broadcastable uint32 arrays; returns four uint32 arrays."""
    c0, c1, c2, c3, k0, k1 = np.broadcast_arrays(*(_u32(a) for a in (c0, c1, c2, c3, k0, k1)))
    c0, c1, c2, c3 = (a.astype(np.uint64) for a in (c0, c1, c2, c3))
    k0, k1 = k0.astype(np.uint64), k1.astype(np.uint64)
    for _ in range(n_rounds):
        p0 = PHILOX_ROUND_B * c2  # exact in uint64: both factors < 2^32
        p1 = PHILOX_ROUND_A * c0
        n0 = (p0 >> np.uint64(32)) ^ c1 ^ k0
        n2 = (p1 >> np.uint64(32)) ^ c3 ^ k1
        c1 = p0 & _MASK32
        c3 = p1 & _MASK32
        c0, c2 = n0, n2
        k0 = (k0 + np.uint64(PHILOX_KEY_A)) & _MASK32
        k1 = (k1 + np.uint64(PHILOX_KEY_B)) & _MASK32
    return tuple(a.astype(np.uint32) for a in (c0, c1, c2, c3))


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
