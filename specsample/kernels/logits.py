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
midpoint u_i + 2^-25 (docs/semantics.md). The emitted token at position j is drawn by the grouped
residual draw: with the residual r (or p on the fallback / bonus path) cut into groups g of 256
tokens with masses R_g, the group argmax_g log R_g - log E_g wins and the token is the first v of
it with C_v > u_g C_last (C the float64 cumulative sum of r over the group); E_g and u_g (52 bits)
come from words 0 and 1-2 of Philox(seed, offset, index=g, STREAM_LOGITS_GROUP, position=j).
P(v) = (R_g / R)(r_v / R_g) = r_v / R. Hence batch-invariant, chunk-invariant, CUDA-graph safe and
identical across tensor-parallel ranks given equal seeds.

Three launches (one-hot drafts: two, with `stats_tail`, item 1), no host synchronisation, no
data-dependent shapes. On the GPU the second and third are programmatic dependent launches (`pdl`
in launch_config): each may start before its predecessor ends, and waits for it in
griddepcontrol.wait; the accept kernel loads the draft ids, gathers their logits and draws its
uniforms before that wait (H200 runs 106-107: 3.3-4.7 µs less per call in do_bench's device time,
1.01-1.09x, and 0.5-2 µs less in CUDA graphs; sm_90+ only, _launch.supports_pdl):

1. `_logits_stats_kernel`, grid (row blocks of the B*(K+1) target rows, vocabulary chunks, target /
   draft rows): per chunk the max, first argmax and sum exp((l - max) / T) of the clean target logits,
   and max / sum-exp of the draft logits (classic: in programs of their own, so each program streams
   one row with one-warp reductions; H200 run 54) or the part statistics of the one-hot draw (item 3).
   This is the one read of the inputs. Rows past a request's ragged draft count, and the draft
   rows of bonus positions and greedy requests, are skipped. Lazy (`stats_lazy`, the default): so
   are the rows after a request's first certain rejection, which no output depends on. The last
   program to finish a row (b, i < K) (an arrival counter per row) combines its chunk statistics,
   runs draft i's acceptance test with a margin (`_certain_rejection`: rejects only where the accept
   kernel's test certainly rejects too) and marks request b; programs of later positions that find
   the mark skip their rows. The grid is position-major, and the GPU starts programs in index order,
   so a position's marks are mostly set before the next position's programs start; a program of a
   later position that started before the mark reads it again beside every tile's load and stops
   there (`stats_recheck`). Each request's mark and each row's arrival counter sit on a 128-byte
   line of their own (STATE_WORDS): packed, thousands of programs queued on a few L2 lines. The
   outputs are the eager pass's bit for bit (tests/kernels/test_logits_lazy.py); what it saves
   depends on where requests reject (benchmarks/diagnostics/lazy_stats.py).
   One-hot drafts with `stats_tail` (the default where K+1 <= 16): the accept kernel's work moves
   here. The last program of every row (b, i), the bonus row's too, runs draft i's exact test (the
   accept kernel's) and adds a decided bit and a rejected bit to request b's word (`_tail_arrival`);
   the program whose addition fixes the emit position j (rows 0..j all decided, `_emit_position`:
   exactly one program per request, the additions being atomic) writes the request's outputs and
   row j's statistics for the pick (`_tail_emit`), which then launches alone after the pass. The
   programs of rows already unused when they start (an earlier draft certainly rejected) do not arrive,
   and the pick (or race) kernel zeroes the words and counters after the pass. Outputs are
   the three launches' bit for bit
   (tests/kernels/test_logits_lazy.py); H200 runs 237-240: 1.00-1.14x (zero_pause) on one-hot drafts
   from B = 1 to 256 (benchmarks/NOTES.md, session 43). Classic drafts (`classic_tail`, session 47):
   the same, a row's last program being the last of its target and draft programs, which also
   combines the draft row's statistics; the race kernel follows the pass, its screen's threshold
   shared by its own programs (`race_tau` "shared", item 3), each race program waiting for its own
   request's emit (`race_poll`; the pick likewise, `pick_poll`) rather than for the whole pass.
   A chunk is read as loaded and read again through the NaN / inf clean only where its sum comes
   out NaN (`_any_nan`; the 16-bit passes are bound by instructions: H200 run 134, one-hot bf16
   (128, 8, 128256) 100.5 -> 94.2 µs).
2. `_logits_accept_kernel`, grid (request blocks): combines the chunk statistics of its requests
   (log-sum-exp per position), runs the acceptance tests (K gathers and K uniforms), which fix the
   emit position j, and writes every output except a sampled row's emitted token, plus row j's
   statistics for the race (once per request, not once per race chunk: H200 run 41).
3. Classic drafts: `_logits_race_kernel`, grid (request blocks, vocabulary chunks of whole groups):
   every program (one warp on the GPU, 512-token tiles) races the groups of its chunk of row j:
   per group the log mass of the residual and of p (the fallback), each against the group's
   largest log p so that nothing overflows or vanishes at tiny T, and one Philox call per group.
   It stores its best group of each; the last program to arrive for a request block (an atomic
   counter) picks the winning group, re-reads its 256 tokens and writes the emitted token.
   Screened (`race_screen`, the GPU default where race programs hold >= 8 tiles): the stats pass
   also stores the target rows' part statistics, which give every group's log P_g without a read,
   and since r <= p the score log R_g - log E_g is at most log P_g - log E_g. The accept kernel
   reads, per request, the group of largest bound in each of 4 segments of row j and stores the
   best score they attain (tau, `_screen_threshold`); a race program reads only tiles (of row j and
   draft row j) whose bound reaches tau or the best score it has read, its tile of largest bound
   first (`_screened_race`). With `race_tau` "shared" (the default where the classic tail runs, which
   leaves no accept kernel) nothing computes tau ahead: each race program publishes the best score
   of its first tile into its request's word (an atomic max) and screens its later tiles with what
   the request's other programs published before it. What it skips cannot win, so the outputs are
   those of reading everything (tests/kernels/test_logits_screen.py); p's race takes log P_g from
   the statistics. H200, same session, two rounds each, zero_pause µs, base = reading everything:
   run 126 (each program's own reads only) fp32 (64, 4, 151936) 127.1 -> 118.0, (128, 8, 128256)
   320.8 -> 302.8, bf16 84.5 -> 80.8 and 192.3 -> 189.8; run 129 with tau (4 accept warps) 127.4 ->
   115.8, 320.4 -> 292.6, 84.8 -> 80.2 and 192.9 -> 184.7; outputs equal to the unscreened race's on
   every row of 6 benchmark batches per case (runs 126, 129). Unscreened, every program reads its whole
   chunk of row j and draft row j, the next tile's loads issued before this tile's arithmetic, and
   with 16-bit logits (`race_p_in_merge`) leaves out the race over p: the last program runs it,
   tile by tile over the whole of row j, only for requests whose residual has no mass (the
   fallback; rare, since a rejection means p(x) < q(x) and so p > q somewhere): 20% fewer
   instructions per token in the race pass (H200 run 69: 1.04x on the bf16 calls).
   One-hot drafts: `_logits_pick_kernel`, grid (request blocks). Their residual is p off the
   rejected draft x_j (p itself on a bonus row), so every group's mass but x_j's is p's: the stats
   pass also stores, per part of min(256, stats_block) tokens, a reference m_k (its chunk's running
   max after its tile) and s_k = sum exp((l - m_k) / T), and the pick (`_pick_in_groups`) combines
   them into each group's mass, re-reads x_j's group alone for its mass off x_j, runs the same race
   over the groups with the same noise, and draws the token in the winner (`_emit_token`, shared
   with the race). No second pass over row j (H200 run 48: 1.11-1.20x in the one-hot issue cases).
   Terms more than 2^126 below their part's reference flush to zero (a probability below 2^-126
   relative to the row's largest: never the residual's mass, which a rejection keeps >= 2^-25).

Must-read bytes are every target row (plus draft rows) once. The classic race reads, per request,
the tiles of row j and draft row j that the screen keeps (all of them, (2K+3)/(2K+1) of the floor,
unscreened), and the winning group again; one-hot drafts read one extra group of 256 tokens of row
j per request (x_j's) and the winning group again.

The race pass is a streaming sum: two or three exponentials per token and one Philox call per 256
tokens. Until session 8 it was a per-token exponential race (one Philox call per four tokens and a
logarithm per token; screened tiles from run 30), measured in benchmarks/NOTES.md. (A one-launch
schedule that overlapped the two phases by ticketed tasks, and per-lane statistics in phase 1, were
measured slower on the H200 in runs 14, 15 and 20 and are gone.)
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait, libdevice

from specsample.kernels._arrivals import arrival_counters
from specsample.kernels._call_signature import tensor_signature
from specsample.kernels._checks import FLOAT_DTYPES as _LOGIT_DTYPES
from specsample.kernels._checks import ID_DTYPES as _ID_DTYPES
from specsample.kernels._checks import check_target_rows, check_tensor
from specsample.kernels._checks import fail as _fail
from specsample.kernels._compiled_launch import bind_keyed, call_memo, launch_keyed, remember
from specsample.kernels._launch import (
    cdiv,
    int32_offsets_fit,
    interpreting,
    next_pow2,
    other_cuda_device,
    supports_pdl,
)
from specsample.kernels._row_loads import load_once
from specsample.kernels._stream_buffers import KeptBuffers, generation, stream_buffer
from specsample.kernels.gumbel import _cdf_pick
from specsample.kernels.philox import (
    STREAM_LOGITS_GROUP,
    STREAM_LOGITS_UNIFORM,
    UNIFORM_HALF_STEP,
    philox_words,
    uniform52_from_words,
    uniform_from_word,
)
from specsample.kernels.result import SampleResult, empty_result

_check_tensor = functools.partial(check_tensor, reference="target_logits")

_INTERP_TILE_ELEMENTS = 1 << 20  # elements of one [BLOCK_ROWS, BLOCK_V] tile under the interpreter
MIN_TEMPERATURE = 2.0**-126  # sampled rows use T clamped to [MIN_TEMPERATURE, MAX_TEMPERATURE], so that
MAX_TEMPERATURE = 2.0**100  # 1/T is a normal float32 (neither inf nor flushed to zero)

_LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
_LN2: tl.constexpr = tl.constexpr(0.6931471805599453)
_HW_LOG: tl.constexpr = tl.constexpr(not interpreting())  # lg2.approx exists on the GPU only
_NEG_INF: tl.constexpr = tl.constexpr(float("-inf"))
_NO_COL: tl.constexpr = tl.constexpr(1 << 30)  # above any column offset within a tile
# SPECSAMPLE_LAZY_STATS=0 (read at import) makes the eager statistics pass the default (stats_lazy)
_LAZY_STATS = os.environ.get("SPECSAMPLE_LAZY_STATS", "1")
if _LAZY_STATS not in ("0", "1"):
    raise ValueError(f"SPECSAMPLE_LAZY_STATS must be '0' or '1', got {_LAZY_STATS!r}")
# the lazy pass's state of request b is word b * STATE_WORDS, its arrival counter of (b, i) word
# (b K + i) STATE_WORDS: one 128-byte line each. Packed, ~4,000 programs reading or counting on the same few
# lines queue at one L2 slice
STATE_WORDS = 32
_STATE_WORDS: tl.constexpr = tl.constexpr(STATE_WORDS)
_LONG_CHUNK_GRID = 8192  # x logit bytes: rows x 8-tile chunks from which chunks are 16 tiles (_config)
GROUP_TOKENS = 256  # tokens per group of the residual draw (the Philox index of a group is v // 256)
_GROUP: tl.constexpr = tl.constexpr(GROUP_TOKENS)
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
def _any_nan(x):
    """Whether any element of x [R] is NaN (a scalar, uniform on the GPU).

    The statistics passes (_part_stats_chunk, _chunk_stats_chunk) read a chunk as loaded, without
    _clean_logits (two instructions per element), and read it again cleaned only where its sum comes
    out NaN. Clean logits (finite or -inf) leave every sum finite, while a NaN logit gives NaN - shift
    and a +inf one inf - inf (the running max being +inf), whichever way the max treats NaN; a NaN
    sum stays NaN (NaN 0 = NaN). Offline SASS (Triton 3.6, one-hot bf16, 512-column tiles): 279 ->
    246 instructions per unmasked tile and warp."""
    bad = (x != x).to(tl.int32)
    if _HW_LOG:  # a warp vote: its result is uniform to ptxas, which then keeps the branch on it plain
        # (on the max of the butterfly-reduced sums it wrapped every shuffle of the loops after it
        # in WARPSYNC / ENDCOLLECTIVE: offline SASS, Triton 3.6)
        bad = tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $1, 0; vote.sync.any.pred p, p, -1; selp.s32 $0, 1, 0, p; }",
            "=r,r", [bad], dtype=tl.int32, is_pure=True, pack=1)  # fmt: skip
    return tl.max(bad, axis=0) > 0


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
def _ex2(x):
    """2^x: on a GPU one MUFU.EX2 (ex2.approx.ftz: results below 2^-126 flush to 0, relative error
    ~2^-22); the interpreter's exp2 elsewhere."""
    if _HW_LOG:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32,
                                         is_pure=True, pack=1)  # fmt: skip
    return tl.exp2(x)


@triton.jit
def _log2_prob(l, shift, scale2, norm2):
    """log2 softmax(l / T) = (l - M) log2(e) / T - log2 S from the row statistics (shift = M, or 0 on
    an empty row; scale2 = log2(e) / T; norm2 = log2 S, or 0 on an empty row); -inf for l = -inf."""
    return (l - shift) * scale2 - norm2


@triton.jit
def _group_weights(lp2, lq2, res, shift2, WITH_Q: tl.constexpr, MASKED: tl.constexpr):
    """[..., W] w_v 2^-shift2, w_v = max(0, p_v - q_v) (WITH_Q) or p_v, from log2 p / log2 q; with
    MASKED 0 off the tokens `res`; shift2 [..., 1] the group's largest log2 p on `res` (every term <= 1).
    Classic drafts need no mask (p <= q gives 0), nor does p (log2 p = -inf gives 0)."""
    w = _ex2(lp2 - shift2)
    if WITH_Q:  # >= 0 however the approximate 2^x rounds
        w = tl.maximum(w - _ex2(lq2 - shift2), 0.0)
    if MASKED:
        w = tl.where(res, w, 0.0)
    return w


@triton.jit
def _group_shift(lp2, res, AXIS: tl.constexpr, MASKED: tl.constexpr = True):
    """The largest log2 p along AXIS (on `res` tokens with MASKED), 0 where there is none."""
    if MASKED:
        lp2 = tl.where(res, lp2, _NEG_INF)
    top = tl.max(lp2, axis=AXIS)
    return tl.where(top == _NEG_INF, 0.0, top)


@triton.jit
def _group_log_mass(lp2, lq2, res, WITH_Q: tl.constexpr, MASKED: tl.constexpr, FAST_LOG: tl.constexpr,
                    AXIS: tl.constexpr):  # fmt: skip
    """Natural log of the mass sum_v w_v of each group (axis AXIS) for the weights of _group_weights
    (MASKED: on `res` only; else on every token, the mass of p); -inf for a group without mass.
    Computed against the group's largest log p on `res`, so nothing overflows and tiny-temperature
    rows keep their mass (exact in logs; terms 2^126 below the group's largest p flush to zero)."""
    shift2 = _group_shift(lp2, res, AXIS, MASKED)
    total = tl.sum(_group_weights(lp2, lq2, res, tl.expand_dims(shift2, AXIS), WITH_Q, MASKED), axis=AXIS)
    return tl.where(total > 0.0, shift2 * _LN2 + _ln(total, FAST_LOG), _NEG_INF)


@triton.jit
def _group_log_e(seed, offset, groups, j, FAST_LOG: tl.constexpr):
    """log E_g [R, S] of the residual draw's groups `groups` [R, S] at position j [R]: word 0 of
    Philox(seed, offset, index=g, STREAM_LOGITS_GROUP, position=j) (seed, offset [R])."""
    zero = groups * 0
    word = philox_words(seed[:, None] + zero, offset[:, None] + zero, groups, STREAM_LOGITS_GROUP,
                        j[:, None] + zero)[0]  # fmt: skip
    return _log_exponential_from_word(word, FAST_LOG)


@triton.jit
def _best_slot(score, groups):
    """(best score, its smallest group id) [R] of candidates score / groups [R, S]; -inf and -1 when
    no group has mass."""
    top = tl.max(score, axis=1)
    at = tl.min(tl.where(score == top[:, None], groups, 2147483647), axis=1)
    return top, tl.where(top > _NEG_INF, at, -1)


@triton.jit
def _stats_load(row, need, cols, V, s_v, MASKED: tl.constexpr, WATCHED: tl.constexpr = False):
    """The logits of tokens `cols` of rows `row` (pointers, expanded to cols' rank) as stored: -inf
    off `need` and past V with MASKED, else plain loads (every row needed, every column < V), or with
    WATCHED (RECHECK's loops, `need` = the rows still live) nothing loaded off `need`, without an
    `other`: such a row's tile is not summed, so its values do not matter."""
    if MASKED:
        return load_once(row + cols * s_v, need & (cols < V), float("-inf"))
    if WATCHED:
        return load_once(row + cols * s_v, need, None)
    return load_once(row + cols * s_v, None, None)


@triton.jit
def _flag_load(flag_ptr, flag_on):
    """RECHECK: the rows' requests' lazy state (one L2 read, issued beside a tile's load; 0 off flag_on)."""
    return tl.load(flag_ptr, mask=flag_on, other=0, cache_modifier=".cg")


@triton.jit
def _recheck(live, flag, flag_at):
    """`live` less the rows that an earlier position's certain rejection has made unused: state
    flag > flag_at = K+1-i (_stats_block's test before the first tile, RECHECK's after each)."""
    return live & (flag <= flag_at)


@triton.jit
def _part_stats_tile(l, col0, in_tile, V, scale, t_max, t_sum, t_arg, any_greedy, part, part_ok, out_row,
                     gmax_ptr, gsum_ptr, CLEAN: tl.constexpr):  # fmt: skip
    """One [R, NG, GW] tile l (as loaded; its columns col0 + in_tile [NG, GW]) of _part_stats_tiles:
    the running (max, sum, argmax) updated, the tile's part statistics stored. CLEAN: l through
    _clean_logits (else as loaded, _any_nan)."""
    l = _clean_logits(l) if CLEAN else l.to(tl.float32)
    # parts first (within a thread), then one warp butterfly instead of one per part: offline SASS
    # 258 -> 245 instructions per unmasked tile; H200 run 53 (same run, graph) 1.03-1.04x in bf16,
    # 1.00x in fp32 (memory-bound)
    tile_max = tl.max(tl.max(l, axis=1), axis=1)
    if any_greedy:  # the argmax only serves greedy rows (a uniform branch on the GPU)
        # an offset within the tile, added to col0: a column tensor carried from tile to tile cost an add
        # per element and tile on every row (offline SASS, one-hot bf16: 247 -> 231 per tile and warp)
        at = tl.min(tl.where(l == tile_max[:, None, None], in_tile[None, :, :], _NO_COL), axis=2)
        at = tl.min(at, axis=1)
        tile_arg = tl.where(at < _NO_COL, col0 + at, V)
        t_arg = tl.where(tile_max > t_max, tile_arg, t_arg)  # strict: the earlier index wins ties
    new_max = tl.maximum(t_max, tile_max)
    shift = tl.where(new_max == _NEG_INF, 0.0, new_max)
    # (l - shift) scale, not l scale - shift scale (one FFMA, H200 run 59: 1.02x in bf16): with a tiny
    # T both products overflow and inf - inf is NaN (tests/reliability caught it); l - shift <= 0 does not
    part_sum = tl.sum(tl.exp2((l - shift[:, None, None]) * scale[:, None, None]), axis=2)  # [R, NG]
    _store_statistic(gmax_ptr + out_row + part, tl.broadcast_to(new_max[:, None], part_sum.shape), part_ok)
    _store_statistic(gsum_ptr + out_row + part, part_sum, part_ok)
    t_sum = t_sum * tl.exp2((t_max - shift) * scale) + tl.sum(part_sum, axis=1)
    return new_max, t_sum, t_arg


@triton.jit
def _part_stats_tiles(t_row, rows, row_ok, need, scale, any_greedy, first_col, V, NP, st_v, gmax_ptr,
                      gsum_ptr, chunk_start, flag_ptr, flag_on, flag_at, BLOCK_ROWS: tl.constexpr,
                      BLOCK_V: tl.constexpr, TILES: tl.constexpr, PREFETCH: tl.constexpr,
                      RECHECK: tl.constexpr = False):  # fmt: skip
    """_stats_block's target statistics with parts (one-hot drafts; classic with PART_STATS), tile by
    tile as [R, NG, GW] parts: the chunk's (max, sum-exp, first argmax) [R], and for each part k
    (columns [k GW, (k+1) GW)) a reference m_k >= its max (the chunk's running max after its tile)
    and s_k = sum exp((l - m_k) / T) at gmax / gsum[row, k]. Lanes >= V: -inf logits (no mass). The
    exponentials are the classic path's (one per element against the running max): the parts cost
    one sum per GW lanes. A chunk inside the row whose rows are all needed (every chunk but a row's
    last, on the GPU) loads without masks (offline SASS: 278 -> 245 instructions per 512-column tile
    and warp)."""
    GW: tl.constexpr = _GROUP if BLOCK_V >= _GROUP else BLOCK_V
    NG: tl.constexpr = BLOCK_V // GW
    in_tile = tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]  # [NG, GW]
    part_base = chunk_start // GW + tl.arange(0, NG).to(tl.int64)[None, :]  # [1, NG]
    out_row = rows[:, None] * NP
    plain = (tl.min(need.to(tl.int32), axis=0) > 0) & (chunk_start + TILES * BLOCK_V <= V)
    if plain:
        t_max, t_sum, t_arg = _part_stats_chunk(t_row, need, row_ok[:, None], first_col, in_tile, part_base,
                                                V, NP, st_v, scale, any_greedy, out_row, gmax_ptr, gsum_ptr,
                                                flag_ptr, flag_on, flag_at, False, BLOCK_ROWS, BLOCK_V, NG,
                                                TILES, PREFETCH, RECHECK)  # fmt: skip
    else:
        t_max, t_sum, t_arg = _part_stats_chunk(t_row, need, row_ok[:, None], first_col, in_tile, part_base,
                                                V, NP, st_v, scale, any_greedy, out_row, gmax_ptr, gsum_ptr,
                                                flag_ptr, flag_on, flag_at, True, BLOCK_ROWS, BLOCK_V, NG,
                                                TILES, PREFETCH, RECHECK)  # fmt: skip
    return t_max, t_sum, t_arg


@triton.jit
def _part_stats_chunk(t_row, need, row_ok, first_col, in_tile, part_base, V, NP, st_v, scale, any_greedy,
                      out_row, gmax_ptr, gsum_ptr, flag_ptr, flag_on, flag_at, MASKED: tl.constexpr,
                      BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, NG: tl.constexpr, TILES: tl.constexpr,
                      PREFETCH: tl.constexpr, RECHECK: tl.constexpr = False):  # fmt: skip
    """_part_stats_loop over the chunk as loaded, then, where its sum is NaN (_any_nan), once more
    cleaned, rewriting its part statistics. The re-read runs without PREFETCH: with it the stats
    programs took 89 registers (offline SASS), against 71 without and 64 before the re-read."""
    m0 = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    s0 = tl.zeros((BLOCK_ROWS,), tl.float32)
    a0 = tl.zeros((BLOCK_ROWS,), tl.int64)
    t_max, t_sum, t_arg = _part_stats_loop(t_row, need, row_ok, first_col, in_tile, part_base, V, NP, st_v,
                                           scale, m0, s0, a0, any_greedy, out_row, gmax_ptr, gsum_ptr,
                                           flag_ptr, flag_on, flag_at, MASKED, BLOCK_V, NG, TILES, PREFETCH,
                                           False, RECHECK)  # fmt: skip
    if _any_nan(t_sum):
        t_max, t_sum, t_arg = _part_stats_loop(t_row, need, row_ok, first_col, in_tile, part_base, V, NP,
                                               st_v, scale, m0, s0, a0, any_greedy, out_row, gmax_ptr,
                                               gsum_ptr, flag_ptr, flag_on, flag_at, MASKED, BLOCK_V, NG,
                                               TILES, False, True)  # fmt: skip
    return t_max, t_sum, t_arg


@triton.jit
def _part_ok(row_ok, part, NP, MASKED: tl.constexpr):
    """Which part statistics [R, NG] to store: the rows' (row_ok [R, 1]), and with MASKED parts < NP."""
    if MASKED:
        ok = row_ok & (part < NP)
    else:
        ok = row_ok
    return ok


@triton.jit
def _part_stats_loop(t_row, need, row_ok, first_col, in_tile, part_base, V, NP, st_v, scale, t_max, t_sum,
                     t_arg, any_greedy, out_row, gmax_ptr, gsum_ptr, flag_ptr, flag_on, flag_at,
                     MASKED: tl.constexpr, BLOCK_V: tl.constexpr, NG: tl.constexpr, TILES: tl.constexpr,
                     PREFETCH: tl.constexpr, CLEAN: tl.constexpr, RECHECK: tl.constexpr = False):  # fmt: skip
    """_part_stats_tiles' loop over the chunk's TILES tiles; PREFETCH issues tile t + 1's load before
    tile t's arithmetic (two tiles in flight per warp). RECHECK: _part_stats_watch instead."""
    if RECHECK:
        t_max, t_sum, t_arg = _part_stats_watch(t_row, need, row_ok, first_col, in_tile, part_base, V, NP,
                                                st_v, scale, t_max, t_sum, t_arg, any_greedy, out_row,
                                                gmax_ptr, gsum_ptr, flag_ptr, flag_on, flag_at, MASKED,
                                                BLOCK_V, NG, TILES, PREFETCH, CLEAN)  # fmt: skip
    elif PREFETCH:
        cols = (first_col + in_tile)[None, :, :]  # [1, NG, GW]
        l = _stats_load(t_row[:, None, None], need[:, None, None], cols, V, st_v, MASKED)
        for tile in range(1, TILES):
            l_next = _stats_load(t_row[:, None, None], need[:, None, None], cols + BLOCK_V, V, st_v, MASKED)
            part = part_base + (tile - 1) * NG
            ok = _part_ok(row_ok, part, NP, MASKED)
            col0 = first_col + (tile - 1) * BLOCK_V
            t_max, t_sum, t_arg = _part_stats_tile(l, col0, in_tile, V, scale, t_max, t_sum, t_arg,
                                                   any_greedy, part, ok, out_row, gmax_ptr, gsum_ptr,
                                                   CLEAN)  # fmt: skip
            l = l_next
            cols += BLOCK_V
        last = part_base + (TILES - 1) * NG
        ok = _part_ok(row_ok, last, NP, MASKED)
        col0 = first_col + (TILES - 1) * BLOCK_V
        t_max, t_sum, t_arg = _part_stats_tile(l, col0, in_tile, V, scale, t_max, t_sum, t_arg, any_greedy,
                                               last, ok, out_row, gmax_ptr, gsum_ptr, CLEAN)  # fmt: skip
    else:
        for tile in range(TILES):
            col0 = first_col + tile * BLOCK_V
            part = part_base + tile * NG
            ok = _part_ok(row_ok, part, NP, MASKED)
            l = _stats_load(t_row[:, None, None], need[:, None, None], (col0 + in_tile)[None, :, :], V, st_v,
                            MASKED)  # fmt: skip
            t_max, t_sum, t_arg = _part_stats_tile(l, col0, in_tile, V, scale, t_max, t_sum, t_arg,
                                                   any_greedy, part, ok, out_row, gmax_ptr, gsum_ptr,
                                                   CLEAN)  # fmt: skip
    return t_max, t_sum, t_arg


@triton.jit
def _part_stats_watch(t_row, need, row_ok, first_col, in_tile, part_base, V, NP, st_v, scale, t_max, t_sum,
                      t_arg, any_greedy, out_row, gmax_ptr, gsum_ptr, flag_ptr, flag_on, flag_at,
                      MASKED: tl.constexpr, BLOCK_V: tl.constexpr, NG: tl.constexpr, TILES: tl.constexpr,
                      PREFETCH: tl.constexpr, CLEAN: tl.constexpr):  # fmt: skip
    """_part_stats_loop's tiles while the rows are live: beside every tile's load the requests' lazy
    state is read again (one L2 read), and once an earlier draft of a row's request is certainly
    rejected (_recheck) the row's later tiles are neither loaded nor summed. Such a row's statistics
    are partial, like a skipped row's stale ones: no output reads them."""
    live = need
    if PREFETCH:
        cols = (first_col + in_tile)[None, :, :]  # [1, NG, GW]
        l = _stats_load(t_row[:, None, None], live[:, None, None], cols, V, st_v, MASKED, True)
        for tile in range(1, TILES):
            l_next = _stats_load(t_row[:, None, None], live[:, None, None], cols + BLOCK_V, V, st_v, MASKED,
                                 True)  # fmt: skip
            flag = _flag_load(flag_ptr, flag_on)
            t_max, t_sum, t_arg = _part_stats_live_tile(l, tile - 1, live, first_col, in_tile, part_base, V,
                                                        NP, scale, t_max, t_sum, t_arg, any_greedy, row_ok,
                                                        out_row, gmax_ptr, gsum_ptr, MASKED, BLOCK_V, NG,
                                                        CLEAN)  # fmt: skip
            live = _recheck(live, flag, flag_at)
            l = l_next
            cols += BLOCK_V
        t_max, t_sum, t_arg = _part_stats_live_tile(l, TILES - 1, live, first_col, in_tile, part_base, V,
                                                    NP, scale, t_max, t_sum, t_arg, any_greedy, row_ok,
                                                    out_row, gmax_ptr, gsum_ptr, MASKED, BLOCK_V, NG,
                                                    CLEAN)  # fmt: skip
    else:
        for tile in range(TILES):
            cols = (first_col + tile * BLOCK_V + in_tile)[None, :, :]
            l = _stats_load(t_row[:, None, None], live[:, None, None], cols, V, st_v, MASKED, True)
            flag = _flag_load(flag_ptr, flag_on)
            t_max, t_sum, t_arg = _part_stats_live_tile(l, tile, live, first_col, in_tile, part_base, V,
                                                        NP, scale, t_max, t_sum, t_arg, any_greedy, row_ok,
                                                        out_row, gmax_ptr, gsum_ptr, MASKED, BLOCK_V, NG,
                                                        CLEAN)  # fmt: skip
            live = _recheck(live, flag, flag_at)
    return t_max, t_sum, t_arg


@triton.jit
def _part_stats_live_tile(l, tile, live, first_col, in_tile, part_base, V, NP, scale, t_max, t_sum, t_arg,
                          any_greedy, row_ok, out_row, gmax_ptr, gsum_ptr, MASKED: tl.constexpr,
                          BLOCK_V: tl.constexpr, NG: tl.constexpr, CLEAN: tl.constexpr):  # fmt: skip
    """_part_stats_tile of the chunk's tile number `tile` (loaded as l), where some row is still live."""
    if tl.max(live.to(tl.int32), axis=0) > 0:
        part = part_base + tile * NG
        ok = _part_ok(row_ok, part, NP, MASKED)
        col0 = first_col + tile * BLOCK_V
        t_max, t_sum, t_arg = _part_stats_tile(l, col0, in_tile, V, scale, t_max, t_sum, t_arg, any_greedy,
                                               part, ok, out_row, gmax_ptr, gsum_ptr, CLEAN)  # fmt: skip
    return t_max, t_sum, t_arg


@triton.jit
def _stats_block(
    row_block,  # this program's rows are row_block * BLOCK_ROWS + [0, BLOCK_ROWS) (LAZY: position-major)
    chunk,  # and its vocabulary chunk
    draft_rows,  # classic drafts: whether it reads the rows' draft logits (else their target logits)
    t_ptr,  # [B, K+1, V] fp32/bf16/fp16 target logits, strides (st_b, st_k, st_v)
    d_ptr,  # [B, K, V] draft logits, strides (sd_b, sd_k, sd_v) (HAS_DRAFT_LOGITS)
    temp_ptr,  # [B] fp32 temperatures
    n_ptr,  # [B] int32/int64 ragged draft counts (RAGGED)
    tmax_ptr,  # [B*(K+1), NC] fp32 out: chunk max of clean target logits (-inf if none)
    tsum_ptr,  # [B*(K+1), NC] fp32 out: chunk sum of exp((l - chunk max) / T)
    targ_ptr,  # [B*(K+1), NC] int32 out: smallest index attaining the chunk max
    dmax_ptr,  # [B*(K+1), NC] fp32 out: draft chunk max (HAS_DRAFT_LOGITS, rows i < K)
    dsum_ptr,  # [B*(K+1), NC] fp32 out: draft chunk sum-exp
    gmax_ptr,  # [B*(K+1), NP] fp32 out (one-hot drafts, PART_STATS): each part's reference m_k (>= its max)
    gsum_ptr,  # [B*(K+1), NP] fp32 out (one-hot drafts, PART_STATS): the part's sum of exp((l - m_k) / T)
    x_ptr,  # [B, K] int32/int64 draft ids, strides (sx_b, sx_k) (LAZY)
    seed_ptr,  # [B] int64 (LAZY)
    offset_ptr,  # [B] int64 (LAZY)
    state_ptr,  # [B * STATE_WORDS] int32 (LAZY), word b * STATE_WORDS: K+1-f once draft f is certainly
    # rejected, the earliest f (0: none; the accept kernel resets it to 0 for the next call)
    cnt_ptr,  # [B*(K+1)*STATE_WORDS] int32 (LAZY): arrivals per (request, position), word (b K + i)
    # STATE_WORDS (TAIL: (b (K+1) + i) STATE_WORDS), kept 0 between calls
    tokens_ptr,  # [B, K+1] int32 out, contiguous (TAIL; the outputs of _accept_block and the pick)
    num_accepted_ptr,  # [B] int32 out (TAIL)
    fallback_ptr,  # [B] bool out (TAIL)
    valid_ptr,  # [B] bool out (TAIL)
    row_f_ptr,  # [B, 6] fp32 out (TAIL): row j's statistics for the pick kernel (as _accept_block's)
    row_i_ptr,  # [B, 3] int32 out (TAIL): j, x_j, flags (as _accept_block's)
    tau_ptr,  # [B * TAU_WORDS] int64 (SEED_TAU): each request's race threshold word, seeded by its emitter
    B, V, NC, NP,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b, sx_b, sx_k, ss_b, so_b,
    K: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    LANE_I32: tl.constexpr = False,
    PREFETCH: tl.constexpr = False,
    PART_STATS: tl.constexpr = False,
    LAZY: tl.constexpr = False,
    NCB: tl.constexpr = 1,
    RECHECK: tl.constexpr = False,
    TAIL: tl.constexpr = False,  # LAZY: the decisions and outputs here (_tail_arrival)
    KP: tl.constexpr = 1,  # TAIL: next_pow2(K+1)
    PICK_POLL: tl.constexpr = False,  # TAIL: release each request's ready word (pick_poll, race_poll)
    SEED_TAU: tl.constexpr = False,  # TAIL, classic: seed the race's threshold (race_tau "seeded")
    GW: tl.constexpr = 256,  # SEED_TAU: the race's group width
    FAST_LOG: tl.constexpr = False,  # SEED_TAU: the race's
    chunks=1,  # LAZY: this program reads chunks chunk, chunk + 1, ... (LATE_CHUNKS > 1: up to that many)
    LATE_CHUNKS: tl.constexpr = 1,  # LAZY: 1, or the late positions' chunks a program (_logits_stats_kernel)
):  # fmt: skip
    # row r = (b, i), chunk c = columns [c TILES BLOCK_V, (c+1) TILES BLOCK_V):
    #   m_c = max_v l_v,  s_c = sum_v exp((l_v - m_c) / T)   (online over the TILES tiles)
    # l = clean(target) and, for i < n_b on sampled rows, the same for clean(draft).
    # One-hot drafts, and classic drafts' target rows with PART_STATS: also per part k (tokens
    # [k GW, (k+1) GW), GW = min(256, BLOCK_V))
    #   m_k = the chunk's running max after k's tile (>= max_v l_v),  s_k = sum_v exp((l_v - m_k) / T),
    # from which _pick_in_groups gets every group's mass of p without reading the row again, and the
    # screened race (_screened_race) a bound on every group's residual mass.
    # LAZY: rows after a request's first rejection are never used (the accept kernel's j is the first
    # rejection), so a program skips its rows (b, i) once some draft f < i of b is certainly rejected
    # (state_b = K+1-f > K+1-i); the last program to arrive at (b, i < K) tests draft i
    # (_certain_rejection) and raises state_b. Rows are numbered position-major, so that every
    # position's programs are launched after the earlier positions' (_logits_stats_kernel). Nothing
    # waits for a decision: a program that starts before it reads its rows as the eager pass would.
    if LAZY:
        flat = row_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
        row_ok = flat < B * (K + 1)
        b = flat % B
        i = flat // B
        rows = b * (K + 1) + i
    else:
        rows = row_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
        row_ok = rows < B * (K + 1)
        b = rows // (K + 1)
        i = rows % (K + 1)
    sampled, greedy, inv_t, n = _row_params(b, row_ok, temp_ptr, s_temp, n_ptr, sn_b, K, RAGGED)
    need = (sampled | greedy) & (i <= n)
    d_need = sampled & (i < n)
    if LAZY:
        # one L2 read of the request's flag (H200 run 185: a volatile read of a bit-mask flag, with or
        # without a bounded wait for the previous position's decision, was slower in most cases)
        state = tl.load(state_ptr + b * _STATE_WORDS, mask=row_ok & (i > 0), other=0, cache_modifier=".cg")
        if LATE_CHUNKS == 1:  # the default, compiled without the loop below (offline SASS: the loop costs the
            # whole kernel spills under the 64-register cap, early positions' programs included)
            _lazy_chunk(rows, b, i, row_ok, need, d_need, state, sampled, greedy, inv_t, chunk, draft_rows,
                        t_ptr, d_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr,
                        state_ptr, V, NC, NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, K, HAS_DRAFT_LOGITS,
                        BLOCK_ROWS, BLOCK_V, TILES, LANE_I32, PREFETCH, PART_STATS, RECHECK)  # fmt: skip
        else:
            flag = state
            for k in range(chunks):
                # the flag for the next chunk, read before this chunk's tiles (its round trip behind them);
                # `chunks` compared at the rows' shape (no scalar-and-block `&` is a mask to the interpreter)
                more = row_ok & (i > 0) & (i * 0 + k + 1 < chunks)
                flag_next = tl.load(state_ptr + b * _STATE_WORDS, mask=more, other=0, cache_modifier=".cg")
                _lazy_chunk(rows, b, i, row_ok, need, d_need, flag, sampled, greedy, inv_t, chunk + k,
                            draft_rows, t_ptr, d_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr,
                            gmax_ptr, gsum_ptr, state_ptr, V, NC, NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, K,
                            HAS_DRAFT_LOGITS, BLOCK_ROWS, BLOCK_V, TILES, LANE_I32, PREFETCH, PART_STATS,
                            RECHECK)  # fmt: skip
                flag = tl.maximum(flag, flag_next)
        if TAIL:
            # rows that the flag read above already says unused (an earlier draft certainly rejected) need no
            # decision, so their programs do not arrive: the last kernel zeroes the counters that such rows
            # leave short, and the words, after the pass (_reset_tail_state). H200 runs 298 and 302 (session
            # 63, ab_device_time, 00df044's package -> this, zero_pause µs, means of eight processes): bf16
            # (64, 4, 151936) classic 59.62 -> 58.55, one-hot 33.25 -> 33.10 (graph 27.36 -> 27.05); every
            # draft accepted (H100, lazy_stats.py, one reading) 86.56 -> 85.54, 53.89 -> 54.18
            arrive = _recheck(row_ok, state, K + 1 - i)
            if tl.max(arrive.to(tl.int32), axis=0) > 0:
                drafted = arrive & (sampled | greedy) & (i < n)
                if HAS_DRAFT_LOGITS:  # classic: the row's last program gathers, after its arrival (twice the
                    # programs arrive per row: H200 run 239 measured every classic program gathering in the
                    # lazy pass 1.2-1.6 µs slower, zero_pause, at bf16 (64, 4, 151936) and (128, 8, 128256))
                    gathered = (b, b, b, b, b)  # unused
                else:
                    # one-hot: the decision's gathers, issued by every program as it arrives, so that a row's
                    # last program waits on the statistics alone after its arrival
                    x_i = _draft_id(b, i, drafted, x_ptr, sx_b, sx_k, K)
                    gathered = _draft_logits(b, i, x_i, drafted, sampled, t_ptr, t_ptr, seed_ptr, offset_ptr,
                                             V, st_b, st_k, st_v, st_b, st_k, st_v, ss_b, so_b, K,
                                             False)  # fmt: skip
                _tail_arrival(rows, b, i, arrive, sampled, greedy, inv_t, n, gathered, x_ptr, tmax_ptr,
                              tsum_ptr, targ_ptr, state_ptr, cnt_ptr, tokens_ptr, num_accepted_ptr,
                              fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, t_ptr, d_ptr, dmax_ptr, dsum_ptr,
                              seed_ptr, offset_ptr, B, V, NC, st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k,
                              ss_b, so_b, tau_ptr, chunks, K, KP, BLOCK_ROWS, NCB, PICK_POLL,
                              HAS_DRAFT_LOGITS, SEED_TAU, GW, FAST_LOG)  # fmt: skip
        elif K > 0:
            _lazy_arrival(rows, b, i, row_ok, sampled, greedy, inv_t, n, t_ptr, d_ptr, x_ptr, seed_ptr,
                          offset_ptr, st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, ss_b, so_b, tmax_ptr,
                          tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, state_ptr, cnt_ptr, V, NC, chunks, K,
                          HAS_DRAFT_LOGITS, BLOCK_ROWS, NCB)  # fmt: skip
    else:
        _stats_rows(rows, b, i, row_ok, need, d_need, sampled, greedy, inv_t, chunk, draft_rows, t_ptr, d_ptr,
                    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr, state_ptr, V, NC,
                    NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, K, HAS_DRAFT_LOGITS, BLOCK_ROWS, BLOCK_V, TILES,
                    LANE_I32, PREFETCH, PART_STATS)  # fmt: skip


@triton.jit
def _lazy_chunk(rows, b, i, row_ok, need, d_need, flag, sampled, greedy, inv_t, chunk, draft_rows, t_ptr,
                d_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr, state_ptr, V, NC,
                NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, K: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr,
                BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr, LANE_I32: tl.constexpr,
                PREFETCH: tl.constexpr, PART_STATS: tl.constexpr, RECHECK: tl.constexpr):  # fmt: skip
    """LAZY: _stats_rows of one chunk, for the rows that the request state `flag` (read before it) leaves
    in use; nothing where it leaves none."""
    need = _recheck(need, flag, K + 1 - i)
    d_need = _recheck(d_need, flag, K + 1 - i)
    todo = tl.where(draft_rows, d_need, need)
    if tl.max(todo.to(tl.int32), axis=0) > 0:
        _stats_rows(rows, b, i, row_ok, need, d_need, sampled, greedy, inv_t, chunk, draft_rows, t_ptr, d_ptr,
                    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr, state_ptr, V, NC,
                    NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, K, HAS_DRAFT_LOGITS, BLOCK_ROWS, BLOCK_V, TILES,
                    LANE_I32, PREFETCH, PART_STATS, RECHECK)  # fmt: skip


@triton.jit
def _stats_rows(rows, b, i, row_ok, need, d_need, sampled, greedy, inv_t, chunk, draft_rows, t_ptr, d_ptr,
                tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr, state_ptr, V, NC, NP,
                st_b, st_k, st_v, sd_b, sd_k, sd_v, K: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr,
                BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr, LANE_I32: tl.constexpr,
                PREFETCH: tl.constexpr, PART_STATS: tl.constexpr, RECHECK: tl.constexpr = False):  # fmt: skip
    """_stats_block's statistics of its rows (flat index `rows` = b (K+1) + i) in one chunk: target
    rows where `need`, draft rows (draft_rows) where `d_need`. RECHECK (LAZY): rows i > 0 read their
    request's state again tile by tile (_part_stats_watch)."""
    flag_ptr = state_ptr + b * _STATE_WORDS
    flag_on = row_ok & (i > 0)
    flag_at = (K + 1 - i).to(tl.int32)
    chunk = chunk.to(tl.int64)
    scale = inv_t * _LOG2E  # exp(x / T) = exp2(x * log2(e) / T)
    any_greedy = tl.max(greedy.to(tl.int32), axis=0) > 0
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
    chunk_start = chunk * (TILES * BLOCK_V)
    out = rows * NC + chunk
    if not HAS_DRAFT_LOGITS:
        t_max, t_sum, t_arg = _part_stats_tiles(t_row, rows, row_ok, need, scale, any_greedy, first_col, V,
                                                NP, st_v, gmax_ptr, gsum_ptr, chunk_start, flag_ptr, flag_on,
                                                flag_at, BLOCK_ROWS, BLOCK_V, TILES, PREFETCH,
                                                RECHECK)  # fmt: skip
        _store_chunk_stats(tmax_ptr, tsum_ptr, targ_ptr, out, row_ok, t_max, t_sum, t_arg)
    elif draft_rows:  # classic drafts: the draft rows (b, i < n) of sampled requests, in their own programs
        d_row = d_ptr + (b * sd_b + tl.minimum(i, K - 1) * sd_k)
        d_max, d_sum, _ = _chunk_stats(d_row, d_need, first_col, lane, chunk_start, V, sd_v, scale,
                                       False, flag_ptr, flag_on, flag_at, BLOCK_ROWS, BLOCK_V, TILES,
                                       PREFETCH, RECHECK)  # fmt: skip
        _store_statistic(dmax_ptr + out, d_max, row_ok)
        _store_statistic(dsum_ptr + out, d_sum, row_ok)
    elif PART_STATS:  # classic drafts: the target rows, with part statistics for the screened race
        t_max, t_sum, t_arg = _part_stats_tiles(t_row, rows, row_ok, need, scale, any_greedy, first_col, V,
                                                NP, st_v, gmax_ptr, gsum_ptr, chunk_start, flag_ptr, flag_on,
                                                flag_at, BLOCK_ROWS, BLOCK_V, TILES, PREFETCH,
                                                RECHECK)  # fmt: skip
        _store_chunk_stats(tmax_ptr, tsum_ptr, targ_ptr, out, row_ok, t_max, t_sum, t_arg)
    else:  # classic drafts: the target rows
        t_max, t_sum, t_arg = _chunk_stats(t_row, need, first_col, lane, chunk_start, V, st_v, scale,
                                           any_greedy, flag_ptr, flag_on, flag_at, BLOCK_ROWS, BLOCK_V, TILES,
                                           PREFETCH, RECHECK)  # fmt: skip
        _store_chunk_stats(tmax_ptr, tsum_ptr, targ_ptr, out, row_ok, t_max, t_sum, t_arg)


# LAZY's test rejects only where the accept kernel's certainly does: u above p / q (or p) by this
# factor. Both kernels compute log p, log q in float32 from the same chunk statistics, summed in
# different orders (a few ulp of log S <= log V apart, ~1e-6 relative in the ratio): 2^-10 leaves
# a thousandfold margin, and a test inside it only costs the rows the accept kernel may not need.
_LAZY_MARGIN: tl.constexpr = tl.constexpr(1.0 + 2.0**-10)


@triton.jit
def _draft_id(b, i, drafted, x_ptr, sx_b, sx_k, K: tl.constexpr):
    """x_i [R] of rows (b, i) where `drafted` (-1 elsewhere)."""
    return tl.load(x_ptr + b * sx_b + tl.minimum(i, K - 1) * sx_k, mask=drafted, other=-1).to(tl.int64)


@triton.jit
def _draft_logits(b, i, x, drafted, sampled, t_ptr, d_ptr, seed_ptr, offset_ptr, V, st_b, st_k, st_v, sd_b,
                  sd_k, sd_v, ss_b, so_b, K: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr):  # fmt: skip
    """(x_i, clean l_i(x_i), clean d_i(x_i), seed, offset) [R]: what the decision of draft x_i reads
    besides the row's statistics (the logits -inf off valid ids of sampled `drafted` rows; one-hot
    drafts: d = l)."""
    gather = drafted & (x >= 0) & (x < V) & sampled
    l_x = _clean_logits(tl.load(t_ptr + b * st_b + i * st_k + x * st_v, mask=gather, other=float("-inf")))
    if HAS_DRAFT_LOGITS:
        d_x = _clean_logits(tl.load(d_ptr + b * sd_b + tl.minimum(i, K - 1) * sd_k + x * sd_v, mask=gather,
                                    other=float("-inf")))  # fmt: skip
    else:
        d_x = l_x
    seed = tl.load(seed_ptr + b * ss_b, mask=gather, other=0).to(tl.int64)
    offset = tl.load(offset_ptr + b * so_b, mask=gather, other=0).to(tl.int64)
    return x, l_x, d_x, seed, offset


@triton.jit
def _row_statistics(rows, ok, inv_t, max_ptr, sum_ptr, arg_ptr, NC, WITH_ARG: tl.constexpr,
                    BLOCK_ROWS: tl.constexpr, NCB: tl.constexpr):  # fmt: skip
    """(M, log S, argmax) [R] of rows `rows` where `ok`, from their chunk statistics (_combine_stats)."""
    big_m, log_s, arg = _combine_stats(max_ptr, sum_ptr, arg_ptr, rows[:, None], ok[:, None], inv_t, NC,
                                       WITH_ARG, NCB)  # fmt: skip
    return (tl.reshape(big_m, (BLOCK_ROWS,)), tl.reshape(log_s, (BLOCK_ROWS,)),
            tl.reshape(arg, (BLOCK_ROWS,)))  # fmt: skip


@triton.jit
def _certain_rejection(i, drafted, sampled, inv_t, gathered, big_m, log_s, arg, big_md, log_sd, V,
                       HAS_DRAFT_LOGITS: tl.constexpr, EXACT: tl.constexpr = False):  # fmt: skip
    """[R] bool: rows (b, i) `drafted` (draft i tested: i < n_b, sampled or greedy) whose draft the
    accept kernel (_accept_block) certainly rejects, from the row's statistics (big_m, log_s, arg;
    classic: the draft row's big_md, log_sd) and _draft_logits's `gathered`: an id outside [0, V);
    greedy, x_i != argmax or no finite logit (exact: comparisons only); sampled, u_i + 2^-25 >
    _LAZY_MARGIN p_i(x_i) / q_i(x_i) (one-hot: p_i(x_i)) or a draft logit of -inf. EXACT (the stats
    pass's tail, _tail_arrival): the accept kernel's own test (reject unless u_i + 2^-25 < the
    ratio), the one decision of the call."""
    x, l_x, d_x, seed, offset = gathered
    ok = drafted & (x >= 0) & (x < V)
    w0, _, _, _ = philox_words(seed, offset, i, STREAM_LOGITS_UNIFORM, i * 0)
    u = uniform_from_word(w0).to(tl.float64) + UNIFORM_HALF_STEP
    if HAS_DRAFT_LOGITS:
        ratio = _acceptance_ratio(l_x, big_m, log_s, d_x, big_md, log_sd, inv_t, True)
        if EXACT:
            reject_sampled = (d_x == _NEG_INF) | ~(u < ratio)
        else:
            reject_sampled = (d_x == _NEG_INF) | (u > ratio * _LAZY_MARGIN)
    else:
        p_x = _acceptance_ratio(l_x, big_m, log_s, l_x, big_m, log_s, inv_t, False)
        if EXACT:
            reject_sampled = ~(u < p_x)
        else:
            reject_sampled = u > p_x * _LAZY_MARGIN
    reject_greedy = (x != arg) | (big_m == _NEG_INF)
    return drafted & (~ok | tl.where(sampled, reject_sampled, reject_greedy))


@triton.jit
def _lazy_arrival(rows, b, i, row_ok, sampled, greedy, inv_t, n, t_ptr, d_ptr, x_ptr, seed_ptr, offset_ptr,
                  st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, ss_b, so_b, tmax_ptr, tsum_ptr, targ_ptr,
                  dmax_ptr, dsum_ptr, state_ptr, cnt_ptr, V, NC, chunks, K: tl.constexpr,
                  HAS_DRAFT_LOGITS: tl.constexpr, BLOCK_ROWS: tl.constexpr, NCB: tl.constexpr):  # fmt: skip
    """LAZY: count this program's arrival at its rows (b, i < K), one per chunk it covered (`chunks`); the
    last of the NC chunks (x 2 with draft rows) resets the counter and, where the row's draft is certainly
    rejected, raises state_b to K+1-i (atomic max: the earliest rejection found stays)."""
    arrive = row_ok & (i < K)
    at = (b * K + tl.minimum(i, K - 1)) * _STATE_WORDS  # a 128-byte line per counter (STATE_WORDS)
    old = tl.atomic_add(cnt_ptr + at, chunks, mask=arrive, sem="acq_rel")
    last = arrive & (old == NC * (2 if HAS_DRAFT_LOGITS else 1) - chunks)
    if tl.max(last.to(tl.int32), axis=0) > 0:
        tl.atomic_xchg(cnt_ptr + at, 0, mask=last, sem="relaxed")
        drafted = last & (sampled | greedy) & (i < n)
        # the id, the statistics, then the logits the id indexes: two load round trips
        x = _draft_id(b, i, drafted, x_ptr, sx_b, sx_k, K)
        big_m, log_s, arg = _row_statistics(rows, drafted, inv_t, tmax_ptr, tsum_ptr, targ_ptr, NC, True,
                                            BLOCK_ROWS, NCB)  # fmt: skip
        gathered = _draft_logits(b, i, x, drafted, sampled, t_ptr, d_ptr, seed_ptr, offset_ptr, V, st_b, st_k,
                                 st_v, sd_b, sd_k, sd_v, ss_b, so_b, K, HAS_DRAFT_LOGITS)  # fmt: skip
        if HAS_DRAFT_LOGITS:
            big_md, log_sd, _ = _row_statistics(rows, drafted, inv_t, dmax_ptr, dsum_ptr, targ_ptr, NC, False,
                                                BLOCK_ROWS, NCB)  # fmt: skip
        else:
            big_md, log_sd = big_m, log_s
        reject = _certain_rejection(i, drafted, sampled, inv_t, gathered, big_m, log_s, arg, big_md, log_sd,
                                    V, HAS_DRAFT_LOGITS)  # fmt: skip
        tl.atomic_max(state_ptr + b * _STATE_WORDS, (K + 1 - i).to(tl.int32), mask=reject, sem="relaxed")


_TAIL_MAX_POSITIONS = 16  # TAIL's word holds a decided bit and a rejected bit per position (K+1 <= 16)
_REJECTED_BIT: tl.constexpr = tl.constexpr(16)  # bit 16 + p: draft p rejected


@triton.jit
def _ready_word(state_ptr, B, b):
    """PICK_POLL: request b's ready word, word (B + b) STATE_WORDS of the state: a line of its own past the
    B lines of the lazy flags and the tail's words, which thousands of stats programs read while a pick (or
    race) program may spin. 1 from b's emit (the tail's emitter, release) until b's pick program, or the
    last of its race programs (race_poll), has read it (acquire) and zeroes it."""
    return state_ptr + (B + b) * _STATE_WORDS


@triton.jit
def _reset_tail_state(req, req_ok, state_ptr, cnt_ptr, K: tl.constexpr, KP: tl.constexpr):
    """TAIL: zero the statistics pass's state of requests `req` where `req_ok` [R] for the next call: the
    flag and tail words (state words req STATE_WORDS and + 1) and the arrival counters of rows (req, 0..K).
    The pick or race kernel calls it once per request after the pass has ended (griddepcontrol.wait, or
    stream order), since a row whose programs found it unused never completes its count (_stats_block)."""
    flags = state_ptr + req * _STATE_WORDS
    tl.store(flags, 0, mask=req_ok)  # the flag
    tl.store(flags + 1, 0, mask=req_ok)  # the tail's word of decided and rejected bits
    pos = tl.arange(0, KP).to(tl.int64)[None, :]
    counters = cnt_ptr + (req[:, None] * (K + 1) + pos) * _STATE_WORDS
    tl.store(counters, 0, mask=req_ok[:, None] & (pos <= K))


@triton.jit
def _emit_position(word, n, K: tl.constexpr):
    """(j, determined) [R] of requests whose TAIL word is `word` [R] (bit p: row p decided; bit 16 + p:
    draft p rejected) and draft counts n [R]: j = the first rejection, else n; determined once rows
    0..j are all decided (then no later decision can move j: a rejection below j would be a row < j)."""
    rejected = (word >> _REJECTED_BIT) & 0xFFFF
    j = n * 0 + (K + 1)
    for p in tl.static_range(K + 1):
        j = tl.where((((rejected >> p) & 1) != 0) & (j > p), p, j)
    j = tl.minimum(j, n)
    prefix = (2 << j) - 1
    return j, (word.to(tl.int64) & prefix) == prefix


@triton.jit
def _tail_arrival(rows, b, i, row_ok, sampled, greedy, inv_t, n, gathered, x_ptr, tmax_ptr, tsum_ptr,
                  targ_ptr, state_ptr, cnt_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr,
                  row_f_ptr, row_i_ptr, t_ptr, d_ptr, dmax_ptr, dsum_ptr, seed_ptr, offset_ptr, B, V, NC,
                  st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, ss_b, so_b, tau_ptr, chunks,
                  K: tl.constexpr, KP: tl.constexpr, BLOCK_ROWS: tl.constexpr, NCB: tl.constexpr,
                  PICK_POLL: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr, SEED_TAU: tl.constexpr = False,
                  GW: tl.constexpr = 256,
                  FAST_LOG: tl.constexpr = False):  # fmt: skip
    """TAIL (LAZY): the accept kernel's work done by the stats programs. The last of the programs of
    row (b, i) (any position, the bonus row too; NC of them, 2 NC with draft logits: the draft
    programs arrive too, bonus rows' included, which read nothing; a program adds one arrival per chunk it
    covered, `chunks`, so a late position's program of LATE_CHUNKS chunks counts as that many) decides
    draft i exactly (_certain_rejection with EXACT) where the row was read whole and is drafted, raises
    state_b as LAZY does, and adds its bits to request b's word (state word b STATE_WORDS + 1): bit i
    (decided) and bit 16 + i (rejected). The program whose addition makes the emit position j determined
    (_emit_position; exactly one per request, the additions being atomic) writes the request's outputs
    (_tail_emit). The programs of a row that an earlier certain rejection made unused do not arrive
    (_stats_block), so the words and counters are zeroed for the next call after the pass, by the pick
    or race kernel (_reset_tail_state). Every program
    loads its request's draft ids as it arrives (x_row, what an emitter writes), beside the counter's
    round trip. One-hot drafts: `gathered` is what _draft_logits gathered as the program arrived;
    classic drafts (HAS_DRAFT_LOGITS): the last program gathers l_i(x_i), d_i(x_i) itself (x_i from
    x_row) and also combines the draft row's statistics (dmax_ptr, dsum_ptr). SEED_TAU: the emitter also
    seeds its request's race threshold (_seed_tau) before it releases the ready word."""
    live = sampled | greedy
    pos = tl.arange(0, KP).to(tl.int64)[None, :]
    x_row = tl.load(x_ptr + b[:, None] * sx_b + tl.minimum(pos, K - 1) * sx_k,
                    mask=(row_ok & live)[:, None] & (pos < n[:, None]), other=-1).to(tl.int64)  # fmt: skip
    at = rows * _STATE_WORDS  # a 128-byte line per counter
    if PICK_POLL:
        # the part statistics this program's threads stored, ordered before the arrival (one thread's
        # release): with pick_poll the pick reads row j's after the emit, not after the pass
        tl.debug_barrier()
    old = tl.atomic_add(cnt_ptr + at, chunks, mask=row_ok, sem="acq_rel")  # one per chunk covered
    if HAS_DRAFT_LOGITS:
        arrivals = NC * 2  # target and draft programs
    else:
        arrivals = NC
    last = row_ok & (old == arrivals - chunks)
    if tl.max(last.to(tl.int32), axis=0) > 0:
        flag_ptr = state_ptr + b * _STATE_WORDS
        # read beside the statistics: a row that an earlier rejection let the pass skip (even in part) has
        # no statistics to test, nor a use
        flag = tl.load(flag_ptr, mask=last & (i > 0), other=0, cache_modifier=".cg")
        stats_ok = last & live & (i <= n)
        drafted = _recheck(stats_ok, flag, (K + 1 - i).to(tl.int32)) & (i < n)
        big_m, log_s, arg = _row_statistics(rows, stats_ok, inv_t, tmax_ptr, tsum_ptr, targ_ptr, NC, True,
                                            BLOCK_ROWS, NCB)  # fmt: skip
        if HAS_DRAFT_LOGITS:
            big_md, log_sd, _ = _row_statistics(rows, drafted, inv_t, dmax_ptr, dsum_ptr, targ_ptr, NC,
                                                False, BLOCK_ROWS, NCB)  # fmt: skip
            x_i = _pick_int(x_row, pos, i)  # the draft ids this program loaded as it arrived
            gathered_late = _draft_logits(b, i, x_i, drafted, sampled, t_ptr, d_ptr, seed_ptr, offset_ptr, V,
                                          st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b, K,
                                          True)  # fmt: skip
            reject = _certain_rejection(i, drafted, sampled, inv_t, gathered_late, big_m, log_s, arg, big_md,
                                        log_sd, V, True, True)  # fmt: skip
        else:
            big_md, log_sd = big_m, log_s
            reject = _certain_rejection(i, drafted, sampled, inv_t, gathered, big_m, log_s, arg, big_m, log_s,
                                        V, False, True)  # fmt: skip
        tl.atomic_max(flag_ptr, (K + 1 - i).to(tl.int32), mask=reject, sem="relaxed")
        one = tl.full((BLOCK_ROWS,), 1, tl.int32)
        i32 = i.to(tl.int32)
        bits = (one << i32) | tl.where(reject, one << (i32 + _REJECTED_BIT), 0)
        before = tl.atomic_add(flag_ptr + 1, bits, mask=last, sem="acq_rel")
        after = before + bits
        _, was_determined = _emit_position(before, n, K)
        j, determined = _emit_position(after, n, K)
        emit = last & determined & ~was_determined
        if tl.max(emit.to(tl.int32), axis=0) > 0:
            m_j, log_s_j, arg_j, m_dj, log_sd_j = _tail_emit(
                b, i, emit, j, n, sampled, greedy, inv_t, big_m, log_s, arg, big_md, log_sd, x_row, tmax_ptr,
                tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr,
                row_f_ptr, row_i_ptr, V, NC, K, KP, BLOCK_ROWS, NCB, HAS_DRAFT_LOGITS)  # fmt: skip
            if SEED_TAU:  # before the release below: a race program reads the word after its wait
                _seed_tau(b, emit, j, n, sampled, inv_t, m_j, log_s_j, arg_j, m_dj, log_sd_j, t_ptr, d_ptr,
                          seed_ptr, offset_ptr, tau_ptr, V, st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b, K,
                          GW, FAST_LOG)  # fmt: skip
            if PICK_POLL:  # the outputs and row_f / row_i stored (any thread), then the ready word released,
                # holding 2 j + 1 (nonzero; the emit position, which the tests check)
                tl.debug_barrier()
                tl.atomic_xchg(_ready_word(state_ptr, B, b), (2 * j + 1).to(tl.int32), mask=emit,
                               sem="release")  # fmt: skip


@triton.jit
def _tail_emit(b, i, emit, j, n, sampled, greedy, inv_t, big_m, log_s, arg, big_md, log_sd, x_row, tmax_ptr,
               tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr,
               row_f_ptr, row_i_ptr, V, NC, K: tl.constexpr, KP: tl.constexpr, BLOCK_ROWS: tl.constexpr,
               NCB: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr = False):  # fmt: skip
    """TAIL: the outputs of requests b where `emit` [R], at emit position j, as _accept_block stores
    them (_store_emit; x_row [R, KP] the requests' draft ids), the pick's or the race's draw at j after
    this pass. Row j's statistics are this row's (big_m, log_s, arg; classic: its draft row's big_md,
    log_sd) where j = i, the common case (the prefix completes at its last row), else combined again
    from the chunk statistics. Returns row j's (big_m, log_s, arg, big_md, log_sd)."""
    other = emit & (j != i)
    if tl.max(other.to(tl.int32), axis=0) > 0:
        rk = (b * (K + 1) + j)[:, None]
        m_o, s_o, a_o = _combine_stats(tmax_ptr, tsum_ptr, targ_ptr, rk, other[:, None], inv_t, NC, True, NCB)
        big_m = tl.where(other, tl.reshape(m_o, (BLOCK_ROWS,)), big_m)
        log_s = tl.where(other, tl.reshape(s_o, (BLOCK_ROWS,)), log_s)
        arg = tl.where(other, tl.reshape(a_o, (BLOCK_ROWS,)), arg)
        if HAS_DRAFT_LOGITS:  # row j's draft row, where there is one (j < n)
            other_q = other & (j < n)
            m_do, s_do, _ = _combine_stats(dmax_ptr, dsum_ptr, targ_ptr, rk, other_q[:, None], inv_t, NC,
                                           False, NCB)  # fmt: skip
            big_md = tl.where(other, tl.reshape(m_do, (BLOCK_ROWS,)), big_md)
            log_sd = tl.where(other, tl.reshape(s_do, (BLOCK_ROWS,)), log_sd)
    pos = tl.arange(0, KP).to(tl.int64)[None, :]
    _store_emit(b, emit, j, n, x_row, pos, sampled, greedy, inv_t, big_m, log_s, arg, big_md, log_sd, V,
                tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, K,
                HAS_DRAFT_LOGITS)  # fmt: skip
    return big_m, log_s, arg, big_md, log_sd


@triton.jit
def _store_emit(req, ok, j, n, x, pos, sampled, greedy, inv_t, m_j, log_s_j, arg_j, m_dj, log_sd_j, V,
                tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, K: tl.constexpr,
                HAS_DRAFT_LOGITS: tl.constexpr):  # fmt: skip
    """The outputs of requests `req` [R] where `ok`, at emit position j (n: draft counts; x [R, KP]
    draft ids at positions pos [1, KP]; row j's M, log S, argmax and, classic, its draft row's M, log
    S): every output but a sampled request's token at j and its fallback / valid (the race's merge or
    the pick draws them, in a later launch, from row_f and row_i stored here). Shared by the accept
    kernel (_accept_block) and the one-hot tail (_tail_emit)."""
    rejected = j < n
    x_j = _pick_int(x, pos, j)  # the rejected draft, -1 unless rejected and in [0, V) (stored as int32)
    x_j = tl.where(rejected & (x_j >= 0) & (x_j < V), x_j, -1)
    if HAS_DRAFT_LOGITS:
        use_q = sampled & rejected
    else:
        use_q = sampled & False
    shift_p, norm_p = _row_log2_stats(m_j, log_s_j)
    shift_q, norm_q = _row_log2_stats(m_dj, log_sd_j)
    tl.store(row_f_ptr + req * 6, shift_p, mask=ok)
    tl.store(row_f_ptr + req * 6 + 1, norm_p, mask=ok)
    tl.store(row_f_ptr + req * 6 + 2, shift_q, mask=ok)
    tl.store(row_f_ptr + req * 6 + 3, norm_q, mask=ok)
    tl.store(row_f_ptr + req * 6 + 4, inv_t * _LOG2E, mask=ok)
    flags = sampled.to(tl.int32) + 2 * use_q.to(tl.int32) + 4 * rejected.to(tl.int32)
    tl.store(row_i_ptr + req * 3, j.to(tl.int32), mask=ok)
    tl.store(row_i_ptr + req * 3 + 1, x_j.to(tl.int32), mask=ok)
    tl.store(row_i_ptr + req * 3 + 2, flags, mask=ok)
    token = tl.where(greedy & (m_j > _NEG_INF), arg_j, -1)
    a = tl.where(sampled | greedy, j, 0)  # accepted drafts
    out = tl.where(pos < a[:, None], x, tl.where(pos == a[:, None], token[:, None], -1))
    tl.store(tokens_ptr + req[:, None] * (K + 1) + pos, out.to(tl.int32), mask=ok[:, None] & (pos <= K))
    tl.store(num_accepted_ptr + req, a.to(tl.int32), mask=ok)
    tl.store(fallback_ptr + req, sampled & False, mask=ok)
    tl.store(valid_ptr + req, token >= 0, mask=ok)


@triton.jit
def _store_statistic(ptr, value, mask):
    """Every statistic the pass writes (chunk and part statistics, target and draft), stored with
    the L2 evict-last policy (tests/kernels/test_logits_codegen.py keeps it). H200 run 121 (same
    session, base / evict-last, three rounds each, zero_pause µs): one-hot fp32 (64, 4, 151936)
    66.1 -> 64.0, (128, 8, 128256) 164.0 -> 159.3; one-hot bf16 44.5 -> 43.8 and 104.2 -> 102.1;
    classic within 1 µs; graph time within 0.6 µs. The gain is in this
    pass, not in its readers: run 124's stamps against run 116's (the same script, before and after)
    show the call 0.7-4.6 µs shorter while the tail after the last stats program is unchanged (the
    pick ends +10.6 / +10.7 µs after it at fp32 (64, 4, 151936); the accept's combine of these
    statistics still takes 3.3 µs there). A hypothesis, not measured: each line of statistics is
    written a word at a time by many programs across the pass, and with the normal policy, in an
    L2 full of dirty lines (do_bench's flush), partly written lines are evicted and written back
    mid-pass; one-hot programs store ten times as many words (the part statistics) and gain most."""
    tl.store(ptr, value, mask=mask, eviction_policy="evict_last")


@triton.jit
def _store_chunk_stats(max_ptr, sum_ptr, arg_ptr, out, row_ok, m, s, arg):
    _store_statistic(max_ptr + out, m, row_ok)
    _store_statistic(sum_ptr + out, s, row_ok)
    _store_statistic(arg_ptr + out, arg.to(tl.int32), row_ok)


@triton.jit
def _chunk_stats_tile(l, col0, lane, V, scale, m, s, arg, any_greedy, CLEAN: tl.constexpr):
    """One [R, BLOCK_V] tile l (as loaded; its columns col0 + lane [1, BLOCK_V]) of _chunk_stats: the
    running (max, sum, first argmax) updated; CLEAN and the argmax as _part_stats_tile's."""
    l = _clean_logits(l) if CLEAN else l.to(tl.float32)
    tile_max = tl.max(l, axis=1)
    if any_greedy:  # the argmax only serves greedy rows (a uniform branch on the GPU)
        at = tl.min(tl.where(l == tile_max[:, None], lane, _NO_COL), axis=1)
        tile_arg = tl.where(at < _NO_COL, col0 + at, V)
        arg = tl.where(tile_max > m, tile_arg, arg)  # strict: the earlier index wins ties
    new_max = tl.maximum(m, tile_max)
    shift = tl.where(new_max == _NEG_INF, 0.0, new_max)
    s = s * tl.exp2((m - shift) * scale) + tl.sum(tl.exp2((l - shift[:, None]) * scale[:, None]), axis=1)
    return new_max, s, arg


@triton.jit
def _chunk_stats(row, need, first_col, lane, chunk_start, V, s_v, scale, any_greedy, flag_ptr, flag_on,
                 flag_at, BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr,
                 PREFETCH: tl.constexpr, RECHECK: tl.constexpr = False):  # fmt: skip
    """[R] (max, sum exp((l - max) / T), first argmax) of clean logits l over one chunk of rows `row`
    [R] (pointers), tile by tile; rows not needed give (-inf, 0, 0) without a load. A chunk inside
    the row whose rows are all needed loads without masks; a block with no needed row (a bonus
    row's draft, a greedy request's draft) skips the chunk."""
    m = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    s = tl.zeros((BLOCK_ROWS,), tl.float32)
    arg = tl.zeros((BLOCK_ROWS,), tl.int64)
    needed = need.to(tl.int32)
    if (tl.min(needed, axis=0) > 0) & (chunk_start + TILES * BLOCK_V <= V):
        m, s, arg = _chunk_stats_chunk(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy,
                                       flag_ptr, flag_on, flag_at, False, BLOCK_V, TILES, PREFETCH,
                                       RECHECK)  # fmt: skip
    elif tl.max(needed, axis=0) > 0:
        m, s, arg = _chunk_stats_chunk(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy,
                                       flag_ptr, flag_on, flag_at, True, BLOCK_V, TILES, PREFETCH,
                                       RECHECK)  # fmt: skip
    return m, s, arg


@triton.jit
def _chunk_stats_chunk(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy, flag_ptr, flag_on,
                       flag_at, MASKED: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr,
                       PREFETCH: tl.constexpr, RECHECK: tl.constexpr = False):  # fmt: skip
    """_chunk_stats_loop over the chunk as loaded, then, where its sum is NaN (_any_nan), once more
    cleaned (without PREFETCH, as _part_stats_chunk's re-read)."""
    m1, s1, a1 = _chunk_stats_loop(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy, flag_ptr,
                                   flag_on, flag_at, MASKED, BLOCK_V, TILES, PREFETCH, False,
                                   RECHECK)  # fmt: skip
    if _any_nan(s1):
        m1, s1, a1 = _chunk_stats_loop(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy,
                                       flag_ptr, flag_on, flag_at, MASKED, BLOCK_V, TILES, False,
                                       True)  # fmt: skip
    return m1, s1, a1


@triton.jit
def _chunk_stats_loop(row, need, first_col, lane, V, s_v, scale, m, s, arg, any_greedy, flag_ptr, flag_on,
                      flag_at, MASKED: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr,
                      PREFETCH: tl.constexpr, CLEAN: tl.constexpr,
                      RECHECK: tl.constexpr = False):  # fmt: skip
    """_chunk_stats' loop over the chunk's TILES tiles from column first_col (lane: [1, BLOCK_V]);
    PREFETCH issues tile t + 1's load before tile t's arithmetic (two tiles in flight per warp);
    RECHECK: as _part_stats_watch's."""
    if RECHECK:
        live = need
        if PREFETCH:
            cols = first_col + lane
            l = _stats_load(row[:, None], live[:, None], cols, V, s_v, MASKED, True)
            for tile in range(1, TILES):
                l_next = _stats_load(row[:, None], live[:, None], cols + BLOCK_V, V, s_v, MASKED, True)
                flag = _flag_load(flag_ptr, flag_on)
                col0 = first_col + (tile - 1) * BLOCK_V
                m, s, arg = _chunk_stats_live_tile(l, col0, live, lane, V, scale, m, s, arg, any_greedy,
                                                   CLEAN)  # fmt: skip
                live = _recheck(live, flag, flag_at)
                l = l_next
                cols += BLOCK_V
            col0 = first_col + (TILES - 1) * BLOCK_V
            m, s, arg = _chunk_stats_live_tile(l, col0, live, lane, V, scale, m, s, arg, any_greedy, CLEAN)
        else:
            for tile in range(TILES):
                col0 = first_col + tile * BLOCK_V
                l = _stats_load(row[:, None], live[:, None], col0 + lane, V, s_v, MASKED, True)
                flag = _flag_load(flag_ptr, flag_on)
                m, s, arg = _chunk_stats_live_tile(l, col0, live, lane, V, scale, m, s, arg, any_greedy,
                                                   CLEAN)  # fmt: skip
                live = _recheck(live, flag, flag_at)
    elif PREFETCH:
        cols = first_col + lane
        l = _stats_load(row[:, None], need[:, None], cols, V, s_v, MASKED)
        for tile in range(1, TILES):
            l_next = _stats_load(row[:, None], need[:, None], cols + BLOCK_V, V, s_v, MASKED)
            col0 = first_col + (tile - 1) * BLOCK_V
            m, s, arg = _chunk_stats_tile(l, col0, lane, V, scale, m, s, arg, any_greedy, CLEAN)
            l = l_next
            cols += BLOCK_V
        col0 = first_col + (TILES - 1) * BLOCK_V
        m, s, arg = _chunk_stats_tile(l, col0, lane, V, scale, m, s, arg, any_greedy, CLEAN)
    else:
        for tile in range(TILES):
            col0 = first_col + tile * BLOCK_V
            l = _stats_load(row[:, None], need[:, None], col0 + lane, V, s_v, MASKED)
            m, s, arg = _chunk_stats_tile(l, col0, lane, V, scale, m, s, arg, any_greedy, CLEAN)
    return m, s, arg


@triton.jit
def _chunk_stats_live_tile(l, col0, live, lane, V, scale, m, s, arg, any_greedy, CLEAN: tl.constexpr):
    """_chunk_stats_tile of the tile at col0 (loaded as l), where some row is still live (RECHECK)."""
    if tl.max(live.to(tl.int32), axis=0) > 0:
        m, s, arg = _chunk_stats_tile(l, col0, lane, V, scale, m, s, arg, any_greedy, CLEAN)
    return m, s, arg


@triton.jit
def _combine_stats(max_ptr, sum_ptr, arg_ptr, rk, rk_ok, inv_t, NC, WITH_ARG: tl.constexpr,
                   NCB: tl.constexpr):  # fmt: skip
    """Per (request, position) [R, KP]: global max M, log of sum exp((l - M) / T) (-inf on empty
    rows, where M = -inf too) and the smallest argmax, from the NC chunk statistics, read NCB chunks
    at a time (one load round trip per NCB chunks, not per chunk: on the GPU NCB >= NC)."""
    big_m = tl.full(rk.shape, _NEG_INF, tl.float32)
    big_s = tl.zeros(rk.shape, tl.float32)
    arg = tl.zeros(rk.shape, tl.int64)
    scale = inv_t[:, None] * _LOG2E
    chunk = tl.arange(0, NCB)[None, None, :]
    for first in range(0, NC, NCB):
        ok = rk_ok[:, :, None] & (first + chunk < NC)
        at = rk[:, :, None] * NC + first + chunk  # [R, KP, NCB]
        m_c = tl.load(max_ptr + at, mask=ok, other=float("-inf"))
        s_c = tl.load(sum_ptr + at, mask=ok, other=0.0)
        m_slab = tl.max(m_c, axis=2)
        if WITH_ARG:  # chunks in column order: the smallest argmax among the chunks holding the max
            a_c = tl.load(arg_ptr + at, mask=ok, other=0).to(tl.int64)
            a_slab = tl.min(tl.where(m_c == m_slab[:, :, None], a_c, 9223372036854775807), axis=2)
            arg = tl.where(m_slab > big_m, a_slab, arg)  # strict: an earlier slab keeps ties
        new_m = tl.maximum(big_m, m_slab)
        shift = tl.where(new_m == _NEG_INF, 0.0, new_m)
        s_slab = tl.sum(s_c * tl.exp2((m_c - shift[:, :, None]) * scale[:, :, None]), axis=2)
        big_s = big_s * tl.exp2((big_m - shift) * scale) + s_slab
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
def _acceptance_ratio(l_x, big_m, log_s, d_x, big_md, log_sd, inv_t, HAS_DRAFT_LOGITS: tl.constexpr):
    """float64 p(x) / q(x) (one-hot drafts: p(x)) from the rows' statistics: what a draft's uniform is
    compared with, by the accept kernel (_accept_block) and the lazy pass (_certain_rejection) alike.
    Classic drafts with q(x) = 0 (d_x = -inf) are rejected by the callers, whatever this returns."""
    lp_x = _log_prob(l_x, big_m, log_s, inv_t)
    if HAS_DRAFT_LOGITS:
        lq_x = _log_prob(d_x, big_md, log_sd, inv_t)
        ratio = tl.exp(lp_x - tl.where(d_x > _NEG_INF, lq_x, 0.0))
    else:
        ratio = tl.exp(lp_x)
    return ratio.to(tl.float64)


@triton.jit
def _pick(values, pos, j):
    """values[r, j_r] of an [R, KP] block (j_r in [0, KP)); -inf / 0 safe."""
    return tl.max(tl.where(pos == j[:, None], values, _NEG_INF), axis=1)


@triton.jit
def _pick_int(values, pos, j):
    return tl.sum(tl.where(pos == j[:, None], values, 0), axis=1)


@triton.jit
def _group_load(t_row, d_row, cols, live, use_q, st_v, sd_v, HAS_DRAFT_LOGITS: tl.constexpr):
    """(target, draft) logits of the tokens cols [.., W] of row j as stored (-inf off `live`; the
    draft only where the draft row is used, use_q; one-hot drafts: the target again, unused)."""
    l = load_once(t_row + cols * st_v, live, float("-inf"))
    if HAS_DRAFT_LOGITS:
        dl = load_once(d_row + cols * sd_v, live & use_q, float("-inf"))
    else:
        dl = l
    return l, dl


@triton.jit
def _group_logs(l, dl, cols, x_j, shift_p, norm_p, shift_q, norm_q, scale2, HAS_DRAFT_LOGITS: tl.constexpr):
    """(log2 p, log2 q, res) of loaded logits (_group_load; the row statistics pre-expanded to cols'
    rank; see _log2_prob): res marks the residual's support, p > q where the draft row is used (else
    q = 0), p > 0 off the rejected draft x_j (one-hot) or p > 0 (bonus row)."""
    lp2 = _log2_prob(_clean_logits(l), shift_p, scale2, norm_p)
    if HAS_DRAFT_LOGITS:
        lq2 = _log2_prob(_clean_logits(dl), shift_q, scale2, norm_q)
        res = lp2 > lq2
    else:
        lq2 = lp2
        res = (lp2 > _NEG_INF) & (cols != x_j)
    return lp2, lq2, res


@triton.jit
def _group_tile(t_row, d_row, cols, live, use_q, x_j, shift_p, norm_p, shift_q, norm_q, scale2, st_v, sd_v,
                HAS_DRAFT_LOGITS: tl.constexpr):  # fmt: skip
    """_group_logs of _group_load: (log2 p, log2 q, res) of the tokens cols of row j."""
    l, dl = _group_load(t_row, d_row, cols, live, use_q, st_v, sd_v, HAS_DRAFT_LOGITS)
    return _group_logs(l, dl, cols, x_j, shift_p, norm_p, shift_q, norm_q, scale2, HAS_DRAFT_LOGITS)


@triton.jit
def _row_log2_stats(big_m, log_s):
    """(shift, norm2) of _log2_prob for rows with max big_m and log-sum log_s (0, 0 on empty rows)."""
    shift = tl.where(big_m == _NEG_INF, 0.0, big_m)
    return shift, tl.where(log_s == _NEG_INF, 0.0, log_s * _LOG2E)


_SCREEN_CANDIDATES: tl.constexpr = tl.constexpr(4)  # groups of row j _screen_threshold reads


@triton.jit
def _group_scores(t_row, d_row, groups, ok, use_q, j, seed, offset, shift_p, norm_p, shift_q, norm_q, scale2,
                  V, st_v, sd_v, GW: tl.constexpr, FAST_LOG: tl.constexpr):  # fmt: skip
    """Classic drafts: the race's score log R_g - log E_g [R, S] of the groups `groups` [R, S] of row j
    (_screened_race's, from the same functions and row statistics), read here; -inf where not `ok`.
    What a threshold taken from them needs: a score that some group of row j attains
    (_screen_threshold, _seed_tau)."""
    cols = groups[:, :, None] * _GROUP + tl.arange(0, GW).to(tl.int64)[None, None, :]  # [R, S, GW]
    live = ok[:, :, None] & (cols < V)
    no_x = j * 0 - 1  # (classic drafts: the residual does not depend on x_j)
    tile_r = _screen_tile(t_row, d_row, cols, live, use_q, no_x, shift_p, norm_p, shift_q, norm_q, scale2,
                          st_v, sd_v, FAST_LOG)  # fmt: skip
    return tl.where(ok, tile_r - _group_log_e(seed, offset, groups, j, FAST_LOG), _NEG_INF)


@triton.jit
def _screen_threshold(req, t_ptr, d_ptr, gmax_ptr, gsum_ptr, seed, offset, j, use_q, shift_p, norm_p, shift_q,
                      norm_q, scale2, V, NP, NGR, st_b, st_k, st_v, sd_b, sd_k, sd_v, K: tl.constexpr,
                      BLOCK_ROWS: tl.constexpr, GB: tl.constexpr, PARTS: tl.constexpr, GW: tl.constexpr,
                      FAST_LOG: tl.constexpr):  # fmt: skip
    """tau [R]: the largest residual score log R_g - log E_g among a few groups g of row j, read for
    it: in each slab of GB groups the group of largest bound log P_g - log E_g (_screened_race) in
    each of _SCREEN_CANDIDATES segments. Every race program starts its screen from tau, so that
    tiles whose bound cannot reach what these groups already score are never read (benchmark-like
    rows at (64, 4, 151936), benchmarks/diagnostics/screen_simulation.py: 1% of the tiles, against
    25% from each program's own reads alone). -inf where the row has no residual to race (use_q
    False) or these groups have none."""
    NS: tl.constexpr = _SCREEN_CANDIDATES if GB >= _SCREEN_CANDIDATES else GB
    tau = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    if tl.max(use_q.to(tl.int32), axis=0) > 0:
        row = (req * (K + 1) + j) * NP
        t_row = t_ptr + (req * st_b + j * st_k)
        d_row = d_ptr + (req * sd_b + tl.minimum(j, K - 1) * sd_k)
        for first in range(0, NGR, GB):
            groups = first + tl.arange(0, GB).to(tl.int64)[None, :] + req[:, None] * 0  # [R, GB]
            ok = use_q[:, None] & (groups < NGR)
            mass_p = _part_group_log_mass(gmax_ptr, gsum_ptr, row, groups, ok, NP, shift_p, norm_p, scale2,
                                          PARTS, FAST_LOG)  # fmt: skip
            bound = mass_p - _group_log_e(seed, offset, groups, j, FAST_LOG)
            bound = tl.reshape(bound, (BLOCK_ROWS, NS, GB // NS))
            seg = tl.reshape(groups, (BLOCK_ROWS, NS, GB // NS))
            top = tl.max(bound, axis=2)  # [R, NS]
            cand = tl.min(tl.where(bound == top[:, :, None], seg, 2147483647), axis=2)  # [R, NS]
            cand = tl.where(top > _NEG_INF, cand, 0)
            score = _group_scores(t_row, d_row, cand, use_q[:, None] & (top > _NEG_INF), use_q, j, seed,
                                  offset, shift_p, norm_p, shift_q, norm_q, scale2, V, st_v, sd_v, GW,
                                  FAST_LOG)  # fmt: skip
            tau = tl.maximum(tau, tl.max(score, axis=1))
    return tau


@triton.jit
def _accept_block(
    req_block,  # this program's requests are req_block * BLOCK_ROWS + [0, BLOCK_ROWS)
    t_ptr,  # [B, K+1, V] target logits, strides (st_b, st_k, st_v)
    d_ptr,  # [B, K, V] draft logits (HAS_DRAFT_LOGITS), strides (sd_b, sd_k, sd_v)
    x_ptr,  # [B, K] int32/int64 draft ids, strides (sx_b, sx_k)
    temp_ptr,  # [B] fp32
    n_ptr,  # [B] ragged draft counts (RAGGED)
    seed_ptr,  # [B] int64
    offset_ptr,  # [B] int64
    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr,  # [B*(K+1), NC1] phase-1 statistics
    row_f_ptr,  # [B, 6] fp32 out: shift_p, norm_p, shift_q, norm_q, scale2 of row j (_log2_prob), tau
    row_i_ptr,  # [B, 3] int32 out: j, x_j (-1 unless rejected), flags (1 sampled, 2 use_q, 4 rejected)
    tokens_ptr,  # [B, K+1] int32 out, contiguous (sampled rows: -1 at j until the race writes it)
    num_accepted_ptr,  # [B] int32 out
    fallback_ptr,  # [B] bool out (sampled rows: written again by the race or the pick)
    valid_ptr,  # [B] bool out (sampled rows: written again by the race or the pick)
    gmax_ptr,  # [B*(K+1), NP] fp32 part references of _stats_block (SCREEN)
    gsum_ptr,  # [B*(K+1), NP] fp32 part sums (SCREEN)
    state_ptr,  # [B * STATE_WORDS] int32 (LAZY): the stats pass's decisions (_stats_block), reset here for
    # the next call
    B, V, NC1, NP,
    NGR,  # groups of the residual draw per row
    st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
    K: tl.constexpr,
    KP: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    NCB: tl.constexpr,
    PDL: tl.constexpr = False,
    SCREEN: tl.constexpr = False,
    GB: tl.constexpr = 1,
    PARTS: tl.constexpr = 1,
    GW: tl.constexpr = 256,
    FAST_LOG: tl.constexpr = False,
    LAZY: tl.constexpr = False,
):  # fmt: skip
    # log p_i(v) = (l_iv - M_i) / T - log S_i   (log q_i likewise from the draft statistics)
    # accept x_i (i < n, 0 <= x_i < V):  classic  d_i(x_i) finite and m_i < p_i(x_i) / q_i(x_i)
    #                                     one-hot  m_i < p_i(x_i);   greedy  x_i == argmax_v l_iv
    # (m_i = u_i + 2^-25, the midpoint of the uniform's 2^-24 cell); j = first rejection (or n).
    req = req_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    req_ok = req < B
    sampled, greedy, inv_t, n = _row_params(req, req_ok, temp_ptr, s_temp, n_ptr, sn_b, K, RAGGED)
    seed = tl.load(seed_ptr + req * ss_b, mask=req_ok, other=0).to(tl.int64)
    offset = tl.load(offset_ptr + req * so_b, mask=req_ok, other=0).to(tl.int64)

    pos = tl.arange(0, KP).to(tl.int64)[None, :]
    rk = req[:, None] * (K + 1) + pos
    rk_ok = (req_ok & (sampled | greedy))[:, None] & (pos <= n[:, None])
    drafted = rk_ok & (pos < n[:, None])
    x = tl.load(x_ptr + req[:, None] * sx_b + tl.minimum(pos, K - 1) * sx_k, mask=drafted, other=-1)
    x = x.to(tl.int64)
    ok = drafted & (x >= 0) & (x < V)
    gather = ok & sampled[:, None]
    l_x = _clean_logits(tl.load(t_ptr + req[:, None] * st_b + pos * st_k + x * st_v, mask=gather,
                                other=float("-inf")))  # fmt: skip
    if HAS_DRAFT_LOGITS:
        d_x = _clean_logits(tl.load(d_ptr + req[:, None] * sd_b + tl.minimum(pos, K - 1) * sd_k + x * sd_v,
                                    mask=gather, other=float("-inf")))  # fmt: skip
    zero = rk * 0
    w0, _, _, _ = philox_words(seed[:, None] + zero, offset[:, None] + zero, pos + zero,
                               STREAM_LOGITS_UNIFORM, zero)  # fmt: skip
    u = uniform_from_word(w0).to(tl.float64) + UNIFORM_HALF_STEP  # u + 2^-25: its cell's midpoint
    if PDL:  # everything above reads the call's inputs only; the statistics are the stats kernel's
        gdc_wait()
    if LAZY:  # the stats pass has ended: its flags are spent (rows after j, which it may have skipped,
        # are read below but never used: j is the first rejection, and every row up to it was read)
        tl.store(state_ptr + req * _STATE_WORDS, 0, mask=req_ok)
    big_m, log_s, arg = _combine_stats(tmax_ptr, tsum_ptr, targ_ptr, rk, rk_ok, inv_t, NC1, True, NCB)
    if HAS_DRAFT_LOGITS:
        big_md, log_sd, unused_arg = _combine_stats(dmax_ptr, dsum_ptr, targ_ptr, rk, drafted, inv_t, NC1,
                                                    False, NCB)  # fmt: skip
        ratio = _acceptance_ratio(l_x, big_m, log_s, d_x, big_md, log_sd, inv_t[:, None], True)
        accept_sampled = (d_x > _NEG_INF) & (u < ratio)
    else:
        accept_sampled = u < _acceptance_ratio(l_x, big_m, log_s, l_x, big_m, log_s, inv_t[:, None], False)
    accept_greedy = (x == arg) & (big_m > _NEG_INF)
    accept = ok & tl.where(sampled[:, None], accept_sampled, accept_greedy)
    j = tl.min(tl.where(drafted & ~accept, pos, K + 1), axis=1)
    j = tl.minimum(j, n)  # a = j accepted drafts; j is the emit position
    m_j = _pick(big_m, pos, j)
    log_s_j = _pick(log_s, pos, j)
    if HAS_DRAFT_LOGITS:
        m_dj = _pick(big_md, pos, j)
        log_sd_j = _pick(log_sd, pos, j)
    else:  # unused stand-ins (one-hot drafts read no draft row)
        m_dj = m_j
        log_sd_j = log_s_j
    _store_emit(req, req_ok, j, n, x, pos, sampled, greedy, inv_t, m_j, log_s_j, _pick_int(arg, pos, j), m_dj,
                log_sd_j, V, tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, K,
                HAS_DRAFT_LOGITS)  # fmt: skip
    if SCREEN:  # the race's screening threshold: a score some group of row j attains (or -inf)
        # row j's values read back from what this program stored above (a CTA barrier makes the stores
        # visible): values reduced over [R, KP] lend their layout to the [R, GB] slabs, and Triton 3.6
        # then computed every group in every thread (68k PTX lines against 3.4k, offline)
        tl.debug_barrier()
        seed_j, offset_j, j_, _, _, use_q_j, _, shift_pj, norm_pj, shift_qj, norm_qj, scale2_j = _emit_row(
            req, req_ok, seed_ptr, offset_ptr, row_f_ptr, row_i_ptr, ss_b, so_b)  # fmt: skip
        tau = _screen_threshold(req, t_ptr, d_ptr, gmax_ptr, gsum_ptr, seed_j, offset_j, j_, use_q_j,
                                shift_pj, norm_pj, shift_qj, norm_qj, scale2_j, V, NP, NGR, st_b, st_k, st_v,
                                sd_b, sd_k, sd_v, K, BLOCK_ROWS, GB, PARTS, GW, FAST_LOG)  # fmt: skip
    else:
        tau = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    tl.store(row_f_ptr + req * 6 + 5, tau, mask=req_ok)


@triton.jit
def _keep_best(best, group, score, at):
    """The running winner (best score, its group) after candidates (score, at) of later groups: a
    strictly larger score wins, so ties keep the smaller group."""
    return tl.maximum(best, score), tl.where(score > best, at, group)


@triton.jit
def _emit_token(req, req_ok, sampled, rejected, use_q, j, x_j, seed, offset, best_r, group_r, best_p, group_p,
                t_row, d_row, shift_p, norm_p, shift_q, norm_q, scale2, tokens_ptr, fallback_ptr, valid_ptr,
                V, st_v, sd_v, K: tl.constexpr, HAS_DRAFT_LOGITS: tl.constexpr,
                GW: tl.constexpr):  # fmt: skip
    """The sampled rows' outputs from the race's winners [R]: the residual's best (score, group), or
    p's (the fallback) where the residual has no mass; the token by inverse CDF (float64) of the
    winning group's weights (a re-read of its GW >= min(256, V) tokens) with that group's u_g."""
    has_r = best_r > _NEG_INF
    found = sampled & (has_r | (best_p > _NEG_INF))
    fallback = sampled & rejected & ~has_r
    # the token: inverse CDF (float64) of the winning group's weights with that group's u_g
    group = tl.where(has_r, group_r, group_p)
    group = tl.where(found, group, 0)
    words_g = philox_words(seed, offset, group, STREAM_LOGITS_GROUP, j)
    u_g = uniform52_from_words(words_g[1], words_g[2])
    lane_g = tl.arange(0, GW).to(tl.int64)[None, :]
    cols_g = group[:, None] * _GROUP + lane_g  # [R, GW]
    live_g = found[:, None] & (cols_g < V)
    q_g = (use_q & has_r)[:, None]
    lp_g, lq_g, res_g = _group_tile(t_row[:, None], d_row[:, None], cols_g, live_g, q_g, x_j[:, None],
                                    shift_p[:, None], norm_p[:, None], shift_q[:, None], norm_q[:, None],
                                    scale2[:, None], st_v, sd_v, HAS_DRAFT_LOGITS)  # fmt: skip
    if HAS_DRAFT_LOGITS:  # without the draft row (fallback, bonus) lq_g = -inf: res_g = p > 0
        on_g = res_g
    else:
        on_g = tl.where(has_r[:, None], res_g, lp_g > _NEG_INF)
    shift_g = _group_shift(lp_g, on_g, 1)[:, None]
    w_g = _group_weights(lp_g, lq_g, on_g, shift_g, HAS_DRAFT_LOGITS, True).to(tl.float64)
    token_sampled = tl.where(found, group * _GROUP + _cdf_pick(w_g, on_g, u_g, GW), -1)
    tok_ok = req_ok & sampled
    tl.store(tokens_ptr + req * (K + 1) + j, token_sampled.to(tl.int32), mask=tok_ok)
    tl.store(fallback_ptr + req, fallback, mask=tok_ok)
    tl.store(valid_ptr + req, token_sampled >= 0, mask=tok_ok)


@triton.jit
def _emit_row(req, req_ok, seed_ptr, offset_ptr, row_f_ptr, row_i_ptr, ss_b, so_b):
    """What _accept_block left for the residual draw of requests req [R]: (seed, offset, j, x_j,
    sampled, use_q, rejected, shift_p, norm_p, shift_q, norm_q, scale2)."""
    seed = tl.load(seed_ptr + req * ss_b, mask=req_ok, other=0).to(tl.int64)
    offset = tl.load(offset_ptr + req * so_b, mask=req_ok, other=0).to(tl.int64)
    j = tl.load(row_i_ptr + req * 3, mask=req_ok, other=0).to(tl.int64)
    x_j = tl.load(row_i_ptr + req * 3 + 1, mask=req_ok, other=-1).to(tl.int64)
    flags = tl.load(row_i_ptr + req * 3 + 2, mask=req_ok, other=0)
    shift_p = tl.load(row_f_ptr + req * 6, mask=req_ok, other=0.0)
    norm_p = tl.load(row_f_ptr + req * 6 + 1, mask=req_ok, other=0.0)
    shift_q = tl.load(row_f_ptr + req * 6 + 2, mask=req_ok, other=0.0)
    norm_q = tl.load(row_f_ptr + req * 6 + 3, mask=req_ok, other=0.0)
    scale2 = tl.load(row_f_ptr + req * 6 + 4, mask=req_ok, other=1.0)
    sampled = (flags & 1) != 0
    use_q = (flags & 2) != 0
    rejected = (flags & 4) != 0
    return seed, offset, j, x_j, sampled, use_q, rejected, shift_p, norm_p, shift_q, norm_q, scale2


@triton.jit
def _part_group_log_mass(gmax_ptr, gsum_ptr, row, groups, ok, NP, shift_p, norm_p, scale2,
                         PARTS: tl.constexpr, FAST_LOG: tl.constexpr):  # fmt: skip
    """log P_g [R, S] of the groups `groups` [R, S] of the rows at offsets `row` [R] (row * NP) of the
    part statistics gmax / gsum (_stats_block: part k has a reference m_k >= its max and
    s_k = sum exp((l - m_k) / T); PARTS parts per group), where `ok` [R, S] (-inf elsewhere):
      log P_g = (m_g - M) / T - log S + log sum_k s_k exp((m_k - m_g) / T),   m_g = max_k m_k
    (shift_p = M, norm_p = log2 S, scale2 = log2(e) / T, all [R]). -inf for a group without mass."""
    part = groups[:, :, None] * PARTS + tl.arange(0, PARTS)[None, None, :]  # [R, S, PARTS]
    part_ok = ok[:, :, None] & (part < NP)
    m_k = tl.load(gmax_ptr + row[:, None, None] + part, mask=part_ok, other=float("-inf"))
    s_k = tl.load(gsum_ptr + row[:, None, None] + part, mask=part_ok, other=0.0)
    m_g = tl.max(m_k, axis=2)  # [R, S]
    top = tl.where(m_g == _NEG_INF, 0.0, m_g)
    if PARTS == 1:
        s_g = tl.sum(s_k, axis=2)
    else:
        s_g = tl.sum(s_k * tl.exp2((m_k - top[:, :, None]) * scale2[:, None, None]), axis=2)
    shift2 = (top - shift_p[:, None]) * scale2[:, None] - norm_p[:, None]  # log2 p at the group max
    log_s = _ln(tl.where(s_g > 0.0, s_g, 1.0), FAST_LOG)
    return tl.where(s_g > 0.0, shift2 * _LN2 + log_s, _NEG_INF)


@triton.jit
def _pick_in_groups(req, req_ok, t_ptr, seed, offset, j, x_j, sampled, rejected, shift_p, norm_p, scale2,
                    gmax_ptr, gsum_ptr, tokens_ptr, fallback_ptr, valid_ptr, V, NP, NG, st_b, st_k, st_v,
                    K: tl.constexpr, BLOCK_ROWS: tl.constexpr, GB: tl.constexpr, PARTS: tl.constexpr,
                    GW: tl.constexpr, FAST_LOG: tl.constexpr):  # fmt: skip
    # One-hot drafts: the residual draw of _race_block without a second pass over row j (requests
    # req [R], with _accept_block's j, x_j, flags and row statistics). r = p off the rejected draft
    # x_j (p on a bonus row), so every group's mass is p's, from the statistics of its PARTS parts
    # of row j in gmax / gsum [B*(K+1), NP] (part k: reference m_k, s_k = sum exp((l - m_k) / T)):
    #   log P_g = (m_g - M) / T - log S + log sum_k s_k exp((m_k - m_g) / T),   m_g = max_k m_k
    # and only x_j's group is read again (its mass off x_j). The race over the NG groups of row j,
    # GB groups at a time, and the token draw are _race_block's: g* = argmax_g log R_g - log E_g,
    # then _emit_token.
    use_q = sampled & False  # one-hot drafts read no draft row
    if tl.max(sampled.to(tl.int32), axis=0) > 0:  # greedy-only blocks: _accept_block wrote everything
        t_row = t_ptr + (req * st_b + j * st_k)  # [R] row j of each request
        # x_j's group without x_j (x_j = -1 unless a rejected id in [0, V))
        x_group = tl.where(x_j >= 0, x_j // _GROUP, -1)
        cols_x = tl.maximum(x_group, 0)[:, None] * _GROUP + tl.arange(0, GW).to(tl.int64)[None, :]  # [R, GW]
        live_x = (sampled & (x_group >= 0))[:, None] & (cols_x < V)
        lp_xg, lq_xg, res_xg = _group_tile(t_row[:, None], t_row[:, None], cols_x, live_x, use_q[:, None],
                                           x_j[:, None], shift_p[:, None], norm_p[:, None], shift_p[:, None],
                                           norm_p[:, None], scale2[:, None], st_v, st_v, False)  # fmt: skip
        mass_x = _group_log_mass(lp_xg, lq_xg, res_xg, False, True, FAST_LOG, 1)  # [R]
        best_r = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        best_p = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        group_r = tl.full((BLOCK_ROWS,), -1, tl.int64)
        group_p = tl.full((BLOCK_ROWS,), -1, tl.int64)
        row = (req * (K + 1) + j) * NP
        for first in range(0, NG, GB):
            groups = first + tl.arange(0, GB).to(tl.int64)[None, :] + req[:, None] * 0  # [R, GB]
            mass_p = _part_group_log_mass(gmax_ptr, gsum_ptr, row, groups, sampled[:, None], NP, shift_p,
                                          norm_p, scale2, PARTS, FAST_LOG)  # fmt: skip
            mass_r = tl.where(groups == x_group[:, None], mass_x[:, None], mass_p)
            log_e = _group_log_e(seed, offset, groups, j, FAST_LOG)
            s_r, i_r = _best_slot(mass_r - log_e, groups)
            s_p, i_p = _best_slot(mass_p - log_e, groups)
            best_r, group_r = _keep_best(best_r, group_r, s_r, i_r)  # slabs in group order
            best_p, group_p = _keep_best(best_p, group_p, s_p, i_p)
        _emit_token(req, req_ok, sampled, rejected, use_q, j, x_j, seed, offset, best_r, group_r, best_p,
                    group_p, t_row, t_row, shift_p, norm_p, shift_p, norm_p, scale2, tokens_ptr, fallback_ptr,
                    valid_ptr, V, st_v, st_v, K, False, GW)  # fmt: skip


@triton.jit
def _race_over_p(t_row, lost, x_j, shift_p, norm_p, scale2, seed, offset, j, V, st_v,
                 BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, GW: tl.constexpr,
                 FAST_LOG: tl.constexpr):  # fmt: skip
    """(best score, its group) [R] of the race over p on the whole of row j, for the rows `lost`
    (-inf and -1 elsewhere): the fallback's race of _race_block, tile by tile in group order with
    the same tiles, masses and noise, so it picks the group the race programs would have."""
    NG: tl.constexpr = BLOCK_V // GW
    in_group = (tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]).to(tl.int64)  # [NG, GW]
    best = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    group = tl.full((BLOCK_ROWS,), -1, tl.int64)
    for first in range(0, V, BLOCK_V):
        cols = (first + in_group)[None, :, :]  # [1, NG, GW]
        live = lost[:, None, None] & (cols < V)
        lp, lq, res = _group_tile(t_row[:, None, None], t_row[:, None, None], cols, live,
                                  lost[:, None, None] & False, x_j[:, None, None], shift_p[:, None, None],
                                  norm_p[:, None, None], shift_p[:, None, None], norm_p[:, None, None],
                                  scale2[:, None, None], st_v, st_v, False)  # fmt: skip
        tile_p = _group_log_mass(lp, lq, res, False, False, FAST_LOG, 2)  # [R, NG]
        zs = first // _GROUP + tl.arange(0, NG).to(tl.int64)[None, :] + seed[:, None] * 0  # [R, NG]
        s_p, i_p = _best_slot(tile_p - _group_log_e(seed, offset, zs, j, FAST_LOG), zs)
        best, group = _keep_best(best, group, s_p, i_p)  # tiles in group order
    return best, group


@triton.jit
def _merge_chunks(best_ptr, best_idx_ptr, req, req_ok, NC2, slot, NCB2: tl.constexpr):
    """(best score, its smallest group) [R] over the NC2 race chunks' candidates in `slot` (0: the
    residual's, 1: p's) of requests req, NCB2 chunks per load round trip. The candidates were stored
    chunk by chunk in group order, so the smallest group among equal scores is the one a sequential
    strictly-larger-wins scan keeps. The chunk-by-chunk scan this replaces put NC2 dependent L2 round
    trips (38 at (64, 4, 151936)) on every request's tail; H200 run 74 (same session, graph, twice
    each): 1.03x / 1.01x at classic bf16 / fp32 (64, 4, 151936), 1.00-1.005x at (128, 8, 128256)."""
    best = tl.full(req.shape, _NEG_INF, tl.float32)
    group = tl.full(req.shape, -1, tl.int64)
    c = tl.arange(0, NCB2)[None, :]
    for first in range(0, NC2, NCB2):
        ok = req_ok[:, None] & (first + c < NC2)
        at = (req[:, None] * NC2 + first + c) * 2 + slot
        score = tl.load(best_ptr + at, mask=ok, other=float("-inf"), cache_modifier=".cg")
        at_group = tl.load(best_idx_ptr + at, mask=ok, other=-1, cache_modifier=".cg").to(tl.int64)
        top, top_group = _best_slot(score, at_group)
        best, group = _keep_best(best, group, top, top_group)  # slabs in group order
    return best, group


# The screened race (_screened_race). A part statistic is a float32 sum of exp2 terms, which flush
# to zero below 2^-126 (2^-149 where not flushed) relative to the part's reference m_k <= the row's
# max, so a group's computed P_g may miss up to 256 * 2^-126 = 2^-118 of mass. Where the computed
# log P_g is above ln(2^-118) + 8, that is below e^-8 = 3.4e-4 of it; elsewhere P_g <= 2 e^(ln 2^-118 + 8).
_FLUSH_LOG_P: tl.constexpr = tl.constexpr(-118 * 0.6931471805599453 + 8.0)
_FLUSH_BOUND: tl.constexpr = tl.constexpr(-118 * 0.6931471805599453 + 8.0 + 0.6931471805599453)
# Added to every bound: the 3.4e-4 above plus float32 rounding and the approximate exp2 / log2 of both
# computations (~1e-5 in ln units for log masses in [-80, 0]): a factor 1.001 on the mass.
_SCREEN_SLACK: tl.constexpr = tl.constexpr(2.0**-10)
# race_tau "shared": the screen's threshold is a word per request (on a 128-byte line of its own) holding
# the largest residual score its race programs have read so far, kept by atomic max. A float32 score maps
# to an int64 key that orders as the score does and is > 0, so that 0 says "nothing read yet": the zeroed
# buffer's state, and the one the request's last race program leaves for the next call.
TAU_WORDS = 16  # int64 words per request: 128 bytes
_TAU_WORDS: tl.constexpr = tl.constexpr(TAU_WORDS)
_TAU_KEY_BIAS: tl.constexpr = tl.constexpr(2**31 + 1)


@triton.jit
def _tau_key(score):
    """The int64 key > 0 of float32 scores [R] (-inf included): key(a) < key(b) iff a < b, or a is -0.0
    and b is +0.0."""
    bits = score.to(tl.int32, bitcast=True)
    ordered = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF)  # negative floats: magnitude bits reversed
    return ordered.to(tl.int64) + _TAU_KEY_BIAS


@triton.jit
def _tau_score(key):
    """The score [R] of keys made by _tau_key; -inf for key 0 (nothing published)."""
    ordered = (key - _TAU_KEY_BIAS).to(tl.int32)
    bits = tl.where(ordered >= 0, ordered, ordered ^ 0x7FFFFFFF)
    return tl.where(key > 0, bits.to(tl.float32, bitcast=True), _NEG_INF)


@triton.jit
def _share_tau(tau_word, best, tau, publish):
    """SHARED_TAU: publish this program's best score read `best` [R] where `publish` (one atomic max on
    each request's word) and return tau raised to what the request's other race programs had published
    before it: a score some group of row j attains, as _screen_threshold's is."""
    old = tl.atomic_max(tau_word, _tau_key(best), mask=publish, sem="relaxed")
    return tl.maximum(tau, tl.where(publish, _tau_score(old), _NEG_INF))


@triton.jit
def _share_tau_lazy(tau_word, best, tau, publish, need):
    """_share_tau for race_tau_lazy: publish `best` where `publish` by an atomic max whose result is not
    used (a reduction: the program does not wait for it), and read the request's word only where `need`
    [R] says a later tile could still pass (one load, a uniform branch). The word only ever holds scores
    some group of row j attains (or nothing), whenever it is read, so tau stays one."""
    key = _tau_key(best)
    tl.atomic_max(tau_word, key, mask=publish, sem="relaxed")  # no use of its result: a reduction
    if tl.max(need.to(tl.int32), axis=0) > 0:
        seen = tl.load(tau_word, mask=need, other=0, volatile=True)
        tau = tl.maximum(tau, tl.where(need, _tau_score(seen), _NEG_INF))
    return tau


@triton.jit
def _seed_tau(b, emit, j, n, sampled, inv_t, big_m, log_s, arg, big_md, log_sd, t_ptr, d_ptr, seed_ptr,
              offset_ptr, tau_ptr, V, st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b, K: tl.constexpr,
              GW: tl.constexpr, FAST_LOG: tl.constexpr):  # fmt: skip
    """SEED_TAU (race_tau "seeded", the classic tail's emitter, before it releases the ready word): the
    score log R_g - log E_g of the group g holding row j's target argmax `arg`, read here (one group of
    the target and draft rows), published into request b's word, so that every race program screens with
    it from its first tile on. The race computes the same score of g from the same row statistics
    (row_f: _store_emit's shift and norm of big_m, log_s, big_md, log_sd) with the same functions
    (_group_scores), so the seed is a score some group of row j attains, as _share_tau's
    are (a summation order apart, ~1e-7, inside _SCREEN_SLACK). Nothing is published where the row has no
    residual to race (not sampled, j = n) or g has no residual mass."""
    use_q = emit & sampled & (j < n)
    if tl.max(use_q.to(tl.int32), axis=0) > 0:
        shift_p, norm_p = _row_log2_stats(big_m, log_s)
        shift_q, norm_q = _row_log2_stats(big_md, log_sd)
        scale2 = inv_t * _LOG2E
        t_row = t_ptr + (b * st_b + j * st_k)
        d_row = d_ptr + (b * sd_b + tl.minimum(j, K - 1) * sd_k)
        ok = use_q & (arg >= 0)
        group = tl.where(ok, arg // _GROUP, 0)[:, None]  # [R, 1]
        seed = tl.load(seed_ptr + b * ss_b, mask=use_q, other=0).to(tl.int64)
        offset = tl.load(offset_ptr + b * so_b, mask=use_q, other=0).to(tl.int64)
        score = tl.max(_group_scores(t_row, d_row, group, ok[:, None], use_q, j, seed, offset, shift_p,
                                     norm_p, shift_q, norm_q, scale2, V, st_v, sd_v, GW, FAST_LOG),
                       axis=1)  # fmt: skip
        tl.atomic_max(tau_ptr + b * _TAU_WORDS, _tau_key(score), mask=use_q & (score > _NEG_INF),
                      sem="relaxed")  # fmt: skip


@triton.jit
def _screen_tile(t_row, d_row, cols, live, use_q, x_j, shift_p, norm_p, shift_q, norm_q, scale2, st_v, sd_v,
                 FAST_LOG: tl.constexpr):  # fmt: skip
    """log R_g [R, S] of the residual on the groups cols [R or 1, S, GW] of row j (the tokens `live`
    only, the others -inf without a load); the row values are [R]."""
    lp, lq, res = _group_tile(t_row[:, None, None], d_row[:, None, None], cols, live, use_q[:, None, None],
                              x_j[:, None, None], shift_p[:, None, None], norm_p[:, None, None],
                              shift_q[:, None, None], norm_q[:, None, None], scale2[:, None, None], st_v,
                              sd_v, True)  # fmt: skip
    return _group_log_mass(lp, lq, res, True, True, FAST_LOG, 2)


@triton.jit
def _screened_race(req, req_ok, chunk, t_row, d_row, gmax_ptr, gsum_ptr, seed, offset, j, x_j, sampled, use_q,
                   tau, tau_word, shift_p, norm_p, shift_q, norm_q, scale2, V, NP, st_v, sd_v,
                   K: tl.constexpr, BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, TILES: tl.constexpr,
                   GW: tl.constexpr, TILES_P2: tl.constexpr, PARTS: tl.constexpr, FAST_LOG: tl.constexpr,
                   SHARED_TAU: tl.constexpr = False, TAU_LAZY: tl.constexpr = False,
                   NOISE_ONCE: tl.constexpr = False):  # fmt: skip
    # Classic drafts, the race of one chunk of row j without reading what cannot win. Since
    # r = max(0, p - q) <= p, every group's score obeys
    #   log R_g - log E_g <= log P_g - log E_g =: bound_g,
    # and log P_g comes from the part statistics of row j (_part_group_log_mass), which the stats
    # pass stored, so the bound costs no read of the row. The program reads its tile of largest
    # bound first, then only tiles holding a group whose bound (+ slack) reaches the best score read
    # so far or tau, a score that a group of row j attains (_screen_threshold, computed by the
    # accept kernel; that group's own tile is read, its bound being above its score). SHARED_TAU
    # (race_tau "shared"): tau is instead what the request's race programs have read, each
    # publishing its lead tile's best into the request's word and taking the word's earlier value
    # (_share_tau). A skipped
    # group's score is below one of those, so the winner and every output are the unscreened race's.
    # p's race (the fallback) and a bonus row's race (r = p) take log P_g itself. TAU_LAZY
    # (race_tau_lazy): the lead tile's best is published without waiting (_share_tau_lazy) and the word
    # read only where a later tile's bound reaches max(best, tau). NOISE_ONCE (race_noise_once): a read
    # tile's log E_g are taken from the bounds' (the same Philox words), not drawn again.
    # Returns the chunk's (best residual score, its group, best score over p, its group) [R], ties
    # to the smallest group as _best_slot.
    NG: tl.constexpr = BLOCK_V // GW
    S: tl.constexpr = TILES_P2 * NG
    slot = tl.arange(0, S)
    groups = chunk * (TILES * NG) + slot.to(tl.int64)[None, :] + req[:, None] * 0  # [R, S]
    exists = sampled[:, None] & ((slot // NG) < TILES)[None, :] & (groups * _GROUP < V)
    row = (req * (K + 1) + j) * NP
    mass_p = _part_group_log_mass(gmax_ptr, gsum_ptr, row, groups, exists, NP, shift_p, norm_p, scale2, PARTS,
                                  FAST_LOG)  # fmt: skip
    log_e = _group_log_e(seed, offset, groups, j, FAST_LOG)
    best_p, group_p = _best_slot(mass_p - log_e, groups)
    bound = tl.where(mass_p > _FLUSH_LOG_P, mass_p, _FLUSH_BOUND) - log_e + _SCREEN_SLACK
    bound = tl.where(exists & use_q[:, None], bound, _NEG_INF)
    tile_bound = tl.max(tl.reshape(bound, (BLOCK_ROWS, TILES_P2, NG)), axis=2)  # [R, TILES_P2]
    tile_ids = tl.arange(0, TILES_P2)[None, :]
    in_group = tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]  # [NG, GW]
    best = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
    group = tl.full((BLOCK_ROWS,), -1, tl.int64)
    lead = tl.argmax(tl.max(tile_bound, axis=0), axis=0)  # the block's tile of largest bound
    for step in range(TILES + 1):  # step 0 reads the lead tile, step s > 0 tile s - 1 (not the lead)
        t = tl.where(step == 0, lead, step - 1)
        tb = tl.max(tl.where(tile_ids == t, tile_bound, _NEG_INF), axis=1)  # [R]
        want = (tb > _NEG_INF) & (tb >= tl.maximum(best, tau)) & ((step == 0) | (t != lead))
        if tl.max(want.to(tl.int32), axis=0) > 0:  # uniform on the GPU (one row per program)
            cols = ((chunk * TILES + t) * BLOCK_V + in_group.to(tl.int64))[None, :, :]  # [1, NG, GW]
            live = want[:, None, None] & (cols < V)
            tile_r = _screen_tile(t_row, d_row, cols, live, use_q, x_j, shift_p, norm_p, shift_q, norm_q,
                                  scale2, st_v, sd_v, FAST_LOG)  # fmt: skip
            tile_g = (chunk * TILES + t) * NG + tl.arange(0, NG).to(tl.int64)[None, :] + req[:, None] * 0
            if NOISE_ONCE:  # slot [t, k] of the bounds' noise (finite: E > 0)
                log_e_tiles = tl.reshape(log_e, (BLOCK_ROWS, TILES_P2, NG))
                log_e_t = tl.max(tl.where(tile_ids[:, :, None] == t, log_e_tiles, _NEG_INF), axis=1)
            else:
                log_e_t = _group_log_e(seed, offset, tile_g, j, FAST_LOG)
            score = tl.where(want[:, None], tile_r - log_e_t, _NEG_INF)
            top, at = _best_slot(score, tile_g)
            # tiles are read out of group order: among equal scores the smaller group wins
            wins = (top > best) | ((top == best) & (top > _NEG_INF) & (at < group))
            best = tl.where(wins, top, best)
            group = tl.where(wins, at, group)
        if SHARED_TAU:
            if step == 0:
                if TAU_LAZY:  # the word matters only where a later tile's bound reaches max(best, tau)
                    later = tl.max(tl.where(tile_ids != lead, tile_bound, _NEG_INF), axis=1)  # [R]
                    need = (later > _NEG_INF) & (later >= tl.maximum(best, tau))
                    tau = _share_tau_lazy(tau_word, best, tau, best > _NEG_INF, need)
                else:
                    tau = _share_tau(tau_word, best, tau, best > _NEG_INF)
    best_r = tl.where(use_q, best, best_p)
    group_r = tl.where(use_q, group, group_p)
    return best_r, group_r, best_p, group_p


@triton.jit
def _race_block(
    req_block,  # this program's requests are req_block * BLOCK_ROWS + [0, BLOCK_ROWS)
    chunk,  # and its vocabulary chunk of the emit row
    t_ptr,  # [B, K+1, V] target logits, strides (st_b, st_k, st_v)
    d_ptr,  # [B, K, V] draft logits, strides (sd_b, sd_k, sd_v)
    seed_ptr,  # [B] int64
    offset_ptr,  # [B] int64
    row_f_ptr,  # [B, 6] fp32 from _accept_block
    row_i_ptr,  # [B, 3] int32 from _accept_block
    best_ptr,  # [B, NC2, 2] fp32 scratch: chunk winner scores (residual race, race over p)
    best_idx_ptr,  # [B, NC2, 2] int32 scratch: chunk winner groups
    arrivals_ptr,  # [>= cdiv(B, BLOCK_ROWS)] int32, zero on entry, zero again on exit (_arrivals.py)
    tau_ptr,  # [B * TAU_WORDS] int64 (SHARED_TAU): each request's shared threshold, zero on entry and exit
    ready_word,  # [R] pointers (POLL): each request's ready word (_ready_word), zeroed by its last program
    tokens_ptr,  # [B, K+1] int32 out, contiguous: the sampled rows' emitted token at j
    fallback_ptr,  # [B] bool out (sampled rows)
    valid_ptr,  # [B] bool out (sampled rows)
    gmax_ptr,  # [B*(K+1), NP] fp32 part references of _stats_block (SCREEN)
    gsum_ptr,  # [B*(K+1), NP] fp32 part sums (SCREEN)
    B, V, NC2, NP,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b,
    K: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    GW: tl.constexpr,
    TILES_P2: tl.constexpr,
    FAST_LOG: tl.constexpr = False,
    P_IN_MERGE: tl.constexpr = False,
    NCB2: tl.constexpr = 1,
    SCREEN: tl.constexpr = False,
    PARTS: tl.constexpr = 1,
    SHARED_TAU: tl.constexpr = False,
    POLL: tl.constexpr = False,
    SEEDED: tl.constexpr = False,  # SHARED_TAU: the words hold the emitters' seeds (_seed_tau) on entry
    TAU_LAZY: tl.constexpr = False,  # SHARED_TAU: _screened_race's
    NOISE_ONCE: tl.constexpr = False,  # SCREEN: _screened_race's
):  # fmt: skip
    # Classic drafts (one-hot drafts take _pick_in_groups): r_v = p_v - q_v where p_v > q_v,
    # p_v on the bonus row j = n; no residual mass: r = p (fallback).  Groups g of 256 tokens:
    #   log R_g = c_g + log sum_{v in g} r_v e^-c_g   (c_g = the group's largest log p_v with r_v > 0)
    #   g* = argmax_g log R_g - log E_g;  token = first v in g* with C_v > u_g* C_last (float64 C)
    # (E_g, u_g) from words 0 and 1-2 of philox(seed, offset, g, STREAM_LOGITS_GROUP, position j).
    req = req_block.to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    chunk = chunk.to(tl.int64)
    req_ok = req < B
    seed, offset, j, x_j, sampled, use_q, rejected, shift_p, norm_p, shift_q, norm_q, scale2 = _emit_row(
        req, req_ok, seed_ptr, offset_ptr, row_f_ptr, row_i_ptr, ss_b, so_b)  # fmt: skip

    # -- grouped race on this chunk of row j: every group's log mass into a slot, then the noise ---
    t_row = t_ptr + (req * st_b + j * st_k)  # [R] row j of each request
    d_row = d_ptr + (req * sd_b + tl.minimum(j, K - 1) * sd_k)
    tau_word = tau_ptr + req * _TAU_WORDS
    if SCREEN:
        if SEEDED:  # the emitter's seed, published before the ready word this program waited for (masked
            # by req_ok alone, so the load need not wait for row_i's flags: tau screens use_q rows only)
            tau = _tau_score(tl.load(tau_word, mask=req_ok, other=0, cache_modifier=".cg"))
        elif SHARED_TAU:  # nothing read yet: the request's word gives tau after this program's lead tile
            tau = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
        else:
            tau = tl.load(row_f_ptr + req * 6 + 5, mask=req_ok, other=float("-inf"))
        best_r, group_r, best_p, group_p = _screened_race(
            req, req_ok, chunk, t_row, d_row, gmax_ptr, gsum_ptr, seed, offset, j, x_j, sampled, use_q, tau,
            tau_word, shift_p, norm_p, shift_q, norm_q, scale2, V, NP, st_v, sd_v, K, BLOCK_ROWS, BLOCK_V,
            TILES, GW, TILES_P2, PARTS, FAST_LOG, SHARED_TAU, TAU_LAZY, NOISE_ONCE)  # fmt: skip
    else:
        mass_r, mass_p, log_e, zs = _streamed_masses(req, chunk, t_row, d_row, seed, offset, j, x_j, sampled,
                                                     use_q, shift_p, norm_p, shift_q, norm_q, scale2, V, st_v,
                                                     sd_v, BLOCK_ROWS, BLOCK_V, TILES, GW, TILES_P2, FAST_LOG,
                                                     P_IN_MERGE)  # fmt: skip
        best_r, group_r = _best_slot(mass_r - log_e, zs)
        best_p, group_p = _best_slot(mass_p - log_e, zs)  # unused with P_IN_MERGE
    part = (req * NC2 + chunk) * 2
    tl.store(best_ptr + part, best_r, mask=req_ok)
    tl.store(best_idx_ptr + part, group_r.to(tl.int32), mask=req_ok)
    if not P_IN_MERGE:
        tl.store(best_ptr + part + 1, best_p, mask=req_ok)
        tl.store(best_idx_ptr + part + 1, group_p.to(tl.int32), mask=req_ok)
    if SHARED_TAU:  # every thread's use of the words before the arrival (the last program resets them)
        tl.debug_barrier()
    _race_merge(req, req_block, req_ok, seed, offset, j, x_j, sampled, rejected, use_q, t_row, d_row, shift_p,
                norm_p, shift_q, norm_q, scale2, best_ptr, best_idx_ptr, arrivals_ptr, tau_word, ready_word,
                tokens_ptr, fallback_ptr, valid_ptr, V, NC2, st_v, sd_v, K, BLOCK_ROWS, BLOCK_V, GW, FAST_LOG,
                P_IN_MERGE, NCB2, SHARED_TAU, POLL)  # fmt: skip


@triton.jit
def _streamed_masses(req, chunk, t_row, d_row, seed, offset, j, x_j, sampled, use_q, shift_p, norm_p, shift_q,
                     norm_q, scale2, V, st_v, sd_v, BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr,
                     TILES: tl.constexpr, GW: tl.constexpr, TILES_P2: tl.constexpr, FAST_LOG: tl.constexpr,
                     P_IN_MERGE: tl.constexpr):  # fmt: skip
    """_race_block's masses (log R_g, log P_g unless P_IN_MERGE, log E_g, g) [R, TILES_P2 * NG] from
    one read of the whole chunk of row j (and of draft row j where it is used)."""
    NG: tl.constexpr = BLOCK_V // GW  # groups per tile (GW = 256, or one tile < 256 covering V)
    in_group = tl.arange(0, NG)[:, None] * GW + tl.arange(0, GW)[None, :]  # [NG, GW]
    # group (chunk * TILES + t) * NG + k sits in slot [t, k] (t < TILES_P2; t >= TILES: no mass)
    slot_t = tl.arange(0, TILES_P2)[None, :, None]
    mass_r = tl.full((BLOCK_ROWS, TILES_P2, NG), _NEG_INF, tl.float32)  # log R_g (the residual)
    mass_p = tl.full((BLOCK_ROWS, TILES_P2, NG), _NEG_INF, tl.float32)  # log P_g (p: the fallback)
    if tl.max(sampled.to(tl.int32), axis=0) > 0:  # greedy-only blocks skip the race (uniform branch)
        # software-pipelined: tile t + 1's loads are issued before tile t's arithmetic, so a warp's
        # next bytes are in flight while it computes. H200 run 45 (same run, graph µs, with 512-token
        # tiles: 1024 would need 229 registers): 1.03-1.04x at (64, 4, 151936) classic, 1.00-1.01x in
        # the six other cases (predicted up to 1.3x on the race pass: loads and math in lockstep
        # across warps was not the main cost)
        cols = ((chunk * TILES) * BLOCK_V + in_group.to(tl.int64))[None, :, :]  # [1, NG, GW]
        l_next, dl_next = _group_load(t_row[:, None, None], d_row[:, None, None], cols,
                                      sampled[:, None, None] & (cols < V), use_q[:, None, None], st_v, sd_v,
                                      True)  # fmt: skip
        for tile in range(TILES):
            l = l_next
            dl = dl_next
            more = sampled[:, None, None] & (cols + BLOCK_V < V) & (tile + 1 < TILES)
            l_next, dl_next = _group_load(t_row[:, None, None], d_row[:, None, None], cols + BLOCK_V, more,
                                          use_q[:, None, None], st_v, sd_v, True)  # fmt: skip
            lp, lq, res = _group_logs(l, dl, cols, x_j[:, None, None], shift_p[:, None, None],
                                      norm_p[:, None, None], shift_q[:, None, None], norm_q[:, None, None],
                                      scale2[:, None, None], True)  # fmt: skip
            if not P_IN_MERGE:
                tile_p = _group_log_mass(lp, lq, res, False, False, FAST_LOG, 2)  # [R, NG]
                mass_p = tl.where(slot_t == tile, tile_p[:, None, :], mass_p)
            # r = max(0, p - q) (r = p where the draft row is not used: q = 0)
            tile_r = _group_log_mass(lp, lq, res, True, True, FAST_LOG, 2)
            mass_r = tl.where(slot_t == tile, tile_r[:, None, :], mass_r)
            cols += BLOCK_V
    mass_p = tl.reshape(mass_p, (BLOCK_ROWS, TILES_P2 * NG))
    mass_r = tl.reshape(mass_r, (BLOCK_ROWS, TILES_P2 * NG))
    groups = chunk * (TILES * NG) + tl.arange(0, TILES_P2 * NG).to(tl.int64)[None, :]  # [1, S]
    zs = groups + req[:, None] * 0  # [R, S]
    log_e = _group_log_e(seed, offset, zs, j, FAST_LOG)
    return mass_r, mass_p, log_e, zs


@triton.jit
def _race_merge(req, req_block, req_ok, seed, offset, j, x_j, sampled, rejected, use_q, t_row, d_row, shift_p,
                norm_p, shift_q, norm_q, scale2, best_ptr, best_idx_ptr, arrivals_ptr, tau_word, ready_word,
                tokens_ptr, fallback_ptr, valid_ptr, V, NC2, st_v, sd_v, K: tl.constexpr,
                BLOCK_ROWS: tl.constexpr, BLOCK_V: tl.constexpr, GW: tl.constexpr, FAST_LOG: tl.constexpr,
                P_IN_MERGE: tl.constexpr, NCB2: tl.constexpr, SHARED_TAU: tl.constexpr = False,
                POLL: tl.constexpr = False):  # fmt: skip
    """After a race program stored its chunk's candidates: the last program to arrive for the
    request block merges every chunk's, draws the token and writes the outputs. POLL: it also zeroes
    the block's ready words, every program of the block having passed its wait."""
    arrived = tl.atomic_add(arrivals_ptr + req_block, 1, sem="acq_rel")
    if arrived == NC2 - 1:
        # ready for the next call / graph replay: relaxed and first, as in kernels/chain.py
        tl.atomic_xchg(arrivals_ptr + req_block, 0, sem="relaxed")
        if SHARED_TAU:  # every program of the block has published: the words back to "nothing read"
            tl.atomic_xchg(tau_word, 0, mask=req_ok, sem="relaxed")
        if POLL:  # every program of the block has seen its ready words: zero for the next call's emits
            tl.atomic_xchg(ready_word, 0, mask=req_ok, sem="relaxed")
        best_r, group_r = _merge_chunks(best_ptr, best_idx_ptr, req, req_ok, NC2, 0, NCB2)
        if not P_IN_MERGE:
            best_p, group_p = _merge_chunks(best_ptr, best_idx_ptr, req, req_ok, NC2, 1, NCB2)
        else:  # the race over p only where the residual has no mass (the fallback): rare
            best_p = tl.full((BLOCK_ROWS,), _NEG_INF, tl.float32)
            group_p = tl.full((BLOCK_ROWS,), -1, tl.int64)
            lost = sampled & (best_r == _NEG_INF)
            if tl.max(lost.to(tl.int32), axis=0) > 0:
                best_p, group_p = _race_over_p(t_row, lost, x_j, shift_p, norm_p, scale2, seed, offset, j, V,
                                               st_v, BLOCK_ROWS, BLOCK_V, GW, FAST_LOG)  # fmt: skip
        _emit_token(req, req_ok, sampled, rejected, use_q, j, x_j, seed, offset, best_r, group_r, best_p,
                    group_p, t_row, d_row, shift_p, norm_p, shift_q, norm_q, scale2, tokens_ptr, fallback_ptr,
                    valid_ptr, V, st_v, sd_v, K, True, GW)  # fmt: skip


@triton.jit
def _logits_stats_kernel(
    t_ptr, d_ptr, temp_ptr, n_ptr, tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr,  # see _stats_block
    gmax_ptr, gsum_ptr, x_ptr, seed_ptr, offset_ptr, state_ptr, cnt_ptr,
    tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, tau_ptr,
    B, V, NC, NP,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b, sx_b, sx_k, ss_b, so_b,
    K: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    LANE_I32: tl.constexpr,
    PREFETCH: tl.constexpr = False,
    PDL: tl.constexpr = False,
    PART_STATS: tl.constexpr = False,
    LAZY: tl.constexpr = False,
    NCB: tl.constexpr = 1,
    RECHECK: tl.constexpr = False,
    TAIL: tl.constexpr = False,
    KP: tl.constexpr = 1,
    PICK_POLL: tl.constexpr = False,
    SEED_TAU: tl.constexpr = False,
    GW: tl.constexpr = 256,
    FAST_LOG: tl.constexpr = False,
    LATE_CHUNKS: tl.constexpr = 1,
    LATE_FROM: tl.constexpr = 2,
):  # fmt: skip
    # grid (row blocks of the B*(K+1) target rows, vocabulary chunks, 2 with draft logits else 1):
    # one _stats_block each, axis 2 = 1 for the draft rows. LAZY: the same programs on one axis,
    # row block slowest (then chunk, then target / draft), so that the GPU, which starts programs in
    # the order of their index, starts a position's programs after the earlier positions'. PDL: the
    # accept kernel (launched with programmatic stream serialization) may start once every program
    # here has started. LATE_CHUNKS > 1 (LAZY, `stats_late_chunks`): the row blocks from position LATE_FROM
    # on (those past the first cdiv(LATE_FROM B, BLOCK_ROWS)) get a program per LATE_CHUNKS consecutive
    # chunks (and side), in the same order after the earlier rows' programs, so that a row the flag
    # makes unused costs cdiv(NC, LATE_CHUNKS) programs, not NC.
    if PDL:
        gdc_launch_dependents()
    chunks = 1
    if LAZY:
        SIDES: tl.constexpr = 2 if HAS_DRAFT_LOGITS else 1
        pid = tl.program_id(0)
        side = pid % SIDES
        chunk = (pid // SIDES) % NC
        row_block = pid // SIDES // NC
        if LATE_CHUNKS > 1:
            blocks = (B * (K + 1) + BLOCK_ROWS - 1) // BLOCK_ROWS
            head_blocks = tl.minimum((LATE_FROM * B + BLOCK_ROWS - 1) // BLOCK_ROWS, blocks)
            per_row = (NC + LATE_CHUNKS - 1) // LATE_CHUNKS
            late = pid - head_blocks * NC * SIDES  # (a multiple of SIDES: `side` stays pid % SIDES)
            late_chunk = (late // SIDES) % per_row * LATE_CHUNKS
            chunk = tl.where(late >= 0, late_chunk, chunk)
            row_block = tl.where(late >= 0, head_blocks + late // SIDES // per_row, row_block)
            chunks = tl.where(late >= 0, tl.minimum(NC - late_chunk, LATE_CHUNKS), 1)
    else:
        row_block = tl.program_id(0)
        chunk = tl.program_id(1)
        side = tl.program_id(2)
    _stats_block(row_block, chunk, side > 0, t_ptr, d_ptr, temp_ptr, n_ptr, tmax_ptr, tsum_ptr, targ_ptr,
                 dmax_ptr, dsum_ptr, gmax_ptr, gsum_ptr, x_ptr, seed_ptr, offset_ptr, state_ptr, cnt_ptr,
                 tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, row_f_ptr, row_i_ptr, tau_ptr, B, V,
                 NC, NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, s_temp, sn_b, sx_b, sx_k, ss_b, so_b, K,
                 HAS_DRAFT_LOGITS, RAGGED, BLOCK_ROWS, BLOCK_V, TILES, LANE_I32, PREFETCH, PART_STATS, LAZY,
                 NCB, RECHECK, TAIL, KP, PICK_POLL, SEED_TAU, GW, FAST_LOG, chunks, LATE_CHUNKS)  # fmt: skip


@triton.jit
def _logits_accept_kernel(
    t_ptr, d_ptr, x_ptr, temp_ptr, n_ptr, seed_ptr, offset_ptr,  # see _accept_block
    tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, row_f_ptr, row_i_ptr,
    tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, gmax_ptr, gsum_ptr, state_ptr,
    B, V, NC1, NP, NGR,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
    K: tl.constexpr,
    KP: tl.constexpr,
    HAS_DRAFT_LOGITS: tl.constexpr,
    RAGGED: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    NCB: tl.constexpr,
    PDL: tl.constexpr = False,
    SCREEN: tl.constexpr = False,
    GB: tl.constexpr = 1,
    PARTS: tl.constexpr = 1,
    GW: tl.constexpr = 256,
    FAST_LOG: tl.constexpr = False,
    LAZY: tl.constexpr = False,
):  # fmt: skip
    # grid (request blocks): one _accept_block each. PDL: launched while the stats kernel runs, it
    # reads only the call's inputs until gdc_wait (inside _accept_block) returns; the race / pick
    # kernel may launch once every program here has stored its results (not at their start: the
    # classic race's ~2000 programs would then be placed beside the stats pass's last wave).
    _accept_block(tl.program_id(0), t_ptr, d_ptr, x_ptr, temp_ptr, n_ptr, seed_ptr, offset_ptr,
                  tmax_ptr, tsum_ptr, targ_ptr, dmax_ptr, dsum_ptr, row_f_ptr, row_i_ptr,
                  tokens_ptr, num_accepted_ptr, fallback_ptr, valid_ptr, gmax_ptr, gsum_ptr, state_ptr,
                  B, V, NC1, NP, NGR,
                  st_b, st_k, st_v, sd_b, sd_k, sd_v, sx_b, sx_k, s_temp, sn_b, ss_b, so_b,
                  K, KP, HAS_DRAFT_LOGITS, RAGGED, BLOCK_ROWS, NCB, PDL, SCREEN, GB, PARTS, GW,
                  FAST_LOG, LAZY)  # fmt: skip
    if PDL:
        gdc_launch_dependents()


@triton.jit
def _logits_race_kernel(
    t_ptr, d_ptr, seed_ptr, offset_ptr, row_f_ptr, row_i_ptr,  # see _race_block
    best_ptr, best_idx_ptr, arrivals_ptr, tau_ptr, tokens_ptr, fallback_ptr, valid_ptr, gmax_ptr, gsum_ptr,
    state_ptr,  # [2 B STATE_WORDS] int32 (POLL): b's ready word (_ready_word), 1 once its emit is stored
    cnt_ptr,  # [B (K+1) STATE_WORDS] int32 (RESET): the stats pass's arrival counters
    B, V, NC2, NP,
    st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b,
    K: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_V: tl.constexpr,
    TILES: tl.constexpr,
    GW: tl.constexpr,
    TILES_P2: tl.constexpr,
    FAST_LOG: tl.constexpr,
    P_IN_MERGE: tl.constexpr = False,
    NCB2: tl.constexpr = 1,
    PDL: tl.constexpr = False,
    SCREEN: tl.constexpr = False,
    PARTS: tl.constexpr = 1,
    SHARED_TAU: tl.constexpr = False,
    POLL: tl.constexpr = False,  # after the classic tail (race_poll): wait per request, not per grid
    SPINS: tl.constexpr = 1,  # POLL: reads of a ready word before waiting for the whole pass instead
    SEEDED: tl.constexpr = False,  # SHARED_TAU, after the classic tail: its emitters seeded the words
    TAU_LAZY: tl.constexpr = False,  # SHARED_TAU (race_tau_lazy): publish without waiting, read if needed
    NOISE_ONCE: tl.constexpr = False,  # SCREEN (race_noise_once): a read tile's noise from the bounds'
    RESET: tl.constexpr = False,  # after the classic tail: zero its state once the pass has ended
    KP: tl.constexpr = 1,  # RESET: next_pow2(K+1)
):  # fmt: skip
    # grid (request blocks, vocabulary chunks of the emit row): one _race_block each. PDL: launched
    # while the accept kernel runs (the stats pass, with classic_tail); everything here depends on it.
    # POLL: each program waits for its requests' ready words (released by the classic tail's emitter,
    # _tail_arrival) and for the statistics pass only at its end, as the one-hot pick does; the block's
    # last program zeroes the words (_race_merge).
    req = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    ready = _ready_word(state_ptr, B, req)
    if POLL:
        _spin_ready(ready, req < B, SPINS, PDL)
    elif PDL:
        gdc_wait()
    _race_block(tl.program_id(0), tl.program_id(1), t_ptr, d_ptr, seed_ptr, offset_ptr, row_f_ptr,
                row_i_ptr, best_ptr, best_idx_ptr, arrivals_ptr, tau_ptr, ready, tokens_ptr, fallback_ptr,
                valid_ptr, gmax_ptr, gsum_ptr, B, V, NC2, NP, st_b, st_k, st_v, sd_b, sd_k, sd_v, ss_b, so_b,
                K, BLOCK_ROWS, BLOCK_V, TILES, GW, TILES_P2, FAST_LOG, P_IN_MERGE, NCB2, SCREEN,
                PARTS, SHARED_TAU, POLL, SEEDED, TAU_LAZY, NOISE_ONCE)  # fmt: skip
    if POLL:
        if PDL:
            gdc_wait()
    if RESET:  # one program per request block, once the pass has ended (the wait above, or stream order)
        if tl.program_id(1) == 0:
            _reset_tail_state(req, req < B, state_ptr, cnt_ptr, K, KP)


@triton.jit
def _logits_pick_kernel(
    t_ptr,  # [B, K+1, V] target logits, strides (st_b, st_k, st_v)
    seed_ptr,  # [B] int64
    offset_ptr,  # [B] int64
    row_f_ptr,  # [B, 6] fp32 from _accept_block
    row_i_ptr,  # [B, 3] int32 from _accept_block
    gmax_ptr,  # [B*(K+1), NP] fp32 part references of _stats_block (one-hot drafts)
    gsum_ptr,  # [B*(K+1), NP] fp32 part sums
    state_ptr,  # [2 B STATE_WORDS] int32 (POLL): b's ready word (_ready_word), 1 once its emit is stored
    cnt_ptr,  # [B (K+1) STATE_WORDS] int32 (RESET): the stats pass's arrival counters
    tokens_ptr,  # [B, K+1] int32 out, contiguous: the sampled rows' emitted token at j
    fallback_ptr,  # [B] bool out (sampled rows)
    valid_ptr,  # [B] bool out (sampled rows)
    B, V, NP, NG,
    st_b, st_k, st_v, ss_b, so_b,
    K: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    GB: tl.constexpr,
    PARTS: tl.constexpr,
    GW: tl.constexpr,
    FAST_LOG: tl.constexpr,
    PDL: tl.constexpr = False,
    POLL: tl.constexpr = False,  # after the one-hot tail (pick_poll): wait per request, not per grid
    SPINS: tl.constexpr = 1,  # POLL: reads of a ready word before waiting for the whole pass instead
    RESET: tl.constexpr = False,  # after the one-hot tail: zero its state once the pass has ended
    KP: tl.constexpr = 1,  # RESET: next_pow2(K+1)
):  # fmt: skip
    # grid (request blocks), one-hot drafts, in place of the race kernel: _pick_in_groups on what
    # _accept_block left for each request. (Fused into the accept kernel, which has the same grid:
    # with the emit row handed over in registers Triton 3.6 compiles for minutes at V = 151936, runs
    # 49 and 111; through memory behind a barrier it compiles but gains nothing once this launch is
    # a dependent one, run 112.) PDL: as the race. POLL: each program waits for its requests' ready
    # words (released by the tail's emitter, _tail_arrival), zeroes them, and waits for the statistics
    # pass only at its end, so that this launch never completes before the pass and the call's outputs
    # are whole when the stream moves on. RESET: it then zeroes the tail's state (_reset_tail_state).
    req = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    req_ok = req < B
    ready = _ready_word(state_ptr, B, req)
    if POLL:
        _wait_ready(ready, req_ok, SPINS, PDL)
    elif PDL:
        gdc_wait()
    seed, offset, j, x_j, sampled, use_q, rejected, shift_p, norm_p, shift_q, norm_q, scale2 = _emit_row(
        req, req_ok, seed_ptr, offset_ptr, row_f_ptr, row_i_ptr, ss_b, so_b)  # fmt: skip
    _pick_in_groups(req, req_ok, t_ptr, seed, offset, j, x_j, sampled, rejected, shift_p, norm_p, scale2,
                    gmax_ptr, gsum_ptr, tokens_ptr, fallback_ptr, valid_ptr, V, NP, NG, st_b, st_k, st_v,
                    K, BLOCK_ROWS, GB, PARTS, GW, FAST_LOG)  # fmt: skip
    if POLL:
        tl.atomic_xchg(ready, 0, mask=req_ok, sem="relaxed")
        if PDL:
            gdc_wait()
    if RESET:  # the pass has ended (the wait above, the one before the pick, or stream order)
        _reset_tail_state(req, req_ok, state_ptr, cnt_ptr, K, KP)


@triton.jit
def _spin_ready(ready_ptr, ok, SPINS: tl.constexpr, PDL: tl.constexpr):
    """POLL (the classic race, ~38 programs per request at bf16 (64, 4, 151936)): _wait_ready with plain
    volatile loads for the spin, so the waiting programs do not queue atomics on the word the emitter
    releases, then one acquiring read of the word (which reads the emitter's release where it was seen:
    nothing else writes it before every program of the block has arrived) and a CTA barrier. At most
    SPINS reads, then the wait for the whole pass, as _wait_ready."""
    waiting = ok
    spins = 0
    while (tl.max(waiting.to(tl.int32), axis=0) > 0) & (spins < SPINS):
        seen = tl.load(ready_ptr, mask=waiting, other=1, volatile=True)
        waiting = waiting & (seen == 0)
        spins += 1
    tl.atomic_add(ready_ptr, 0, mask=ok, sem="acquire")
    _wait_for_the_pass(waiting, PDL)


@triton.jit
def _wait_ready(ready_ptr, ok, SPINS: tl.constexpr, PDL: tl.constexpr):
    """POLL: spin until the ready word of every request where `ok` [R] is set (acquire: what the emitter
    stored before releasing it is visible after), then a CTA barrier, so that every thread's later loads
    come after the acquiring thread's. At most SPINS reads: a request whose emit has not come by then
    (a pass slower than the spin, or a broken tail that never emits) waits for the whole pass instead
    (griddepcontrol.wait, with PDL), so the wait always ends; under the interpreter the pass has ended
    before this kernel starts, and SPINS is 1."""
    waiting = ok
    spins = 0
    while (tl.max(waiting.to(tl.int32), axis=0) > 0) & (spins < SPINS):
        seen = tl.atomic_add(ready_ptr, 0, mask=waiting, sem="acquire")
        waiting = waiting & (seen == 0)
        spins += 1
    _wait_for_the_pass(waiting, PDL)


@triton.jit
def _wait_for_the_pass(waiting, PDL: tl.constexpr):
    """The end of a ready-word wait: the whole pass's (griddepcontrol.wait) where some request in
    `waiting` [R] is still not ready, then a CTA barrier."""
    if PDL:
        if tl.max(waiting.to(tl.int32), axis=0) > 0:
            gdc_wait()
    tl.debug_barrier()


# ----------------------------------------------------------------------------------------------
# Launcher
# ----------------------------------------------------------------------------------------------


_RACE_PROGRAMS = 2048  # race-pass programs (one warp each) wanted at least (~15 per SM)
_RACE_TAUS = ("accept", "shared", "seeded")  # launch_config's race_tau
_READY_SPINS = 1 << 14  # reads of a ready word (pick_poll, race_poll) before the wait for the whole pass


def _race_tiles(batch: int, vocab: int, race_block: int) -> int:
    """Tiles per race-pass program: the longest of 16, 8, 4, 2 that still gives batch x chunks >= 2048
    one-warp programs (1 if none does; never more tiles than the row has). H200 run 41 (graph µs,
    same run, ci/gpu/logits_gpu.py, 1024-token tiles x 1 / 2 / 4 / 8 / 16): chunks of 4096 tokens
    fastest or within 1% at (64, 4, 151936), 8192 at (128, 8, 128256); this rule gives those chunks
    with the 512-token tiles of run 45 (8 and 16 tiles)."""
    tiles = cdiv(vocab, race_block)
    for want in (16, 8, 4, 2):
        if batch * cdiv(vocab, race_block * want) >= _RACE_PROGRAMS:
            return max(1, min(want, tiles))
    return 1


def _tail_applies(cfg: dict, k_plus_1: int, classic: bool) -> bool:
    """Whether the statistics pass decides the drafts and writes the outputs itself (stats_tail, and for
    classic drafts classic_tail): the lazy pass with drafts, K+1 <= 16 (its word's bits)."""
    lazy = bool(cfg["stats_lazy"]) and k_plus_1 > 1
    wanted = bool(cfg["stats_tail"]) and (not classic or bool(cfg["classic_tail"]))
    return lazy and k_plus_1 <= _TAIL_MAX_POSITIONS and wanted


def launch_config(batch: int, k_plus_1: int, vocab: int, overrides: dict | None = None, *,
                  logit_bytes: int = 4) -> dict:  # fmt: skip
    """Tile and chunk sizes of the passes. GPU: one row per program; phase 1 reads chunks of
    `stats_block * stats_tiles` columns (4096 by default) so B*(K+1)*chunks fills the SMs; the race
    (classic drafts) reads chunks of `race_block * race_tiles` columns; the pick (one-hot drafts) runs
    `pick_warps` warps per request. Interpreter: one chunk per row and hundreds of rows per
    [BLOCK_ROWS, BLOCK_V] tile. `logit_bytes`: the target logits' element size. `overrides` (tests,
    the GPU sweep) replaces any key."""
    if not overrides:
        return dict(_default_config(batch, k_plus_1, vocab, logit_bytes, interpreting()))
    return _config(batch, k_plus_1, vocab, logit_bytes, overrides)


@functools.lru_cache(maxsize=512)
def _default_config(batch: int, k_plus_1: int, vocab: int, logit_bytes: int, interp: bool) -> tuple:
    """launch_config without overrides as (key, value) pairs (cached: on every eager call's path)."""
    return tuple(_config(batch, k_plus_1, vocab, logit_bytes, None).items())


def _config(batch: int, k_plus_1: int, vocab: int, logit_bytes: int, overrides: dict | None) -> dict:
    vocab_pow2 = next_pow2(vocab)
    if interpreting():
        block = max(4, min(vocab_pow2, 4096))
        tiles = cdiv(vocab, block)
        rows_cap = max(1, min(1 << 16, _INTERP_TILE_ELEMENTS // block))
        cfg = {
            "stats_block": block, "stats_tiles": tiles, "race_block": block, "race_tiles": tiles,
            # at most one position's rows per program (B rounded down to a power of two), so that the
            # lazy pass (stats_lazy) skips rows here as on the GPU: the tests and certificates run it
            "stats_rows": max(1, min(rows_cap, 1 << (max(1, batch).bit_length() - 1))),
            "race_rows": max(1, min(rows_cap, next_pow2(batch))),
            "stats_warps": 4, "race_warps": 4, "accept_warps": 4, "pick_warps": 4, "stats_maxnreg": None,
        }  # fmt: skip
        cfg.update(
            {
                "fast_log": False,
                "lane_i32": False,
                "stats_prefetch": False,
                "race_p_in_merge": logit_bytes <= 2,
                "pdl": False,  # griddepcontrol is GPU-only
                "stats_lazy": _LAZY_STATS == "1",
                "stats_recheck": True,
                "stats_tail": True,
            }
        )  # as on the GPU, so bf16 / fp16 tests take it
    else:
        # stats pass: one-warp programs over 512-column tiles, 8 per chunk, so every reduction stays
        # within a warp; 32-bit column offsets (lane_i32, where they fit; H200 run 21: 1.04-1.24x).
        # One-hot drafts (which also store part statistics): offline SASS per target element 16.1
        # instructions unmasked, against 25.9 with 8 warps x 4096 (whose parts cross warps). H200 run
        # 48 (same run, graph µs, ci/gpu/logits_gpu.py): 8 tiles per chunk fastest in all four one-hot
        # cases (50 / 68 / 112 / 166 at (64, 4, 151936) bf16 / fp32 and (128, 8, 128256) bf16 / fp32),
        # against 54 / 72 / 112 / 169 with 16, 56 / 69 / 123 / 188 with 32 and 65 / 89 / 156 / 229
        # with 8 warps x 4096 x 2. Classic drafts (target and draft rows in programs of their own,
        # session 10): offline SASS 9.7 instructions per element unmasked, against 11.2 for 8 warps x
        # 4096 and ~13-14.5 for session 9's kernel (a target and a draft tile per iteration); H200
        # run 55 (same session, graph) 1.17x / 1.22x in bf16 and 1.05x / 1.07x in fp32 against it at
        # (64, 4, 151936) / (128, 8, 128256); run 54: 1024 x 4 and 512 x 16 within 1.5% of 512 x 8,
        # 8 warps x 4096 x 2 1.13-1.20x slower in bf16.
        stats_block = max(128, min(512, vocab_pow2))
        stats_tiles = 8
        race_block = max(4, min(512, vocab_pow2))  # whole groups of 256, or one tile covering a short row
        cfg = {
            "stats_block": stats_block, "stats_tiles": max(1, min(stats_tiles, cdiv(vocab, stats_block))),
            "race_block": race_block, "race_tiles": _race_tiles(batch, vocab, race_block),
            "stats_rows": 1, "race_rows": 1, "stats_warps": 1, "race_warps": 1,
            "accept_warps": None, "pick_warps": 4,
            # stats_maxnreg: a register cap on the stats programs (None: ptxas decides). The cleaned
            # re-read (_any_nan) costs 71-72 registers uncapped against 64 before it (one-warp
            # programs: 28 resident per SM instead of 32); capped at 64, ptxas spills nothing and the
            # 16-bit loops keep their instruction counts (offline SASS, Triton 3.6). H200 run 134
            # (same session, graph µs): uncapped 1.4-4.1 µs slower in the four bf16 cases (one-hot
            # (128, 8, 128256) 85.0 -> 86.8, classic 158.2 -> 162.3), fp32 within 0.2
            "stats_maxnreg": 64,
        }  # fmt: skip
        # fast_log (the hardware log2 in the race pass; H200 run 14 measured the per-token race
        # 1.12-1.21x faster with it, coupling unchanged).
        # stats_prefetch (16-bit logits): tile t + 1's load issued before tile t's arithmetic, so a
        # warp has two 1 KB tiles in flight instead of one. H200 run 68 (same run, graph µs, default
        # timed first and last): bf16 1.03-1.04x at (64, 4, 151936) and 1.04-1.05x at (128, 8, 128256),
        # both draft kinds; fp32 0.99-1.01x (2 KB tiles), where Triton's shared-memory pipelining of the
        # loop (3 stages) was 1.02x at classic (128, 8, 128256) and 0.96-1.00x elsewhere: neither kept.
        # race_p_in_merge (16-bit logits, classic drafts): the race programs leave out the race over p
        # (the fallback's), which the merge runs over row j only where the residual has no mass:
        # offline SASS 38.1 -> 30.3 instructions per element in bf16 (36.2 -> 28.8 in fp32, 93 -> 70
        # registers). H200 run 69 (same run, graph µs, each timed twice): bf16 1.04x at
        # (64, 4, 151936) and (128, 8, 128256); fp32 0.98x at (64, 4, 151936), 1.01x at (128, 8, 128256).
        cfg.update(
            {
                "fast_log": True,
                "lane_i32": True,
                "stats_prefetch": logit_bytes <= 2,
                "race_p_in_merge": logit_bytes <= 2,
                # pdl: the accept and race / pick kernels launched with programmatic stream
                # serialization (module docstring). H200 run 107 (same session, base / at the accept
                # kernel's start / at its end, twice each; zero_pause µs, do_bench's device time):
                # one-hot fp32 (64, 4, 151936) 69.8 -> 65.5, bf16 48.4 -> 44.4, (128, 8, 128256)
                # 166.1 -> 162.1 / 107.1 -> 102.4; classic fp32 (64, 4, 151936) 129.7 -> 126.4, bf16
                # 87.4 -> 83.9, (128, 8, 128256) 321.6 -> 317.2 / 195.1 -> 191.2 (means). Letting the race
                # launch at the accept kernel's start instead placed its ~2000 programs beside the stats
                # pass's last wave: classic (128, 8, 128256) +0.7 / +2.8 µs of graph time (runs 106-107).
                "pdl": True,
                # stats_lazy: the stats pass skips the rows after a request's first certain
                # rejection (_stats_block, LAZY; benchmarks/NOTES.md, session 31).
                "stats_lazy": _LAZY_STATS == "1",
                # stats_recheck: the lazy pass's rows i > 0 read their request's state again beside
                # every tile's load and stop reading once an earlier draft is certainly rejected
                # (_part_stats_watch). H200 run 233 (one process, graph µs, the benchmark's inputs,
                # lazy without -> with; outputs equal to the eager pass's in every call): one-hot
                # bf16 (64, 4, 151936) 33.8 -> 30.8, fp32 45.0 -> 40.7, (128, 8, 128256) 62.9 -> 60.2
                # and 75.8 -> 68.9; classic bf16 (64, 4, 151936) 60.0 -> 58.3, fp32 80.2 -> 78.3,
                # (128, 8, 128256) 118.9 -> 118.9 and 141.7 -> 140.1. Every draft accepted (nothing
                # to skip, so only its cost): -0.5 to +6.0 (classic bf16 (128, 8, 128256) 173.7 ->
                # 179.7)
                "stats_recheck": True,
                # stats_tail (one-hot drafts, the lazy pass, K+1 <= 16): the stats programs decide
                # every draft exactly and the program that fixes a request's emit position writes its
                # outputs (_tail_arrival), and the pick kernel follows: two launches instead of three.
                # H200 runs 237-240 (lazy_stats.py, the benchmark's inputs, zero_pause µs, lazy -> tail
                # over 5-6 calls each; outputs equal to the eager pass's in every call): one-hot bf16
                # (64, 4, 151936) 35.9-36.5 -> 33.0-33.6, fp32 47.0-48.4 -> 46.1-47.3, (128, 8, 128256)
                # bf16 50.5-51.0 -> 47.7-49.2, fp32 72.2-73.7 -> 71.2-73.2; every draft accepted
                # (nothing to skip) 44.7-46.0 -> 45.6-47.1, 65.7-66.5 -> 66.3-67.4, 100.6-103.4 ->
                # 102.2-106.3, 164.2-166.8 -> 165.5-168.8. On the default call path against HEAD's
                # package (ab_device_time, runs 239-240): 1.00-1.14x at B = 1 to 256
                "stats_tail": True,
            }
        )
    # pick_slab_parts (both paths): the one-hot pick's race steps over slabs of at most this many
    # part statistics (1024 // parts groups; one slab covers V <= 262144 with 256-token parts)
    cfg["pick_slab_parts"] = 1024
    # pick_poll (one-hot drafts with stats_tail): the pick's programs wait for their own requests' emits (a
    # ready word the tail's emitter releases) instead of the whole statistics pass (griddepcontrol.wait), so
    # requests whose emit position is fixed early are drawn while the pass's later programs still run; each
    # pick program waits for the pass at its end, so the call still ends after both. The stats programs
    # order their part statistics before their arrival with a CTA barrier, which the pick's reads of row j
    # then rely on. H200 run 252 (lazy_stats.py, two rounds, off -> on, zero_pause µs, graph µs in
    # brackets; outputs equal to the eager pass's in every call), the benchmark's inputs: one-hot bf16
    # (64, 4, 151936) 33.95 / 33.33 -> 32.70 / 33.73 (27.85 / 28.08 -> 27.23 / 27.27), fp32 46.05 / 46.82
    # -> 42.88 / 42.14 (39.35 / 39.34 -> 35.21 / 35.56); (128, 8, 128256) bf16 49.18 / 48.02 -> 48.61 /
    # 48.80 (42.29 / 42.06 -> 42.95 / 42.99), fp32 71.44 / 72.58 -> 67.71 / 67.87 (62.75 / 62.61 -> 58.76
    # / 58.64); every draft accepted: 0.5 to 1.9 µs faster zero_pause in all four cases.
    cfg["pick_poll"] = True
    # stats_late_chunks (the lazy pass): the rows of positions >= stats_late_from launched as programs of this
    # many consecutive chunks each (per side), not one program per chunk; each reads its chunks in turn,
    # testing its request's flag before each (the next chunk's flag loaded before this chunk's tiles), and
    # counts one arrival per chunk. A row that an earlier rejection makes unused then costs cdiv(NC, C)
    # programs that read a flag and exit, not NC; a row it reads is read by fewer programs, C chunks each,
    # one after another. H100 run 301 (grid_churn.py's bare model of the pass, 8-tile chunks, graph µs): C = 4
    # at bf16 (128, 8, 128256) 39.43 -> 27.45 with positions >= 2 skipped, 96.28 -> 98.75 with every row read;
    # at (64, 4, 151936) 17.29 -> 16.76 and 34.57 -> 37.51. 1: off.
    cfg["stats_late_chunks"] = 1
    cfg["stats_late_from"] = 2
    # classic_tail (classic drafts, the lazy pass with stats_tail, K+1 <= 16): stats_tail's decisions and
    # outputs for classic drafts too, the race kernel after the pass and no accept kernel, the screen's
    # threshold then shared by the race programs (race_tau "shared"). race_poll (with classic_tail):
    # pick_poll's wait for the classic race. The tail's emitter releases each request's ready word, and
    # every race program spins on its requests' words (volatile loads, then one acquire) instead of
    # waiting for the whole statistics pass; each waits for the pass at its end, and the request block's
    # last race program zeroes the words. H200 runs 253-254 (lazy_stats.py, two rounds each, zero_pause
    # µs, graph µs in brackets; outputs equal to the eager pass's in every call), the benchmark's inputs:
    # classic bf16 (64, 4, 151936) default 64.75 / 64.98 (57.47 / 57.92), classic_tail alone 64.91 / 65.52
    # (58.80 / 58.84), with race_poll 60.37 / 61.47 (54.54 / 54.64); bf16 (128, 8, 128256) 111.49 /
    # 112.00 -> 115.74 / 115.62 -> 106.40 / 107.15 (102.42 / 102.34 -> 98.39 / 98.00); fp32 (64, 4,
    # 151936) 87.81 / 87.84 -> 89.78 / 90.64 -> 81.79 / 82.37 (78.38 / 78.20 -> 73.74 / 73.17). Every
    # draft accepted, default -> race_poll: 75.25 / 76.03 -> 72.96 / 73.78, 112.00 / 112.43 -> 109.52 /
    # 109.60, but (128, 8, 128256) bf16 182.70 / 182.37 -> 184.58 / 184.80 (graph 170.28 / 169.85 ->
    # 174.24 / 181.70). (race_tau "shared" alone, the accept kernel without its threshold, run 253: +2.0
    # to +3.6 µs at (64, 4, 151936) bf16, +1.3 / +2.1 at (128, 8, 128256) bf16; not a default.)
    cfg["classic_tail"] = True
    cfg["race_poll"] = True
    # race_screen (classic drafts): the stats pass also stores the target rows' part statistics, the
    # accept kernel reads a few groups of row j for a threshold (_screen_threshold), and each race
    # program reads only the tiles of row j that hold a group whose bound log P_g - log E_g can
    # still win (_screened_race); race_p_in_merge then has no effect. On the GPU by default where
    # race programs hold >= 8 tiles, the regime H200 runs 126-131 measured ((64, 4, 151936): 8,
    # (128, 8, 128256): 16); smaller batches, whose programs hold 1-4 tiles and whose race is
    # latency, keep the full race until measured. The interpreter screens everywhere (the tests).
    # Resolved after the overrides, from the race_tiles in effect: an override of race_tiles alone
    # (tests, the sweep) gets the rule's answer for its own tiling, not for the default one.
    cfg["race_screen"] = None
    # race_tau (the screened race): where its threshold comes from. "accept": the accept kernel computes
    # it (_screen_threshold, 16 warps: one Philox call per group of row j and a [4, 256] read, per
    # request, before the race launches). "shared": no threshold in the accept kernel (one warp, as
    # for one-hot drafts); each race program publishes the best score of its first tile into its
    # request's word and screens with what the request's other programs published before it
    # (_share_tau). "seeded" (the classic tail only): "shared", and each request's emitter first publishes
    # the score of the group holding row j's target argmax (_seed_tau, one group read), so that the race
    # programs screen from their first tile on (benchmarks/diagnostics/screen_simulation.py: 1.7% of the
    # tiles read at (64, 4, 151936) against 13.4% unseeded). The outputs are the same
    # (tests/kernels/test_logits_screen.py). None (the default):
    # "shared" where the classic tail applies (no accept kernel is left to compute the threshold),
    # "accept" elsewhere (H200 run 253: "shared" with the accept kernel was 1.3-3.6 µs slower); an
    # override of "accept" where the classic tail applies is a ValueError (set classic_tail False).
    cfg["race_tau"] = None
    # race_tau_lazy (race_tau "shared" or "seeded"): each race program publishes its lead tile's best by an
    # atomic max it does not wait for (SASS: REDG, not ATOMG), and reads its request's word only where a
    # later tile's bound could still pass (_share_tau_lazy), instead of waiting for the atomic's old value
    # before its later tiles. race_noise_once (the screened race): a read tile's log E_g come from the
    # bounds' noise, not a second Philox call. Both cut the race's latency after the last emit: session
    # 52's stamps (benchmarks/diagnostics/race_stamps.py, H100 run 264, classic bf16 (64, 4, 151936)) put
    # the race 6.7 µs past the statistics pass, its late programs 2.2 µs from ready to candidates without a
    # tile read, 4.5-6.4 with the lead tile alone, ~1 more per tile. H100 runs 265-266 (lazy_stats.py, one
    # process, default -> both, zero_pause µs, graph µs in brackets; outputs equal to the eager pass's in
    # every call), the benchmark's inputs: classic bf16 (64, 4, 151936) 68.45 / 69.20 / 68.34 / 68.21 ->
    # 67.15 / 66.94 / 66.62 / 67.82 (59.72 / 60.22 / 59.73 / 60.12 -> 58.70 / 58.77 / 59.11 / 58.88);
    # fp32 102.86 / 103.30 -> 102.42 / 102.91 (90.67 / 91.45 -> 90.36 / 90.80); bf16 (128, 8, 128256)
    # 121.47 / 121.73 -> 119.54 / 120.58 (110.01 / 110.14 -> 108.36 / 108.62). Each alone (run 266, bf16
    # (64, 4, 151936)): race_tau_lazy 67.82 / 67.79 (59.76 / 59.94), race_noise_once 67.95 / 67.95 (59.25 /
    # 59.02). Every draft accepted: within -1.4 / +0.6 µs zero_pause and 0.3 µs graph in all three cases.
    # The stamps with both (run 265): late programs' reads 4.1 -> 2.2 µs (median), the race 6.5 -> 5.8 µs
    # past the pass. On the default call path against the package before them (run 267, ab_device_time,
    # two rounds, do_bench new / base): classic bf16 0.988 / 0.986 at (64, 4, 151936) and (128, 8, 128256),
    # fp32 0.997 / 0.997 at (64, 4, 151936), 0.999 / 0.999 at (128, 8, 128256).
    cfg["race_tau_lazy"] = True
    cfg["race_noise_once"] = True
    # Tried and removed (session 53): ready_j (the race taking j from its request's ready word, 2 j + 1,
    # instead of row_i) and race_flags_late (row j's part statistics loaded before row_i's flags; offline
    # SASS 165 -> 96 registers, 4,040 -> 2,304 instructions). H100 run 270 (lazy_stats.py, two rounds,
    # zero_pause µs, default / flags_late / both): classic bf16 (64, 4, 151936) 66.32 / 66.56 / 67.34 and
    # 67.82 / 67.81 / 66.82, fp32 102.10 / 102.24 / 102.16 and 102.22 / 101.86 / 103.04, bf16 (128, 8,
    # 128256) 119.86 / 120.22 / 119.95 and 119.97 / 120.45 / 120.67: no gain beyond the rounds' spread
    # (predicted -0.5 to -0.8 µs); the stamps' late reads 2.19 / 2.18 / 2.13 µs.
    # race_chunk_pick (the screened race, session 53, tried and removed): each race program drew the token
    # in every group that took its lead, group by group as it read them (the draw on the tile's registers
    # took 222 registers, offline), and stored it for the merge, which then read no group again. H100 run
    # 271 (lazy_stats.py, two rounds, zero_pause µs, default -> chunk pick): classic bf16 (64, 4, 151936)
    # 66.19 / 67.57 -> 72.00 / 72.61, fp32 102.43 / 101.70 -> 106.38 / 107.44, bf16 (128, 8, 128256)
    # 119.82 / 119.66 -> 127.81 / 126.42 (predicted -0.5 to -1 µs); the stamps: late programs' reads 2.18
    # -> 6.34 µs (median), the race 5.66 -> 12.21 µs past the pass. A float64 inverse CDF per leading group
    # costs each reading program more than the merge's one re-read.
    # race_spec_merge and race_warm_l2 (session 54, tried and removed; patches and tables in
    # benchmarks/results/runs/2026-12-06-run276-281/). race_spec_merge: a chunk's candidate as one int64
    # word that says whether it was written, every race program loading its requests' words before a relaxed
    # arrival (no release before it), the last merging them, the shared words reset by the next call's
    # emitters. H100 runs 276-277 (lazy_stats.py, three rounds, means, do_bench µs): classic bf16 (64, 4,
    # 151936) 68.23 -> 67.72, fp32 104.30 -> 104.92; every draft accepted bf16 86.78 -> 88.90, fp32 143.71 ->
    # 145.75 (the stamps: the race 6.02 -> 4.77 µs past the pass, and with every draft accepted the pass
    # ending 2.2 µs later). race_warm_l2: prefetch.global.L2 of each race program's candidate slots, arrival
    # counter and shared word before its wait. Run 278: bf16 (64, 4, 151936) 67.95 -> 68.83 (the merge 0.99
    # -> 0.77 µs, the pass's end 0.9 µs later).
    unknown = set(overrides or {}) - set(cfg)
    if unknown:
        _fail(ValueError, "config", f"keys among {sorted(cfg)}", sorted(unknown))
    cfg.update(overrides or {})
    if cfg["race_screen"] is None:
        cfg["race_screen"] = interpreting() or cfg["race_tiles"] >= 8
    # 16 tiles per statistics chunk on large grids of the lazy pass with stats_recheck (GPU; not where an
    # override sets stats_tiles): with many rows, half the programs (half the arrivals and flag reads) keep
    # the GPU full, and rows a decision makes unused stop early anyway. H200 runs 233 and 235 (one process
    # each, graph µs, benchmark inputs, 8 -> 16 tiles; outputs equal to the eager pass's): faster where
    # B (K+1) cdiv(V, 4096) >= 8192 x logit bytes: bf16 (64, 8, 128256) 70.2 -> 68.0 classic, 36.8 -> 35.0
    # one-hot; (128, 4, 151936) 92.4 -> 88.3, 45.8 -> 42.9; (128, 8, 128256) 118.9 -> 102.5, 60.2 -> 44.5;
    # (256, 4, 151936) 173.6 -> 143.8, 79.6 -> 55.8; fp32 (128, 8, 128256) 140.1 -> 136.5, 68.9 -> 64.0;
    # (256, 4, 151936) 227.5 -> 211.6, 92.7 -> 78.5. Slower below it: bf16 (32, 8, 128256) +5.1 / +4.3,
    # (64, 4, 151936) +2.6 / +3.0; fp32 (32, 8, 128256) +13.6 / +12.7, (64, 8, 128256) +10.5 / +8.2,
    # (64, 4, 151936) +11.5 / +9.9, (128, 4, 151936) +6.9 / +12.0. With every draft accepted, 16 tiles were
    # 0.2-12.3 µs faster than 8 at every shape that takes them.
    lazy_recheck = cfg["stats_lazy"] and cfg["stats_recheck"]
    if (
        not interpreting()
        and "stats_tiles" not in (overrides or {})
        and lazy_recheck
        and batch * k_plus_1 * cdiv(vocab, cfg["stats_block"] * 8) >= _LONG_CHUNK_GRID * logit_bytes
    ):
        cfg["stats_tiles"] = max(1, min(16, cdiv(vocab, cfg["stats_block"])))
    for key in ("stats_block", "race_block"):
        if cfg[key] < 4 or cfg[key] & (cfg[key] - 1):
            _fail(ValueError, f"config[{key!r}]", "a power of two >= 4", cfg[key])
    classic_tail = _tail_applies(cfg, k_plus_1, classic=True)
    if cfg["race_tau"] is None:
        cfg["race_tau"] = "shared" if classic_tail else "accept"
    if cfg["race_tau"] not in _RACE_TAUS:
        _fail(ValueError, "config['race_tau']", f"one of {_RACE_TAUS}", cfg["race_tau"])
    if classic_tail and cfg["race_tau"] == "accept":
        _fail(ValueError, "config['race_tau'] with classic_tail", "'shared' or 'seeded' (no accept kernel "
              "computes a threshold; set classic_tail False for the accept kernel's)", "accept")  # fmt: skip
    if not classic_tail and cfg["race_tau"] == "seeded":
        _fail(ValueError, "config['race_tau'] 'seeded'", "the classic tail (its emitters seed the threshold: "
              "stats_lazy, stats_tail and classic_tail on, K+1 <= 16)", "seeded")  # fmt: skip
    for key, least in (("stats_late_chunks", 1), ("stats_late_from", 0)):
        value = cfg[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            _fail(ValueError, f"config[{key!r}]", f"an int >= {least}", value)
    slab_parts = cfg["pick_slab_parts"]
    if slab_parts < 1 or slab_parts & (slab_parts - 1):
        _fail(ValueError, "config['pick_slab_parts']", "a power of two >= 1", slab_parts)
    if cfg["race_block"] < GROUP_TOKENS and (cfg["race_block"] < vocab or cfg["race_tiles"] != 1):
        _fail(ValueError, "config['race_block']", f"a multiple of the {GROUP_TOKENS}-token group, or one "
              f"tile covering the row (race_block >= V = {vocab} and race_tiles = 1)",
              (cfg["race_block"], cfg["race_tiles"]))  # fmt: skip
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
    # a repeat call (the tensors' metadata of an earlier call that launched): no checks, no planning
    signature = None
    if _config is None:
        tensors = (lg, draft_token_ids, draft_logits, temperature, seeds, offsets, num_draft_tokens)
        signature = tensor_signature(*tensors)
        repeat = _REPEATS.get(signature)
        if repeat is not None:
            return repeat(*tensors)
    elsewhere = other_cuda_device(lg)
    if elsewhere is not None:  # tensors on another GPU: launch there, on its current stream
        with torch.cuda.device(elsewhere):
            return rejection_sample_logits(
                lg,
                draft_token_ids,
                draft_logits,
                temperature=temperature,
                seeds=seeds,
                offsets=offsets,
                num_draft_tokens=num_draft_tokens,
                _config=_config,
            )
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
                   launch_config(batch, k_plus_1, vocab, _config, logit_bytes=lg.element_size()),
                   signature)  # fmt: skip


def stats_lane_i32(cfg: dict, vocab: int, target_stride_v: int, draft_stride_v: int) -> bool:
    """The stats pass's LANE_I32 flag: 32-bit column offsets when the config asks for them and every
    column offset of the last (padded) chunk fits in int32."""
    padded = vocab + cfg["stats_block"] * cfg["stats_tiles"]
    return cfg["lane_i32"] and int32_offsets_fit(padded, target_stride_v, draft_stride_v)


def _rows_within_tile(rows: int, elements_per_row: int) -> int:
    """Rows per program, capped so that a block of elements_per_row values per row stays within the
    interpreter's tile budget (on the GPU rows is 1 already)."""
    return max(1, min(rows, _INTERP_TILE_ELEMENTS // elements_per_row))


_PLANS: dict[tuple, tuple] = {}  # launch plans (grids, scratch, constexprs) by shape, config and stream
_MAX_PLANS = 256


def _plan(device, batch: int, k_plus_1: int, vocab: int, has_draft: bool, ragged: bool, lane_i32: bool,
          cfg: dict) -> tuple:  # fmt: skip
    """(key, grids, scratch, constexprs) of one shape: everything `_launch` derives from the shape and
    the config, built once per (device, stream, shape, config) while the persistent buffers it holds
    stay live (kernels/_stream_buffers.generation): a repeat call skips ten buffer lookups and three
    constexpr dicts (host time, which do_bench counts when it outlasts the L2 flush)."""
    stream = torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else None
    key = (device, stream, generation(), batch, k_plus_1, vocab, has_draft, ragged, lane_i32,
           tuple(cfg.values()))  # fmt: skip
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    num_k = k_plus_1 - 1
    nc1 = cdiv(vocab, cfg["stats_block"] * cfg["stats_tiles"])
    nc2 = cdiv(vocab, cfg["race_block"] * cfg["race_tiles"])
    num_rows = batch * k_plus_1
    part_width = min(GROUP_TOKENS, cfg["stats_block"])  # the stats pass's parts (one-hot, screened race)
    # parts per group of the residual draw (a row shorter than one group has fewer parts than a group
    # holds, and just one group)
    parts = min(GROUP_TOKENS // part_width, next_pow2(cdiv(vocab, part_width)))
    num_groups = cdiv(vocab, GROUP_TOKENS)
    screen = has_draft and bool(cfg["race_screen"])
    lazy = bool(cfg["stats_lazy"]) and num_k > 0
    # stats_tail: the stats pass deciding and writing the outputs (_tail_arrival), no accept kernel
    tail = _tail_applies(cfg, k_plus_1, has_draft)
    # the screen's threshold from the race programs themselves (race_tau "shared", which classic_tail sets),
    # else from the accept kernel's _screen_threshold
    shared_tau = screen and cfg["race_tau"] in ("shared", "seeded")
    # race_tau "seeded": the classic tail's emitters publish a first score into the words (_seed_tau)
    seeded = shared_tau and cfg["race_tau"] == "seeded"  # (_config: only where the classic tail applies)
    threshold = screen and not shared_tau
    race_groups = cfg["race_block"] // min(GROUP_TOKENS, cfg["race_block"])  # groups per race tile
    race_slots = next_pow2(cfg["race_tiles"])
    race_rows = cfg["race_rows"]
    if screen:  # at least 32 group slots: with fewer, Triton 3.6 gave the screened race program 128-167
        race_slots = max(race_slots, cdiv(32, race_groups))  # registers instead of 80 (offline, sm_90)
        race_rows = _rows_within_tile(race_rows, race_slots * race_groups * parts)  # [rows, slots, parts]
    race_gw = min(GROUP_TOKENS, cfg["race_block"])  # tokens per group (fewer: one group covering V)
    # the one-hot pick and the screening threshold (_screen_threshold) take row j's groups in slabs of
    # at most pick_slab_parts part statistics: [rows, slab, parts] blocks (the threshold's reads:
    # [rows, 4, race_gw])
    slab = min(next_pow2(num_groups), max(1, cfg["pick_slab_parts"] // parts))
    accept_rows = cfg["race_rows"]
    if threshold:
        accept_rows = _rows_within_tile(accept_rows, max(slab * parts, 4 * race_gw))
    accept_blocks = cdiv(batch, accept_rows)
    race_blocks = cdiv(batch, race_rows)
    # scratch (kernels/_stream_buffers.py), each [rows, chunks] and indexed explicitly by the kernels:
    # per-chunk max / sum-exp / argmax of every target row and max / sum-exp of every draft row; the
    # emit row's statistics and (j, x_j, flags) per request; each request's race candidates
    # (score, group) x 2 per race chunk; the race's arrival counters (persistent, kept zero)
    stats = num_rows * nc1
    tmax = stream_buffer(device, "logits_tmax", stats, torch.float32)
    tsum = stream_buffer(device, "logits_tsum", stats, torch.float32)
    targ = stream_buffer(device, "logits_targ", stats, torch.int32)
    dmax = stream_buffer(device, "logits_dmax", stats, torch.float32) if has_draft else tmax
    dsum = stream_buffer(device, "logits_dsum", stats, torch.float32) if has_draft else tsum
    row_f = stream_buffer(device, "logits_row_f", batch * 6, torch.float32)
    row_i = stream_buffer(device, "logits_row_i", batch * 3, torch.int32)
    if has_draft:  # the race pass's candidates and arrival counters
        best = stream_buffer(device, "logits_best", batch * nc2 * 2, torch.float32)
        best_idx = stream_buffer(device, "logits_best_idx", batch * nc2 * 2, torch.int32)
        arrivals = arrival_counters(device, race_blocks)
    else:
        best, best_idx, arrivals = tmax, targ, targ
    if shared_tau:  # each request's shared threshold (persistent, kept zero: "nothing read yet")
        race_tau = stream_buffer(device, "logits_race_tau", batch * TAU_WORDS, torch.int64, zeroed=True)
    else:
        race_tau = best_idx
    if lazy:  # the lazy stats pass's decisions and arrival counters (persistent, kept zero)
        # B lines of flags and tail words, then B lines of pick_poll's ready words
        state = stream_buffer(device, "logits_lazy_state", 2 * batch * STATE_WORDS, torch.int32, zeroed=True)
        stats_arrivals = stream_buffer(device, "logits_stats_arrivals", batch * k_plus_1 * STATE_WORDS,
                                       torch.int32, zeroed=True)  # fmt: skip
    else:
        state = stats_arrivals = targ
    if has_draft and not screen:
        gmax = gsum = tmax
        num_parts = 1
    else:  # one-hot drafts or the screened race: every target row's part statistics
        num_parts = cdiv(vocab, part_width)
        gmax = stream_buffer(device, "logits_gmax", num_rows * num_parts, torch.float32)
        gsum = stream_buffer(device, "logits_gsum", num_rows * num_parts, torch.float32)
    key = (device, stream, generation(), *key[3:])  # the allocations above may have bumped it
    # pdl: the accept and race / pick kernels launched with programmatic stream serialization, each
    # waiting (griddepcontrol.wait) for its predecessor's results; sm_90 and later only
    pdl = bool(cfg["pdl"]) and supports_pdl(device)
    later = dict(PDL=True, launch_pdl=True) if pdl else {}
    # stats_tail: the stats pass writing the outputs (_tail_arrival), then the pick or the race
    pick_poll = tail and not has_draft and bool(cfg["pick_poll"])
    race_poll = tail and has_draft and bool(cfg["race_poll"])
    # reads of a ready word before the pick or race waits for the whole pass instead: 1 under the
    # interpreter (the pass has ended when they start), else ~10 ms of reads, far past any pass
    spins = 1 if interpreting() else _READY_SPINS
    # the emitters release the ready words that the pick (pick_poll) or the race (race_poll) waits on
    tail_meta = dict(TAIL=True, KP=next_pow2(k_plus_1), PICK_POLL=pick_poll or race_poll) if tail else {}
    if seeded:
        tail_meta.update(SEED_TAU=True, GW=race_gw, FAST_LOG=cfg["fast_log"])
    # stats_late_chunks: the lazy pass's rows from position stats_late_from on, C chunks a program (no
    # change where a row has one chunk)
    late_chunks = min(cfg["stats_late_chunks"], nc1) if lazy else 1
    late_meta = dict(LATE_CHUNKS=late_chunks, LATE_FROM=cfg["stats_late_from"]) if late_chunks > 1 else {}
    stats_meta = dict(K=num_k, HAS_DRAFT_LOGITS=has_draft, RAGGED=ragged, BLOCK_ROWS=cfg["stats_rows"],
                      BLOCK_V=cfg["stats_block"], TILES=cfg["stats_tiles"], LANE_I32=lane_i32,
                      PREFETCH=cfg["stats_prefetch"], PDL=pdl, PART_STATS=screen, LAZY=lazy,
                      RECHECK=lazy and bool(cfg["stats_recheck"]), NCB=min(next_pow2(nc1), 64),
                      num_warps=cfg["stats_warps"], **tail_meta, **late_meta,
                      **({"maxnreg": cfg["stats_maxnreg"]} if cfg["stats_maxnreg"] else {}))  # fmt: skip
    # the accept kernel reads the chunk statistics NCB chunks per load round trip (all of them on the
    # GPU: 19 at V = 151936), fewer where the interpreter's [rows, K+1, NCB] block would grow too large
    ncb = min(next_pow2(nc1), max(1, _INTERP_TILE_ELEMENTS // (accept_rows * next_pow2(k_plus_1))), 64)
    # accept_warps None (the GPU default): 16 where the accept kernel computes the screening threshold
    # (1024 groups of row j per slab), 1 elsewhere. H200 run 129 (same session, two rounds,
    # zero_pause µs, classic, against no threshold): 1 warp 117.9 -> 132.7 at fp32 (64, 4, 151936)
    # and 80.8 -> 96.4 in bf16; 4 warps 117.9 -> 115.8, 80.8 -> 80.2, and at (128, 8, 128256)
    # 302.1 -> 292.6 (fp32), 190.5 -> 184.7 (bf16). 4 -> 8 warps: run 131 114.6 -> 111.8,
    # 80.2 -> 74.9, 289.5 -> 287.1, 182.6 -> 180.3; run 132 (graph µs) 101.0 -> 98.7 and
    # 73.7 -> 68.1 at (64, 4, 151936), B = 1-32 (unscreened) unchanged. (Run 79: 1-8 warps within
    # 0.5 µs without the threshold.) 8 -> 16 warps: run 138 (three rounds each, zero_pause µs, every
    # round faster, outputs bit-identical) 113.1 -> 111.7 fp32 and 73.6 -> 72.1 bf16 at (64, 4, 151936),
    # 290.7 -> 289.9 and 172.3 -> 171.5 at (128, 8, 128256); 32 warps 0.3-1.5 µs slower than 8. (The
    # pick at 8 warps instead of 4: within 0.1 µs; at 16: 0.2-0.7 µs slower; not changed.)
    accept_warps = cfg["accept_warps"] or (16 if threshold else 1)
    accept_meta = dict(K=num_k, KP=next_pow2(k_plus_1), HAS_DRAFT_LOGITS=has_draft, RAGGED=ragged,
                       BLOCK_ROWS=accept_rows, NCB=ncb, num_warps=accept_warps, SCREEN=threshold,
                       GB=slab, PARTS=parts, GW=race_gw, FAST_LOG=cfg["fast_log"], LAZY=lazy,
                       **later)  # fmt: skip
    race_meta = dict(K=num_k, BLOCK_ROWS=race_rows,
                     BLOCK_V=cfg["race_block"], TILES=cfg["race_tiles"],
                     GW=race_gw, TILES_P2=race_slots,
                     FAST_LOG=cfg["fast_log"], P_IN_MERGE=bool(cfg["race_p_in_merge"]) and not screen,
                     NCB2=min(next_pow2(nc2), 64), SCREEN=screen, PARTS=parts, SHARED_TAU=shared_tau,
                     POLL=race_poll, SPINS=spins, SEEDED=seeded, RESET=tail, KP=next_pow2(k_plus_1),
                     TAU_LAZY=shared_tau and bool(cfg["race_tau_lazy"]),
                     NOISE_ONCE=screen and bool(cfg["race_noise_once"]),
                     num_warps=cfg["race_warps"],
                     **later)  # fmt: skip
    race_grid = (race_blocks, nc2)
    if not has_draft:  # the pick replaces the race: one program per request block over row j's groups
        pick_rows = _rows_within_tile(cfg["race_rows"], slab * parts)
        race_meta = dict(K=num_k, BLOCK_ROWS=pick_rows, GB=slab, PARTS=parts,
                         GW=max(4, min(GROUP_TOKENS, next_pow2(vocab))), FAST_LOG=cfg["fast_log"],
                         POLL=pick_poll, SPINS=spins, RESET=tail, KP=next_pow2(k_plus_1),
                         num_warps=cfg["pick_warps"], **later)  # fmt: skip
        race_grid = (cdiv(batch, pick_rows),)
    # the stats pass: target rows, and draft rows (classic) in programs of their own (axis 2)
    # (lazy: the same programs on one axis, _logits_stats_kernel)
    stats_grid = (cdiv(num_rows, cfg["stats_rows"]), nc1, 2 if has_draft else 1)
    if lazy:
        blocks, _, sides = stats_grid
        # the row blocks before position stats_late_from's (all of them with late_chunks 1): a program per
        # chunk; the later ones a program per late_chunks chunks (_logits_stats_kernel)
        head = blocks
        if late_chunks > 1:
            head = min(cdiv(cfg["stats_late_from"] * batch, cfg["stats_rows"]), blocks)
        stats_grid = ((head * nc1 + (blocks - head) * cdiv(nc1, late_chunks)) * sides,)
    grids = (stats_grid, (accept_blocks,), race_grid)
    metas = (stats_meta, accept_meta, race_meta)
    # the launches: all three, or with stats_tail the stats pass and the pick
    stages = (0, 2) if tail else (0, 1, 2)
    grids, metas = tuple(grids[s] for s in stages), tuple(metas[s] for s in stages)
    scratch = (tmax, tsum, targ, dmax, dsum, row_f, row_i, best, best_idx, arrivals, gmax, gsum, state,
               stats_arrivals, race_tau)  # fmt: skip
    plan = (key, grids, scratch, metas, (nc1, nc2, num_parts, num_groups), stages)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _launch(lg, x, dl, temperature, seeds, offsets, n, cfg, signature=None) -> SampleResult:
    """The launches (three; two with stats_tail, the plan's stages) on validated tensors. `signature`:
    the call's `tensor_signature`, under which the launch is remembered for repeat calls (default config
    only)."""
    batch, k_plus_1, vocab = lg.shape
    num_k = k_plus_1 - 1
    device = lg.device
    result = empty_result(batch, k_plus_1, device)
    if batch == 0:
        return result

    has_draft = dl is not None and num_k > 0
    st = lg.stride()
    sd = dl.stride() if has_draft else (0, 0, 0)
    sx = x.stride() if num_k > 0 else (0, 0)
    sn = n.stride(0) if n is not None else 0
    lane_i32 = stats_lane_i32(cfg, vocab, st[2], sd[2])
    plan_args = (device, batch, k_plus_1, vocab, has_draft, n is not None, lane_i32, cfg)
    key, grids, scratch, metas, counts, stages = _plan(*plan_args)
    sizes = (batch, vocab, *counts, st, sd, sx, sn, temperature.stride(0), seeds.stride(0), offsets.stride(0))
    args = _kernel_args(lg, x, dl, temperature, seeds, offsets, n, result, scratch, sizes)
    # launch_keyed's contract: the plan key holds the shape, the config and every constexpr; add the
    # caller's tensors' dtypes, 16-byte alignments and strides (scratch and outputs: fixed, aligned)
    inputs = (*args[1][:5], seeds, offsets)  # the accept kernel's: logits, draft, ids, temperature, counts
    call = (key, *[t.dtype for t in inputs[:5]], *sizes[6:], tuple(t.data_ptr() & 15 == 0 for t in inputs))
    last_kernel = _logits_race_kernel if has_draft else _logits_pick_kernel
    # three launches, or fewer (stats_tail: the plan's stages say which)
    kernels = tuple((_logits_stats_kernel, _logits_accept_kernel, last_kernel)[s] for s in stages)
    keys = tuple(
        (("stats", call), ("accept", call), ("race" if has_draft else "pick", call))[s] for s in stages
    )
    args = tuple(args[s] for s in stages)
    for kernel, grid, launch_key, kernel_args, meta in zip(kernels, grids, keys, args, metas, strict=True):
        launch_keyed(kernel, grid, launch_key, kernel_args, meta)
    if signature is not None:
        go = tuple(bind_keyed(*launch) for launch in zip(kernels, grids, keys, metas, strict=True))
        remember(_REPEATS, signature, _RepeatLogits(plan_args, sizes, go, stages))
    return result


def _kernel_args(lg, x, dl, temperature, seeds, offsets, n, result, scratch, sizes) -> tuple:
    """The three kernels' arguments before their constexprs: (stats, accept, race or pick). Absent
    inputs are stood in for by tensors the constexprs keep unread (the logits, the tokens output)."""
    tokens, num_accepted, fallback, valid = result
    tmax, tsum, targ, dmax, dsum, row_f, row_i, best, best_idx, arrivals, gmax, gsum = scratch[:12]
    state, stats_arrivals, race_tau = scratch[12:]
    batch, vocab, nc1, nc2, num_parts, num_groups, st, sd, sx, sn, s_temp, s_seed, s_offset = sizes
    has_draft = dl is not None and lg.shape[1] > 1
    d_arg = dl if has_draft else lg
    x_arg = x if lg.shape[1] > 1 else tokens
    n_arg = n if n is not None else tokens
    stats = (lg, d_arg, temperature, n_arg, tmax, tsum, targ, dmax, dsum, gmax, gsum, x_arg, seeds, offsets,
             state, stats_arrivals, tokens, num_accepted, fallback, valid, row_f, row_i, race_tau, batch,
             vocab, nc1, num_parts, *st, *sd, s_temp, sn, *sx, s_seed, s_offset)  # fmt: skip
    accept = (lg, d_arg, x_arg, temperature, n_arg, seeds, offsets, tmax, tsum, targ, dmax, dsum, row_f,
              row_i, tokens, num_accepted, fallback, valid, gmax, gsum, state, batch, vocab, nc1, num_parts,
              num_groups, *st, *sd, *sx, s_temp, sn, s_seed, s_offset)  # fmt: skip
    if has_draft:
        last = (lg, d_arg, seeds, offsets, row_f, row_i, best, best_idx, arrivals, race_tau, tokens, fallback,
                valid, gmax, gsum, state, stats_arrivals, batch, vocab, nc2, num_parts, *st, *sd, s_seed,
                s_offset)  # fmt: skip
    else:
        last = (lg, seeds, offsets, row_f, row_i, gmax, gsum, state, stats_arrivals, tokens, fallback, valid,
                batch, vocab, num_parts, num_groups, *st, s_seed, s_offset)  # fmt: skip
    return stats, accept, last


class _RepeatLogits:
    """A remembered rejection_sample_logits launch (kernels/_call_signature.py): allocates the outputs,
    takes the plan's scratch (kept from its last call: KeptBuffers, else `_plan` again) and makes
    the plan's launches (three, or two with stats_tail), with the checks and the plan of the first call of
    its signature."""

    __slots__ = ("plan_args", "sizes", "go", "scratch", "stages")

    def __init__(self, plan_args: tuple, sizes: tuple, go: tuple, stages: tuple) -> None:
        self.plan_args = plan_args  # _plan's arguments: device, batch, K+1, V, flags, config
        self.sizes = sizes  # the kernels' int arguments: batch, vocab, the plan's counts, strides
        self.go = go  # bind_keyed's launches: stats, accept, race or pick
        self.scratch = KeptBuffers()  # the plan's scratch
        self.stages = stages  # which of _kernel_args's three argument tuples go launches take

    def __call__(self, lg, x, dl, temperature, seeds, offsets, n) -> SampleResult:
        device, batch, k_plus_1 = self.plan_args[:3]
        result = empty_result(batch, k_plus_1, device)
        scratch = self.scratch.get(device, lambda: _plan(*self.plan_args)[2])
        args = _kernel_args(lg, x, dl, temperature, seeds, offsets, n, result, scratch, self.sizes)
        for go, stage in zip(self.go, self.stages, strict=True):  # three launches, or fewer (stats_tail)
            go(args[stage])
        return result


_REPEATS = call_memo()  # tensor_signature -> _RepeatLogits
