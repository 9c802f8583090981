"""What programs that only read a flag and exit cost a streaming pass, against a persistent grid.

    python3 benchmarks/diagnostics/grid_churn.py --out churn.jsonl [--rounds 2]

Question (NOTES, session 43): at one-hot bf16 (64, 4, 151936) the lazy statistics pass launches 12,160
one-warp programs (320 rows x 38 chunks of 8 x 512 tokens, position-major), of which those of rows after a
request's first rejection only read their request's flag and exit; reading 38% fewer rows left the call's
time unchanged (run 240). If such programs cost the pass time of their own (the SMs launching and
retiring them), a grid that visits the same items from fewer, looping programs would skip them for a
load each. This times a bare model of the pass, not the pass: every program (or item) loads its row's
flag and, where the flag is clear, reads its chunk (TILES tiles of BLOCK tokens, evict-first) and stores
the chunk's sum; rows are position-major as in the pass.
Configurations (bf16, [B (K+1), V], B = 64, K = 4, V = 151936 unless --case gives another):
- `all_read`: the full grid, no flag set (every row read);
- `skip_grid`: the full grid, the flags of positions >= 2 set (rows read: positions 0 and 1);
- `read_only_grid`: a grid of only those rows' programs (what skip_grid reads, without its skipping
  programs): skip_grid - read_only_grid is what the exiting programs cost;
- `persistent_N`: skip_grid's items visited by N x SMs looping one-warp programs (item = pid + k N SMs),
  each item's flag loaded one item ahead;
- `skip_grid_arrive`, `persistent_N_arrive`: the same, every item (read or skipped) then arriving as the
  lazy pass's programs do (`_arrive`: the row's draft id, the logit it indexes, an acq_rel count on the
  row's own line), so that a skipped item costs its program the pass's dependent round trips.
- `all_read_arrive`, `skip_grid_read_arrive`: the grid with only the read programs arriving (the lazy pass since
  f936190: a skipped program reads its flag and exits), every row read / positions >= 2 flagged;
- `coarse_tail_C`, `coarse_tail_C_all_read`: the same items and arrivals, but the rows of positions >= 2 launched as
  programs of C chunks each (a flagged row costs cdiv(chunks, C) programs, not one per chunk; a read row's program
  reads its C chunks one after another), positions >= 2 flagged / every row read.
Timers: benchmarks.timing.CudaTimer (do_bench median with the 256 MB flush, CUDA-graph replays over two
input copies). One JSON line per (round, configuration).
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

from benchmarks.timing import CudaTimer  # noqa: E402
from specsample.kernels._row_loads import load_once  # noqa: E402


@triton.jit
def _chunk_sum(x_ptr, out_ptr, item, V, NC, BLOCK: tl.constexpr, TILES: tl.constexpr):
    row = (item // NC).to(tl.int64)
    chunk = item % NC
    lane = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for t in range(TILES):
        cols = chunk * (TILES * BLOCK) + t * BLOCK + lane
        acc += load_once(x_ptr + row * V + cols, cols < V, 0.0).to(tl.float32)
    tl.store(out_ptr + item, tl.sum(acc, axis=0))


@triton.jit
def _arrive(x_ptr, ids_ptr, cnt_ptr, out_ptr, item, V, NC):
    # the lazy pass's arrival, as every program of a row makes it (read or skipped): the row's draft id,
    # the logit it indexes, then an acq_rel count on the row's own 128-byte line; the last of the row's
    # NC programs stores the gathered logit and resets the count
    row = (item // NC).to(tl.int64)
    x = tl.load(ids_ptr + row)
    g = tl.load(x_ptr + row * V + x).to(tl.float32)
    old = tl.atomic_add(cnt_ptr + row * 32, 1, sem="acq_rel")
    if old == NC - 1:
        tl.atomic_xchg(cnt_ptr + row * 32, 0, sem="relaxed")
        tl.store(out_ptr + item, g)


@triton.jit
def _grid_kernel(x_ptr, flag_ptr, out_ptr, ids_ptr, cnt_ptr, V, NC, BLOCK: tl.constexpr, TILES: tl.constexpr,
                 ARRIVE: tl.constexpr, ARRIVE_SKIPPED: tl.constexpr = True):  # fmt: skip
    # x [rows, V]; flag [rows] int32 (1: skip the row); out [rows * NC] fp32; one program per (row, chunk)
    # of the first rows (the grid's size says how many); ARRIVE: ids [rows] int64, cnt [rows * 32] int32
    # (zero between calls); ARRIVE_SKIPPED False: only the programs that read their chunk arrive
    item = tl.program_id(0)
    read = tl.load(flag_ptr + item // NC) == 0
    if read:
        _chunk_sum(x_ptr, out_ptr, item, V, NC, BLOCK, TILES)
    if ARRIVE:
        if ARRIVE_SKIPPED:  # (constexpr and tensor kept apart: no `or` across them in Triton's frontend)
            _arrive(x_ptr, ids_ptr, cnt_ptr, out_ptr, item, V, NC)
        elif read:
            _arrive(x_ptr, ids_ptr, cnt_ptr, out_ptr, item, V, NC)


@triton.jit
def _coarse_tail_kernel(x_ptr, flag_ptr, out_ptr, ids_ptr, cnt_ptr, V, NC, HEAD_ROWS, PER_ROW,
                        BLOCK: tl.constexpr, TILES: tl.constexpr, C: tl.constexpr):  # fmt: skip
    # as _grid_kernel with ARRIVE and ARRIVE_SKIPPED False for the first HEAD_ROWS rows (a program per chunk);
    # the later rows get PER_ROW = cdiv(NC, C) programs each, a program reading and arriving for up to C chunks
    pid = tl.program_id(0)
    head = HEAD_ROWS * NC
    t = tl.maximum(pid - head, 0)
    row = tl.where(pid < head, pid // NC, HEAD_ROWS + t // PER_ROW)
    first = tl.where(pid < head, pid, row * NC + (t % PER_ROW) * C)
    n = tl.where(pid < head, 1, tl.minimum(C, NC - (t % PER_ROW) * C))
    if tl.load(flag_ptr + row) == 0:
        for i in range(n):
            _chunk_sum(x_ptr, out_ptr, first + i, V, NC, BLOCK, TILES)
            _arrive(x_ptr, ids_ptr, cnt_ptr, out_ptr, first + i, V, NC)


@triton.jit
def _persistent_kernel(x_ptr, flag_ptr, out_ptr, ids_ptr, cnt_ptr, V, NC, ITEMS, BLOCK: tl.constexpr,
                       TILES: tl.constexpr, ARRIVE: tl.constexpr):  # fmt: skip
    # the same items as _grid_kernel, item = pid + k * num_programs; the next item's flag loaded ahead
    nprog = tl.num_programs(0)
    item = tl.program_id(0)
    flag = tl.load(flag_ptr + item // NC, mask=item < ITEMS, other=1)
    while item < ITEMS:
        nxt = item + nprog
        flag_next = tl.load(flag_ptr + nxt // NC, mask=nxt < ITEMS, other=1)
        if flag == 0:
            _chunk_sum(x_ptr, out_ptr, item, V, NC, BLOCK, TILES)
        if ARRIVE:
            _arrive(x_ptr, ids_ptr, cnt_ptr, out_ptr, item, V, NC)
        item = nxt
        flag = flag_next


def configurations(B: int, K: int, V: int, dtype: torch.dtype, block: int, tiles: int):
    rows = B * (K + 1)
    nc = triton.cdiv(V, block * tiles)
    xs = [torch.randn(rows, V, device="cuda").to(dtype) for _ in range(2)]
    out = torch.empty(rows * nc, device="cuda", dtype=torch.float32)
    none = torch.zeros(rows, device="cuda", dtype=torch.int32)
    late = torch.zeros(rows, device="cuda", dtype=torch.int32)
    late[2 * B :] = 1  # position-major: rows of positions >= 2
    ids = torch.randint(0, V, (rows,), device="cuda")
    cnt = torch.zeros(rows * 32, device="cuda", dtype=torch.int32)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kw = dict(BLOCK=block, TILES=tiles, num_warps=1)

    def grid(flag, nrows, arrive=False, arrive_skipped=True):
        n = nrows * nc
        return [lambda x=x: _grid_kernel[(n,)](x, flag, out, ids, cnt, V, nc, ARRIVE=arrive,
                                               ARRIVE_SKIPPED=arrive_skipped, **kw) for x in xs]  # fmt: skip

    def coarse_tail(flag, c):
        per_row = triton.cdiv(nc, c)
        n = 2 * B * nc + (rows - 2 * B) * per_row
        return [lambda x=x: _coarse_tail_kernel[(n,)](x, flag, out, ids, cnt, V, nc, 2 * B, per_row, C=c, **kw)
                for x in xs]  # fmt: skip

    def persistent(per_sm, arrive=False):
        return [lambda x=x: _persistent_kernel[(per_sm * sms,)](x, late, out, ids, cnt, V, nc, rows * nc,
                                                                ARRIVE=arrive, **kw) for x in xs]  # fmt: skip

    confs = {
        "all_read": grid(none, rows),
        "skip_grid": grid(late, rows),
        "read_only_grid": grid(none, 2 * B),
    }
    for per_sm in (8, 16, 32):
        confs[f"persistent_{per_sm}"] = persistent(per_sm)
    confs["skip_grid_arrive"] = grid(late, rows, True)
    for per_sm in (16, 32):
        confs[f"persistent_{per_sm}_arrive"] = persistent(per_sm, True)
    confs["all_read_arrive"] = grid(none, rows, True, False)
    confs["skip_grid_read_arrive"] = grid(late, rows, True, False)
    for c in (4, nc):
        confs[f"coarse_tail_{c}"] = coarse_tail(late, c)
        confs[f"coarse_tail_{c}_all_read"] = coarse_tail(none, c)
    return confs, dict(rows=rows, chunks=nc, programs=rows * nc, sms=sms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--case", default="64:4:151936:bfloat16", metavar="B:K:V:DTYPE")
    ap.add_argument("--block", type=int, default=512)
    ap.add_argument("--tiles", type=int, default=8)
    args = ap.parse_args(argv)
    b, k, v, dt = args.case.split(":")
    confs, shape = configurations(int(b), int(k), int(v), getattr(torch, dt), args.block, args.tiles)
    timer = CudaTimer()
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for name, calls in confs.items():
                t = timer.time(calls)
                graph = None if t.graph_us is None else round(t.graph_us, 2)
                row = dict(round=rnd, config=name, case=args.case, median_us=round(t.median_us, 2),
                           graph_us=graph, **shape)  # fmt: skip
                out.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
