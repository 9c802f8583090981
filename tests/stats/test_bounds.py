"""Distribution-free bounds: exact coverage checks and design round-trips (no sampling)."""

import math

import numpy as np
import pytest
from scipy import stats

from specsample.stats import (
    clopper_pearson,
    dkw_detectable_discrepancy,
    dkw_epsilon,
    dkw_min_samples,
    tv_certificate_min_samples,
    weissman_l1_epsilon,
)

RATES = [1e-9, 1e-6, 1e-3, 0.05]


@pytest.mark.parametrize("eps", [0.003, 0.01, 0.04, 0.2])
@pytest.mark.parametrize("false_fail", RATES)
@pytest.mark.parametrize("false_pass", RATES)
def test_dkw_design_round_trip(eps, false_fail, false_pass):
    """TFP's soundness check: min_discrepancy(min_samples(eps)) <= eps, not wastefully (>= eps/2),
    and n is the smallest such (n - 1 does not reach eps)."""
    n = dkw_min_samples(eps, false_fail, false_pass)
    reached = dkw_detectable_discrepancy(n, false_fail, false_pass)
    assert eps / 2 <= reached <= eps
    if n > 1:
        assert dkw_detectable_discrepancy(n - 1, false_fail, false_pass) > eps


def test_dkw_matches_published_sizes():
    """TFP's documented examples (research/stats.md §1.1, computed independently)."""
    assert dkw_min_samples(0.04, 1e-9, 1e-9) == 26_771
    assert dkw_min_samples(0.02, 1e-9, 1e-9) == 107_083
    assert dkw_min_samples(0.01, 1e-6, 1e-6) == 290_174
    assert dkw_epsilon(1000, 0.05) == pytest.approx(math.sqrt(math.log(40) / 2000))


@pytest.mark.parametrize("n", [1, 7, 50, 400])
@pytest.mark.parametrize("delta", [1e-6, 1e-2, 0.2])
def test_clopper_pearson_exact_coverage(n, delta):
    """Coverage computed exactly (sum over all m of Bin(m; n, theta)) at 200 rates theta, including
    the rates where coverage is lowest (just above an upper bound): P(theta > U(m)) <= delta and
    P(theta < L(m)) <= delta; the two-sided interval misses with probability <= delta."""
    m = np.arange(n + 1)
    upper = np.array([clopper_pearson(k, n, delta, "upper") for k in m])
    lower = np.array([clopper_pearson(k, n, delta, "lower") for k in m])
    lo2, hi2 = zip(*[clopper_pearson(k, n, delta, "two") for k in m], strict=True)
    thetas = np.unique(
        np.concatenate(
            [np.linspace(0, 1, 200), np.minimum(upper * (1 + 1e-9), 1.0), np.maximum(lower * (1 - 1e-9), 0.0)]
        )
    )
    pmf = stats.binom.pmf(m[None, :], n, thetas[:, None])  # [theta, m]
    th = thetas[:, None]
    assert np.all((pmf * (th > upper)).sum(axis=1) <= delta * (1 + 1e-9))
    assert np.all((pmf * (th < lower)).sum(axis=1) <= delta * (1 + 1e-9))
    outside = (th < np.array(lo2)) | (th > np.array(hi2))
    assert np.all((pmf * outside).sum(axis=1) <= delta * (1 + 1e-9))


def test_clopper_pearson_edges_and_published_values():
    """0 of n certifies rate <= ln(1/delta)/n approximately (research/stats.md §4.5: 1.38e-3 at
    n = 1e4, 1.38e-6 at n = 1e7, delta = 1e-6); m = n gives upper 1, m = 0 gives lower 0."""
    assert clopper_pearson(0, 10_000, 1e-6) == pytest.approx(1.38e-3, rel=2e-3)
    assert clopper_pearson(0, 10**7, 1e-6) == pytest.approx(1.38e-6, rel=2e-3)
    assert clopper_pearson(5, 5, 0.1) == 1.0
    assert clopper_pearson(0, 5, 0.1, "lower") == 0.0
    with pytest.raises(ValueError, match="side"):
        clopper_pearson(1, 5, 0.1, "both")
    with pytest.raises(ValueError, match="m must be"):
        clopper_pearson(6, 5, 0.1)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_weissman_bound_holds_exactly_for_small_k(k):
    """P(||p_hat - q||_1 >= eps(n, k, delta)) <= delta, computed by enumerating every count vector
    (k <= 5, n = 30) for three laws q, including a skewed one."""
    from itertools import product

    n, delta = 30, 0.05
    eps = weissman_l1_epsilon(n, k, delta)
    vectors = np.array([c for c in product(range(n + 1), repeat=k - 1) if sum(c) <= n])
    counts = np.concatenate([vectors, n - vectors.sum(axis=1, keepdims=True)], axis=1)
    for q in (
        np.full(k, 1 / k),
        np.linspace(1, 3, k) / np.linspace(1, 3, k).sum(),
        np.r_[0.9, np.full(k - 1, 0.1 / (k - 1))],
    ):
        pmf = stats.multinomial.pmf(counts, n, q)
        assert pmf.sum() == pytest.approx(1.0)
        l1 = np.abs(counts / n - q).sum(axis=1)
        assert pmf[l1 >= eps].sum() <= delta


@pytest.mark.parametrize("k", [2, 8, 32, 128])
@pytest.mark.parametrize("eps", [0.05, 0.02, 0.01])
def test_tv_certificate_min_samples(k, eps):
    """Smallest n whose null UCB radius (two Weissman radii) is <= eps; matches the closed form
    2 (ln(2^k - 2) + ln 1/delta) / eps^2 within 1 %, below research/stats.md §4.5's k ln 2 form."""
    delta = 1e-6
    n = tv_certificate_min_samples(k, eps, delta)
    radius = 0.5 * (weissman_l1_epsilon(n, k, delta) * 2)
    assert radius <= eps and 0.5 * weissman_l1_epsilon(n - 1, k, delta) * 2 > eps
    exact = 2 * (math.log(2**k - 2) + math.log(1 / delta)) / eps**2
    assert n == pytest.approx(exact, rel=0.01)
    assert n <= 2 * (k * math.log(2) + math.log(1 / delta)) / eps**2 + 1
