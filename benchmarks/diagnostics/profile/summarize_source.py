"""Summarise an Nsight Compute source page (`ncu --import R --page source --csv --print-source sass`):
the warp-stall samples per SASS instruction, by opcode, and the top instructions with their leading
stall reasons. Usage: python3 summarize_source.py source.csv[.gz] [--top 40]
[--cuts 0x100,0x740 --names start,loads,rest]: also the share of each address range, the ranges cut at
offsets from the kernel's first instruction (a phase breakdown: where in the program the warps wait)."""

from __future__ import annotations

import argparse
import collections
import csv
import gzip
import re
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument(
        "--cuts", default="", help="comma-separated hex offsets that start each range after the first"
    )
    ap.add_argument("--names", default="", help="comma-separated names of the len(cuts) + 1 ranges")
    args = ap.parse_args(argv)
    cuts = [int(c, 16) for c in args.cuts.split(",") if c]
    names = [n for n in args.names.split(",") if n] or [f"range{i}" for i in range(len(cuts) + 1)]
    if len(names) != len(cuts) + 1:
        ap.error(f"--names needs {len(cuts) + 1} names for {len(cuts)} cuts, got {len(names)}")
    opener = gzip.open if args.csv.endswith(".gz") else open
    with opener(args.csv, "rt", newline="") as f:
        rows = [r for r in csv.reader(f)]
    head_at = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if head_at is None:
        print("no header with Address and Source; first lines:", rows[:3])
        return 1
    head = rows[head_at]
    body = [r for r in rows[head_at + 1 :] if len(r) == len(head)]
    col = {name: i for i, name in enumerate(head)}
    print(f"{len(body)} SASS lines, {len(head)} columns")
    samp = next((c for c in head if "Warp Stall Sampling (All" in c), None)
    if samp is None:
        return 0

    def num(r, c):
        try:
            return float(r[col[c]].replace(",", "") or 0)
        except ValueError:
            return 0.0

    total = sum(num(r, samp) for r in body) or 1.0
    reasons = [c for c in head if "Sampling" not in c and (c.startswith("stall_") or "Stall" in c)]
    by_op = collections.Counter()
    for r in body:
        op = re.sub(r"^@!?U?P\w+\s+", "", r[col["Source"]].strip()).split(" ")[0]
        by_op[op] += num(r, samp)
    print(f"stall samples {total:.0f}; by opcode:")
    for op, s in by_op.most_common(15):
        print(f"  {op:24s} {100 * s / total:5.1f}%")
    print(f"top {args.top} instructions:")
    ranked = sorted(body, key=lambda r: -num(r, samp))[: args.top]
    for r in ranked:
        top_reasons = sorted(((num(r, c), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c}={v:.0f}" for v, c in top_reasons if v > 0)
        share = 100 * num(r, samp) / total
        print(f"  {r[col['Address']]:>8s} {share:5.1f}%  {r[col['Source']].strip()[:60]:60s} {why}")
    if cuts:
        first = min(int(r[col["Address"]], 16) for r in body)
        ranges = [0.0] * len(names)
        for r in body:
            ranges[sum(int(r[col["Address"]], 16) - first >= c for c in cuts)] += num(r, samp)
        print("by address range (offsets from the first instruction):")
        for name, lo, s in zip(names, [0, *cuts], ranges, strict=True):
            print(f"  {name:28s} from 0x{lo:x} {100 * s / total:5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
