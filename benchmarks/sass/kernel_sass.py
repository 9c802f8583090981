"""Offline SASS of our streaming kernels for sm_90 (H100/H200), no GPU needed: registers and the
instruction mix of each loop, per element. A prediction tool for benchmarks/NOTES.md; every speed
claim still comes from the H200.

    python benchmarks/sass/kernel_sass.py chain [--block-v 1024] [--warps 4] [--stages 3] [--tiles 4]
                                               [--flag NAME=VALUE ...]
    python benchmarks/sass/kernel_sass.py race [--block-v 2048] [--warps 4]
    python benchmarks/sass/kernel_sass.py logits-pick --warps 4 --flag GB=1024 --flag PARTS=1 --flag GW=256 \
        --flag FAST_LOG=1 --flag PDL=0   # the one-hot pick at V = 151936 (594 groups in one slab, session 45)
    python benchmarks/sass/kernel_sass.py chain --block-v 512 --warps 1 --tiles 8 --stages 2 \
        --flag EMIT_LANES=64 --maxnreg 96        # the chain's wide grid at V = 151936 (session 13)

chain: `_chain_kernel`, fp32 p and q, unit vocabulary stride, K = 4, classic drafts, its pipelined
copies given the L2 evict-first policy as the launcher compiles them (`--flag EVICT_FIRST_COPIES=0`:
Triton's own copies). race:
fast_sample's `_race_chunk_kernel`, fp32 probs, one sample. Compiled with the importable Triton (its
PTX, then the ptxas bundled with it). The H200 runs Triton 3.6, and versions differ in what matters
here (session 14: 3.9 keeps the L2 evict-first policy on pipelined copies and compiles the chain's
wide grid without spills, 3.6 does neither), so compile with 3.6 for figures that should match the
device: `pip install --target /tmp/t36 triton==3.6.0`, then `PYTHONPATH=/tmp/t36 python ...`.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import os
import re
import subprocess
import sys
import tempfile
from contextlib import nullcontext

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from specsample.kernels import _copy_policy  # noqa: E402
from specsample.kernels._launch import next_pow2  # noqa: E402
from specsample.kernels.chain import _chain_kernel  # noqa: E402
from specsample.kernels.gumbel import _race_chunk_kernel  # noqa: E402
from specsample.kernels.logits import (  # noqa: E402
    _logits_accept_kernel,
    _logits_pick_kernel,
    _logits_race_kernel,
    _logits_stats_kernel,
)

PTR_TYPES = dict(p_ptr="*fp32", q_ptr="*fp32", x_ptr="*i64", n_ptr="*i64", u_ptr="*fp32", seed_ptr="*i64",
                 offset_ptr="*i64", partial_ptr="*fp64", arrivals_ptr="*i32", tokens_ptr="*i32",
                 num_accepted_ptr="*i32", fallback_ptr="*i8", valid_ptr="*i8")  # fmt: skip
DIVISIBLE = ("sp_b", "sp_k", "sq_b", "sq_k", "V")  # what Triton's specialisation sees at V = 151936


def bin_dir() -> str:
    return os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")


RACE_PTR_TYPES = dict(probs_ptr="*fp32", seeds_ptr="*i64", offsets_ptr="*i64", part_score_ptr="*fp32",
                      part_index_ptr="*i32", arrivals_ptr="*i32", sample_p_ptr="*fp32",
                      sample_index_ptr="*i64", score_ptr="*fp32")  # fmt: skip


LOGITS_PTR_TYPES = dict(x_ptr="*i64", n_ptr="*i64", seed_ptr="*i64", offset_ptr="*i64", targ_ptr="*i32",
                        best_idx_ptr="*i32", arrivals_ptr="*i32", tokens_ptr="*i32", num_accepted_ptr="*i32",
                        fallback_ptr="*i1", valid_ptr="*i1", row_i_ptr="*i32", state_ptr="*i32",
                        cnt_ptr="*i32", tau_ptr="*i64")  # fmt: skip


def compile_kernel(
    kernel_name: str,
    block_v: int,
    warps: int,
    stages: int,
    tiles: int,
    flags: dict,
    logits_dtype: str = "fp32",
    maxnreg: int | None = None,
):
    """Triton's compiled kernel for sm_90 (its `asm["ptx"]`, no ptxas needed); logits kernels: logits
    of `logits_dtype`. `flags` overrides constexprs."""
    if kernel_name == "chain":
        fn, ptr_types, divisible = _chain_kernel, PTR_TYPES, DIVISIBLE
        const = dict(K=4, HAS_DRAFT_PROBS=True, RAGGED=False, SEEDED=False, BLOCK_ROWS=1, BLOCK_V=block_v,
                     KP1_POW2=8, NUM_STAGES=stages, LANE_I64=False,
                     # the launcher's rule (chain._plan): spans per row in the emit's first tile where a
                     # program streams several chunks (32: (128, 8, 128256)), else chunks (256: V = 128256)
                     EMIT_LANES=32 if tiles > 1 else 256,
                     TILES_POW2=max(32, next_pow2(tiles)) if tiles > 1 else 0,
                     EVICT_FIRST_COPIES=_copy_policy.variant(), sp_v=1, sq_v=1)  # fmt: skip
    elif kernel_name == "race":
        fn, ptr_types, divisible = _race_chunk_kernel, RACE_PTR_TYPES, ("stride_b", "V")
        const = dict(BLOCK_ROWS=1, BLOCK_V=block_v, NUM_SAMPLES=1, UNIT_STRIDE_V=True, FAST_LOG2=True,
                     FUSED_MERGE=True, BLOCK_PARTS=32, WRITE_SCORE=False, stride_v=1, SCREEN=False,
                     GROUPED=False, SLOTS=1, PICK_IN_CHUNK=False, MERGE_GROUP_LANES=0)  # fmt: skip
    else:  # logits-stats / logits-accept / logits-race / logits-pick: K = 4, fp32 logits (classic drafts
        # but for the pick, which is one-hot's)
        fn = {"logits-stats": _logits_stats_kernel, "logits-accept": _logits_accept_kernel,
              "logits-pick": _logits_pick_kernel}.get(kernel_name, _logits_race_kernel)  # fmt: skip
        ptr_types = {p: LOGITS_PTR_TYPES.get(p, "*fp32") for p in inspect.signature(fn.fn).parameters
                     if p.endswith("_ptr")}  # fmt: skip
        ptr_types.update(t_ptr=f"*{logits_dtype}", d_ptr=f"*{logits_dtype}")
        divisible = ("st_b", "st_k", "sd_b", "sd_k", "V")
        const = dict(K=4, KP=8, HAS_DRAFT_LOGITS=True, RAGGED=False, BLOCK_ROWS=1, BLOCK_V=block_v,
                     TILES=tiles, st_v=1, sd_v=1, LANE_I32=False, FAST_LOG=False, GW=min(256, block_v),
                     TILES_P2=1 << max(0, tiles - 1).bit_length(), PREFETCH=0, NCB2=64,
                     P_IN_MERGE=0, LAZY=0, NCB=64, TAIL=0, SCREEN=0, GB=4, PARTS=1, PDL=0, POLL=0,
                     PICK_POLL=0, SHARED_TAU=0, SEED_TAU=0, SEEDED=0, SPINS=1 << 14)  # fmt: skip
        const = {k: v for k, v in const.items() if k in inspect.signature(fn.fn).parameters}
    const.update(flags)
    # every other constexpr at its default: one left out would compile as a runtime int argument, both
    # sides of its branches kept (session 52: figures for a kernel unlike the launcher's)
    for name, param in inspect.signature(fn.fn).parameters.items():
        if name not in const and "constexpr" in str(param.annotation) and param.default is not param.empty:
            const[name] = param.default
    params = list(inspect.signature(fn.fn).parameters)
    sig = {p: "constexpr" if p in const else ptr_types.get(p, "i32") for p in params}
    attrs = {
        (i,): [["tt.divisibility", 16]] for i, p in enumerate(params) if p in ptr_types or p in divisible
    }
    source = ASTSource(fn, sig, const, attrs=attrs)
    options = dict(num_warps=warps) if maxnreg is None else dict(num_warps=warps, maxnreg=maxnreg)
    # evict-first copies as the chain's launcher compiles them (kernels/_copy_policy.py)
    scope = _copy_policy.evict_first_copies(fn.__name__) if const.get("EVICT_FIRST_COPIES") else nullcontext()
    with scope:
        return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)


def compile_sass(*args, **kwargs):
    """(ptxas -v output, SASS text) for sm_90a of compile_kernel(*args, **kwargs)."""
    kernel = compile_kernel(*args, **kwargs)
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(ptx, "w") as f:
            f.write(kernel.asm["ptx"])
        ptxas = os.path.join(bin_dir(), "ptxas-blackwell")  # the PTX ISA of Triton >= 3.9 needs CUDA 13
        if not os.path.exists(ptxas):
            ptxas = os.path.join(bin_dir(), "ptxas")
        info = subprocess.run([ptxas, "-arch=sm_90a", "-v", "-o", cubin, ptx], capture_output=True, text=True,
                              check=True).stderr  # fmt: skip
        sass = subprocess.run([os.path.join(bin_dir(), "cuobjdump"), "-sass", cubin], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
    return info, sass


INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]\s+)?([A-Z][A-Z0-9_]*)[.\sA-Z0-9_]*?(?:\s|;)")


def instructions(sass: str) -> list[tuple[int, str, str]]:
    out = []
    for line in sass.splitlines():
        m = INSTR.search(line)
        if m:
            out.append((int(m.group(1), 16), m.group(2), line.strip()))
    return out


def loops(instrs) -> list[tuple[int, int]]:
    """(start, end) addresses of backward branches: the loop bodies."""
    found = []
    for addr, op, line in instrs:
        if op == "BRA":
            target = re.search(r"BRA\s+(?:`?\(?\.?L?_?x?_?)?0x([0-9a-f]+)", line)
            if target and int(target.group(1), 16) < addr:
                found.append((int(target.group(1), 16), addr))
    return found


def main() -> int:
    ap = argparse.ArgumentParser()
    kernels = ("chain", "race", "logits-stats", "logits-accept", "logits-race", "logits-pick")
    ap.add_argument("kernel", choices=kernels)
    ap.add_argument("--block-v", type=int, default=None, help="default 1024 (chain), 2048 (race)")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument(
        "--tiles",
        type=int,
        default=4,
        help="logits kernels: TILES (constexpr); chain: chunks per program (sets TILES_POW2)",
    )
    ap.add_argument("--flag", action="append", default=[], help="constexpr NAME=INT override")
    ap.add_argument(
        "--dtype", default="fp32", choices=("fp32", "bf16", "fp16"), help="logits kernels' logits"
    )
    ap.add_argument("--maxnreg", type=int, default=None, help="a register cap per thread (ptxas)")
    args = ap.parse_args()
    flags = {k: int(v) for k, v in (f.split("=") for f in args.flag)}
    args.block_v = args.block_v or {"chain": 1024, "race": 2048, "logits-stats": 2048}.get(args.kernel, 1024)
    info, sass = compile_sass(
        args.kernel, args.block_v, args.warps, args.stages, args.tiles, flags, args.dtype, args.maxnreg
    )
    regs = re.search(r"Used (\d+) registers", info)
    spills = re.findall(r"(\d+) bytes spill (stores|loads)", info)
    instrs = instructions(sass)
    print(f"{args.kernel}: block_v={args.block_v} warps={args.warps} stages={args.stages} tiles={args.tiles} "
          f"flags={flags} dtype={args.dtype}")  # fmt: skip
    spilled = ", ".join(f"{n} bytes spill {kind}" for n, kind in spills) or "no spill report"
    print(f"registers/thread {regs.group(1) if regs else '?'} ({spilled}); SASS instructions {len(instrs)}")
    per_thread = args.block_v / (32 * args.warps)
    for start, end in loops(instrs):
        body = [op for addr, op, _ in instrs if start <= addr <= end]
        hist = collections.Counter(body)
        per_element = len(body) / per_thread
        print(f"loop 0x{start:x}-0x{end:x}: {len(body)} instructions per iteration = {per_element:.1f} per "
              f"element per thread ({per_thread:g} elements)")  # fmt: skip
        print("   ", ", ".join(f"{op} {n}" for op, n in hist.most_common(14)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
