"""The fastest pure read of an issue shape's must-read bytes that we can find, under do_bench.

    python3 benchmarks/diagnostics/read_sweep.py --out read_sweep.jsonl [--case LABEL ...]

`read_floor.py` times three fixed readers. A target that lies below even those readers' time says
little unless no reader does better, so this sweeps many: the same bytes as read_floor ([rows, V] in
the case's dtype, rows = must-read bytes / (V * itemsize)), read by
- `rows`: a chunk sum per (row, chunk) program, BLOCK elements per tile, TILES tiles per program;
- `flat`: the buffer as one vector, BLOCK x TILES elements per program (no row structure at all);
- `persistent`: `programs_per_sm` x SMs programs, each striding over the flat buffer's blocks;
each at 1, 2, 4 and 8 warps, evict-first or normal loads, plus `torch_sum` (x.sum(dim=1)),
`torch_amax` and an `empty` kernel (the timer's fixed cost). Every reader writes a value that
depends on every element it reads, so no load can be dropped.

Timer: `triton.testing.do_bench` median (the issues' timer, with its 256 MB zero_ flush before every
call), as benchmarks/timing.py's CudaTimer runs it: the sweep at a 50 ms rep budget, then the
fastest readers (and `empty`) again three times each at do_bench's default budget. One JSON line per
(case, reader), and a line per case with the fastest reader's confirmed median.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from benchmarks.floors import DTYPE_BYTES, floor_us, must_read_bytes  # noqa: E402
from benchmarks.targets import TARGETS  # noqa: E402
from benchmarks.timing import CudaTimer, measure_copy_bandwidth_cuda  # noqa: E402
from specsample.kernels._row_loads import load_once  # noqa: E402

DEFAULT_CASES = (
    "fast_sample-B64-K0-V151936-float32",
    "chain-B64-K4-V151936-float32",
    "chain-B16-K4-V128256-float32",
    "logits_onehot-B64-K4-V151936-bfloat16",
)


@triton.jit
def _empty_kernel(out_ptr):
    pass


@triton.jit
def _read(pointers, mask, FIRST: tl.constexpr):
    """The loaded values as float32 (0 where masked): evict-first loads (`load_once`, as our kernels
    stream rows) or plain ones."""
    if FIRST:
        return load_once(pointers, mask, 0.0).to(tl.float32)
    return tl.load(pointers, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def _rows_kernel(x_ptr, out_ptr, V, stride, BLOCK: tl.constexpr, TILES: tl.constexpr, FIRST: tl.constexpr):
    # x [rows, V]; grid (rows, cdiv(V, BLOCK * TILES)); out [rows, chunks] fp32: each chunk's sum
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in tl.static_range(TILES):
        cols = chunk * (TILES * BLOCK) + t * BLOCK + lane
        acc += _read(x_ptr + row * stride + cols, cols < V, FIRST)
    tl.store(out_ptr + row * tl.num_programs(1) + chunk, tl.sum(acc, axis=0))


@triton.jit
def _flat_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr, TILES: tl.constexpr, FIRST: tl.constexpr):
    # x: N contiguous elements; program i sums elements [i BLOCK TILES, (i + 1) BLOCK TILES)
    pid = tl.program_id(0).to(tl.int64)
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in tl.static_range(TILES):
        offs = pid * (TILES * BLOCK) + t * BLOCK + lane
        acc += _read(x_ptr + offs, offs < N, FIRST)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def _persistent_kernel(x_ptr, out_ptr, N, num_blocks, BLOCK: tl.constexpr, FIRST: tl.constexpr):
    # program i sums blocks i, i + P, i + 2P, ... of BLOCK elements (P = the grid)
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK).to(tl.int64)
    acc = tl.zeros((BLOCK,), tl.float32)
    for b in tl.range(pid, num_blocks, tl.num_programs(0)):
        offs = b * BLOCK + lane  # b * BLOCK < N + BLOCK < 2^31 for the issue shapes
        acc += _read(x_ptr + offs, offs < N, FIRST)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


def _rows_reader(x, block, tiles, warps, first):
    rows, vocab = x.shape
    chunks = triton.cdiv(vocab, block * tiles)
    out = torch.empty(rows * chunks, device=x.device)
    meta = dict(BLOCK=block, TILES=tiles, FIRST=first, num_warps=warps)
    return (lambda: _rows_kernel[(rows, chunks)](x, out, vocab, x.stride(0), **meta)), out


def _flat_reader(x, block, tiles, warps, first):
    n = x.numel()
    programs = triton.cdiv(n, block * tiles)
    out = torch.empty(programs, device=x.device)
    meta = dict(BLOCK=block, TILES=tiles, FIRST=first, num_warps=warps)
    return (lambda: _flat_kernel[(programs,)](x, out, n, **meta)), out


def _persistent_reader(x, block, programs, warps, first):
    n = x.numel()
    num_blocks = triton.cdiv(n, block)
    programs = min(programs, num_blocks)
    out = torch.empty(programs, device=x.device)
    meta = dict(BLOCK=block, FIRST=first, num_warps=warps)
    return (lambda: _persistent_kernel[(programs,)](x, out, n, num_blocks, **meta)), out


def readers(x: torch.Tensor, sms: int, per_thread=(8, 16, 32), tiles_options=(1, 2, 4, 8)):
    """(name, call, out) for every reader of x [rows, V] (module docstring). For the Triton readers
    `out` holds partial sums whose total is x's sum once `call()` has run; None for the others."""
    empty_out = torch.empty(1, device=x.device)
    yield "empty", (lambda: _empty_kernel[(1,)](empty_out)), None
    yield "torch_sum", (lambda: x.sum(dim=1)), None
    yield "torch_amax", (lambda: x.amax(dim=1)), None
    for first in (True, False):
        policy = "ef" if first else "normal"
        for warps in (1, 2, 4, 8):
            for elements in per_thread:
                block = 32 * warps * elements
                for tiles in tiles_options:
                    tiling = f"{policy}-w{warps}-b{block}-t{tiles}"
                    yield (f"rows-{tiling}", *_rows_reader(x, block, tiles, warps, first))
                    yield (f"flat-{tiling}", *_flat_reader(x, block, tiles, warps, first))
                for per_sm in (1, 2, 4, 8, 16):
                    call, out = _persistent_reader(x, block, per_sm * sms, warps, first)
                    yield f"persistent-{policy}-w{warps}-b{block}-p{per_sm}", call, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--case", action="append", help=f"case label (repeatable); default {DEFAULT_CASES}")
    ap.add_argument("--rep-ms", type=int, default=50, help="do_bench rep budget of the sweep (ms)")
    ap.add_argument("--confirm", type=int, default=3, help="fastest readers re-timed at do_bench's budget")
    args = ap.parse_args(argv)
    by_label = {t.case.label: t.case for t in TARGETS}
    labels = args.case or list(DEFAULT_CASES)
    unknown = [label for label in labels if label not in by_label]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {sorted(by_label)}")
    sweep, confirm = CudaTimer(), CudaTimer()
    sweep.do_bench_rep_ms = args.rep_ms
    bandwidth = measure_copy_bandwidth_cuda()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with open(args.out, "a") as out:
        out.write(json.dumps(dict(copy_bandwidth_tb_s=bandwidth / 1e12, sms=sms)) + "\n")
        for label in labels:
            case = by_label[label]
            nbytes = must_read_bytes(case)
            rows = nbytes // (case.V * DTYPE_BYTES[case.dtype])
            x = torch.rand(rows, case.V, device="cuda").to(getattr(torch, case.dtype))
            timed = []
            calls = {}
            for name, call, _ in readers(x, sms):
                call()
                torch.cuda.synchronize()
                us = sweep.do_bench_us(call)
                calls[name] = call
                row = dict(case=label, reader=name, bytes=nbytes, floor_us=floor_us(case, bandwidth),
                           rep_ms=args.rep_ms, median_us=us)  # fmt: skip
                out.write(json.dumps(row) + "\n")
                timed.append((us, name))
            fastest = sorted(t for t in timed if t[1] != "empty")[: args.confirm]
            confirmed = []
            for _, name in fastest:
                readings = [confirm.do_bench_us(calls[name]) for _ in range(3)]
                confirmed.append((statistics.median(readings), name, readings))
            empty = [confirm.do_bench_us(calls["empty"]) for _ in range(3)]
            best = min(confirmed)
            summary = dict(case=label, bytes=nbytes, floor_us=floor_us(case, bandwidth), fastest=best[1],
                           fastest_us=best[0], fastest_readings_us=best[2],
                           confirmed={name: readings for _, name, readings in confirmed},
                           empty_readings_us=empty, readers=len(timed))  # fmt: skip
            out.write(json.dumps(summary) + "\n")
            print(json.dumps(summary), flush=True)
            del x, calls
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
