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
