"""Where every issue target stands, next to what a bare read of its bytes costs under the same timer.

    python3 benchmarks/diagnostics/status_table.py --read-floor rf.jsonl --ab ab.jsonl [--ab more.jsonl]

Inputs are the JSON lines of `read_floor.py` (copy bandwidth and bare reads of each issue shape) and
`ab_device_time.py` (our calls: do_bench median, zero_pause_us, graph_us), from one device session.
For each target of `benchmarks/targets.py` the table gives:
- do_bench: the median `triton.testing.do_bench` reports (the issues' timer; it reads host time
  when the host is slower than do_bench's flush);
- zero_pause: do_bench's device time (its flush, then a pause, so the call is queued in time);
- graph: device time per call in a CUDA graph over rotated inputs (no launch overhead);
- floor: must-read bytes / the copy bandwidth of the same session, and the share floor / zero_pause;
- bare read: the better of read_floor.py's two pure-read kernels, do_bench, for the same bytes;
- met: the issue's criterion on do_bench (<= the time, or >= the floor share), and on zero_pause.
A do_bench reading more than max(1 µs, 5%) above zero_pause is marked "(host)": that process's
host, not the device, set it (do_bench and zero_pause agree within that when device-bound: run 102).
Several rows of one case (several processes) are combined by their median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

from benchmarks.floors import floor_us  # noqa: E402
from benchmarks.targets import TARGETS  # noqa: E402

READERS = ("read_1w", "read_4w")  # read_floor.py's pure reads (the empty kernel and torch.sum are not)


def _rows(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def status_rows(read_floor: list[dict], ours: list[dict]) -> list[dict]:
    """One dict per target: the figures above (None where a case was not measured)."""
    bandwidth = next(r["copy_bandwidth_tb_s"] for r in read_floor if "copy_bandwidth_tb_s" in r) * 1e12
    out = []
    for t in TARGETS:
        label = t.case.label
        mine = [r for r in ours if r.get("case") == label]

        def med(key, mine=mine):
            vals = [r[key] for r in mine if r.get(key) is not None]
            return statistics.median(vals) if vals else None

        reads = [r["median_us"] for r in read_floor if r.get("case") == label and r.get("reader") in READERS]
        floor = floor_us(t.case, bandwidth)
        do_bench, pause = med("median_us"), med("zero_pause_us")
        met = None if do_bench is None else t.met_by(do_bench, floor / do_bench)
        met_pause = None if pause is None else t.met_by(pause, floor / pause)
        host_bound = None if do_bench is None or pause is None else do_bench - pause > max(1.0, 0.05 * pause)
        out.append(dict(issue=t.issue, case=label, target=t.goal(), do_bench=do_bench, zero_pause=pause,
                        graph=med("graph_us"), floor=floor,
                        share=floor / pause if pause else None, bare_read=min(reads) if reads else None,
                        met=met, met_pause=met_pause, host_bound=host_bound))  # fmt: skip
    return out


def _us(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def markdown(rows: list[dict]) -> str:
    head = ("| issue | case | target | do_bench µs | zero_pause µs | graph µs | floor µs | floor share "
            "(zero_pause) | bare read do_bench µs | met (do_bench) | met (zero_pause) |")  # fmt: skip
    lines = [head, "|" + "---|" * 11]
    verdict = {None: "-", True: "yes", False: "no"}
    for r in rows:
        share = "-" if r["share"] is None else f"{100 * r['share']:.0f}%"
        do_bench = _us(r["do_bench"]) + (" (host)" if r["host_bound"] else "")
        lines.append(f"| {r['issue']} | {r['case']} | {r['target']} | {do_bench} | {_us(r['zero_pause'])} | "
                     f"{_us(r['graph'])} | {_us(r['floor'])} | {share} | {_us(r['bare_read'])} | "
                     f"{verdict[r['met']]} | {verdict[r['met_pause']]} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--read-floor", required=True, help="read_floor.py's JSON lines")
    ap.add_argument(
        "--ab", action="append", required=True, help="ab_device_time.py's JSON lines (repeatable)"
    )
    ap.add_argument("--label", help="only the ab_device_time rows with this label (e.g. not an A/B's 'new')")
    args = ap.parse_args(argv)
    ours = [r for path in args.ab for r in _rows(path) if args.label is None or r.get("label") == args.label]
    print(markdown(status_rows(_rows(args.read_floor), ours)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
