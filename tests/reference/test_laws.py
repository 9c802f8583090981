"""The exact laws of reference/laws.py: algebraic identities checked to float64 rounding, and the
Plackett-Luce law against direct top-n draws by a designed chi-square."""

import itertools

import numpy as np
import pytest

from specsample.reference.laws import (
    acceptance_prob,
    accepted_length_law,
    bonus_emission_law,
    chain_conditional_law,
    chain_marginal_law,
    emission_law,
    normalize,
    plackett_luce_law,
    position_token_law,
    rejection_emission_law,
)
from specsample.stats import assert_gof, chi2_min_samples, test_seed

EXACT = 1e-13  # float64 rounding over sums of at most a few hundred terms of magnitude <= 1


def _pairs(rng, vocab):
    """(p, q) normalised rows covering the shapes that stress the identities."""
    dense = rng.dirichlet(np.ones(vocab))
    yield "dirichlet", dense, rng.dirichlet(np.ones(vocab))
    yield "peaked", rng.dirichlet(np.full(vocab, 0.1)), rng.dirichlet(np.full(vocab, 0.1))
    yield "equal", dense, dense.copy()
    half = vocab // 2
    p, q = np.zeros(vocab), np.zeros(vocab)
    p[:half], q[half:] = 1.0 / half, 1.0 / (vocab - half)
    yield "disjoint", p, q
    sparse = dense * (rng.random(vocab) < 0.5)
    sparse[0] += 0.1
    yield "sparse", normalize(sparse), dense
    one_hot = np.zeros(vocab)
    one_hot[vocab - 1] = 1.0
    yield "one_hot_p", one_hot, dense
    yield "one_hot_q", dense, one_hot


@pytest.mark.parametrize("vocab", [2, 5, 9])
def test_position_token_law_is_target(vocab, request):
    """Key identity: with drafts x ~ q, the token written at a reached position is distributed
    exactly as p (classic, sum(p) = sum(q) = 1), and one-hot verification gives p for any draft law."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    for name, p, q in _pairs(rng, vocab):
        classic = position_token_law(p, q)
        one_hot = position_token_law(p, None, draft_dist=q)
        np.testing.assert_allclose(classic, p, rtol=0, atol=EXACT, err_msg=f"classic, {name}")
        np.testing.assert_allclose(one_hot, p, rtol=0, atol=EXACT, err_msg=f"one-hot, {name}")


def _random_rows(rng, vocab, num_k, concentration=0.5):
    return rng.dirichlet(np.full(vocab, concentration), size=num_k + 1), rng.dirichlet(
        np.full(vocab, concentration), size=num_k
    )


@pytest.mark.parametrize("num_k", [1, 3, 4])
def test_marginal_joint_law_closed_form(num_k, request):
    """With drafts from q (normalised): J[j, v] = prod_{i<j} beta_i * (p_j(v) - q_j(v))^+ for j < K
    and prod_{i<K} beta_i * p_K(v) for the bonus row, beta_i = sum_v min(p_i(v), q_i(v)); J sums
    to 1, P(a >= j) matches accepted_length_law, no fallback mass and no invalid mass."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    for vocab in (3, 8):
        p, q = _random_rows(rng, vocab, num_k)
        law = chain_marginal_law(p, q)
        beta = np.minimum(p[:num_k], q).sum(axis=1)
        reach = np.concatenate([[1.0], np.cumprod(beta)])
        expected = np.vstack([reach[:num_k, None] * np.maximum(p[:num_k] - q, 0.0), reach[num_k] * p[num_k]])
        np.testing.assert_allclose(law.joint, expected, rtol=0, atol=EXACT)
        assert abs(law.joint.sum() - 1.0) <= EXACT
        np.testing.assert_allclose(law.survival(), reach, rtol=0, atol=EXACT)
        np.testing.assert_allclose(accepted_length_law(p, q), reach, rtol=0, atol=EXACT)
        np.testing.assert_allclose(law.accept_prob, beta, rtol=0, atol=EXACT)
        assert not law.invalid.any() and not law.fallback.any()


def test_marginal_law_is_the_average_of_conditional_laws(request):
    """Averaging the fixed-draft law over every draft tuple x weighted by prod_i q_i(x_i) gives
    the marginal law (classic and one-hot drafts), including ragged n < K."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    vocab, num_k = 4, 3
    p, q = _random_rows(rng, vocab, num_k)
    q[1, 2] = 0.0  # a draft position whose q has a zero
    q[1] /= q[1].sum()
    for n in (0, 2, 3):
        for draft_probs in (q, None):
            average = np.zeros((n + 1, vocab))
            for xs in itertools.product(range(vocab), repeat=num_k):
                weight = np.prod(q[np.arange(num_k), xs])
                average += weight * chain_conditional_law(p, draft_probs, xs, n).joint
            marginal = chain_marginal_law(p, draft_probs, n, draft_dist=q).joint
            np.testing.assert_allclose(average, marginal, rtol=0, atol=EXACT)


def test_conditional_law_fixed_drafts(request):
    """Fixed drafts: P(a = j) = prod_{i<j} alpha_i (1 - alpha_j); one-hot alpha_i = p_i(x_i),
    classic alpha_i = min(1, p_i(x_i)/q_i(x_i)); rows of J sum to P(a = j) and J sums to 1."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    vocab, num_k = 6, 4
    p, q = _random_rows(rng, vocab, num_k)
    x = rng.integers(0, vocab, size=num_k)
    for draft_probs in (None, q):
        law = chain_conditional_law(p, draft_probs, x)
        idx = np.arange(num_k)
        alpha = p[idx, x] if draft_probs is None else np.minimum(1.0, p[idx, x] / q[idx, x])
        length = np.array([np.prod(alpha[:j]) * (1 - alpha[j]) for j in range(num_k)] + [np.prod(alpha)])
        np.testing.assert_allclose(law.accept_prob, alpha, rtol=0, atol=EXACT)
        np.testing.assert_allclose(law.length, length, rtol=0, atol=EXACT)
        np.testing.assert_allclose(law.joint.sum(axis=1), length, rtol=0, atol=EXACT)
        assert abs(law.joint.sum() - 1.0) <= EXACT
        for j in np.flatnonzero(length[:num_k] > 0):  # given a = j < K: the residual law of position j
            expected = rejection_emission_law(p[j], None if draft_probs is None else q[j], int(x[j])).probs
            np.testing.assert_allclose(law.token_law_given(j), expected, rtol=0, atol=EXACT)
        np.testing.assert_allclose(law.token_law_given(num_k), p[num_k], rtol=0, atol=EXACT)


def test_conditional_law_edge_drafts():
    """Out-of-range ids and q(x) = 0 are rejected with probability 1 (their residual is used);
    NaN/inf/negative entries carry no mass."""
    p = np.array([[0.2, 0.3, 0.5], [0.1, 0.1, 0.8], [np.nan, 1.0, -1.0]])
    q = np.array([[0.5, 0.0, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    for x in ([-1, 0], [3, 0], [2**31 - 1, 0], [1, 0]):  # id 1 has q = 0 at position 0
        law = chain_conditional_law(p, q, x)
        assert law.length[0] == 1.0, x
        np.testing.assert_allclose(law.joint[0], [0.0, 0.3 / 0.3, 0.0], atol=EXACT)
    bonus = chain_conditional_law(p, None, [2, 2])  # p[0][2] = 0.5, p[1][2] = 0.8
    np.testing.assert_allclose(
        bonus.joint[2], [0.0, 0.4, 0.0], atol=EXACT
    )  # 0.5 * 0.8 * (NaN, 1, -1 -> 0, 1, 0)


def test_fallback_emission_law():
    """norm_sum == 0: the residual has no mass, the law is the target row normalised and
    fallback is set; a row without any mass is invalid (the sampler emits -1)."""
    p = np.array([0.0, 0.25, 0.25, 0.0])
    classic = rejection_emission_law(p, 2 * p, 1)  # max(0, p - 2p) = 0 everywhere
    assert classic.fallback and classic.valid
    np.testing.assert_allclose(classic.probs, [0, 0.5, 0.5, 0], atol=EXACT)
    point = np.array([0.0, 0.5, 0.0, 0.0])  # unnormalised point mass: one-hot residual is empty
    one_hot = rejection_emission_law(point, None, 1)
    assert one_hot.fallback and one_hot.valid
    np.testing.assert_allclose(one_hot.probs, [0, 1, 0, 0], atol=0)
    dead = rejection_emission_law(np.array([np.nan, -1.0, 0.0, np.inf]), None, 0)
    assert dead.fallback and not dead.valid and not dead.probs.any()
    assert not bonus_emission_law(np.zeros(4)).valid
    plain = emission_law(np.array([1.0, 3.0]))
    assert not plain.fallback and plain.valid
    np.testing.assert_allclose(plain.probs, [0.25, 0.75], atol=0)


def test_acceptance_prob_unnormalised():
    """alpha uses the cleaned values as given: min(1, p/q) classic, min(1, p) one-hot."""
    assert acceptance_prob([0.2, 3.0], None, 1) == 1.0
    assert acceptance_prob([0.2, 0.6], [0.4, 1.2], 1) == 0.5
    assert acceptance_prob([0.2, 0.6], [0.4, np.inf], 1) == 0.0
    assert acceptance_prob([0.2, 0.6], [0.4, 0.6], 2) == 0.0


@pytest.mark.parametrize("num_samples", [1, 2, 3])
def test_plackett_luce_identities(num_samples, request):
    """Sums to 1; no repeated tokens; the first coordinate is p; the second coordinate (n >= 2)
    is sum_{u != v} p_u p_v / (1 - p_u); zero-weight tokens never appear."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    p = normalize(rng.dirichlet(np.ones(6)) * np.array([1, 1, 0, 1, 1, 1]))
    law = plackett_luce_law(p, num_samples)
    assert abs(law.sum() - 1.0) <= EXACT
    first = law.reshape(6, -1).sum(axis=1)
    np.testing.assert_allclose(first, p, rtol=0, atol=EXACT)
    assert law[(slice(None),) * (num_samples - 1) + (2,)].sum() == 0.0
    if num_samples >= 2:
        second = law.sum(axis=tuple(k for k in range(num_samples) if k != 1))
        expected = np.array([sum(p[u] * p[v] / (1 - p[u]) for u in range(6) if u != v) for v in range(6)])
        np.testing.assert_allclose(second, expected, rtol=0, atol=EXACT)
        for v in range(6):
            assert law[(v, v) + (slice(None),) * (num_samples - 2)].sum() == 0.0
    with pytest.raises(ValueError, match="num_samples"):
        plackett_luce_law(np.array([0.5, 0.5, 0.0]), 3)


def test_plackett_luce_matches_top3_of_gumbel_race(request):
    """Top-3 of p / E (E ~ Exp(1) i.i.d., numpy) follows plackett_luce_law(p, 3) over the 120
    ordered triples of V = 6: chi-square at alpha = 1e-6, power 1 - 1e-6 at TV eps = 0.01,
    n = 1.2 * chi2_min_samples(120 cells, eps, 1e-7, 1e-6)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(6, 2.0))
    law = plackett_luce_law(p, 3)
    n = int(1.2 * chi2_min_samples(120, 0.01, 1e-7, 1e-6))
    scores = p[None, :] / rng.exponential(size=(n, 6))
    top = np.argsort(-scores, axis=1)[:, :3]
    counts = np.bincount(np.ravel_multi_index(tuple(top.T), (6, 6, 6)), minlength=216)
    assert_gof(counts, law.ravel(), eps=0.01, alpha=1e-6, beta=1e-6, seed=seed, label="PL top-3")
