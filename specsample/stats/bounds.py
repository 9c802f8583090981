"""Distribution-free bounds: DKW (Kolmogorov distance), Weissman/BHC (L1), Clopper-Pearson (rates).

All functions are pure maths (no sampling), valid for every n >= 1 (no asymptotics).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _check_rate(name: str, value: float) -> None:
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")


def dkw_epsilon(n: int, delta: float) -> float:
    """eps = sqrt(ln(2/delta) / (2n)): for n i.i.d. draws from any law with CDF F,
    P(sup_x |F_n(x) - F(x)| > eps) <= delta (Dvoretzky-Kiefer-Wolfowitz with Massart's constant)."""
    _check_n(n)
    _check_rate("delta", delta)
    return math.sqrt(math.log(2.0 / delta) / (2.0 * n))


def dkw_detectable_discrepancy(n: int, false_fail: float, false_pass: float) -> float:
    """Kolmogorov distance that a KS/DKW assertion at `false_fail` detects with probability
    >= 1 - false_pass: dkw_epsilon(n, false_fail) + dkw_epsilon(n, false_pass) (TFP's design)."""
    return dkw_epsilon(n, false_fail) + dkw_epsilon(n, false_pass)


def dkw_min_samples(eps: float, false_fail: float, false_pass: float) -> int:
    """Smallest n with dkw_detectable_discrepancy(n, false_fail, false_pass) <= eps.

    Guarantee: with n >= this, a DKW assertion at level `false_fail` fails with probability
    >= 1 - false_pass whenever the true CDF is at Kolmogorov distance >= eps from the claimed one.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    _check_rate("false_fail", false_fail)
    _check_rate("false_pass", false_pass)
    root = math.sqrt(math.log(2.0 / false_fail)) + math.sqrt(math.log(2.0 / false_pass))
    n = math.ceil(root * root / (2.0 * eps * eps))
    while n > 1 and dkw_detectable_discrepancy(n - 1, false_fail, false_pass) <= eps:
        n -= 1
    while dkw_detectable_discrepancy(n, false_fail, false_pass) > eps:
        n += 1
    return n


def _log_two_pow_k_minus_two(k: int) -> float:
    # ln(2^k - 2) for k >= 2, without overflow
    return k * math.log(2.0) + math.log1p(-(2.0 ** (1 - k)))


def weissman_l1_epsilon(n: int, k: int, delta: float) -> float:
    """eps with P(||p_hat - q||_1 >= eps) <= delta for the empirical law p_hat of n i.i.d. draws
    from any q on k categories (Weissman et al. 2003: (2^k - 2) exp(-n eps^2 / 2)).

    The TV radius is half of it: TV(p_hat, q) <= eps/2 with probability >= 1 - delta."""
    _check_n(n)
    _check_rate("delta", delta)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    if k == 1:
        return 0.0  # one category: p_hat == q always
    return math.sqrt(2.0 * (_log_two_pow_k_minus_two(k) + math.log(1.0 / delta)) / n)


def tv_certificate_min_samples(k: int, eps: float, delta: float, false_fail: float | None = None) -> int:
    """Smallest n for which asserting "TV upper bound from counts <= eps" (Weissman UCB at
    confidence 1 - delta) fails a correct sampler with probability <= false_fail (default delta).

    Under the null TV(p_hat, p) <= weissman/2 at rate false_fail, so UCB <= r(false_fail) +
    r(delta) where r(x) = weissman_l1_epsilon(n, k, x) / 2; n is the smallest with that <= eps."""
    false_fail = delta if false_fail is None else false_fail
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    if k == 1:
        return 1

    def radius(n: int) -> float:
        return 0.5 * (weissman_l1_epsilon(n, k, delta) + weissman_l1_epsilon(n, k, false_fail))

    lo, hi = 1, 2
    while radius(hi) > eps:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        if radius(mid) <= eps:
            hi = mid
        else:
            lo = mid + 1
    return lo


def clopper_pearson(m: int, n: int, delta: float, side: str = "upper"):
    """Exact (Clopper-Pearson) confidence bound for a binomial rate from m successes in n trials.

    side="upper": u with P(rate > u) <= delta (u = 1 if m = n).
    side="lower": l with P(rate < l) <= delta (l = 0 if m = 0).
    side="two":   (l, u), each side at delta/2, so P(rate outside [l, u]) <= delta.
    Guaranteed coverage for every rate and every n (conservative; no normal approximation).
    """
    m, n = int(m), int(n)
    _check_n(n)
    if not 0 <= m <= n:
        raise ValueError(f"m must be in [0, n={n}], got {m}")
    _check_rate("delta", delta)
    if side == "upper":
        return 1.0 if m == n else float(stats.beta.isf(delta, m + 1, n - m))
    if side == "lower":
        return 0.0 if m == 0 else float(stats.beta.ppf(delta, m, n - m + 1))
    if side == "two":
        return (clopper_pearson(m, n, delta / 2, "lower"), clopper_pearson(m, n, delta / 2, "upper"))
    raise ValueError(f"side must be 'upper', 'lower' or 'two', got {side!r}")


def clopper_pearson_vec(m, n, delta: float, side: str = "upper") -> np.ndarray:
    """Vectorised `clopper_pearson` for arrays m (and n); side "upper" or "lower" only."""
    m = np.asarray(m, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n, dtype=np.float64), m.shape)
    _check_rate("delta", delta)
    if side == "upper":
        out = stats.beta.isf(delta, m + 1, np.maximum(n - m, 1e-300))
        return np.where(m >= n, 1.0, out)
    if side == "lower":
        out = stats.beta.ppf(delta, np.maximum(m, 1e-300), n - m + 1)
        return np.where(m <= 0, 0.0, out)
    raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
