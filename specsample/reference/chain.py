"""Float64 numpy reference of the chain rejection sampler (classic and one-hot drafts).

`chain_rejection_reference` implements docs/semantics.md to the letter: given the kernel's inputs and
the kernel's uniforms it returns the kernel's outputs, computed in float64, plus an `ambiguous` flag
for rows whose result could change under a relative perturbation `tol` of the compared quantities
(those rows are excluded from token-for-token coupling tests).

It is vectorised over the batch: the acceptance tests are gathers over [B, K], the first rejection
is an argmax over a boolean matrix and the emitted token is one cumsum and one comparison over the
gathered [rows, V] residual rows, processed in row chunks that fit in cache. Inputs may be stride-0
broadcast views (`np.broadcast_to`): only the gathered rows are ever materialised.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specsample.reference.philox import STREAM_CHAIN_UNIFORM, chain_uniforms

# Every uniform is used at u + 2^-25: the midpoint of u's cell when u is a float32 uniform on the
# 2^-24 grid (torch.rand, the Philox uniforms). At u itself (the cell's left end), u = 0, which has
# probability 2^-24, would emit the first token of positive residual mass however small its mass,
# and accept a draft however small p(x) / q(x): a bias of 2^-24 towards events of negligible
# probability. `specsample verify --budget full` caught the first (H200 run 16, a token of relative
# mass 6e-22 emitted once in 8e6 rows). docs/semantics.md.
UNIFORM_HALF_STEP = 2.0**-25

# Elements of one [rows, V] float64 work array: chunks of rows are sized to stay cache-friendly.
_CHUNK_ELEMENTS = 1 << 17
# Up to this vocabulary size cumsum runs as a loop over columns (faster for short rows).
_COLUMN_LOOP_MAX_V = 64


class ChainReferenceResult(NamedTuple):
    """Output of `chain_rejection_reference` (numpy arrays).

    tokens         [B, K+1] int64: accepted drafts, then the emitted token (-1 when `valid` is
                   False), then -1 padding.
    num_accepted   [B] int64: a, the number of accepted drafts, 0 <= a <= n_b.
    fallback       [B] bool: a draft was rejected and its residual had no mass (norm_sum == 0), so
                   the token was drawn from the cleaned target row itself.
    valid          [B] bool: the distribution the token was drawn from had positive mass.
    ambiguous      [B] bool: a decision taken for this row lies within relative `tol` of its
                   boundary (docs/semantics.md, "Ambiguity"), leaving out the comparisons that
                   no perturbation can flip: an acceptance test with clean(p)(x) == 0 (u q < 0 is
                   never true: this keeps the u = 0 `<=` case in coupling tests), and inverse-CDF
                   boundaries other than cumsum(r)[v] of tokens with r[v] > 0 (a cumsum of 0
                   is never > u sum(r)). With tol = 0 only exact ties are flagged.
    emit_position  [B] int64: the target row j = a the emitted token was drawn from.
    """

    tokens: np.ndarray
    num_accepted: np.ndarray
    fallback: np.ndarray
    valid: np.ndarray
    ambiguous: np.ndarray
    emit_position: np.ndarray


def clean_mass(values) -> np.ndarray:
    """clean(a) = a if a is finite and a > 0 else 0, element-wise, as float64.

    NaN, +-inf and negative entries carry no mass (docs/semantics.md, "Sanitising").
    """
    a = np.array(values, dtype=np.float64)  # a fresh float64 copy
    np.fmax(a, 0.0, out=a)  # NaN, -inf and negatives -> 0 (fmax ignores NaN)
    a[a == np.inf] = 0.0
    return a


def chain_seeded_uniforms(seeds, offsets, num_draft_columns: int) -> np.ndarray:
    """[B, K+1] float64: the uniforms the seeded chain kernel draws for K = `num_draft_columns`.

    Column i is word 0 of philox(seed_b, offset_b, index=i, stream=STREAM_CHAIN_UNIFORM,
    position=0) mapped by `uniform_from_word` (reference.philox.chain_uniforms).
    """
    return chain_uniforms(seeds, offsets, int(num_draft_columns) + 1, STREAM_CHAIN_UNIFORM)


def _validate(target_probs, draft_token_ids, draft_probs, uniforms, num_draft_tokens):
    p = np.asarray(target_probs)
    x = np.asarray(draft_token_ids)
    if p.ndim != 3:
        raise ValueError(f"target_probs: expected 3 dims [B, K+1, V], got shape {p.shape}")
    if not (np.issubdtype(p.dtype, np.floating)):
        raise TypeError(f"target_probs: expected a floating dtype, got {p.dtype}")
    batch, k_plus_1, vocab = p.shape
    num_k = k_plus_1 - 1
    if num_k < 0 or vocab < 1:
        raise ValueError(f"target_probs: expected K+1 >= 1 and V >= 1, got shape {p.shape}")
    if x.shape != (batch, num_k):
        raise ValueError(f"draft_token_ids: expected shape {(batch, num_k)}, got {x.shape}")
    if not np.issubdtype(x.dtype, np.integer):
        raise TypeError(f"draft_token_ids: expected an integer dtype, got {x.dtype}")
    q = None
    if draft_probs is not None:
        q = np.asarray(draft_probs)
        if q.shape != (batch, num_k, vocab):
            raise ValueError(f"draft_probs: expected shape {(batch, num_k, vocab)}, got {q.shape}")
        if not np.issubdtype(q.dtype, np.floating):
            raise TypeError(f"draft_probs: expected a floating dtype, got {q.dtype}")
    u = np.asarray(uniforms)
    if u.shape != (batch, k_plus_1):
        raise ValueError(f"uniforms: expected shape {(batch, k_plus_1)}, got {u.shape}")
    if not np.issubdtype(u.dtype, np.floating):
        raise TypeError(f"uniforms: expected a floating dtype, got {u.dtype}")
    if num_draft_tokens is None:
        n = np.full(batch, num_k, dtype=np.int64)
    else:
        n = np.asarray(num_draft_tokens)
        if n.shape != (batch,):
            raise ValueError(f"num_draft_tokens: expected shape {(batch,)}, got {n.shape}")
        if not np.issubdtype(n.dtype, np.integer):
            raise TypeError(f"num_draft_tokens: expected an integer dtype, got {n.dtype}")
        n = np.clip(n.astype(np.int64), 0, num_k)
    return p, x.astype(np.int64, copy=False), q, u.astype(np.float64, copy=False), n


def chain_rejection_reference(
    target_probs,
    draft_token_ids,
    draft_probs=None,
    *,
    uniforms,
    num_draft_tokens=None,
    tol: float = 0.0,
) -> ChainReferenceResult:
    """Chain rejection sampling in float64, exactly as docs/semantics.md defines it.

    target_probs [B, K+1, V], draft_token_ids [B, K] (any integer, out-of-range ids are rejected
    and never used as indices), draft_probs [B, K, V] or None (one-hot drafts), uniforms [B, K+1]
    in [0, 1) (column i < K decides draft i, column K drives the inverse CDF), num_draft_tokens [B]
    (default K, clamped to [0, K]). Any float dtypes and strides (stride-0 broadcasts included).

    Guarantees: a deterministic function of its inputs; never returns a token v with
    clean(r)[v] == 0 for the row r it was drawn from, nor an id outside [0, V) other than -1.
    """
    if tol < 0 or not np.isfinite(tol):
        raise ValueError(f"tol: expected a finite value >= 0, got {tol}")
    p, x, q, u, n = _validate(target_probs, draft_token_ids, draft_probs, uniforms, num_draft_tokens)
    batch, k_plus_1, vocab = p.shape

    tokens = np.full((batch, k_plus_1), -1, dtype=np.int64)
    num_accepted = np.zeros(batch, dtype=np.int64)
    fallback = np.zeros(batch, dtype=bool)
    valid = np.zeros(batch, dtype=bool)
    ambiguous = np.zeros(batch, dtype=bool)

    rows_per_chunk = max(1, _CHUNK_ELEMENTS // vocab)
    for start in range(0, batch, rows_per_chunk):
        rows = slice(start, min(batch, start + rows_per_chunk))
        _chain_rows(
            p[rows], x[rows], None if q is None else q[rows], u[rows], n[rows], tol,
            tokens[rows], num_accepted[rows], fallback[rows], valid[rows], ambiguous[rows],
        )  # fmt: skip
    return ChainReferenceResult(tokens, num_accepted, fallback, valid, ambiguous, num_accepted.copy())


def _chain_rows(p, x, q, u, n, tol, tokens, num_accepted, fallback, valid, ambiguous) -> None:
    """One chunk of rows; writes into the output views."""
    rows, k_plus_1, vocab = p.shape
    num_k = k_plus_1 - 1
    row_ids = np.arange(rows)

    # --- acceptance tests, one position at a time over the rows still testing ---
    a = np.zeros(rows, dtype=np.int64)
    amb = np.zeros(rows, dtype=bool)
    testing = row_ids[n > 0]  # rows whose draft i is evaluated: drafts < i accepted and i < n
    for i in range(num_k):
        if testing.size == 0:
            break
        x_i = x[testing, i]
        in_vocab = (x_i >= 0) & (x_i < vocab)
        safe_x = np.where(in_vocab, x_i, 0)
        p_x = clean_mass(p[testing, i, safe_x])
        p_x[~in_vocab] = 0.0
        u_i = u[testing, i] + UNIFORM_HALF_STEP  # the midpoint of u_i's cell (exact in float64)
        if q is None:
            accept = u_i < p_x
            # |u - p_x| <= tol p_x; at p_x == 0 the test u < 0 can never flip
            near = (p_x > 0.0) & (np.abs(u_i - p_x) <= tol * p_x)
        else:
            q_x = clean_mass(q[testing, i, safe_x])
            q_x[~in_vocab] = 0.0
            scaled = u_i * q_x
            accept = (q_x > 0.0) & (scaled < p_x)
            # at p_x == 0 or q_x == 0 the draft is rejected whatever the perturbation
            near = (
                (q_x > 0.0) & (p_x > 0.0)
                & (np.abs(scaled - p_x) <= tol * np.maximum(p_x, scaled))
            )  # fmt: skip
        amb[testing[near]] = True
        testing = testing[accept]
        a[testing] += 1
        testing = testing[n[testing] > i + 1]

    # --- the distribution of the emitted token: residual at the first rejection, or bonus row ---
    rejected = a < n
    residual = clean_mass(p[row_ids, a])  # [rows, V]
    if num_k > 0:
        draft_pos = np.minimum(a, num_k - 1)
        if q is None:
            x_j = x[row_ids, draft_pos]
            hit = rejected & (x_j >= 0) & (x_j < vocab)
            residual[row_ids[hit], x_j[hit]] = 0.0
        else:
            q_row = clean_mass(q[row_ids, draft_pos])
            q_row[~rejected] = 0.0
            residual -= q_row
            np.maximum(residual, 0.0, out=residual)
    cum = _row_cumsum(residual)
    use_fallback = rejected & (cum[:, -1] <= 0.0)  # norm_sum == 0: draw from clean(p_j) instead
    if np.any(use_fallback):
        fb_rows = row_ids[use_fallback]
        residual[fb_rows] = clean_mass(p[fb_rows, a[fb_rows]])
        cum[fb_rows] = _row_cumsum(residual[fb_rows])

    # --- inverse CDF at u_K + 2^-25: smallest v with cumsum(r)[v] > (u_K + 2^-25) * sum(r) ---
    total = cum[:, -1]
    has_mass = total > 0.0
    threshold = (u[:, num_k] + UNIFORM_HALF_STEP) * total
    above = cum > threshold[:, None]
    token = np.argmax(above, axis=1)
    found = above[row_ids, token]
    lost = has_mass & ~found
    if np.any(lost):  # rounding guard: the largest v with r[v] > 0
        lost_rows = row_ids[lost]
        token[lost_rows] = vocab - 1 - np.argmax(residual[lost_rows, ::-1] > 0.0, axis=1)
    # Ambiguity: the boundaries nearest the threshold are cumsum(r)[token] and cumsum(r)[token-1]
    # (the latter only if positive: cumsum 0 precedes every token with mass and cannot flip).
    upper = cum[row_ids, token]
    lower = np.where(token > 0, cum[row_ids, np.maximum(token - 1, 0)], 0.0)
    band = tol * total
    amb |= has_mass & (
        (np.abs(upper - threshold) <= band) | ((lower > 0.0) & (np.abs(lower - threshold) <= band))
    )
    token[~has_mass] = -1

    # --- outputs ---
    if num_k > 0:
        tokens[:, :num_k] = np.where(np.arange(num_k)[None, :] < a[:, None], x, -1)
    tokens[row_ids, a] = token
    num_accepted[:] = a
    fallback[:] = use_fallback
    valid[:] = has_mass
    ambiguous[:] = amb


def _row_cumsum(values: np.ndarray) -> np.ndarray:
    """cumsum along axis 1, left to right (the same order and rounding as np.cumsum)."""
    if values.shape[1] > _COLUMN_LOOP_MAX_V:
        return np.cumsum(values, axis=1)
    out = values.copy()
    for v in range(1, values.shape[1]):  # short rows: a column loop beats the row-wise ufunc loop
        out[:, v] += out[:, v - 1]
    return out
