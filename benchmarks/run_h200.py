"""One standalone GPU benchmark run: `python3 benchmarks/run_h200.py --out $OUT`.

Measures the device copy bandwidth, then every (case, provider) of the "run" selection
(benchmarks/shapes.py: the issue targets first, then a B x V sweep) with the harness, and writes
under OUT (file names use the GPU slug, "h200" on an H200):

    <slug>.json                    list of records (benchmarks/records.py), ours and same-run baselines
    <slug>.png                     floor fraction by shape per kernel (benchmarks/plot.py)
    baselines/<slug>/baseline.json the same records with machine info: the regression gate's baseline
    bench_targets.md               the kernel issues' targets with measured values and baseline ratios
    bench_skipped.json, bench_machine.json, bench_summary.txt

It prints the records table and the targets table. Stops starting new cases after --max-seconds
(default 210) so the run stays under about 4 minutes on an H200; later cases are listed as skipped.
--dry-run runs the pipeline on the CPU at tiny shapes with host-clock timers (numbers meaningless).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _dry_run_cases():
    from benchmarks.floors import KERNELS, KERNELS_WITH_K, Case

    return [
        Case(k, B, 2 if k in KERNELS_WITH_K else 0, 96, dtype)
        for k in KERNELS
        for B in (1, 3)
        for dtype in ("float32", "bfloat16")
    ]


def records_table(records) -> str:
    head = (
        f"{'kernel':<19}{'provider':<18}{'B':>4}{'K':>3}{'V':>8} {'dtype':<9}"
        f"{'median_us':>10}{'graph_us':>10}"
        f"{'floor_us':>9}{'floor_frac':>11}{'GB/s':>8}{'speedup':>8}"
    )
    rows = [head]
    for r in records:
        graph = "-" if r.graph_us is None else f"{r.graph_us:.2f}"
        speedup = "-" if r.speedup is None else f"{r.speedup:.1f}x"
        slowed = "  (slowed)" if r.slowed else ""
        rows.append(
            f"{r.kernel:<19}{r.provider:<18}{r.B:>4}{r.K:>3}{r.V:>8} {r.dtype:<9}"
            f"{r.median_us:>10.2f}{graph:>10}"
            f"{r.floor_us:>9.2f}{r.floor_fraction:>11.3f}{r.bandwidth_GBps:>8.0f}{speedup:>8}{slowed}"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Standalone GPU benchmark run: records, plot, baseline, targets."
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    parser.add_argument("--only", default="", help="comma-separated kernels (default: all)")
    parser.add_argument("--providers", default="", help="comma-separated providers (default: all applicable)")
    parser.add_argument("--selection", choices=("target", "run"), default="run")
    parser.add_argument(
        "--full", action="store_true", help="every engine shape (also SPECSAMPLE_BENCH_FULL=1)"
    )
    parser.add_argument("--max-seconds", type=float, default=210.0, help="start no case after this")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--dry-run", action="store_true", help="CPU, tiny shapes, host clock: tests the pipeline"
    )
    args = parser.parse_args(argv)
    if args.dry_run:
        from specsample.kernels._interpreter_request import request_interpreter

        request_interpreter()

    from benchmarks import shapes
    from benchmarks.harness import BenchSession, Skip
    from benchmarks.machine import gpu_slug, machine_info
    from benchmarks.plot import plot_floor_fractions
    from benchmarks.providers import providers_for, slowed_kernels
    from benchmarks.records import attach_baselines, save_records
    from benchmarks.targets import TARGETS, evaluate, targets_markdown

    kernels = tuple(k.strip() for k in args.only.split(",") if k.strip()) or None
    names = tuple(p.strip() for p in args.providers.split(",") if p.strip()) or None
    if args.dry_run:
        cases = [c for c in _dry_run_cases() if kernels is None or c.kernel in kernels]
    else:
        cases = shapes.selected_cases(
            args.selection, full=args.full or shapes.full_requested(), kernels=kernels
        )
    try:
        session = BenchSession.create(dry_run=args.dry_run)
    except RuntimeError as exc:
        print(f"run_h200: {exc}", file=sys.stderr)
        return 2
    machine = machine_info()
    if args.dry_run:  # measured on the CPU, whatever GPU the machine holds
        for key in ("sm_count", "l2_cache_bytes", "memory_bytes", "driver"):
            machine.pop(key, None)
        machine.update(gpu=session.gpu, gpu_slug=gpu_slug(session.gpu))
    machine["copy_bandwidth_GBps"] = session.copy_bandwidth / 1e9
    machine["slowed_kernels"] = sorted(slowed_kernels())
    slug = gpu_slug(session.gpu)
    print(
        f"run_h200: {session.gpu}, copy bandwidth {session.copy_bandwidth / 1e12:.3f} TB/s "
        f"(read + written), {len(cases)} cases"
    )

    records, skips = [], []
    t0 = time.monotonic()
    for i, case in enumerate(cases):
        providers = providers_for(case.kernel, names)
        if time.monotonic() - t0 > args.max_seconds:
            skips += [
                Skip(case.label, p.name, f"time budget --max-seconds {args.max_seconds:g} spent")
                for p in providers
            ]
            continue
        try:
            got, why = session.measure(case, providers)
        except Exception as exc:  # a sticky device error: keep what was measured, stop
            print(f"run_h200: aborting at {case.label}: {type(exc).__name__}: {exc}", file=sys.stderr)
            skips += [Skip(case.label, "*", f"run aborted: {type(exc).__name__}: {exc}"[:300])]
            break
        records += got
        skips += why
        print(
            f"[{i + 1}/{len(cases)} {time.monotonic() - t0:5.0f}s] {case.label}: "
            + ", ".join(f"{r.provider} {r.median_us:.1f}us" for r in got),
            flush=True,
        )
    attach_baselines(records)
    machine["elapsed_s"] = round(time.monotonic() - t0, 1)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    save_records(out / f"{slug}.json", records)
    save_records(out / "baselines" / slug / "baseline.json", records, machine)
    (out / "bench_skipped.json").write_text(json.dumps([s.to_dict() for s in skips], indent=1) + "\n")
    (out / "bench_machine.json").write_text(json.dumps(machine, indent=1) + "\n")
    targets_md = targets_markdown(evaluate(TARGETS, records))
    (out / "bench_targets.md").write_text(
        f"# Targets vs measured ({session.gpu}, {machine['timestamp_utc']}, commit {machine['commit']})\n\n"
        f"do_bench median; floor = must-read bytes / copy bandwidth "
        f"{session.copy_bandwidth / 1e12:.3f} TB/s measured in the same run.\n\n" + targets_md
    )
    table = records_table(records)
    summary = [table, "", targets_md]
    if skips:
        summary.append(f"{len(skips)} skipped (provider: reason, first of each):")
        first = {}
        for s in skips:
            first.setdefault((s.provider, s.reason), s.case)
        summary += [f"  {p}: {reason}  [e.g. {case}]" for (p, reason), case in first.items()]
    if records and not args.no_plot:
        try:
            png = plot_floor_fractions(records, out / f"{slug}.png", title=f"{session.gpu}: floor fraction")
            summary.append(f"plot: {png}")
        except ImportError as exc:  # matplotlib missing: the records above are still written
            summary.append(f"plot skipped: {exc} (install matplotlib, then: python3 benchmarks/plot.py ...)")
    summary.append(
        f"records: {out / f'{slug}.json'} ({len(records)}), baseline: "
        f"{out / 'baselines' / slug / 'baseline.json'}, elapsed {machine['elapsed_s']} s"
    )
    text = "\n".join(summary)
    (out / "bench_summary.txt").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
