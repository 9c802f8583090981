"""Deterministic verification: stratified uniform grids and bisection on the uniform -> token map.

With uniforms injected on the centred grid u_k = (k + 1/2)/N, an inverse-CDF sampler's counts
obey |count_v - N p_v| < 1 and |sum_{i<=v} count_i - N C_v| <= 1/2 exactly (plus a floating-point
term when the sampler's CDF has error); a two-stage accept/reject sampler on an N1 x N2 grid obeys
the per-token bound of research/stats.md §6.2. No randomness: these checks have no alpha.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._checks import as_probs, failure_message
from .certificate import Certificate

_SLACK = 1e-9  # relative slack for float64 rounding in our own expected counts


def stratified_uniforms(N, dims: int = 1, dtype=np.float64) -> np.ndarray:
    """Centred grid (k + 1/2)/N: shape [N] for dims=1, else the product grid [prod N_d, dims]
    (first coordinate slowest). N is an int or one int per dimension. Values lie in (0, 1)."""
    sizes = [int(N)] * dims if np.ndim(N) == 0 else [int(x) for x in N]
    if len(sizes) != dims or min(sizes) < 1:
        raise ValueError(f"N must be a positive int or {dims} positive ints, got {N!r}")
    axes = [((np.arange(s, dtype=np.float64) + 0.5) / s) for s in sizes]
    if dims == 1:
        return axes[0].astype(dtype)
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1).astype(dtype)


def assert_inverse_cdf_grid(
    counts, probs, N: int, cdf_abs_err: float = 0.0, *, seed: int | None = None, label: str = ""
) -> Certificate:
    """Assert the counts of an inverse-CDF sampler run on stratified_uniforms(N).

    Checks, for every token v: |count_v - N p_v| <= 1 + 2 N cdf_abs_err (< 1 in exact arithmetic),
    |cumulative count - N C_v| <= 1/2 + N cdf_abs_err, p_v = 0 => count_v = 0, sum = N.
    cdf_abs_err bounds |C_sampler - C| of the sampler's own (floating-point) CDF. Passing implies
    the sampler's implied CDF is within (1 + N cdf_abs_err)/N of C at every token (Kolmogorov).
    """
    p = as_probs(probs)
    c = np.asarray(counts).astype(np.int64).ravel()
    tag = f" ({label})" if label else ""
    if c.shape != p.shape:
        raise ValueError(f"counts must have one entry per token ({p.shape[0]}), got shape {c.shape}")
    # float64 evaluation of N * C_v in this check: |error| <= N * V * 2^-52 (a few ulps per term)
    slack = N * p.shape[0] * 2.0**-52 + 1e-12
    token_bound = 1.0 + 2.0 * N * cdf_abs_err
    cum_bound = 0.5 + N * cdf_abs_err
    dev = np.abs(c - N * p)
    cum_dev = np.abs(np.cumsum(c) - N * np.cumsum(p))
    zero_bad = np.flatnonzero((p <= 0) & (c > 0))
    token_bad = np.flatnonzero(dev > token_bound + slack)
    cum_bad = np.flatnonzero(cum_dev > cum_bound + slack)
    passed = c.sum() == N and not (zero_bad.size or token_bad.size or cum_bad.size)
    cert = Certificate(
        name="inverse_cdf_grid",
        law=label or "target probs",
        what=f"implied CDF within {(1 + N * cdf_abs_err) / N:.3g} of the target CDF at every token",
        n=int(N),
        statistic=float(dev.max()),
        passed=bool(passed),
        seed=seed,
        detail={
            "max_token_deviation": float(dev.max()),
            "max_cumulative_deviation": float(cum_dev.max()),
            "token_bound": token_bound,
            "cumulative_bound": cum_bound,
            "cdf_abs_err": cdf_abs_err,
        },
    )
    if not passed:
        worst = np.argsort(-dev, kind="stable")[:8]
        table = "token  N*p          count   |dev|\n" + "\n".join(
            f"{v:5d}  {N * p[v]:11.3f} {c[v]:7d} {dev[v]:7.3f}" for v in worst
        )
        raise AssertionError(
            failure_message(
                f"inverse-CDF grid bound violated{tag}: sum={c.sum()} (N={N}), tokens over bound "
                f"{token_bad[:8].tolist()}, cumulative over bound {cum_bad[:8].tolist()}, "
                f"zero-probability emitted {zero_bad[:8].tolist()}",
                f"N={N}, per-token bound {token_bound:.6g}, cumulative bound {cum_bound:.6g}",
                table,
                seed,
            )
        )
    return cert


def accept_reject_conditional_law(p, q=None) -> tuple[np.ndarray, np.ndarray]:
    """Exact law of the two-stage sampler given draft token x: (r, rho) with
    P(y | x) = r_x 1[y = x] + (1 - r_x) rho[x, y].

    Classic (q given): r_x = min(1, p_x / q_x) (0 when q_x = 0: that draft is rejected),
    rho[x] = normalize(max(0, p - q)) for every x. One-hot (q None): r_x = p_x, rho[x] = p with x
    zeroed, renormalised. A residual with no mass falls back to p (docs/semantics.md)."""
    p = as_probs(p)
    V = p.shape[0]
    if q is None:
        r = p.copy()
        rho = np.tile(p, (V, 1))
        rho[np.arange(V), np.arange(V)] = 0.0
    else:
        q = as_probs(q, "q")
        if q.shape != p.shape:
            raise ValueError(f"q must have the shape of p {p.shape}, got {q.shape}")
        r = np.where(q > 0, np.minimum(1.0, p / np.where(q > 0, q, 1.0)), 0.0)
        rho = np.tile(np.maximum(0.0, p - q), (V, 1))
    mass = rho.sum(axis=1, keepdims=True)
    rho = np.where(mass > 0, rho / np.where(mass > 0, mass, 1.0), p[None, :])
    return r, rho


def assert_accept_reject_grid(
    counts,
    p,
    q=None,
    *,
    N1: int,
    N2: int,
    accept_abs_err: float = 0.0,
    cdf_abs_err: float = 0.0,
    seed: int | None = None,
    label: str = "",
) -> Certificate:
    """Assert the counts of a two-stage accept/reject sampler on the N1 x N2 stratified grid.

    counts[x, y] = number of grid points (u1, u2) in stratified_uniforms((N1, N2), 2) for which
    the sampler with draft token x emitted y (u1 decides acceptance: accept iff u1 < r_x; u2
    drives the inverse CDF of the residual). With the exact law of `accept_reject_conditional_law`,
    for every (x, y):
      |counts[x, y] / (N1 N2) - P(y | x)| <= (1/(2 N1) + accept_abs_err) |1[y = x] - rho[x, y]|
                                             + (1 + 2 N2 cdf_abs_err) / N2
    (research/stats.md §6.2; the marginal bound 1/2 (q_y + rho_y)/N1 + 1/N2 follows by weighting
    with q). accept_abs_err bounds |r_sampler - r|, cdf_abs_err the residual CDF error. Checking
    each x separately kills bugs that cancel in the marginal. Zero-probability outputs must be 0.
    """
    p = as_probs(p)
    V = p.shape[0]
    c = np.asarray(counts).astype(np.int64)
    tag = f" ({label})" if label else ""
    if c.shape != (V, V):
        raise ValueError(f"counts must be [V, V] = [{V}, {V}] (draft x, output y), got {c.shape}")
    r, rho = accept_reject_conditional_law(p, q)
    total = N1 * N2
    law = r[:, None] * np.eye(V) + (1.0 - r[:, None]) * rho
    bound = (0.5 / N1 + accept_abs_err) * np.abs(np.eye(V) - rho) + (1.0 + 2.0 * N2 * cdf_abs_err) / N2
    dev = np.abs(c / total - law)
    over = dev > bound + _SLACK
    zero_bad = (p[None, :] <= 0) & (c > 0)
    sums_bad = c.sum(axis=1) != total
    passed = not (over.any() or zero_bad.any() or sums_bad.any())
    ratio = float((dev / bound).max())
    cert = Certificate(
        name="accept_reject_grid",
        law=label or ("classic chain" if q is not None else "one-hot draft"),
        what="every conditional law P(y | draft x) within the §6.2 grid bound of the exact law",
        n=int(total * V),
        statistic=ratio,
        seed=seed,
        passed=bool(passed),
        detail={"max_error_over_bound": ratio, "N1": N1, "N2": N2, "max_abs_deviation": float(dev.max())},
    )
    if not passed:
        xs, ys = np.nonzero(over | zero_bad)
        table = "x     y     count     expected      bound*N1N2\n" + "\n".join(
            f"{x:<5d} {y:<5d} {c[x, y]:<9d} {law[x, y] * total:<13.3f} {bound[x, y] * total:.3f}"
            for x, y in zip(xs[:10], ys[:10], strict=True)
        )
        raise AssertionError(
            failure_message(
                f"accept/reject grid bound violated{tag}: {int(over.sum())} (x, y) over bound, "
                f"{int(zero_bad.sum())} zero-probability outputs, rows not summing to N1*N2: "
                f"{np.flatnonzero(sums_bad)[:8].tolist()}",
                f"N1={N1}, N2={N2}, accept_abs_err={accept_abs_err:g}, cdf_abs_err={cdf_abs_err:g}",
                table,
                seed,
            )
        )
    return cert


def implied_pmf_by_bisection(
    token_of_u: Callable[[np.ndarray], np.ndarray], V: int, *, steps: int = 48, check_points: int = 4097
) -> np.ndarray:
    """The exact law of token_of_u(U), U ~ U[0,1), for a monotone non-decreasing map into [0, V).

    token_of_u takes a float64 array of u in [0, 1) and returns token ids (one batched call per
    step, V - 1 points each). The jump location L_v = inf{u : token(u) >= v} is bracketed by
    bisection for every v at once; pmf_v = L_{v+1} - L_v. Guarantee: each L_v is within 2^-steps,
    so each pmf entry is within 2^(1-steps) of the implied law (steps=48: 7.1e-15), and a token
    that no u reaches gets exactly 0. Monotonicity and range are first checked on check_points
    grid points (AssertionError otherwise); the map is assumed monotone between them.
    """
    if V < 1 or steps < 1:
        raise ValueError(f"need V >= 1 and steps >= 1, got V={V}, steps={steps}")
    grid = np.concatenate([[0.0], stratified_uniforms(check_points)])
    t = np.asarray(token_of_u(grid)).astype(np.int64)
    if np.any((t < 0) | (t >= V)):
        raise AssertionError(
            f"token_of_u returned ids outside [0, {V}): {np.unique(t[(t < 0) | (t >= V)])[:8]}"
        )
    if np.any(np.diff(t) < 0):
        k = int(np.argmax(np.diff(t) < 0))
        raise AssertionError(
            f"token_of_u is not monotone: token({grid[k]:.6g}) = {t[k]} > "
            f"token({grid[k + 1]:.6g}) = {t[k + 1]}"
        )
    if V == 1:
        return np.ones(1)
    v = np.arange(1, V, dtype=np.int64)
    at_zero = t[0] >= v
    lo = np.zeros(V - 1)
    hi = np.ones(V - 1)  # token(1) is taken as V: every boundary lies in [0, 1]
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        ge = np.asarray(token_of_u(mid)).astype(np.int64) >= v
        hi = np.where(ge, mid, hi)
        lo = np.where(ge, lo, mid)
    jumps = np.where(at_zero, 0.0, hi)
    edges = np.concatenate([[0.0], jumps, [1.0]])
    return np.diff(edges)


def assert_implied_pmf(pmf, probs, *, tv_tol: float, seed: int | None = None, label: str = "") -> Certificate:
    """Deterministic: TV(implied pmf, probs) <= tv_tol, and pmf is 0 wherever probs is 0
    (up to the bisection resolution 2^-40). The certificate's tv_bound is the computed TV."""
    implied = np.asarray(pmf, dtype=np.float64)
    p = as_probs(probs)
    if implied.shape != p.shape:
        raise ValueError(f"pmf must have the shape of probs {p.shape}, got {implied.shape}")
    tv = 0.5 * float(np.abs(implied - p).sum())
    zero_bad = np.flatnonzero((p <= 0) & (implied > 2.0**-40))
    passed = tv <= tv_tol and zero_bad.size == 0
    cert = Certificate(
        name="implied_pmf",
        law=label or "target probs",
        what=f"TV(implied law, target) = {tv:.3g} <= {tv_tol:g} (computed, not estimated)",
        n=int(p.shape[0]),
        eps=tv_tol,
        statistic=tv,
        tv_bound=tv,
        seed=seed,
        passed=passed,
        detail={"zero_probability_reached": zero_bad[:16].tolist()},
    )
    if not passed:
        worst = np.argsort(-np.abs(implied - p), kind="stable")[:8]
        table = "token  target         implied\n" + "\n".join(
            f"{v:5d}  {p[v]:.6e}  {implied[v]:.6e}" for v in worst
        )
        raise AssertionError(
            failure_message(
                f"implied pmf differs{' (' + label + ')' if label else ''}: TV={tv:.4g} > {tv_tol:g} or "
                f"zero-probability tokens reached {zero_bad[:8].tolist()}",
                f"tv_tol={tv_tol:g}",
                table,
                seed,
            )
        )
    return cert
