"""Chain rejection sampling in probability space: classic drafts (q given) and one-hot drafts.

`chain_rejection_sample` implements docs/semantics.md exactly; `specsample.reference.chain` is its
float64 twin. One launch, no host synchronisation, no data-dependent shapes (CUDA-graph safe).
`_chain_kernel` runs on a grid (row blocks, splits of the vocabulary):

1. Every program redoes the K acceptance tests of its rows (K gathers), which fixes the emit
   position j = a, then streams its `tiles` consecutive chunks of row j (p, and q for classic
   drafts) once, writing two running sums per chunk, from the start of its span: the residual mass
   and the clean-p mass (for the norm_sum == 0 fallback).
2. It then counts itself in the row block's arrival counter (atomic, acquire-release). The last
   program to arrive reads the spans' totals, decides residual / fallback / invalid, locates the
   span where u_K * total falls by a prefix sum over them, then the chunk inside it from that span's
   running sums (no scan over all chunks: run 179), re-reads that single chunk, scans it,
   writes tokens / num_accepted / fallback / valid and resets the counter (kernels/_arrivals.py).

Arithmetic: inputs are widened to float64 before anything is summed. The acceptance test
(u + 2^-25) q(x) < p(x) is then exact (a 25-bit by 24-bit product fits in 53 bits), p - q is exact,
and the sums behind the inverse CDF carry relative errors of order 2^-53 instead of 2^-24: with
float32 sums the token would flip on about V 2^-25 of all rows (~0.5% at V = 151936), with float64
on ~V 2^-54. Operations that are exact in float32 (clean(), min(p, q)) stay in float32. What bounds
the streaming loop is latency, not bytes (benchmarks/NOTES.md, session 11: Nsight Compute).

Must-read bytes are one row of p and q per request (the accept tests are gathers), plus one chunk
per request for the emit. On the GPU each program is one warp on one row (BLOCK_ROWS = 1) and the
vocabulary is split over enough programs to fill the SMs (_launch_config); chunks that lie inside
the row load without masks, and a bonus row never touches q. The chunks stream through a
software-pipelined loop (`cp.async` copies), compiled with the L2 evict-first policy that Triton 3.6
leaves off them (kernels/_copy_policy.py). Under the Triton interpreter, whose cost is per program
and per op, each program handles hundreds of rows as [BLOCK_ROWS, BLOCK_V] tiles.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from specsample.kernels import _copy_policy
from specsample.kernels._arrivals import arrival_counters
from specsample.kernels._call_signature import tensor_signature
from specsample.kernels._checks import FLOAT_DTYPES as _PROB_DTYPES
from specsample.kernels._checks import ID_DTYPES as _ID_DTYPES
from specsample.kernels._checks import check_target_rows
from specsample.kernels._checks import check_tensor as _check_tensor
from specsample.kernels._checks import fail as _fail
from specsample.kernels._compiled_launch import bind_keyed, call_memo, compile_under, launch_keyed, remember
from specsample.kernels._launch import (
    H200_SMS,
    cdiv,
    int32_offsets_fit,
    interpreting,
    next_pow2,
    other_cuda_device,
)
from specsample.kernels._row_loads import load_once
from specsample.kernels._stream_buffers import KeptBuffers, stream_buffer
from specsample.kernels.philox import STREAM_CHAIN_UNIFORM, UNIFORM_HALF_STEP, philox_words, uniform_from_word
from specsample.kernels.result import SampleResult, empty_result

_GPU_PROGRAMS = 8 * H200_SMS  # one-warp programs wanted in the grid at least (H200 run 61)
_GPU_MAX_TILES = 16  # chunks one program streams at most
# long programs (>= 12 chunks) but fewer than this many in the grid: half the chunks per program, twice
# the programs, under a register cap so that they fit one wave (H200 runs 80-82)
_GPU_WIDE_PROGRAMS = 12 * H200_SMS
_GPU_WIDE_MAXNREG = 96
_GPU_WIDE_FIT = (65536 // (32 * _GPU_WIDE_MAXNREG)) * H200_SMS  # programs one wave holds (21 per SM)
_GPU_SMEM = 200 * 1024  # shared memory an SM's pipelined chunk loads may take (of 228 KB)
_GPU_CHUNK = 512  # columns per chunk of a one-warp program
_GPU_LATENCY_CHUNK = 1024  # columns per chunk of a four-warp program in the latency regime (run 66)
# latency regime, classic fp32 drafts, over vocabularies up to this size: two-warp programs over
# _GPU_CHUNK columns (runs 147-150)
_GPU_LATENCY_HALF_VOCAB = 32768
# elements of one [BLOCK_ROWS, BLOCK_V] tile under the interpreter (4 MiB in fp32)
_INTERP_TILE_ELEMENTS = 1 << 20


# ----------------------------------------------------------------------------------------------
# Device helpers
# ----------------------------------------------------------------------------------------------


@triton.jit
def _clean32(values):
    """clean(a) = a if a is finite and a > 0 else 0 (NaN compares False), in float32. Written as
    a <= FLT_MAX rather than a < inf: LLVM turns a comparison with infinity into a floating-point
    class test, which on sm_90 costs ~10 integer and select instructions per value instead of 3
    (benchmarks/sass/chain_sass.py)."""
    v = values.to(tl.float32)
    return tl.where((v > 0.0) & (v <= 3.4028234663852886e38), v, 0.0)


@triton.jit
def _clean(values):
    """_clean32, widened to float64 (exactly)."""
    return _clean32(values).to(tl.float64)


@triton.jit
def _uniforms(cols, rows, mask, u_ptr, su_b, su_k, seed, offset, SEEDED: tl.constexpr):
    """u[rows, cols] for a column block `cols` broadcast against `rows` (and `seed`/`offset`):
    loaded from the uniforms tensor, or word 0 of Philox(seed, offset, index=col,
    STREAM_CHAIN_UNIFORM, position=0) (reference.philox.chain_uniforms)."""
    if SEEDED:
        index = cols + rows * 0
        w0, _, _, _ = philox_words(seed, offset, index, STREAM_CHAIN_UNIFORM, index * 0)
        return uniform_from_word(w0)
    else:
        return tl.load(u_ptr + rows * su_b + cols * su_k, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _row_setup(rows, row_ok, n_ptr, sn_b, seed_ptr, ss_b, offset_ptr, so_b,
               K: tl.constexpr, RAGGED: tl.constexpr, SEEDED: tl.constexpr):  # fmt: skip
    """Per-row draft count n (clamped to [0, K]) and the Philox key/offset (0 when unseeded)."""
    if RAGGED:
        n = tl.load(n_ptr + rows * sn_b, mask=row_ok, other=0).to(tl.int64)
        n = tl.minimum(tl.maximum(n, 0), K)
    else:
        n = rows * 0 + K
    if SEEDED:
        seed = tl.load(seed_ptr + rows * ss_b, mask=row_ok, other=0).to(tl.int64)
        offset = tl.load(offset_ptr + rows * so_b, mask=row_ok, other=0).to(tl.int64)
    else:
        seed = rows * 0
        offset = rows * 0
    return n, seed, offset


# _residual_tile modes (constexpr): which rows and columns a tile may hold
_MASKED = tl.constexpr(0)  # any rows, columns past V: masked loads
_FULL_PQ = tl.constexpr(1)  # classic, every row rejected, every column < V: p and q, no masks
_FULL_P = tl.constexpr(2)  # every row reads p alone (one-hot, or classic bonus rows), every column < V


@triton.jit
def _residual_tile(p_ptr, q_ptr, rows, a, rejected, x_j, cols, mask, sp_b, sp_k, sp_v, sq_b, sq_k, sq_v,
                   K: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, MODE: tl.constexpr):  # fmt: skip
    """(r, clean p) on a [BLOCK_ROWS, BLOCK_V] tile of target row j = a: r is max(0, p - q) (classic)
    or p with x_j zeroed (one-hot) on rejected rows, and p itself on bonus rows. Row offsets are
    int64; `cols` may be int32 (the launcher checks that V * sp_v fits), so the per-element
    address arithmetic stays 32-bit. MODE _FULL_PQ / _FULL_P: the caller has established that the
    tile lies inside V and which rows read q, so the loads carry no mask."""
    p_row = p_ptr + (rows * sp_b + a * sp_k)
    if MODE == _MASKED:
        p32 = _clean32(load_once(p_row[:, None] + cols * sp_v, mask, 0.0))
    else:
        p32 = _clean32(load_once(p_row[:, None] + cols * sp_v, None, None))
    p_j = p32.to(tl.float64)
    if HAS_DRAFT_PROBS and MODE != _FULL_P:
        q_row = q_ptr + (rows * sq_b + tl.minimum(a, K - 1) * sq_k)  # read on rejected rows: a < n <= K
        if MODE == _MASKED:
            q32 = _clean32(load_once(q_row[:, None] + cols * sq_v, mask & rejected[:, None], 0.0))
        else:
            q32 = _clean32(load_once(q_row[:, None] + cols * sq_v, None, None))
        # max(0, p - q) = p - min(p, q): the min in float32 (exact, one FMNMX instead of a compare
        # and a float64 select), the difference in float64 (exact); p, q are clean (no NaN)
        r = p_j - tl.minimum(p32, q32).to(tl.float64)
    elif HAS_DRAFT_PROBS:
        r = p_j  # _FULL_P with draft probabilities: bonus rows only
    else:
        r = tl.where(rejected[:, None] & (cols == x_j[:, None]), 0.0, p_j)
    return r, p_j


@triton.jit
def _stream_chunks(p_ptr, q_ptr, partial_ptr, rows, row_ok, a, rejected, x_j, lane, first, tiles_per_program,
                   V, num_chunks, sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, K: tl.constexpr,
                   HAS_DRAFT_PROBS: tl.constexpr, BLOCK_V: tl.constexpr, NUM_STAGES: tl.constexpr,
                   MODE: tl.constexpr):  # fmt: skip
    """partial[c] = (sum r, sum clean p) over this program's chunks first .. c, for its chunks
    c = first .. first + tiles - 1: prefixes within the program's span, summed in chunk order (so they
    never decrease along the span, and the span's last one is its total)."""
    run_r = (rows * 0).to(tl.float64)
    run_p = (rows * 0).to(tl.float64)
    for t in tl.range(0, tiles_per_program, num_stages=NUM_STAGES):
        chunk = first + t
        cols = chunk * BLOCK_V + lane
        mask = row_ok[:, None] & (cols < V)
        r, p_j = _residual_tile(p_ptr, q_ptr, rows, a, rejected, x_j, cols, mask,
                                sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, K, HAS_DRAFT_PROBS, MODE)  # fmt: skip
        part = partial_ptr + rows * (num_chunks * 2) + chunk * 2
        part_ok = row_ok & (rows * 0 + chunk < num_chunks)  # (a scalar mask term upsets the interpreter)
        run_r += tl.sum(r, axis=1)
        run_p += tl.sum(p_j, axis=1)
        tl.store(part, run_r, mask=part_ok)
        tl.store(part + 1, run_p, mask=part_ok)


# ----------------------------------------------------------------------------------------------
# Kernel
# ----------------------------------------------------------------------------------------------


@triton.jit
def _emit_rows(
    p_ptr, q_ptr, u_ptr, partial_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr,
    rows, row_ok, n, a, x, x_j, k, seed, offset, V, num_chunks, tiles_per_program,
    sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, su_b, su_k,
    K: tl.constexpr, HAS_DRAFT_PROBS: tl.constexpr, SEEDED: tl.constexpr,
    BLOCK_V: tl.constexpr, EMIT_LANES: tl.constexpr, TILES_POW2: tl.constexpr,
):  # fmt: skip
    """Outputs of a row block once every partial (BLOCK_V columns each) of it is written.

    fallback = (a < n) and sum r == 0 -> r := clean p_a.  total = sum r; valid = total > 0.
    token = smallest v with r_v > 0 and cumsum(r)_v > (u_K + 2^-25) * total, else the largest v with
    r_v > 0 (u_K + 2^-25: the midpoint of a 2^-24-grid uniform's cell, reference.chain.UNIFORM_HALF_STEP)
    first the chunk, then the token inside that one chunk (re-read). The partials are prefixes within
    each program's span of T = tiles_per_program chunks (_stream_chunks). TILES_POW2 > 0 (T > 1): the
    span first, by a prefix over the spans' totals ([1, EMIT_LANES], one per program), then the
    chunk inside it from that span's prefixes ([1, TILES_POW2], loaded once the span is known), with
    no scan over all chunks: on one warp that scan and its four reductions over [1, 256-512] float64
    took 1.1-3.8 us (run 178), one more L2 round trip takes less (run 179: 0.4-2.1 us faster in
    zero_pause at every multi-chunk shape). TILES_POW2 == 0 (T = 1: a partial is one chunk's sum):
    a prefix over the chunk sums."""
    rejected = a < n
    row_part = partial_ptr + rows[:, None] * (num_chunks * 2)
    if TILES_POW2 > 0:
        span_ix = tl.arange(0, EMIT_LANES).to(tl.int64)[None, :]  # a lane per span here
        span_ok = row_ok[:, None] & (span_ix * tiles_per_program < num_chunks)
        span_end = tl.minimum(span_ix * tiles_per_program + tiles_per_program - 1, num_chunks - 1)
        span_r = tl.load(row_part + span_end * 2, mask=span_ok, other=0.0)  # the spans' totals
        span_p = tl.load(row_part + span_end * 2 + 1, mask=span_ok, other=0.0)
        fallback = rejected & (tl.sum(span_r, axis=1) <= 0.0)
        span_sel = tl.where(fallback[:, None], span_p, span_r)
        span_cum = tl.cumsum(span_sel, axis=1)
        total = tl.max(span_cum, axis=1)
    else:
        c = tl.arange(0, EMIT_LANES).to(tl.int64)[None, :]
        c_ok = row_ok[:, None] & (c < num_chunks)
        part_r = tl.load(row_part + c * 2, mask=c_ok, other=0.0)
        part_p = tl.load(row_part + c * 2 + 1, mask=c_ok, other=0.0)
        fallback = rejected & (tl.sum(part_r, axis=1) <= 0.0)
        sel = tl.where(fallback[:, None], part_p, part_r)
        cum = tl.cumsum(sel, axis=1)
        total = tl.max(cum, axis=1)
    valid = row_ok & (total > 0.0)
    u_last = _uniforms(K, rows, row_ok, u_ptr, su_b, su_k, seed, offset, SEEDED)
    target = (u_last.to(tl.float64) + UNIFORM_HALF_STEP) * total  # (u_K + 2^-25) total, exact sum
    if TILES_POW2 > 0:
        # the first span with mass whose prefix passes the target (else the last span with mass)
        span_hit = span_ok & (span_sel > 0.0) & (span_cum > target[:, None])
        first_span = tl.min(tl.where(span_hit, span_ix, EMIT_LANES), axis=1)
        last_span = tl.max(tl.where(span_ok & (span_sel > 0.0), span_ix, 0), axis=1)
        span = tl.where(first_span < EMIT_LANES, first_span, last_span)
        span_before = tl.sum(tl.where(span_ix == (span - 1)[:, None], span_cum, 0.0), axis=1)
        span_total = tl.sum(tl.where(span_ix == span[:, None], span_sel, 0.0), axis=1)
        # inside it, its chunks' prefixes w (loaded now: non-decreasing, and so is span_before + w)
        c = (span * tiles_per_program)[:, None] + tl.arange(0, TILES_POW2).to(tl.int64)[None, :]
        c_ok = valid[:, None] & (c < num_chunks) & (c < ((span + 1) * tiles_per_program)[:, None])
        w_r = tl.load(row_part + c * 2, mask=c_ok & ~fallback[:, None], other=0.0)
        w_p = tl.load(row_part + c * 2 + 1, mask=c_ok & fallback[:, None], other=0.0)
        sel = w_r + w_p  # the one loaded
        reached = span_before[:, None] + sel
        crossing = c_ok & (sel > 0.0) & (reached > target[:, None])  # a chunk with mass: w rose there
        first_chunk = tl.min(tl.where(crossing, c, num_chunks), axis=1)
        found = first_chunk < num_chunks
        # not found (rounding only): the chunk where w reaches the span's total, which has mass
        full_chunk = tl.min(tl.where(c_ok & (sel >= span_total[:, None]), c, num_chunks - 1), axis=1)
        chunk = tl.where(found, first_chunk, full_chunk)
        # the mass before the chunk: the largest w of the span that does not pass the target
        before = span_before + tl.max(tl.where(c_ok & (reached <= target[:, None]), sel, 0.0), axis=1)
    else:
        crossing = c_ok & (sel > 0.0) & (cum > target[:, None])
        first_chunk = tl.min(tl.where(crossing, c, EMIT_LANES), axis=1)
        found = first_chunk < EMIT_LANES
        last_chunk = tl.max(tl.where(c_ok & (sel > 0.0), c, -1), axis=1)
        chunk = tl.where(found, first_chunk, tl.maximum(last_chunk, 0))
        before = tl.sum(tl.where(c == (chunk - 1)[:, None], cum, 0.0), axis=1)
    local = tl.where(found, target - before, float("inf"))  # not found: take the last positive token

    # token level: re-read that one chunk of BLOCK_V columns, scan it
    lane = tl.arange(0, BLOCK_V).to(tl.int64)[None, :]
    cols = chunk[:, None] * BLOCK_V + lane
    mask = valid[:, None] & (cols < V)
    r, p_j = _residual_tile(p_ptr, q_ptr, rows, a, rejected, x_j, cols, mask,
                            sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, K, HAS_DRAFT_PROBS, _MASKED)  # fmt: skip
    vals = tl.where(fallback[:, None], p_j, r)
    positive = vals > 0.0
    hit = tl.min(tl.where(positive & (tl.cumsum(vals, axis=1) > local[:, None]), lane, BLOCK_V), axis=1)
    last_pos = tl.max(tl.where(positive, lane, -1), axis=1)  # last positive entry of the chunk
    pick = tl.where(hit < BLOCK_V, hit, last_pos)
    token = tl.where(valid & (pick >= 0), chunk * BLOCK_V + pick, -1)

    out = tl.where(k < a[:, None], x, tl.where(k == a[:, None], token[:, None], -1))
    tl.store(tokens_ptr + rows[:, None] * (K + 1) + k, out.to(tl.int32), mask=row_ok[:, None] & (k <= K))
    tl.store(num_accepted_ptr + rows, a.to(tl.int32), mask=row_ok)
    tl.store(fallback_ptr + rows, fallback, mask=row_ok)
    tl.store(valid_ptr + rows, valid, mask=row_ok)


@triton.jit
def _chain_kernel(
    p_ptr,  # [B, K+1, V] fp32/bf16/fp16, strides (sp_b, sp_k, sp_v), stride 0 allowed
    q_ptr,  # [B, K, V] fp32/bf16/fp16 (classic) or unused (one-hot)
    x_ptr,  # [B, K] int32/int64 draft ids
    n_ptr,  # [B] int32/int64 ragged counts (RAGGED)
    u_ptr,  # [B, K+1] fp32 uniforms (not SEEDED)
    seed_ptr,  # [B] int64 (SEEDED)
    offset_ptr,  # [B] int64 (SEEDED)
    partial_ptr,  # [B, num_chunks, 2] fp64 scratch: (residual mass, clean-p mass) of each BLOCK_V columns
    arrivals_ptr,  # [>= cdiv(B, BLOCK_ROWS)] int32, zero on entry, zero again on exit (_arrivals.py)
    tokens_ptr,  # [B, K+1] int32 out, contiguous
    num_accepted_ptr,  # [B] int32 out
    fallback_ptr,  # [B] bool out
    valid_ptr,  # [B] bool out
    B, V, num_chunks, tiles_per_program,
    sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, sx_b, sx_k, sn_b, su_b, su_k, ss_b, so_b,
    K: tl.constexpr,
    HAS_DRAFT_PROBS: tl.constexpr,
    RAGGED: tl.constexpr,
    SEEDED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    KP1_POW2: tl.constexpr,
    EMIT_LANES: tl.constexpr,  # the emit's first tile: a lane per chunk (T = 1) or per span (_plan)
    TILES_POW2: tl.constexpr,  # next_pow2(tiles_per_program), 0 when that is 1 (_emit_rows)
    NUM_STAGES: tl.constexpr,
    LANE_I64: tl.constexpr,
    EVICT_FIRST_COPIES: tl.constexpr,  # compile variant: evict-first pipelined copies (_copy_policy.variant)
):  # fmt: skip
    # for i < n: accept x_i iff 0 <= x_i < V and (classic) q(x_i) > 0 and (u_i + 2^-25) q(x_i) < p(x_i)
    #                                          (one-hot) u_i + 2^-25 < p(x_i); a = first rejection (or n).
    # r = max(0, p_a - q_a) | p_a with x_a zeroed | p_n (bonus).  Program (row block, s) streams chunks
    # [s T, (s + 1) T) of row a: partial[c] = (sum r, sum p_a) over chunks s T .. c; the last to arrive emits.
    pid_rows = tl.program_id(0)
    rows = pid_rows.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    row_ok = rows < B
    n, seed, offset = _row_setup(rows, row_ok, n_ptr, sn_b, seed_ptr, ss_b, offset_ptr, so_b,
                                 K, RAGGED, SEEDED)  # fmt: skip

    # all K acceptance tests at once: [BLOCK_ROWS, KP1_POW2] gathers, a = first failed position
    k = tl.arange(0, KP1_POW2).to(tl.int64)[None, :]
    used = row_ok[:, None] & (k < n[:, None])
    x = tl.load(x_ptr + rows[:, None] * sx_b + k * sx_k, mask=used, other=-1).to(tl.int64)
    ok = used & (x >= 0) & (x < V)
    p_x = _clean(tl.load(p_ptr + rows[:, None] * sp_b + k * sp_k + x * sp_v, mask=ok, other=0.0))
    u = _uniforms(k, rows[:, None], used, u_ptr, su_b, su_k, seed[:, None], offset[:, None], SEEDED)
    u_mid = u.to(tl.float64) + UNIFORM_HALF_STEP  # u + 2^-25, the midpoint of u's cell: exact
    if HAS_DRAFT_PROBS:
        q_x = _clean(tl.load(q_ptr + rows[:, None] * sq_b + k * sq_k + x * sq_v, mask=ok, other=0.0))
        accept = ok & (q_x > 0.0) & (u_mid * q_x < p_x)  # exact: 25 x 24 bits < 53
    else:
        accept = ok & (u_mid < p_x)
    a = tl.min(tl.where(accept, KP1_POW2, k), axis=1)  # <= n: positions >= n never accept
    x_j = tl.sum(tl.where(k == a[:, None], x, 0), axis=1)  # used only where a < n
    rejected = a < n

    lane = tl.arange(0, BLOCK_V)[None, :]
    if LANE_I64:
        lane = lane.to(tl.int64)
    first = tl.program_id(1) * tiles_per_program  # int32: chunk * BLOCK_V < V + BLOCK_V < 2^31
    # Row-uniform branches (BLOCK_ROWS = 1 on the GPU): a span inside V whose rows all exist loads
    # without masks; q is read by every row (classic, all rejected) or by none (one-hot drafts, or
    # classic bonus rows). The constexpr terms fold, so a one-hot kernel keeps two branches.
    full = (tl.min(row_ok.to(tl.int32), axis=0) > 0) & ((first + tiles_per_program) * BLOCK_V <= V)
    rej = rejected.to(tl.int32)
    q_everywhere = (tl.min(rej, axis=0) > 0) & HAS_DRAFT_PROBS
    q_nowhere = (tl.max(rej, axis=0) == 0) | (not HAS_DRAFT_PROBS)
    if full & q_everywhere:
        _stream_chunks(p_ptr, q_ptr, partial_ptr, rows, row_ok, a, rejected, x_j, lane, first,
                       tiles_per_program, V, num_chunks, sp_b, sp_k, sp_v, sq_b, sq_k, sq_v,
                       K, HAS_DRAFT_PROBS, BLOCK_V, NUM_STAGES, _FULL_PQ)  # fmt: skip
    elif full & q_nowhere:
        _stream_chunks(p_ptr, q_ptr, partial_ptr, rows, row_ok, a, rejected, x_j, lane, first,
                       tiles_per_program, V, num_chunks, sp_b, sp_k, sp_v, sq_b, sq_k, sq_v,
                       K, HAS_DRAFT_PROBS, BLOCK_V, NUM_STAGES, _FULL_P)  # fmt: skip
    else:
        _stream_chunks(p_ptr, q_ptr, partial_ptr, rows, row_ok, a, rejected, x_j, lane, first,
                       tiles_per_program, V, num_chunks, sp_b, sp_k, sp_v, sq_b, sq_k, sq_v,
                       K, HAS_DRAFT_PROBS, BLOCK_V, NUM_STAGES, _MASKED)  # fmt: skip

    # release this program's partials; the last program of the row block reads them all (acquire)
    arrived = tl.atomic_add(arrivals_ptr + pid_rows, 1, sem="acq_rel")
    if arrived == tl.num_programs(1) - 1:
        # ready for the next call / graph replay. Every program has arrived, so nothing else touches the
        # counter in this launch: relaxed, and first, since a release would wait on the outputs' stores
        tl.atomic_xchg(arrivals_ptr + pid_rows, 0, sem="relaxed")
        _emit_rows(p_ptr, q_ptr, u_ptr, partial_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr,
                   valid_ptr, rows, row_ok, n, a, x, x_j, k, seed, offset, V, num_chunks, tiles_per_program,
                   sp_b, sp_k, sp_v, sq_b, sq_k, sq_v, su_b, su_k,
                   K, HAS_DRAFT_PROBS, SEEDED, BLOCK_V, EMIT_LANES, TILES_POW2)  # fmt: skip


# Triton 3.6 drops load_once's L2 policy from the pipelined loop's copies; compiled here, they get it
# back (run 170: do_bench 1.09-1.10x at fp32 (64, 4, 151936) and (128, 8, 128256)).
if _copy_policy.enabled():
    compile_under(_chain_kernel, lambda: _copy_policy.evict_first_copies(_chain_kernel.__name__))


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


class _Config(NamedTuple):
    block_rows: int  # rows per program (1 on the GPU)
    block_v: int  # vocabulary chunk: one [BLOCK_ROWS, BLOCK_V] tile
    num_warps: int
    tiles: int  # chunks streamed by one program (a runtime loop)
    num_stages: int  # software-pipelining depth of that loop
    maxnreg: int | None = None  # a cap on registers per thread (ptxas), so more programs fit an SM


def _launch_config(batch: int, vocab: int, block_v: int | None = None, num_warps: int | None = None,
                   tiles: int | None = None, num_stages: int | None = None,
                   block_rows: int | None = None, maxnreg: int | None = None,
                   row_bytes: int = 8) -> _Config:  # fmt: skip
    """GPU: one row per program, one warp per program over 512-column chunks (the chunk sums are
    in-warp reductions, no barrier), each program streaming up to 16 consecutive chunks with a
    3-stage pipelined loop, or fewer so that the grid keeps at least 8 programs per SM. H200 runs
    61-62 (benchmarks/NOTES.md, session 11): against four-warp programs over four 1024-column
    chunks, 1.08-1.10x at fp32 (64, 4, 151936) and (128, 8, 128256), 1.57x at bf16
    (128, 8, 128256), equal at (16, 4, 128256). Where that would leave one chunk per program (small
    batches: latency-bound), four warps over one 1024-column chunk per program, the widest split;
    over V <= 32768 with fp32 p and q, two warps over one 512-column chunk (runs 147-150).
    Where 16-chunk programs would leave fewer than 12 per SM, half the chunks per program under a
    96-register cap, so that twice the programs fit one wave (2 stages where 3 would overflow the
    shared memory): runs 80-82, 1.13-1.23x at (64, 4, 151936) in bf16 and for one-hot drafts, 1.00x
    fp32 classic.
    Interpreter: a whole small vocabulary per tile, many rows per tile, one program per row block.
    Any field can be overridden (tests, sweeps). row_bytes: bytes streamed per vocabulary entry of
    the emit row (p's element size, plus q's for classic drafts): what a pipeline stage holds in
    shared memory."""
    vocab_pow2 = next_pow2(vocab)
    if interpreting():
        bv = block_v or min(vocab_pow2, 1024)
        rows = block_rows or max(1, min(_INTERP_TILE_ELEMENTS // bv, next_pow2(batch)))
        return _Config(rows, bv, num_warps or 4, tiles or cdiv(vocab, bv), num_stages or 1, maxnreg)
    if block_v is None and tiles is None and batch * cdiv(vocab, _GPU_CHUNK) < 2 * _GPU_PROGRAMS:
        # latency regime (B = 1 at V = 32000): the one-warp rule below would give one chunk per
        # program; four warps over 1024 columns instead (H200 run 66: 10.2-10.7 us against 10.8-10.9).
        # Classic fp32 drafts (row_bytes 8) over V <= 32768: two warps over 512 columns, twice the
        # programs. Same-run A/B, zero_pause us at V = 32000: B = 1 / 2 10.49 / 11.15 -> 10.12 / 10.19
        # (run 150), B = 4 / 8 / 16 / 32 11.20 / 11.70 / 12.75 / 14.47 -> 10.09 / 10.62 / 11.71 / 13.60
        # (run 148). Not taken where it was not faster (runs 147-149): bf16 classic (+0.2-0.4 us),
        # V = 16384 (equal), V >= 128256 (slower); one-hot fp32 was 0.2 us faster, but row_bytes
        # cannot tell it from bf16 classic (benchmarks/NOTES.md, session 24).
        half = vocab <= _GPU_LATENCY_HALF_VOCAB and row_bytes >= 8
        chunk, warps = (_GPU_CHUNK, 2) if half else (_GPU_LATENCY_CHUNK, 4)
        block_v, num_warps, tiles = min(chunk, max(128, vocab_pow2)), num_warps or warps, 1
    bv = block_v or min(_GPU_CHUNK, max(128, vocab_pow2))
    if tiles is None:
        chunks = cdiv(vocab, bv)
        tiles = max(1, min(_GPU_MAX_TILES, chunks, batch * chunks // _GPU_PROGRAMS))
        # Long programs, few of them (e.g. (64, 4, 151936): 1216 programs of 16 chunks, 9 per SM):
        # half the chunks per program, twice the programs. At V = 151936 the emit's [1, 512] float64
        # tiles take the kernel to 119 registers (offline sm_90), 17 one-warp programs per SM at
        # most, so 2432 programs of 8 chunks took two waves (session 11's sweeps); capped at 96
        # registers they fit one (offline: no spill with Triton 3.9, 16-24 bytes outside the loops
        # with the H200's 3.6, runs 81-82 measured with 3.6), and with 3 pipeline stages of 2 KB per row
        # they fit the shared memory unless both p and q are fp32 (then 2 stages). H200 runs 80-82
        # (benchmarks/NOTES.md, session 13). (128, 8, 128256) (2048 programs) and (16, 4, 128256)
        # (3 chunks per program) were not faster with more programs.
        few = tiles >= 12 and batch * cdiv(chunks, tiles) < _GPU_WIDE_PROGRAMS
        if few and batch * cdiv(chunks, tiles // 2) <= _GPU_WIDE_FIT:
            tiles //= 2
            maxnreg = maxnreg or _GPU_WIDE_MAXNREG
            if row_bytes * bv * 3 * cdiv(batch * cdiv(chunks, tiles), H200_SMS) > _GPU_SMEM:
                num_stages = num_stages or 2
    warps = num_warps or (1 if bv <= _GPU_CHUNK else 4 if bv <= 2048 else 8)
    return _Config(block_rows or 1, bv, warps, tiles, num_stages or (3 if tiles > 1 else 1), maxnreg)


def chain_rejection_sample(
    target_probs: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None = None,
    *,
    num_draft_tokens: torch.Tensor | None = None,
    uniforms: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    seeds: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    validate: bool = False,
) -> SampleResult:
    """Chain speculative sampling (docs/semantics.md): classic when `draft_probs` is given, one-hot
    drafts otherwise.

    target_probs [B, K+1, V] and draft_probs [B, K, V] are fp32/bf16/fp16 with any strides (stride-0
    broadcasts are read in place); draft_token_ids [B, K] and num_draft_tokens [B] int32/int64.
    Randomness, exactly one source: `uniforms` [B, K+1] fp32 in [0, 1) (the output is then a
    deterministic function of the inputs), per-request int64 `seeds` and `offsets` [B] (in-kernel
    Philox, batch-invariant), or `generator` / the default torch generator (torch.rand inside).

    Guarantees: never emits a token with zero clean target (residual) mass nor an id outside [0, V)
    other than -1; invalid draft ids are rejected without being read. No host synchronisation and no
    data-dependent shapes (CUDA-graph capturable) unless `validate=True`, which adds value checks
    (finite non-negative probabilities, draft ids in range, uniforms in [0, 1)) that synchronise.
    """
    p = target_probs
    # a repeat call (the tensors' metadata of an earlier call that launched): no checks, no planning
    signature = None
    if generator is None and not validate and (uniforms is not None or seeds is not None):
        tensors = (p, draft_token_ids, draft_probs, num_draft_tokens, uniforms, seeds, offsets)
        signature = tensor_signature(*tensors)
        repeat = _REPEATS.get(signature)
        if repeat is not None:
            return repeat(*tensors)
    elsewhere = other_cuda_device(p)
    if elsewhere is not None:  # tensors on another GPU: launch there, on its current stream
        with torch.cuda.device(elsewhere):
            return chain_rejection_sample(
                p,
                draft_token_ids,
                draft_probs,
                num_draft_tokens=num_draft_tokens,
                uniforms=uniforms,
                generator=generator,
                seeds=seeds,
                offsets=offsets,
                validate=validate,
            )
    batch, k_plus_1, vocab = check_target_rows("target_probs", p)
    num_k = k_plus_1 - 1
    device = p.device
    _check_tensor("draft_token_ids", draft_token_ids, (batch, num_k), _ID_DTYPES, device)
    if draft_probs is not None:
        _check_tensor("draft_probs", draft_probs, (batch, num_k, vocab), _PROB_DTYPES, device)
    if num_draft_tokens is not None:
        _check_tensor("num_draft_tokens", num_draft_tokens, (batch,), _ID_DTYPES, device)

    given = (("uniforms", uniforms), ("generator", generator), ("seeds", seeds), ("offsets", offsets))
    sources = [name for name, value in given if value is not None]
    seeded = seeds is not None or offsets is not None
    if seeded and (seeds is None or offsets is None):
        _fail(ValueError, "seeds/offsets", "both tensors (per-request Philox key and offset)", sources)
    if len(sources) > (2 if seeded else 1):
        _fail(ValueError, "randomness", "exactly one of uniforms, generator, seeds+offsets", sources)
    if seeded:
        _check_tensor("seeds", seeds, (batch,), (torch.int64,), device)
        _check_tensor("offsets", offsets, (batch,), (torch.int64,), device)
    elif uniforms is not None:
        _check_tensor("uniforms", uniforms, (batch, k_plus_1), (torch.float32,), device)
    else:
        if generator is not None and not isinstance(generator, torch.Generator):
            _fail(TypeError, "generator", "a torch.Generator", type(generator).__name__)
        if generator is not None and generator.device.type != device.type:
            _fail(ValueError, "generator", f"a generator on {device.type}", generator.device)
        uniforms = torch.rand(batch, k_plus_1, generator=generator, device=device, dtype=torch.float32)

    if validate:
        _validate_values(p, draft_token_ids, draft_probs, num_draft_tokens, uniforms, vocab)

    return _launch(p, draft_token_ids, draft_probs, num_draft_tokens, uniforms, seeds, offsets,
                   signature=signature)  # fmt: skip


def _validate_values(p, x, q, n, uniforms, vocab) -> None:
    """Value checks that synchronise with the host (validate=True only)."""
    for name, t in (("target_probs", p), ("draft_probs", q)):
        if t is None or t.numel() == 0:
            continue
        bad = ~torch.isfinite(t) | (t < 0)
        if bool(bad.any()):
            _fail(ValueError, name, "finite non-negative probabilities", f"{int(bad.sum())} bad entries")
    if x.numel():
        used = torch.arange(x.shape[1], device=x.device)[None, :] < (
            x.shape[1] if n is None else n.clamp(0, x.shape[1])[:, None]
        )
        out = used & ((x < 0) | (x >= vocab))
        if bool(out.any()):
            _fail(ValueError, "draft_token_ids", f"ids in [0, {vocab}) for used drafts",
                  f"{int(out.sum())} out of range")  # fmt: skip
    if uniforms is not None and uniforms.numel():
        bad = ~((uniforms >= 0) & (uniforms < 1))
        if bool(bad.any()):
            _fail(ValueError, "uniforms", "values in [0, 1)", f"{int(bad.sum())} outside")


class _Plan(NamedTuple):
    grid: tuple  # (row blocks, programs per row block)
    num_chunks: int  # partials per row
    tiles: int  # chunks per program (runtime argument)
    meta: dict  # constexpr arguments and num_warps (read-only: shared by every call with this key)


@functools.lru_cache(maxsize=512)
def _plan(batch: int, k_plus_1: int, vocab: int, has_q: bool, ragged: bool, seeded: bool, wide_lanes: bool,
          row_bytes: int, overrides: tuple) -> _Plan:  # fmt: skip
    """Everything of a launch that depends only on metadata, computed once per distinct call shape
    (the launcher's Python is part of every eager call's latency)."""
    cfg = _launch_config(batch, vocab, row_bytes=row_bytes, **dict(overrides))
    num_chunks = cdiv(vocab, cfg.block_v)  # one partial per chunk
    programs_per_row = cdiv(num_chunks, cfg.tiles)
    # the emit's first tile (_emit_rows): a lane per chunk, or per span (program) where programs stream
    # several chunks. >= 16 lanes: Triton 3.6 fails to lower a scan over a [1, 1] tile (ScanOpToLLVM
    # assertion, seen on the H200 for V <= BLOCK_V); the padded lanes are masked out. >= 32 with spans:
    # two [1, 16] tiles side by side made Triton 3.6 convert layouts through shared memory (~300
    # stores in the emit, offline SASS).
    first_tile = max(16, next_pow2(num_chunks)) if cfg.tiles == 1 else max(32, next_pow2(programs_per_row))
    meta = dict(
        K=k_plus_1 - 1, HAS_DRAFT_PROBS=has_q, RAGGED=ragged, SEEDED=seeded,
        BLOCK_ROWS=cfg.block_rows, BLOCK_V=cfg.block_v, KP1_POW2=next_pow2(k_plus_1),
        EMIT_LANES=first_tile, TILES_POW2=max(32, next_pow2(cfg.tiles)) if cfg.tiles > 1 else 0,
        NUM_STAGES=cfg.num_stages, num_warps=cfg.num_warps,
        LANE_I64=wide_lanes, EVICT_FIRST_COPIES=_copy_policy.variant(),
    )  # fmt: skip
    if cfg.maxnreg is not None and not interpreting():
        meta["maxnreg"] = cfg.maxnreg
    return _Plan((cdiv(batch, cfg.block_rows), programs_per_row), num_chunks, cfg.tiles, meta)


def _launch(p, x, q, n, uniforms, seeds, offsets, lane_i64: bool = False, signature=None,
            **overrides) -> SampleResult:  # fmt: skip
    """One launch on validated tensors; `overrides` (block_v, num_warps, tiles, num_stages,
    block_rows, maxnreg) replace the _launch_config defaults and `lane_i64` forces 64-bit lane
    offsets (tests, and the H200 tuning sweep in ci/gpu/chain_gpu.py). `signature`: the call's
    `tensor_signature`, under which the launch is remembered for repeat calls (defaults only)."""
    batch, k_plus_1, vocab = p.shape
    device = p.device
    result = empty_result(batch, k_plus_1, device)
    if batch == 0:
        return result

    seeded = seeds is not None
    has_q = q is not None
    sq = q.stride() if has_q else (0, 0, 0)
    # int32 lane offsets unless a lane offset cols * stride can pass 2^31 (or forced: lane_i64)
    wide = lane_i64 or not int32_offsets_fit(vocab, p.stride(2), sq[2])
    row_bytes = p.element_size() + (q.element_size() if has_q else 0)
    plan_key = (batch, k_plus_1, vocab, has_q, n is not None, seeded, wide, row_bytes,
                tuple(sorted(overrides.items())))  # fmt: skip
    plan = _plan(*plan_key)
    sn = n.stride(0) if n is not None else 0
    su = uniforms.stride() if not seeded else (0, 0)
    ss, so = (seeds.stride(0), offsets.stride(0)) if seeded else (0, 0)
    strides = (*p.stride(), *sq, *x.stride(), sn, *su, ss, so)
    sizes = (batch, vocab, plan.num_chunks, plan.tiles, *strides)
    args = _kernel_args(p, x, q, n, uniforms, seeds, offsets, *_scratch(device, batch, plan), result, sizes)
    # launch_keyed's contract: the plan's key fixes batch, vocab, the chunking and every constexpr;
    # the strides are the other int arguments; the inputs' dtypes and alignment (outputs and scratch
    # are fresh or persistent allocations: aligned, fixed dtypes)
    key = (plan_key, strides, *[(t.dtype, t.data_ptr() & 15 == 0) for t in args[:7]])
    launch_keyed(_chain_kernel, plan.grid, key, args, plan.meta)
    if signature is not None and not overrides and not lane_i64:
        go = bind_keyed(_chain_kernel, plan.grid, key, plan.meta)
        remember(_REPEATS, signature, _RepeatLaunch(batch, k_plus_1, device, plan, sizes, go))
    return result


def _scratch(device, batch: int, plan: _Plan) -> tuple:
    """The launch's persistent scratch: [B, num_chunks, 2] fp64 partials (indexed explicitly by the
    kernel) and the row blocks' arrival counters."""
    return (stream_buffer(device, "chain_partials", batch * plan.num_chunks * 2, torch.float64),
            arrival_counters(device, plan.grid[0]))  # fmt: skip


def _kernel_args(p, x, q, n, uniforms, seeds, offsets, partials, arrivals, result, sizes) -> tuple:
    """_chain_kernel's arguments before its constexprs; absent inputs are stood in for by p, whose
    reads the kernel's constexprs mask out."""
    # K == 0: an empty ids tensor may have no storage; the kernel masks every read of this stand-in
    x_arg = x if x.numel() else torch.full((1, 1), -1, dtype=torch.int32, device=p.device)
    q_arg = q if q is not None and q.numel() else p
    n_arg = n if n is not None else p
    s_arg, o_arg, u_arg = (seeds, offsets, p) if seeds is not None else (p, p, uniforms)
    return (p, q_arg, x_arg, n_arg, u_arg, s_arg, o_arg, partials, arrivals, *result, *sizes)


class _RepeatLaunch:
    """A remembered launch (kernels/_call_signature.py): called with the tensors of a call whose
    signature equals the one it was remembered under, it allocates the outputs, takes the scratch
    (kept from its last call: KeptBuffers) and launches
    the compiled kernel, with the checks and the plan of the first call."""

    __slots__ = ("batch", "k_plus_1", "device", "plan", "sizes", "go", "scratch")

    def __init__(self, batch: int, k_plus_1: int, device, plan: _Plan, sizes: tuple, go) -> None:
        self.batch, self.k_plus_1, self.device, self.plan = batch, k_plus_1, device, plan
        self.sizes = sizes  # the kernel's int arguments: batch, vocab, chunks, tiles, strides
        self.go = go  # bind_keyed's launch
        self.scratch = KeptBuffers()  # _scratch's tensors

    def __call__(self, p, x, q, n, uniforms, seeds, offsets) -> SampleResult:
        result = empty_result(self.batch, self.k_plus_1, self.device)
        scratch = self.scratch.get(self.device, lambda: _scratch(self.device, self.batch, self.plan))
        self.go(_kernel_args(p, x, q, n, uniforms, seeds, offsets, *scratch, result, self.sizes))
        return result


_REPEATS = call_memo()  # tensor_signature -> _RepeatLaunch
