"""Certificates for Gumbel-max (`fast_sample`) samplers.

Laws: coupling_seeded (indices equal verify's float64 race on the same Philox noise, except rows whose
two best scores are within float tolerance; samplers with noise="grouped" against the grouped race,
`reference.gumbel.grouped_race`, which also excuses draws within 1e-12 of a CDF boundary), gof
(designed chi-square of one draw against p),
plackett_luce (ordered pairs of a top-2 draw against the exact Plackett-Luce law), zero_mass
(deterministic: rows with mass only in the last tile at V = BLOCK - 1, BLOCK, BLOCK + 1, 2 BLOCK + 1 never
emit a zero-mass or out-of-range id; an all-zero row returns -1), determinism and batch_invariance
(deterministic: the same call repeats, offsets + 1 draws afresh, and a request's draws do not depend on
its batch mates).
"""

from __future__ import annotations

import numpy as np

from specsample.reference.gumbel import group_noise, grouped_race_with_margins
from specsample.reference.laws import plackett_luce_law
from specsample.reference.parallel import map_rows
from specsample.reference.philox import STREAM_GUMBEL, gumbel_exponentials
from specsample.verify import stats_bridge as sb
from specsample.verify.budgets import Budget
from specsample.verify.cases import case_rng, round_to_dtype
from specsample.verify.certify import (
    CertRecord,
    _fmt,
    budget_gof,
    exact_record,
    gof_record,
    gof_rows,
    law_seed,
    seeded_coupling_record,
)
from specsample.verify.mutable_reference import gumbel_sample
from specsample.verify.protocol import GumbelSampler

GUMBEL_LAWS = ("coupling_seeded", "gof", "plackett_luce")
OWN_STREAM = (
    "the sampler draws from a stream of its own (no specsample_noise declared): nothing to couple with; "
    "gof, plackett_luce and zero_mass certify its law"
)


def gumbel_cases(budget: str) -> list[tuple[str, np.ndarray]]:
    """(name, probs [V]) rows; values representable in float32."""
    out = []
    for vocab, alpha in ((7, 1.0), (32, 0.5), (33, 0.3), (16, 5.0)):
        name = f"gumbel_dirichlet{alpha:g}_V{vocab}"
        out.append((name, case_rng(name).dirichlet(np.full(vocab, alpha))))
    name = "gumbel_sparse_lasttile_V65"
    p = np.zeros(65)
    p[-4:] = case_rng(name).random(4)
    out.append((name, p))
    name = "gumbel_extreme_V12"
    out.append((name, 10.0 ** -case_rng(name).uniform(0, 12, 12)))
    name = "gumbel_two_point_V9"
    p = np.zeros(9)
    p[[2, 8]] = [0.8, 0.2]
    out.append((name, p))
    # mass in three groups of 256 (the grouped race's unit; the last group partial): the one case
    # at the ci budget where a grouped sampler's group-level race decides the law
    name = "gumbel_three_groups_V700"
    p = np.zeros(700)
    p[[3, 100, 200, 256, 300, 511, 512, 650, 699]] = case_rng(name).dirichlet(np.full(9, 1.0))
    out.append((name, p))
    if budget in ("standard", "full"):
        for vocab in (1023, 32000, 151936):
            name = f"gumbel_dirichlet0.05_V{vocab}"
            out.append((name, case_rng(name).dirichlet(np.full(vocab, 0.05))))
    return [(n, round_to_dtype(p / p.sum(), "float32")) for n, p in out]


def _ambiguous(probs: np.ndarray, e: np.ndarray, tol: float) -> np.ndarray:
    """Rows whose two best race scores p/E are within relative `tol` (float32 could swap them)."""
    score = np.where(probs > 0, probs / e, 0.0)
    top2 = (
        -np.partition(-score, 1, axis=1)[:, :2]  # [best, second best]
        if score.shape[1] > 1
        else np.concatenate([score, np.zeros_like(score)], 1)
    )
    return (top2[:, 0] - top2[:, 1]) <= tol * top2[:, 0]


def _reference_and_ambiguity(probs, seeds, offsets, tol):
    """(float64 race winner, ambiguity flag) per row: what the coupling certificate compares with.
    The Philox noise is computed once and shared by both."""
    e = gumbel_exponentials(seeds, offsets, probs.shape[-1], STREAM_GUMBEL)
    return gumbel_sample(probs, seeds, offsets, 1, exponentials=e)[:, 0], _ambiguous(probs, e, tol)


# grouped race: a kernel's float64 scan of a group and the reference's cumulative sum differ by
# <= 256 x 2^-53 relative to the group's mass; a draw within 1e-12 of a CDF boundary may differ
GROUPED_CDF_TOL = 1e-12


def _grouped_reference_and_ambiguity(probs, seeds, offsets, tol):
    """(float64 grouped-race winner, ambiguity flag) per row: the two best group scores within
    relative `tol`, or the group's uniform within GROUPED_CDF_TOL of a CDF boundary."""
    ids, gap, cdf_gap = grouped_race_with_margins(probs, *group_noise(seeds, offsets, probs.shape[-1]))
    return ids, (gap <= tol) | (cdf_gap <= GROUPED_CDF_TOL)


def certify_gumbel_coupling(sampler: GumbelSampler, name, p, budget: Budget, salt=0) -> CertRecord:
    if sampler.noise is None:
        return CertRecord(sampler.name, name, "coupling_seeded", "skip", OWN_STREAM)
    seed = law_seed(name, "coupling_seeded", salt)
    rng = np.random.default_rng(seed)
    # the reference (numpy Philox and the float64 race) runs on a fork pool: at `full`, up to 2^31
    # elements per vocabulary (docs/verify.md has the measured rate)
    rows = budget.reference_rows(budget.seeded_rows, p.shape[0], floor=2048)
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = np.concatenate(
        [rng.integers(0, 1 << 20, rows // 2), (1 << 32) - rows // 4 + np.arange(rows - rows // 2)]
    )
    P = np.broadcast_to(p, (rows, p.shape[0]))
    got = sampler(P, 1, seeds, offsets)[:, 0]
    tol = 1e-12 if sampler.inputs == "numpy" else 1e-5
    grouped = sampler.noise == "grouped"
    reference = _grouped_reference_and_ambiguity if grouped else _reference_and_ambiguity
    ref, amb = map_rows(reference, P, seeds, offsets, tol, rows=rows, elements=P.size)
    mism = got != ref
    hard = mism & ~amb
    ucb = sb.tv_ucb_from_coupling(int(mism.sum()), rows, budget.coupling_delta)
    stmt = (
        f"indices equal the float64 {'grouped race' if grouped else 'race'} on the same Philox noise: "
        f"{int(mism.sum())} mismatches "
        f"in {rows} rows "
        f"({int(hard.sum())} outside float tolerance); TV <= {ucb:.3g} at 1-{budget.coupling_delta:g}"
    )

    def describe(b: int) -> str:
        return f"e.g. seed={seeds[b]} offset={offsets[b]}: sampler {got[b]} vs reference {ref[b]}"

    return seeded_coupling_record(
        sampler.name, name, stmt, rows, hard, ucb, seed, describe, delta=budget.coupling_delta
    )


def certify_gumbel_gof(sampler: GumbelSampler, name, p, budget: Budget, salt=0) -> CertRecord:
    seed = law_seed(name, "gof", salt)
    law = np.append(p, 0.0)  # last cell: -1 / out of range
    rows = gof_rows(law, budget)
    seeds = np.full(rows, seed, np.int64)
    offsets = (1 << 32) - rows // 2 + np.arange(rows, dtype=np.int64)
    idx = sampler(np.broadcast_to(p, (rows, p.shape[0])), 1, seeds, offsets)[:, 0]
    vocab = p.shape[0]
    cells = np.where((idx < 0) | (idx >= vocab), vocab, idx)
    counts = np.bincount(cells, minlength=vocab + 1)
    g = budget_gof(counts, law, budget, name, seed)
    stmt = (
        f"law of one draw vs p, n={rows}, p={_fmt(g.pvalue)}, detects TV>={g.detectable_eps:.3g} "
        f"w.p. 1-{budget.beta:g} at alpha={budget.alpha:g}"
    )
    plot = {"expected": law.tolist(), "observed": (counts / rows).tolist()}
    return gof_record(sampler.name, name, "gof", stmt, rows, g, budget, seed, plot)


def certify_plackett_luce(sampler: GumbelSampler, name, p, budget: Budget, salt=0) -> CertRecord:
    vocab = p.shape[0]
    if vocab > budget.gumbel_plackett_max_vocab or np.count_nonzero(p) < 2:
        return CertRecord(
            sampler.name, name, "plackett_luce", "skip", f"V={vocab} above the budget's pair table"
        )
    seed = law_seed(name, "plackett_luce", salt)
    law = plackett_luce_law(p, 2).ravel()
    law = np.append(law, 0.0)
    rows = gof_rows(law, budget)
    seeds = np.arange(rows, dtype=np.int64) * 104729 + seed % 1000003
    offsets = np.full(rows, 77, np.int64)
    idx = sampler(np.broadcast_to(p, (rows, vocab)), 2, seeds, offsets)
    bad = np.any((idx < 0) | (idx >= vocab), axis=1) | (idx[:, 0] == idx[:, 1])
    cells = np.where(bad, vocab * vocab, idx[:, 0] * vocab + idx[:, 1])
    counts = np.bincount(cells, minlength=vocab * vocab + 1)
    g = budget_gof(counts, law, budget, name, seed)
    stmt = (
        f"ordered top-2 pairs vs the Plackett-Luce law, n={rows}, p={_fmt(g.pvalue)}, "
        f"detects TV>={g.detectable_eps:.3g}"
    )
    return gof_record(sampler.name, name, "plackett_luce", stmt, rows, g, budget, seed)


def certify_gumbel_zero_mass(sampler: GumbelSampler, budget: Budget, salt=0) -> CertRecord:
    errs = []
    rng = case_rng("gumbel_zero_mass", salt)
    for block in (16, 32, 64, 128, 1024):
        for vocab in (block - 1, block, block + 1, 2 * block + 1):
            rows = 512
            p = np.zeros((rows, vocab))
            p[:, -2:] = rng.random((rows, 2)) + 0.01  # mass only in the last tile
            p[:8] = 0.0  # rows with no mass
            p[8:16, -1] = np.nan
            seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
            offsets = rng.integers(0, 1 << 40, rows, dtype=np.int64)
            idx = sampler(round_to_dtype(p, "float32"), 1, seeds, offsets)[:, 0]
            if np.any(idx[:8] != -1):
                errs.append(f"V={vocab}: all-zero row returned {sorted(set(idx[:8].tolist()))} (want -1)")
            live = idx[8:]
            pl = p[8:]
            if np.any((live < 0) | (live >= vocab)):
                errs.append(
                    f"V={vocab}: ids "
                    f"{sorted(set(live[(live < 0) | (live >= vocab)].tolist()))[:4]} out of range"
                )
                continue
            mass = pl[np.arange(rows - 8), live]
            if np.any(~(mass > 0)):
                errs.append(
                    f"V={vocab}: zero-mass/NaN tokens won: {sorted(set(live[~(mass > 0)].tolist()))[:4]}"
                )
    stmt = (
        "zero-mass, NaN and tile-tail lanes never win at V = BLOCK-1, BLOCK, BLOCK+1, 2 BLOCK+1; "
        "empty rows give -1"
    )
    return CertRecord(
        sampler.name,
        "tile-boundaries",
        "zero_mass",
        "fail" if errs else "pass",
        stmt,
        detail="; ".join(errs[:6]),
    )


def _gumbel_requests(rng, rows: int, vocab: int = 24):
    """Distinct requests: a Dirichlet(0.5) row each, float32 values, seeds and offsets of their own."""
    p = round_to_dtype(rng.dirichlet(np.full(vocab, 0.5), rows), "float32")
    return p, rng.integers(0, 1 << 62, rows, dtype=np.int64), rng.integers(0, 1 << 40, rows, dtype=np.int64)


# Two draws of one of these requests (the top-2, in order) agree with probability about 0.03 (the
# reference on the certificate's 512 requests: 0.025); a sampler that ignores the offset agrees on
# every row. Failing above 90% identical over 512 rows is a deterministic verdict for a correct
# sampler (Hoeffding: below exp(-2 * 512 * 0.5^2) < 1e-100 if its agreement were even 0.4);
# tests/verify/test_gumbel_invariance.py checks the reference's fraction on these requests.
GUMBEL_FRESH_MAX_SAME = 0.9


def certify_gumbel_determinism(sampler: GumbelSampler, budget: Budget, salt=0) -> CertRecord:
    """Same inputs, same top-2 draws; the offset advanced by one, fresh draws."""
    p, seeds, offsets = _gumbel_requests(case_rng("gumbel-determinism", salt), 512)
    a = sampler(p, 2, seeds, offsets)
    errs = []
    if not np.array_equal(a, sampler(p, 2, seeds, offsets)):
        errs.append("two identical calls differ")
    same = float(np.mean(np.all(a == sampler(p, 2, seeds, offsets + 1), axis=1)))
    if same > GUMBEL_FRESH_MAX_SAME:
        errs.append(f"advancing offsets by 1 left {same:.1%} of rows identical (offset ignored?)")
    stmt = f"same inputs -> same draws; offsets + 1 -> at most {GUMBEL_FRESH_MAX_SAME:.0%} of rows unchanged"
    seed = law_seed("gumbel-determinism", "determinism", salt)
    return exact_record(sampler.name, "gumbel-seeded-batch", "determinism", stmt, errs, 512, seed)


def certify_gumbel_batch_invariance(sampler: GumbelSampler, budget: Budget, salt=0) -> CertRecord:
    """A request's draws alone, in a permuted batch, in half of it, and beside rows without mass."""
    rng = case_rng("gumbel-batch-invariance", salt)
    rows = 256
    p, seeds, offsets = _gumbel_requests(rng, rows)
    base = sampler(p, 2, seeds, offsets)
    errs = []
    perm = rng.permutation(rows)
    for label, sel in (
        ("permuting the batch", perm),
        ("a sub-batch", np.arange(rows // 2, rows)),
        ("request 7 alone", np.arange(7, 8)),
    ):
        if not np.array_equal(sampler(p[sel], 2, seeds[sel], offsets[sel]), base[sel]):
            errs.append(f"{label} changed some request's draws")
    junk = p.copy()
    junk[::3] = 0.0
    junk[1::3] = np.nan
    kept = np.arange(rows) % 3 == 2
    if not np.array_equal(sampler(junk, 2, seeds, offsets)[kept], base[kept]):
        errs.append("batch mates without mass or with NaN changed some request's draws")
    stmt = "seeded draws invariant to permutation, sub-batching, batch size 1 and empty / NaN batch mates"
    seed = law_seed("gumbel-batch-invariance", "batch_invariance", salt)
    return exact_record(sampler.name, "gumbel-seeded-batch", "batch_invariance", stmt, errs, rows, seed)
