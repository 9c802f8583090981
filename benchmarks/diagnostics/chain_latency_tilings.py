"""Chain's latency regime (small batches): which tiling of the vocabulary is fastest on the H200.

    python3 benchmarks/diagnostics/chain_latency_tilings.py --out t.jsonl --configs tilings [--rounds 3]
    python3 benchmarks/diagnostics/chain_latency_tilings.py --out b.jsonl --configs batches

Where one-warp programs would get one 512-column chunk each, the launcher takes one chunk per
program of a wider tiling (H200 run 66 compared four warps over 1024 columns with one warp over 512
only). Every program pays the same dependent chain (ids, gathers, its chunk of row a, the arrival),
and the last one the emit, whose reductions and scans cross warps unless the program is one warp.
`--configs tilings` (run 146) times eight (chunk, warps) tilings at B = 1 and 4; `--configs
batches` times four warps over 1024 columns against two over 512 from B = 1 to 32 (run 147 timed
them with and without speculative row loads, since dropped: the patch and the script it ran are in
benchmarks/results/runs/2026-12-01-run147-chain-speculative-rows/); `--configs b1` the same two at
B = 1 only (run 149).

Each configuration is timed on the issue's inputs (benchmarks/inputs.py) with the harness's timers
(do_bench median, CUDA-graph replay of the same inputs: `graph_us`) and one call after do_bench's
256 MB zero_ flush plus a 100 µs device pause (`zero_pause_us`, benchmarks/diagnostics/
ab_device_time.py), rounds interleaved so drift hits every configuration alike. Outputs are
compared with the default configuration's on the same uniforms (`equal_to_default`): a tiling
changes only the float64 summation order, so they differ only where a uniform sits within rounding
of a CDF boundary. One JSON line per (round, case, configuration).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

# (block_v, num_warps), one chunk per program (tiles = 1): the latency regime's shape
CONFIGS = {
    "tilings": [(1024, 4), (1024, 2), (1024, 1), (512, 1), (512, 2), (2048, 4), (2048, 8), (256, 1)],
    "batches": [(1024, 4), (512, 2)],
    "b1": [(1024, 4), (512, 2)],
}
# (kernel, B, K, V, dtype)
CASES = {
    "tilings": [("chain", 1, 4, 32000, "float32"), ("chain", 1, 4, 151936, "float32"),
                ("chain", 4, 4, 32000, "float32")],
    "batches": [("chain", 1, 4, 32000, "float32"), ("chain", 1, 4, 32000, "bfloat16"),
                ("chain_onehot", 1, 4, 32000, "float32"), ("chain", 1, 4, 151936, "float32"),
                ("chain", 1, 8, 128256, "float32"), ("chain", 2, 4, 128256, "float32"),
                ("chain", 4, 4, 32000, "float32"), ("chain", 8, 4, 32000, "float32"),
                ("chain", 16, 4, 32000, "float32"), ("chain", 32, 4, 32000, "float32")],
    "b1": [("chain", 1, 4, 32000, "float32"), ("chain", 1, 4, 32000, "bfloat16"),
           ("chain_onehot", 1, 4, 32000, "float32")],
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--configs", choices=sorted(CONFIGS), default="batches")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from benchmarks.diagnostics.ab_device_time import timed_after, zero_pause_flush
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from benchmarks.timing import CudaTimer
    from specsample.kernels import chain

    timer = CudaTimer()
    flush = zero_pause_flush()
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for kernel, b, k, v, dtype in CASES[args.configs]:
                case = Case(kernel, b, k, v, dtype)
                x = make_inputs(case, "cuda")
                p, ids, q, u = x["target_probs"], x["draft_token_ids"], x.get("draft_probs"), x["uniforms"]
                default = chain._launch(p, ids, q, None, u, None, None)
                for block_v, warps in CONFIGS[args.configs]:
                    cfg = dict(block_v=block_v, num_warps=warps, tiles=1)

                    def call(c=cfg, p=p, ids=ids, q=q, u=u):
                        return chain._launch(p, ids, q, None, u, None, None, **c)

                    got = call()
                    same = all(torch.equal(a, c) for a, c in zip(got, default, strict=True))
                    timing = timer.time([call])
                    row = dict(round=rnd, case=case.label, block_v=block_v, num_warps=warps,
                               do_bench_us=timing.median_us, graph_us=timing.graph_us,
                               zero_pause_us=timed_after(call, flush, 100),
                               equal_to_default=same)  # fmt: skip
                    out.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
