"""Where an eager call's host time goes, on the GPU host: cProfile of repeated calls at a target
shape (direct launch path), plus the per-call cost of the torch primitives a launcher uses.

    python3 benchmarks/host/host_profile.py [--calls 3000] > host_profile.txt

No GPU timing here: the calls are queued without a sync (except one at the end), so the numbers are
what the caller's thread spends. cProfile inflates short functions; the primitive table is timed
without it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import torch  # noqa: E402

from benchmarks.floors import Case  # noqa: E402
from benchmarks.inputs import make_inputs  # noqa: E402
from benchmarks.providers import _ours_once  # noqa: E402


def per_call_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    t = torch.empty(4, device=dev)
    prims = {
        "torch.empty(16, int32, cuda)": lambda: torch.empty(16, dtype=torch.int32, device=dev),
        "tensor.device": lambda: t.device,
        "tensor.stride()": lambda: t.stride(),
        "tensor.data_ptr()": lambda: t.data_ptr(),
        "torch.cuda.current_device()": torch.cuda.current_device,
        "torch._C._cuda_getCurrentRawStream(0)": lambda: torch._C._cuda_getCurrentRawStream(0),
        "torch.cuda.current_stream()": torch.cuda.current_stream,
        "empty python call": lambda: None,
    }
    print("primitive µs per call (10^5 calls)")
    for name, fn in prims.items():
        per_call_us(fn, 1000)
        print(f"  {name:40s} {per_call_us(fn, 100_000):7.3f}")
    for case in (Case("chain", 1, 4, 32000, "float32"), Case("fast_sample", 1, 0, 151936, "float32"),
                 Case("logits", 64, 4, 151936, "float32")):  # fmt: skip
        call = _ours_once(case, make_inputs(case, "cuda"))
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        print(f"\n{case.label}: {per_call_us(call, args.calls):.1f} µs per call (host, no profiler)")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            call()
        prof.disable()
        torch.cuda.synchronize()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
        print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
