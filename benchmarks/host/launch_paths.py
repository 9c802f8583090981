"""Triton's launch path against the cached compiled launcher (kernels/_compiled_launch.py), same
process, interleaved, at every target shape, on the H200:

    python3 benchmarks/host/launch_paths.py --out DIR [--rounds 3] [--only chain,fast_sample]

Per case and path: host µs per call (median of perf_counter around each eager call, launches
queued without a sync: what the caller's thread spends) and the `triton.testing.do_bench` median
(the issue targets' metric, L2 cleared before every call). Writes launch_paths.json and prints a table
with the direct / jit ratios. The first call of every shape goes through Triton on both paths, so both
are warmed before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from benchmarks.inputs import make_inputs  # noqa: E402
from benchmarks.providers import _ours_once  # noqa: E402
from benchmarks.shapes import target_cases  # noqa: E402
from specsample.kernels._compiled_launch import use_launch_path  # noqa: E402


def host_us(call, n: int = 200) -> float:
    per = []
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        per.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(per) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: every target)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases = [c for c in target_cases() if c.dtype == "float32" or c.kernel in ("chain", "fast_sample")]
    if args.only:
        cases = [c for c in cases if c.kernel in args.only.split(",")]
    rows = []
    for case in cases:
        x = make_inputs(case, "cuda")
        call = _ours_once(case, x)
        res = {"jit": {"host": [], "do_bench": []}, "direct": {"host": [], "do_bench": []}}
        for path in res:  # warm both paths (compile, fill the cache)
            with use_launch_path(path):
                for _ in range(3):
                    call()
        torch.cuda.synchronize()
        for _ in range(args.rounds):
            for path in ("jit", "direct"):
                with use_launch_path(path):
                    res[path]["host"].append(host_us(call))
                    res[path]["do_bench"].append(
                        triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3
                    )
        row = {"case": case.label}
        for path, r in res.items():
            row[path] = {k: statistics.median(v) for k, v in r.items()}
        row["host_ratio"] = row["jit"]["host"] / row["direct"]["host"]
        row["do_bench_ratio"] = row["jit"]["do_bench"] / row["direct"]["do_bench"]
        rows.append(row)
        print(
            f"{case.label:40s} host jit {row['jit']['host']:6.1f} direct {row['direct']['host']:6.1f} "
            f"({row['host_ratio']:.2f}x)  do_bench jit {row['jit']['do_bench']:6.1f} direct "
            f"{row['direct']['do_bench']:6.1f} ({row['do_bench_ratio']:.2f}x)",
            flush=True,
        )
    meta = {"torch": torch.__version__, "triton": triton.__version__, "rounds": args.rounds}
    with open(os.path.join(args.out, "launch_paths.json"), "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
