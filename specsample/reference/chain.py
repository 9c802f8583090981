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

# Elements of one [rows, V] float64 work array: chunks of rows are sized to stay cache-friendly.
_CHUNK_ELEMENTS = 1 << 18


class ChainReferenceResult(NamedTuple):
    """Output of `chain_rejection_reference` (numpy arrays).

    tokens         [B, K+1] int64: accepted drafts, then the emitted token (-1 when `valid` is
                   False), then -1 padding.
    num_accepted   [B] int64: a, the number of accepted drafts, 0 <= a <= n_b.
    fallback       [B] bool: a draft was rejected and its residual had no mass (norm_sum == 0), so
                   the token was drawn from the cleaned target row itself.
    valid          [B] bool: the distribution the token was drawn from had positive mass.
    ambiguous      [B] bool: some decision taken for this row lies within relative `tol` of its
                   boundary (always False for decisions that no perturbation can flip).
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
    a = np.asarray(values, dtype=np.float64)
    # NaN compares False, +inf fails `< inf`, -inf and negatives fail `> 0`.
    return np.where((a > 0.0) & (a < np.inf), a, 0.0)


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

    # --- acceptance tests, all positions at once: gathers p[i, x_i], q[i, x_i] ---
    in_vocab = (x >= 0) & (x < vocab)
    safe_x = np.where(in_vocab, x, 0)
    p_x = clean_mass(np.take_along_axis(p[:, :num_k, :], safe_x[:, :, None], axis=2)[:, :, 0])
    p_x = np.where(in_vocab, p_x, 0.0)
    u_draft = u[:, :num_k]
    if q is None:
        accept = in_vocab & (u_draft < p_x)
        # |u - p_x| <= tol p_x; at p_x == 0 the test u < 0 can never flip.
        near = in_vocab & (p_x > 0) & (np.abs(u_draft - p_x) <= tol * p_x)
    else:
        q_x = clean_mass(np.take_along_axis(q, safe_x[:, :, None], axis=2)[:, :, 0])
        q_x = np.where(in_vocab, q_x, 0.0)
        scaled = u_draft * q_x
        accept = in_vocab & (q_x > 0) & (scaled < p_x)
        near = (
            in_vocab & (q_x > 0) & (p_x > 0)
            & (np.abs(scaled - p_x) <= tol * np.maximum(p_x, scaled))
        )  # fmt: skip
    position = np.arange(num_k)[None, :]
    accept &= position < n[:, None]
    # a = index of the first False in [accept_0 .. accept_{K-1}, False]
    a = np.argmax(~np.concatenate([accept, np.zeros((rows, 1), dtype=bool)], axis=1), axis=1)
    decided = (position <= a[:, None]) & (position < n[:, None])  # the tests actually evaluated
    amb = np.any(near & decided, axis=1)

    # --- the emitted token: residual at the first rejection, or the bonus row ---
    rejected = a < n
    target_row = clean_mass(p[row_ids, a])  # [rows, V]
    residual = target_row.copy()
    draft_pos = np.minimum(a, max(num_k - 1, 0))
    if num_k > 0:
        rej_rows = np.nonzero(rejected)[0]
        if q is None:
            x_j = x[rej_rows, draft_pos[rej_rows]]
            ok_j = in_vocab[rej_rows, draft_pos[rej_rows]]
            residual[rej_rows[ok_j], x_j[ok_j]] = 0.0
        else:
            q_row = clean_mass(q[rej_rows, draft_pos[rej_rows]])
            residual[rej_rows] = np.maximum(0.0, residual[rej_rows] - q_row)
    cum = np.cumsum(residual, axis=1)
    no_mass = cum[:, -1] <= 0.0
    use_fallback = rejected & no_mass
    if np.any(use_fallback):
        residual[use_fallback] = target_row[use_fallback]
        cum[use_fallback] = np.cumsum(target_row[use_fallback], axis=1)
    total = cum[:, -1]
    has_mass = total > 0.0
    threshold = u[:, num_k] * total
    above = cum > threshold[:, None]
    found = np.any(above, axis=1)
    token = np.argmax(above, axis=1)
    # rounding guard: the largest v with r[v] > 0
    last_positive = vocab - 1 - np.argmax(residual[:, ::-1] > 0.0, axis=1)
    token = np.where(found, token, last_positive)
    token = np.where(has_mass, token, -1)
    # inverse-CDF ambiguity: a boundary cumsum(r)[v] of a token with mass within tol * sum(r)
    amb |= has_mass & np.any(
        (residual > 0.0) & (np.abs(cum - threshold[:, None]) <= tol * total[:, None]), axis=1
    )

    # --- outputs ---
    if num_k > 0:
        keep = position < a[:, None]
        tokens[:, :num_k] = np.where(keep, x, -1)
    tokens[row_ids, a] = token
    num_accepted[:] = a
    fallback[:] = use_fallback
    valid[:] = has_mass
    ambiguous[:] = amb
