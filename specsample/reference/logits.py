"""Float64 numpy reference of `specsample.rejection_sample_logits`, and the exact law of its output.

Semantics (docs/semantics.md transposed to logits; the kernel module docstring restates them):

- clean(l) = l if l is finite else -inf (NaN and +-inf logits carry no mass).
- Per request, temperature T: T == 0 greedy; 0 < T < inf sampled with T_eff = T clamped to
  [2^-126, 2^100] (1/T_eff is a normal float32 in the kernel);
  anything else makes the row invalid (tokens all -1, num_accepted 0, valid False, fallback False).
- Sampled rows: p_i = softmax(clean(target_logits[i]) / T_eff), q_i = softmax(clean(draft_logits[i]) / T_eff)
  (a row with no finite logit is all zeros), then the chain semantics of docs/semantics.md with
  u_i = chain_uniforms(seed, offset, K, stream=STREAM_LOGITS_UNIFORM)[i] + 2^-25 (its 2^-24 cell's
  midpoint, docs/semantics.md) for the acceptance tests, and the emitted token drawn by the grouped
  draw (`grouped_draw`) from the residual r (or from p on the fallback / bonus path): groups of 256
  tokens, the group with the largest log R_g - log E_g (ties: the smaller group), then the first token
  of it with C_v > u_g C_last; (E_g, u_g) = `reference.gumbel.group_noise` (STREAM_LOGITS_GROUP,
  position=j); r_v = 0 never wins.
- Greedy rows: accept x_i iff it is in range and equals the smallest argmax of clean(target_logits[i]);
  the emitted token is the argmax of row j (-1 and not valid if that row has no finite logit).

Every comparison is made in logs (log p = (l - M) / T - log S in float64), so it stays exact where
p or q underflow (tiny T): q(x) > 0 means a finite draft logit, and a residual can live entirely
on tokens whose probabilities are below the float64 range.

Ambiguity (for coupling tests). A row is ambiguous when one of its decisions could flip under the
kernel's float32 arithmetic, with slack s = tol + ROUNDING * (sum of the |log-probabilities| compared):
an acceptance test up to the first rejection with |log u + log q(x) - log p(x)| <= s (one-hot:
|log u - log p(x)| <= s); a residual whose support could change (tokens with r_v = 0 but
|log p_v - log q_v| <= s, "ghosts", which the kernel may give up to tol (p_v + q_v)) where that
could empty it or fill an empty one; or a grouped draw within its error bound (`grouped_draw`).
Greedy rows are never ambiguous.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specsample.reference.chain import UNIFORM_HALF_STEP
from specsample.reference.gumbel import GROUP_TOKENS, group_blocks, group_noise, inverse_cdf_in_group
from specsample.reference.philox import STREAM_LOGITS_GROUP, STREAM_LOGITS_UNIFORM, chain_uniforms

MIN_TEMPERATURE = 2.0**-126  # sampled rows use T clamped to [MIN_TEMPERATURE, MAX_TEMPERATURE],
MAX_TEMPERATURE = 2.0**100  # as the kernel does
ROUNDING = 1e-6  # float32 relative error budget of the kernel's log-probabilities (~16 ulp)


class LogitsReferenceResult(NamedTuple):
    """`SampleResult` fields as numpy arrays, plus `ambiguous` [B] bool (see the module docstring)."""

    tokens: np.ndarray
    num_accepted: np.ndarray
    fallback: np.ndarray
    valid: np.ndarray
    ambiguous: np.ndarray


def clean_logits(logits) -> np.ndarray:
    """float64 copy with NaN and +-inf replaced by -inf."""
    a = np.asarray(logits, dtype=np.float64)
    return np.where(np.isfinite(a), a, -np.inf)


def row_kinds(temperature) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sampled, greedy, T_eff) per request: sampled iff 0 < T < inf, greedy iff T == 0."""
    t = np.asarray(temperature, dtype=np.float64)
    sampled = (t > 0) & np.isfinite(t)
    greedy = t == 0
    t_eff = np.where(sampled, np.clip(t, MIN_TEMPERATURE, MAX_TEMPERATURE), 1.0)
    return sampled, greedy, t_eff


def softmax_logits(logits, temperature) -> np.ndarray:
    """softmax(clean(logits) / T_eff) over the last axis in float64; `temperature` broadcasts
    against the leading axes ([B] for [B, ..., V] logits). Rows without a finite logit are 0."""
    cl = clean_logits(logits)
    t = np.asarray(temperature, dtype=np.float64)
    t = np.clip(t, MIN_TEMPERATURE, MAX_TEMPERATURE).reshape(t.shape + (1,) * (cl.ndim - t.ndim))
    top = cl.max(axis=-1, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        z = np.exp((cl - shift) / t)
    z = np.where(np.isfinite(cl), z, 0.0)
    total = z.sum(axis=-1, keepdims=True)
    return np.divide(z, total, out=np.zeros_like(z), where=total > 0)


def log_softmax_logits(logits, temperature) -> np.ndarray:
    """log softmax(clean(logits) / T_eff) over the last axis in float64 (-inf = no mass; rows without
    a finite logit are all -inf). Exact in logs where softmax_logits would underflow (tiny T)."""
    cl = clean_logits(logits)
    t = np.asarray(temperature, dtype=np.float64)
    t = np.clip(t, MIN_TEMPERATURE, MAX_TEMPERATURE).reshape(t.shape + (1,) * (cl.ndim - t.ndim))
    top = cl.max(axis=-1, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        z = np.where(np.isfinite(cl), (cl - shift) / t, -np.inf)
        total = np.exp(z).sum(axis=-1, keepdims=True)
        return np.where(total > 0, z - np.log(total), -np.inf)


def first_argmax(logits) -> tuple[np.ndarray, np.ndarray]:
    """(smallest index of the max of clean(logits) over the last axis, row has a finite logit)."""
    cl = clean_logits(logits)
    return cl.argmax(axis=-1), np.isfinite(cl).any(axis=-1)


def _as_numpy(name, a, dtype=None):
    if a is None:
        return None
    if hasattr(a, "detach"):  # torch tensor, converted exactly (bf16/fp16 -> float32 -> float64)
        t = a.detach().cpu()
        a = t.float().numpy() if t.is_floating_point() else t.numpy()
    out = np.asarray(a, dtype=dtype)
    return out


def rejection_sample_logits_reference(
    target_logits,
    draft_token_ids,
    draft_logits=None,
    *,
    temperature,
    seeds,
    offsets,
    num_draft_tokens=None,
    tol: float = 1e-4,
) -> LogitsReferenceResult:
    """The kernel's output computed in float64 from the same Philox words (numpy arrays or torch
    tensors in; numpy out). Vectorised over the batch: materialises log p and log q (every decision
    is taken in logs, so probabilities below the float64 range still compare exactly)."""
    lg = _as_numpy("target_logits", target_logits, np.float64)
    batch, k_plus_1, vocab = lg.shape
    num_k = k_plus_1 - 1
    x = _as_numpy("draft_token_ids", draft_token_ids, np.int64).reshape(batch, num_k)
    dl = _as_numpy("draft_logits", draft_logits, np.float64)
    temp = _as_numpy("temperature", temperature, np.float64).reshape(batch)
    seeds = _as_numpy("seeds", seeds, np.int64).reshape(batch)
    offsets = _as_numpy("offsets", offsets, np.int64).reshape(batch)
    if num_draft_tokens is None:
        n = np.full(batch, num_k, dtype=np.int64)
    else:
        n = np.clip(_as_numpy("num_draft_tokens", num_draft_tokens, np.int64).reshape(batch), 0, num_k)
    classic = dl is not None and num_k > 0

    sampled, greedy, t_eff = row_kinds(temp)
    lp = log_softmax_logits(lg, t_eff)  # [B, K+1, V], -inf = no mass
    lq = log_softmax_logits(dl, t_eff) if classic else None  # [B, K, V]
    arg, nonempty = first_argmax(lg)  # [B, K+1]
    u = chain_uniforms(seeds, offsets, max(num_k, 1), stream=STREAM_LOGITS_UNIFORM)[:, :num_k]
    log_u = np.log(u + UNIFORM_HALF_STEP)  # the midpoint of each uniform's 2^-24 cell (never 0)
    rows = np.arange(batch)

    def slack(*logs):  # the kernel's float32 error on log-probabilities of these magnitudes
        return tol + ROUNDING * sum(np.where(np.isfinite(v), np.abs(v), 0.0) for v in logs)

    alive = sampled | greedy
    a = np.zeros(batch, dtype=np.int64)
    ambiguous = np.zeros(batch, dtype=bool)
    for i in range(num_k):
        active = alive & (i < n)
        xi = x[:, i]
        ok = active & (xi >= 0) & (xi < vocab)
        xs = np.where(ok, xi, 0)
        lp_x = np.where(ok, lp[rows, i, xs], -np.inf)
        with np.errstate(invalid="ignore"):
            if classic:  # m q(x) < p(x), m = u + 2^-25, in logs: exact far below float64 range
                lq_x = np.where(ok, lq[rows, i, xs], -np.inf)
                lhs = log_u[:, i] + lq_x
                acc_s = ok & np.isfinite(lq_x) & (lhs < lp_x)
                amb = ok & np.isfinite(lq_x) & (np.abs(lhs - lp_x) <= slack(lp_x, lq_x, log_u[:, i]))
            else:
                acc_s = ok & (log_u[:, i] < lp_x)
                amb = ok & (np.abs(log_u[:, i] - lp_x) <= slack(lp_x, log_u[:, i]))
        acc_g = ok & (xi == arg[:, i]) & nonempty[:, i]
        accept = np.where(sampled, acc_s, acc_g)
        ambiguous |= active & sampled & amb
        a += accept
        alive = active & accept
    a = np.where(sampled | greedy, a, 0)
    j = np.minimum(a, n)
    rejected = j < n

    # emitted token, sampled rows: the grouped draw (grouped_draw) from the residual of row j, in logs:
    # log r = log p + log(1 - q/p) where p > q (classic), log p off x_j (one-hot), log p (bonus)
    lp_j = lp[rows, j]  # [B, V]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if classic:
            lq_j = np.where(rejected[:, None], lq[rows, np.minimum(j, num_k - 1)], -np.inf)
            gap = np.where(lp_j > lq_j, lq_j - lp_j, -1.0)  # log(q/p) < 0 where r > 0
            log_r = np.where(lp_j > lq_j, lp_j + np.log(-np.expm1(gap)), -np.inf)
            tie = np.abs(lp_j - lq_j) <= slack(lp_j, lq_j)
            near = rejected[:, None] & np.isfinite(lp_j) & tie  # r could change sign
        else:
            lq_j = np.full_like(lp_j, -np.inf)
            log_r = lp_j.copy()
            xj = np.where(rejected, x[rows, np.minimum(j, num_k - 1)], -1) if num_k else np.full(batch, -1)
            hit = rejected & (xj >= 0) & (xj < vocab)
            log_r[hit, np.where(hit, xj, 0)[hit]] = -np.inf
            near = np.zeros_like(lp_j, dtype=bool)
        has_r = np.isfinite(log_r).any(axis=1)
        fallback = sampled & rejected & ~has_r
        solid = np.isfinite(log_r) & ~near
        ambiguous |= sampled & rejected & ~has_r & near.any(axis=1)  # empty could become non-empty
        ambiguous |= sampled & rejected & has_r & ~solid.any(axis=1)  # non-empty could become empty
        weights = np.where(fallback[:, None], lp_j, log_r)
        ghost = ~fallback[:, None] & near & ~np.isfinite(log_r)  # r = 0 here, but barely
    lq_draw = np.where(fallback[:, None], -np.inf, lq_j)  # the fallback draws from p alone
    token_s, amb_draw = grouped_draw(weights, lp_j, lq_draw, ghost, seeds, offsets, j, tol)
    ambiguous |= sampled & amb_draw

    token_g = np.where(nonempty[rows, j], arg[rows, j], -1)
    token = np.where(sampled, token_s, np.where(greedy, token_g, -1))

    tokens = np.full((batch, k_plus_1), -1, dtype=np.int32)
    cols = np.arange(k_plus_1)[None, :]
    if num_k:
        tokens[:, :num_k] = np.where(cols[:, :num_k] < a[:, None], x, -1)
    tokens[rows, j] = np.where(sampled | greedy, token, tokens[rows, j])
    return LogitsReferenceResult(
        tokens=tokens,
        num_accepted=a.astype(np.int32),
        fallback=fallback,
        valid=token >= 0,
        ambiguous=ambiguous & (sampled | greedy),
    )


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """log sum exp over `axis`; -inf where every entry is -inf."""
    top = a.max(axis=axis, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(shift, axis) + np.log(np.exp(a - shift).sum(axis=axis))


def grouped_draw(log_w, log_p, log_q, ghost, seeds, offsets, position, tol: float = 1e-4):
    """The residual draw of every row ([B] int64 token, -1 where log_w has no finite entry) and
    whether it is ambiguous for a float32 kernel ([B] bool), from log weights log_w [B, V] (-inf = no
    mass) with the log p / log q [B, V] they came from (log q = -inf where no draft row is used) and
    `ghost` [B, V]: tokens without weight that the kernel's rounding could give up to tol (p + q).

    Groups g of 256 tokens, R_g = sum of w over g: the winning group is argmax_g log R_g - log E_g
    (ties: the smaller g), the token the first v of it with C_v > u_g C_last, C the cumulative sum of
    w over the group (the last token with weight if rounding leaves none); (E_g, u_g) = group_noise
    on STREAM_LOGITS_GROUP.
    A row is ambiguous where the kernel's error could change the group (a group score within
    err_g = tol (1 + sum(p + q) / R_g) + ROUNDING (sum((p + q)(|log p| + |log q|)) / R_g + |log R_g| +
    |log E_g|), sums over the group's weighted tokens, of the winner's; ghosts raise a group's upper
    bound by their mass) or the token (u_g C_last within ROUNDING (1 + sum(p + q) / R_g + ...) + ghost
    mass / R_g, relative to C_last, of a C_v: the float32 weights' error, without tol)."""
    log_w = np.asarray(log_w, dtype=np.float64)
    batch, vocab = log_w.shape
    rows = np.arange(batch)
    lw = group_blocks(log_w, -np.inf)
    lp = group_blocks(np.asarray(log_p, float), -np.inf)
    lq = group_blocks(np.asarray(log_q, float), -np.inf)
    gh = group_blocks(np.asarray(ghost, bool), False)
    e, u = group_noise(seeds, offsets, vocab, STREAM_LOGITS_GROUP, position)
    log_e = np.log(e)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        weighted = np.isfinite(lw)
        log_pq = np.logaddexp(lp, lq)  # log(p + q)
        mag = np.where(np.isfinite(lp), np.abs(lp), 0.0) + np.where(np.isfinite(lq), np.abs(lq), 0.0)
        mass = _logsumexp(lw, 2)  # [B, NG] log R_g
        cancel = np.exp(_logsumexp(np.where(weighted, log_pq, -np.inf), 2) - mass)
        spread = np.exp(_logsumexp(np.where(weighted, log_pq + np.log(mag), -np.inf), 2) - mass)
        fin = np.isfinite(mass)
        err = np.where(
            fin,
            tol * (1.0 + cancel) + ROUNDING * (spread + np.abs(np.where(fin, mass, 0.0)) + np.abs(log_e)),
            0.0,
        )
        log_ghost = np.log(tol) + _logsumexp(np.where(gh, log_pq, -np.inf), 2)
        score = mass - log_e
        winner = np.argmax(score, axis=1)  # the first maximum
        found = np.isfinite(score[rows, winner])
        lower = score[rows, winner] - err[rows, winner]
        upper = np.logaddexp(np.where(fin, mass + err, -np.inf), log_ghost) - log_e
        upper[rows, winner] = -np.inf
        amb = found & (upper.max(axis=1) >= lower)
        block = lw[rows, winner]  # [B, 256]
        top = block.max(axis=1, keepdims=True)
        w = np.where(np.isfinite(block), np.exp(block - np.where(np.isfinite(top), top, 0.0)), 0.0)
        token, near = inverse_cdf_in_group(w, u[rows, winner])
        ghost_share = np.exp(log_ghost[rows, winner] - mass[rows, winner])
        cdf_err = ROUNDING * (1.0 + cancel + spread)[rows, winner]  # float32 weights, float64 sums
        amb |= found & (near <= cdf_err + np.where(np.isfinite(ghost_share), ghost_share, 0.0))
    return np.where(found, winner * GROUP_TOKENS + token, -1).astype(np.int64), amb


def output_law(p, x, q=None, n=None) -> np.ndarray:
    """Exact law of (a, emitted token) for one request given float64 p [K+1, V], drafts x [K],
    q [K, V] (classic) or None (one-hot) and the draft count n (default K): array [K+1, V+1] whose
    entry [k, v] is P(a = k, token = v) and [k, V] is P(a = k, token = -1). The acceptance
    uniforms are treated as continuous (at its cells' midpoints the kernel's 2^-24 grid moves each
    beta by <= 2^-25, and a beta below 2^-25 to 0)."""
    p = np.asarray(p, dtype=np.float64)
    k_plus_1, vocab = p.shape
    num_k = k_plus_1 - 1
    n = num_k if n is None else int(np.clip(n, 0, num_k))
    law = np.zeros((k_plus_1, vocab + 1))
    reach = 1.0
    for i in range(n):
        xi = int(x[i])
        ok = 0 <= xi < vocab
        if q is not None:
            q_x = q[i, xi] if ok else 0.0
            beta = min(1.0, p[i, xi] / q_x) if q_x > 0 else 0.0
            r = np.maximum(p[i] - q[i], 0.0)
        else:
            beta = p[i, xi] if ok else 0.0
            r = p[i].copy()
            if ok:
                r[xi] = 0.0
        if r.sum() <= 0:
            r = p[i]
        law[i, :vocab] += reach * (1.0 - beta) * (r / r.sum() if r.sum() > 0 else 0.0)
        law[i, vocab] += reach * (1.0 - beta) * (r.sum() <= 0)
        reach *= beta
    bonus = p[n]
    law[n, :vocab] += reach * (bonus / bonus.sum() if bonus.sum() > 0 else 0.0)
    law[n, vocab] += reach * (bonus.sum() <= 0)
    return law


def acceptance_probabilities(p, x, q=None) -> np.ndarray:
    """beta_i = P(accept x_i | reached i): min(1, p_i(x_i) / q_i(x_i)) classic, p_i(x_i) one-hot."""
    p = np.asarray(p, dtype=np.float64)
    num_k = p.shape[-2] - 1
    beta = np.zeros(num_k)
    for i in range(num_k):
        xi = int(x[i])
        if not 0 <= xi < p.shape[-1]:
            continue
        if q is None:
            beta[i] = p[i, xi]
        elif q[i, xi] > 0:
            beta[i] = min(1.0, p[i, xi] / q[i, xi])
    return beta
