"""The latency regime (small batches) of chain and fast_sample: which tiling is fastest on the H200.

    python3 benchmarks/diagnostics/latency_tilings.py --out t.jsonl --configs tilings [--rounds 3]
    python3 benchmarks/diagnostics/latency_tilings.py --out b.jsonl --configs batches
    python3 benchmarks/diagnostics/latency_tilings.py --out f.jsonl --configs fast_sample

Chain: where one-warp programs would get one 512-column chunk each, the launcher takes one chunk
per program of a wider tiling (H200 run 66 compared four warps over 1024 columns with one warp over
512 only). Every program pays the same dependent chain (ids, gathers, its chunk of row a, the
arrival), and the last one the emit, whose reductions and scans cross warps unless the program is
one warp. `--configs tilings` (run 146) times eight (chunk, warps) tilings at B = 1 and 4;
`batches` four warps over 1024 columns against two over 512 from B = 1 to 32 (run 147 timed them
with and without speculative row loads, since dropped: the patch and the script it ran are in
benchmarks/results/runs/2026-12-01-run147-chain-speculative-rows/); `b1` the same two at B = 1 only
(run 149); `b1_spans` programs of 1-8 chunks at B = 1 (run 196). A chain tiling changes only the
float64 summation order, so outputs differ from the default's only where a uniform sits within
rounding of a CDF boundary.

fast_sample (`--configs fast_sample`): at (1, 151936) the launcher takes one-warp programs over one
1024-token tile each (149 chunks, each drawing its token in its best group, the last to arrive
merging the candidates in one warp); issue 5's target there is 8 µs and zero_pause reads 8.0-8.1
(runs 139-149). The tilings timed against it keep the merge in the chunk kernel (candidates <= 8
per thread): more warps per tile, 512-token tiles (297 chunks), two tiles per chunk (75 chunks).
The grouped race is chunk-invariant: outputs must equal the default's bit for bit.

Each configuration is timed on the issue's inputs (benchmarks/inputs.py) with the harness's timers
(do_bench median, CUDA-graph replay of the same inputs: `graph_us`) and one call after do_bench's
256 MB zero_ flush plus a 100 µs device pause (`zero_pause_us`, benchmarks/diagnostics/
ab_device_time.py), rounds interleaved so drift hits every configuration alike, outputs compared
with the default configuration's (`equal_to_default`). One JSON line per (round, case, configuration).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

# chain: (block_v, num_warps), one chunk per program, or (block_v, num_warps, chunks per program);
# fast_sample: (block_v, tiles per chunk, num_warps)
CONFIGS = {
    "tilings": [(1024, 4), (1024, 2), (1024, 1), (512, 1), (512, 2), (2048, 4), (2048, 8), (256, 1)],
    "batches": [(1024, 4), (512, 2)],
    "b1": [(1024, 4), (512, 2)],
    # (block_v, num_warps, chunks per program): spans of several chunks, whose emit locates its chunk
    # by span (session 30) where one chunk per program scans every chunk sum (run 196)
    "b1_spans": [(512, 2, 1), (512, 1, 2), (512, 1, 4), (512, 1, 8), (512, 2, 2), (256, 1, 2), (256, 1, 4),
                 (1024, 4, 1)],
    "fast_sample": [(1024, 1, 1), (1024, 1, 2), (1024, 1, 4), (512, 1, 2), (512, 1, 4), (1024, 2, 1),
                    (1024, 2, 2)],
}  # fmt: skip


def chunks_per_program(config: tuple) -> int:
    """A chain config's chunks per program: its third element, one where it has two."""
    return config[2] if len(config) > 2 else 1


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
    "b1_spans": [("chain", 1, 4, 32000, "float32"), ("chain", 1, 4, 32000, "bfloat16"),
                 ("chain_onehot", 1, 4, 32000, "float32")],
    "fast_sample": [("fast_sample", 1, 0, 151936, "float32"), ("fast_sample", 1, 0, 151936, "bfloat16"),
                    ("fast_sample", 2, 0, 151936, "float32"), ("fast_sample", 1, 0, 128256, "float32")],
}  # fmt: skip


def chain_calls(x: dict, configs: list):
    """(fields, call) per chain configuration on inputs x, and the default launch's outputs."""
    from specsample.kernels import chain

    p, ids, q, u = x["target_probs"], x["draft_token_ids"], x.get("draft_probs"), x["uniforms"]
    calls = []
    for config in configs:
        cfg = dict(block_v=config[0], num_warps=config[1], tiles=chunks_per_program(config))
        calls.append((dict(cfg),
                      lambda c=cfg: chain._launch(p, ids, q, None, u, None, None, **c)))  # fmt: skip
    return calls, chain._launch(p, ids, q, None, u, None, None)


def fast_sample_calls(x: dict, configs: list):
    """(fields, call) per grouped-race tiling on inputs x (the token drawn in each chunk), and the
    default launch's (sample_p, sample_index)."""
    from specsample.kernels import gumbel

    probs, seeds, offsets = x["probs"], x["seeds"], x["offsets"]
    calls = []
    for block_v, tiles, warps in configs:
        tiling = gumbel.RaceTiling(1, block_v, tiles, warps, grouped=True, pick_in_chunk=True)
        calls.append((dict(block_v=block_v, tiles_per_chunk=tiles, num_warps=warps),
                      lambda t=tiling: gumbel._fast_sample(probs, 1, None, seeds, offsets, tiling=t)[:2]))  # fmt: skip
    return calls, gumbel.fast_sample(probs, seeds=seeds, offsets=offsets)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--configs", choices=sorted(CONFIGS), default="batches")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    from benchmarks.diagnostics.ab_device_time import timed_configuration, zero_pause_flush
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from benchmarks.timing import CudaTimer

    timer = CudaTimer()
    flush = zero_pause_flush()
    build = fast_sample_calls if args.configs == "fast_sample" else chain_calls
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for kernel, b, k, v, dtype in CASES[args.configs]:
                case = Case(kernel, b, k, v, dtype)
                calls, default = build(make_inputs(case, "cuda"), CONFIGS[args.configs])
                for fields, call in calls:
                    row = dict(round=rnd, case=case.label, **fields,
                               **timed_configuration(call, default, timer, flush))  # fmt: skip
                    out.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
