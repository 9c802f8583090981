"""The verifier's one door to `specsample.stats`: designed GOF runs that report instead of raise.

`specsample.stats` asserts (raises AssertionError with the table, design and repro seed). The
runner must record every verdict and keep going, and it wants each test's p-value for the QQ plot
and the calibration run, so `designed_gof` wraps `assert_gof` / `run_gof` into a `GofOutcome`.
Nothing statistical is re-implemented here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsample import stats as st

clopper_pearson = st.clopper_pearson
chi2_min_samples = st.chi2_min_samples
chi2_detectable_tv = st.chi2_detectable_tv


def tv_ucb_from_coupling(mismatches: int, n: int, delta: float) -> float:
    """TV(sampler, reference) <= P(mismatch) <= this, at confidence 1 - delta (specsample.stats)."""
    return float(st.tv_ucb_from_coupling(int(mismatches), int(n), delta).tv_bound)


def design_rows(probs, eps: float, alpha: float, beta: float, cap: int, floor: int = 1) -> int:
    """Smallest n >= floor that meets `specsample.stats.gof_design`'s required n for (probs, eps,
    alpha, beta), capped at `cap` (then the certificate states the TV it does detect)."""
    p = np.asarray(probs, np.float64).ravel()
    p = p / p.sum()
    k = max(int((p > 0).sum()), 2)
    n = max(floor, chi2_min_samples(k, eps, alpha, beta))
    for _ in range(8):  # pooling depends on n; iterate to the fixed point
        need = st.gof_design(n, p, eps=eps, alpha=alpha, beta=beta)["required_n"] or n
        if need <= n:
            break
        n = need
    return int(min(n, cap))


@dataclass
class GofOutcome:
    """Verdict, p-value and design of one goodness-of-fit assertion."""

    passed: bool
    n: int
    pvalue: float | None
    detectable_eps: float
    message: str
    certificate: dict | None = None


def designed_gof(
    counts, probs, *, eps: float, alpha: float, beta: float, seed: int | None = None, label: str = ""
) -> GofOutcome:
    """`assert_gof` when n meets the design for eps, else `run_gof` (no power claim at eps; the
    outcome states the TV distance the actual n detects with probability >= 1 - beta)."""
    c = np.asarray(counts, np.int64).ravel()
    p = np.asarray(probs, np.float64).ravel()
    n = int(c.sum())
    d = st.gof_design(n, p, eps=eps, alpha=alpha, beta=beta)
    k_pooled = max(int(d["k_pooled"]), 2)
    detectable = chi2_detectable_tv(max(n, 1), k_pooled, d["nominal_chi"], beta)
    meets = d["required_n"] is not None and n >= d["required_n"]
    chi = st.chisquare_gof(c, p, cells=d["cells"])
    # the pooled chi-square p-value (continuous under the null; None for a single pooled cell): what
    # the QQ plot and the calibration use. The verdict also includes the sparse-cell and zero-mass parts.
    pvalue = float(chi.p_value) if chi.df >= 1 else None
    try:
        if meets:
            cert = st.assert_gof(c, p, eps=eps, alpha=alpha, beta=beta, seed=seed, label=label)
        else:
            cert = st.run_gof(c, p, alpha=alpha, seed=seed, label=label)
        return GofOutcome(True, n, pvalue, detectable, cert.what, cert.to_dict())
    except AssertionError as exc:
        first = " | ".join(line.strip() for line in str(exc).splitlines()[:8] if line.strip())
        return GofOutcome(False, n, pvalue, detectable, first)
