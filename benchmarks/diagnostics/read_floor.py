"""What reading an issue shape's must-read bytes costs on this GPU, under the harness's own timers.

    python3 benchmarks/diagnostics/read_floor.py --out read_floor.jsonl

The issues' floor is must-read bytes / copy bandwidth (benchmarks/floors.py), which leaves out the
fixed cost every kernel pays: launch, ramp-up, the tail, and under do_bench the cold L2 full of the
flush's dirty lines. This times kernels that do nothing but read those bytes, with the harness's
timers (benchmarks/timing.py: do_bench median with its L2 flush, and CUDA-graph replays over rotated
copies), so each issue target can be read against what a pure read achieves in the same process:
- `empty`: one program that does nothing (the timers' fixed cost);
- `read_1w`: one-warp programs, 1024-element tiles x 4 per program, evict_first loads, a row sum
  per program (the layout of our streaming kernels);
- `read_4w`: four-warp programs, one 4096-element tile each;
- `torch_sum`: `x.sum(dim=1)` (PyTorch's tuned reduction).
Inputs are [rows, V] in the case's dtype with rows = must-read bytes / (V * itemsize): the same bytes,
the same row length. One JSON line per (case, reader), plus the copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from benchmarks.floors import DTYPE_BYTES, floor_us, must_read_bytes  # noqa: E402
from benchmarks.machine import l2_cache_bytes  # noqa: E402
from benchmarks.targets import TARGETS  # noqa: E402
from benchmarks.timing import CudaTimer, choose_copies, measure_copy_bandwidth_cuda  # noqa: E402
from specsample.kernels._row_loads import load_once  # noqa: E402


@triton.jit
def _empty_kernel(out_ptr):
    pass


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, V, stride, BLOCK: tl.constexpr, TILES: tl.constexpr):
    # x [rows, V]; grid (rows, chunks of TILES * BLOCK); out [rows, chunks] fp32: the chunk's sum
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in range(TILES):
        cols = chunk * (TILES * BLOCK) + t * BLOCK + lane
        acc += load_once(x_ptr + row * stride + cols, cols < V, 0.0).to(tl.float32)
    tl.store(out_ptr + row * tl.num_programs(1) + chunk, tl.sum(acc, axis=0))


READ_TILINGS = {"read_1w": (1024, 4, 1), "read_4w": (4096, 1, 4)}  # (BLOCK, TILES, warps)


def row_sum_reader(x: torch.Tensor, name: str):
    """(call, out): `call()` writes the chunk sums of x's rows to out [rows, chunks] (fp32) with the
    READ_TILINGS[name] tiling."""
    rows, vocab = x.shape
    block, tiles, warps = READ_TILINGS[name]
    chunks = triton.cdiv(vocab, block * tiles)
    out = torch.empty(rows, chunks, device=x.device)
    call = lambda: _row_sum_kernel[(rows, chunks)](x, out, vocab, x.stride(0), BLOCK=block, TILES=tiles,  # noqa: E731
                                                   num_warps=warps)  # fmt: skip
    return call, out


def _reader(name: str, x: torch.Tensor):
    if name == "empty":
        out = torch.empty(1, device=x.device)
        return lambda: _empty_kernel[(1,)](out)
    if name == "torch_sum":
        return lambda: x.sum(dim=1)
    return row_sum_reader(x, name)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    args = ap.parse_args(argv)
    bandwidth = measure_copy_bandwidth_cuda()
    timer = CudaTimer()
    cases = sorted({t.case for t in TARGETS})
    with open(args.out, "a") as out:
        out.write(json.dumps(dict(copy_bandwidth_tb_s=bandwidth / 1e12)) + "\n")
        for case in cases:
            itemsize = DTYPE_BYTES[case.dtype]
            nbytes = must_read_bytes(case)
            rows = nbytes // (case.V * itemsize)
            copies = choose_copies(nbytes, nbytes, l2_cache_bytes(), max_alloc_bytes=2 << 30)
            dtype = getattr(torch, case.dtype)
            xs = [torch.rand(rows, case.V, device="cuda").to(dtype) for _ in range(copies)]
            for name in ("empty", "read_1w", "read_4w", "torch_sum"):
                timing = timer.time([_reader(name, x) for x in xs])
                row = dict(case=case.label, reader=name, bytes=nbytes, floor_us=floor_us(case, bandwidth),
                           median_us=timing.median_us, graph_us=timing.graph_us)  # fmt: skip
                out.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
            del xs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
