"""The float64 logits reference (`specsample.reference.logits`) against a row-by-row transcription of
its documented semantics, its exact law against identities, and its sampling law against that law."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import softmax

from specsample.reference.logits import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    acceptance_probabilities,
    output_law,
    rejection_sample_logits_reference,
    softmax_logits,
)
from specsample.reference.philox import (
    STREAM_LOGITS_GROUP,
    STREAM_LOGITS_UNIFORM,
    chain_uniforms,
    exponential_from_word,
    philox_words,
    uniform52_from_words,
)
from specsample.stats import assert_gof, current_test_seed


def _row_semantics(lg, x, dl, temp, seed, offset, n):
    """One request, written straight from the module docstring (scalar loops, no vectorisation;
    every comparison in logs, as documented)."""
    k_plus_1, vocab = lg.shape
    num_k = k_plus_1 - 1
    clean = np.where(np.isfinite(lg), lg, -np.inf)
    out = np.full(k_plus_1, -1)
    if not (temp == 0 or (temp > 0 and np.isfinite(temp))):
        return out, 0, False, False
    n = min(max(n, 0), num_k)
    if temp == 0:
        a = 0
        while a < n and np.isfinite(clean[a]).any() and 0 <= x[a] < vocab and x[a] == np.argmax(clean[a]):
            a += 1
        out[:a] = x[:a]
        out[a] = np.argmax(clean[a]) if np.isfinite(clean[a]).any() else -1
        return out, a, False, bool(out[a] >= 0)
    t = min(max(temp, MIN_TEMPERATURE), MAX_TEMPERATURE)

    def log_probs(row):  # log softmax(row / t) in float64, -inf for no mass
        row = np.where(np.isfinite(row), row, -np.inf)
        if not np.isfinite(row).any():
            return np.full(vocab, -np.inf)
        z = np.where(np.isfinite(row), (row - row.max()) / t, -np.inf)
        return z - np.log(np.exp(z).sum())

    lp = [log_probs(lg[i]) for i in range(k_plus_1)]
    lq = [log_probs(dl[i]) for i in range(num_k)] if dl is not None else None
    u = chain_uniforms([seed], [offset], max(num_k, 1), stream=STREAM_LOGITS_UNIFORM)[0]
    log_u = [np.log(v) if v > 0 else -np.inf for v in u]
    a = 0
    while a < n:
        ok = 0 <= x[a] < vocab
        if lq is not None:  # u q(x) < p(x) with q(x) > 0, compared in logs
            accept = ok and np.isfinite(lq[a][x[a]]) and log_u[a] + lq[a][x[a]] < lp[a][x[a]]
        else:
            accept = ok and log_u[a] < lp[a][x[a]]
        if not accept:
            break
        a += 1
    fallback = False
    log_r = lp[a].copy()
    if a < n:
        if lq is not None:
            for v in range(vocab):
                if lp[a][v] > lq[a][v]:
                    log_r[v] = lp[a][v] + np.log(-np.expm1(lq[a][v] - lp[a][v]))
                else:
                    log_r[v] = -np.inf
        elif 0 <= x[a] < vocab:
            log_r[x[a]] = -np.inf
        if not np.isfinite(log_r).any():
            log_r, fallback = lp[a], True
    out[:a] = x[:a]
    if np.isfinite(log_r).any():  # the grouped draw: the best group by log R_g - log E_g, then its CDF
        best, best_g = -np.inf, -1
        for g in range(-(-vocab // 256)):
            part = log_r[256 * g : 256 * (g + 1)]
            if not np.isfinite(part).any():
                continue
            w0, _, _, _ = philox_words(seed, offset, g, STREAM_LOGITS_GROUP, a)
            score = part.max() + np.log(np.exp(part - part.max()).sum()) - np.log(exponential_from_word(w0))
            if score > best:
                best, best_g = score, g
        part = log_r[256 * best_g : 256 * (best_g + 1)]
        w = np.exp(part - part.max())
        _, w1, w2, _ = philox_words(seed, offset, best_g, STREAM_LOGITS_GROUP, a)
        target = uniform52_from_words(w1, w2) * w.sum()
        total, token = 0.0, -1
        for v in range(w.size):
            total += w[v]
            if w[v] > 0:
                token = v  # the last token with weight, unless the CDF passes the target first
                if total > target:
                    break
        out[a] = 256 * best_g + token
    return out, a, fallback, bool(out[a] >= 0)


@pytest.mark.parametrize("vocab", [7, 600])
@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_vectorised_reference_equals_row_semantics(classic, vocab):
    """Adversarial requests (NaN/inf logits, empty rows, bad ids, p == q drafts, invalid, tiny and
    huge temperatures, ragged counts), 400 at V = 7 (one group) and 60 at V = 600 (three groups, the
    last one partial): every output field equals the scalar transcription."""
    rng = np.random.default_rng(current_test_seed())
    batch, num_k = (400 if vocab < 256 else 60), 3
    lg = rng.normal(0, 2, (batch, num_k + 1, vocab))
    hole = rng.random(lg.shape) < 0.15
    lg[hole] = rng.choice([np.nan, np.inf, -np.inf], hole.sum())
    lg[rng.random((batch, num_k + 1)) < 0.05] = -np.inf
    dl = lg[:, :num_k] + rng.normal(0, 1, (batch, num_k, vocab)) if classic else None
    if classic:
        same = rng.random(batch) < 0.2
        dl[same] = lg[same, :num_k]
    clean = np.where(np.isfinite(lg[:, :num_k]), lg[:, :num_k], -np.inf)
    x = np.where(
        rng.random((batch, num_k)) < 0.5, clean.argmax(-1), rng.integers(-1, vocab + 1, (batch, num_k))
    )
    temps = rng.choice([0.0, 1e-40, 0.3, 1.0, 3.0, 1e38, -1.0, np.nan, np.inf], batch)
    seeds = rng.integers(-(2**63), 2**63 - 1, batch, dtype=np.int64)
    offsets = rng.integers(0, 2**62, batch, dtype=np.int64)
    n = rng.integers(-1, num_k + 2, batch)
    ref = rejection_sample_logits_reference(lg, x, dl, temperature=temps, seeds=seeds, offsets=offsets,
                                            num_draft_tokens=n)  # fmt: skip
    for b in range(batch):
        tokens, a, fallback, valid = _row_semantics(
            lg[b], x[b], None if dl is None else dl[b], temps[b], seeds[b], offsets[b], n[b]
        )
        got = (ref.tokens[b].tolist(), ref.num_accepted[b], ref.fallback[b], ref.valid[b])
        assert got == (tokens.tolist(), a, fallback, valid), f"row {b}: T={temps[b]}, n={n[b]}, x={x[b]}"


def test_softmax_logits_cleans_and_scales():
    lg = np.array([[1.0, np.nan, 3.0, np.inf, -np.inf], [np.nan] * 5])
    p = softmax_logits(lg, np.array([0.5, 1.0]))
    np.testing.assert_allclose(p[0], softmax(np.array([2.0, -np.inf, 6.0, -np.inf, -np.inf])), rtol=1e-15)
    assert np.all(p[1] == 0)
    tiny = softmax_logits(np.array([1.0, 1.0 + 2**-20, 0.0]), 0.0)  # T clamped to 2^-126: argmax mass
    assert tiny.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_output_law_identities(classic):
    """The exact law is a distribution, and the first output token (x_0 if accepted, else the emitted
    token) has law p_0: averaged over x ~ q for classic drafts, for every fixed x for one-hot ones."""
    rng = np.random.default_rng(current_test_seed())
    num_k, vocab = 2, 5
    p = softmax(rng.normal(0, 1.5, (num_k + 1, vocab)), axis=1)
    q = softmax(rng.normal(0, 1.5, (num_k, vocab)), axis=1)
    first = np.zeros(vocab)
    for xs in itertools.product(range(vocab), repeat=num_k):
        weight = np.prod([q[i, xs[i]] for i in range(num_k)]) if classic else 1.0 / vocab**num_k
        law = output_law(p, xs, q if classic else None)
        assert abs(law.sum() - 1.0) < 1e-12 and law[:, vocab].sum() == 0.0
        beta = acceptance_probabilities(p, xs, q if classic else None)
        assert abs(law[1:].sum() - beta[0]) < 1e-12
        one = law[0, :vocab].copy()
        one[xs[0]] += law[1:].sum()
        if not classic:
            np.testing.assert_allclose(one, p[0], rtol=0, atol=1e-12)
        first += weight * one
    np.testing.assert_allclose(first, p[0], rtol=0, atol=1e-12)


def test_reference_sampling_follows_output_law():
    """n = 200000 seeded classic requests (K = 2, V = 5, T = 0.8, fixed drafts): the (a, token) counts
    pass assert_gof against output_law at alpha = 1e-6, power 1 - 1e-6 against TV >= 0.015."""
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    num_k, vocab, n = 2, 5, 200_000
    lg = rng.normal(0, 1.5, (num_k + 1, vocab))
    dl = lg[:num_k] + rng.normal(0, 1, (num_k, vocab))
    x = np.array([1, 3])
    ref = rejection_sample_logits_reference(
        np.broadcast_to(lg, (n, num_k + 1, vocab)), np.broadcast_to(x, (n, num_k)),
        np.broadcast_to(dl, (n, num_k, vocab)), temperature=np.full(n, 0.8),
        seeds=rng.integers(0, 2**63 - 1, n, dtype=np.int64), offsets=np.zeros(n, dtype=np.int64),
    )  # fmt: skip
    p, q = softmax_logits(lg, 0.8), softmax_logits(dl, 0.8)
    emitted = ref.tokens[np.arange(n), ref.num_accepted]
    counts = np.bincount(ref.num_accepted * (vocab + 1) + np.where(emitted >= 0, emitted, vocab),
                         minlength=(num_k + 1) * (vocab + 1))  # fmt: skip
    assert_gof(counts, output_law(p, x, q).ravel(), eps=0.015, alpha=1e-6, beta=1e-6, seed=seed,
               label="logits reference, classic")  # fmt: skip
