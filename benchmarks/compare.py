"""Regression gate: compare a benchmark run with the saved baseline of the same GPU model.

    python benchmarks/compare.py RUN.json [--baseline-dir benchmarks/baselines | --baseline FILE]

RUN.json is any records file (records.load_records: run_h200's results list, the pytest suite's
records file, a baseline file, a pytest-benchmark report). The baseline is
<baseline-dir>/<gpu slug>/baseline.json, the slug taken from the run's records (machine.gpu_slug).
For every record of a gated provider (default: ours, "specsample") present in both, and every gated
metric present in both (default: graph_us = CUDA-graph per launch, the device time), the run
regresses when current > baseline * (1 + threshold), threshold 10% by default.

Why graph_us only by default: on the H200 (docs/gpu_log.md, run 6) two unchanged runs of the chain
target shapes agreed within 2.5% on graph_us (ratios 0.976-1.007) while do_bench's eager median_us,
which includes Triton's Python launch path, moved by up to 1.9x; the deliberately slowed kernel
(launcher called twice) moved graph_us by 1.73-2.0x. `--metrics median_us,graph_us` gates both.

Exit status: 0 no regression (or nothing to compare: no GPU records and no baseline, said loudly);
1 at least one regression, or a GPU run that measured nothing its baseline has, or (--require-all)
a baselined record missing from the run; 2 usage errors: unreadable files, mixed or different GPU
models (baselines never cross GPU models), no baseline with --require-baseline.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import gpu_slug
from benchmarks.records import OURS, Record, load_records

DEFAULT_THRESHOLD = 0.10
DEFAULT_METRICS = ("graph_us",)
BASELINE_FILE = "baseline.json"


@dataclass
class Comparison:
    key: tuple  # (kernel, provider, B, K, V, dtype)
    metric: str
    baseline: float
    current: float

    @property
    def ratio(self) -> float:
        return self.current / self.baseline


@dataclass
class GateResult:
    threshold: float
    compared: list[Comparison] = field(default_factory=list)
    regressions: list[Comparison] = field(default_factory=list)
    missing: list[tuple] = field(default_factory=list)  # gated baseline keys absent from the run
    new: list[tuple] = field(default_factory=list)  # gated run keys absent from the baseline

    @property
    def failed(self) -> bool:
        return bool(self.regressions)


def compare(
    current: list[Record],
    baseline: list[Record],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    providers: tuple[str, ...] = (OURS,),
    metrics: tuple[str, ...] = DEFAULT_METRICS,
) -> GateResult:
    """Per-record, per-metric comparison; a regression is current > baseline * (1 + threshold)."""
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold!r}")
    for m in metrics:
        if m not in Record.__dataclass_fields__:
            raise ValueError(f"unknown metric {m!r}; records have {sorted(Record.__dataclass_fields__)}")
    cur = {r.key: r for r in current if r.provider in providers}
    base = {r.key: r for r in baseline if r.provider in providers}
    result = GateResult(threshold)
    result.missing = sorted(k for k in base if k not in cur)
    result.new = sorted(k for k in cur if k not in base)
    for key in sorted(k for k in cur if k in base):
        for m in metrics:
            b, c = getattr(base[key], m), getattr(cur[key], m)
            if b is None or c is None:
                continue
            comp = Comparison(key, m, float(b), float(c))
            result.compared.append(comp)
            if comp.current > comp.baseline * (1.0 + threshold):
                result.regressions.append(comp)
    return result


def _key_label(key: tuple) -> str:
    kernel, provider, B, K, V, dtype = key
    return f"{kernel} {provider} B={B} K={K} V={V} {dtype}"


def report(result: GateResult) -> str:
    """Human-readable table of every comparison, regressions flagged, then missing / new keys."""
    lines = [f"{'record':<58} {'metric':<10} {'baseline':>10} {'current':>10} {'ratio':>7}"]
    for c in sorted(result.compared, key=lambda c: -c.ratio):
        flag = "  REGRESSION" if c in result.regressions else ""
        lines.append(
            f"{_key_label(c.key):<58} {c.metric:<10} {c.baseline:>10.2f} {c.current:>10.2f}"
            f" {c.ratio:>7.3f}{flag}"
        )
    for k in result.missing:
        lines.append(f"missing from this run (in baseline): {_key_label(k)}")
    for k in result.new:
        lines.append(f"new in this run (no baseline yet): {_key_label(k)}")
    verdict = "FAIL" if result.failed else "ok"
    lines.append(
        f"{verdict}: {len(result.regressions)} regression(s) > {result.threshold:.0%} among "
        f"{len(result.compared)} comparison(s); {len(result.missing)} missing, {len(result.new)} new"
    )
    return "\n".join(lines)


def _run_gpu(records: list[Record], machine: dict) -> str | None:
    gpus = {r.gpu for r in records} or ({machine["gpu"]} if machine.get("gpu") else set())
    if len(gpus) > 1:
        raise ValueError(f"the run mixes GPU models {sorted(gpus)}")
    return next(iter(gpus), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fail on a median regression against the saved per-GPU baseline."
    )
    parser.add_argument("current", type=Path, help="records of this run")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--baseline", type=Path, help="baseline file (default: from --baseline-dir)")
    where.add_argument("--baseline-dir", type=Path, default=Path("benchmarks/baselines"))
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="relative, default 0.10")
    parser.add_argument("--providers", default=OURS, help=f"comma-separated gated providers (default {OURS})")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS), help="comma-separated record fields")
    parser.add_argument("--require-baseline", action="store_true", help="exit 2 when no baseline exists")
    parser.add_argument(
        "--require-all", action="store_true", help="exit 1 when a baselined record is missing"
    )
    args = parser.parse_args(argv)

    try:
        current, machine = load_records(args.current)
        gpu = _run_gpu(current, machine)
    except (OSError, ValueError) as exc:
        print(f"compare: cannot read the run {args.current}: {exc}", file=sys.stderr)
        return 2
    if any(r.slowed for r in current):
        print("compare: this run used the deliberately slowed kernel (SPECSAMPLE_BENCH_SLOWED)")
    if gpu is None or gpu == "cpu":
        print(f"compare: {args.current} has no GPU measurements (benchmarks skipped); nothing to compare")
        return 0
    slug = gpu_slug(gpu)
    path = args.baseline or args.baseline_dir / slug / BASELINE_FILE
    if not path.exists():
        print(
            f"compare: no saved baseline for GPU {gpu!r} at {path}; nothing to compare "
            f"(save one: copy a run's baselines/{slug}/{BASELINE_FILE} there)"
        )
        return 2 if args.require_baseline else 0
    try:
        baseline, base_machine = load_records(path)
        base_gpu = _run_gpu(baseline, base_machine)
    except (OSError, ValueError) as exc:
        print(f"compare: cannot read the baseline {path}: {exc}", file=sys.stderr)
        return 2
    if base_gpu is None or gpu_slug(base_gpu) != slug:
        print(
            f"compare: refusing to compare GPU {gpu!r} with a baseline from {base_gpu!r} ({path})",
            file=sys.stderr,
        )
        return 2
    providers = tuple(p.strip() for p in args.providers.split(",") if p.strip())
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    try:
        result = compare(current, baseline, threshold=args.threshold, providers=providers, metrics=metrics)
    except ValueError as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    print(f"compare: {args.current} against {path} ({gpu})")
    print(report(result))
    if result.failed:
        return 1
    if not result.compared and result.missing:
        print("compare: FAIL: this GPU run measured none of the baselined records")
        return 1
    if args.require_all and result.missing:
        print("compare: FAIL: baselined records missing from this run (--require-all)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
