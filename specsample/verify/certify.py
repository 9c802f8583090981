"""Certificates for chain samplers: one function per law, each returning a `CertRecord`.

Laws (DESIGN.md §4, strongest first):
- grid             exact: stratified (u_j, u_K) grid per draft position; every (a, y) frequency within the
                   proven bound (rho(y) + 1/N2)/(2 N1) + 1/N2 (+ one grid point for float32) of the law.
- coupling         injected uniforms (random + adversarial: 0, thresholds and their neighbours, 1 - 2^-24):
                   outputs equal the float64 reference except on rows the reference flags as within float
                   tolerance of a boundary; Clopper-Pearson bound on the mismatch rate bounds TV.
- coupling_seeded  the seeded path token for token against the reference fed the numpy Philox uniforms,
                   offsets across 2^31 and 2^32 (catches offset truncation and seed/offset plumbing).
- conditional      production RNG, drafts fixed: law of the emitted token at each position, designed GOF.
- accepted_length  same run: P(a = j) against the exact law.
- joint            production RNG, drafts drawn from q per row: joint law of (a, emitted token), GOF.
- edge             deterministic: norm_sum == 0 fallback, zero-probability drafts at u = 0, invalid ids,
                   non-finite q, NaN/inf rows, zero-mass tokens never emitted, endpoints, ragged counts.
- determinism      the same inputs twice give the same outputs (uniforms and seeded paths).
- batch_invariance a request's seeded output does not depend on its batch mates or position.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from specsample.reference.chain import chain_seeded_uniforms
from specsample.reference.parallel import chain_rejection_reference_parallel
from specsample.verify import stats_bridge as sb
from specsample.verify.budgets import Budget
from specsample.verify.cases import ChainCase
from specsample.verify.exact_laws import accepted_length_law, chain_joint_law, counts_from_outputs
from specsample.verify.protocol import ChainOutput, ChainSampler

U_STEP = 2.0**-24
U_MAX = 1.0 - U_STEP

JOINT_MAX_SUPPORT = 64  # above this V, the joint law's drafts come from q restricted to its top 64 ids
CHAIN_LAWS = ("grid", "coupling", "coupling_seeded", "conditional", "accepted_length", "joint")
CHAIN_GLOBAL_LAWS = ("edge", "determinism", "batch_invariance", "cuda_graph")


# ------------------------------------------------------------------------------------------------
# records shared by every family (chain, gumbel, logits)
# ------------------------------------------------------------------------------------------------


@dataclass
class CertRecord:
    """One certificate: what was tested, on what, the verdict and the statement it proves."""

    sampler: str
    case: str
    law: str
    status: str  # "pass" | "fail" | "skip" | "error"
    statement: str
    n: int = 0
    alpha: float | None = None
    beta: float | None = None
    eps: float | None = None
    delta: float | None = None
    tv_bound: float | None = None
    pvalue: float | None = None
    pvalues: list = field(default_factory=list)
    seed: int | None = None
    detail: str = ""
    seconds: float = 0.0
    plot: dict | None = None

    @property
    def passed(self) -> bool:
        return self.status in ("pass", "skip")

    def to_json(self) -> dict:
        d = asdict(self)
        for key, val in list(d.items()):
            if isinstance(val, float) and not math.isfinite(val):
                d[key] = str(val)
        return d


def _fmt(pvalue) -> str:
    return "n/a (one cell)" if pvalue is None else f"{pvalue:.3g}"


def law_seed(case: str, law: str, salt: int = 0) -> int:
    """Seed of one certificate: a stable hash of (case, law, salt); salt varies only in calibration."""
    h = hashlib.sha256(f"{case}|{law}|{salt}".encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 62) - 1)


def case_free(fn):
    """Adapt a case-independent certificate fn(sampler, budget, salt) to the per-case calling
    convention fn(sampler, case, budget, salt) (timed(), the logits family's _run)."""

    def call(sampler, case, budget, salt=0):
        return fn(sampler, budget, salt)

    call.__name__ = fn.__name__
    return call


def exact_record(
    sampler: str, case: str, law: str, stmt: str, errs: list, n: int = 0, seed=None
) -> CertRecord:
    """The record of a deterministic certificate: failed iff any of its checks left an error."""
    status = "fail" if errs else "pass"
    return CertRecord(sampler, case, law, status, stmt, n, seed=seed, detail="; ".join(errs))


def gof_rows(law: np.ndarray, budget: Budget) -> int:
    """Rows for a GOF run: specsample.stats' design n for (law, eps, alpha, beta), within the budget."""
    return sb.design_rows(
        law, budget.eps, budget.alpha, budget.beta, budget.gof_max_rows, budget.gof_min_rows
    )


def budget_gof(counts, law, budget: Budget, label: str, seed: int | None = None) -> sb.GofOutcome:
    """The designed GOF of `counts` against `law` at the budget's (eps, alpha, beta)."""
    return sb.designed_gof(
        counts, law, eps=budget.eps, alpha=budget.alpha, beta=budget.beta, seed=seed, label=label
    )


def gof_record(
    sampler_name: str,
    case: str,
    law: str,
    statement: str,
    rows: int,
    g: sb.GofOutcome,
    budget: Budget,
    seed: int,
    plot: dict | None = None,
) -> CertRecord:
    """The certificate of one designed GOF test: passes iff the test passed; carries the budget's
    design, the test's p-value and, on failure, its message."""
    return CertRecord(
        sampler_name,
        case,
        law,
        "pass" if g.passed else "fail",
        statement,
        rows,
        alpha=budget.alpha,
        beta=budget.beta,
        eps=budget.eps,
        pvalue=g.pvalue,
        pvalues=[g.pvalue] if g.pvalue is not None else [],
        seed=seed,
        detail="" if g.passed else g.message,
        plot=plot,
    )


@dataclass
class GofTally:
    """The designed GOF tests behind one certificate, each at the budget's alpha: the p-values they
    produced and one failure line per test that failed (callers may add other findings)."""

    pvalues: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def add(self, key: str, g: sb.GofOutcome) -> None:
        """Count one test; a failed test is reported as `key: message`."""
        if g.pvalue is not None:
            self.pvalues.append(g.pvalue)
        if not g.passed:
            self.failures.append(f"{key}: {g.message}")

    def record(
        self, sampler_name: str, case: str, law: str, statement: str, budget: Budget, seed: int, **fields
    ) -> CertRecord:
        """The certificate: fails iff a failure was counted; its p-value is the smallest one."""
        return CertRecord(
            sampler_name,
            case,
            law,
            "fail" if self.failures else "pass",
            statement,
            alpha=budget.alpha,
            beta=budget.beta,
            eps=budget.eps,
            pvalue=min(self.pvalues) if self.pvalues else None,
            pvalues=self.pvalues,
            seed=seed,
            detail="; ".join(self.failures),
            **fields,
        )


def seeded_coupling_record(
    sampler_name: str,
    case: str,
    statement: str,
    rows: int,
    hard: np.ndarray,
    tv_bound: float,
    seed: int,
    describe_row,
    delta: float | None = None,
) -> CertRecord:
    """The coupling_seeded certificate of outputs compared row by row with a reference on the same
    Philox noise: fails iff a row mismatches outside float tolerance (`hard`); the detail is
    `describe_row(b)` of the first such row b."""
    detail = describe_row(int(np.flatnonzero(hard)[0])) if hard.any() else ""
    return CertRecord(
        sampler_name,
        case,
        "coupling_seeded",
        "fail" if hard.any() else "pass",
        statement,
        rows,
        delta=delta,
        tv_bound=tv_bound,
        seed=seed,
        detail=detail,
    )


# ------------------------------------------------------------------------------------------------
# chain cases: rows, uniforms, tolerance, output structure
# ------------------------------------------------------------------------------------------------


def _rows(case: ChainCase, rows: int):
    """The case broadcast (stride 0) to `rows` rows."""
    p = np.broadcast_to(case.p, (rows, *case.p.shape))
    q = None if case.q is None else np.broadcast_to(case.q, (rows, *case.q.shape))
    ids = np.broadcast_to(case.drafts, (rows, case.k))
    n = np.full(rows, case.num_draft_tokens, np.int64)
    return p, q, ids, n


def _random_uniforms(rng, shape) -> np.ndarray:
    """Uniforms on the kernel's 24-bit lattice k 2^-24 (exact in float32 and float64)."""
    return rng.integers(0, 1 << 24, size=shape).astype(np.float64) * U_STEP


def _tol(sampler: ChainSampler, vocab: int) -> float:
    """Relative tolerance for coupling: float32 arithmetic over V terms for kernels, ~0 for float64."""
    if sampler.inputs == "numpy":
        return 1e-12
    return 1e-6 + 8.0 * vocab * 2.0**-24


def _structure_violations(out: ChainOutput, ids: np.ndarray, n: np.ndarray, vocab: int) -> str:
    """'' if outputs have the documented structure, else a description of the first violation."""
    b, k1 = out.tokens.shape
    a = out.num_accepted
    if a.shape != (b,) or out.fallback.shape != (b,) or out.valid.shape != (b,):
        return (
            f"output shapes: num_accepted {a.shape}, fallback {out.fallback.shape}, valid {out.valid.shape}"
        )
    if np.any(a < 0) or np.any(a > n):
        bad = np.flatnonzero((a < 0) | (a > n))[0]
        return f"row {bad}: num_accepted {a[bad]} outside [0, {n[bad]}]"
    pos = np.arange(k1)[None, :]
    pref = pos < a[:, None]
    ids_pad = np.concatenate([np.asarray(ids), np.full((b, 1), -1)], axis=1)
    if np.any(pref & (out.tokens != ids_pad)):
        bad = np.flatnonzero(np.any(pref & (out.tokens != ids_pad), axis=1))[0]
        return f"row {bad}: accepted prefix {out.tokens[bad].tolist()} != drafts {ids_pad[bad].tolist()}"
    if np.any((pos > a[:, None]) & (out.tokens != -1)):
        bad = np.flatnonzero(np.any((pos > a[:, None]) & (out.tokens != -1), axis=1))[0]
        return f"row {bad}: tokens after the emitted slot are not -1: {out.tokens[bad].tolist()}"
    y = out.tokens[np.arange(b), a]
    if np.any((y < -1) | (y >= vocab)):
        bad = np.flatnonzero((y < -1) | (y >= vocab))[0]
        return f"row {bad}: emitted id {y[bad]} outside [0, {vocab}) and not -1"
    if np.any((y == -1) & out.valid):
        bad = np.flatnonzero((y == -1) & out.valid)[0]
        return f"row {bad}: emitted -1 but valid is True"
    return ""


def _call(sampler, case, p, ids, q, n, **kw) -> ChainOutput:
    return sampler(p, ids, q, num_draft_tokens=n, dtype=case.dtype, **kw)


# ------------------------------------------------------------------------------------------------
# grid
# ------------------------------------------------------------------------------------------------


def certify_grid(sampler: ChainSampler, case: ChainCase, budget: Budget, salt: int = 0) -> CertRecord:
    """Stratified grid per draft position j < n: the K = 1 slice (p[j], p[j+1], q[j], x[j]) on the
    centred N1 x N2 grid of (u_j, u_K); |freq(a, y) - P(a, y)| <= (L(y) + 1/N2)/(2 N1) + 1/N2, where L
    is the conditional law of y given a (plus one grid point per axis for float32 samplers)."""
    n1, n2 = budget.grid_n1, budget.grid_n2
    g1 = (np.arange(n1) + 0.5) / n1
    g2 = (np.arange(n2) + 0.5) / n2
    u = np.stack([np.repeat(g1, n2), np.tile(g2, n1)], axis=1)
    rows = u.shape[0]
    worst = 0.0
    detail = []
    fp_extra = 0.0 if sampler.inputs == "numpy" else 1.0
    positions = range(case.num_draft_tokens)
    if case.num_draft_tokens == 0:
        return CertRecord(sampler.name, case.name, "grid", "skip", "no draft position (n = 0)")
    for j in positions:
        ps = case.p[j : j + 2]
        qs = None if case.q is None else case.q[j : j + 1]
        xs = case.drafts[j : j + 1]
        p = np.broadcast_to(ps, (rows, 2, case.vocab))
        q = None if qs is None else np.broadcast_to(qs, (rows, 1, case.vocab))
        ids = np.broadcast_to(xs, (rows, 1))
        out = sampler(p, ids, q, num_draft_tokens=None, uniforms=u, dtype=case.dtype)
        viol = _structure_violations(out, ids, np.ones(rows, np.int64), case.vocab)
        if viol:
            return CertRecord(
                sampler.name, case.name, "grid", "fail", f"position {j}: structure: {viol}", rows
            )
        law = chain_joint_law(ps, qs, xs)
        freq = counts_from_outputs(out.tokens, out.num_accepted, case.vocab, 1) / rows
        cond = law / np.maximum(law.sum(axis=1, keepdims=True), 1e-300)
        bound = (cond + 1.0 / n2) * (0.5 + fp_extra) / n1 + (1.0 + fp_extra * 4 * case.vocab * 2.0**-20) / n2
        excess = np.abs(freq - law) - bound
        worst = max(worst, float((np.abs(freq - law) / bound).max()))
        if np.any(excess > 0):
            a, y = np.unravel_index(np.argmax(excess), excess.shape)
            detail.append(
                f"position {j}: cell (a={a}, y={'-1' if y == case.vocab else y}) freq "
                f"{freq[a, y]:.5f} vs law "
                f"{law[a, y]:.5f}, bound {bound[a, y]:.5f}"
            )
    status = "fail" if detail else "pass"
    stmt = (
        f"stratified {n1}x{n2} grid per position: every (a, y) frequency within the proven bound "
        f"(max error/bound = {worst:.3f})"
    )
    return CertRecord(
        sampler.name, case.name, "grid", status, stmt, rows * len(positions), detail="; ".join(detail)
    )


# ------------------------------------------------------------------------------------------------
# coupling
# ------------------------------------------------------------------------------------------------


def adversarial_uniforms(case: ChainCase, rng, reps: int = 8) -> np.ndarray:
    """Rows whose column c takes an adversarial value (0, 2^-24, the acceptance threshold on the
    24-bit lattice and its neighbours, 1 - 2^-24) while the other columns are random."""
    k = case.k
    cols = []
    thresholds = []
    for i in range(k):
        x = int(case.drafts[i])
        if 0 <= x < case.vocab:
            px = max(float(case.p[i, x]), 0.0)
            qx = 1.0 if case.q is None else float(case.q[i, x])
            if qx > 0 and np.isfinite(px / qx):
                thresholds.append((i, min(px / qx, 1.0)))
    base_values = [0.0, U_STEP, 0.5, U_MAX]
    for c in range(k + 1):
        vals = list(base_values)
        for i, t in thresholds:
            if i == c:
                lat = math.floor(t / U_STEP) * U_STEP
                vals += [lat, lat + U_STEP, max(lat - U_STEP, 0.0)]
        for v in vals:
            if 0.0 <= v < 1.0:
                block = _random_uniforms(rng, (reps, k + 1))
                block[:, c] = v
                cols.append(block)
    return np.concatenate(cols, axis=0)


def _compare(out: ChainOutput, ref) -> np.ndarray:
    """Per-row mismatch of (tokens, num_accepted, fallback, valid)."""
    return (
        np.any(out.tokens != ref.tokens, axis=1)
        | (out.num_accepted != ref.num_accepted)
        | (out.fallback != ref.fallback)
        | (out.valid != ref.valid)
    )


def _mismatch_detail(out, ref, mism, u=None) -> str:
    b = int(np.flatnonzero(mism)[0])
    s = (
        f"e.g. row {b}: sampler tokens {out.tokens[b].tolist()} a={out.num_accepted[b]} "
        f"fallback={bool(out.fallback[b])}"
        f" valid={bool(out.valid[b])} vs reference {ref.tokens[b].tolist()} a={ref.num_accepted[b]} "
        f"fallback={bool(ref.fallback[b])} valid={bool(ref.valid[b])}"
    )
    if u is not None:
        s += f" at u={np.asarray(u[b]).tolist()}"
    return s


def certify_coupling(sampler: ChainSampler, case: ChainCase, budget: Budget, salt: int = 0) -> CertRecord:
    """Injected uniforms. Random rows: TV(sampler, reference) <= CP_upper(mismatches, n, delta) (the
    coupling inequality; only the random rows are a sample of the law). Adversarial rows (0, the
    acceptance thresholds and their lattice neighbours, 1 - 2^-24): no mismatch allowed outside the
    rows the reference flags as within float tolerance of a decision boundary (nor in random rows)."""
    seed = law_seed(case.name, "coupling", salt)
    rng = np.random.default_rng(seed)
    n_random = budget.reference_rows(budget.coupling_rows, case.vocab)
    u = np.concatenate([_random_uniforms(rng, (n_random, case.k + 1)), adversarial_uniforms(case, rng)])
    rows = u.shape[0]
    p, q, ids, n = _rows(case, rows)
    out = _call(sampler, case, p, ids, q, n, uniforms=u)
    ref = chain_rejection_reference_parallel(
        p, ids, q, uniforms=u, num_draft_tokens=n, tol=_tol(sampler, case.vocab)
    )
    mism = _compare(out, ref)
    hard = mism & ~ref.ambiguous
    m = int(mism[:n_random].sum())
    m_adv = int(mism[n_random:].sum())
    ucb = sb.tv_ucb_from_coupling(m, n_random, budget.coupling_delta)
    # pass: no mismatch outside float tolerance and the bound within eps, where eps is the budget's,
    # or twice the zero-mismatch bound when the reference's cost capped the rows (large V)
    eps = max(budget.coupling_eps, 2.0 * sb.tv_ucb_from_coupling(0, n_random, budget.coupling_delta))
    status = "pass" if (not hard.any() and ucb <= eps) else "fail"
    stmt = (
        f"TV(sampler, float64 reference) <= {ucb:.3g} (required <= {eps:.3g}) at confidence "
        f"1-{budget.coupling_delta:g} "
        f"from {n_random} random rows ({m} mismatches), V={case.vocab}; {rows - n_random} adversarial rows "
        f"({m_adv} mismatches); {int(hard.sum())} mismatches outside float tolerance"
    )
    detail = _mismatch_detail(out, ref, hard if hard.any() else mism, u) if mism.any() else ""
    return CertRecord(
        sampler.name,
        case.name,
        "coupling",
        status,
        stmt,
        rows,
        delta=budget.coupling_delta,
        eps=eps,
        tv_bound=ucb,
        seed=seed,
        detail=detail,
    )


def seeded_offsets(rng, rows: int) -> np.ndarray:
    """Offsets across the int32 and uint32 boundaries and beyond 2^40."""
    quarter = rows // 4 + 1
    parts = [
        rng.integers(0, 1 << 20, quarter),
        (1 << 31) - quarter // 2 + np.arange(quarter),
        (1 << 32) - quarter // 2 + np.arange(quarter),
        (1 << 40) + rng.integers(0, 1 << 30, quarter),
    ]
    return np.concatenate(parts)[:rows].astype(np.int64)


def certify_coupling_seeded(
    sampler: ChainSampler, case: ChainCase, budget: Budget, salt: int = 0
) -> CertRecord:
    """Seeded path token for token: sampler(seeds, offsets) == reference(uniforms = numpy Philox of
    (seeds, offsets)), offsets across 2^31, 2^32 and 2^40."""
    if not sampler.supports_seeds:
        return CertRecord(
            sampler.name, case.name, "coupling_seeded", "skip", "sampler takes no seeds/offsets"
        )
    seed = law_seed(case.name, "coupling_seeded", salt)
    rng = np.random.default_rng(seed)
    rows = budget.reference_rows(budget.seeded_rows, case.vocab, floor=2048)
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = seeded_offsets(rng, rows)
    p, q, ids, n = _rows(case, rows)
    out = _call(sampler, case, p, ids, q, n, seeds=seeds, offsets=offsets)
    u = chain_seeded_uniforms(seeds, offsets, case.k)
    ref = chain_rejection_reference_parallel(
        p, ids, q, uniforms=u, num_draft_tokens=n, tol=_tol(sampler, case.vocab)
    )
    mism = _compare(out, ref)
    hard = mism & ~ref.ambiguous
    m = int(mism.sum())
    ucb = sb.tv_ucb_from_coupling(m, rows, budget.coupling_delta)
    status = "pass" if not hard.any() else "fail"
    stmt = (
        f"seeded path equals the reference on the numpy Philox stream: {m} mismatches in {rows} rows "
        f"({int(hard.sum())} outside float tolerance); offsets up to 2^40"
    )
    detail = ""
    if m:
        b = int(np.flatnonzero(hard if hard.any() else mism)[0])
        detail = (
            _mismatch_detail(out, ref, hard if hard.any() else mism) + f" seed={seeds[b]} offset={offsets[b]}"
        )
    return CertRecord(
        sampler.name,
        case.name,
        "coupling_seeded",
        status,
        stmt,
        rows,
        delta=budget.coupling_delta,
        tv_bound=ucb,
        seed=seed,
        detail=detail,
    )


# ------------------------------------------------------------------------------------------------
# laws on the production RNG path
# ------------------------------------------------------------------------------------------------


def _production_call(sampler, case, p, ids, q, n, seeds, offsets):
    """The production RNG path when the sampler has one; else the same Philox uniforms injected."""
    if sampler.supports_seeds:
        return _call(sampler, case, p, ids, q, n, seeds=seeds, offsets=offsets), ""
    u = chain_seeded_uniforms(seeds, offsets, case.k)
    return _call(sampler, case, p, ids, q, n, uniforms=u), " (uniforms injected: sampler takes no seeds)"


def run_fixed_drafts(sampler, case, budget, salt=0):
    """One production-RNG run with the case's fixed drafts: same seed, consecutive offsets across 2^32.
    Returns (counts [n+1, V+1], law, rows, seed, note, structure violation)."""
    law = chain_joint_law(case.p, case.q, case.drafts, case.num_draft_tokens)
    rows = gof_rows(law, budget)
    seed = law_seed(case.name, "fixed_drafts", salt)
    seeds = np.full(rows, seed, np.int64)
    offsets = (1 << 32) - rows // 2 + np.arange(rows, dtype=np.int64)
    p, q, ids, n = _rows(case, rows)
    out, note = _production_call(sampler, case, p, ids, q, n, seeds, offsets)
    viol = _structure_violations(out, ids, n, case.vocab)
    counts = (
        None if viol else counts_from_outputs(out.tokens, out.num_accepted, case.vocab, case.num_draft_tokens)
    )
    return counts, law, rows, seed, note, viol


def certify_conditional(sampler, case, budget, salt=0, run=None) -> CertRecord:
    """Per-position law of the emitted token given a = j (drafts fixed), designed GOF per position."""
    counts, law, rows, seed, note, viol = run or run_fixed_drafts(sampler, case, budget, salt)
    if viol:
        return CertRecord(
            sampler.name, case.name, "conditional", "fail", f"structure: {viol}", rows, seed=seed
        )
    tally, parts = GofTally(), []
    for j in range(law.shape[0]):
        nj = int(counts[j].sum())
        pj = law[j].sum()
        if pj <= 0:
            if nj > 0:
                tally.failures.append(f"a={j}: law gives P(a={j}) = 0 but {nj} rows reached it")
            continue
        if nj < 50:
            parts.append(f"a={j}: n={nj} (too few to test)")
            continue
        g = budget_gof(counts[j], law[j] / pj, budget, f"{case.name} a={j}", seed)
        tally.add(f"a={j}", g)
        parts.append(f"a={j}: n={nj}, p={_fmt(g.pvalue)}, detects TV>={g.detectable_eps:.3g}")
    # TV certificate of the most visited position: TV(emitted | a = j, target) <= bound at 1 - delta
    j_top = int(np.argmax(counts.sum(axis=1)))
    tv = None
    if law[j_top].sum() > 0:
        tv = float(
            sb.st.tv_ucb_from_counts(
                counts[j_top], law[j_top] / law[j_top].sum(), budget.coupling_delta
            ).tv_bound
        )
        parts.append(f"TV(token | a={j_top}) <= {tv:.3g} at 1-{budget.coupling_delta:g}")
    stmt = (
        f"conditional law of the emitted token per position (drafts fixed), "
        f"alpha={budget.alpha:g} each{note}: " + "; ".join(parts)
    )
    return tally.record(
        sampler.name,
        case.name,
        "conditional",
        stmt,
        budget,
        seed,
        n=rows,
        tv_bound=tv,
        delta=budget.coupling_delta,
    )


def certify_accepted_length(sampler, case, budget, salt=0, run=None) -> CertRecord:
    """P(a = j) against the exact law (drafts fixed), designed GOF over n+1 cells."""
    counts, law, rows, seed, note, viol = run or run_fixed_drafts(sampler, case, budget, salt)
    if viol:
        return CertRecord(
            sampler.name, case.name, "accepted_length", "fail", f"structure: {viol}", rows, seed=seed
        )
    obs = counts.sum(axis=1)
    exp = accepted_length_law(law)
    g = budget_gof(obs, exp, budget, f"{case.name} accepted length", seed)
    stmt = (
        f"accepted-length law P(a=j) (drafts fixed), n={rows}, p={_fmt(g.pvalue)}, "
        f"detects TV>={g.detectable_eps:.3g}{note}"
    )
    plot = {"expected": exp.tolist(), "observed": (obs / max(rows, 1)).tolist()}
    return gof_record(sampler.name, case.name, "accepted_length", stmt, rows, g, budget, seed, plot)


def certify_joint(sampler, case, budget, salt=0) -> CertRecord:
    """Drafts drawn per row from the case's draft law (q for classic), distinct seeds, one offset: the
    joint law of (a, emitted token), designed GOF. Catches a uniform shared by the accept test and the
    residual draw, and seeds that are ignored."""
    dist = case.draft_distribution()
    if case.vocab > JOINT_MAX_SUPPORT:  # exact law enumerates draft ids: draw drafts from q's top ids
        top = np.argsort(-dist, axis=1)[:, :JOINT_MAX_SUPPORT]
        keep = np.zeros_like(dist, dtype=bool)
        np.put_along_axis(keep, top, True, axis=1)
        dist = np.where(keep, dist, 0.0)
        dist /= dist.sum(axis=1, keepdims=True)
    law = chain_joint_law(case.p, case.q, dist, case.num_draft_tokens)
    rows = gof_rows(law, budget)
    seed = law_seed(case.name, "joint", salt)
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(dist, axis=1)
    ids = (
        np.stack(
            [
                np.minimum(np.searchsorted(cdf[i], rng.random(rows), side="right"), case.vocab - 1)
                for i in range(case.k)
            ],
            axis=1,
        )
        if case.k
        else np.zeros((rows, 0), np.int64)
    )
    seeds = (seed + np.arange(rows, dtype=np.int64) * 7919) & ((1 << 62) - 1)
    offsets = np.full(rows, (1 << 33) + 5, np.int64)
    p, q, _, n = _rows(case, rows)
    out, note = _production_call(sampler, case, p, ids, q, n, seeds, offsets)
    viol = _structure_violations(out, ids, n, case.vocab)
    if viol:
        return CertRecord(sampler.name, case.name, "joint", "fail", f"structure: {viol}", rows, seed=seed)
    counts = counts_from_outputs(out.tokens, out.num_accepted, case.vocab, case.num_draft_tokens)
    g = budget_gof(counts.ravel(), law.ravel(), budget, f"{case.name} joint", seed)
    stmt = (
        f"joint law of (a, token) with drafts drawn from q, n={rows}, {int((law > 0).sum())} cells, "
        f"p={_fmt(g.pvalue)}, detects TV>={g.detectable_eps:.3g} w.p. 1-{budget.beta:g} at "
        f"alpha={budget.alpha:g}{note}"
    )
    plot = {
        "expected": law.ravel().tolist(),
        "observed": (counts.ravel() / rows).tolist(),
        "shape": list(law.shape),
    }
    return gof_record(sampler.name, case.name, "joint", stmt, rows, g, budget, seed, plot)


def timed(fn, *args, **kw) -> CertRecord:
    """Run one certificate; an exception becomes an 'error' record (a failed certificate)."""
    t0 = time.perf_counter()
    try:
        rec = fn(*args, **kw)
    except Exception as exc:  # noqa: BLE001 - any crash of the sampler is a finding
        sampler, case = args[0], args[1]
        rec = CertRecord(
            getattr(sampler, "name", str(sampler)),
            getattr(case, "name", str(case)),
            getattr(fn, "law", fn.__name__.replace("certify_", "")),
            "error",
            f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
        )
    rec.seconds = time.perf_counter() - t0
    return rec
