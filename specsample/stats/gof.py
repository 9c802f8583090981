"""Goodness of fit of observed counts to a known categorical law.

The assertion `assert_gof` combines three parts, each with a stated error rate:
  1. Pearson chi-square over cells pooled by *expected* counts only (never by observed counts);
  2. exact two-sided binomial tests, Bonferroni'd, for every category whose expected count is
     below the pooling floor (valid at any expected count; sees bugs hidden inside pooled cells);
  3. a deterministic zero-mass check (a category with probability 0 observed even once fails).

Tail accuracy. The chi-square approximation under-states the upper tail when cells are small:
the worst case is one small Poisson-like cell next to a large one (1 degree of freedom), where at
expected count 20 the real false-fail rate at nominal 1e-6 is ~12x the nominal one. `gof_policy`
therefore (a) evaluates the chi-square at alpha_chi / TAIL_SAFETY and (b) raises the pooling floor
above 20 until that worst case, computed exactly from the Poisson law, is <= alpha_chi / 2.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy import special, stats

from ._checks import as_counts, as_probs, failure_message
from .certificate import Certificate
from .power import chi2_min_samples

MIN_EXPECTED = 20.0  # the pooling floor never goes below this
TAIL_SAFETY = 10.0  # chi-square evaluated at alpha_chi / TAIL_SAFETY
_FLOOR_LADDER = (20.0, 30.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0)


@dataclass
class CellMap:
    """A pooling of k categories into cells, decided from probabilities and n only.

    cell_of[i]   pooled cell of category i (-1 for categories with probability 0)
    members[c]   category ids in cell c, in descending-probability order
    probs[c]     probability of cell c
    min_expected the floor used: every cell has n * probs[c] >= min_expected when n * (total
                 positive mass) >= min_expected (else there is one cell)
    """

    cell_of: np.ndarray
    members: list[np.ndarray]
    probs: np.ndarray
    min_expected: float

    @property
    def num_cells(self) -> int:
        return len(self.members)

    def pool(self, counts: np.ndarray) -> np.ndarray:
        """Observed counts per cell (categories with cell -1 are left out)."""
        keep = self.cell_of >= 0
        pooled = np.bincount(self.cell_of[keep], weights=counts[keep], minlength=self.num_cells)
        return pooled.astype(np.int64)

    def multi_member_mass(self) -> float:
        """Probability of cells with more than one member: TV hidden inside them is at most this."""
        return float(sum(self.probs[c] for c, m in enumerate(self.members) if len(m) > 1))


def pool_by_expected(probs, n: int, min_expected: float = MIN_EXPECTED) -> CellMap:
    """Pool categories into cells with expected count n * p >= min_expected, never looking at data.

    Categories with p > 0 are sorted by descending p (ties by id); consecutive ones are merged
    until the cell's expected count reaches min_expected; a remainder below it is merged into the
    last cell. Categories with p = 0 are left out (cell -1): they belong to the zero-mass check.
    Deterministic in (probs, n, min_expected).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    return _pool(as_probs(probs), n, min_expected)


def _pool(p: np.ndarray, n: int, min_expected: float) -> CellMap:
    order = np.argsort(-p, kind="stable")
    order = order[p[order] > 0]
    cell_of = np.full(p.shape[0], -1, dtype=np.int64)
    members: list[list[int]] = []
    current: list[int] = []
    mass = 0.0
    for idx in order:
        current.append(int(idx))
        mass += p[idx]
        if n * mass >= min_expected:
            members.append(current)
            current, mass = [], 0.0
    if current:
        if members:
            members[-1].extend(current)
        else:
            members.append(current)
    member_arrays = [np.asarray(m, dtype=np.int64) for m in members]
    for c, m in enumerate(member_arrays):
        cell_of[m] = c
    cell_probs = np.bincount(cell_of[cell_of >= 0], weights=p[cell_of >= 0], minlength=len(member_arrays))
    return CellMap(cell_of, member_arrays, cell_probs, float(min_expected))


def _small_cells_tail(expected: float, t: float) -> float:
    # P(sum of m independent (X - E)^2 / E >= t), X ~ Poisson(E), worst of m = 1, 2: the chi-square
    # with one or two small cells next to large ones (whose contribution is ~0), the worst cases
    # of the asymptotic tail (the large cells only add chi-square df, which is better behaved)
    half = 12.0 * math.sqrt(expected) + 40.0
    c = np.arange(max(0, math.floor(expected - half)), math.ceil(expected + half) + 1)
    pmf = stats.poisson.pmf(c, expected)
    z2 = (c - expected) ** 2 / expected
    one = float(pmf[z2 >= t].sum())
    pair = np.outer(pmf, pmf)
    t2 = float(stats.chi2.isf(stats.chi2.sf(t, 1), 2))  # the 2-df threshold at the same level
    two = float(pair[(z2[:, None] + z2[None, :]) >= t2].sum())
    return max(one, two) + 2e-16 * c.size  # outside the window: < 1e-30 of Poisson mass


@functools.lru_cache(maxsize=1024)
def gof_policy(alpha_chi: float) -> tuple[float, float]:
    """(pooling floor, nominal chi-square level) that keep the pooled chi-square's real false-fail
    rate under alpha_chi: nominal = alpha_chi / TAIL_SAFETY, floor = smallest of 20, 30, 50, 100,
    200, 500, ... at which the exact tail with one or two small cells (Poisson, at the nominal
    1-df and 2-df thresholds) is <= alpha_chi / 2."""
    if not 0 < alpha_chi < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha_chi!r}")
    nominal = alpha_chi / TAIL_SAFETY
    t = float(stats.chi2.isf(nominal, 1))
    for floor in _FLOOR_LADDER:
        if _small_cells_tail(floor, t) <= alpha_chi / 2:
            return floor, nominal
    return _FLOOR_LADDER[-1], nominal


@dataclass
class ChiSquareResult:
    """Pearson chi-square over pooled cells: statistic, df = cells - 1, asymptotic p-value."""

    statistic: float
    df: int
    p_value: float
    cells: CellMap
    observed: np.ndarray
    expected: np.ndarray

    def table(self, rows: int = 12) -> str:
        """The pooled table (largest |standardised residual| first), `rows` rows."""
        return _pooled_table(self.cells, self.observed, self.expected, rows)


def _pooled_table(cells: CellMap, observed: np.ndarray, expected: np.ndarray, rows: int) -> str:
    resid = (observed - expected) / np.sqrt(np.maximum(expected, 1e-300))
    order = np.argsort(-np.abs(resid), kind="stable")[:rows]
    lines = [
        f"pooled table ({cells.num_cells} cells, worst {len(order)} shown):",
        "  cell  members               expected     observed   (o-e)/sqrt(e)",
    ]
    for c in order:
        m = cells.members[c]
        ids = ",".join(str(i) for i in m[:4]) + (f",..(+{len(m) - 4})" if len(m) > 4 else "")
        lines.append(f"  {c:4d}  {ids:<20s} {expected[c]:11.2f} {observed[c]:12d} {resid[c]:+14.2f}")
    return "\n".join(lines)


def chisquare_gof(
    counts, probs, *, min_expected: float = MIN_EXPECTED, cells: CellMap | None = None
) -> ChiSquareResult:
    """Pearson X^2 of counts against probs after `pool_by_expected(probs, n, min_expected)`.

    Every category is counted (zero-observed ones included); categories with p = 0 are excluded
    (see assert_zero_mass). p-value = chi2.sf(X^2, cells - 1); 1.0 when there is a single cell.
    Guarantee: the pooling never depends on counts, so the null law of X^2 is that of a fixed
    partition; read the module docstring for the accuracy of the chi-square tail.
    """
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    n = int(c.sum())
    if n < 1:
        raise ValueError("counts must contain at least one observation")
    return _chisquare(c, p, _pool(p, n, min_expected) if cells is None else cells)


def _chisquare(c: np.ndarray, p: np.ndarray, cells: CellMap) -> ChiSquareResult:
    n = int(c.sum())
    observed = cells.pool(c)
    expected = n * cells.probs
    df = cells.num_cells - 1
    if df < 1:
        return ChiSquareResult(0.0, 0, 1.0, cells, observed, expected)
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    return ChiSquareResult(statistic, df, float(special.chdtrc(df, statistic)), cells, observed, expected)


@dataclass
class CellwiseResult:
    """Exact per-category binomial tests: p-values of the tested categories and the decision."""

    categories: np.ndarray
    p_values: np.ndarray
    level: float  # per-category level = alpha / number tested (Bonferroni)
    rejected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def min_p(self) -> float:
        return float(self.p_values.min()) if self.p_values.size else 1.0


def binomial_two_sided_pvalues(counts, n: int, probs) -> np.ndarray:
    """Exact two-sided binomial p-values min(1, 2 min(P(X <= c), P(X >= c))), X ~ Bin(n, p).

    Valid (super-uniform) at every n and p: P(p-value <= a) <= a under the null."""
    c = np.asarray(counts, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    low = special.bdtr(c, n, p)
    high = np.where(c >= 1, special.bdtrc(c - 1, n, p), 1.0)
    return np.minimum(1.0, 2.0 * np.minimum(low, high))


def exact_cellwise_binomial(counts, probs, *, alpha: float, categories=None) -> CellwiseResult:
    """Exact two-sided binomial test of each category's count (Bonferroni over tested categories).

    categories: ids to test (default: every category with p > 0). Guarantee: under the null the
    probability that any tested category is rejected is <= alpha, at any expected count.
    """
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    cats = np.flatnonzero(p > 0) if categories is None else np.asarray(categories, dtype=np.int64)
    return _cellwise(c, p, alpha, cats)


def _cellwise(c: np.ndarray, p: np.ndarray, alpha: float, cats: np.ndarray) -> CellwiseResult:
    n = int(c.sum())
    if cats.size == 0:
        return CellwiseResult(cats, np.zeros(0), alpha)
    pvals = binomial_two_sided_pvalues(c[cats], n, p[cats])
    level = alpha / cats.size
    return CellwiseResult(cats, pvals, level, cats[pvals <= level])


def assert_zero_mass(counts, probs, *, seed: int | None = None, label: str = "") -> Certificate:
    """Deterministic: every category with probability 0 has count 0. AssertionError otherwise."""
    p = np.asarray(probs, dtype=np.float64)
    c = as_counts(counts, size=p.shape[0])
    bad = np.flatnonzero((p <= 0) & (c > 0))
    cert = Certificate(
        name="zero_mass",
        what="no zero-probability category was emitted",
        law=label or "target",
        n=int(c.sum()),
        statistic=float(c[p <= 0].sum()),
        seed=seed,
        passed=bad.size == 0,
        detail={"zero_probability_categories": int(np.count_nonzero(p <= 0))},
    )
    if bad.size:
        rows = ", ".join(f"id {i}: count {c[i]}" for i in bad[:10])
        raise AssertionError(
            failure_message(
                f"zero-mass check failed{' (' + label + ')' if label else ''}: "
                f"{bad.size} zero-probability categories observed ({rows})",
                "deterministic: p = 0 => count = 0",
                "",
                seed,
            )
        )
    return cert


def gof_design(n: int, probs, *, eps: float | None, alpha: float, beta: float) -> dict:
    """The design `assert_gof` uses for n draws against probs: alpha split, pooling floor, cells,
    required n. Pure function of (n, probs, eps, alpha, beta); no data."""
    return _design(n, as_probs(probs), eps, alpha, beta)


def _design(n: int, p: np.ndarray, eps: float | None, alpha: float, beta: float) -> dict:
    positive = int(np.count_nonzero(p > 0))
    floor0, _ = gof_policy(alpha)
    sparse0 = np.flatnonzero((p > 0) & (n * p < floor0))
    alpha_chi = alpha / 2 if sparse0.size else alpha
    floor, nominal = gof_policy(alpha_chi)
    cells = _pool(p, n, floor)
    sparse = np.flatnonzero((p > 0) & (n * p < floor))
    alpha_cells = alpha - alpha_chi
    if eps is None:
        required = None
    elif positive <= 1:
        # a point mass: any law at TV >= eps puts mass >= eps on zero-probability categories, which
        # the zero-mass check sees with probability 1 - (1 - eps)^n >= 1 - beta
        required = math.ceil(math.log(1 / beta) / eps)
    elif cells.num_cells < 2:
        # n too small to form two pooled cells: nothing testable yet; ask for at least twice n
        required = max(chi2_min_samples(2, eps, nominal, beta), 2 * n)
    else:
        required = chi2_min_samples(cells.num_cells, eps, nominal, beta)
    return {
        "n": n,
        "eps": eps,
        "alpha": alpha,
        "beta": beta,
        "alpha_chi": alpha_chi,
        "nominal_chi": nominal,
        "alpha_cells": alpha_cells,
        "min_expected": floor,
        "k": int(p.shape[0]),
        "k_positive": positive,
        "k_pooled": cells.num_cells,
        "sparse_categories": int(sparse.size),
        "multi_member_mass": cells.multi_member_mass(),
        "required_n": required,
        "cells": cells,
        "sparse": sparse,
    }


def _design_line(d: dict) -> str:
    eps = "none" if d["eps"] is None else format(d["eps"], ".4g")
    return (
        f"alpha={d['alpha']:.3g} (chi2 {d['alpha_chi']:.3g} at nominal {d['nominal_chi']:.3g}, "
        f"cells {d['alpha_cells']:.3g}), beta={d['beta']:.3g}, eps={eps}, n={d['n']}, "
        f"k={d['k']} ({d['k_positive']} positive, {d['k_pooled']} pooled at E>={d['min_expected']:g}, "
        f"{d['sparse_categories']} sparse), required n={d['required_n']}"
    )


def run_gof(
    counts,
    probs,
    *,
    alpha: float,
    eps: float | None = None,
    beta: float = 1e-6,
    seed: int | None = None,
    label: str = "",
) -> Certificate:
    """The three-part test of `assert_gof` without the sample-size design assertion.

    Use it where n is not yours to choose (meta-tests, diagnostics); it still raises
    AssertionError on rejection and its false-fail rate is <= alpha as for assert_gof.
    """
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    n = int(c.sum())
    if not 0 < alpha < 1 or not 0 < beta < 1 or (eps is not None and not eps > 0):
        raise ValueError(f"need 0 < alpha, beta < 1 and eps > 0, got alpha={alpha}, beta={beta}, eps={eps}")
    if n < 1:
        raise ValueError("counts must contain at least one observation")
    d = _design(n, p, eps, alpha, beta)
    return _run(c, p, d, seed, label)


def assert_gof(
    counts, probs, *, eps: float, alpha: float, beta: float, seed: int | None = None, label: str = ""
) -> Certificate:
    """Assert that counts (one per category, zero-observed included) are draws from probs.

    Steps: (0) design: n >= required n for (k_pooled, eps, nominal chi level, beta), else
    AssertionError "design: n too small"; (1) pooled Pearson chi-square at alpha_chi (alpha, or
    alpha/2 when there are sparse categories); (2) exact binomial tests of sparse categories
    (expected count below the pooling floor) at (alpha - alpha_chi) Bonferroni'd; (3) zero mass.

    Guarantees: a correct sampler fails with probability <= alpha (parts 2-3 exactly; part 1 by
    the tail policy of `gof_policy`, verified exactly in tests/stats); a sampler whose law has
    TV >= eps from probs *on the pooled cells* fails with probability >= 1 - beta (noncentral
    chi-square power with worst-case lambda = 4 n eps^2). Full TV >= eps + multi_member_mass
    implies pooled TV >= eps (the certificate records multi_member_mass).
    Raises AssertionError with the pooled table, the design and a SPECSAMPLE_SEED repro line.
    """
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    n = int(c.sum())
    if not 0 < alpha < 1 or not 0 < beta < 1 or not eps > 0:
        raise ValueError(f"need 0 < alpha, beta < 1 and eps > 0, got alpha={alpha}, beta={beta}, eps={eps}")
    if n < 1:
        raise ValueError("counts must contain at least one observation")
    tag = f" ({label})" if label else ""
    d = _design(n, p, eps, alpha, beta)
    if n < d["required_n"]:
        raise AssertionError(
            failure_message(
                f"design: n too small{tag}: n={n} < required {d['required_n']} to detect TV {eps:g} "
                f"with power 1-{beta:g}",
                _design_line(d),
                "",
                seed,
            )
        )
    return _run(c, p, d, seed, label)


def _run(c: np.ndarray, p: np.ndarray, d: dict, seed: int | None, label: str) -> Certificate:
    n = int(c.sum())
    tag = f" ({label})" if label else ""
    zero = assert_zero_mass(c, p, seed=seed, label=label)
    chi = _chisquare(c, p, d["cells"])
    cellwise = _cellwise(c, p, max(d["alpha_cells"], 1e-300), d["sparse"])
    chi_ok = chi.p_value > d["nominal_chi"]
    cells_ok = cellwise.rejected.size == 0
    keys = ("alpha_chi", "nominal_chi", "alpha_cells", "min_expected", "k", "k_positive", "k_pooled")
    detail = {key: d[key] for key in keys}
    detail.update(
        {
            "sparse_categories": d["sparse_categories"],
            "multi_member_mass": d["multi_member_mass"],
            "required_n": d["required_n"],
            "chi2_df": chi.df,
            "chi2_p_value": chi.p_value,
            "cellwise_min_p": cellwise.min_p,
            "cellwise_level": cellwise.level,
            "zero_mass_observed": zero.statistic,
        }
    )
    eps, beta, alpha = d["eps"], d["beta"], d["alpha"]
    power = (
        f"TV {eps:g} detected w.p. 1-{beta:g} on {d['k_pooled']} pooled cells" if eps else "no power claim"
    )
    cert = Certificate(
        name="gof",
        law=label or "target probs",
        what=f"counts consistent with the target ({power}); false-fail <= {alpha:g}",
        n=n,
        alpha=alpha,
        beta=beta if eps else None,
        eps=eps,
        statistic=chi.statistic,
        p_value=chi.p_value,
        seed=seed,
        passed=chi_ok and cells_ok,
        detail=detail,
    )
    if not cert.passed:
        reasons = []
        if not chi_ok:
            reasons.append(
                f"chi-square X^2={chi.statistic:.4g}, df={chi.df}, "
                f"p={chi.p_value:.3g} <= {d['nominal_chi']:.3g}"
            )
        if not cells_ok:
            worst = cellwise.rejected[:8]
            reasons.append(
                "exact binomial rejects categories "
                + ", ".join(f"{i} (count {c[i]}, expected {n * p[i]:.3g})" for i in worst)
            )
        raise AssertionError(
            failure_message(
                f"goodness of fit failed{tag}: " + "; ".join(reasons), _design_line(d), chi.table(), seed
            )
        )
    return cert


def mc_pvalue(counts, probs, *, n_sims: int, seed: int, min_expected: float | None = None) -> float:
    """Monte-Carlo p-value (1 + #{X^2_b >= X^2}) / (1 + n_sims) of Pearson's X^2, simulating
    n_sims multinomial tables from probs (pooled by `pool_by_expected` when min_expected is given,
    else unpooled over p > 0). Exact-level at any cell size: P(p-value <= a) <= a under the null
    for every a; resolution 1/(1 + n_sims), so use it for alpha >~ 10 / n_sims (or sparse tables)."""
    p = as_probs(probs)
    c = as_counts(counts, size=p.shape[0])
    n = int(c.sum())
    if n < 1 or n_sims < 1:
        raise ValueError(f"need at least one observation and n_sims >= 1, got n={n}, n_sims={n_sims}")
    cells = _pool(p, n, min_expected if min_expected is not None else 0.0)
    expected = n * cells.probs
    observed = cells.pool(c)
    statistic = float(np.sum((observed - expected) ** 2 / expected))
    rng = np.random.default_rng(seed)
    exceed = 0
    for start in range(0, n_sims, 10_000):
        sims = rng.multinomial(n, cells.probs, size=min(10_000, n_sims - start))
        exceed += int(
            np.count_nonzero(((sims - expected) ** 2 / expected).sum(axis=1) >= statistic * (1 - 1e-12))
        )
    return (1 + exceed) / (1 + n_sims)
