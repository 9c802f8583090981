"""What do_bench's dirty L2 costs a pure read, by size and load policy, and whether a pause helps.

    python3 benchmarks/diagnostics/dirty_l2.py --out dirty_l2.jsonl [--mb 4,40,150,560]

`triton.testing.do_bench` zeroes a 256 MB buffer before every timed call, which leaves the L2 full of
dirty lines: whatever the timed kernel reads must first evict them, and their write-back shares the
DRAM with its reads. This times one pass over S MB of fp32 (4-warp programs of 4096 elements, a sum
stored per program), with evict-first or normal loads, by CUDA events around the read alone after:
- `zero`: do_bench's 256 MB zero_ (L2 dirty);
- `read`: a read of the same 256 MB (L2 clean);
- `zero_pause20` / `zero_pause100`: the zero_, then a 20 / 100 µs device-side pause
  (torch.cuda._sleep) before the start event: a write-back that drained in the background would
  be gone by then; one paid on eviction would not;
- `none`: back to back (the read's own steady state; host-bound for small sizes).
Median of 60 calls each; one JSON line per (size, policy).

H200, run 96 (benchmarks/NOTES.md, session 15): the pause changes nothing, so the write-back is paid
when the read evicts the lines; it grows with the bytes read (4 MB: +0.5-0.9 µs; 40 MB: +2.2 µs
evict-first, +4.4 normal; 150 MB: +6.3 / +8.1; 560 MB: +15.3 / +8.4), and our calls pay what a pure
read of their size pays.
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

from benchmarks.diagnostics.ab_device_time import sleep_cycles_per_us, timed_after  # noqa: E402

BLOCK = 4096  # elements per program


@triton.jit
def _read_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr, EVICT_FIRST: tl.constexpr):
    # x [N] fp32; out [cdiv(N, BLOCK)] fp32: each program's sum of its BLOCK elements
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVICT_FIRST:
        v = tl.load(x_ptr + offs, mask=offs < N, other=0.0, eviction_policy="evict_first")
    else:
        v = tl.load(x_ptr + offs, mask=offs < N, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(v, axis=0))


def read_call(x: torch.Tensor, evict_first: bool):
    """(call, out): `call()` writes the per-program sums of the flat fp32 tensor x to out."""
    n = x.numel()
    out = torch.empty(triton.cdiv(n, BLOCK), device=x.device)
    call = lambda: _read_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, EVICT_FIRST=evict_first,  # noqa: E731
                                                          num_warps=4)  # fmt: skip
    return call, out


def flushes(cache: torch.Tensor) -> dict:
    """name -> what runs before each timed read (module docstring); `cache` is the 256 MB buffer."""
    cycles_per_us = sleep_cycles_per_us()
    return {
        "zero": lambda: cache.zero_(),
        "read": lambda: cache.sum(),
        "zero_pause20": lambda: (cache.zero_(), torch.cuda._sleep(int(20 * cycles_per_us))),
        "zero_pause100": lambda: (cache.zero_(), torch.cuda._sleep(int(100 * cycles_per_us))),
        "none": lambda: None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--mb", default="4,40,150,560", help="comma-separated read sizes in MB")
    args = ap.parse_args(argv)
    cache = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    ways = flushes(cache)
    with open(args.out, "a") as out:
        for mb in (int(m) for m in args.mb.split(",")):
            x = torch.randn(mb * 1024 * 1024 // 4, device="cuda")
            for evict_first in (True, False):
                call, _ = read_call(x, evict_first)
                call()
                torch.cuda.synchronize()
                row = dict(mb=mb, evict_first=evict_first,
                           **{name: round(timed_after(call, flush, 60), 2) for name, flush in ways.items()})  # fmt: skip
                out.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
            del x
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
