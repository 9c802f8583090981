"""The tester tested: simulated error rates of assert_gof and exact chi-square tail inflation.

    python -m specsample.stats.calibrate        # prints the soundness grid and the inflation table
    SPECSAMPLE_CALIBRATION_SEEDS=20000 python -m specsample.stats.calibrate   # bigger run

Used by tests/stats (with CI-sized seed counts) and by nightly/GPU runs (larger counts).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .bounds import clopper_pearson
from .gof import gof_design, gof_policy, run_gof

DEFAULT_SEEDS = 1000


def calibration_seeds(default: int = DEFAULT_SEEDS) -> int:
    """Number of simulated tables per configuration: env SPECSAMPLE_CALIBRATION_SEEDS or default."""
    return int(os.environ.get("SPECSAMPLE_CALIBRATION_SEEDS", default))


def two_halves_law(k: int, rng: np.random.Generator, spread: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """(p, sign): a law on k (even) categories whose first and second halves each carry mass 1/2
    (entries within a factor 1 + spread of each other), and sign = +1 on the first half, -1 on
    the second. Such a p admits the Cauchy-Schwarz-tight alternative of `worst_case_alternative`."""
    if k < 2 or k % 2:
        raise ValueError(f"k must be even and >= 2, got {k}")
    half = k // 2
    a = 1 + spread * rng.random(half)
    b = 1 + spread * rng.random(half)
    p = np.concatenate([a / a.sum(), b / b.sum()]) / 2
    sign = np.concatenate([np.ones(half), -np.ones(half)])
    return p, sign


def worst_case_alternative(p: np.ndarray, sign: np.ndarray, eps: float) -> np.ndarray:
    """q = p (1 + 2 eps sign): TV(p, q) = eps and chi-square noncentrality exactly 4 n eps^2, the
    smallest any alternative at TV eps can have (so the hardest to detect for Pearson's test)."""
    q = p * (1 + 2 * eps * sign)
    if np.any(q < 0) or abs(q.sum() - 1) > 1e-12:
        raise ValueError("sign must split p into two halves of mass 1/2 and eps must be < 1/2")
    return q


def designed_n(probs: np.ndarray, eps: float, alpha: float, beta: float) -> int:
    """Smallest n that passes assert_gof's design assertion for (probs, eps, alpha, beta)
    (bisection between the last failing and the first passing n of the fixed-point iteration)."""

    def passes(n: int) -> bool:
        return gof_design(n, probs, eps=eps, alpha=alpha, beta=beta)["required_n"] <= n

    lo, n = 1, 2
    while not passes(n):
        lo, n = n, max(n + 1, gof_design(n, probs, eps=eps, alpha=alpha, beta=beta)["required_n"])
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass
class GofRates:
    """Simulated failure counts of run_gof over `seeds` tables of n draws."""

    n: int
    seeds: int
    null_failures: int
    alt_failures: int

    def null_rate_ci(self, delta: float = 1e-6) -> tuple[float, float]:
        return clopper_pearson(self.null_failures, self.seeds, delta, "two")

    def power_ci(self, delta: float = 1e-6) -> tuple[float, float]:
        return clopper_pearson(self.alt_failures, self.seeds, delta, "two")


def _fails(counts: np.ndarray, probs: np.ndarray, alpha: float, eps: float, beta: float) -> bool:
    try:
        run_gof(counts, probs, alpha=alpha, eps=eps, beta=beta)
    except AssertionError:
        return True
    return False


def gof_rates(
    probs, alt, n: int, *, eps: float, alpha: float, beta: float, seeds: int, seed: int
) -> GofRates:
    """Run the assert_gof test on `seeds` multinomial tables from probs (null) and from alt."""
    rng = np.random.default_rng(seed)
    null = rng.multinomial(n, probs, size=seeds)
    bad = rng.multinomial(n, alt, size=seeds)
    null_failures = sum(_fails(c, probs, alpha, eps, beta) for c in null)
    alt_failures = sum(_fails(c, probs, alpha, eps, beta) for c in bad)
    return GofRates(n, seeds, int(null_failures), int(alt_failures))


def exact_pearson_tail(cell_probs, n: int, threshold: float, *, tail_mass: float = 1e-15) -> float:
    """P(X^2 >= threshold) for Pearson's X^2 of Multinomial(n, cell_probs), k = 2 or 3 cells, by
    enumerating count vectors (for k = 3 the first two cells are enumerated over windows holding
    all but <= tail_mass of their mass; 2 tail_mass is added, so the result is an upper bound that
    is exact to within 2 tail_mass)."""
    p = np.asarray(cell_probs, dtype=np.float64)
    k = p.size
    if k == 2:
        lo = int(stats.binom.ppf(tail_mass / 2, n, p[0]))
        hi = int(stats.binom.isf(tail_mass / 2, n, p[0]))
        c = np.arange(max(lo - 1, 0), min(hi + 1, n) + 1)
        x2 = (c - n * p[0]) ** 2 / (n * p[0]) + (n - c - n * p[1]) ** 2 / (n * p[1])
        pmf = stats.binom.pmf(c, n, p[0])
        return float(pmf[x2 >= threshold * (1 - 1e-12)].sum()) + tail_mass
    if k != 3:
        raise ValueError(f"exact enumeration supports k = 2 or 3 cells, got {k}")
    windows = []
    for j in range(2):
        lo = int(stats.binom.ppf(tail_mass / 2, n, p[j]))
        hi = int(stats.binom.isf(tail_mass / 2, n, p[j]))
        windows.append(np.arange(max(lo - 1, 0), min(hi + 1, n) + 1))
    c1, c2 = np.meshgrid(windows[0], windows[1], indexing="ij")
    c3 = n - c1 - c2
    ok = c3 >= 0
    c1, c2, c3 = c1[ok], c2[ok], c3[ok]
    logpmf = (
        special.gammaln(n + 1)
        - special.gammaln(c1 + 1)
        - special.gammaln(c2 + 1)
        - special.gammaln(c3 + 1)
        + c1 * math.log(p[0])
        + c2 * math.log(p[1])
        + c3 * math.log(p[2])
    )
    pmf = np.exp(logpmf)
    e = n * p
    x2 = (c1 - e[0]) ** 2 / e[0] + (c2 - e[1]) ** 2 / e[1] + (c3 - e[2]) ** 2 / e[2]
    # the windows leave out at most tail_mass of each enumerated cell's marginal (by construction);
    # adding that is rigorous, unlike 1 - sum(pmf), whose float64 rounding is ~1e-9 at n = 1e6
    return float(pmf[x2 >= threshold * (1 - 1e-12)].sum()) + 2 * tail_mass


def chi2_inflation(cell_probs, n: int, alpha: float) -> float:
    """Exact false-fail rate of the asymptotic level-alpha chi-square test divided by alpha."""
    df = len(cell_probs) - 1
    return exact_pearson_tail(cell_probs, n, float(stats.chi2.isf(alpha, df))) / alpha


SOUNDNESS_GRID = [
    # (k, eps, alpha, beta)
    (4, 0.08, 0.05, 0.05),
    (10, 0.05, 0.01, 0.05),
    (16, 0.05, 0.05, 0.01),
    (24, 0.04, 0.02, 0.02),
]


def main() -> None:
    seeds = calibration_seeds()
    print(f"assert_gof soundness ({seeds} simulated tables per row; 99.9999% Clopper-Pearson intervals)")
    print(f"{'k':>4} {'eps':>6} {'alpha':>6} {'beta':>6} {'n':>7} {'null fail rate':>28} {'power':>28}")
    rng = np.random.default_rng(20261129)
    for k, eps, alpha, beta in SOUNDNESS_GRID:
        p, sign = two_halves_law(k, rng)
        n = designed_n(p, eps, alpha, beta)
        r = gof_rates(
            p,
            worst_case_alternative(p, sign, eps),
            n,
            eps=eps,
            alpha=alpha,
            beta=beta,
            seeds=seeds,
            seed=int(rng.integers(2**63)),
        )
        lo, hi = r.null_rate_ci()
        plo, phi = r.power_ci()
        null_rate, power = r.null_failures / seeds, r.alt_failures / seeds
        print(
            f"{k:4d} {eps:6.3f} {alpha:6.3f} {beta:6.3f} {n:7d} "
            f"{null_rate:8.4f} [{lo:.4f}, {hi:.4f}] {power:8.4f} [{plo:.4f}, {phi:.4f}]"
        )
    print("\nexact chi-square tail inflation (actual / nominal false-fail rate)")
    print(f"{'cells':>24} {'E_min':>6} " + " ".join(f"{a:>9.0e}" for a in (1e-3, 1e-6, 1e-7, 1e-9)))
    for label, make in (
        ("k=2 skewed (E, n-E)", lambda E: [E / 1e6, 1 - E / 1e6]),
        ("k=3 equiprobable", lambda E: [1 / 3] * 3),
        ("k=3 two small (E, E, rest)", lambda E: [E / 1e6, E / 1e6, 1 - 2 * E / 1e6]),
    ):
        for E in (5, 20, 50):
            cells = make(E)
            n = int(1e6) if "equi" not in label else 3 * E
            row = " ".join(f"{chi2_inflation(cells, n, a):9.2f}" for a in (1e-3, 1e-6, 1e-7, 1e-9))
            print(f"{label:>24} {E:6d} {row}")

    print("\nassert_gof chi-square part under its policy (exact false-fail rate / declared alpha_chi)")
    for alpha in (1e-3, 1e-6, 1e-7, 1e-9):
        floor, nominal = gof_policy(alpha)
        cases = {
            "k=2 one small": ([floor / 1e6, 1 - floor / 1e6], 10**6),
            "k=3 two small": ([floor / 1e6, floor / 1e6, 1 - 2 * floor / 1e6], 10**6),
            "k=3 small+halves": ([floor / 1e6, 0.5, 0.5 - floor / 1e6], 10**6),
            "k=3 equiprobable": ([1 / 3] * 3, int(3 * floor)),
        }
        row = ", ".join(
            f"{name} {exact_pearson_tail(c, n, float(stats.chi2.isf(nominal, len(c) - 1))) / alpha:.3f}"
            for name, (c, n) in cases.items()
        )
        print(f"alpha_chi={alpha:g}: floor {floor:g}, nominal {nominal:g}: {row}")


if __name__ == "__main__":
    main()
