"""In-kernel Philox4x32-10 stream; `specsample.reference.philox` is its numpy twin (bit-identical).

key = (seed_lo, seed_hi); counter = (index, (stream << 24) | position, offset_lo, offset_hi).
The reference module's docstring defines the stream ids and the word -> float conversions.
"""

import triton
import triton.language as tl

from specsample.kernels._launch import interpreting

# PTX only where it is compiled (the interpreter runs no PTX), as logits.py's _HW_LOG
_INTERPRETED: tl.constexpr = tl.constexpr(interpreting())
# one round's widening multiply: $0 = high, $1 = low 32 bits of $2 * the Philox round constant
_MUL_A_PTX: tl.constexpr = tl.constexpr("{ .reg .b64 t; mul.wide.u32 t, $2, 0xD2511F53; "
                                        "mov.b64 {$1, $0}, t; }")  # fmt: skip
_MUL_B_PTX: tl.constexpr = tl.constexpr("{ .reg .b64 t; mul.wide.u32 t, $2, 0xCD9E8D57; "
                                        "mov.b64 {$1, $0}, t; }")  # fmt: skip
STREAM_CHAIN_UNIFORM: tl.constexpr = tl.constexpr(1)
STREAM_GUMBEL: tl.constexpr = tl.constexpr(2)
STREAM_LOGITS_UNIFORM: tl.constexpr = tl.constexpr(3)
STREAM_GUMBEL_GROUP: tl.constexpr = tl.constexpr(5)
STREAM_LOGITS_GROUP: tl.constexpr = tl.constexpr(6)
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
    return philox_rounds(c0, c1, c2, c3, k0, k1)


@triton.jit
def _mul_wide(a, M: tl.constexpr, M_PTX: tl.constexpr):
    """(hi, lo) 32-bit halves of the 64-bit product a * M. Compiled: one widening multiply
    (IMAD.WIDE.U32) in inline PTX, where umulhi + mul compile to two instructions (IMAD.HI.U32 and
    IMAD) and a 64-bit multiply in Triton gets its halves recombined by LLVM. The interpreter, which
    runs no PTX, takes the same product in uint64."""
    if _INTERPRETED:
        wide = a.to(tl.uint64) * M
        return (wide >> 32).to(tl.uint32), wide.to(tl.uint32)
    else:
        return tl.inline_asm_elementwise(
            M_PTX,
            "=r,=r,r",
            [a],
            dtype=(tl.uint32, tl.uint32),
            is_pure=True,
            pack=1,
        )


@triton.jit
def philox_rounds(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0, c1, c2, c3) under key (k0, k1), uint32 blocks; the same
    function as `tl.philox_impl` (Salmon et al. 2011), with each round's two products taken from
    widening multiplies (offline SASS of the race loop: 161 -> 141 instructions per 4 tokens)."""
    for _ in tl.static_range(10):
        hi_b, lo_b = _mul_wide(c2, 0xCD9E8D57, _MUL_B_PTX)
        hi_a, lo_a = _mul_wide(c0, 0xD2511F53, _MUL_A_PTX)
        c0 = hi_b ^ c1 ^ k0
        c2 = hi_a ^ c3 ^ k1
        c1 = lo_b
        c3 = lo_a
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@triton.jit
def uniform_from_word(word):
    """(word >> 8) * 2^-24 in float32: exact, in [0, 1)."""
    return (word >> 8).to(tl.float32) * 5.9604644775390625e-08


@triton.jit
def uniform52_from_words(high, low):
    """(high * 2^20 + (low >> 12)) * 2^-52 in float64: 52 random bits, exact, in [0, 1 - 2^-52]."""
    bits = (high.to(tl.uint64) << 20) | (low >> 12).to(tl.uint64)
    return bits.to(tl.float64) * 2.220446049250313e-16


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
