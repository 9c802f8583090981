"""Meta-tests over many p-values, and multiple-testing decisions (Holm, Bonferroni)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ._checks import failure_message
from .bounds import dkw_detectable_discrepancy
from .certificate import Certificate


def _as_pvalues(pvals) -> np.ndarray:
    p = np.asarray(pvals, dtype=np.float64).ravel()
    if p.size == 0:
        raise ValueError("pvals must be non-empty")
    if not np.all(np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError("pvals must be finite and in [0, 1]")
    return p


def pvalues_uniform(
    pvals, alpha: float, *, beta: float | None = None, seed: int | None = None, label: str = ""
) -> Certificate:
    """Assert that p-values of independent tests under their nulls are U(0,1).

    Two tests at alpha/2 each: exact two-sided KS against U(0,1) (any departure), and Fisher's
    -2 sum ln p ~ chi2(2m) (p-values too small on average: a consistent small bias that no single
    test sees). Guarantee: for independent, exactly uniform p-values the assertion fails with
    probability <= alpha. Discrete-statistic p-values are super-uniform, which makes both parts
    conservative (use mid-p or randomised p-values for power). The certificate's eps is the
    Kolmogorov distance from uniform detected with probability >= 1 - beta (default alpha).
    """
    p = _as_pvalues(pvals)
    m = p.size
    beta = alpha if beta is None else beta
    ks = stats.kstest(p, "uniform")
    with np.errstate(divide="ignore"):
        fisher_stat = float(-2.0 * np.log(p).sum())
    fisher_p = float(stats.chi2.sf(fisher_stat, 2 * m))
    passed = ks.pvalue > alpha / 2 and fisher_p > alpha / 2
    eps = dkw_detectable_discrepancy(m, alpha / 2, beta)
    cert = Certificate(
        name="pvalues_uniform",
        law=label or "U(0,1)",
        what=f"p-values within Kolmogorov distance {eps:.3g} of U(0,1) and not biased low (Fisher)",
        n=m,
        alpha=alpha,
        beta=beta,
        eps=eps,
        statistic=float(ks.statistic),
        p_value=float(min(ks.pvalue, fisher_p)),
        seed=seed,
        passed=passed,
        detail={"ks_p_value": float(ks.pvalue), "fisher_statistic": fisher_stat, "fisher_p_value": fisher_p},
    )
    if not passed:
        deciles = np.histogram(p, bins=10, range=(0, 1))[0]
        raise AssertionError(
            failure_message(
                f"p-values not uniform{' (' + label + ')' if label else ''}: KS D={ks.statistic:.4g} "
                f"(p={ks.pvalue:.3g}), Fisher p={fisher_p:.3g}",
                f"alpha={alpha:g} (KS alpha/2, Fisher alpha/2), m={m}",
                f"decile counts: {deciles.tolist()} (expected {m / 10:.1f} each)",
                seed,
            )
        )
    return cert


def bonferroni(pvals, alpha: float) -> np.ndarray:
    """Rejections p_i <= alpha / m: family-wise error <= alpha under any dependence."""
    p = _as_pvalues(pvals)
    return p <= alpha / p.size


def holm(pvals, alpha: float) -> np.ndarray:
    """Holm's step-down rejections: sort p ascending, reject while p_(j) <= alpha / (m - j + 1).

    Family-wise error <= alpha under any dependence; rejects a superset of Bonferroni's, and
    rejects something iff Bonferroni does (so a CI gate is the same; Holm matters for reporting).
    """
    p = _as_pvalues(pvals)
    m = p.size
    order = np.argsort(p, kind="stable")
    ok = p[order] <= alpha / (m - np.arange(m))
    stop = m if ok.all() else int(np.argmin(ok))
    reject = np.zeros(m, dtype=bool)
    reject[order[:stop]] = True
    return reject
