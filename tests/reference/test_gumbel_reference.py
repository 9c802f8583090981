"""The float64 Gumbel references (specsample.reference.gumbel): edge semantics by hand-made cases,
and their laws with numpy's own Exp(1) noise (so the reference itself is certified independently
of the kernels' Philox stream)."""

import numpy as np
import pytest

from specsample.reference import gumbel as rg
from specsample.reference.laws import plackett_luce_law
from specsample.stats import assert_gof, counts_from_tokens, current_test_seed


def test_race_top_n_orders_scores_and_breaks_ties_by_id():
    p = np.array([[0.2, 0.0, 0.2, np.nan, 0.6, -1.0, np.inf]])
    e = np.array([[1.0, 0.1, 1.0, 0.1, 2.0, 0.1, 0.1]])
    ids, scores = rg.race_top_n(p, e, 4)
    # scores: 0.2, 0, 0.2, -, 0.3, -, -: 4 first, then the tie 0 < 2, then nothing with mass
    assert ids.tolist() == [[4, 0, 2, -1]]
    assert np.allclose(scores[0, :3], [0.3, 0.2, 0.2])
    assert rg.race_top_n(np.zeros((1, 3)), np.ones((1, 3)))[0].tolist() == [[-1]]
    assert rg.race_top_n(np.ones((1, 2)), np.ones((1, 2)), 4)[0].tolist() == [[0, 1, -1, -1]]


def test_race_margin_is_the_relative_gap():
    p = np.array([[0.5, 0.25, 0.25]])
    e = np.array([[1.0, 1.0, 0.5]])  # scores 0.5, 0.25, 0.5: tie at the top
    assert rg.race_margin(p, e)[0] == 0.0
    e = np.array([[1.0, 1.0, 1.0]])
    assert rg.race_margin(p, e, 1)[0] == pytest.approx(0.5)
    assert rg.race_margin(p, e, 2)[0] == 0.0  # 0.25 vs 0.25


def test_logits_semantics():
    l = np.array([[1.0, 3.0, np.nan, 3.0], [np.nan, -np.inf, np.inf, np.nan], [0.0, 1.0, 2.0, 9.0]])
    e = np.ones_like(l)
    t = np.array([0.0, 1.0, -1.0])  # greedy, sampling, greedy (negative)
    assert rg.logits_race(l, t, e).tolist() == [1, -1, 3]
    soft = rg.softmax_with_temperature(l, t)
    assert soft[0].tolist() == [0, 1, 0, 0] and soft[1].tolist() == [0, 0, 0, 0]
    assert soft[2].tolist() == [0, 0, 0, 1]
    s = rg.softmax_with_temperature(np.array([0.0, np.log(3.0), -np.inf]), 1.0)
    assert np.allclose(s, [0.25, 0.75, 0.0])
    s = rg.softmax_with_temperature(
        np.array([[[0.0, np.log(3.0)]], [[0.0, np.log(3.0)]]]), np.array([0.5, np.inf])
    )
    assert np.allclose(s[0, 0], [0.1, 0.9]) and np.allclose(s[1, 0], [0.5, 0.5])


def test_logits_race_equals_the_probability_race():
    """argmax l / T - ln E == argmax softmax(l / T) / E on the same noise (except float ties)."""
    rng = np.random.default_rng(current_test_seed())
    l = rng.normal(0, 2, size=(2000, 30))
    e = rng.exponential(size=l.shape)
    a = rg.logits_race(l, 0.8, e)
    b = rg.race_top_n(rg.softmax_with_temperature(l, 0.8), e)[0][:, 0]
    assert np.mean(a != b) < 1e-3


def test_seeded_reference_is_deterministic():
    p = np.full((3, 50), 0.02)
    a = rg.fast_sample_reference(p, [1, 2, 3], [0, 0, 0], 2)
    b = rg.fast_sample_reference(p, [1, 2, 3], [0, 0, 0], 2)
    assert np.array_equal(a[1], b[1]) and np.all(a[0] == 0.02)
    assert rg.sample_from_logits_reference(np.zeros((2, 5)), 1.0, [4], [9]).shape == (2,)


@pytest.mark.statistical
def test_reference_race_follows_plackett_luce():
    """The reference's top-3 with numpy Exp(1) noise follows the exact Plackett-Luce law of triples
    (p over 7 tokens, one zero): designed chi-square, alpha = 1e-6, eps = 0.02 TV detected
    w.p. 1 - 1e-6, n = 200000 >= the design's required n."""
    rng = np.random.default_rng(current_test_seed())
    p = np.array([0.3, 0.2, 0.15, 0.15, 0.1, 0.1, 0.0])
    n = 200_000
    ids, _ = rg.race_top_n(np.broadcast_to(p, (n, p.size)), rng.exponential(size=(n, p.size)), 3)
    law = plackett_luce_law(p, 3).ravel()
    counts = counts_from_tokens(np.ravel_multi_index(tuple(ids.T), (p.size,) * 3), law.size)
    assert_gof(counts, law, eps=0.02, alpha=1e-6, beta=1e-6, label="reference Plackett-Luce")


def test_grouped_race_semantics():
    """The grouped race by hand (GROUP_TOKENS = 256; V = 600: groups [0, 256), [256, 512), [512, 600)):
    the group with the largest P_g / E_g wins, a tie goes to the smaller group, and inside it the
    token is the first with C_v > u C_last; u = 0 gives the group's first token with mass and the
    largest u (1 - 2^-52) its last; zero, NaN, inf and negative entries never win."""
    p = np.zeros((1, 600))
    p[0, [5, 7]] = [1.0, 3.0]  # group 0: P = 4
    p[0, [300, 301, 400]] = [np.nan, 2.0, 2.0]  # group 1: P = 4
    p[0, [590, 599]] = [np.inf, -1.0]  # group 2: no mass
    e = np.array([[1.0, 2.0, 0.001]])
    for u0, want in ((0.0, 5), (0.25 - 1e-12, 5), (0.25, 7), (1 - 2.0**-52, 7)):
        u = np.array([[u0, 0.5, 0.5]])
        assert rg.grouped_race(p, e, u).tolist() == [want], u0
    e = np.array([[2.0, 1.0, 1.0]])  # group 1 wins: scores 2, 4
    assert rg.grouped_race(p, e, np.array([[0.0, 0.0, 0.0]])).tolist() == [301]
    assert rg.grouped_race(p, e, np.array([[0.0, 1 - 2.0**-52, 0.0]])).tolist() == [400]
    e = np.array([[1.0, 1.0, 1.0]])  # tie between groups 0 and 1: the smaller group
    assert rg.grouped_race(p, e, np.array([[0.0, 0.0, 0.0]])).tolist() == [5]
    assert rg.grouped_race(np.zeros((2, 600)), e.repeat(2, 0), np.zeros((2, 3))).tolist() == [-1, -1]
    gap, cdf_gap = rg.grouped_margin(p, e, np.array([[0.25, 0.0, 0.0]]))
    assert gap[0] == 0.0 and cdf_gap[0] == 0.0  # a tie in score, and u C_last exactly on C_5 = 1


@pytest.mark.statistical
def test_grouped_race_follows_p():
    """The grouped race with numpy Exp(1) and uniform noise (independent of the Philox stream) draws
    from p / sum(p): 9 tokens with mass spread over 3 groups of V = 700 (the last one partial),
    designed chi-square, alpha = 1e-6, eps = 0.01 TV detected w.p. 1 - 1e-6, n = 400000 >= the
    design's required n (318465, asserted by assert_gof)."""
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    p = np.zeros(700)
    p[[3, 200, 256, 300, 511, 512, 650, 699, 100]] = [0.2, 0.05, 0.1, 0.02, 0.13, 0.25, 0.15, 0.1, 1e-3]
    n = 400_000
    ids = np.concatenate([
        rg.grouped_race(np.broadcast_to(p, (m, 700)), rng.exponential(size=(m, 3)), rng.random((m, 3)))
        for m in (n // 2, n - n // 2)
    ])  # fmt: skip
    assert ids.min() >= 0
    law = p / p.sum()
    assert_gof(
        counts_from_tokens(ids, 700), law, eps=0.01, alpha=1e-6, beta=1e-6, seed=seed, label="grouped race"
    )
