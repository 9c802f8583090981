"""How fast the chain's stream could read, by copy mechanism: cp.async copies against TMA.

    TRITON_CACHE_DIR=/tmp/tc_stream python3 benchmarks/diagnostics/stream_mechanism.py --out s.jsonl

The chain streams row a of p and q over one-warp programs, each a span of `tiles` consecutive
512-column chunks in a software-pipelined loop (kernels/chain.py, `_launch_config`). Triton 3.6
turns those loads into `cp.async` copies (16 bytes per lane and instruction), which the launcher
compiles with the L2 evict-first policy (kernels/_copy_policy.py). Hopper's tensor memory
accelerator (TMA) copies a whole box per instruction instead, issued by one thread, completion
tracked by an mbarrier; Triton pipelines tensor-descriptor loads that way. This times, with the
chain's own grid at each issue shape, pure readers of the chain's must-read bytes ([B, V] p and q,
fp32) that differ only in the copy:
- `copies`: `load_once` in the pipelined loop, Triton's own copies (no L2 policy);
- `copies_ef`: the same, compiled with the evict-first policy (what the chain does now);
- `tma`: host-side tensor descriptors over the rows viewed as [B, V / 128, 128], one box of
  [1, 4, 128] per chunk and tensor, in the same pipelined loop;
- `tma_ef`: `tma` with `.L2::cache_hint` and an evict-first policy added to every bulk tensor copy
  (a PTX stage, as kernels/_copy_policy.py does for `cp.async`);
- `tma8_ef`: `tma_ef` with [1, 8, 128] boxes (1024 columns) and half the chunks per program.
`--scattered` adds the copy readers over row 0 of [B, K+1, V] and [B, K, V] tensors, where the
chain's rows lie. Timers as ab_device_time.py: zero_pause_us (do_bench's zero_ flush plus a pause: device time with
the flush's dirty lines), read_flush_us (a clean L2) and do_bench's median. Every reader's per-program
(sum p, sum q) must add up to torch's row sums (checked before timing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from specsample.kernels import _copy_policy  # noqa: E402
from specsample.kernels._row_loads import load_once  # noqa: E402

SHAPES = ((16, 128256), (64, 151936), (128, 128256))  # (B, V) of the chain's fp32 issue shapes
_BULK = re.compile(r"(?P<head>cp\.async\.bulk\.tensor\.[^\s]*mbarrier::complete_tx::bytes)(?P<args>\s[^;]*);")


def add_bulk_policy(ptx: str) -> str:
    """`ptx` with `.L2::cache_hint` and an evict-first policy on every bulk tensor copy
    (kernels/_copy_policy.py's rewrite, for TMA copies)."""
    return _copy_policy.add_policy(ptx, _BULK, "%bulk_evict_first")


@triton.jit
def _span_copies_kernel(p_ptr, q_ptr, out_ptr, V, sp, sq, tiles, BLOCK: tl.constexpr, STAGES: tl.constexpr,
                        VARIANT: tl.constexpr):  # fmt: skip
    # p, q [B, V] fp32, row strides sp, sq; grid (B, spans); out [B, spans, 2] fp32: (sum p, sum q) of the span
    row = tl.program_id(0).to(tl.int64)
    first = tl.program_id(1) * tiles
    lane = tl.arange(0, BLOCK)
    acc_p = tl.zeros((BLOCK,), tl.float32)
    acc_q = tl.zeros((BLOCK,), tl.float32)
    for t in tl.range(0, tiles, num_stages=STAGES):
        cols = (first + t) * BLOCK + lane
        m = cols < V
        acc_p += load_once(p_ptr + row * sp + cols, m, 0.0)
        acc_q += load_once(q_ptr + row * sq + cols, m, 0.0)
    out = out_ptr + (row * tl.num_programs(1) + tl.program_id(1)) * 2
    tl.store(out, tl.sum(acc_p, axis=0))
    tl.store(out + 1, tl.sum(acc_q, axis=0))


@triton.jit
def _span_tma_kernel(p_desc, q_desc, out_ptr, tiles, SUB: tl.constexpr, STAGES: tl.constexpr,
                     VARIANT: tl.constexpr):  # fmt: skip
    # p_desc, q_desc: [B, V / 128, 128] fp32, boxes [1, SUB, 128]; out as _span_copies_kernel
    row = tl.program_id(0)
    first = tl.program_id(1) * tiles
    acc_p = tl.zeros((1, SUB, 128), tl.float32)
    acc_q = tl.zeros((1, SUB, 128), tl.float32)
    for t in tl.range(0, tiles, num_stages=STAGES):
        c = (first + t) * SUB
        acc_p += p_desc.load([row, c, 0])
        acc_q += q_desc.load([row, c, 0])
    out = out_ptr + (row.to(tl.int64) * tl.num_programs(1) + tl.program_id(1)) * 2
    tl.store(out, tl.sum(acc_p))
    tl.store(out + 1, tl.sum(acc_q))


def readers(p, q, tiles: int, stages: int):
    """name -> (call, out) for every reader at the chain's tiling (`tiles` 512-column chunks per program).
    p, q: [B, V] with unit column stride; rows more than V apart (slices of the chain's [B, K+1, V] and
    [B, K, V] tensors, `--scattered`) get the copy readers only (a TMA box needs the [B, V / 128, 128]
    view of contiguous rows)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    b, v = p.shape
    out = {}

    def copies(variant: int):
        spans = triton.cdiv(triton.cdiv(v, 512), tiles)
        buf = torch.empty(b, spans, 2, device=p.device)

        def call():
            _span_copies_kernel[(b, spans)](p, q, buf, v, p.stride(0), q.stride(0), tiles, BLOCK=512,
                                            STAGES=stages, VARIANT=variant, num_warps=1)  # fmt: skip
            return buf

        return call, buf

    def tma(sub: int, variant: int):
        per = tiles * 4 // sub
        spans = triton.cdiv(triton.cdiv(v, 128 * sub), per)
        buf = torch.empty(b, spans, 2, device=p.device)
        pd = TensorDescriptor.from_tensor(p.view(b, v // 128, 128), [1, sub, 128])
        qd = TensorDescriptor.from_tensor(q.view(b, v // 128, 128), [1, sub, 128])

        def call():
            _span_tma_kernel[(b, spans)](
                pd, qd, buf, per, SUB=sub, STAGES=stages, VARIANT=variant, num_warps=1
            )
            return buf

        return call, buf

    out["copies"] = copies(0)
    with _copy_policy.evict_first_copies(_span_copies_kernel.__name__):
        out["copies_ef"] = copies(1)
        out["copies_ef"][0]()  # compiled under the policy
    if not (p.is_contiguous() and q.is_contiguous()):
        return out
    out["tma"] = tma(4, 0)
    with _copy_policy.rewriting_ptx(add_bulk_policy, "bulk-evict-first", _span_tma_kernel.__name__):
        out["tma_ef"] = tma(4, 1)
        out["tma_ef"][0]()
        out["tma8_ef"] = tma(8, 1)
        out["tma8_ef"][0]()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--scattered", action="store_true",
                    help="also read row 0 of [B, K+1, V] and [B, K, V] tensors (K = 4, 8 at (128, 128256)): the "
                         "chain's rows lie (K+1) V and K V elements apart, not V")  # fmt: skip
    args = ap.parse_args(argv)
    import torch

    from benchmarks.diagnostics.ab_device_time import zero_pause_flush
    from benchmarks.timing import CudaTimer
    from specsample.kernels.chain import _launch_config

    timer = CudaTimer()
    pause = zero_pause_flush()
    cache = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    with open(args.out, "a") as fh:
        for b, v in SHAPES:
            cfg = _launch_config(b, v, row_bytes=8)
            gen = torch.Generator(device="cuda").manual_seed(b)
            p = torch.rand(b, v, device="cuda", generator=gen)
            q = torch.rand(b, v, device="cuda", generator=gen)
            layouts = [("rows", p, q)]
            if args.scattered:
                k = 8 if b == 128 else 4
                p_all = torch.rand(b, k + 1, v, device="cuda", generator=gen)
                q_all = torch.rand(b, k, v, device="cuda", generator=gen)
                layouts.append(("scattered", p_all[:, 0], q_all[:, 0]))
            for layout, p, q in layouts:
                _time_readers(fh, layout, p, q, b, v, cfg, timer, pause, cache)
    return 0


def _time_readers(fh, layout, p, q, b, v, cfg, timer, pause, cache) -> None:
    """One JSON line per reader of (p, q): outputs checked against torch's sums, then timed."""
    import torch

    from benchmarks.diagnostics.ab_device_time import timed_after

    want = torch.stack([p.double().sum(1), q.double().sum(1)], dim=1)
    for name, (call, buf) in readers(p, q, cfg.tiles, cfg.num_stages).items():
        call()
        got = buf.double().sum(1)
        err = float(((got - want).abs() / want.abs()).max())
        row = dict(reader=name, layout=layout, B=b, V=v, tiles=cfg.tiles, stages=cfg.num_stages,
                   max_rel_err=err, ok=err < 1e-4)  # fmt: skip
        if row["ok"]:
            row.update(zero_pause_us=timed_after(call, pause, 100),
                       read_flush_us=timed_after(call, lambda: cache.sum(), 100),
                       do_bench_us=timer.do_bench_us(call))  # fmt: skip
        fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
