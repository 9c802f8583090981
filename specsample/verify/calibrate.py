"""Calibration: vary the seed over the `ci` budget against the float64 references and measure the
false-fail rate (TFP's --vary_seed pattern, stats.md §8.5).

Every statistical certificate of the references (chain conditional / accepted length / joint, Gumbel
gof / Plackett-Luce, logits conditional) is run with `salt` = 1..N (the seeds are a hash of case, law
and salt). Under the null each assertion fails with probability <= alpha, so a run of m assertions
fails with probability <= m alpha (union bound). Reported: the observed run failure rate and the
per-assertion rejection rate with two-sided 95% Clopper-Pearson intervals against those declared
rates, the rejection frequency of the p-values at nominal 1e-3, 1e-2 and 5e-2, and a KS/Fisher
uniformity test of all p-values (`specsample.stats.pvalues_uniform`).
"""

from __future__ import annotations

import numpy as np

from specsample import stats as st
from specsample.verify import logits_family as L
from specsample.verify import runner
from specsample.verify.protocol import mutable_sampler, reference_gumbel_sampler, reference_sampler

STAT_LAWS = {
    "chain": ("conditional", "accepted_length", "joint"),
    "gumbel": ("gof", "plackett_luce"),
    "logits": ("conditional",),
}


def calibrate(budget, n_runs: int, *, progress=None) -> dict:
    """Run the statistical certificates of the references `n_runs` times with fresh seeds."""
    samplers = [
        ("chain", reference_sampler()),
        ("gumbel", reference_gumbel_sampler()),
        ("logits", L.mutable_logits_sampler(name="reference")),
    ]
    run_failed, n_assert, failures, pvals, failed_names = [], 0, 0, [], []
    for salt in range(1, n_runs + 1):
        recs = []
        for family, s in samplers:
            recs += runner.certify_sampler_family(family, s, budget, salt=salt, laws=STAT_LAWS[family])
        bad = [r for r in recs if not r.passed]
        run_failed.append(bool(bad))
        failed_names += [f"salt {salt}: {r.sampler}/{r.case}/{r.law}: {r.detail[:200]}" for r in bad]
        for r in recs:
            n_assert += max(1, len(r.pvalues))
            pvals += [p for p in r.pvalues if p is not None]
        failures += len(bad)
        if progress:
            progress(salt, bool(bad))
    per_run_assertions = n_assert / max(n_runs, 1)
    declared_run = min(1.0, per_run_assertions * budget.alpha)
    fails = int(sum(run_failed))
    lo, hi = st.clopper_pearson(fails, n_runs, 0.05, "two")
    alo, ahi = st.clopper_pearson(failures, n_assert, 0.05, "two")
    p = np.asarray(pvals)
    levels = {}
    for lvl in (1e-3, 1e-2, 5e-2):
        k = int((p <= lvl).sum())
        llo, lhi = st.clopper_pearson(k, len(p), 0.05, "two")
        levels[lvl] = (k, len(p), llo, lhi)
    try:
        cert = st.pvalues_uniform(np.clip(p, 1e-300, 1.0), 1e-3, label="calibration p-values")
        unif = f"p-values uniform (KS and Fisher at alpha 1e-3): PASS, {cert.detail}"
        unif_ok = True
    except AssertionError as exc:
        unif = f"p-values uniform: FAIL: {str(exc).splitlines()[0]}"
        unif_ok = False
    lines = [
        f"{n_runs} runs of the `{budget.name}` statistical certificates against the float64 references "
        f"({per_run_assertions:.0f} assertions per run at alpha = {budget.alpha:g} each).",
        "",
        f"- runs with a false failure: {fails} / {n_runs} = {fails / n_runs:.3g}, 95% CP interval "
        f"[{lo:.3g}, {hi:.3g}]; declared per-run rate <= {declared_run:.3g} (union bound)",
        f"- failed assertions: {failures} / {n_assert}, 95% CP [{alo:.3g}, {ahi:.3g}]; declared "
        f"alpha = {budget.alpha:g}",
    ]
    for lvl, (k, m, llo, lhi) in levels.items():
        lines.append(
            f"- p-values <= {lvl:g}: {k} / {m} = {k / max(m, 1):.4f}, 95% CP [{llo:.4f}, "
            f"{lhi:.4f}] (nominal {lvl:g})"
        )
    lines.append(f"- {unif}")
    if failed_names:
        lines += ["", "False failures:"] + [f"  - {f}" for f in failed_names[:20]]
    data = {
        "runs": n_runs,
        "failed_runs": fails,
        "run_ci95": [lo, hi],
        "declared_run_rate": declared_run,
        "assertions": n_assert,
        "failed_assertions": failures,
        "assertion_ci95": [alo, ahi],
        "alpha": budget.alpha,
        "pvalue_levels": {str(k): v for k, v in levels.items()},
        "uniform_ok": unif_ok,
        "pvalues": p.tolist(),
        "false_failures": failed_names,
    }
    consistent = lo <= declared_run and alo <= budget.alpha
    return {"text": "\n".join(lines), "data": data, "consistent": consistent, "pvalues": p}


__all__ = ["calibrate", "mutable_sampler"]
