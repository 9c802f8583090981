"""Sample-size design for Pearson chi-square goodness-of-fit tests.

Under an alternative q the Pearson statistic over k cells is approximately noncentral
chi-square(k - 1, lambda) with lambda = n * sum((q - p)^2 / p). By Cauchy-Schwarz,
(sum |q - p|)^2 <= sum (q - p)^2 / p, so every q at TV distance >= eps has lambda >= 4 n eps^2.
A design with ncx2.sf(chi2.isf(alpha, k-1), k-1, 4 n eps^2) >= 1 - beta therefore detects every
alternative at TV >= eps (measured on the tested cells) with probability >= 1 - beta, to the
accuracy of the noncentral approximation (which the pooling rule in gof.py keeps adequate).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, stats


def chi2_threshold(df: int, alpha: float) -> float:
    """Critical value t with P(chi2(df) >= t) = alpha."""
    return float(stats.chi2.isf(alpha, df))


@functools.lru_cache(maxsize=4096)
def _lambda_for_power(df: int, alpha: float, beta: float) -> float:
    # smallest noncentrality lambda with P(ncx2(df, lambda) < t) <= beta (power >= 1 - beta)
    if not 0 < alpha < 1 or not 0 < beta < 1:
        raise ValueError(f"alpha and beta must be in (0, 1), got alpha={alpha!r}, beta={beta!r}")
    if df < 1:
        raise ValueError(f"df must be >= 1 (k >= 2 cells), got {df}")
    t = chi2_threshold(df, alpha)
    log_beta = math.log(beta)

    def gap(lam: float) -> float:
        return float(np.log(max(stats.ncx2.cdf(t, df, lam), 1e-320))) - log_beta

    hi = max(1.0, t)
    while gap(hi) > 0:
        hi *= 2.0
    return float(optimize.brentq(gap, 0.0, hi, xtol=1e-12, rtol=1e-13))


def chi2_min_samples(k: int, eps_tv: float, alpha: float, beta: float) -> int:
    """Smallest n such that a level-alpha Pearson chi-square test over k cells has power >= 1 - beta
    against every alternative at TV >= eps_tv (worst-case noncentrality 4 n eps_tv^2).

    Guarantee: chi2_detectable_tv(chi2_min_samples(k, e, a, b), k, a, b) <= e.
    """
    if not eps_tv > 0:
        raise ValueError(f"eps_tv must be > 0, got {eps_tv!r}")
    lam = _lambda_for_power(k - 1, alpha, beta)
    n = math.ceil(lam / (4.0 * eps_tv * eps_tv))
    while chi2_detectable_tv(n, k, alpha, beta) > eps_tv:  # guard against rounding in the division
        n += 1
    return max(n, 1)


def chi2_detectable_tv(n: int, k: int, alpha: float, beta: float) -> float:
    """Smallest TV distance that a level-alpha Pearson chi-square over k cells with n samples
    detects with probability >= 1 - beta for every alternative: sqrt(lambda* / (4 n))."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    return math.sqrt(_lambda_for_power(k - 1, alpha, beta) / (4.0 * n))


def chi2_noncentrality(p, q, n: int) -> float:
    """lambda = n * sum over cells with p > 0 of (q - p)^2 / p."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    keep = p > 0
    return float(n * np.sum((q[keep] - p[keep]) ** 2 / p[keep]))


def chi2_power(p, q, n: int, alpha: float) -> float:
    """Approximate probability that n draws from q fail a level-alpha chi-square test against p.

    Over the cells with p > 0: ncx2.sf(chi2.isf(alpha, k-1), k-1, lambda(p, q, n)). Mass that q
    puts on cells with p = 0 is caught by the deterministic zero-mass check with probability
    1 - (1 - q0)^n; the larger of the two is returned (a lower bound on the combined power).
    For mutant studies and design tables; cells are not pooled here.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"p and q must be 1-D of the same shape, got {p.shape} and {q.shape}")
    k = int(np.count_nonzero(p > 0))
    q0 = float(q[p <= 0].sum())
    zero_power = 1.0 - (1.0 - min(q0, 1.0)) ** n
    if k < 2:
        return zero_power
    t = chi2_threshold(k - 1, alpha)
    chi_power = float(stats.ncx2.sf(t, k - 1, chi2_noncentrality(p, q, n)))
    return max(chi_power, zero_power)
