"""Speculative rejection sampling straight from logits (classic or one-hot drafts, per-request
temperature, greedy rows), without materialising any probability tensor.

`rejection_sample_logits` implements docs/semantics.md transposed to logits; the float64 twin is
`specsample.reference.logits`. Per request b with temperature T_b:

    p_i = softmax(clean(target_logits[b, i]) / T_b),   q_i = softmax(clean(draft_logits[b, i]) / T_b)

with clean(l) = l if l is finite else -inf: NaN and +-inf logits carry no mass (a +inf logit is
treated as invalid, not as "all the mass"). T_b == 0 rows are greedy; 0 < T_b < inf rows are sampled
(with T_b clamped to [2^-126, 2^100]: 1/T stays a normal float32); any other temperature (negative,
NaN, inf) makes the row invalid: tokens all -1, num_accepted 0, valid False.

Randomness is a pure function of (seed_b, offset_b, position, token): the acceptance uniform of draft
i is word 0 of Philox(seed, offset, index=i, STREAM_LOGITS_UNIFORM, position=0), used at its cell's
midpoint u_i + 2^-25 (docs/semantics.md); the emitted token at
position j is the winner of the exponential race argmax_v r_v / E_v with E_v from word v % 4 of
Philox(seed, offset, index=v // 4, STREAM_LOGITS_RESIDUAL, position=j). Hence batch-invariant,
chunk-invariant in law, CUDA-graph safe and identical across tensor-parallel ranks given equal seeds.

Two launches, no host synchronisation, no data-dependent shapes:

1. `_logits_stats_kernel`, grid (row blocks of the B*(K+1) target rows, vocabulary chunks): per chunk
   the max, first argmax and sum exp((l - max) / T) of the clean target logits, and max / sum-exp of
   the draft logits (classic). This is the one full read of the inputs. Rows past a request's ragged
   draft count are skipped.
2. `_logits_race_kernel`, grid (request blocks, vocabulary chunks): every program combines the chunk
   statistics of its requests (log-sum-exp per position), redoes the acceptance tests (K gathers and
   K uniforms), which fixes the emit position j, then runs the exponential race on its chunk of row j
   only, in log space: score_v = log r_v - log E_v. It stores its chunk winner; the last program to
   arrive for a request block (an atomic counter) combines the chunk winners and writes the outputs.

Must-read bytes are every target row (plus draft rows) once, plus row j (and draft row j) of each
request: (K+2)/(K+1) of the floor for one-hot drafts, (2K+3)/(2K+1) for classic drafts.

The race costs one Philox call per four tokens and two logs per token on one row per request; run
after the stats pass it is ALU time added to a memory-bound pass. (A one-launch schedule that
overlapped the two phases by ticketed tasks, and per-lane statistics in phase 1, were measured
slower on the H200 in runs 14, 15 and 20 and are gone: benchmarks/NOTES.md.)
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from specsample.kernels._arrivals import arrival_counters
from specsample.kernels._checks import FLOAT_DTYPES as _LOGIT_DTYPES
from specsample.kernels._checks import ID_DTYPES as _ID_DTYPES
from specsample.kernels._checks import check_target_rows, check_tensor
from specsample.kernels._checks import fail as _fail
from specsample.kernels._compiled_launch import launch
from specsample.kernels._launch import H200_SMS, cdiv, int32_offsets_fit, interpreting, next_pow2
from specsample.kernels._row_loads import load_once
from specsample.kernels._stream_buffers import stream_buffer
from specsample.kernels.philox import (
    STREAM_LOGITS_RESIDUAL,
    STREAM_LOGITS_UNIFORM,
    UNIFORM_HALF_STEP,
    philox_words,
    uniform_from_word,
)
from specsample.kernels.result import SampleResult

_check_tensor = functools.partial(check_tensor, reference="target_logits")

_INTERP_TILE_ELEMENTS = 1 << 20  # elements of one [BLOCK_ROWS, BLOCK_V] tile under the interpreter
MIN_TEMPERATURE = 2.0**-126  # sampled rows use T clamped to [MIN_TEMPERATURE, MAX_TEMPERATURE], so that
MAX_TEMPERATURE = 2.0**100  # 1/T is a normal float32 (neither inf nor flushed to zero)

_LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
_LN2: tl.constexpr = tl.constexpr(0.6931471805599453)
_HW_LOG: tl.constexpr = tl.constexpr(not interpreting())  # lg2.approx exists on the GPU only
_NEG_INF: tl.constexpr = tl.constexpr(float("-inf"))
_INF: tl.constexpr = tl.constexpr(float("inf"))
_MIN_T: tl.constexpr = tl.constexpr(MIN_TEMPERATURE)
_MAX_T: tl.constexpr = tl.constexpr(MAX_TEMPERATURE)


# ----------------------------------------------------------------------------------------------
# Device helpers
# ----------------------------------------------------------------------------------------------


@triton.jit
def _clean_logits(values):
    """float32 logits with NaN and +-inf replaced by -inf (|NaN| < inf is False)."""
    v = values.to(tl.float32)
    return tl.where(tl.abs(v) < _INF, v, _NEG_INF)


@triton.jit
def _row_params(b, b_ok, temp_ptr, s_temp, n_ptr, sn_b, K: tl.constexpr, RAGGED: tl.constexpr):
    """(sampled, greedy, 1/T, n) of requests b: sampled iff 0 < T < inf, greedy iff T == 0; 1/T uses
    T clamped to [2^-126, 2^100] on sampled rows and 1 elsewhere; n = num_draft_tokens clamped to [0, K]."""
    temp = tl.load(temp_ptr + b * s_temp, mask=b_ok, other=-1.0).to(tl.float32)
    sampled = b_ok & (temp > 0.0) & (temp < _INF)
    greedy = b_ok & (temp == 0.0)
    inv_t = tl.where(sampled, 1.0 / tl.minimum(tl.maximum(temp, _MIN_T), _MAX_T), 1.0)
    if RAGGED:
        n = tl.load(n_ptr + b * sn_b, mask=b_ok, other=0).to(tl.int64)
        n = tl.minimum(tl.maximum(n, 0), K)
    else:
        n = b * 0 + K
    return sampled, greedy, inv_t, n


@triton.jit
def _ln(x, FAST_LOG: tl.constexpr):
    """Natural log: with FAST_LOG on a GPU the hardware's approximate log2 (lg2.approx, absolute
    error ~2^-22) times ln 2, else the correctly rounded software log (~20 instructions on sm_90;
    the interpreter, which has no lg2.approx, always takes it)."""
    if FAST_LOG and _HW_LOG:
        return libdevice.fast_log2f(x) * _LN2
    return tl.log(x)


@triton.jit
def _log_exponential_from_word(word, FAST_LOG: tl.constexpr = False):
    """log E for E = -log(1 - t), t = (word + 1/2) 2^-32 (reference.philox.exponential_from_word),
    with absolute error ~1e-7 whatever the accuracy of log near 1 on the device:
    t < 1/2: -log(1 - t) = 2 atanh(s), s = t / (2 - t) <= 1/3, by its odd series (s^17 term < 1e-9);
    t >= 1/2: 1 - t = (w' + 1/2) 2^-32 exactly, w' = 2^32 - 1 - word, and E = -log(1 - t) >= log 2."""
    low = word < 0x80000000
    t = (word.to(tl.float32) + 0.5) * 2.3283064365386963e-10
    if FAST_LOG:
        s = tl.fdiv(t, 2.0 - t)  # approximate division (2 instructions instead of ~10)
    else:
        s = t / (2.0 - t)
    s2 = s * s
    series = 1.0 / 17.0
    series = series * s2 + 1.0 / 15.0
    series = series * s2 + 1.0 / 13.0
    series = series * s2 + 1.0 / 11.0
    series = series * s2 + 1.0 / 9.0
    series = series * s2 + 1.0 / 7.0
    series = series * s2 + 1.0 / 5.0
    series = series * s2 + 1.0 / 3.0
    series = series * s2 + 1.0
    e_low = 2.0 * s * series
    rest = ((0xFFFFFFFF - word).to(tl.float32) + 0.5) * 2.3283064365386963e-10
    e_high = -_ln(tl.where(low, 0.5, rest), FAST_LOG)
    return _ln(tl.where(low, e_low, e_high), FAST_LOG)


@triton.jit
def _log1mexp(x, FAST_LOG: tl.constexpr = False):
    """log(1 - e^x) for x < 0 (-inf at x = 0): near 0 as log(-x) + log(expm1(x) / x) with the
    Taylor series of expm1(x) / x (|x| < ln 2, 10 terms); elsewhere log(1 - e^x), 1 - e^x >= 1/2."""
    h = 1.0 / 39916800.0
    h = h * x + 1.0 / 3628800.0
    h = h * x + 1.0 / 362880.0
    h = h * x + 1.0 / 40320.0
    h = h * x + 1.0 / 5040.0
    h = h * x + 1.0 / 720.0
    h = h * x + 1.0 / 120.0
    h = h * x + 1.0 / 24.0
    h = h * x + 1.0 / 6.0
    h = h * x + 0.5
    h = h * x + 1.0
    near = x > -_LN2
    if FAST_LOG:  # one (hardware) logarithm: log(-expm1(x)) = log(-x h) near 0, log(1 - e^x) elsewhere
        return _ln(tl.where(near, -x * h, 1.0 - tl.exp(tl.where(near, -1.0, x))), True)
    return tl.where(near, tl.log(-x) + tl.log(h), tl.log(1.0 - tl.exp(tl.where(near, -1.0, x))))


@triton.jit
def _race_words(seed, offset, position, first_col, BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr):
    """[BLOCK_ROWS, BLOCK_V] Philox words of tokens first_col + lane (first_col a multiple of 4): one
    Philox call per group of four tokens, the four words interleaved so that token v gets word v % 4."""
    groups = (first_col // 4)[:, None] + tl.arange(0, BLOCK_V // 4).to(tl.int64)[None, :]
    zero = groups * 0
    w0, w1, w2, w3 = philox_words(seed[:, None] + zero, offset[:, None] + zero, groups,
                                  STREAM_LOGITS_RESIDUAL, position[:, None] + zero)  # fmt: skip
    words = tl.join(tl.join(w0, w2), tl.join(w1, w3))  # [R, G, 2, 2]: [g, a, c] = word 2a + c
    return tl.reshape(words, (BLOCK_ROWS, BLOCK_V))


@triton.jit
def _may_win_race(lp, word, best_r, best_p, FAST_LOG: tl.constexpr):
    """[R, C] whether a token (log p = lp, noise word) can change either race's running best [R]:
    its score log p - log E (or log r - log E <= that) is <= lp - log t, since E = -log(1 - t) >= t
    for its uniform t = (word + 1/2) 2^-32. So a token with lp - log t <= min(best_r, best_p) - 2^-10
    cannot: the 2^-10 margin dwarfs the error of the approximate logarithms (~1e-6). NaN-free:
    lp = -inf never may."""
    log_t = _ln((word.to(tl.float32) + 0.5) * 2.3283064365386963e-10, FAST_LOG)
    return (lp - log_t) > (tl.minimum(best_r, best_p) - 0.0009765625)[:, None]


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def _stats_block(
    row_block,  # this program's rows are row_block * BLOCK_ROWS + [0, BLOCK_ROWS)
    chunk,  # and its vocabulary chunk
    t_ptr,  # [B, K+1, V] fp32/bf16/fp16 target logits, strides (st_b, st_k, st_v)
    d_ptr,  # [B, K, V] draft logits, strides (sd_b, sd_k, sd_v) (HAS_DRAFT_LOGITS)
    temp_ptr,  # [B] fp32 temperatures
    n_ptr,  # [B] int32/int64 ragged draft counts (RAGGED)
    tmax_ptr,  # [B*(K+1), NC] fp32 out: chunk max of clean target logits (-inf if none)
    tsum_ptr,  # [B*(K+1), NC] fp32 out: chunk sum of exp((l - chunk max) / T)
    targ_ptr,  # [B*(K+1), NC] int32 out: smallest index attaining the chunk max
    dmax_ptr,  # [B*(K+1), NC] fp32 out: draft chunk max (HAS_DRAFT_LOGITS, rows i < K)
    dsum_ptr,  # [B*(K+1), NC] fp32 out: draft chunk sum-exp
    B, V, NC,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b,
    K: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    LANE_I32: tl.constexpr = False,
):  # fmt: skip
    # row r = (b, i), chunk c = columns [c TILES BLOCK_V, (c+1) TILES BLOCK_V):
    #   m_c = max_v l_v,  s_c = sum_v exp((l_v - m_c) / T)   (online over the TILES tiles)
    # l = clean(target) and, for i < n_b on sampled rows, the same for clean(draft).
    rows = row_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    chunk = chunk.to(tl.int64)
    row_ok = rows < B * (K + 1)
    b = rows // (K + 1)
    i = rows % (K + 1)
    sampled, greedy, inv_t, n = _row_params(b, row_ok, temp_ptr, s_temp, n_ptr, sn_b, K, RAGGED)
    need = (sampled | greedy) & (i <= n)
    scale = inv_t * _LOG2E  # exp(x / T) = exp2(x * log2(e) / T)

    any_greedy = tl.max(greedy.to(tl.int32), axis=0) > 0
    t_max = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    t_sum = tl.zeros((BLOCK_ROWS,), tl.float32)
    t_arg = tl.zeros((BLOCK_ROWS,), tl.int64)
    if HAS_DRAFT_LOGITS:
        need_d = sampled & (i < n)
        d_max = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        d_sum = tl.zeros((BLOCK_ROWS,), tl.float32)
        d_row = d_ptr + (b * sd_b + tl.minimum(i, K - 1) * sd_k)
    # LANE_I32 (the launcher checks V * stride < 2^31): 32-bit column offsets from a 64-bit row
    # pointer, so per-element address and bounds arithmetic is 32-bit (offline SASS at 8 warps:
    # 43.8 -> 36.1 instructions per element)
    t_row = t_ptr + (b * st_b + i * st_k)
    if LANE_I32:
        lane = tl.arange(0, BLOCK_V)[None, :]
        first_col = chunk.to(tl.int32) * (TILES * BLOCK_V)
    else:
        lane = tl.arange(0, BLOCK_V).to(tl.int64)[None, :]
        first_col = chunk * (TILES * BLOCK_V)
    for tile in range(TILES):
        cols = first_col + tile * BLOCK_V + lane
        in_v = cols < V
        l = _clean_logits(load_once(t_row[:, None] + cols * st_v,
                                    need[:, None] & in_v, float("-inf")))  # fmt: skip
        tile_max = tl.max(l, axis=1)
        if any_greedy:  # the argmax only serves greedy rows (a uniform branch on the GPU)
            tile_arg = tl.min(tl.where(l == tile_max[:, None], cols, V), axis=1)
            t_arg = tl.where(tile_max > t_max, tile_arg, t_arg)  # strict: the earlier index wins ties
        new_max = tl.maximum(t_max, tile_max)
        shift = tl.where(new_max == _NEG_INF, 0.0, new_max)
        t_sum = t_sum * tl.exp2((t_max - shift) * scale) + tl.sum(
            tl.exp2((l - shift[:, None]) * scale[:, None]), axis=1
        )
        t_max = new_max
        if HAS_DRAFT_LOGITS:
            dl = _clean_logits(load_once(d_row[:, None] + cols * sd_v,
                                         need_d[:, None] & in_v, float("-inf")))  # fmt: skip
            new_dmax = tl.maximum(d_max, tl.max(dl, axis=1))
            dshift = tl.where(new_dmax == _NEG_INF, 0.0, new_dmax)
            d_sum = d_sum * tl.exp2((d_max - dshift) * scale) + tl.sum(
                tl.exp2((dl - dshift[:, None]) * scale[:, None]), axis=1
            )
            d_max = new_dmax

    out = rows * NC + chunk
    tl.store(tmax_ptr + out, t_max, mask=row_ok)
    tl.store(tsum_ptr + out, t_sum, mask=row_ok)
    tl.store(targ_ptr + out, t_arg.to(tl.int32), mask=row_ok)
    if HAS_DRAFT_LOGITS:
        tl.store(dmax_ptr + out, d_max, mask=row_ok)
        tl.store(dsum_ptr + out, d_sum, mask=row_ok)


@triton.jit
def _combine_stats(max_ptr, sum_ptr, arg_ptr, rk, rk_ok, inv_t, NC, WITH_ARG: tl.constexpr):
    """Per (request, position) [R, KP]: global max M, log of sum exp((l - M) / T) (-inf on empty
    rows, where M = -inf too) and the smallest argmax, from the NC chunk statistics."""
    big_m = tl.full(rk.shape, _NEG_INF, tl.float32)
    big_s = tl.zeros(rk.shape, tl.float32)
    arg = tl.zeros(rk.shape, tl.int64)
    scale = inv_t[:, None] * _LOG2E
    for c in range(NC):
        m_c = tl.load(max_ptr + rk * NC + c, mask=rk_ok, other=float("-inf"))
        s_c = tl.load(sum_ptr + rk * NC + c, mask=rk_ok, other=0.0)
        if WITH_ARG:
            a_c = tl.load(arg_ptr + rk * NC + c, mask=rk_ok, other=0).to(tl.int64)
            arg = tl.where(m_c > big_m, a_c, arg)  # chunks in order: strict keeps the smallest index
        new_m = tl.maximum(big_m, m_c)
        shift = tl.where(new_m == _NEG_INF, 0.0, new_m)
        big_s = big_s * tl.exp2((big_m - shift) * scale) + s_c * tl.exp2((m_c - shift) * scale)
        big_m = new_m
    log_s = tl.where(big_s > 0.0, tl.log(big_s), _NEG_INF)
    return big_m, log_s, arg


@triton.jit
def _log_prob(l, big_m, log_s, inv_t):
    """log softmax(l / T) from the row statistics; -inf for l = -inf and on empty rows."""
    shift = tl.where(big_m == _NEG_INF, 0.0, big_m)
    norm = tl.where(log_s == _NEG_INF, 0.0, log_s)
    return tl.where(l == _NEG_INF, _NEG_INF, (l - shift) * inv_t - norm)


@triton.jit
def _pick(values, pos, j):
    """values[r, j_r] of an [R, KP] block (j_r in [0, KP)); -inf / 0 safe."""
    return tl.max(tl.where(pos == j[:, None], values, _NEG_INF), axis=1)


@triton.jit
def _pick_int(values, pos, j):
    return tl.sum(tl.where(pos == j[:, None], values, 0), axis=1)


@triton.jit
def _race_tile_update(best_r, idx_r, best_p, idx_p, lp, words, cols, live, d_ptr, req, j, x_j, use_q,
                      m_dj, log_sd_j, inv_t, V, sd_b, sd_k, sd_v,
                      K: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr, FAST_LOG: tl.constexpr):  # fmt: skip
    """Both races' running bests (score, smallest index) after one tile of row j: the residual race
    over log r - log E and the race over log p - log E (the fallback when the residual is empty)."""
    log_e = _log_exponential_from_word(words, FAST_LOG)
    score_p = lp - log_e
    if HAS_DRAFT_LOGITS:
        d_row = req * sd_b + tl.minimum(j, K - 1) * sd_k
        dl = _clean_logits(load_once(d_ptr + d_row[:, None] + cols * sd_v,
                                     live & use_q[:, None], float("-inf")))  # fmt: skip
        lq = _log_prob(dl, m_dj[:, None], log_sd_j[:, None], inv_t[:, None])
        gap = tl.where(lp > lq, lq - lp, -1.0)
        log_r = tl.where(lp > lq, lp + _log1mexp(gap, FAST_LOG), _NEG_INF)
        score_r = tl.where(use_q[:, None], log_r - log_e, score_p)
    else:
        score_r = tl.where(cols == x_j[:, None], _NEG_INF, score_p)
    tile_r = tl.max(score_r, axis=1)
    at_r = tl.min(tl.where(score_r == tile_r[:, None], cols, V), axis=1)
    idx_r = tl.where(tile_r > best_r, at_r, idx_r)
    best_r = tl.maximum(best_r, tile_r)
    tile_p = tl.max(score_p, axis=1)
    at_p = tl.min(tl.where(score_p == tile_p[:, None], cols, V), axis=1)
    idx_p = tl.where(tile_p > best_p, at_p, idx_p)
    best_p = tl.maximum(best_p, tile_p)
    return best_r, idx_r, best_p, idx_p


@triton.jit
def _race_block(
    req_block,  # this program's requests are req_block * BLOCK_ROWS + [0, BLOCK_ROWS)
    chunk,  # and its vocabulary chunk of the emit row
    t_ptr,  # [B, K+1, V] target logits, strides (st_b, st_k, st_v)
    d_ptr,  # [B, K, V] draft logits (HAS_DRAFT_LOGITS), strides (sd_b, sd_k, sd_v)
    x_ptr,  # [B, K] int32/int64 draft ids, strides (sx_b, sx_k)
    temp_ptr,  # [B] fp32
    n_ptr,  # [B] ragged draft counts (RAGGED)
    seed_ptr,  # [B] int64
    offset_ptr,  # [B] int64
    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr,  # [B*(K+1), NC1] phase-1 statistics
    best_ptr,  # [B, NC2, 2] fp32 scratch: chunk winner scores (residual race, race over p)
    best_idx_ptr,  # [B, NC2, 2] int32 scratch: chunk winner tokens
    arrivals_ptr,  # [>= cdiv(B, BLOCK_ROWS)] int32, zero on entry, zero again on exit (_arrivals.py)
    tokens_ptr,  # [B, K+1] int32 out, contiguous
    num_accepted_ptr,  # [B] int32 out
    fallback_ptr,  # [B] bool out
    valid_ptr,  # [B] bool out
    B, V, NC1, NC2,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
    K: tl.constexpr,
    KP: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    FAST_LOG: tl.constexpr = False,
    SCREEN: tl.constexpr = False,
):  # fmt: skip
    # log p_i(v) = (l_iv - M_i) / T - log S_i   (log q_i likewise from the draft statistics)
    # accept x_i (i < n, 0 <= x_i < V):  classic  d_i(x_i) finite and m_i < p_i(x_i) / q_i(x_i)
    #                                     one-hot  m_i < p_i(x_i);   greedy  x_i == argmax_v l_iv
    # (m_i = u_i + 2^-25, the midpoint of the uniform's 2^-24 cell)
    # j = first rejection (or n).  log r_v = log(p_v - q_v) = log p_v + log(1 - e^(log q_v - log p_v))
    # where p_v > q_v (classic), log p_v off x_j (one-hot), log p_v (bonus row j = n).
    # token = argmax_v log r_v - log E_v; no residual mass: the same race over p (fallback).
    req = req_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    chunk = chunk.to(tl.int64)
    req_ok = req < B
    sampled, greedy, inv_t, n = _row_params(req, req_ok, temp_ptr, s_temp, n_ptr, sn_b, K, RAGGED)
    seed = tl.load(seed_ptr + req * ss_b, mask=req_ok, other=0).to(tl.int64)
    offset = tl.load(offset_ptr + req * so_b, mask=req_ok, other=0).to(tl.int64)

    # -- acceptance tests, identical in every chunk program of the request --------------------
    pos = tl.arange(0, KP).to(tl.int64)[None, :]
    rk = req[:, None] * (K + 1) + pos
    rk_ok = (req_ok & (sampled | greedy))[:, None] & (pos <= n[:, None])
    big_m, log_s, arg = _combine_stats(tmax_ptr, tsum_ptr, targ_ptr, rk, rk_ok, inv_t, NC1, True)
    drafted = rk_ok & (pos < n[:, None])
    x = tl.load(x_ptr + req[:, None] * sx_b + tl.minimum(pos, K - 1) * sx_k, mask=drafted, other=-1)
    x = x.to(tl.int64)
    ok = drafted & (x >= 0) & (x < V)
    gather = ok & sampled[:, None]
    l_x = _clean_logits(tl.load(t_ptr + req[:, None] * st_b + pos * st_k + x * st_v, mask=gather,
                                other=float("-inf")))  # fmt: skip
    lp_x = _log_prob(l_x, big_m, log_s, inv_t[:, None])
    zero = rk * 0
    w0, _, _, _ = philox_words(seed[:, None] + zero, offset[:, None] + zero, pos + zero,
                               STREAM_LOGITS_UNIFORM, zero)  # fmt: skip
    u = uniform_from_word(w0).to(tl.float64) + UNIFORM_HALF_STEP  # u + 2^-25: its cell's midpoint
    if HAS_DRAFT_LOGITS:
        big_md, log_sd, _ = _combine_stats(dmax_ptr, dsum_ptr, targ_ptr, rk, drafted, inv_t, NC1, False)
        d_x = _clean_logits(tl.load(d_ptr + req[:, None] * sd_b + tl.minimum(pos, K - 1) * sd_k + x * sd_v,
                                    mask=gather, other=float("-inf")))  # fmt: skip
        lq_x = _log_prob(d_x, big_md, log_sd, inv_t[:, None])
        ratio = tl.exp(lp_x - tl.where(d_x > _NEG_INF, lq_x, 0.0))
        accept_sampled = (d_x > _NEG_INF) & (u < ratio.to(tl.float64))
    else:
        accept_sampled = u < tl.exp(lp_x).to(tl.float64)
    accept_greedy = (x == arg) & (big_m > _NEG_INF)
    accept = ok & tl.where(sampled[:, None], accept_sampled, accept_greedy)
    j = tl.min(tl.where(drafted & ~accept, pos, K + 1), axis=1)
    j = tl.minimum(j, n)  # a = j accepted drafts; j is the emit position
    rejected = j < n
    m_j = _pick(big_m, pos, j)
    log_s_j = _pick(log_s, pos, j)
    x_j = tl.where(rejected, _pick_int(x, pos, j), -1)

    # -- exponential race on this chunk of row j ----------------------------------------------
    best_r = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    best_p = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    idx_r = tl.full((BLOCK_ROWS,), -1, tl.int64)
    idx_p = tl.full((BLOCK_ROWS,), -1, tl.int64)
    if HAS_DRAFT_LOGITS:
        m_dj = _pick(big_md, pos, j)
        log_sd_j = _pick(log_sd, pos, j)
        use_q = sampled & rejected
    else:  # unused stand-ins (one-hot drafts read no draft row)
        m_dj = m_j
        log_sd_j = log_s_j
        use_q = rejected
    lane = tl.arange(0, BLOCK_V).to(tl.int64)[None, :]
    if tl.max(sampled.to(tl.int32), axis=0) > 0:  # greedy-only blocks skip the race (uniform branch)
        for tile in range(TILES):
            first = (chunk * TILES + tile) * BLOCK_V
            cols = first + lane
            live = sampled[:, None] & (cols < V)
            l = _clean_logits(load_once(t_ptr + (req * st_b + j * st_k)[:, None] + cols * st_v, live,
                                        float("-inf")))  # fmt: skip
            lp = _log_prob(l, m_j[:, None], log_s_j[:, None], inv_t[:, None])
            words = _race_words(seed, offset, j, req * 0 + first, BLOCK_ROWS, BLOCK_V)
            if SCREEN:
                hot = _may_win_race(lp, words, best_r, best_p, FAST_LOG)
                if tl.max(tl.max(hot.to(tl.int32), axis=1), axis=0) > 0:
                    best_r, idx_r, best_p, idx_p = _race_tile_update(
                        best_r, idx_r, best_p, idx_p, lp, words, cols, live, d_ptr, req, j, x_j, use_q,
                        m_dj, log_sd_j, inv_t, V, sd_b, sd_k, sd_v, K, HAS_DRAFT_LOGITS,
                        FAST_LOG)  # fmt: skip
            else:
                best_r, idx_r, best_p, idx_p = _race_tile_update(
                    best_r, idx_r, best_p, idx_p, lp, words, cols, live, d_ptr, req, j, x_j, use_q,
                    m_dj, log_sd_j, inv_t, V, sd_b, sd_k, sd_v, K, HAS_DRAFT_LOGITS, FAST_LOG)  # fmt: skip
    slot = (req * NC2 + chunk) * 2
    tl.store(best_ptr + slot, best_r, mask=req_ok)
    tl.store(best_ptr + slot + 1, best_p, mask=req_ok)
    tl.store(best_idx_ptr + slot, idx_r.to(tl.int32), mask=req_ok)
    tl.store(best_idx_ptr + slot + 1, idx_p.to(tl.int32), mask=req_ok)

    # -- the last program to arrive for this request block writes the outputs ----------------
    arrived = tl.atomic_add(arrivals_ptr + req_block, 1, sem="acq_rel")
    if arrived == NC2 - 1:
        best_r = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        best_p = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        idx_r = tl.full((BLOCK_ROWS,), -1, tl.int64)
        idx_p = tl.full((BLOCK_ROWS,), -1, tl.int64)
        for c in range(NC2):
            slot = (req * NC2 + c) * 2
            s_r = tl.load(best_ptr + slot, mask=req_ok, other=float("-inf"), cache_modifier=".cg")
            s_p = tl.load(best_ptr + slot + 1, mask=req_ok, other=float("-inf"), cache_modifier=".cg")
            i_r = tl.load(best_idx_ptr + slot, mask=req_ok, other=-1, cache_modifier=".cg").to(tl.int64)
            i_p = tl.load(best_idx_ptr + slot + 1, mask=req_ok, other=-1, cache_modifier=".cg").to(tl.int64)
            idx_r = tl.where(s_r > best_r, i_r, idx_r)  # chunks in order: ties keep the smaller id
            best_r = tl.maximum(best_r, s_r)
            idx_p = tl.where(s_p > best_p, i_p, idx_p)
            best_p = tl.maximum(best_p, s_p)
        has_r = best_r > _NEG_INF
        fallback = sampled & rejected & ~has_r
        token_sampled = tl.where(has_r, idx_r, tl.where(best_p > _NEG_INF, idx_p, -1))
        token_greedy = tl.where(m_j > _NEG_INF, _pick_int(arg, pos, j), -1)
        token = tl.where(sampled, token_sampled, tl.where(greedy, token_greedy, -1))
        a = tl.where(sampled | greedy, j, 0)
        out = tl.where(pos < a[:, None], x, tl.where(pos == a[:, None], token[:, None], -1))
        out_ok = req_ok[:, None] & (pos <= K)
        tl.store(tokens_ptr + req[:, None] * (K + 1) + pos, out.to(tl.int32), mask=out_ok)
        tl.store(num_accepted_ptr + req, a.to(tl.int32), mask=req_ok)
        tl.store(fallback_ptr + req, fallback, mask=req_ok)
        tl.store(valid_ptr + req, token >= 0, mask=req_ok)
        tl.atomic_xchg(arrivals_ptr + req_block, 0)  # ready for the next call / graph replay


@triton.jit
def _logits_stats_kernel(
    t_ptr, d_ptr, temp_ptr, n_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr,  # see _stats_block
    B, V, NC,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b,
    K: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    LANE_I32: tl.constexpr,
):  # fmt: skip
    # grid (row blocks of the B*(K+1) target rows, vocabulary chunks): one _stats_block each.
    _stats_block(tl.program_id(0), tl.program_id(1), t_ptr, d_ptr, temp_ptr, n_ptr, tmax_ptr, tsum_ptr,
                 targ_ptr, dmax_ptr, dsum_ptr, B, V, NC, st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b,
                 K, HAS_DRAFT_LOGITS, RAGGED, BLOCK_ROWS, BLOCK_V, TILES, LANE_I32)  # fmt: skip


@triton.jit
def _logits_race_kernel(
    t_ptr, d_ptr, x_ptr, temp_ptr, n_ptr, seed_ptr, offset_ptr,  # see _race_block
    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, best_ptr, best_idx_ptr, arrivals_ptr,
    tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr,
    B, V, NC1, NC2,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
    K: tl.constexpr,
    KP: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    FAST_LOG: tl.constexpr,
    SCREEN: tl.constexpr,
):  # fmt: skip
    # grid (request blocks, vocabulary chunks of the emit row): one _race_block each.
    _race_block(tl.program_id(0), tl.program_id(1), t_ptr, d_ptr, x_ptr, temp_ptr, n_ptr, seed_ptr,
                offset_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, best_ptr, best_idx_ptr,
                arrivals_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, B, V, NC1, NC2,
                st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
                K, KP, HAS_DRAFT_LOGITS, RAGGED, BLOCK_ROWS, BLOCK_V, TILES, FAST_LOG, SCREEN)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


_RACE_PROGRAMS = 4 * H200_SMS  # race-pass programs wanted at least (4 per SM)


def _race_tiles(batch: int, vocab: int, race_block: int) -> int:
    """Tiles per race-pass program: the longest of 16, 8, 4 that still gives batch x chunks >= 4
    programs per SM (4 if none does; never more tiles than the row has). Longer chunks let the
    screen skip more tiles: H200 run 30 (graph µs, same run, ci/gpu/logits_gpu.py) at (64, 4, 151936)
    and (128, 8, 128256), fp32 and bf16, one-hot and classic: 16 tiles 1.08-1.34x faster than the
    unscreened 4-tile race, 4 tiles screened 1.00-1.16x. The fall-back for small batches keeps the
    run-14 split (4 tiles), where fewer, longer programs would leave SMs idle."""
    tiles = cdiv(vocab, race_block)
    for want in (16, 8):
        if batch * cdiv(vocab, race_block * want) >= _RACE_PROGRAMS:
            return max(1, min(want, tiles))
    return max(1, min(4, tiles))


def launch_config(batch: int, k_plus_1: int, vocab: int, overrides: dict | None = None) -> dict:
    """Tile and chunk sizes of both phases. GPU: one row per program; phase 1 reads chunks of
    `stats_block * stats_tiles` columns (8192 by default) so B*(K+1)*chunks fills the SMs; phase 2
    races over chunks of `race_block * race_tiles` columns. Interpreter: one chunk per row and
    hundreds of rows per [BLOCK_ROWS, BLOCK_V] tile. `overrides` (tests, the GPU sweep) replaces
    any key."""
    vocab_pow2 = next_pow2(vocab)
    if interpreting():
        block = max(4, min(vocab_pow2, 4096))
        tiles = cdiv(vocab, block)
        rows_cap = max(1, min(1 << 16, _INTERP_TILE_ELEMENTS // block))
        cfg = {
            "stats_block": block, "stats_tiles": tiles, "race_block": block, "race_tiles": tiles,
            "stats_rows": max(1, min(rows_cap, next_pow2(batch * k_plus_1))),
            "race_rows": max(1, min(rows_cap, next_pow2(batch))),
            "stats_warps": 4, "race_warps": 4,
        }  # fmt: skip
        cfg.update({"fast_log": False, "lane_i32": False, "screen": False})
    else:
        # stats pass: 4096-column tiles, 2 per chunk, 32-bit column offsets (lane_i32, where they
        # fit). H200 run 21, same run, graph time: 1.04-1.07x faster for fp32 and 1.13-1.24x for bf16
        # than 2048 x 4 tiles with 64-bit offsets (offline SASS 43.8 -> 29.1 instructions per element)
        stats_block = max(128, min(4096, vocab_pow2))
        race_block = max(128, min(1024, vocab_pow2))
        cfg = {
            "stats_block": stats_block, "stats_tiles": max(1, min(2, cdiv(vocab, stats_block))),
            "race_block": race_block, "race_tiles": _race_tiles(batch, vocab, race_block),
            "stats_rows": 1, "race_rows": 1, "stats_warps": 8, "race_warps": 4,
        }  # fmt: skip
        # fast_log (the hardware log2 and one logarithm per token in the race pass): on, H200 run 14
        # measured the whole call 1.12-1.21x faster at the shapes, coupling unchanged.
        # screen (the race pass skips tiles that cannot change either race's best; outputs bit for
        # bit unchanged): on, H200 run 30, see _race_tiles.
        cfg.update({"fast_log": True, "lane_i32": True, "screen": True})
    unknown = set(overrides or {}) - set(cfg)
    if unknown:
        _fail(ValueError, "config", f"keys among {sorted(cfg)}", sorted(unknown))
    cfg.update(overrides or {})
    for key in ("stats_block", "race_block"):
        if cfg[key] < 4 or cfg[key] & (cfg[key] - 1):
            _fail(ValueError, f"config[{key!r}]", "a power of two >= 4", cfg[key])
    return cfg


def rejection_sample_logits(
    target_logits: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_logits: torch.Tensor | None = None,
    *,
    temperature: torch.Tensor,
    seeds: torch.Tensor,
    offsets: torch.Tensor,
    num_draft_tokens: torch.Tensor | None = None,
    _config: dict | None = None,
) -> SampleResult:
    """Speculative rejection sampling from logits: classic when `draft_logits` is given (accept x_i
    iff u_i + 2^-25 < p_i(x_i) / q_i(x_i), the uniform at its 2^-24 cell's midpoint), one-hot drafts
    otherwise (accept iff u_i + 2^-25 < p_i(x_i)).

    target_logits [B, K+1, V] and draft_logits [B, K, V]: fp32/bf16/fp16, any strides (stride-0
    broadcasts are read in place). draft_token_ids [B, K] int32/int64; num_draft_tokens [B]
    int32/int64 (row b uses its first n_b drafts, clamped to [0, K], and its bonus row n_b).
    temperature [B] fp32: 0 = greedy (accept iff x_i is the target argmax, smallest index on ties;
    emit the argmax), 0 < T < inf = sampled from p = softmax(clean(l) / T) with the draft renormalised
    at the same T; anything else = invalid row. seeds, offsets [B] int64 key the in-kernel Philox.

    Guarantees: never emits a token whose clean target logit is -inf (zero mass), never an id outside
    [0, V) other than -1; invalid draft ids are rejected without being read; an empty residual
    (norm_sum == 0) falls back to p and sets `fallback`; a row with no finite logit emits -1 and is
    not `valid`. No host synchronisation, no data-dependent shapes (CUDA-graph capturable). The
    probability tensors are never materialised: workspaces are O(B (K+1) V / chunk).
    """
    lg = target_logits
    batch, k_plus_1, vocab = check_target_rows("target_logits", lg)
    num_k = k_plus_1 - 1
    device = lg.device
    _check_tensor("draft_token_ids", draft_token_ids, (batch, num_k), _ID_DTYPES, device)
    if draft_logits is not None:
        _check_tensor("draft_logits", draft_logits, (batch, num_k, vocab), _LOGIT_DTYPES, device)
    _check_tensor("temperature", temperature, (batch,), (torch.float32,), device)
    _check_tensor("seeds", seeds, (batch,), (torch.int64,), device)
    _check_tensor("offsets", offsets, (batch,), (torch.int64,), device)
    if num_draft_tokens is not None:
        _check_tensor("num_draft_tokens", num_draft_tokens, (batch,), _ID_DTYPES, device)
    return _launch(lg, draft_token_ids, draft_logits, temperature, seeds, offsets, num_draft_tokens,
                   launch_config(batch, k_plus_1, vocab, _config))  # fmt: skip


def stats_lane_i32(cfg: dict, vocab: int, target_stride_v: int, draft_stride_v: int) -> bool:
    """The stats pass's LANE_I32 flag: 32-bit column offsets when the config asks for them and every
    column offset of the last (padded) chunk fits in int32."""
    padded = vocab + cfg["stats_block"] * cfg["stats_tiles"]
    return cfg["lane_i32"] and int32_offsets_fit(padded, target_stride_v, draft_stride_v)


def _launch(lg, x, dl, temperature, seeds, offsets, n, cfg) -> SampleResult:
    """Both phases on validated tensors."""
    batch, k_plus_1, vocab = lg.shape
    num_k = k_plus_1 - 1
    device = lg.device
    tokens = torch.empty(batch, k_plus_1, dtype=torch.int32, device=device)
    num_accepted = torch.empty(batch, dtype=torch.int32, device=device)
    fallback = torch.empty(batch, dtype=torch.bool, device=device)
    valid = torch.empty(batch, dtype=torch.bool, device=device)
    if batch == 0:
        return SampleResult(tokens, num_accepted, fallback, valid)

    has_draft = dl is not None and num_k > 0
    nc1 = cdiv(vocab, cfg["stats_block"] * cfg["stats_tiles"])
    nc2 = cdiv(vocab, cfg["race_block"] * cfg["race_tiles"])
    num_rows = batch * k_plus_1
    # scratch (kernels/_stream_buffers.py), each [rows, chunks] and indexed explicitly by the kernels:
    # per-chunk max / sum-exp / argmax of every target row and max / sum-exp of every draft row, then
    # each request's race candidates (score, index) x 2 per race chunk
    stats = num_rows * nc1
    tmax = stream_buffer(device, "logits_tmax", stats, torch.float32)
    tsum = stream_buffer(device, "logits_tsum", stats, torch.float32)
    targ = stream_buffer(device, "logits_targ", stats, torch.int32)
    dmax = stream_buffer(device, "logits_dmax", stats, torch.float32) if has_draft else tmax
    dsum = stream_buffer(device, "logits_dsum", stats, torch.float32) if has_draft else tsum
    race_blocks = cdiv(batch, cfg["race_rows"])
    best = stream_buffer(device, "logits_best", batch * nc2 * 2, torch.float32)
    best_idx = stream_buffer(device, "logits_best_idx", batch * nc2 * 2, torch.int32)
    arrivals = arrival_counters(device, race_blocks)  # persistent, kept zero by the race kernel

    d_arg, sd = (dl, dl.stride()) if has_draft else (lg, (0, 0, 0))
    x_arg, sx = (x, x.stride()) if num_k > 0 else (tokens, (0, 0))
    n_arg, sn = (n, n.stride(0)) if n is not None else (tokens, 0)
    st = lg.stride()
    launch(_logits_stats_kernel, (cdiv(num_rows, cfg["stats_rows"]), nc1),
        lg, d_arg, temperature, n_arg, tmax, tsum, targ, dmax, dsum,
        batch, vocab, nc1, *st, *sd, temperature.stride(0), sn,
        K=num_k, HAS_DRAFT_LOGITS=has_draft, RAGGED=n is not None,
        BLOCK_ROWS=cfg["stats_rows"], BLOCK_V=cfg["stats_block"], TILES=cfg["stats_tiles"],
        LANE_I32=stats_lane_i32(cfg, vocab, st[2], sd[2]),
        num_warps=cfg["stats_warps"],
    )  # fmt: skip
    launch(_logits_race_kernel, (race_blocks, nc2),
        lg, d_arg, x_arg, temperature, n_arg, seeds, offsets, tmax, tsum, targ, dmax, dsum,
        best, best_idx, arrivals, tokens, num_accepted, fallback, valid,
        batch, vocab, nc1, nc2, *st, *sd, *sx, temperature.stride(0), sn, seeds.stride(0), offsets.stride(0),
        K=num_k, KP=next_pow2(k_plus_1), HAS_DRAFT_LOGITS=has_draft, RAGGED=n is not None,
        BLOCK_ROWS=cfg["race_rows"], BLOCK_V=cfg["race_block"], TILES=cfg["race_tiles"],
        FAST_LOG=cfg["fast_log"], SCREEN=cfg["screen"] and cfg["race_tiles"] > 1,
        num_warps=cfg["race_warps"],
    )  # fmt: skip
    return SampleResult(tokens, num_accepted, fallback, valid)
