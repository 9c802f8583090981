"""Exact output laws of the samplers, computed in float64 without sampling.

Everything here follows docs/semantics.md (sanitising, invalid draft ids, the norm_sum == 0
fallback, rows without mass) with the uniforms taken as continuous U[0, 1): the acceptance
probability of draft x at position i is

    classic  alpha_i(x) = min(1, p_i(x) / q_i(x))   if 0 <= x < V and q_i(x) > 0, else 0
    one-hot  alpha_i(x) = min(1, p_i(x))            if 0 <= x < V, else 0

(p, q cleaned, not renormalised: an unnormalised row is used exactly as the sampler uses it). The
law of the emitted token is its distribution r normalised, r being the residual, the fallback row
or the bonus row (`emission_law`). The float64 reference, fed float64 uniforms, follows these laws
up to the 2^-53 resolution of its uniforms.

Names: `p` [K+1, V] target rows, `q` [K, V] draft rows (None = one-hot drafts), `x` [K] draft ids,
`n` the number of drafts used (default K). `a` is the number of accepted drafts; the emitted token
is drawn at position j = a. Joint laws are [n+1, V] arrays J[j, v] = P(a = j, token = v); the mass
of an emitted -1 (a row without mass) is reported separately as `invalid[j]`.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np

from specsample.reference.chain import clean_mass


class EmissionLaw(NamedTuple):
    """Law of one emitted token.

    probs     [V] float64: P(token = v); sums to 1 when `valid`, all zeros otherwise.
    fallback  True when the residual had no mass and the cleaned target row was used instead.
    valid     False when the distribution drawn from had no mass (the sampler emits -1).
    """

    probs: np.ndarray
    fallback: bool
    valid: bool


class ChainLaw(NamedTuple):
    """Joint law of (a, emitted token) of one chain-sampler row.

    accept_prob  [n]: P(draft i accepted | position i reached) (fixed drafts: alpha_i(x_i); drafts
                 drawn at random: beta_i = E[alpha_i(X_i)]).
    length       [n+1]: P(a = j).
    joint        [n+1, V]: P(a = j, token = v); joint.sum() + invalid.sum() == 1.
    invalid      [n+1]: P(a = j, token = -1).
    fallback     [n+1]: P(a = j, fallback path taken).
    """

    accept_prob: np.ndarray
    length: np.ndarray
    joint: np.ndarray
    invalid: np.ndarray
    fallback: np.ndarray

    def survival(self) -> np.ndarray:
        """[n+1]: P(a >= j) for j = 0..n."""
        return np.cumsum(self.length[::-1])[::-1]

    def token_law_given(self, j: int) -> np.ndarray:
        """[V]: P(token = v | a = j) (the residual, fallback or bonus law); sums to 1 minus the
        conditional probability of an emitted -1. ValueError when P(a = j) == 0."""
        if self.length[j] <= 0:
            raise ValueError(f"j: P(a = {j}) is 0, the conditional law is undefined")
        return self.joint[j] / self.length[j]

    def joint_with_invalid(self) -> np.ndarray:
        """[n+1, V+1]: `joint` with a last column holding the mass of the emitted -1."""
        return np.concatenate([self.joint, self.invalid[:, None]], axis=1)


def normalize(row) -> np.ndarray:
    """clean(row) / sum(clean(row)); all zeros when the row has no mass."""
    r = clean_mass(row)
    total = r.sum()
    return r / total if total > 0 else r


def emission_law(residual_row, fallback_row=None) -> EmissionLaw:
    """The law the sampler emits from: `residual_row` normalised, or, when it has no mass
    (norm_sum == 0) and a `fallback_row` is given, `fallback_row` normalised with fallback=True;
    valid=False (token -1) when the row finally used has no mass."""
    r = clean_mass(residual_row)
    fallback = False
    if r.sum() <= 0 and fallback_row is not None:
        r = clean_mass(fallback_row)
        fallback = True
    total = r.sum()
    if total <= 0:
        return EmissionLaw(np.zeros_like(r), fallback, False)
    return EmissionLaw(r / total, fallback, True)


def acceptance_prob(p_row, q_row, x: int) -> float:
    """alpha(x): P(draft x accepted) at one position (q_row None: one-hot draft)."""
    p = clean_mass(p_row)
    vocab = p.shape[0]
    if not 0 <= x < vocab:
        return 0.0
    if q_row is None:
        return float(min(1.0, p[x]))
    q_x = clean_mass(q_row)[x]
    if q_x <= 0:
        return 0.0
    return float(min(1.0, p[x] / q_x))


def rejection_emission_law(p_row, q_row, x: int) -> EmissionLaw:
    """Law of the token emitted when draft x is rejected at this position: the residual
    max(0, p - q) (one-hot: p with p[x] = 0 when 0 <= x < V), with the norm_sum == 0 fallback."""
    p = clean_mass(p_row)
    if q_row is None:
        residual = p.copy()
        if 0 <= x < p.shape[0]:
            residual[x] = 0.0
    else:
        residual = np.maximum(0.0, p - clean_mass(q_row))
    return emission_law(residual, fallback_row=p)


def bonus_emission_law(p_row) -> EmissionLaw:
    """Law of the token emitted when every draft was accepted: p normalised (no fallback)."""
    return emission_law(p_row)


def _check_rows(p, q, n):
    p = np.asarray(p)
    if p.ndim != 2:
        raise ValueError(f"p: expected [K+1, V], got shape {p.shape}")
    num_k = p.shape[0] - 1
    if q is not None and np.asarray(q).shape != (num_k, p.shape[1]):
        raise ValueError(f"q: expected shape {(num_k, p.shape[1])}, got {np.asarray(q).shape}")
    n = num_k if n is None else int(np.clip(n, 0, num_k))
    return p, q, n


def _assemble(accept, reject_laws, bonus: EmissionLaw, vocab: int) -> ChainLaw:
    """Joint law from per-position acceptance probabilities and emission laws on rejection.

    reject_laws[i] = (probs [V] of the emitted token times P(reject | reached), invalid mass,
    fallback mass), all conditional on reaching position i.
    """
    n = len(accept)
    reach = np.concatenate([[1.0], np.cumprod(accept)])  # P(a >= j), j = 0..n
    joint = np.zeros((n + 1, vocab))
    invalid = np.zeros(n + 1)
    fallback = np.zeros(n + 1)
    for j, (probs, inv, fb) in enumerate(reject_laws):
        joint[j] = reach[j] * probs
        invalid[j] = reach[j] * inv
        fallback[j] = reach[j] * fb
    joint[n] = reach[n] * bonus.probs
    invalid[n] = 0.0 if bonus.valid else reach[n]
    length = joint.sum(axis=1) + invalid
    return ChainLaw(np.asarray(accept, dtype=np.float64), length, joint, invalid, fallback)


def chain_conditional_law(p, q, x, n=None) -> ChainLaw:
    """Exact joint law of (a, emitted token) for one row with fixed drafts x.

    P(a = j) = prod_{i<j} alpha_i(x_i) * (1 - alpha_j(x_j)) for j < n, prod_{i<n} alpha_i(x_i) for
    j = n; given a = j < n the token follows `rejection_emission_law(p[j], q[j], x[j])`, given
    a = n it follows `bonus_emission_law(p[n])`.
    """
    p, q, n = _check_rows(p, q, n)
    x = np.asarray(x, dtype=np.int64)
    accept, reject_laws = [], []
    for i in range(n):
        q_i = None if q is None else q[i]
        alpha = acceptance_prob(p[i], q_i, int(x[i]))
        law = rejection_emission_law(p[i], q_i, int(x[i]))
        accept.append(alpha)
        reject_laws.append(
            ((1 - alpha) * law.probs, (1 - alpha) * (not law.valid), (1 - alpha) * law.fallback)
        )
    return _assemble(accept, reject_laws, bonus_emission_law(p[n]), p.shape[1])


def chain_marginal_law(p, q, n=None, *, draft_dist=None) -> ChainLaw:
    """Exact joint law of (a, emitted token) when draft i is drawn, once position i is reached,
    from `draft_dist[i]` (default: q[i] normalised; required for one-hot drafts, q = None).

    The draft at position i is independent of everything before it given that i is reached, so
    P(a >= j) = prod_{i<j} beta_i with beta_i = sum_x d_i(x) alpha_i(x) (`accepted_length_law`),
    and on rejection the token law is sum_x d_i(x) (1 - alpha_i(x)) law_i(x) / (1 - beta_i).
    """
    p, q, n = _check_rows(p, q, n)
    vocab = p.shape[1]
    dists = _draft_dists(q, draft_dist, n, vocab)
    accept, reject_laws = [], []
    for i in range(n):
        q_i = None if q is None else q[i]
        probs, inv, fb, beta = np.zeros(vocab), 0.0, 0.0, 0.0
        for x in np.flatnonzero(dists[i] > 0):
            alpha = acceptance_prob(p[i], q_i, int(x))
            law = rejection_emission_law(p[i], q_i, int(x))
            w = dists[i][x]
            beta += w * alpha
            probs += w * (1 - alpha) * law.probs
            inv += w * (1 - alpha) * (not law.valid)
            fb += w * (1 - alpha) * law.fallback
        accept.append(beta)
        reject_laws.append((probs, inv, fb))
    return _assemble(accept, reject_laws, bonus_emission_law(p[n]), vocab)


def _draft_dists(q, draft_dist, n, vocab) -> np.ndarray:
    if draft_dist is None:
        if q is None:
            raise ValueError("draft_dist: required when q is None (one-hot drafts)")
        draft_dist = q
    d = np.asarray(draft_dist)
    if d.ndim != 2 or d.shape[0] < n or d.shape[1] != vocab:
        raise ValueError(f"draft_dist: expected [>= {n}, {vocab}], got shape {d.shape}")
    return np.stack([normalize(row) for row in d[:n]]) if n else np.zeros((0, vocab))


def accepted_length_law(p, q, n=None, *, draft_dist=None) -> np.ndarray:
    """[n+1]: P(a >= j) = prod_{i<j} beta_i, computed directly from the rows.

    Classic drafts drawn from q (normalised p and q): beta_i = sum_v min(p_i(v), q_i(v)). In
    general beta_i = sum_x d_i(x) alpha_i(x) with d_i = `draft_dist[i]` (default q[i] normalised).
    """
    p, q, n = _check_rows(p, q, n)
    dists = _draft_dists(q, draft_dist, n, p.shape[1])
    betas = []
    for i in range(n):
        p_i = clean_mass(p[i])
        if q is None:
            alpha = np.minimum(1.0, p_i)
        else:
            q_i = clean_mass(q[i])
            alpha = np.where(q_i > 0, np.minimum(1.0, p_i / np.where(q_i > 0, q_i, 1.0)), 0.0)
        betas.append(float(np.dot(dists[i], alpha)))
    return np.concatenate([[1.0], np.cumprod(betas)])


def position_token_law(p_row, q_row=None, *, draft_dist=None) -> np.ndarray:
    """[V]: law of the token written at a position, given that the position is reached: the draft
    x ~ d (default q normalised) if accepted, else the token emitted on its rejection; the -1 of an
    invalid emission is not included (the result then sums to less than 1).

    Key identity (losslessness), for p with sum(p) = 1:
    - classic, drafts x ~ q with sum(q) = 1: q(v) min(1, p(v)/q(v)) = min(p(v), q(v)), the residual
      (p - q)^+ has mass sum_v (p - q)^+ = 1 - beta, so the law is
      min(p(v), q(v)) + (1 - beta) (p(v) - q(v))^+ / (1 - beta) = p(v) (beta = 1, p = q: no
      rejection happens; beta = 0, disjoint supports: always rejected, residual = p);
    - one-hot verification with drafts from any law d:
      d(v) p(v) + sum_{x != v} d(x) (1 - p(x)) p(v) / (1 - p(x)) = p(v) (a draft with p(x) = 1 is
      always accepted, so the fallback never carries mass).
    In float64 the identities hold to rounding (~1e-15).
    """
    p_row = np.asarray(p_row)
    vocab = p_row.shape[0]
    d = normalize(q_row if draft_dist is None else draft_dist)
    if draft_dist is None and q_row is None:
        raise ValueError("draft_dist: required when q_row is None (one-hot drafts)")
    out = np.zeros(vocab)
    for x in np.flatnonzero(d > 0):
        alpha = acceptance_prob(p_row, q_row, int(x))
        out[x] += d[x] * alpha
        out += d[x] * (1 - alpha) * rejection_emission_law(p_row, q_row, int(x)).probs
    return out


def plackett_luce_law(weights, num_samples: int) -> np.ndarray:
    """Law of an ordered draw of `num_samples` distinct tokens without replacement, each draw
    proportional to the remaining weights (the law of the top-n of p / E, E ~ Exp(1) i.i.d.).

    Returns an array of shape [V] * num_samples: P(first = v1, ..., n-th = vn)
    = prod_k w(v_k) / (W - w(v_1) - ... - w(v_{k-1})), zero for tuples with repeats.
    weights are cleaned; at least `num_samples` tokens must have positive mass (ValueError
    otherwise: the order among zero-weight tokens is not a law this function defines).
    """
    w = clean_mass(weights)
    if w.ndim != 1:
        raise ValueError(f"weights: expected [V], got shape {w.shape}")
    if num_samples < 1:
        raise ValueError(f"num_samples: expected >= 1, got {num_samples}")
    if np.count_nonzero(w) < num_samples:
        raise ValueError(
            f"weights: {np.count_nonzero(w)} tokens with mass, fewer than num_samples={num_samples}"
        )
    vocab = w.shape[0]
    total = w.sum()
    law = np.zeros((vocab,) * num_samples)
    support = np.flatnonzero(w > 0)
    for combo in itertools.permutations(support.tolist(), num_samples):
        prob, remaining = 1.0, total
        for v in combo:
            prob *= w[v] / remaining
            remaining -= w[v]
        law[combo] = prob
    return law
