"""Print the headline Nsight Compute metrics per profiled kernel from ncu's `--csv --page details`.

python3 summarize.py OUT/profile/ncu_details.csv OUT/profile/cases.json
"""

import csv
import json
import sys
from collections import OrderedDict

KEEP = (
    "Duration", "Compute (SM) Throughput", "DRAM Throughput", "Memory Throughput", "Issue Slots Busy",
    "Issued Ipc Active", "Achieved Occupancy", "Theoretical Occupancy", "Registers Per Thread",
    "Grid Size", "Block Size", "Executed Instructions", "No Eligible", "Warp Cycles Per Issued Instruction",
)  # fmt: skip


def main(path: str, cases_path: str | None = None) -> None:
    rows = []
    with open(path) as f:
        lines = [line for line in f if line.startswith('"')]
    for rec in csv.DictReader(lines):
        rows.append(rec)
    kernels: "OrderedDict[str, dict]" = OrderedDict()
    for r in rows:
        k = kernels.setdefault(r["ID"], {"name": r["Kernel Name"][:40], "m": {}})
        k["m"][r["Metric Name"]] = (r["Metric Value"], r["Metric Unit"])
    names = json.load(open(cases_path)) if cases_path else []
    print(f"{len(kernels)} kernels; cases in launch order: {names}")
    for kid, k in kernels.items():
        m = k["m"]
        print(f"--- {kid} {k['name']}")
        print("   ", "; ".join(f"{key}={m[key][0]}{m[key][1]}" for key in KEEP if key in m))
        pipes = sorted(((float(v[0].replace(",", "")), n) for n, v in m.items() if n.startswith("sm__inst_executed_pipe_")
                        and v[0].replace(",", "").replace(".", "").isdigit()), reverse=True)[:6]  # fmt: skip
        print("    pipes:", ", ".join(f"{n.split('pipe_')[1].split('.')[0]}={v:.0f}%" for v, n in pipes))
        stalls = sorted(((float(v[0].replace(",", "")), n) for n, v in m.items() if "issue_stalled" in n
                         and v[0].replace(",", "").replace(".", "").isdigit()), reverse=True)[:6]  # fmt: skip
        if stalls:
            print(
                "    stalls/issue:",
                ", ".join(f"{n.split('stalled_')[1].split('_per')[0]}={v:.2f}" for v, n in stalls),
            )


if __name__ == "__main__":
    main(*sys.argv[1:])
