"""Report writer: report.md, certificates.json, mutants.json, calibration.json and PNG plots.

Plots (matplotlib, Agg backend):
- frequencies_<sampler>_<case>.png  expected vs observed frequencies of the joint (a, token) law
- pvalue_qq.png                     QQ plot of every GOF p-value against U(0, 1) (calibration at a glance)
- accepted_length_<sampler>.png     accepted-length distribution vs theory, one panel per case
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[:80]


def summary_table(records) -> str:
    """Markdown table: one line per (sampler, law) with pass/fail/skip counts and the weakest result."""
    groups: dict = {}
    for r in records:
        groups.setdefault((r.sampler, r.law), []).append(r)
    lines = ["| sampler | law | pass | fail | skip | note |", "|---|---|---|---|---|---|"]
    for (sampler, law), recs in groups.items():
        c = Counter(r.status for r in recs)
        bad = [r for r in recs if not r.passed]
        note = f"{bad[0].case}: {bad[0].detail or bad[0].statement}" if bad else _best_note(recs)
        lines.append(
            f"| {sampler} | {law} | {c['pass']} | {c['fail'] + c['error']} | {c['skip']} | "
            f"{note[:160].replace('|', '/')} |"
        )
    return "\n".join(lines)


def _best_note(recs) -> str:
    tv = [r.tv_bound for r in recs if r.tv_bound is not None]
    if tv:
        return f"worst TV bound {max(tv):.3g}"
    pv = [r.pvalue for r in recs if r.pvalue is not None]
    if pv:
        return f"min p-value {min(pv):.3g} (alpha {recs[0].alpha:g})"
    return ""


def console_table(records) -> str:
    """Plain-text summary for the terminal."""
    groups: dict = {}
    for r in records:
        groups.setdefault((r.sampler, r.law), Counter())[r.status] += 1
    width = max([len(s) for s, _ in groups] + [7])
    lines = [f"{'sampler':<{width}}  {'law':<17} pass fail skip"]
    for (sampler, law), c in groups.items():
        mark = "  <-- FAIL" if c["fail"] + c["error"] else ""
        lines.append(
            f"{sampler:<{width}}  {law:<17} {c['pass']:>4} {c['fail'] + c['error']:>4} {c['skip']:>4}{mark}"
        )
    return "\n".join(lines)


def _plots(records, out: Path, calibration_pvalues=None) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    pvals = sorted(p for r in records for p in (r.pvalues or []) if p is not None and p > 0)
    if pvals:
        fig, ax = plt.subplots(figsize=(5, 5))
        m = len(pvals)
        expected = (np.arange(1, m + 1) - 0.5) / m
        ax.plot(expected, pvals, ".", ms=4, label=f"{m} GOF p-values")
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="U(0,1)")
        ax.set_xlabel("uniform quantile")
        ax.set_ylabel("observed p-value")
        ax.set_title("p-value QQ plot (all GOF certificates)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "pvalue_qq.png", dpi=90)
        plt.close(fig)
        made.append("pvalue_qq.png")
    if calibration_pvalues is not None and len(calibration_pvalues):
        cal = np.sort(np.asarray(calibration_pvalues))
        fig, ax = plt.subplots(figsize=(5, 5))
        expected = (np.arange(1, cal.size + 1) - 0.5) / cal.size
        ax.loglog(expected, cal, ".", ms=3, label=f"{cal.size} p-values over the calibration runs")
        ax.loglog([expected[0], 1], [expected[0], 1], "k--", lw=1, label="U(0,1)")
        ax.set_xlabel("uniform quantile")
        ax.set_ylabel("observed p-value")
        ax.set_title("calibration: p-values under the null (log-log)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "calibration_qq.png", dpi=90)
        plt.close(fig)
        made.append("calibration_qq.png")
    by_sampler: dict = {}
    for r in records:
        if r.law == "accepted_length" and r.plot:
            by_sampler.setdefault(r.sampler, []).append(r)
    for sampler, recs in by_sampler.items():
        cols = 4
        rows = (len(recs) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
        for ax, r in zip(axes.ravel(), recs, strict=False):
            e = np.asarray(r.plot["expected"])
            o = np.asarray(r.plot["observed"])
            x = np.arange(len(e))
            ax.bar(x - 0.2, e, 0.4, label="theory")
            ax.bar(x + 0.2, o, 0.4, label="observed")
            ax.set_title(r.case, fontsize=7)
            ax.set_xticks(x)
        for ax in axes.ravel()[len(recs) :]:
            ax.axis("off")
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(f"accepted length a: P(a = j), {sampler}")
        fig.tight_layout()
        name = f"accepted_length_{_slug(sampler)}.png"
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        made.append(name)
    joint = [r for r in records if r.law in ("joint", "gof") and r.plot]
    chosen = {}
    for r in joint:  # one plot per (sampler, family): the case with the most cells <= 400
        key = (r.sampler, r.law)
        if len(r.plot["expected"]) <= 400 and (
            key not in chosen or len(r.plot["expected"]) > len(chosen[key].plot["expected"])
        ):
            chosen[key] = r
    for r in chosen.values():
        e = np.asarray(r.plot["expected"])
        o = np.asarray(r.plot["observed"])
        fig, ax = plt.subplots(figsize=(9, 3))
        x = np.arange(len(e))
        ax.bar(x, e, 1.0, alpha=0.5, label="exact law")
        ax.plot(x, o, "r.", ms=3, label=f"observed (n={r.n})")
        if "shape" in r.plot:
            v1 = r.plot["shape"][1]
            for j in range(1, r.plot["shape"][0]):
                ax.axvline(j * v1 - 0.5, color="gray", lw=0.5)
            ax.set_xlabel("cell a * (V+1) + token  (last column of each block: -1)")
        else:
            ax.set_xlabel("token")
        ax.set_ylabel("probability")
        ax.set_title(
            f"{r.sampler}: {r.case} ({r.law}), {r.status}, "
            f"p={r.pvalue if r.pvalue is None else format(r.pvalue, '.3g')}",
            fontsize=9,
        )
        ax.legend(fontsize=7)
        fig.tight_layout()
        name = f"frequencies_{_slug(r.sampler)}_{_slug(r.case)}.png"
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        made.append(name)
    return made


def write_report(out_dir, run, *, mutants=None, baseline=None, calibration=None, command: str = "") -> Path:
    """Write the report directory; returns the path of report.md."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    from specsample.verify.stats_bridge import st

    certs = [r.to_json() for r in run.records]
    (out / "certificates.json").write_text(
        json.dumps(
            {
                "budget": run.budget,
                "device": run.device,
                "seconds": run.seconds,
                "unavailable": run.unavailable,
                "stopped": getattr(run, "stopped", ""),
                "certificates": certs,
            },
            indent=1,
            default=str,
        )
    )
    # one line per certificate, without plot data: small enough to read or copy off a GPU machine
    fields = ("sampler", "case", "law", "status", "n", "eps", "tv_bound", "pvalue", "seconds")
    lines = ["\t".join(fields)] + ["\t".join(str(c.get(f, "")) for f in fields) for c in certs]
    (out / "summary.tsv").write_text("\n".join(lines) + "\n")
    plots = _plots(run.records, out, None if calibration is None else calibration["pvalues"])
    c = Counter(r.status for r in run.records)
    lines = [
        "# specsample verify report",
        "",
        f"Command: `{command}`" if command else "",
        f"Budget `{run.budget}`, device `{run.device}`, {len(run.records)} certificates in "
        f"{run.seconds:.1f} s: "
        f"**{c['pass']} pass, {c['fail'] + c['error']} fail, {c['skip']} skipped**.",
        f"Statistics: `{st.__name__}`.",
        "",
    ]
    if getattr(run, "stopped", ""):
        lines += [f"**Incomplete**: {run.stopped}.", ""]
    if run.unavailable:
        lines += (
            ["Samplers not certified here:", ""] + [f"- `{n}`: {why}" for n, why in run.unavailable] + [""]
        )
    lines += ["## Summary", "", summary_table(run.records), ""]
    failed = [r for r in run.records if not r.passed]
    if failed:
        lines += ["## Failed certificates", ""]
        for r in failed:
            lines.append(f"- **{r.sampler} / {r.case} / {r.law}** ({r.status}): {r.statement}. {r.detail}")
        lines.append("")
    tv = [r for r in run.records if r.tv_bound is not None]
    if tv:
        lines += [
            "## TV certificates",
            "",
            "Upper confidence bounds on total variation: `coupling` bounds TV(sampler, float64 "
            "reference) from the mismatch rate on random injected uniforms; `conditional` bounds "
            "TV(emitted token | a, exact law) from counts on the production RNG path "
            "(specsample.stats.tv_ucb_from_counts).",
            "",
            "| sampler | case | law | rows | TV <= | confidence |",
            "|---|---|---|---|---|---|",
        ]
        for r in tv:
            conf = "" if r.delta is None else f"1-{r.delta:g}"
            lines.append(f"| {r.sampler} | {r.case} | {r.law} | {r.n} | {r.tv_bound:.3g} | {conf} |")
        lines.append("")
    lines += ["## Certificates", "", "| sampler | case | law | status | statement |", "|---|---|---|---|---|"]
    for r in run.records:
        lines.append(
            f"| {r.sampler} | {r.case} | {r.law} | {r.status} | {r.statement.replace('|', '/')[:300]} |"
        )
    lines.append("")
    if mutants is not None:
        killed = sum(m.killed for m in mutants)
        lines += [
            "## Mutants",
            "",
            f"{killed} of {len(mutants)} planted bugs killed.",
            "",
            "| mutant | applied to | killed | killed by | bug | seen in |",
            "|---|---|---|---|---|---|",
        ]
        for m in mutants:
            lines.append(
                f"| {m.name} | {m.applied_to} | {'yes' if m.killed else 'NO'} | {', '.join(m.killed_by)} | "
                f"{m.description} | {m.anchor} |"
            )
        if baseline is not None:
            bad = [r for r in baseline if not r.passed]
            lines += [
                "",
                f"Unmutated baselines: {len(baseline) - len(bad)} of {len(baseline)} certificates pass.",
            ]
        lines.append("")
        (out / "mutants.json").write_text(json.dumps([m.to_json() for m in mutants], indent=1))
    if calibration is not None:
        lines += ["## Calibration (vary the seed, float64 references)", "", calibration["text"], ""]
        (out / "calibration.json").write_text(json.dumps(calibration["data"], indent=1, default=str))
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
