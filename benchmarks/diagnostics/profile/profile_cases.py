"""Kernels to profile under Nsight Compute, and the host (Python) cost of each eager call.

    ncu --clock-control none --profile-from-start off ... python3 profile_cases.py kernels [PREFIXES]
    python3 profile_cases.py host          # cProfile of eager calls: where the launch time goes

`kernels` compiles every case first (outside the profiled range), then runs each case once between
cudaProfilerStart/Stop, so ncu sees exactly the kernels listed in `cases.json` in that order.
Shapes are the issue targets' engine sizes (fp32): chain (64, 4, 151936), fast_sample (64, 151936)
and (256, 128256), logits classic (64, 4, 151936).
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "ci", "gpu"))

from gpu_common import chain_perf_inputs  # noqa: E402  (ci/gpu: the inputs chain_gpu.py times)

from specsample.kernels import chain as kc  # noqa: E402
from specsample.kernels import gumbel as kg  # noqa: E402
from specsample.kernels import logits as kl  # noqa: E402

OUT = os.environ.get("OUT", "./out")
DEV = "cuda"


def cases(gen):
    """name -> zero-argument callable launching the kernel(s) of that case."""
    out = {}
    p, x, q, u = chain_perf_inputs(64, 4, 151936, torch.float32, gen)
    out["chain default (64,4,151936)"] = lambda: kc._launch(p, x, q, None, u, None, None)
    # session 10's default tiling (four warps, four 1024-column chunks per program), for comparison
    out["chain 1024x4x4 (64,4,151936)"] = lambda: kc._launch(p, x, q, None, u, None, None, block_v=1024,
                                                             num_warps=4, tiles=4, num_stages=3)  # fmt: skip
    pb, xb, qb, ub = chain_perf_inputs(64, 4, 151936, torch.bfloat16, gen)
    out["chain default bf16 (64,4,151936)"] = lambda: kc._launch(pb, xb, qb, None, ub, None, None)
    p2, x2, q2, u2 = chain_perf_inputs(16, 4, 128256, torch.float32, gen)
    out["chain default (16,4,128256)"] = lambda: kc._launch(p2, x2, q2, None, u2, None, None)
    for batch, vocab in ((64, 151936), (256, 128256)):
        probs = torch.softmax(torch.randn(batch, vocab, generator=gen, device=DEV) * 3.0, -1)
        seeds = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV)
        offsets = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV)
        out[f"fast_sample ({batch},{vocab})"] = lambda probs=probs, seeds=seeds, offsets=offsets: (
            kg.fast_sample(probs, seeds=seeds, offsets=offsets)
        )
    batch, num_k, vocab = 64, 4, 151936
    lg = torch.randn(batch, num_k + 1, vocab, generator=gen, device=DEV) * 3.0
    dl = lg[:, :num_k] + torch.randn(batch, num_k, vocab, generator=gen, device=DEV)
    xl = torch.randint(0, vocab, (batch, num_k), generator=gen, device=DEV)
    args = dict(target_logits=lg, draft_token_ids=xl, draft_logits=dl,
                temperature=torch.ones(batch, device=DEV),
                seeds=torch.randint(0, 2**62, (batch,), generator=gen, device=DEV),
                offsets=torch.randint(0, 2**62, (batch,), generator=gen, device=DEV))  # fmt: skip
    out["logits default (64,4,151936)"] = lambda: kl.rejection_sample_logits(**args)
    out["logits lane_i32 (64,4,151936)"] = lambda: kl.rejection_sample_logits(
        **args, _config={"lane_i32": True}
    )
    # the bf16 calls furthest from issue 6's 70% (session 12): classic and one-hot drafts, and the
    # one-hot stats pass without its tile loaded ahead
    half = dict(args, target_logits=lg.bfloat16(), draft_logits=dl.bfloat16())
    out["logits bf16 (64,4,151936)"] = lambda: kl.rejection_sample_logits(**half)
    one_hot = dict(half, draft_logits=None)
    out["logits one-hot bf16 (64,4,151936)"] = lambda: kl.rejection_sample_logits(**one_hot)
    out["logits one-hot bf16 no-prefetch (64,4,151936)"] = lambda: kl.rejection_sample_logits(
        **one_hot, _config={"stats_prefetch": False}
    )
    # the latency regime (issue 4's (1, 4, 32000), issue 5's (1, 151936)): where a B = 1 call waits
    # (last, so the cases above keep the inputs earlier runs profiled)
    p1, x1, q1, u1 = chain_perf_inputs(1, 4, 32000, torch.float32, gen)
    out["chain default (1,4,32000)"] = lambda: kc._launch(p1, x1, q1, None, u1, None, None)
    probs1 = torch.softmax(torch.randn(1, 151936, generator=gen, device=DEV) * 3.0, -1)
    keys1 = torch.randint(0, 2**62, (2, 1), generator=gen, device=DEV)
    out["fast_sample (1,151936)"] = lambda: kg.fast_sample(probs1, seeds=keys1[0], offsets=keys1[1])
    return out


def kernels(only: str = "") -> None:
    """Every case, or those whose name starts with one of the comma-separated prefixes `only`."""
    gen = torch.Generator(DEV).manual_seed(0)
    todo = {k: v for k, v in cases(gen).items() if not only or k.startswith(tuple(only.split(",")))}
    for fn in todo.values():  # compile and warm outside the profiled range
        fn()
        fn()
    torch.cuda.synchronize()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(list(todo), f, indent=1)
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in todo.items():
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    torch.cuda.cudart().cudaProfilerStop()


def host() -> None:
    """Host time per eager call (the GPU is far from saturated at 1 row, so the CPU is the
    bottleneck): wall time over 2000 calls, then a cProfile of 500 calls (top 30 by own time)."""
    gen = torch.Generator(DEV).manual_seed(0)
    p, x, q, u = chain_perf_inputs(1, 4, 32000, torch.float32, gen)
    probs = torch.softmax(torch.randn(1, 151936, generator=gen, device=DEV), -1)
    seeds = torch.zeros(1, dtype=torch.int64, device=DEV)
    offsets = torch.zeros(1, dtype=torch.int64, device=DEV)
    calls = {
        "chain_rejection_sample (1,4,32000)": lambda: kc.chain_rejection_sample(p, x, q, uniforms=u),
        "chain _launch only": lambda: kc._launch(p, x, q, None, u, None, None),
        "fast_sample (1,151936) seeds": lambda: kg.fast_sample(probs, seeds=seeds, offsets=offsets),
        "torch.empty x4": lambda: [torch.empty(1, 5, dtype=torch.int32, device=DEV) for _ in range(4)],
    }
    report = {}
    for name, fn in calls.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(2000):
            fn()
        torch.cuda.synchronize()
        per_call = (time.perf_counter() - t0) / 2000 * 1e6
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            fn()
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
        report[name] = dict(host_us_per_call=per_call, profile=text.getvalue())
        print(f"{name}: {per_call:.1f} us per call (host wall)", flush=True)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "host_profile.json"), "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    {"kernels": kernels, "host": host}[sys.argv[1]](*sys.argv[2:])
