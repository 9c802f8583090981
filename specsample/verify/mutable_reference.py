"""Verify's own float64 chain sampler with switchable planted bugs: the base of reference mutants.

`chain_sample(..., bugs=frozenset())` follows docs/semantics.md exactly (a second, independent
implementation next to `specsample.reference.chain`; tests/verify checks that the two agree token for
token). Each name in `CHAIN_BUGS` switches on one planted bug, so the mutant catalogue can apply a bug
where patching a Triton kernel is impractical. `gumbel_sample` does the same for Gumbel-max sampling.

Every bug is a realistic one: most are bugs that shipped in SGLang, vLLM or FlashInfer (ANCHORS.md).
"""

from __future__ import annotations

import numpy as np

from specsample.reference.chain import UNIFORM_HALF_STEP
from specsample.reference.philox import (
    STREAM_CHAIN_UNIFORM,
    STREAM_GUMBEL,
    chain_uniforms,
    gumbel_exponentials,
)

CHAIN_BUGS = {
    "residual_from_p": "on rejection the token is drawn from p_j instead of the residual max(0, p_j - q_j)",
    "swapped_residual": "residual max(0, q_j - p_j) instead of max(0, p_j - q_j)",
    "unclamped_residual": "residual |p_j - q_j| (no clamp at zero)",
    "inverse_cdf_off_by_one": "inverse CDF searches the exclusive cumsum (returns the token after "
    "the right one)",
    "reused_coin": "the emitted token reuses the acceptance uniform u_j instead of u_K (SGLang before #7207)",
    "shared_column": "every column reads Philox index 0: draft and residual share one uniform (vLLM #47386)",
    "norm_sum_zero_last_token": "norm_sum == 0 emits token V-1 without fallback (SGLang's Triton kernel)",
    "norm_sum_zero_token0": "norm_sum == 0 emits token 0 without fallback (vLLM)",
    "le_accepts_zero_prob": "acceptance test u*q <= p: a zero-probability draft is accepted at u "
    "= 0 (SGLang #35771)",
    "acceptance_inverted": "acceptance test u*p < q (ratio inverted)",
    "invalid_draft_accepted": "draft ids are wrapped into [0, V) and non-finite q is used raw: -1 ids and "
    "q = -inf drafts get accepted (SGLang)",
    "one_hot_residual_not_zeroed": "one-hot drafts: the rejected draft x is not removed from the residual",
    "bonus_wrong_position": "bonus token drawn from p[K] instead of p[n_b] for ragged rows",
    "nan_not_sanitised": "NaN probabilities are not treated as zero mass (the cumsum search emits token 0)",
    "tile_tail_unmasked": "inverse CDF over a padded power-of-two tile whose tail lanes (v >= V) are not "
    "masked: they carry mass and can be emitted",
    "philox_offset_ignored": "seeded path: the Philox offset is not applied (frozen randomness "
    "across CUDA-graph "
    "replays, FlashInfer)",
    "offset_int32_overflow": "seeded path: offsets truncated to int32 (vLLM #46560)",
    "seed_index0": "seeded path: every request uses seeds[0] (FlashInfer: per-request seeds read at index 0)",
}

GUMBEL_BUGS = {
    "gumbel_p_times_E": "Gumbel-max computes argmax p * E instead of argmax p / E",
    "gumbel_tile_tail": "tile-tail lanes (v >= V) are not masked out of the argmax",
    "gumbel_noise_on_logits": "argmax log p + E (Exp noise added to logits instead of Gumbel noise)",
}


def _clean(a) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out[~np.isfinite(out) | (out < 0)] = 0.0
    return out


def seeded_uniforms(seeds, offsets, num_columns: int, bugs=frozenset()) -> np.ndarray:
    """The [B, K+1] uniforms of the seeded path, with the seeded-path bugs applied."""
    seeds = np.asarray(seeds, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    if "seed_index0" in bugs:
        seeds = np.full_like(seeds, seeds[0])
    if "philox_offset_ignored" in bugs:
        offsets = np.zeros_like(offsets)
    if "offset_int32_overflow" in bugs:
        offsets = offsets.astype(np.int32).astype(np.int64)  # wraps like a C int32 cast
    u = chain_uniforms(seeds, offsets, num_columns, STREAM_CHAIN_UNIFORM)
    if "shared_column" in bugs:
        u = np.repeat(u[:, :1], num_columns, axis=1)
    return u


def chain_sample(p, x, q, num_draft_tokens, u, bugs=frozenset()):
    """Chain rejection sampling per docs/semantics.md, with the planted `bugs` switched on.

    p [B, K+1, V], x [B, K] int, q [B, K, V] or None, num_draft_tokens [B] or None, u [B, K+1].
    Returns (tokens [B, K+1] int64, num_accepted [B], fallback [B], valid [B]).
    """
    unknown = set(bugs) - set(CHAIN_BUGS)
    if unknown:
        raise ValueError(f"bugs: unknown chain bug names {sorted(unknown)}")
    p = np.asarray(p)
    bsz, k1, vocab = p.shape
    k = k1 - 1
    x = np.asarray(x, dtype=np.int64).reshape(bsz, k)
    u = np.asarray(u, dtype=np.float64)
    n = np.full(bsz, k, np.int64) if num_draft_tokens is None else np.clip(np.asarray(num_draft_tokens), 0, k)
    rows = np.arange(bsz)
    pos = np.arange(k)[None, :]

    if "invalid_draft_accepted" in bugs:
        ok = np.ones_like(x, dtype=bool)
        xs = np.mod(x, vocab)
    else:
        ok = (x >= 0) & (x < vocab)
        xs = np.where(ok, x, 0)
    raw_px = np.asarray(p[rows[:, None], pos, xs], dtype=np.float64) if k else np.zeros((bsz, 0))
    px = _clean(raw_px) * ok
    u_mid = u[:, :k] + UNIFORM_HALF_STEP  # the midpoint of each uniform's 2^-24 cell
    if q is None:
        acc = ok & (u_mid < px)
        if "le_accepts_zero_prob" in bugs:  # SGLang: u <= p on the raw uniform (accepts p = 0 at u = 0)
            acc = ok & (u[:, :k] <= px)
    else:
        q = np.asarray(q)
        raw_qx = np.asarray(q[rows[:, None], pos, xs], dtype=np.float64)
        if "invalid_draft_accepted" in bugs:
            qx = raw_qx
            with np.errstate(invalid="ignore"):
                acc = u_mid * qx < px
        else:
            qx = _clean(raw_qx) * ok
            if "acceptance_inverted" in bugs:
                acc = ok & (qx > 0) & (u_mid * px < qx)
            elif "le_accepts_zero_prob" in bugs:  # SGLang: u q <= p on the raw uniform
                acc = ok & (qx > 0) & (u[:, :k] * qx <= px)
            else:
                acc = ok & (qx > 0) & (u_mid * qx < px)
    acc &= pos < n[:, None]
    a = np.cumprod(acc, axis=1).sum(axis=1) if k else np.zeros(bsz, np.int64)
    rejected = a < n

    emit_row = a.copy()
    if "bonus_wrong_position" in bugs:
        emit_row = np.where(rejected, a, k)
    pj_raw = np.asarray(p[rows, emit_row], dtype=np.float64)
    pj = pj_raw.copy() if "nan_not_sanitised" in bugs else _clean(pj_raw)
    if "nan_not_sanitised" in bugs:
        pj[pj < 0] = 0.0
    r = pj.copy()
    jd = np.minimum(a, max(k - 1, 0))
    if k:
        if q is None:
            if "one_hot_residual_not_zeroed" not in bugs:
                hit = rejected & ok[rows, jd]
                r[rows[hit], xs[rows[hit], jd[hit]]] = 0.0
        elif "residual_from_p" not in bugs:
            qj = _clean(q[rows, jd])
            if "swapped_residual" in bugs:
                res = np.maximum(qj - pj, 0.0)
            elif "unclamped_residual" in bugs:
                res = np.abs(pj - qj)
            else:
                res = np.maximum(pj - qj, 0.0)
            r = np.where(rejected[:, None], res, pj)
    total = r.sum(axis=1)
    no_mass = rejected & ~(total > 0)
    fallback = no_mass.copy()
    forced = np.full(bsz, -1, np.int64)
    if "norm_sum_zero_last_token" in bugs or "norm_sum_zero_token0" in bugs:
        forced[no_mass] = vocab - 1 if "norm_sum_zero_last_token" in bugs else 0
        fallback[:] = False
    r[no_mass] = pj[no_mass]
    total = r.sum(axis=1)

    width = vocab
    if "tile_tail_unmasked" in bugs:
        width = 1 << max(vocab, 1).bit_length()  # a padded tile with at least one tail lane
        pad = np.repeat(r.mean(axis=1, keepdims=True), width - vocab, axis=1)
        r = np.concatenate([r, pad], axis=1)
        total = r.sum(axis=1)
    coin = u[:, k].copy()
    if "reused_coin" in bugs and k:
        coin = np.where(rejected, u[rows, np.minimum(a, k - 1)], coin)
    cs = np.cumsum(r, axis=1)
    if "inverse_cdf_off_by_one" in bugs:
        cs = cs - r
    with np.errstate(invalid="ignore"):
        target = (coin + UNIFORM_HALF_STEP) * total
        idx = (cs <= target[:, None]).sum(axis=1)
    lost = idx >= width
    if np.any(lost):
        last = width - 1 - np.argmax(r[:, ::-1] > 0, axis=1)
        idx = np.where(lost, last, idx)
    valid = total > 0 if "nan_not_sanitised" not in bugs else ~(total <= 0)
    token = np.where(valid, idx, -1)
    token = np.where(forced >= 0, forced, token)

    tokens = np.full((bsz, k1), -1, np.int64)
    if k:
        tokens[:, :k] = np.where(pos < a[:, None], x, -1)
    tokens[rows, a] = token
    return tokens, a.astype(np.int64), fallback, valid.astype(bool)


def gumbel_sample(probs, seeds, offsets, num_samples: int = 1, bugs=frozenset(), exponentials=None):
    """Gumbel-max / exponential race: the top-`num_samples` of clean(p) / E, E ~ Exp(1) from the
    seeded Philox stream (STREAM_GUMBEL, position 0; `exponentials` passes that noise in when the
    caller already has it). Returns indices [B, n] int64; ties go to the lowest index; zero-mass
    tokens never win (rows with no mass return -1)."""
    unknown = set(bugs) - set(GUMBEL_BUGS)
    if unknown:
        raise ValueError(f"bugs: unknown gumbel bug names {sorted(unknown)}")
    p = _clean(probs)
    bsz, vocab = p.shape
    e = gumbel_exponentials(seeds, offsets, vocab, STREAM_GUMBEL) if exponentials is None else exponentials
    if "gumbel_tile_tail" in bugs:
        width = 1 << max(vocab, 1).bit_length()
        p = np.concatenate([p, np.repeat(p.mean(axis=1, keepdims=True), width - vocab, axis=1)], axis=1)
        e = np.concatenate([e, np.ones((bsz, width - vocab))], axis=1)
    if "gumbel_p_times_E" in bugs:
        score = p * e
    elif "gumbel_noise_on_logits" in bugs:
        with np.errstate(divide="ignore"):
            score = np.where(p > 0, np.log(p) + e, -np.inf)
    else:
        score = p / e
    score = np.where(p > 0, score, -np.inf)
    if num_samples == 1:  # the stable sort's first entry, in O(V): argmax returns the first maximum
        order = np.argmax(score, axis=1)[:, None]
    else:
        order = np.argsort(-score, axis=1, kind="stable")[:, :num_samples]
    top = np.take_along_axis(score, order, axis=1)
    return np.where(np.isfinite(top), order, -1).astype(np.int64)
