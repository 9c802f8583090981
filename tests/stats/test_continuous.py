"""KS/DKW on continuous quantities, the randomised PIT, and the race-winner checks."""

import numpy as np
import pytest
from scipy import stats

from specsample.stats import (
    assert_ks,
    dkw_min_samples,
    ks_distance,
    race_winner_checks,
    randomized_pit,
    test_seed,
)


def _uniform_cdf(x):
    return np.clip(x, 0, 1)


def test_ks_distance_matches_scipy_for_continuous_laws():
    rng = np.random.default_rng(0)
    x = rng.random(500)
    assert ks_distance(x, _uniform_cdf) == pytest.approx(stats.kstest(x, "uniform").statistic, abs=1e-12)


def test_ks_distance_with_atoms_needs_the_left_cdf():
    """For a Bernoulli(0.3) sample with exactly 30 % ones the distance is 0 with the left CDF;
    without it (treating the CDF as continuous, scipy's behaviour) it is inflated by an atom."""
    x = np.array([0] * 70 + [1] * 30, dtype=float)

    def cdf(v):
        return np.where(v < 0, 0.0, np.where(v < 1, 0.7, 1.0))

    def left(v):
        return np.where(v <= 0, 0.0, np.where(v <= 1, 0.7, 1.0))

    assert ks_distance(x, cdf, left) == pytest.approx(0.0, abs=1e-12)
    assert ks_distance(x, cdf) >= 0.3 - 1e-12


@pytest.mark.statistical
def test_assert_ks_passes_uniforms_and_catches_a_shift(request):
    """alpha = beta = 1e-6, eps = 0.05 (Kolmogorov), n = designed (~19k): U(0,1) passes;
    U(0, 0.9) (distance 0.1 >= eps) fails (TFP's planted-bug check)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    n = dkw_min_samples(0.05, 1e-6, 1e-6)
    cert = assert_ks(rng.random(n), _uniform_cdf, alpha=1e-6, eps=0.05, beta=1e-6, seed=seed)
    assert cert.passed and cert.n == n and cert.eps == 0.05
    with pytest.raises(AssertionError, match="KS test failed"):
        assert_ks(0.9 * rng.random(n), _uniform_cdf, alpha=1e-6, eps=0.05, beta=1e-6, seed=seed)
    with pytest.raises(AssertionError, match="design: n too small"):
        assert_ks(rng.random(n - 1), _uniform_cdf, alpha=1e-6, eps=0.05, beta=1e-6, seed=seed)


@pytest.mark.statistical
def test_randomized_pit_makes_token_ks_exact(request):
    """Tokens from p -> PIT values U(0,1) exactly: assert_ks at alpha = 1e-6 passes (n = 20,000,
    detectable Kolmogorov distance 0.038 at beta 1e-6); tokens from a law at TV 0.1 that moves
    mass to the first token fail (PIT Kolmogorov distance >= 0.05). Also per-row laws [B, V]."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(12))
    tokens = rng.choice(12, size=20_000, p=p)
    v = randomized_pit(tokens, p, rng)
    assert_ks(v, _uniform_cdf, alpha=1e-6, seed=seed)
    q = 0.9 * p
    q[0] += 0.1  # PIT distance 0.1 (1 - p_0) >= 0.05 when p_0 <= 1/2
    assert p[0] <= 0.5
    with pytest.raises(AssertionError, match="KS test failed"):
        assert_ks(randomized_pit(rng.choice(12, size=20_000, p=q), p, rng), _uniform_cdf, alpha=1e-6)
    rows = rng.dirichlet(np.ones(5), size=20_000)
    toks = (rng.random((20_000, 1)) > np.cumsum(rows, axis=1)).sum(axis=1)
    assert_ks(randomized_pit(np.minimum(toks, 4), rows, rng), _uniform_cdf, alpha=1e-6, seed=seed)


@pytest.mark.statistical
@pytest.mark.parametrize("kind", ["race", "gumbel"])
def test_race_winner_checks_pass_a_correct_race(request, kind):
    """alpha = 1e-6 split over KS of the winner value and the (winner, bin) joint; n = 40,000."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(8))
    if kind == "race":
        scores = p / rng.exponential(size=(40_000, 8))
    else:
        scores = np.log(p) + rng.gumbel(size=(40_000, 8))
    cert = race_winner_checks(scores.max(axis=1), scores.argmax(axis=1), p, alpha=1e-6, kind=kind, seed=seed)
    assert cert.passed and cert.detail["ks_p_value"] > 5e-7


@pytest.mark.statistical
def test_race_winner_checks_catch_noise_bugs(request):
    """p * E instead of p / E (wrong winner law and value) and one Exp(1) per row instead of per
    token (the winner is always argmax p) both fail at alpha = 1e-6 with n = 40,000: each is a
    deviation of TV > 0.3 on the joint cells, far above the detectable 0.03 the certificate states."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(8))
    e = rng.exponential(size=(40_000, 8))
    wrong = p * e
    with pytest.raises(AssertionError):
        race_winner_checks(wrong.max(axis=1), wrong.argmax(axis=1), p, alpha=1e-6, seed=seed)
    shared = p / rng.exponential(size=(40_000, 1))  # one noise value per row: argmax is always argmax p
    with pytest.raises(AssertionError):
        race_winner_checks(shared.max(axis=1), shared.argmax(axis=1), p, alpha=1e-6, seed=seed)
