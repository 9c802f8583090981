"""Gumbel-max (exponential race) sampling: `fast_sample`, `sample_from_logits`, `renorm_draft_probs`.

The race. With E_v ~ Exp(1) i.i.d., `argmax_v p_v / E_v` is a draw from p / sum(p) (the same law as
`torch.multinomial`), and the top-n of the same scores in decreasing order is a draw of n tokens
without replacement in Plackett-Luce order. Nothing in it asserts on the data, so it can be
captured in a CUDA graph and replayed.

One sample: the grouped race (`specsample.reference.gumbel.grouped_race`, same law). The vocabulary
is cut into groups of 256 tokens with masses P_g = sum of clean p; the race runs between groups,
argmax_g P_g / E_g, and the winning group emits v with probability p_v / P_g by inverse CDF on a
second uniform u_g. E_g and u_g come from words 0 and 1-2 of philox(seed_b, offset_b, index = g,
STREAM_GUMBEL_GROUP): one Philox call per 256 tokens, so the pass over the row is a streaming sum.

Top-n (n > 1) and sample_from_logits: the per-token race. Token v of request b draws E_v from word
(v % 4) of philox(seed_b, offset_b, index = v // 4, STREAM_GUMBEL, position = 0) (numpy twin:
`specsample.reference.philox.gumbel_exponentials`): one Philox call feeds four tokens. So
fast_sample(n = 1) and column 0 of fast_sample(n = 2) are different draws (of the same law).

Either way a request's noise does not depend on the batch, the tile size or the number of programs.

Two phases in one launch, so the vocabulary is spread over many programs at any batch size:
  1. grid (row blocks, vocabulary chunks): each program streams its chunk once and writes the
     chunk's best (score, index), or its top-n, to a small workspace (grouped race: the best
     group's score and its group id, or, for small batches, the token it draws; a re-read of 256
     tokens);
  2. the last program of each row block to finish (an arrival counter, kernels/_arrivals.py) merges
     the chunk candidates of its rows (tiny) and gathers p at the winner. No host synchronisation
     and no memset: the counters are persistent and every launch leaves them at zero. When the
     candidates would exceed 8 per thread (large num_samples over many chunks) the merge is a
     second, separate launch instead (`fuse_merge`).

Edge semantics (every reference in `specsample.reference.gumbel` mirrors them):
  - zero, negative, NaN and +-inf probabilities have no mass and never win, nor do lanes past V;
  - a row with no positive finite mass returns index -1 and sample_p 0 (for n > 1: slots beyond
    the number of positive-mass tokens are -1 / 0);
  - ties in score go to the smallest token id (grouped race: to the smaller group);
  - weights need not be normalised and may be as large as float32 allows; a positive weight so
    small that p * 2^-6 * E leaves float32's normal range (p below ~1e-26) may lose
    the race to rounding (its probability is below float32 resolution anyway); in the grouped race
    the group masses are float32 sums of p * 2^-8 (a group whose mass is below ~1e-36 may lose to
    rounding) and the draw inside the group is exact in float64.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice

from specsample.kernels._arrivals import arrival_counters
from specsample.kernels._call_signature import tensor_signature
from specsample.kernels._compiled_launch import bind, bind_keyed, call_memo, launch, launch_keyed, remember
from specsample.kernels._launch import (
    H200_SMS,
    cdiv,
    check_device,
    interpreting,
    next_pow2,
    other_cuda_device,
)
from specsample.kernels._row_loads import load_once
from specsample.kernels._stream_buffers import KeptBuffers, stream_buffer
from specsample.kernels.chain import _clean, _clean32  # one definition of 'no mass' (chain.py)
from specsample.kernels.philox import STREAM_GUMBEL, STREAM_GUMBEL_GROUP, philox_words, uniform52_from_words

MAX_SAMPLES = 64  # largest num_samples (top-n extraction is unrolled n times)
GROUP_TOKENS = 256  # tokens per noise group of the one-sample grouped race (reference.gumbel twin)
_GROUP: tl.constexpr = tl.constexpr(GROUP_TOKENS)  # the same, for the kernels
_PROB_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_SEED_HIGH = 2**62  # generator path: seeds and offsets drawn uniformly from [0, 2^62)


# ----------------------------------------------------------------------------------------------
# Shared device helpers
# ----------------------------------------------------------------------------------------------


@triton.jit
def _exponential_noise(word, FAST_LOG2: tl.constexpr, SCALE: tl.constexpr = 1.0):
    """Exp(1) = -ln(1 - t), t = (word + 1/2) 2^-32: the same function of the word as
    `philox.exponential_from_word` (float64 twin `reference.philox.exponential_from_word`), with
    one logarithm and no division.
      y = (~word + 1/2) 2^-32 = 1 - t     (rounded to float32: relative error <= 2^-24)
      x = (word + 1/2) 2^-32 = t          (relative error <= 2^-23)
      t < 1/16:   E = x (1 + x/2 + x^2/3 + ... + x^5/6)      truncation <= 2^-24 / 7 relative
      t >= 1/16:  E = -ln(y)                                  E >= 0.0645
    Small E (a rare token's win) never goes through a logarithm of a number near 1, so it keeps
    full relative precision even with the hardware's approximate log2 (FAST_LOG2: absolute error
    ~2^-22, so relative error <= ~3e-6 where E >= 0.0645). E is never 0 nor inf.
    Returns SCALE * E (SCALE a power of two, folded into the constants: exact).
    """
    y = (word ^ 0xFFFFFFFF).to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10
    x = word.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10
    if FAST_LOG2:
        log2_y = libdevice.fast_log2f(y)
    else:
        log2_y = tl.log2(y)
    series = x * (SCALE / 6.0) + SCALE / 5.0
    series = x * series + SCALE / 4.0
    series = x * series + SCALE / 3.0
    series = x * series + SCALE / 2.0
    series = x * series + SCALE
    return tl.where(x < 0.0625, x * series, log2_y * (-0.6931471805599453 * SCALE))


@triton.jit
def _race_tile_words(
    row_base,
    stride_v,
    V,
    row_ok,
    seed,
    offset,
    tile_start,
    GROUPS: tl.constexpr,
    UNIT_STRIDE_V: tl.constexpr,
):
    """Probabilities and noise words of tokens tile_start + [0, 4 GROUPS) as four [R, GROUPS] pairs
    (p_j, word_j), j = token % 4: one vectorised [R, GROUPS, 4] load, one Philox call per group.
    p is the input converted to float32 (lanes >= V: 0), not yet cleaned of NaN / inf."""
    group = tile_start // 4 + tl.arange(0, GROUPS)  # int32: token ids < V < 2^31
    cols = group[None, :, None] * 4 + tl.arange(0, 4)[None, None, :]  # [1, G, 4]
    mask = row_ok[:, None, None] & (cols < V)
    if UNIT_STRIDE_V:
        where = cols
    else:
        where = cols.to(tl.int64) * stride_v
    p = load_once(row_base[:, :, None] + where, mask, 0.0).to(tl.float32)
    # [R, G, 4] -> [R, G, 2, 2]; split takes the minor axis: token 4g + 2i + k -> (i, k)
    p_even, p_odd = tl.split(tl.reshape(p, (p.shape[0], GROUPS, 2, 2)))
    p0, p2 = tl.split(p_even)
    p1, p3 = tl.split(p_odd)
    w0, w1, w2, w3 = philox_words(seed, offset, group[None, :] + seed * 0, STREAM_GUMBEL, seed * 0)
    return p0, p1, p2, p3, w0, w1, w2, w3


@triton.jit
def _noise4(w0, w1, w2, w3, FAST_LOG2: tl.constexpr, SCALE: tl.constexpr):
    """SCALE * E for each of a group's four Philox words (_exponential_noise)."""
    e0 = _exponential_noise(w0, FAST_LOG2, SCALE)
    e1 = _exponential_noise(w1, FAST_LOG2, SCALE)
    e2 = _exponential_noise(w2, FAST_LOG2, SCALE)
    e3 = _exponential_noise(w3, FAST_LOG2, SCALE)
    return e0, e1, e2, e3


@triton.jit
def _race_step(best_p, best_e, best_index, p, e, index):
    """Keep (p, e, index) where p / e beats best_p / best_e, compared by cross-multiplication (no
    division); strict, so on a tie the earlier (smaller) id stays. best starts at (0, 1), so
    p <= 0 and NaN never win, and +inf is excluded explicitly: only 0 < p < inf has mass."""
    take = (p < float("inf")) & (p * best_e > best_p * e)
    return tl.where(take, p, best_p), tl.where(take, e, best_e), tl.where(take, index, best_index)


@triton.jit
def _race_steps(best_p, best_e, best_index, p0, p1, p2, p3, w0, w1, w2, w3, index, FAST_LOG2: tl.constexpr):
    """The running per-lane best (p, 2^-6 E, id) after tokens index + [0, 4) of each lane."""
    e0, e1, e2, e3 = _noise4(w0, w1, w2, w3, FAST_LOG2, 0.015625)
    best_p, best_e, best_index = _race_step(best_p, best_e, best_index, p0, e0, index)
    best_p, best_e, best_index = _race_step(best_p, best_e, best_index, p1, e1, index + 1)
    best_p, best_e, best_index = _race_step(best_p, best_e, best_index, p2, e2, index + 2)
    return _race_step(best_p, best_e, best_index, p3, e3, index + 3)


@triton.jit
def _may_win(p, word, bound):
    """Whether a token can beat a best ratio of bound / 2^-6 (bound from _screen_bound): E >= t
    (-ln(1 - t) >= t, t = (word + 1/2) 2^-32, computed as in _exponential_noise, whose E is t times
    a factor >= 1), so p / E > bound / 2^-6 needs p > bound * t. NaN, p <= 0 and lanes past V
    (p = 0) never may."""
    return p > bound * (word.to(tl.float32) * 2.3283064365386963e-10 + 1.1641532182693481e-10)


@triton.jit
def _screen_bound(best_p, best_e):
    """[R, 1] lower bound, times 2^-6 (1 - 2^-10), of each row's best p / (2^-6 E) so far. The
    2^-10 margin dwarfs every rounding on the way (approximate division, the float32 products, the
    approximate logarithm in E: all below 2^-20 relative), so a token screened out by it is at
    least 2^-11 below the best in ratio and can neither win nor tie. Kept finite: a best ratio past
    FLT_MAX bounds at FLT_MAX, which only screens out fewer tokens."""
    ratio = tl.fdiv(best_p, best_e, ieee_rounding=False)  # best_e >= 2^-6 * 2^-33: normal
    bound = tl.max(ratio, axis=1, keep_dims=True) * (0.015625 * (1.0 - 2.0**-10))
    return tl.minimum(bound, 3.4028234663852886e38)


@triton.jit
def _race_score(p, e):
    """log2(p / e) where 0 < p < inf, else -inf (no overflow for any float32 p)."""
    valid = (p > 0.0) & (p < float("inf"))
    return tl.where(valid, tl.log2(tl.where(valid, p, 1.0)) - tl.log2(e), float("-inf"))


@triton.jit
def _tile_group_masses(row_base, stride_v, V, row_ok, tile_start, NG: tl.constexpr, GW: tl.constexpr,
                       UNIT_STRIDE_V: tl.constexpr):  # fmt: skip
    """[R, NG] masses 2^-8 sum(clean p) of the tile's NG groups of GW tokens from tile_start (lanes
    >= V: no mass). The 2^-8 keeps a sum of 256 float32 values below FLT_MAX."""
    cols = tile_start + tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]  # [NG, GW] int32
    mask = row_ok[:, None, None] & (cols < V)[None, :, :]
    if UNIT_STRIDE_V:
        where = cols
    else:
        where = cols.to(tl.int64) * stride_v
    p = _clean32(load_once(row_base[:, :, None] + where[None, :, :], mask, 0.0))
    return tl.sum(p * 0.00390625, axis=2)


@triton.jit
def _put_group_masses(mass, slot, sums, first_slot, NG: tl.constexpr):
    """mass [R, S] with the tile's group masses sums [R, NG] written at slots first_slot + [0, NG)
    (NG in 1, 2, 4: a tensor cannot be indexed, so its columns are split off)."""
    if NG == 1:
        mass = tl.where(slot == first_slot, sums, mass)
    elif NG == 2:
        m0, m1 = tl.split(sums)
        mass = tl.where(slot == first_slot, m0[:, None], mass)
        mass = tl.where(slot == first_slot + 1, m1[:, None], mass)
    else:
        # [R, 4] -> [R, 2, 2]: split takes the minor axis, group 2i + k -> (i, k)
        even, odd = tl.split(tl.reshape(sums, (sums.shape[0], 2, 2)))
        m0, m2 = tl.split(even)
        m1, m3 = tl.split(odd)
        mass = tl.where(slot == first_slot, m0[:, None], mass)
        mass = tl.where(slot == first_slot + 1, m1[:, None], mass)
        mass = tl.where(slot == first_slot + 2, m2[:, None], mass)
        mass = tl.where(slot == first_slot + 3, m3[:, None], mass)
    return mass


@triton.jit
def _pick_in_group(probs_ptr, rows, ok, group, u, stride_b, stride_v, V, LANES: tl.constexpr):
    """[R] token of the grouped race in `group` (where ok): the first v of the group with
    C_v > u C_last and p_v > 0, C the float64 inclusive cumulative sum of clean p and u [R] the
    group's 52-bit uniform; the last token with mass if rounding leaves none. LANES: 256, or a power
    of two >= V when V < 256."""
    cols = group[:, None] * _GROUP + tl.arange(0, LANES)[None, :]
    mask = ok[:, None] & (cols < V)
    p = _clean(tl.load(probs_ptr + rows[:, None] * stride_b + cols * stride_v, mask=mask, other=0.0))
    return group * _GROUP + _cdf_pick(p, p > 0.0, u, LANES)


@triton.jit
def _cdf_pick(w, on, u, LANES: tl.constexpr):
    """[R] lane drawn by inverse CDF from float64 weights w [R, LANES] >= 0 at uniforms u [R]: the
    first lane with C > u C_last and w > 0 (C the inclusive cumulative sum), or the last lane of
    `on` (the lanes with mass) if rounding leaves none. Shared by the grouped draws of fast_sample
    and rejection_sample_logits."""
    lane = tl.arange(0, LANES)[None, :]
    cdf = tl.cumsum(w, axis=1)
    target = u * tl.max(cdf, axis=1)
    first = tl.min(tl.where((cdf > target[:, None]) & (w > 0.0), lane, LANES), axis=1)
    last = tl.max(tl.where(on, lane, -1), axis=1)
    return tl.where(first < LANES, first, last)


@triton.jit
def _row_seeds(seeds_ptr, offsets_ptr, rows, row_ok, seed_stride, offset_stride):
    seed = tl.load(seeds_ptr + rows * seed_stride, mask=row_ok, other=0)
    offset = tl.load(offsets_ptr + rows * offset_stride, mask=row_ok, other=0)
    return seed.to(tl.int64)[:, None], offset.to(tl.int64)[:, None]


@triton.jit
def _store_top_n(
    score,
    index,
    out_score_ptr,
    out_index_ptr,
    rows,
    row_ok,
    slot_base,
    NUM_SAMPLES: tl.constexpr,
    NO_INDEX: tl.constexpr,
):
    """Write the top NUM_SAMPLES (score, index) of each row of `score` [R, C] in decreasing score,
    ties by smallest index, to out_*[rows, slot_base + j]. Extracted entries are knocked out."""
    for j in tl.static_range(NUM_SAMPLES):
        best = tl.max(score, axis=1)
        pick = tl.min(tl.where(score == best[:, None], index, NO_INDEX), axis=1)
        tl.store(out_score_ptr + slot_base + j, best, mask=row_ok)
        tl.store(out_index_ptr + slot_base + j, pick, mask=row_ok)
        score = tl.where(index == pick[:, None], float("-inf"), score)


# ----------------------------------------------------------------------------------------------
# fast_sample: phase 1 (chunk candidates) and phase 2 (merge)
# ----------------------------------------------------------------------------------------------


@triton.jit
def _race_chunk_kernel(
    probs_ptr,  # [B, V] fp32/bf16/fp16, strides (stride_b, stride_v)
    seeds_ptr,  # [B] int64 (stride seed_stride, 0 to broadcast)
    offsets_ptr,  # [B] int64 (stride offset_stride)
    part_score_ptr,  # [B, num_chunks * NUM_SAMPLES] fp32: candidates' log2(p / E) (-inf: none)
    part_index_ptr,  # [B, num_chunks * NUM_SAMPLES] int32: their token ids
    arrivals_ptr,  # [>= row blocks] int32, zero on entry and on exit (FUSED_MERGE; kernels/_arrivals.py)
    sample_p_ptr,  # [B, NUM_SAMPLES] probs dtype out (FUSED_MERGE)
    sample_index_ptr,  # [B, NUM_SAMPLES] int64 out (FUSED_MERGE)
    score_ptr,  # [B, NUM_SAMPLES] fp32 out (FUSED_MERGE and WRITE_SCORE)
    B,
    V,
    stride_b,
    stride_v,
    seed_stride,
    offset_stride,
    tiles_per_chunk,
    num_parts,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    NUM_SAMPLES: tl.constexpr,
    UNIT_STRIDE_V: tl.constexpr,
    FAST_LOG2: tl.constexpr,
    FUSED_MERGE: tl.constexpr,
    BLOCK_PARTS: tl.constexpr,
    WRITE_SCORE: tl.constexpr,
    SCREEN: tl.constexpr,
    GROUPED: tl.constexpr = False,
    SLOTS: tl.constexpr = 1,
    PICK_IN_CHUNK: tl.constexpr = False,
    MERGE_GROUP_LANES: tl.constexpr = 0,
):
    # GROUPED (one sample; the contract of reference.gumbel.grouped_race): the race is between groups
    # of 256 tokens, score P_g / E_g with P_g = sum of the group's clean p. Each tile adds its groups'
    # masses (a streaming sum, no noise) to a [R, SLOTS] vector; once per chunk, one Philox block per
    # group gives E_g (word 0) and u_g (words 1, 2), and the chunk's best group g draws its token by
    # inverse CDF (_pick_in_group: a re-read of 256 tokens). PICK_IN_CHUNK: each chunk draws the
    # token in its best group and the merge is the per-token race's (the shortest tail: small
    # batches); otherwise the chunk stores its best group and the merge draws in the winning one.
    # Otherwise: score_v = p_v / E_v over tokens with 0 < p_v < inf (others never win). n = 1: per lane, a
    # running best (p, c E, id) over the chunk's tiles compared by cross-multiplication, with the
    # noise pre-scaled by c = 2^-6 so p c E < FLT_MAX for every float32 p (E < 23); at the end one
    # log2(p / E) per lane (no overflow) and one reduction. SCREEN: E_v >= t_v (its uniform), so a
    # tile where every p_v <= (row's best ratio so far) c t_v, with a 2^-10 margin, cannot change
    # the chunk's winner; such a tile costs its load and Philox words only, not the exponentials.
    # n > 1 (one tile per chunk): log2(p / E) per token and the tile's top-n by n max-extractions.
    # Ties go to the smallest id.
    # FUSED_MERGE: the last program of a row block to arrive (acquire-release counter) merges the
    # chunks' candidates (_merge_rows) and resets the counter: one launch instead of two.
    GROUPS: tl.constexpr = BLOCK_V // 4
    NO_INDEX: tl.constexpr = 2147483647
    row_block = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1).to(tl.int64)
    rows = row_block * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    row_ok = rows < B
    seed, offset = _row_seeds(seeds_ptr, offsets_ptr, rows, row_ok, seed_stride, offset_stride)
    row_base = probs_ptr + rows[:, None] * stride_b
    slot_base = rows * num_parts + chunk * NUM_SAMPLES
    token = tl.arange(0, GROUPS)[None, :] * 4  # [1, G]: token id - tile_start of word 0

    if GROUPED:
        GW: tl.constexpr = _GROUP if BLOCK_V >= _GROUP else BLOCK_V  # BLOCK_V < 256: V <= BLOCK_V
        NG: tl.constexpr = BLOCK_V // GW
        slot = tl.arange(0, SLOTS)[None, :]
        mass = tl.zeros((BLOCK_ROWS, SLOTS), tl.float32)
        first_tile = chunk.to(tl.int32) * tiles_per_chunk
        for t in range(0, tiles_per_chunk):
            sums = _tile_group_masses(row_base, stride_v, V, row_ok, (first_tile + t) * BLOCK_V, NG, GW,
                                      UNIT_STRIDE_V)  # fmt: skip
            mass = _put_group_masses(mass, slot, sums, t * NG, NG)
        group = (first_tile * BLOCK_V + slot * GW) // _GROUP + (rows * 0).to(tl.int32)[:, None]
        w0, w1, w2, _ = philox_words(seed, offset, group, STREAM_GUMBEL_GROUP, seed * 0)
        e = _exponential_noise(w0, FAST_LOG2, 1.0)
        found = mass > 0.0
        score = tl.where(found, tl.log2(tl.where(found, mass, 1.0)) - tl.log2(e), float("-inf"))
        top = tl.max(score, axis=1)
        best = tl.min(tl.where(score == top[:, None], group, NO_INDEX), axis=1)
        any_mass = top > float("-inf")
        if PICK_IN_CHUNK:
            u = tl.sum(tl.where(group == best[:, None], uniform52_from_words(w1, w2), 0.0), axis=1)
            group_best = tl.where(any_mass, best, 0).to(tl.int64)
            best = _pick_in_group(
                probs_ptr, rows, row_ok & any_mass, group_best, u, stride_b, stride_v, V, GW
            )
            best = best.to(tl.int32)
        tl.store(part_score_ptr + slot_base, top + 8.0, mask=row_ok)  # the masses were scaled by 2^-8
        tl.store(part_index_ptr + slot_base, tl.where(any_mass, best, NO_INDEX).to(tl.int32), mask=row_ok)
    elif NUM_SAMPLES == 1:
        best_p = tl.zeros((BLOCK_ROWS, GROUPS), tl.float32)
        best_e = tl.full((BLOCK_ROWS, GROUPS), 1.0, tl.float32)
        best_index = tl.zeros((BLOCK_ROWS, GROUPS), tl.int32)
        bound = tl.zeros((BLOCK_ROWS, 1), tl.float32)  # SCREEN: see _screen_bound
        first_tile = chunk.to(tl.int32) * tiles_per_chunk
        for t in range(0, tiles_per_chunk):
            tile_start = (first_tile + t) * BLOCK_V
            p0, p1, p2, p3, w0, w1, w2, w3 = _race_tile_words(
                row_base, stride_v, V, row_ok, seed, offset, tile_start, GROUPS, UNIT_STRIDE_V
            )
            if SCREEN:
                hot = _may_win(p0, w0, bound) | _may_win(p1, w1, bound)
                hot = hot | _may_win(p2, w2, bound) | _may_win(p3, w3, bound)
                if tl.max(hot.to(tl.int32)) > 0:
                    best_p, best_e, best_index = _race_steps(
                        best_p, best_e, best_index, p0, p1, p2, p3, w0, w1, w2, w3, tile_start + token,
                        FAST_LOG2,
                    )  # fmt: skip
                    bound = _screen_bound(best_p, best_e)
            else:
                best_p, best_e, best_index = _race_steps(
                    best_p, best_e, best_index, p0, p1, p2, p3, w0, w1, w2, w3, tile_start + token, FAST_LOG2
                )
        found = best_p > 0.0
        score = tl.log2(tl.where(found, best_p, 1.0)) - tl.log2(best_e) - 6.0  # best_e = 2^-6 E
        score = tl.where(found, score, float("-inf"))
        top = tl.max(score, axis=1)
        pick = tl.min(tl.where(score == top[:, None], best_index, NO_INDEX), axis=1)
        tl.store(part_score_ptr + slot_base, top, mask=row_ok)
        tl.store(part_index_ptr + slot_base, pick, mask=row_ok)
    else:
        tile_start = chunk.to(tl.int32) * BLOCK_V
        p0, p1, p2, p3, w0, w1, w2, w3 = _race_tile_words(
            row_base, stride_v, V, row_ok, seed, offset, tile_start, GROUPS, UNIT_STRIDE_V
        )
        e0, e1, e2, e3 = _noise4(w0, w1, w2, w3, FAST_LOG2, 1.0)
        # back to token order: join appends a minor axis, so join(join(a0, a2), join(a1, a3))
        # reshaped row-major lists a0, a1, a2, a3 of each group in turn
        score = tl.join(
            tl.join(_race_score(p0, e0), _race_score(p2, e2)),
            tl.join(_race_score(p1, e1), _race_score(p3, e3)),
        )
        score = tl.reshape(score, (BLOCK_ROWS, BLOCK_V))
        index = (tile_start + tl.arange(0, BLOCK_V)).to(tl.int32)[None, :] + (rows * 0).to(tl.int32)[:, None]
        _store_top_n(
            score, index, part_score_ptr, part_index_ptr, rows, row_ok, slot_base, NUM_SAMPLES, NO_INDEX
        )
    if FUSED_MERGE:
        arrived = tl.atomic_add(arrivals_ptr + row_block, 1, sem="acq_rel")
        if arrived == tl.num_programs(1) - 1:
            # ready for the next call / graph replay: relaxed and first, as in kernels/chain.py
            tl.atomic_xchg(arrivals_ptr + row_block, 0, sem="relaxed")
            seed_r, offset_r = tl.reshape(seed, (BLOCK_ROWS,)), tl.reshape(offset, (BLOCK_ROWS,))
            _merge_rows(part_score_ptr, part_index_ptr, probs_ptr, sample_p_ptr, sample_index_ptr,
                        score_ptr, rows, row_ok, stride_b, stride_v, num_parts, seed_r, offset_r, V,
                        BLOCK_PARTS, NUM_SAMPLES, WRITE_SCORE, MERGE_GROUP_LANES)  # fmt: skip


@triton.jit
def _merge_rows(part_score_ptr, part_index_ptr, probs_ptr, sample_p_ptr, sample_index_ptr, score_ptr,
                rows, row_ok, stride_b, stride_v, num_parts, seed, offset, V,
                BLOCK_PARTS: tl.constexpr, NUM_SAMPLES: tl.constexpr, WRITE_SCORE: tl.constexpr,
                GROUP_LANES: tl.constexpr):  # fmt: skip
    """Global top-n of `rows` = top-n of the union of their chunks' top-n (parts); gathers p at the
    winners. A winner is valid iff its score > -inf; ties go to the smallest id. GROUP_LANES > 0:
    the parts hold the grouped race's best group per chunk, and the winner is the token
    _pick_in_group draws in the best group (u_g from the row's seed [R] and offset [R])."""
    part = tl.arange(0, BLOCK_PARTS)
    mask = row_ok[:, None] & (part < num_parts)[None, :]
    where = rows[:, None] * num_parts + part[None, :]
    score = tl.load(part_score_ptr + where, mask=mask, other=float("-inf"))
    index = tl.load(part_index_ptr + where, mask=mask, other=2147483647)
    NO_INDEX: tl.constexpr = 2147483647
    for j in tl.static_range(NUM_SAMPLES):
        top = tl.max(score, axis=1)
        pick = tl.min(tl.where(score == top[:, None], index, NO_INDEX), axis=1)
        found = top > float("-inf")
        if GROUP_LANES > 0:
            group = tl.where(found, pick, 0).to(tl.int64)
            _, w1, w2, _ = philox_words(seed, offset, group, STREAM_GUMBEL_GROUP, seed * 0)
            u = uniform52_from_words(w1, w2)
            pick = _pick_in_group(
                probs_ptr, rows, row_ok & found, group, u, stride_b, stride_v, V, GROUP_LANES
            )
        token = tl.where(found, pick, -1).to(tl.int64)
        p = tl.load(probs_ptr + rows * stride_b + token * stride_v, mask=row_ok & found, other=0.0)
        tl.store(sample_index_ptr + rows * NUM_SAMPLES + j, token, mask=row_ok)
        tl.store(sample_p_ptr + rows * NUM_SAMPLES + j, p, mask=row_ok)
        if WRITE_SCORE:
            tl.store(score_ptr + rows * NUM_SAMPLES + j, tl.exp2(top), mask=row_ok)
        score = tl.where((index == pick[:, None]) & (score == top[:, None]), float("-inf"), score)


@triton.jit
def _race_merge_kernel(
    part_score_ptr,  # [B, num_parts] fp32 log2(p / E) from _race_chunk_kernel
    part_index_ptr,  # [B, num_parts] int32
    probs_ptr,  # [B, V] (strides stride_b, stride_v): gathered at the winners
    sample_p_ptr,  # [B, NUM_SAMPLES] probs dtype, contiguous
    sample_index_ptr,  # [B, NUM_SAMPLES] int64, contiguous
    score_ptr,  # [B, NUM_SAMPLES] fp32 winning scores p / E (WRITE_SCORE only; for tests)
    seeds_ptr,  # [B] int64 (stride seed_stride; read when GROUP_LANES > 0)
    offsets_ptr,  # [B] int64 (stride offset_stride)
    B,
    V,
    stride_b,
    stride_v,
    seed_stride,
    offset_stride,
    num_parts,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_PARTS: tl.constexpr,
    NUM_SAMPLES: tl.constexpr,
    WRITE_SCORE: tl.constexpr,
    GROUP_LANES: tl.constexpr,
):
    # Phase 2 of the two-launch race (fused_merge=False): _merge_rows over a block of rows.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    row_ok = rows < B
    seed, offset = _row_seeds(seeds_ptr, offsets_ptr, rows, row_ok, seed_stride, offset_stride)
    seed, offset = tl.reshape(seed, (BLOCK_ROWS,)), tl.reshape(offset, (BLOCK_ROWS,))
    _merge_rows(part_score_ptr, part_index_ptr, probs_ptr, sample_p_ptr, sample_index_ptr, score_ptr,
                rows, row_ok, stride_b, stride_v, num_parts, seed, offset, V,
                BLOCK_PARTS, NUM_SAMPLES, WRITE_SCORE, GROUP_LANES)  # fmt: skip


class RaceTiling(NamedTuple):
    """How a launch splits the work: rows per program, tile width, tiles per vocabulary chunk, and
    whether fast_sample's one-sample race screens tiles (SCREEN in _race_chunk_kernel: a tile that
    cannot beat the chunk's best so far skips its exponentials; the winner is unchanged)."""

    block_rows: int
    block_v: int
    tiles_per_chunk: int
    num_warps: int
    screen: bool = False
    grouped: bool = False  # one sample: the grouped race (block_v a power of two <= 1024)
    pick_in_chunk: bool = False  # grouped: every chunk draws the token in its best group (not the merge)


# a one-warp tiling needs at least this many 256-token tiles in the batch to keep 32 programs on every SM busy
# for >= 4 tiles each (below it, the wide tiling's larger split wins: run 28, B = 1)
_NARROW_MIN_TILES = 4 * 32 * H200_SMS


@functools.lru_cache(maxsize=512)  # a pure function of its arguments, on every eager call's path
def race_tiling(num_rows: int, vocab: int, num_samples: int = 1) -> RaceTiling:
    """fast_sample's default tiling: the grouped race for one sample (`grouped_race_tiling`), the
    per-token race's `wide_race_tiling` for top-n."""
    if num_samples > 1:
        return wide_race_tiling(num_rows, vocab, num_samples)
    return grouped_race_tiling(num_rows, vocab)


# grouped race, GPU: one-warp programs over 1024-token tiles (four groups, 32 tokens per thread: the
# group sums reduce within the warp, no barrier), at most this many programs per SM (an SM holds at
# most 32 blocks)
_GROUPED_PROGRAMS_PER_SM = 32


@functools.lru_cache(maxsize=512)
def grouped_race_tiling(num_rows: int, vocab: int) -> RaceTiling:
    """The grouped race's tiling (GROUPED in _race_chunk_kernel). Interpreter: `wide_race_tiling`'s
    (hundreds of rows per program, one chunk per row)."""
    if interpreting():
        return wide_race_tiling(num_rows, vocab, 1)._replace(grouped=True)
    block_v = min(1024, max(4, next_pow2(vocab)))
    tiles_total = cdiv(vocab, block_v)
    # at most 256 chunks per row: the one-warp merge then stays in the chunk kernel (fuse_merge)
    chunks = max(1, min(tiles_total, cdiv(_GROUPED_PROGRAMS_PER_SM * H200_SMS, max(num_rows, 1)), 256))
    # fewer than 4 tiles per SM: latency-bound, every chunk draws its token so the merge's tail is short
    pick_in_chunk = num_rows * tiles_total < 4 * H200_SMS
    return RaceTiling(1, block_v, cdiv(tiles_total, chunks), 1, grouped=True, pick_in_chunk=pick_in_chunk)


@functools.lru_cache(maxsize=512)
def token_race_tiling(num_rows: int, vocab: int, num_samples: int = 1) -> RaceTiling:
    """The per-token one-sample race's tiling (fast_sample's default before the grouped race; kept
    for the H200 comparison in ci/gpu/gumbel_gpu.py). GPU, one sample, enough work
    (num_rows x V / 256 >= 4 x 32 x 132): one warp per program over 256-token tiles (two Philox
    blocks per thread), chunks sized for 32 programs per SM (one wave: an SM holds at most 32
    blocks), screened. H200 run 28
    (`GUMBEL_GPU_SWEEP=1 ci/gpu/gumbel_gpu.py`, CUDA-graph device time, same run): 23.9 / 59.0 µs at
    (64, 151936) / (256, 128256), against 26.9 / 63.8 µs for the previous default (`wide_race_tiling`
    unscreened; 1.13x / 1.08x). Screening pays only without cross-warp barriers: the 8-warp tiling
    screened took 29.9 / 67.5 µs. Otherwise `wide_race_tiling`. Interpreter: hundreds of rows per
    program and a single chunk per row (its cost is per program and per op, not per element)."""
    if interpreting() or num_samples > 1 or num_rows * cdiv(vocab, 256) < _NARROW_MIN_TILES:
        return wide_race_tiling(num_rows, vocab, num_samples)
    tiles_total = cdiv(vocab, 256)
    chunks = max(1, min(tiles_total, cdiv(32 * H200_SMS, num_rows)))
    tiles = cdiv(tiles_total, chunks)
    return RaceTiling(1, 256, tiles, 1, screen=tiles > 1)


@functools.lru_cache(maxsize=512)
def wide_race_tiling(num_rows: int, vocab: int, num_samples: int = 1) -> RaceTiling:
    """The race's tiling for small batches, for top-n, and for sample_from_logits. GPU: one row per
    program; tiles of 1024 tokens over 8 warps (one Philox block of four tokens per thread per
    tile), chunks of several tiles sized so the grid has ~10 programs per SM. H200 runs 15 and 17
    (`ci/gpu/gumbel_gpu.py` sweep, CUDA-graph device time, same run): 27.9 / 66.5 µs (run 15) and
    27.8 / 66.3 µs (run 17) at (64, 151936) / (256, 128256), against 30.0 / 72.8 µs (run 15) for
    2048-token tiles over 4 warps at ~8 programs per SM (1.08x / 1.09x); at B = 1, 8.7-8.8 against
    9.0 µs. An explicitly pipelined loop (tl.range num_stages 2 or 3) gained nothing. Vocabularies
    below 1024 take one power-of-two tile over 4 warps. Interpreter: hundreds of rows per program
    and a single chunk per row."""
    if interpreting():
        block_v = min(next_pow2(max(vocab, 4)), 1024)
        # each program instance costs ~0.2 s of interpreter overhead (nested jit calls), each op
        # ~1 ms per 2^19 elements: few, large programs
        block_rows = min(next_pow2(max(num_rows, 1)), max(1, 2**19 // block_v), 2**15)
        tiles = 1 if num_samples > 1 else cdiv(vocab, block_v)
        return RaceTiling(block_rows, block_v, tiles, 4)
    if num_samples > 1:  # one tile per chunk, top-n per tile: not re-tuned in run 15
        block_v = 2048
        while block_v > 512 and num_rows * cdiv(vocab, block_v) < 4 * H200_SMS:
            block_v //= 2
        return RaceTiling(1, min(block_v, max(512, next_pow2(vocab))), 1, 4)
    block_v = min(1024, max(512, next_pow2(vocab)))
    warps = 8 if block_v >= 1024 else 4  # >= 4 tokens (one Philox block) per thread
    tiles_total = cdiv(vocab, block_v)
    chunks = max(1, min(tiles_total, cdiv(10 * H200_SMS, max(num_rows, 1))))
    return RaceTiling(1, block_v, cdiv(tiles_total, chunks), warps)


def _check_seed_tensor(name: str, t, batch: int, device: torch.device) -> int:
    """Validate a per-request int64 tensor ([B], [1] or 0-d) and return its element stride."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(
            f"{name} must be an int64 torch.Tensor of shape [B] (a Python int would be frozen into a "
            f"CUDA graph), got {type(t).__name__}"
        )
    if t.dtype != torch.int64:
        raise TypeError(f"{name} must have dtype torch.int64, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name} is on {t.device} but the input is on {device}")
    if t.dim() == 0 or (t.dim() == 1 and t.shape[0] == 1):
        return 0
    if t.dim() != 1 or t.shape[0] != batch:
        raise ValueError(f"{name} must have shape [B] = [{batch}] (or [1]), got {list(t.shape)}")
    return t.stride(0)


def _resolve_randomness(batch, device, generator, seeds, offsets):
    """(seeds, offsets, seed_stride, offset_stride) for the launch; draws them on the device from
    `generator` (or torch's default generator) when none are given: graph-safe, fresh per replay."""
    if (seeds is None) != (offsets is None):
        given, missing = ("seeds", "offsets") if offsets is None else ("offsets", "seeds")
        raise ValueError(
            f"seeds and offsets must be given together (or neither), got {given} but {missing} = None"
        )
    if seeds is None:
        drawn = torch.randint(
            0, _SEED_HIGH, (2, batch), generator=generator, device=device, dtype=torch.int64
        )
        return drawn[0], drawn[1], 1, 1
    if generator is not None:
        raise ValueError("pass either generator or seeds/offsets, not both")
    seed_stride = _check_seed_tensor("seeds", seeds, batch, device)
    offset_stride = _check_seed_tensor("offsets", offsets, batch, device)
    return seeds, offsets, seed_stride, offset_stride


def fast_sample(probs, num_samples=1, *, generator=None, seeds=None, offsets=None):
    """Sample `num_samples` tokens per row of `probs` by the exponential race.

    probs        [B, V] float32/bfloat16/float16, any strides; need not be normalised. Entries
                 that are zero, negative, NaN or +-inf have no mass.
    num_samples  n in [1, 64]: n = 1 is one draw from p / sum(p) (the grouped race); n > 1 is a draw
                 without replacement in Plackett-Luce order (the law of
                 torch.multinomial(replacement=False); the per-token race, so its first column is
                 not the n = 1 draw of the same seeds).
    seeds, offsets  int64 tensors [B] (or [1], broadcast): row b's noise is the Philox stream
                 keyed by (seeds[b], offsets[b]), see the module docstring: deterministic,
                 batch-invariant, CUDA-graph safe (advance `offsets` in place between steps).
    generator    otherwise seeds/offsets are drawn on the device with torch.randint(generator=...)
                 (torch's default generator when None): fresh on every CUDA-graph replay.

    Returns (sample_p, sample_index):
      sample_p      [B, n], dtype of probs: probs[b, sample_index[b, j]] (exact), 0 where the index is -1;
      sample_index  [B, n] int64 token ids; -1 when the row has fewer than j + 1 positive-mass tokens
                    (all -1 for a row with no positive finite mass). Ties go to the smallest id.
    Never synchronises with the host.
    """
    # a repeat call (the tensors' metadata and num_samples of an earlier call that launched): no
    # checks, no planning (kernels/_call_signature.py)
    signature = None
    if generator is None and seeds is not None and num_samples.__class__ is int:
        signature = (tensor_signature(probs, seeds, offsets), num_samples)
        repeat = _REPEATS.get(signature)
        if repeat is not None:
            return repeat(probs, seeds, offsets)
    elsewhere = other_cuda_device(probs)
    if elsewhere is not None:  # tensors on another GPU: launch there, on its current stream
        with torch.cuda.device(elsewhere):
            return fast_sample(probs, num_samples, generator=generator, seeds=seeds, offsets=offsets)
    return _fast_sample(probs, num_samples, generator, seeds, offsets, signature=signature)[:2]


# The merge runs inside the chunk kernel while its candidate tile holds at most this many entries per
# thread; beyond that (large num_samples times many chunks) its registers would be the whole
# kernel's, so it takes a second launch instead.
_FUSED_MERGE_PARTS_PER_THREAD = 8


def fuse_merge(block_parts: int, num_warps: int) -> bool:
    """Whether the merge of `block_parts` candidates runs in the chunk kernel (one launch)."""
    return block_parts <= _FUSED_MERGE_PARTS_PER_THREAD * 32 * num_warps


def _fast_sample(probs, num_samples, generator, seeds, offsets, tiling=None, with_score=False,
                 fused_merge=None, signature=None):  # fmt: skip
    """fast_sample with an explicit tiling; returns (sample_p, sample_index, score) where score
    [B, n] fp32 holds the winners' p / E when with_score (else None). fused_merge: None picks
    `fuse_merge`; False runs the merge as a second launch instead of in the chunk kernel's
    last-arriving program (the H200 comparison in ci/gpu/gumbel_gpu.py); True forces one launch.
    `signature`: fast_sample's key of the call, under which the launch is remembered for repeat
    calls (defaults only)."""
    if not isinstance(probs, torch.Tensor):
        raise TypeError(f"probs must be a torch.Tensor, got {type(probs).__name__}")
    if probs.dim() != 2:
        raise ValueError(f"probs must have shape [B, V], got {list(probs.shape)}")
    if probs.dtype not in _PROB_DTYPES:
        raise TypeError(f"probs must be float32, bfloat16 or float16, got {probs.dtype}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int):
        raise TypeError(f"num_samples must be an int, got {type(num_samples).__name__}")
    if not 1 <= num_samples <= MAX_SAMPLES:
        raise ValueError(f"num_samples must be in [1, {MAX_SAMPLES}], got {num_samples}")
    check_device("probs", probs)
    device = probs.device
    batch, vocab = probs.shape
    if vocab < 1:
        raise ValueError(f"probs must have V >= 1 columns, got V = {vocab}")
    if vocab >= 2**31 - 1:
        raise ValueError(f"V must be below 2^31 - 1 (token ids are int32 in the workspace), got {vocab}")
    seeds, offsets, seed_stride, offset_stride = _resolve_randomness(batch, device, generator, seeds, offsets)
    # the merge kernel writes every entry: no fill launches (each is a separate node in a CUDA graph)
    sample_p = torch.empty((batch, num_samples), dtype=probs.dtype, device=device)
    sample_index = torch.empty((batch, num_samples), dtype=torch.int64, device=device)
    if batch == 0:
        return sample_p, sample_index, None
    tiling_given, fused_merge_given = tiling, fused_merge
    tiling = tiling or race_tiling(batch, vocab, num_samples)
    if num_samples > 1 and tiling.tiles_per_chunk != 1:
        raise ValueError(f"num_samples > 1 needs one tile per chunk, got {tiling.tiles_per_chunk}")
    grouped = tiling.grouped and num_samples == 1
    whole_groups = tiling.block_v in (256, 512, 1024)
    one_small_tile = tiling.block_v < GROUP_TOKENS and tiling.block_v >= vocab and tiling.tiles_per_chunk == 1
    if grouped and not (whole_groups or one_small_tile):
        raise ValueError(  # a tile narrower than a group must be the whole row
            "the grouped race needs tiles of 1, 2 or 4 whole groups (256, 512 or 1024 tokens) or one tile "
            f"< 256 covering V per chunk, got block_v = {tiling.block_v}, tiles_per_chunk = "
            f"{tiling.tiles_per_chunk} at V = {vocab}"
        )
    # grouped: the chunk's group masses, a power of two >= its groups (tiles x groups per tile)
    slots = next_pow2(tiling.tiles_per_chunk * max(1, tiling.block_v // GROUP_TOKENS)) if grouped else 1
    # grouped, token drawn in the merge: lanes of its scan of the winning group (V <= block_v < 256: block_v)
    merge_group_lanes = min(GROUP_TOKENS, tiling.block_v) if grouped and not tiling.pick_in_chunk else 0
    num_chunks = cdiv(vocab, tiling.block_v * tiling.tiles_per_chunk)
    num_parts = num_chunks * num_samples
    row_blocks = cdiv(batch, tiling.block_rows)
    block_parts = next_pow2(num_parts)
    if fused_merge is None:
        fused_merge = fuse_merge(block_parts, tiling.num_warps)
    score = torch.empty((batch, num_samples), dtype=torch.float32, device=device) if with_score else None
    stride_b, stride_v = probs.stride()
    sizes = (batch, vocab, stride_b, stride_v, seed_stride, offset_stride)
    plan = _RacePlan(
        row_blocks, num_chunks, tiling.tiles_per_chunk, num_parts, fused_merge,
        dict(BLOCK_ROWS=tiling.block_rows, BLOCK_V=tiling.block_v, NUM_SAMPLES=num_samples,
             UNIT_STRIDE_V=stride_v == 1, FAST_LOG2=not interpreting(), FUSED_MERGE=fused_merge,
             BLOCK_PARTS=block_parts, WRITE_SCORE=with_score, SCREEN=tiling.screen and num_samples == 1,
             GROUPED=grouped, SLOTS=slots, PICK_IN_CHUNK=grouped and tiling.pick_in_chunk,
             MERGE_GROUP_LANES=merge_group_lanes, num_warps=tiling.num_warps),
        dict(BLOCK_ROWS=tiling.block_rows if interpreting() else max(1, min(16, 4096 // block_parts)),
             BLOCK_PARTS=block_parts, NUM_SAMPLES=num_samples, WRITE_SCORE=with_score,
             GROUP_LANES=merge_group_lanes, num_warps=4),
    )  # fmt: skip
    scratch = _race_scratch(device, batch, plan)
    outputs = (sample_p, sample_index, score)
    chunk_args, merge_args = _race_args(probs, seeds, offsets, *scratch, *outputs, sizes, plan)
    # launch_keyed's contract: every int argument, the caller's tensors' dtype and 16-byte alignment
    # (outputs and scratch are fresh or persistent allocations: aligned, fixed dtypes), and what the
    # constexprs derive from (tiling, num_samples, fused_merge, with_score)
    key = (probs.dtype, probs.data_ptr() & 15 == 0, seeds.data_ptr() & 15 == 0, offsets.data_ptr() & 15 == 0,
           sizes, tiling, num_samples, fused_merge, with_score)  # fmt: skip
    chunk_grid, merge_grid = (row_blocks, num_chunks), (cdiv(batch, plan.merge_meta["BLOCK_ROWS"]),)
    launch_keyed(_race_chunk_kernel, chunk_grid, key, chunk_args, plan.chunk_meta)
    if not fused_merge:
        launch_keyed(_race_merge_kernel, merge_grid, key, merge_args, plan.merge_meta)
    if signature is not None and tiling_given is None and not with_score and fused_merge_given is None:
        go_merge = None if fused_merge else bind_keyed(_race_merge_kernel, merge_grid, key, plan.merge_meta)
        go = (bind_keyed(_race_chunk_kernel, chunk_grid, key, plan.chunk_meta), go_merge)
        remember(_REPEATS, signature, _RepeatRace(batch, num_samples, probs.dtype, device, plan, sizes, go))
    return sample_p, sample_index, score


class _RacePlan(NamedTuple):
    row_blocks: int
    num_chunks: int
    tiles_per_chunk: int
    num_parts: int  # candidates per row: chunks x num_samples
    fused_merge: bool
    chunk_meta: dict  # _race_chunk_kernel's constexprs and num_warps
    merge_meta: dict  # _race_merge_kernel's (used when not fused_merge)


def _race_scratch(device, batch: int, plan: _RacePlan) -> tuple:
    """[B, num_parts] candidate scores and indices (kernels/_stream_buffers.py, indexed explicitly by
    the kernels) and, for the fused merge, the row blocks' arrival counters."""
    part_score = stream_buffer(device, "race_score", batch * plan.num_parts, torch.float32)
    part_index = stream_buffer(device, "race_index", batch * plan.num_parts, torch.int32)
    arrivals = arrival_counters(device, plan.row_blocks) if plan.fused_merge else part_index
    return part_score, part_index, arrivals


def _race_args(probs, seeds, offsets, part_score, part_index, arrivals, sample_p, sample_index, score, sizes,
               plan: _RacePlan) -> tuple:  # fmt: skip
    """The chunk and merge kernels' arguments before their constexprs (score absent: sample_p stands in,
    never written)."""
    score_arg = sample_p if score is None else score
    chunk = (probs, seeds, offsets, part_score, part_index, arrivals, sample_p, sample_index, score_arg,
             *sizes, plan.tiles_per_chunk, plan.num_parts)  # fmt: skip
    merge = (part_score, part_index, probs, sample_p, sample_index, score_arg, seeds, offsets,
             *sizes, plan.num_parts)  # fmt: skip
    return chunk, merge


class _RepeatRace:
    """A remembered fast_sample launch (kernels/_call_signature.py): allocates the outputs, fetches
    the scratch (kept from its last call: KeptBuffers) and launches, with
    the checks and the plan of the first call of its signature."""

    __slots__ = ("batch", "num_samples", "dtype", "device", "plan", "sizes", "go", "scratch")

    def __init__(self, batch, num_samples, dtype, device, plan: _RacePlan, sizes: tuple, go: tuple) -> None:
        self.batch, self.num_samples, self.dtype, self.device = batch, num_samples, dtype, device
        self.plan, self.sizes, self.go = plan, sizes, go
        self.scratch = KeptBuffers()  # _race_scratch's tensors

    def __call__(self, probs, seeds, offsets) -> tuple:
        shape = (self.batch, self.num_samples)
        sample_p = torch.empty(shape, dtype=self.dtype, device=self.device)
        sample_index = torch.empty(shape, dtype=torch.int64, device=self.device)
        scratch = self.scratch.get(self.device, lambda: _race_scratch(self.device, self.batch, self.plan))
        chunk_args, merge_args = _race_args(probs, seeds, offsets, *scratch, sample_p, sample_index, None,
                                            self.sizes, self.plan)  # fmt: skip
        self.go[0](chunk_args)
        if self.go[1] is not None:
            self.go[1](merge_args)
        return sample_p, sample_index


_REPEATS = call_memo()  # (tensor_signature, num_samples) -> _RepeatRace


# ----------------------------------------------------------------------------------------------
# sample_from_logits / renorm_draft_probs: the race in log space, softmax statistics on the side
# ----------------------------------------------------------------------------------------------

_LOG2E = 1.4426950408889634


@triton.jit
def _row_temperature(
    temperature_ptr, temperature_stride, temperature_value, rows, row_ok, PER_ROW_TEMPERATURE: tl.constexpr
):
    """Per row [R]: (noise_coef, scale, greedy) for temperature T.
    race score (in logit units):  l - noise_coef * log2(E), noise_coef = T ln 2   (T > 0 finite)
                                  -log2(E) alone when T = inf (uniform), l when greedy (T <= 0, NaN)
    softmax:                      2^((l - max l) * scale), scale = log2(e) / T (1 when greedy,
                                  0 when T = inf: every finite logit weighs 1, see _pow2_scaled)."""
    if PER_ROW_TEMPERATURE:
        t = tl.load(temperature_ptr + rows * temperature_stride, mask=row_ok, other=1.0).to(tl.float32)
    else:
        t = tl.zeros(rows.shape, tl.float32) + temperature_value
    greedy = ~(t > 0.0)
    scale = 1.4426950408889634 / tl.where(greedy, 1.4426950408889634, t)
    noise_coef = tl.where(greedy, 0.0, t * 0.6931471805599453)
    return noise_coef, scale, greedy


@triton.jit
def _pow2_scaled(d, scale):
    """2^(d * scale) for d <= 0 (d = -inf allowed): 0 at d = -inf when scale > 0, and 1 for every d
    when scale = 0 (T = inf: all finite logits weigh the same, even where d = l - max overflowed to
    -inf), instead of the NaN of -inf * 0."""
    return tl.where(scale == 0.0, 1.0, tl.exp2(d * scale))


@triton.jit
def _logits_chunk_kernel(
    logits_ptr,  # [B, V] fp32/bf16/fp16, strides (stride_b, stride_v)
    temperature_ptr,  # [B] float, stride temperature_stride (PER_ROW_TEMPERATURE), else unused
    seeds_ptr,  # [B] int64 (stride seed_stride)
    offsets_ptr,  # [B] int64 (stride offset_stride)
    part_score_ptr,  # [B, num_chunks] fp32: chunk winner's race score (logit units), -inf: none
    part_index_ptr,  # [B, num_chunks] int32: its token id
    part_max_ptr,  # [B, num_chunks] fp32: max l over the chunk's valid logits (-inf: none)
    part_sum_ptr,  # [B, num_chunks] fp32: sum of 2^((l - part_max) * scale) over them
    temperature_stride,
    temperature_value,
    B,
    V,
    stride_b,
    stride_v,
    seed_stride,
    offset_stride,
    tiles_per_chunk,
    num_chunks,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    PER_ROW_TEMPERATURE: tl.constexpr,
    NOISE: tl.constexpr,
    UNIT_STRIDE_V: tl.constexpr,
    FAST_LOG2: tl.constexpr,
):
    # valid iff -inf < l < inf (NaN: no mass). Race score s_v = l_v - T ln2 log2(E_v)
    # = T (l_v / T - ln E_v): argmax s = argmax softmax(l / T)_v / E_v, the race of fast_sample on
    # the same Philox words, computed without scaling l (no overflow); greedy rows: s = l; T = inf:
    # s = -log2(E). Strict > keeps the smallest id on ties. Softmax statistics per chunk relative
    # to the raw max: m = max l, sum 2^((l - m) log2(e) / T), merged online over the tiles.
    GROUPS: tl.constexpr = BLOCK_V // 4
    NO_INDEX: tl.constexpr = 2147483647
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    chunk = tl.program_id(1)
    row_ok = rows < B
    noise_coef, scale, greedy = _row_temperature(
        temperature_ptr, temperature_stride, temperature_value, rows, row_ok, PER_ROW_TEMPERATURE
    )
    uniform = scale == 0.0  # T = inf
    logit_weight = tl.where(uniform, 0.0, 1.0)[:, None]
    noise_weight = tl.where(uniform, 1.0, noise_coef)[:, None]
    if NOISE:
        seed, offset = _row_seeds(seeds_ptr, offsets_ptr, rows, row_ok, seed_stride, offset_stride)
    row_base = logits_ptr + rows[:, None] * stride_b
    token = tl.arange(0, GROUPS)[None, :] * 4

    best = tl.full((BLOCK_ROWS, GROUPS), float("-inf"), tl.float32)
    best_index = tl.zeros((BLOCK_ROWS, GROUPS), tl.int32)
    run_max = tl.full((BLOCK_ROWS,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK_ROWS,), tl.float32)
    for t in range(0, tiles_per_chunk):
        tile_start = (chunk * tiles_per_chunk + t) * BLOCK_V
        group = tile_start // 4 + tl.arange(0, GROUPS)
        cols = group[None, :, None] * 4 + tl.arange(0, 4)[None, None, :]
        mask = row_ok[:, None, None] & (cols < V)
        if UNIT_STRIDE_V:
            where = cols
        else:
            where = cols.to(tl.int64) * stride_v
        l = load_once(row_base[:, :, None] + where, mask, float("-inf")).to(tl.float32)
        valid = (l > float("-inf")) & (l < float("inf"))
        l = tl.where(valid, l, float("-inf"))
        # softmax statistics of the tile, merged into the running (max, sum)
        tile_max = tl.max(tl.max(l, axis=2), axis=1)
        any_tile = tile_max > float("-inf")
        safe_tile = tl.where(any_tile, tile_max, 0.0)
        weight = tl.where(valid, _pow2_scaled(l - safe_tile[:, None, None], scale[:, None, None]), 0.0)
        tile_sum = tl.sum(tl.sum(weight, axis=2), axis=1)
        new_max = tl.maximum(run_max, tile_max)
        safe_new = tl.where(new_max > float("-inf"), new_max, 0.0)
        keep_run = tl.where(run_max > float("-inf"), _pow2_scaled(run_max - safe_new, scale), 0.0)
        keep_tile = tl.where(any_tile, _pow2_scaled(safe_tile - safe_new, scale), 0.0)
        run_sum = run_sum * keep_run + tile_sum * keep_tile
        run_max = new_max
        # the race, word j of each group at token 4g + j
        l_even, l_odd = tl.split(tl.reshape(l, (BLOCK_ROWS, GROUPS, 2, 2)))
        x0, x2 = tl.split(l_even)
        x1, x3 = tl.split(l_odd)
        if NOISE:
            w0, w1, w2, w3 = philox_words(seed, offset, group[None, :] + seed * 0, STREAM_GUMBEL, seed * 0)
            x0 = _logit_race_score(x0, w0, logit_weight, noise_weight, FAST_LOG2)
            x1 = _logit_race_score(x1, w1, logit_weight, noise_weight, FAST_LOG2)
            x2 = _logit_race_score(x2, w2, logit_weight, noise_weight, FAST_LOG2)
            x3 = _logit_race_score(x3, w3, logit_weight, noise_weight, FAST_LOG2)
        index = tile_start + token
        take = x0 > best
        best, best_index = tl.where(take, x0, best), tl.where(take, index, best_index)
        take = x1 > best
        best, best_index = tl.where(take, x1, best), tl.where(take, index + 1, best_index)
        take = x2 > best
        best, best_index = tl.where(take, x2, best), tl.where(take, index + 2, best_index)
        take = x3 > best
        best, best_index = tl.where(take, x3, best), tl.where(take, index + 3, best_index)

    top = tl.max(best, axis=1)
    pick = tl.min(tl.where(best == top[:, None], best_index, NO_INDEX), axis=1)
    slot = rows * num_chunks + chunk
    tl.store(part_score_ptr + slot, top, mask=row_ok)
    tl.store(part_index_ptr + slot, pick, mask=row_ok)
    tl.store(part_max_ptr + slot, run_max, mask=row_ok)
    tl.store(part_sum_ptr + slot, run_sum, mask=row_ok)


@triton.jit
def _logit_race_score(l, word, logit_weight, noise_weight, FAST_LOG2: tl.constexpr):
    """l * logit_weight - noise_weight * log2(E); -inf stays -inf (never wins)."""
    score = l * logit_weight - noise_weight * _log2(_exponential_noise(word, FAST_LOG2), FAST_LOG2)
    return tl.where(l > float("-inf"), score, float("-inf"))


@triton.jit
def _log2(v, FAST_LOG2: tl.constexpr):
    if FAST_LOG2:
        return libdevice.fast_log2f(v)
    else:
        return tl.log2(v)


@triton.jit
def _logits_merge_kernel(
    part_score_ptr,  # [B, num_chunks] fp32 from _logits_chunk_kernel
    part_index_ptr,  # [B, num_chunks] int32
    part_max_ptr,  # [B, num_chunks] fp32
    part_sum_ptr,  # [B, num_chunks] fp32
    token_ptr,  # [B] int64 out: winner, -1 when the row has no valid logit
    row_max_ptr,  # [B] fp32 out: max valid l over the row
    row_sum_ptr,  # [B] fp32 out: sum 2^((l - row_max) * scale) over the row (0: no valid logit)
    temperature_ptr,  # [B] float (PER_ROW_TEMPERATURE), stride temperature_stride
    temperature_stride,
    temperature_value,
    B,
    num_chunks,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_PARTS: tl.constexpr,
    PER_ROW_TEMPERATURE: tl.constexpr,
):
    # winner = max s over chunks (ties: smallest id); (M, S) = logsumexp merge of the chunks.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    row_ok = rows < B
    part = tl.arange(0, BLOCK_PARTS)
    mask = row_ok[:, None] & (part < num_chunks)[None, :]
    where = rows[:, None] * num_chunks + part[None, :]
    score = tl.load(part_score_ptr + where, mask=mask, other=float("-inf"))
    index = tl.load(part_index_ptr + where, mask=mask, other=2147483647)
    top = tl.max(score, axis=1)
    pick = tl.min(tl.where(score == top[:, None], index, 2147483647), axis=1)
    token = tl.where(top > float("-inf"), pick, -1).to(tl.int64)
    tl.store(token_ptr + rows, token, mask=row_ok)
    _, scale, _ = _row_temperature(
        temperature_ptr, temperature_stride, temperature_value, rows, row_ok, PER_ROW_TEMPERATURE
    )
    part_max = tl.load(part_max_ptr + where, mask=mask, other=float("-inf"))
    part_sum = tl.load(part_sum_ptr + where, mask=mask, other=0.0)
    row_max = tl.max(part_max, axis=1)
    safe = tl.where(row_max > float("-inf"), row_max, 0.0)
    weight = tl.where(part_max > float("-inf"), _pow2_scaled(part_max - safe[:, None], scale[:, None]), 0.0)
    row_sum = tl.sum(part_sum * weight, axis=1)
    tl.store(row_max_ptr + rows, row_max, mask=row_ok)
    tl.store(row_sum_ptr + rows, row_sum, mask=row_ok)


@triton.jit
def _softmax_write_kernel(
    logits_ptr,  # [B, V], strides (stride_b, stride_v)
    temperature_ptr,  # [B] float (PER_ROW_TEMPERATURE), stride temperature_stride
    token_ptr,  # [B] int64: the greedy rows' argmax
    row_max_ptr,  # [B] fp32
    row_sum_ptr,  # [B] fp32
    out_ptr,  # [B, V] out, strides (out_stride_b, out_stride_v)
    temperature_stride,
    temperature_value,
    B,
    V,
    stride_b,
    stride_v,
    out_stride_b,
    out_stride_v,
    tiles_per_chunk,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    PER_ROW_TEMPERATURE: tl.constexpr,
):
    # probs_v = 2^((l_v - M) * scale) / S over valid logits (0 elsewhere; all 0 when S = 0);
    # greedy rows (T <= 0): one-hot at token (all 0 when token = -1).
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    chunk = tl.program_id(1)
    row_ok = rows < B
    _, scale, greedy = _row_temperature(
        temperature_ptr, temperature_stride, temperature_value, rows, row_ok, PER_ROW_TEMPERATURE
    )
    scale = scale[:, None]
    greedy = greedy[:, None]
    row_max = tl.load(row_max_ptr + rows, mask=row_ok, other=0.0)[:, None]
    row_sum = tl.load(row_sum_ptr + rows, mask=row_ok, other=0.0)[:, None]
    token = tl.load(token_ptr + rows, mask=row_ok, other=-1)[:, None]
    inv_sum = tl.where(row_sum > 0.0, 1.0 / tl.where(row_sum > 0.0, row_sum, 1.0), 0.0)
    safe_max = tl.where(row_max > float("-inf"), row_max, 0.0)
    for t in range(0, tiles_per_chunk):
        cols = ((chunk * tiles_per_chunk + t) * BLOCK_V + tl.arange(0, BLOCK_V)).to(tl.int64)[None, :]
        mask = row_ok[:, None] & (cols < V)
        l = load_once(logits_ptr + rows[:, None] * stride_b + cols * stride_v, mask, float("-inf"))
        l = l.to(tl.float32)
        valid = (l > float("-inf")) & (l < float("inf"))
        soft = tl.where(valid, _pow2_scaled(l - safe_max, scale) * inv_sum, 0.0)
        probs = tl.where(greedy, tl.where(cols == token, 1.0, 0.0), soft)
        tl.store(out_ptr + rows[:, None] * out_stride_b + cols * out_stride_v, probs, mask=mask)


def _temperature_arg(temperature, rows: int, device: torch.device, lead_shape=None):
    """(tensor or None, element stride, float value) for the kernels; a tensor must be [rows] (any
    stride), 1 element (stride 0), or (with lead_shape) a prefix of the leading dims, broadcast."""
    if isinstance(temperature, bool):
        raise TypeError("temperature must be a float or a float tensor, got bool")
    if isinstance(temperature, (int, float)):
        return None, 0, float(temperature)
    if not isinstance(temperature, torch.Tensor):
        raise TypeError(f"temperature must be a float or a torch.Tensor, got {type(temperature).__name__}")
    if not temperature.dtype.is_floating_point:
        raise TypeError(f"temperature must have a floating dtype, got {temperature.dtype}")
    if temperature.device != device:
        raise ValueError(f"temperature is on {temperature.device} but the logits are on {device}")
    t = temperature
    if t.numel() == 1:
        return t.reshape(1), 0, 0.0
    lead = tuple(lead_shape) if lead_shape is not None else (rows,)
    if t.dim() > len(lead) or tuple(t.shape) != lead[: t.dim()]:
        raise ValueError(
            f"temperature must be a float, a 1-element tensor or have shape {list(lead[:1])} "
            f"(or the leading dims {list(lead)}), got {list(t.shape)}"
        )
    t = t.reshape(tuple(t.shape) + (1,) * (len(lead) - t.dim())).expand(lead).reshape(rows)
    return t, t.stride(0), 0.0


def _check_logits(name: str, logits, ndim: int | None):
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(logits).__name__}")
    if (ndim is not None and logits.dim() != ndim) or logits.dim() < 1:
        want = "[B, V]" if ndim == 2 else "[..., V]"
        raise ValueError(f"{name} must have shape {want}, got {list(logits.shape)}")
    if logits.dtype not in _PROB_DTYPES:
        raise TypeError(f"{name} must be float32, bfloat16 or float16, got {logits.dtype}")
    check_device(name, logits)
    if logits.shape[-1] < 1:
        raise ValueError(f"{name} must have V >= 1 columns, got V = {logits.shape[-1]}")
    if logits.shape[-1] >= 2**31 - 1:
        raise ValueError(f"V must be below 2^31 - 1, got {logits.shape[-1]}")


class _SoftmaxRacePlan(NamedTuple):
    """What a sample_from_logits / renorm_draft_probs call launches for one shape and temperature
    form: the race's chunk and merge kernels, then (probs wanted) the softmax write."""

    batch: int
    vocab: int
    num_chunks: int
    tiles_per_chunk: int
    noise: bool  # sample_from_logits: the race with Philox noise; renorm_draft_probs: the plain argmax
    grids: tuple  # chunk, merge, write
    metas: tuple  # their constexprs and num_warps


def _softmax_race_plan(batch: int, vocab: int, tiling: RaceTiling, per_row: bool, noise: bool,
                       unit_stride_v: bool) -> _SoftmaxRacePlan:  # fmt: skip
    num_chunks = cdiv(vocab, tiling.block_v * tiling.tiles_per_chunk)
    block_parts = next_pow2(num_chunks)
    merge_rows = tiling.block_rows if interpreting() else max(1, min(16, 4096 // block_parts))
    row_blocks = cdiv(batch, tiling.block_rows)
    grids = ((row_blocks, num_chunks), (cdiv(batch, merge_rows),), (row_blocks, num_chunks))
    metas = (
        dict(BLOCK_ROWS=tiling.block_rows, BLOCK_V=tiling.block_v, PER_ROW_TEMPERATURE=per_row, NOISE=noise,
             UNIT_STRIDE_V=unit_stride_v, FAST_LOG2=not interpreting(), num_warps=tiling.num_warps),
        dict(BLOCK_ROWS=merge_rows, BLOCK_PARTS=block_parts, PER_ROW_TEMPERATURE=per_row, num_warps=4),
        dict(BLOCK_ROWS=tiling.block_rows, BLOCK_V=tiling.block_v, PER_ROW_TEMPERATURE=per_row,
             num_warps=tiling.num_warps),
    )  # fmt: skip
    return _SoftmaxRacePlan(batch, vocab, num_chunks, tiling.tiles_per_chunk, noise, grids, metas)


def _softmax_race_scratch(device, plan: _SoftmaxRacePlan) -> tuple:
    """Per chunk [B, num_chunks] the winner's score and index and the chunk's max and sum; per row [B]
    the max and sum (read by the softmax write of the same call). kernels/_stream_buffers.py."""
    parts = plan.batch * plan.num_chunks
    return (
        stream_buffer(device, "logits_race_score", parts, torch.float32),
        stream_buffer(device, "logits_race_index", parts, torch.int32),
        stream_buffer(device, "logits_race_max", parts, torch.float32),
        stream_buffer(device, "logits_race_sum", parts, torch.float32),
        stream_buffer(device, "logits_race_row_max", plan.batch, torch.float32),
        stream_buffer(device, "logits_race_row_sum", plan.batch, torch.float32),
    )


def _softmax_race_args(logits, temp, seeds, offsets, seed_stride, offset_stride, token, out, scratch,
                       plan: _SoftmaxRacePlan) -> tuple:  # fmt: skip
    """The chunk, merge and (out given) softmax-write kernels' arguments before their constexprs.
    Without a per-row temperature the kernels never read their temperature pointer (row_max stands
    in); without noise (renorm_draft_probs) they never read seeds and offsets (part_index stands in)."""
    part_score, part_index, part_max, part_sum, row_max, row_sum = scratch
    temp_tensor, temp_stride, temp_value = temp
    temp_ptr = row_max if temp_tensor is None else temp_tensor
    if not plan.noise:
        seeds = offsets = part_index
    batch, vocab = plan.batch, plan.vocab
    chunk = (logits, temp_ptr, seeds, offsets, part_score, part_index, part_max, part_sum, temp_stride,
             temp_value, batch, vocab, *logits.stride(), seed_stride, offset_stride, plan.tiles_per_chunk,
             plan.num_chunks)  # fmt: skip
    merge = (part_score, part_index, part_max, part_sum, token, row_max, row_sum, temp_ptr, temp_stride,
             temp_value, batch, plan.num_chunks)  # fmt: skip
    write = None
    if out is not None:
        write = (logits, temp_ptr, token, row_max, row_sum, out, temp_stride, temp_value, batch, vocab,
                 *logits.stride(), *out.stride(), plan.tiles_per_chunk)  # fmt: skip
    return chunk, merge, write


_SOFTMAX_KERNELS = (_logits_chunk_kernel, _logits_merge_kernel, _softmax_write_kernel)


def _softmax_race(logits, temp, seeds, offsets, seed_stride, offset_stride, noise: bool, tiling: RaceTiling,
                  out, memo=None, signature=None, lead_shape=None):  # fmt: skip
    """The race over [B, V] logits (token [B] int64), then the softmax written to `out` when given.
    `signature`: the caller's key of the call, under which the launches are remembered in `memo`."""
    device = logits.device
    per_row = temp[0] is not None
    plan = _softmax_race_plan(logits.shape[0], logits.shape[1], tiling, per_row, noise, logits.stride(1) == 1)
    token = torch.empty(plan.batch, dtype=torch.int64, device=device)
    args = _softmax_race_args(logits, temp, seeds, offsets, seed_stride, offset_stride, token, out,
                              _softmax_race_scratch(device, plan), plan)  # fmt: skip
    launches = [(kernel, grid, a, meta)
                for kernel, grid, a, meta in zip(_SOFTMAX_KERNELS, plan.grids, args, plan.metas, strict=True)
                if a is not None]  # fmt: skip
    for kernel, grid, a, meta in launches:
        launch(kernel, grid, *a, **meta)
    if signature is not None:
        go = tuple(bind(*one) for one in launches)
        repeat = _RepeatSoftmaxRace(plan, device, seed_stride, offset_stride, lead_shape, go)
        remember(memo, signature, repeat)
    return token


class _RepeatSoftmaxRace:
    """A remembered sample_from_logits / renorm_draft_probs call (kernels/_call_signature.py): the
    temperature argument and the token output made again, the scratch kept from its last call
    (KeptBuffers), and the two or three launches of the first call of its
    signature."""

    __slots__ = ("plan", "device", "seed_stride", "offset_stride", "lead_shape", "go", "scratch")

    def __init__(self, plan: _SoftmaxRacePlan, device, seed_stride: int, offset_stride: int, lead_shape,
                 go: tuple) -> None:  # fmt: skip
        self.plan, self.device, self.lead_shape, self.go = plan, device, lead_shape, go
        self.seed_stride, self.offset_stride = seed_stride, offset_stride
        self.scratch = KeptBuffers()  # _softmax_race_scratch's tensors

    def __call__(self, logits, temperature, seeds, offsets, out):
        plan = self.plan
        temp = _temperature_arg(temperature, plan.batch, self.device, self.lead_shape)
        token = torch.empty(plan.batch, dtype=torch.int64, device=self.device)
        scratch = self.scratch.get(self.device, lambda: _softmax_race_scratch(self.device, plan))
        args = _softmax_race_args(logits, temp, seeds, offsets, self.seed_stride, self.offset_stride, token,
                                  out, scratch, plan)  # fmt: skip
        for go, a in zip(self.go, args, strict=False):  # the write's arguments are None without `out`
            go(a)
        return token


def sample_from_logits(logits, temperature, *, seeds, offsets, probs_out=None):
    """One token per row from softmax(logits / T), by the race in log space, without
    materialising the probabilities: argmax_v logits_v / T - ln E_v with the same Philox noise as
    `fast_sample` (so it returns fast_sample(softmax(logits / T), seeds=seeds, offsets=offsets)
    up to float rounding).

    logits       [B, V] float32/bfloat16/float16, any strides. NaN and +-inf logits have no mass.
    temperature  float, or a float tensor [B] (or 1 element): T > 0 samples; T <= 0 (or NaN) rows
                 are greedy: the argmax of the logits, smallest id on ties. T = inf is uniform.
    seeds, offsets  int64 tensors [B] (or [1]): the Philox key of each row (see `fast_sample`).
    probs_out    optional [B, V] float tensor, written in place with softmax(logits / T) (one-hot
                 of the returned token for greedy rows; all zeros for a row without mass). Only
                 then is the row read a second time.
    Returns tokens [B] int64 (-1 for a row with no finite logit). Never synchronises with the host.
    """
    # a repeat call (the tensors' metadata and a float temperature's value of an earlier call that
    # launched): no checks, no planning (kernels/_call_signature.py)
    value = temperature.__class__ in (float, int)
    signature = (tensor_signature(logits, seeds, offsets, None if value else temperature, probs_out),
                 temperature if value else None)  # fmt: skip
    repeat = _REPEATS_FROM_LOGITS.get(signature) if signature[0] is not None else None
    if repeat is not None:
        return repeat(logits, temperature, seeds, offsets, probs_out)
    elsewhere = other_cuda_device(logits)
    if elsewhere is not None:  # tensors on another GPU: launch there, on its current stream
        with torch.cuda.device(elsewhere):
            return sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out)
    return _sample_from_logits(logits, temperature, seeds, offsets, probs_out,
                               signature=signature if signature[0] is not None else None)  # fmt: skip


def _sample_from_logits(logits, temperature, seeds, offsets, probs_out, tiling=None, signature=None):
    _check_logits("logits", logits, 2)
    batch, vocab = logits.shape
    if seeds is None or offsets is None:
        missing = " and ".join(
            f"{name} = None" for name, t in (("seeds", seeds), ("offsets", offsets)) if t is None
        )
        raise ValueError(f"sample_from_logits needs seeds and offsets (int64 tensors [B]), got {missing}")
    seeds, offsets, seed_stride, offset_stride = _resolve_randomness(
        batch, logits.device, None, seeds, offsets
    )
    temp = _temperature_arg(temperature, batch, logits.device)
    if probs_out is not None:
        if not isinstance(probs_out, torch.Tensor):
            raise TypeError(f"probs_out must be a floating torch.Tensor, got {type(probs_out).__name__}")
        if not probs_out.dtype.is_floating_point:
            raise TypeError(f"probs_out must be a floating torch.Tensor, got dtype {probs_out.dtype}")
        if tuple(probs_out.shape) != (batch, vocab):
            raise ValueError(f"probs_out must have shape [{batch}, {vocab}], got {list(probs_out.shape)}")
        if probs_out.device != logits.device:
            raise ValueError(f"probs_out is on {probs_out.device} but the logits are on {logits.device}")
    if batch == 0:
        return torch.empty(0, dtype=torch.int64, device=logits.device)
    remembered = signature is not None and tiling is None
    tiling = tiling or wide_race_tiling(batch, vocab)
    return _softmax_race(logits, temp, seeds, offsets, seed_stride, offset_stride, True, tiling, probs_out,
                         _REPEATS_FROM_LOGITS, signature if remembered else None)  # fmt: skip


def renorm_draft_probs(draft_logits, temperature):
    """softmax(draft_logits / T) over the last dim, float32, same shape; rows with T <= 0 (or NaN)
    are the one-hot of the argmax (smallest id on ties), rows with T = inf are uniform over the
    finite logits. NaN and +-inf logits get probability 0;
    a row without a finite logit is all zeros.

    draft_logits  [..., V] float32/bfloat16/float16 (e.g. [B, K, V]).
    temperature   float, a 1-element tensor, or a float tensor whose shape is a prefix of the
                  leading dims (e.g. [B] for [B, K, V]), broadcast over the remaining ones.
    Never synchronises with the host.
    """
    # a repeat call: as sample_from_logits
    value = temperature.__class__ in (float, int)
    signature = (tensor_signature(draft_logits, None if value else temperature),
                 temperature if value else None)  # fmt: skip
    repeat = _REPEATS_RENORM.get(signature) if signature[0] is not None else None
    if repeat is None:
        elsewhere = other_cuda_device(draft_logits)
        if elsewhere is not None:  # tensors on another GPU: launch there, on its current stream
            with torch.cuda.device(elsewhere):
                return renorm_draft_probs(draft_logits, temperature)
        _check_logits("draft_logits", draft_logits, None)
    lead = tuple(draft_logits.shape[:-1])
    vocab = draft_logits.shape[-1]
    logits = draft_logits.reshape(-1, vocab)
    rows = logits.shape[0]
    out = torch.empty((rows, vocab), dtype=torch.float32, device=draft_logits.device)
    if repeat is not None:
        repeat(logits, temperature, None, None, out)
        return out.reshape(*lead, vocab)
    temp = _temperature_arg(temperature, rows, draft_logits.device, lead)
    if rows == 0:
        return out.reshape(*lead, vocab)
    tiling = wide_race_tiling(rows, vocab)
    _softmax_race(logits, temp, None, None, 0, 0, False, tiling, out, _REPEATS_RENORM,
                  signature if signature[0] is not None else None, lead)  # fmt: skip
    return out.reshape(*lead, vocab)


_REPEATS_FROM_LOGITS = call_memo()  # (tensor_signature, float temperature) -> _RepeatSoftmaxRace
_REPEATS_RENORM = call_memo()  # the same, for renorm_draft_probs
