"""`specsample verify`: certify speculative samplers (ours or anyone's) and write a report.

    specsample verify [--device auto|cpu|cuda] [--budget ci|standard|full] [--only TOKEN ...]
                      [--law LAW ...] [--mutants] [--target MODULE:FUNCTION] [--family chain|gumbel|logits]
                      [--adapter NAME ...] [--report DIR] [--calibrate N] [--max-seconds S]

Exit status: 0 when every certificate passes (and every mutant is killed with --mutants, and the
calibration is consistent with the declared alpha with --calibrate); 1 when any fails; 2 on usage
errors or when a requested sampler cannot be loaded.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time


def _has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specsample", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="certify samplers and write a report")
    v.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    v.add_argument(
        "--budget",
        choices=("ci", "standard", "full"),
        default=None,
        help="default: standard on a GPU, ci on CPU",
    )
    v.add_argument(
        "--only",
        nargs="+",
        default=None,
        help="run only certificates whose sampler/case/law contains one of these tokens",
    )
    v.add_argument(
        "--law",
        nargs="+",
        default=None,
        metavar="LAW",
        help="run only these laws, by exact name (e.g. conditional joint; runner.ALL_LAWS lists them); "
        "--only matches substrings of sampler/case/law instead",
    )
    v.add_argument("--mutants", action="store_true", help="run the mutant catalogue and write mutants.json")
    v.add_argument("--target", default=None, help="MODULE:FUNCTION (or path.py:FUNCTION) with our signature")
    v.add_argument(
        "--family",
        choices=("chain", "gumbel", "logits"),
        default=None,
        help="with --target: its signature, chain_rejection_sample, fast_sample or rejection_sample_logits "
        "(default: the function's specsample_family attribute, else chain); without: certify only the "
        "adapters' samplers of this family",
    )
    v.add_argument(
        "--adapter",
        nargs="+",
        default=None,
        choices=("specsample", "reference", "sglang", "vllm", "flashinfer"),
        help="samplers to certify (default: reference and specsample)",
    )
    v.add_argument("--report", default=None, help="write report.md, certificates.json and plots here")
    v.add_argument(
        "--calibrate",
        type=int,
        default=0,
        metavar="N",
        help="vary the seed N times over the statistical certificates of the references",
    )
    v.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        metavar="S",
        help="start no certificate after S seconds; report what finished and exit 3 (incomplete)",
    )
    v.add_argument("--no-progress", action="store_true")
    return ap


class _Progress:
    """Reports each finished certificate: a bar on a terminal, otherwise one line per certificate
    on stderr (CI logs), and, with --report, one JSON line per certificate appended to
    REPORT/certificates.partial.jsonl as soon as it exists, so a run stopped by a timeout still
    leaves every certificate it finished."""

    def __init__(self, enabled: bool, desc: str, report_dir: str | None = None):
        self.bar = None
        self.enabled = enabled
        self.count = 0
        self.t0 = time.perf_counter()
        self.stream = None
        if report_dir is not None:
            os.makedirs(report_dir, exist_ok=True)
            self.stream = open(os.path.join(report_dir, "certificates.partial.jsonl"), "w")  # noqa: SIM115
        if enabled and sys.stderr.isatty():
            try:
                from tqdm import tqdm

                self.bar = tqdm(desc=desc, unit="cert", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def __call__(self, rec) -> None:
        self.count += 1
        elapsed = time.perf_counter() - self.t0
        if self.stream is not None:
            line = json.dumps(dict(rec.to_json(), elapsed_s=round(elapsed, 2)), default=str)
            self.stream.write(line + "\n")
            self.stream.flush()
        if self.bar is not None:
            self.bar.set_postfix_str(f"{rec.sampler}/{rec.case}/{rec.law}: {rec.status}"[:70])
            self.bar.update(1)
        elif self.enabled:
            print(f"  [{elapsed:7.1f} s] {self.count:4d} {rec.sampler}/{rec.case}/{rec.law}: {rec.status}",
                  file=sys.stderr, flush=True)  # fmt: skip

    def close(self):
        if self.bar is not None:
            self.bar.close()
        if self.stream is not None:
            self.stream.close()
            self.stream = None


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    device = args.device
    if device == "auto":
        device = "cuda" if _has_cuda() else "cpu"
    if device == "cpu":
        from specsample.kernels._interpreter_request import request_interpreter

        request_interpreter()
    elif not _has_cuda():
        print("specsample verify: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    budget_name = args.budget or ("standard" if device == "cuda" else "ci")

    from specsample.verify import report as rep
    from specsample.verify import runner
    from specsample.verify.budgets import get_budget
    from specsample.verify.protocol import SamplerUnavailable

    budget = get_budget(budget_name)
    command = "specsample " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    adapters = tuple(args.adapter) if args.adapter else ("reference", "specsample")
    progress = _Progress(not args.no_progress, f"verify [{budget_name}, {device}]", args.report)
    t0 = time.perf_counter()
    try:
        run = runner.verify(
            budget,
            adapters=adapters,
            target=args.target,
            family=args.family,
            device=device,
            only=args.only,
            progress=progress,
            max_seconds=args.max_seconds,
            laws=args.law,
        )
    except (SamplerUnavailable, ValueError) as exc:  # a sampler that cannot be loaded or planned
        progress.close()
        print(f"specsample verify: {exc}", file=sys.stderr)
        return 2
    finally:
        progress.close()
    explicit = bool(args.adapter) or bool(args.target)
    if explicit and run.unavailable and not run.records:
        for name, why in run.unavailable:
            print(f"specsample verify: {name}: {why}", file=sys.stderr)
        return 2

    mutants = baseline = calibration = None
    status = 0 if not run.failed else 1
    if explicit and run.unavailable:  # a sampler the user asked for could not be certified
        status = 2
    if run.stopped and status == 0:  # nothing failed, but not everything ran
        status = 3
    if args.mutants:
        from specsample.verify import mutants as mut

        def tell(name, killed):
            print(f"  mutant {name}: {'killed' if killed else 'SURVIVED'}", file=sys.stderr)

        mutants, baseline = mut.run_mutants(
            get_budget("ci") if budget_name == "ci" else budget,
            only=args.only,
            progress=None if args.no_progress else tell,
        )
        if any(not m.killed for m in mutants) or any(not r.passed for r in baseline):
            status = max(status, 1)
    if args.calibrate:
        from specsample.verify.calibrate import calibrate

        calibration = calibrate(get_budget("ci"), args.calibrate)
        if not calibration["consistent"]:
            status = max(status, 1)
    run.seconds = time.perf_counter() - t0

    print(rep.console_table(run.records))
    for name, why in run.unavailable:
        print(f"not certified: {name}: {why}")
    if run.stopped:
        print(f"INCOMPLETE: {run.stopped}")
    for r in run.failed:
        print(f"FAIL {r.sampler} / {r.case} / {r.law}: {r.statement} {r.detail}"[:600])
    if run.failed:
        by_sampler: dict = {}
        for r in run.failed:
            by_sampler.setdefault(r.sampler, set()).add(r.law)
        for sampler, laws in by_sampler.items():
            print(f"failed laws for {sampler}: {', '.join(sorted(laws))}")
    if mutants is not None:
        print(f"mutants: {sum(m.killed for m in mutants)} / {len(mutants)} killed")
        for m in mutants:
            print(
                f"  {m.name:<28} "
                f"{'killed by ' + ', '.join(m.killed_by) if m.killed else 'SURVIVED ' + m.error}"
            )
    if calibration is not None:
        print(calibration["text"])
    if args.report:
        path = rep.write_report(
            args.report, run, mutants=mutants, baseline=baseline, calibration=calibration, command=command
        )
        print(f"report: {path}")
    verdict = {0: "PASS", 3: "INCOMPLETE"}.get(status, "FAIL")
    print(
        f"specsample verify: {verdict} ({len(run.records)} certificates, budget {budget_name}, "
        f"{run.seconds:.0f} s)"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
