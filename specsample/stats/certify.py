"""Upper confidence bounds on total variation: from a coupling, and from counts.

Both return a Certificate whose `tv_bound` u satisfies P(true TV > u) <= delta.
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import as_counts, as_probs
from .bounds import clopper_pearson, clopper_pearson_vec, weissman_l1_epsilon
from .certificate import Certificate


def tv_ucb_from_coupling(
    mismatches: int, n: int, delta: float, *, seed: int | None = None, label: str = ""
) -> Certificate:
    """TV(kernel law, reference law) <= CP_upper(mismatches, n, delta) at confidence 1 - delta.

    Coupling inequality: when the kernel and the reference run on the same uniforms,
    TV <= P(kernel != reference); the one-sided Clopper-Pearson bound on that rate holds for
    every n and every vocabulary size. `passed` is always True (this certifies, it does not test);
    compare `tv_bound` with your eps, or use `assert_tv_below`.
    """
    bound = clopper_pearson(int(mismatches), int(n), delta, "upper")
    return Certificate(
        name="coupling",
        law=label or "reference on the same uniforms",
        what=f"TV(kernel, reference) <= {bound:.3g} at confidence 1-{delta:g}",
        n=int(n),
        delta=delta,
        statistic=float(mismatches),
        tv_bound=bound,
        seed=seed,
        passed=True,
        detail={"mismatch_rate": int(mismatches) / int(n)},
    )


def _tv_ucb_cellwise(c: np.ndarray, p: np.ndarray, n: int, delta: float, tail_threshold: float) -> float:
    # simultaneous Clopper-Pearson intervals (delta split over head categories + one tail event):
    # TV <= 1/2 [sum_head max(U_i - p_i, p_i - L_i) + UCB(q(T)) + p(T)]
    head = np.flatnonzero(p >= tail_threshold)
    tail = np.flatnonzero(p < tail_threshold)
    m = head.size + (1 if tail.size else 0)
    each = delta / (2 * m)  # two-sided per head category
    upper = clopper_pearson_vec(c[head], n, each, "upper")
    lower = clopper_pearson_vec(c[head], n, each, "lower")
    dev = np.maximum(upper - p[head], p[head] - lower)
    total = float(np.maximum(dev, 0).sum())
    if tail.size:
        total += clopper_pearson(int(c[tail].sum()), n, delta / m, "upper") + float(p[tail].sum())
    return 0.5 * total


def tv_ucb_from_counts(
    counts,
    probs,
    delta: float,
    *,
    tail_threshold: float | None = None,
    seed: int | None = None,
    label: str = "",
) -> Certificate:
    """Upper confidence bound on TV(sampler law, probs) from observed counts, at confidence 1 - delta.

    Two valid bounds are computed at delta/2 each and the smaller is returned (union bound):
      * Weissman/BHC: TV(p_hat, probs) + weissman_l1_epsilon(n, k, delta/2) / 2 (good for small k);
      * cellwise: simultaneous Clopper-Pearson intervals for categories with p >= tail_threshold
        plus one lumped interval for the pre-registered tail {p < tail_threshold} (good for large,
        peaked vocabularies; default threshold 1/(10 k)).
    Guarantee: P(TV(sampler, probs) > tv_bound) <= delta, for every n.
    """
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    n = int(c.sum())
    if n < 1:
        raise ValueError("counts must contain at least one observation")
    k = p.shape[0]
    tail_threshold = 1.0 / (10 * k) if tail_threshold is None else float(tail_threshold)
    empirical_tv = 0.5 * float(np.abs(c / n - p).sum())
    weissman = min(1.0, empirical_tv + 0.5 * weissman_l1_epsilon(n, k, delta / 2))
    cellwise = min(1.0, _tv_ucb_cellwise(c, p, n, delta / 2, tail_threshold))
    bound = min(weissman, cellwise)
    return Certificate(
        name="tv_from_counts",
        law=label or "target probs",
        what=f"TV(sampler, target) <= {bound:.3g} at confidence 1-{delta:g}",
        n=n,
        delta=delta,
        statistic=empirical_tv,
        tv_bound=bound,
        seed=seed,
        passed=True,
        detail={
            "weissman_bound": weissman,
            "cellwise_bound": cellwise,
            "tail_threshold": tail_threshold,
            "k": k,
        },
    )


def assert_tv_below(cert: Certificate, eps: float) -> Certificate:
    """Turn a TV certificate into an assertion: AssertionError unless cert.tv_bound <= eps."""
    if cert.tv_bound is None or not math.isfinite(cert.tv_bound):
        raise ValueError(f"certificate {cert.name!r} carries no TV bound")
    cert.eps = eps
    cert.passed = cert.tv_bound <= eps
    if not cert.passed:
        from .seeding import repro_line

        raise AssertionError(
            f"TV bound {cert.tv_bound:.4g} > eps {eps:g}: {cert.summary()}\n{repro_line(cert.seed)}"
        )
    return cert
