"""Float64 references of the Gumbel-max / exponential-race kernels (`specsample.kernels.gumbel`).

Each function takes the kernel's inputs plus its noise (explicit Exp(1) draws, or the seeds and
offsets from which `reference.philox.gumbel_exponentials` rebuilds the kernel's exact noise) and
returns what the kernel returns, under the same edge semantics:
  - probabilities: only 0 < p < inf has mass (zero, negative, NaN, +-inf: none);
  - logits: only finite logits have mass (NaN, +-inf: none); T <= 0 or NaN rows are greedy;
  - a row without mass returns -1 (sample_p 0); for n > 1, slots past the last token with mass
    are -1; ties go to the smallest token id.
`race_margin` / `logits_margin` give the gap between the best and the next score, which the
coupling tests use to tell a genuine mismatch from a float32 near-tie.

fast_sample with one sample runs the grouped race (`grouped_race`): the vocabulary is cut into
groups of GROUP_TOKENS = 256 consecutive tokens with masses P_g = sum of the group's clean p; the
race is run between groups, argmax_g P_g / E_g with one Exp(1) E_g per group, and the winning group
g emits its token v with probability p_v / P_g by inverse CDF on a second, independent uniform u_g.
P(v) = P(g wins) p_v / P_g = (P_g / P)(p_v / P_g) = p_v / P: the law of one draw, with one Philox
call per 256 tokens instead of one per 4. Noise: E_g from word 0 and u_g from words 1 and 2 (52
bits) of philox(seed, offset, index = g, STREAM_GUMBEL_GROUP, position = 0). Ties go to the smaller
group; within the group the token is the first v with C_v > u_g C_last (C the inclusive float64
cumulative sum of the group's clean p), never one without mass. Top-n (n > 1) keeps the per-token
race, so fast_sample(n = 1) and column 0 of fast_sample(n = 2) are different draws of the same law.
"""

from __future__ import annotations

import numpy as np

from specsample.reference.philox import (
    STREAM_GUMBEL,
    STREAM_GUMBEL_GROUP,
    exponential_from_word,
    gumbel_exponentials,
    philox_words,
    uniform52_from_words,
)

GROUP_TOKENS = 256  # tokens per noise group of the one-sample race (kernels.gumbel twin)


def clean_probs(probs) -> np.ndarray:
    """float64 copy of probs with every entry outside (0, inf) set to 0."""
    p = np.asarray(probs, dtype=np.float64)
    return np.where((p > 0) & np.isfinite(p), p, 0.0)


def race_scores(probs, exponentials) -> np.ndarray:
    """p / E where p has mass, else 0 (a winner needs score > 0)."""
    p = clean_probs(probs)
    e = np.asarray(exponentials, dtype=np.float64)
    return np.where(p > 0, p / e, 0.0)


def _top_n_by_score(score: np.ndarray, n: int, found) -> tuple[np.ndarray, np.ndarray]:
    """[B, n] ids (decreasing score, ties: smallest id; -1 where `found` fails) and their scores."""
    if n == 1:  # the stable sort's first entry, in O(V): argmax returns the first maximum
        order = (
            np.argmax(score, axis=1)[:, None] if score.shape[1] else np.zeros((score.shape[0], 0), np.int64)
        )
    else:
        order = np.argsort(-score, axis=1, kind="stable")[:, :n]
    top = np.take_along_axis(score, order, axis=1)
    ids = np.where(found(top), order, -1)
    if ids.shape[1] < n:  # n > V: pad
        pad = np.full((ids.shape[0], n - ids.shape[1]), -1)
        ids = np.concatenate([ids, pad], axis=1)
        top = np.concatenate([top, np.full(pad.shape, np.nan)], axis=1)
    return ids.astype(np.int64), top


def race_top_n(probs, exponentials, num_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(ids [B, n] int64, scores [B, n]) of the exponential race: the n largest p / E per row,
    in decreasing order (a draw without replacement in Plackett-Luce order)."""
    score = np.atleast_2d(race_scores(probs, exponentials))
    return _top_n_by_score(score, num_samples, lambda top: top > 0)


def race_margin(probs, exponentials, num_samples: int = 1) -> np.ndarray:
    """[B] smallest relative gap (s_k - s_{k+1}) / s_k between consecutive scores among the top
    n + 1 with s_k > 0 (inf when there is no such pair): the kernel's float32 result may differ
    from the reference only where this is within float32 error."""
    score = np.atleast_2d(race_scores(probs, exponentials))
    k = min(num_samples + 1, score.shape[1])
    top = -np.sort(-score, axis=1)[:, :k]
    if k < 2:
        return np.full(score.shape[0], np.inf)
    gap = np.where(
        top[:, :-1] > 0, (top[:, :-1] - top[:, 1:]) / np.where(top[:, :-1] > 0, top[:, :-1], 1), np.inf
    )
    return gap.min(axis=1)


def group_noise(seeds, offsets, vocab_size: int, stream: int = STREAM_GUMBEL_GROUP, position=0):
    """([B, NG] Exp(1) E_g, [B, NG] 52-bit uniforms u_g) of a grouped draw, NG = ceil(V / 256): words
    0 and 1-2 of philox(seed, offset, index=g, stream, position) (position: scalar or [B])."""
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)[:, None]
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)[:, None]
    position = np.asarray(position, dtype=np.int64)
    position = position.reshape(-1)[:, None] if position.ndim else position
    groups = np.arange(-(-vocab_size // GROUP_TOKENS), dtype=np.int64)[None, :]
    w0, w1, w2, _ = philox_words(seeds, offsets, groups, stream, position)
    return exponential_from_word(w0), uniform52_from_words(w1, w2)


def group_blocks(a, fill) -> np.ndarray:
    """[B, V] -> [B, NG, 256]: the rows cut into groups of 256 tokens, the last one padded with `fill`."""
    a = np.atleast_2d(a)
    rows, vocab = a.shape
    out = np.full((rows, -(-vocab // GROUP_TOKENS) * GROUP_TOKENS), fill, dtype=a.dtype)
    out[:, :vocab] = a
    return out.reshape(rows, -1, GROUP_TOKENS)


def inverse_cdf_in_group(weights, uniforms) -> tuple[np.ndarray, np.ndarray]:
    """([B] lane, [B] CDF gap) of the in-group draw from weights [B, 256] >= 0 at uniforms [B]: the
    first lane with C > u C_last and weight > 0 (C the inclusive cumulative sum), or the last lane with
    weight if rounding leaves none; the gap is the distance from u C_last to the nearest C_v, relative
    to C_last (inf for a group without mass)."""
    w = np.asarray(weights, dtype=np.float64)
    cdf = np.cumsum(w, axis=1)
    total = cdf[:, -1]
    target = np.asarray(uniforms, dtype=np.float64) * total
    hit = (cdf > target[:, None]) & (w > 0)
    last_with_mass = GROUP_TOKENS - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
    lane = np.where(hit.any(axis=1), np.argmax(hit, axis=1), last_with_mass)
    near = np.abs(cdf - target[:, None]).min(axis=1)
    return lane, np.where(total > 0, near / np.where(total > 0, total, 1), np.inf)


def grouped_race_with_margins(probs, exponentials, uniforms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """([B] int64 ids of the grouped race (module docstring) given its noise (`group_noise`), -1 for a
    row without mass; [B] relative gap between the best and second group score; [B] distance from
    u_g C_last to the nearest C_v of the winning group, relative to C_last; gaps inf where
    undefined). A float32 kernel may differ from the ids only where the first gap is within float32
    error or the second within float64 summation error."""
    blocks = group_blocks(clean_probs(probs), 0.0)
    mass = blocks.sum(axis=2)
    rows = np.arange(blocks.shape[0])
    score = np.where(mass > 0, mass / np.asarray(exponentials, dtype=np.float64), 0.0)
    group = np.argmax(score, axis=1)  # the first maximum: ties go to the smaller group
    found = score[rows, group] > 0
    token, cdf_gap = inverse_cdf_in_group(blocks[rows, group], np.asarray(uniforms, np.float64)[rows, group])
    ids = np.where(found, group * GROUP_TOKENS + token, -1).astype(np.int64)
    top = -np.sort(-score, axis=1)[:, :2]
    if top.shape[1] < 2:
        top = np.concatenate([top, np.zeros_like(top)], axis=1)
    gap = np.where(top[:, 0] > 0, (top[:, 0] - top[:, 1]) / np.where(top[:, 0] > 0, top[:, 0], 1), np.inf)
    return ids, gap, cdf_gap


def grouped_race(probs, exponentials, uniforms) -> np.ndarray:
    """[B] int64 ids of the grouped race (`grouped_race_with_margins`' first output)."""
    return grouped_race_with_margins(probs, exponentials, uniforms)[0]


def grouped_margin(probs, exponentials, uniforms) -> tuple[np.ndarray, np.ndarray]:
    """(score gap, CDF gap) of `grouped_race_with_margins`."""
    return grouped_race_with_margins(probs, exponentials, uniforms)[1:]


def fast_sample_reference(probs, seeds, offsets, num_samples: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """What `fast_sample(probs, n, seeds=seeds, offsets=offsets)` returns: (sample_p [B, n] float64,
    the input values at the ids, 0 where -1; sample_index [B, n] int64). n = 1: the grouped race;
    n > 1: the top-n of the per-token race."""
    p = np.atleast_2d(np.asarray(probs, dtype=np.float64))
    seeds, offsets = _per_row(seeds, p.shape[0]), _per_row(offsets, p.shape[0])
    if num_samples == 1:
        ids = grouped_race(p, *group_noise(seeds, offsets, p.shape[1]))[:, None]
    else:
        ids, _ = race_top_n(p, gumbel_exponentials(seeds, offsets, p.shape[1], STREAM_GUMBEL), num_samples)
    sample_p = np.where(ids >= 0, np.take_along_axis(p, np.maximum(ids, 0), axis=1), 0.0)
    return sample_p, ids


def _per_row(values, rows: int) -> np.ndarray:
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    return np.broadcast_to(v, (rows,)) if v.size == 1 else v


def _temperatures(temperature, rows: int) -> np.ndarray:
    t = np.asarray(temperature, dtype=np.float64).reshape(-1)
    return np.broadcast_to(t, (rows,)) if t.size == 1 else t


def logits_scores(logits, temperature, exponentials) -> np.ndarray:
    """[B, V] race scores in log space: l / T - ln E for T > 0, l for greedy rows (T <= 0 or NaN);
    -inf where the logit is not finite."""
    l = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    t = _temperatures(temperature, l.shape[0])
    greedy = ~(t > 0)
    valid = np.isfinite(l)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x = np.where(valid, l / np.where(greedy, 1.0, t)[:, None], -np.inf)
        noise = np.log(np.asarray(exponentials, dtype=np.float64))
        s = np.where(greedy[:, None], x, x - noise)
    return np.where(valid, s, -np.inf)


def logits_race(logits, temperature, exponentials) -> np.ndarray:
    """[B] int64 tokens of `sample_from_logits`: argmax of `logits_scores`, -1 without a finite logit."""
    s = logits_scores(logits, temperature, exponentials)
    ids, _ = _top_n_by_score(s, 1, lambda top: top > -np.inf)
    return ids[:, 0]


def logits_margin(logits, temperature, exponentials) -> np.ndarray:
    """[B] gap between the best and second-best log-space score (inf with fewer than two)."""
    s = logits_scores(logits, temperature, exponentials)
    if s.shape[1] < 2:
        return np.full(s.shape[0], np.inf)
    top = -np.sort(-s, axis=1)[:, :2]
    with np.errstate(invalid="ignore"):
        gap = top[:, 0] - top[:, 1]
    return np.where(np.isfinite(top[:, 1]), gap, np.inf)


def sample_from_logits_reference(logits, temperature, seeds, offsets) -> np.ndarray:
    """What `sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets)` returns."""
    l = np.atleast_2d(np.asarray(logits, dtype=np.float64))
    rows, vocab = l.shape
    e = gumbel_exponentials(_per_row(seeds, rows), _per_row(offsets, rows), vocab, STREAM_GUMBEL)
    return logits_race(l, temperature, e)


def softmax_with_temperature(logits, temperature) -> np.ndarray:
    """softmax(logits / T) over the last axis in float64 (what `renorm_draft_probs` and the
    `probs_out` of `sample_from_logits` hold): non-finite logits get 0, greedy rows (T <= 0 or
    NaN) are the one-hot of the first argmax, a row without a finite logit is all zeros.
    temperature: scalar or one value per row of logits.reshape(-1, V)."""
    l = np.asarray(logits, dtype=np.float64)
    shape = l.shape
    l = l.reshape(-1, shape[-1])
    t = _temperatures(temperature, l.shape[0])
    greedy = ~(t > 0)
    valid = np.isfinite(l)
    any_valid = valid.any(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(valid, l / np.where(greedy, 1.0, t)[:, None], -np.inf)
        m = np.max(x, axis=1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        w = np.where(valid, np.exp(x - m), 0.0)
        total = w.sum(axis=1, keepdims=True)
        out = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)
    first = np.argmax(np.where(valid, l, -np.inf), axis=1)
    hot = np.zeros_like(out)
    hot[np.arange(l.shape[0]), first] = 1.0
    out = np.where(greedy[:, None], np.where(any_valid[:, None], hot, 0.0), out)
    return out.reshape(shape)
