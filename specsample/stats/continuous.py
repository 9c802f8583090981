"""KS/DKW checks for continuous quantities (uniforms, Exp(1) noise, race winners, PIT values).

KS is exact only for continuous laws (or with the left-continuous CDF for atoms, TFP-style); it
measures Kolmogorov distance, which depends on the order of the support, so it is never used on
raw token ids: use `randomized_pit` first, or the TV tools in gof.py / certify.py.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from ._checks import as_probs, failure_message
from .bounds import dkw_detectable_discrepancy, dkw_epsilon, dkw_min_samples
from .certificate import Certificate


def ks_distance(samples, cdf: Callable, left_cdf: Callable | None = None) -> float:
    """Exact sup_x |F_n(x) - F(x)| of the empirical CDF of samples against cdf.

    With atoms pass left_cdf(x) = P(X < x); without it F is taken as continuous at the samples.
    """
    x = np.sort(np.asarray(samples, dtype=np.float64).ravel())
    n = x.size
    if n == 0:
        raise ValueError("samples must be non-empty")
    f = np.asarray(cdf(x), dtype=np.float64)
    fl = f if left_cdf is None else np.asarray(left_cdf(x), dtype=np.float64)
    # at a run of ties the empirical CDF jumps from (first index - 1)/n to (last index)/n
    first = np.searchsorted(x, x, side="left")
    last = np.searchsorted(x, x, side="right")
    d_plus = np.max(last / n - f)
    d_minus = np.max(fl - first / n)
    return float(max(d_plus, d_minus, 0.0))


def assert_ks(
    samples,
    cdf: Callable,
    *,
    alpha: float,
    eps: float | None = None,
    beta: float | None = None,
    left_cdf: Callable | None = None,
    seed: int | None = None,
    label: str = "",
) -> Certificate:
    """Assert that samples are i.i.d. draws from the law with CDF `cdf` (DKW test).

    Fails iff the KS distance exceeds dkw_epsilon(n, alpha): a correct sampler fails with
    probability <= alpha for any law (atoms included when left_cdf is given). Design: when eps is
    given, first asserts n >= dkw_min_samples(eps, alpha, beta) ("design: n too small"), so any
    law at Kolmogorov distance >= eps fails with probability >= 1 - beta (beta defaults to alpha).
    Without eps the certificate states the detectable distance at (alpha, beta).
    """
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = x.size
    beta = alpha if beta is None else beta
    tag = f" ({label})" if label else ""
    detectable = dkw_detectable_discrepancy(n, alpha, beta)
    design = f"alpha={alpha:.3g}, beta={beta:.3g}, eps={eps if eps is not None else detectable:.4g}, n={n}"
    if eps is not None:
        required = dkw_min_samples(eps, alpha, beta)
        design += f", required n={required}"
        if n < required:
            raise AssertionError(
                failure_message(f"design: n too small{tag}: n={n} < required {required}", design, "", seed)
            )
    if not np.all(np.isfinite(x)):
        raise AssertionError(failure_message(f"non-finite samples{tag}", design, "", seed))
    d = ks_distance(x, cdf, left_cdf)
    threshold = dkw_epsilon(n, alpha)
    p_value = float(stats.kstwo.sf(d, n))
    stated = eps if eps is not None else detectable
    cert = Certificate(
        name="ks",
        law=label or "given CDF",
        what=f"Kolmogorov distance to the law < {stated:.3g} (power 1-{beta:g})",
        n=n,
        alpha=alpha,
        beta=beta,
        eps=stated,
        statistic=d,
        p_value=p_value,
        seed=seed,
        passed=d <= threshold,
        detail={"dkw_threshold": threshold},
    )
    if not cert.passed:
        raise AssertionError(
            failure_message(
                f"KS test failed{tag}: D={d:.4g} > DKW threshold {threshold:.4g} (p={p_value:.3g})",
                design,
                "",
                seed,
            )
        )
    return cert


def randomized_pit(tokens, probs, rng: np.random.Generator) -> np.ndarray:
    """Randomised probability integral transform V = F(y-) + U * p(y), U ~ U(0,1) from rng.

    probs is [V] (one law for all draws) or [B, V] (one law per draw). Guarantee: if each token
    is drawn from its law, V is exactly i.i.d. U(0,1), so assert_ks(V, uniform CDF) is exact.
    """
    y = np.asarray(tokens).astype(np.int64).ravel()
    p = as_probs(probs, ndim=None)
    if p.ndim == 1:
        p = np.broadcast_to(p, (y.size, p.shape[0]))
    if p.ndim != 2 or p.shape[0] != y.size:
        raise ValueError(f"probs must be [V] or [B, V] with B = number of tokens ({y.size}), got {p.shape}")
    if np.any((y < 0) | (y >= p.shape[1])):
        raise AssertionError(f"token ids outside [0, {p.shape[1]})")
    left = np.cumsum(p, axis=1) - p
    rows = np.arange(y.size)
    return left[rows, y] + rng.random(y.size) * p[rows, y]


def _uniform_cdf(x):
    return np.clip(x, 0.0, 1.0)


def _exp_cdf(x):
    return -np.expm1(-np.maximum(x, 0.0))


def race_winner_checks(
    winner_values,
    winners,
    probs,
    *,
    alpha: float,
    kind: str = "race",
    nbins: int = 10,
    beta: float | None = None,
    seed: int | None = None,
    label: str = "",
) -> Certificate:
    """Checks of an exponential race / Gumbel-max draw beyond the winner's law.

    kind="race":   winner_values are M = max_i p_i / E_i;   S = sum(p) / M ~ Exp(1)
    kind="gumbel": winner_values are G = max_i log p_i + g_i; S = exp(log sum(p) - G) ~ Exp(1)
    and S is independent of the argmax. Two tests at alpha/2 each: KS of S against Exp(1), and a
    goodness of fit of the joint (winner, Exp(1)-quantile bin of S) against p_i / sum(p) / nbins
    (pooled chi-square + exact cellwise + zero mass, no design assertion: the certificate reports
    the TV on the joint cells detectable at beta). Guarantee: a correct sampler fails with
    probability <= alpha. probs is [V] (the same law for every draw).
    """
    from .gof import gof_policy, run_gof
    from .power import chi2_detectable_tv

    p = as_probs(probs)
    w = np.asarray(winners).astype(np.int64).ravel()
    v = np.asarray(winner_values, dtype=np.float64).ravel()
    if w.size != v.size or w.size == 0:
        raise ValueError(
            f"winner_values and winners must have the same non-zero size, got {v.size}, {w.size}"
        )
    beta = alpha if beta is None else beta
    total = float(p.sum())
    if kind == "race":
        s = total / v
    elif kind == "gumbel":
        s = np.exp(np.log(total) - v)
    else:
        raise ValueError(f"kind must be 'race' or 'gumbel', got {kind!r}")
    ks = assert_ks(
        s, _exp_cdf, alpha=alpha / 2, beta=beta, seed=seed, label=(label + " winner value").strip()
    )
    edges = -np.log1p(-np.arange(1, nbins) / nbins)  # Exp(1) quantiles: equiprobable bins
    bins = np.searchsorted(edges, s, side="right")
    if np.any((w < 0) | (w >= p.size)):
        raise AssertionError(f"winner ids outside [0, {p.size})")
    joint_probs = np.repeat(p / total, nbins) / nbins
    counts = np.bincount(w * nbins + bins, minlength=p.size * nbins)
    outcome = run_gof(
        counts, joint_probs, alpha=alpha / 2, seed=seed, label=(label + " (winner, bin)").strip()
    )
    floor, nominal = gof_policy(outcome.detail["alpha_chi"])
    k_pooled = outcome.detail["k_pooled"]
    detectable = chi2_detectable_tv(w.size, k_pooled, nominal, beta) if k_pooled >= 2 else 1.0
    return Certificate(
        name="race_winner",
        law=label or f"{kind} winner",
        what="winner value ~ Exp(1) after scaling and independent of the argmax",
        n=int(w.size),
        alpha=alpha,
        beta=beta,
        eps=detectable,
        statistic=ks.statistic,
        p_value=min(ks.p_value, outcome.p_value) if outcome.p_value is not None else ks.p_value,
        seed=seed,
        passed=True,
        detail={"ks_p_value": ks.p_value, "joint_chi2_p_value": outcome.p_value, "joint": outcome.detail},
    )
