"""In-kernel Philox4x32-10 stream; `specsample.reference.philox` is its numpy twin (bit-identical).

key = (seed_lo, seed_hi); counter = (index, (stream << 24) | position, offset_lo, offset_hi).
The reference module's docstring defines the stream ids and the word -> float conversions.
"""

import triton
import triton.language as tl

STREAM_CHAIN_UNIFORM: tl.constexpr = tl.constexpr(1)
STREAM_GUMBEL: tl.constexpr = tl.constexpr(2)
STREAM_LOGITS_UNIFORM: tl.constexpr = tl.constexpr(3)
STREAM_LOGITS_RESIDUAL: tl.constexpr = tl.constexpr(4)
# 2^-25: a uniform u on the 2^-24 grid is used at its cell's midpoint u + 2^-25 by every decision
# (acceptance tests, inverse CDF; docs/semantics.md). Twin: reference.chain.UNIFORM_HALF_STEP.
UNIFORM_HALF_STEP: tl.constexpr = tl.constexpr(2.0**-25)


@triton.jit
def philox_words(seed, offset, index, stream: tl.constexpr, position):
    """Four uint32 blocks of Philox4x32-10 for int64 `seed`/`offset` (scalars or blocks
    broadcastable with `index`) and int `index`/`position` blocks."""
    seed = seed.to(tl.int64)
    offset = offset.to(tl.int64)
    index = index.to(tl.int64)
    position = position.to(tl.int64)
    zero = index * 0
    c0 = (index & 0xFFFFFFFF).to(tl.uint32)
    c1 = ((position | (stream << 24)) & 0xFFFFFFFF).to(tl.uint32) + zero.to(tl.uint32)
    c2 = (offset & 0xFFFFFFFF).to(tl.uint32) + zero.to(tl.uint32)
    c3 = ((offset >> 32) & 0xFFFFFFFF).to(tl.uint32) + zero.to(tl.uint32)
    k0 = (seed & 0xFFFFFFFF).to(tl.uint32) + zero.to(tl.uint32)
    k1 = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32) + zero.to(tl.uint32)
    return tl.philox_impl(c0, c1, c2, c3, k0, k1)


@triton.jit
def uniform_from_word(word):
    """(word >> 8) * 2^-24 in float32: exact, in [0, 1)."""
    return (word >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def exponential_from_word(word):
    """Exp(1) = -log(1 - t), t = (word + 1/2) 2^-32, in float32 without cancellation."""
    low = word < 0x80000000
    # small t: -log1p(-t) by Goldberg's trick (y = 1 - t rounded; log(y) * t / (1 - y)).
    t = (word.to(tl.float32) + 0.5) * 2.3283064365386963e-10
    y = 1.0 - t
    log1p_small = tl.where(y == 1.0, t, -tl.log(y) * (t / (1.0 - y)))
    # large t: 1 - t = (s + 1/2) 2^-32 with s = 2^32 - 1 - word < 2^31, computed exactly.
    s = (0xFFFFFFFF - word).to(tl.float32)
    log_large = -tl.log((s + 0.5) * 2.3283064365386963e-10)  # power-of-two scale: exact
    return tl.where(low, log1p_small, log_large)
