"""Chi-square design maths at tiny alpha: ncx2 quantiles, monotonicity, round-trips (no sampling)."""

import math

import pytest
from scipy import stats

from specsample.stats import chi2_detectable_tv, chi2_min_samples, chi2_noncentrality, chi2_power

ALPHAS = [1e-9, 1e-6, 1e-3, 0.05]
BETAS = [1e-9, 1e-6, 1e-2]
KS = [2, 8, 128, 32_000]


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("beta", BETAS)
def test_min_samples_is_the_smallest_n_with_power(k, alpha, beta):
    """At n = chi2_min_samples(k, eps, alpha, beta) the worst-case power ncx2.sf(chi2.isf(alpha),
    k-1, 4 n eps^2) is >= 1 - beta, and at n - 1 it is not (checked with scipy directly);
    chi2_detectable_tv(n) <= eps (round trip)."""
    eps = 0.01
    n = chi2_min_samples(k, eps, alpha, beta)
    t = stats.chi2.isf(alpha, k - 1)
    assert stats.ncx2.cdf(t, k - 1, 4 * n * eps**2) <= beta * (1 + 1e-6)
    assert stats.ncx2.cdf(t, k - 1, 4 * (n - 1) * eps**2) > beta * (1 - 1e-6)
    assert chi2_detectable_tv(n, k, alpha, beta) <= eps
    assert chi2_detectable_tv(n - 1, k, alpha, beta) > eps * (1 - 1e-9)


def test_min_samples_monotone():
    """n grows as eps, alpha or beta shrink and as k grows."""
    base = dict(k=32, eps_tv=0.02, alpha=1e-6, beta=1e-6)
    n0 = chi2_min_samples(**base)
    assert chi2_min_samples(**{**base, "eps_tv": 0.01}) > n0
    assert chi2_min_samples(**{**base, "alpha": 1e-9}) > n0
    assert chi2_min_samples(**{**base, "beta": 1e-9}) > n0
    assert chi2_min_samples(**{**base, "k": 64}) > n0
    assert chi2_min_samples(**{**base, "k": 16}) < n0
    # quadratic in 1/eps: halving eps multiplies n by 4 (up to rounding)
    assert chi2_min_samples(**{**base, "eps_tv": 0.01}) / n0 == pytest.approx(4.0, rel=1e-3)


@pytest.mark.parametrize(
    "k, eps, expected",
    [(2, 0.02, 64e3), (8, 0.02, 78e3), (32, 0.01, 417e3), (1024, 0.005, 5.4e6), (128_000, 0.01, 12.8e6)],
)
def test_matches_published_design_table(k, eps, expected):
    """research/stats.md §4.4 table (alpha = 1e-7, beta = 1e-6), computed independently: within 2 %."""
    assert chi2_min_samples(k, eps, 1e-7, 1e-6) == pytest.approx(expected, rel=0.02)


def test_noncentrality_worst_case_is_4_n_eps2():
    """Cauchy-Schwarz: an alternative q = p (1 + 2 eps s), s = +-1 on two halves of equal mass, has
    TV = eps and lambda = 4 n eps^2 exactly; any other perturbation at the same TV has more."""
    p = [0.1, 0.15, 0.25, 0.2, 0.3]  # halves {0, 1, 2} and {3, 4} have mass 1/2 each
    eps, n = 0.03, 1000
    sign = [1, 1, 1, -1, -1]
    q = [pi * (1 + 2 * eps * si) for pi, si in zip(p, sign, strict=True)]
    assert 0.5 * sum(abs(a - b) for a, b in zip(p, q, strict=True)) == pytest.approx(eps)
    assert chi2_noncentrality(p, q, n) == pytest.approx(4 * n * eps**2)
    q2 = [p[0] + eps, p[1], p[2], p[3], p[4] - eps]  # same TV, concentrated
    assert chi2_noncentrality(p, q2, n) > 4 * n * eps**2


def test_chi2_power_counts_mass_on_zero_probability_cells():
    """A law that puts mass q0 where p = 0 is caught by the zero-mass check w.p. 1 - (1 - q0)^n."""
    p = [0.5, 0.5, 0.0]
    q = [0.45, 0.45, 0.1]
    assert chi2_power(p, q, 100, 1e-6) >= 1 - 0.9**100
    assert chi2_power(p, p, 100, 1e-6) == pytest.approx(1e-6, rel=1e-3)
    assert math.isclose(chi2_power([1.0, 0.0], [1.0, 0.0], 10, 1e-3), 0.0)
