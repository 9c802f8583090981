"""Where a chain call's device time goes, by `%globaltimer` stamps inside the kernel.

    TRITON_CACHE_DIR=/tmp/tc_stamps python3 benchmarks/diagnostics/chain_stamps.py --out stamps.jsonl

Issue 4's three large fp32 shapes stand 6-7 µs over a pure read of their bytes (benchmarks/NOTES.md,
sessions 28-39). The ablations of session 30 (runs 177-178) removed one step at a time and measured
the whole call; this times the steps where they happen. `_chain_kernel` and `_emit_rows` are copied
from specsample/kernels/chain.py's source (so the copy follows any change there) with stamps added:

- every program: s0 at its start, s1 once the emit position `a` is known (the acceptance prologue's
  gathers), s2 once its stream's last partial is stored (the last chunk's data arrived), s3 once its
  arrival atomic returned, and the SM it ran on (%smid);
- the last program of each row (the emit): e0 at entry, e1 once the spans' totals are loaded and summed,
  e2 once the chunk is located (its span's running sums loaded), e3 once the re-read chunk's values are
  in registers (a max over them, which the stamp waits for), e4 once they are scanned (the token), e5 after
  the stores are issued.

%globaltimer is in ns and comparable across SMs (32 ns steps on the H200). Each call is preceded by
ab_device_time.py's zero_pause flush (do_bench's 256 MB zero_, then a 100 µs device pause), so the L2
holds dirty lines as under do_bench. Per call, every stamp is taken relative to the earliest s0; the
record gives the medians over `--calls` calls of: the first and last program start, the prologue's end
(median and last program), the streams' end (median and last), the last arrival, each emit step's
duration (median over rows, and for the row that ends last) and the last stamp (the kernel's end as the
stamps see it). zero_pause_us of the stamped and of the production call, timed in the same process,
say what the stamps cost and how much of the event-timed call lies outside the stamps (launch, drain).
`--raw DIR` keeps the last call's stamps of each shape (.npz: programs [P, 5], emits [rows, 6], ns;
runs 218-219 recorded five emit stamps, before the re-read's), for
per-program questions such as which SMs finish their streams first (run 219: at (128, 8, 128256) the
24 SMs numbered 32-43, 78-87 and 126-127 stream their spans in ~26 µs, the others in ~32, call after
call). `--label` tags the lines (e.g. a variant under an environment switch); `--config NAME=INT` (repeatable)
overrides a field of chain._launch_config for the stamped and the production call alike (run 228).
Under TRITON_INTERPRET=1 the stamps read 0 (a smoke test of the source transformation and the launch).
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, REPO)

from benchmarks.diagnostics._stamps import append_record, load_generated, replace_once, timed_medians  # noqa: E402

SHAPES = ((16, 4, 128256), (64, 4, 151936), (128, 8, 128256), (1, 4, 32000))
PROGRAM_STAMPS = ("start", "prologue", "stream", "arrival")  # s0..s3
EMIT_STAMPS = ("emit_entry", "span_totals", "chunk_located", "reread", "token", "stores")  # e0..e5


def _replace_chain(src: str, old: str, new: str, times: int = 1) -> str:
    """replace_once on chain.py's source."""
    return replace_once(src, old, new, "chain.py", times)


_STORE_PROGRAM = (
    "    at = stamp_ptr + (pid_rows * tl.num_programs(1) + tl.program_id(1)) * 5\n"
    + "".join(f"    tl.store(at + {i}, s{i})\n" for i in range(len(PROGRAM_STAMPS)))
    + f"    tl.store(at + {len(PROGRAM_STAMPS)}, _smid(rows.to(tl.int32)))\n"
)
_STORE_EMIT = "".join(f"    tl.store(stamp_ptr + {i}, e{i})\n" for i in range(len(EMIT_STAMPS)))
_VALS = "    vals = tl.where(fallback[:, None], p_j, r)\n"
_ARRIVAL = '    arrived = tl.atomic_add(arrivals_ptr + pid_rows, 1, sem="acq_rel")\n'
_TOKEN = "    token = tl.where(valid & (pick >= 0), chunk * BLOCK_V + pick, -1)\n"
_LOCAL = '    local = tl.where(found, target - before, float("inf"))'
# (text in chain.py, its stamped replacement): each must occur exactly once
_EMIT_EDITS = (
    ("def _emit_rows(\n    p_ptr,", "def _emit_rows(\n    stamp_ptr, p_ptr,"),
    ("    rejected = a < n\n", "    e0 = _gt(rows.to(tl.int32))\n    rejected = a < n\n"),
    (
        "    valid = row_ok & (total > 0.0)\n",
        "    valid = row_ok & (total > 0.0)\n    e1 = _gt(valid.to(tl.int32))\n",
    ),
    (_LOCAL, "    e2 = _gt(chunk.to(tl.int32))\n" + _LOCAL),
    (_VALS, _VALS + "    e3 = _gt(tl.max(vals, axis=1).to(tl.int32))\n"),
    (_TOKEN, _TOKEN + "    e4 = _gt(token.to(tl.int32))\n"),
)
_KERNEL_EDITS = (
    ("def _chain_kernel(\n", "def _chain_kernel_stamped(\n    stamp_ptr, emit_stamp_ptr,\n"),
    ("    row_ok = rows < B\n", "    row_ok = rows < B\n    s0 = _gt(rows.to(tl.int32))\n"),
    ("    rejected = a < n\n", "    rejected = a < n\n    s1 = _gt(a.to(tl.int32))\n"),
    (
        _ARRIVAL,
        "    s2 = _gt(fin.to(tl.int32))\n"
        + _ARRIVAL
        + "    s3 = _gt(rows.to(tl.int32) * 0 + arrived)\n"
        + _STORE_PROGRAM,
    ),
    ("        _emit_rows(p_ptr,", "        _emit_rows(emit_stamp_ptr + pid_rows * 6, p_ptr,"),
)


def stamped_sources(chain_module) -> str:
    """The generated module's source: stamped `_stream_chunks`, `_emit_rows` and `_chain_kernel`."""
    stream = inspect.getsource(chain_module._stream_chunks.fn)
    stream = stream.rstrip("\n") + "\n    return run_r + run_p\n"  # the stream's end, as a value
    emit = inspect.getsource(chain_module._emit_rows.fn)
    for old, new in _EMIT_EDITS:
        emit = _replace_chain(emit, old, new)
    emit = emit.rstrip("\n") + "\n    e5 = _gt(rows.to(tl.int32))\n" + _STORE_EMIT
    kernel = inspect.getsource(chain_module._chain_kernel.fn)
    kernel = _replace_chain(kernel, "        _stream_chunks(", "        fin = _stream_chunks(", times=3)
    for old, new in _KERNEL_EDITS:
        kernel = _replace_chain(kernel, old, new)
    return stream + "\n\n" + emit + "\n\n" + kernel


def load_stamped_kernel(interpreting: bool):
    """The stamped `_chain_kernel_stamped`, from a generated module."""
    from specsample.kernels import chain

    return load_generated("specsample.kernels.chain", stamped_sources(chain), interpreting,
                          "chain_stamped_gen")._chain_kernel_stamped  # fmt: skip


def stamped_call(kernel, p, x, q, u, overrides: tuple = ()):
    """A call of the stamped kernel with the production launch plan and arguments; returns (call,
    program stamps [grid0 * grid1, 5] int64 (s0..s3, the SM), emit stamps [grid0, 6] int64, result).
    `overrides`: sorted (name, value) pairs for chain._launch_config (the tests' multi-program grids)."""
    import torch

    from specsample.kernels import _copy_policy, chain
    from specsample.kernels._launch import int32_offsets_fit
    from specsample.kernels.result import empty_result

    batch, k_plus_1, vocab = p.shape
    row_bytes = p.element_size() + q.element_size()
    wide = not int32_offsets_fit(vocab, p.stride(2), q.stride(2))  # as chain._launch decides it
    plan_key = (batch, k_plus_1, vocab, True, False, False, wide, row_bytes, overrides)
    plan = chain._plan(*plan_key)
    programs = torch.zeros(
        plan.grid[0] * plan.grid[1], len(PROGRAM_STAMPS) + 1, dtype=torch.int64, device=p.device
    )
    emits = torch.zeros(plan.grid[0], len(EMIT_STAMPS), dtype=torch.int64, device=p.device)
    result = empty_result(batch, k_plus_1, p.device)
    strides = (*p.stride(), *q.stride(), *x.stride(), 0, *u.stride(), 0, 0)
    sizes = (batch, vocab, plan.num_chunks, plan.tiles, *strides)
    scratch = chain._scratch(p.device, batch, plan)
    args = chain._kernel_args(p, x, q, None, u, None, None, *scratch, result, sizes)
    name = "_chain_kernel_stamped"

    def call():
        if _copy_policy.enabled():
            with _copy_policy.evict_first_copies(name):
                kernel[plan.grid](programs, emits, *args, **plan.meta)
        else:
            kernel[plan.grid](programs, emits, *args, **plan.meta)
        return result

    return call, programs, emits, result


def timeline(programs, emits) -> dict:
    """One call's stamps (numpy int64 arrays) as µs after the earliest program start."""
    import numpy as np

    t0 = programs[:, 0].min()
    s = (programs[:, : len(PROGRAM_STAMPS)] - t0) / 1e3
    e = (emits - t0) / 1e3
    last_row = int(np.argmax(e[:, -1]))
    steps = np.diff(e, axis=1)  # entry -> totals -> located -> reread -> token -> stores
    out = {
        "start_last": float(s[:, 0].max()),
        "prologue_median": float(np.median(s[:, 1])),
        "prologue_last": float(s[:, 1].max()),
        "stream_median": float(np.median(s[:, 2])),
        "stream_last": float(s[:, 2].max()),
        "arrival_last": float(s[:, 3].max()),
        "emit_entry_last_row": float(e[last_row, 0]),
        "end": float(e[:, -1].max()),
    }
    for i, name in enumerate(EMIT_STAMPS[1:]):
        out[f"{name}_step_median"] = float(np.median(steps[:, i]))
        out[f"{name}_step_last_row"] = float(steps[last_row, i])
    out["emit_median"] = float(np.median(e[:, -1] - e[:, 0]))
    return out


def per_sm_streams(programs) -> dict:
    """From one call's program stamps [P, 5]: each SM's median stream time (s2 - s1, µs) over its
    programs, and the SMs whose median lies more than 10% under the median of all SMs."""
    import numpy as np

    sm = programs[:, len(PROGRAM_STAMPS)]
    stream = (programs[:, 2] - programs[:, 1]) / 1e3
    medians = {int(k): float(np.median(stream[sm == k])) for k in np.unique(sm)}
    overall = float(np.median(list(medians.values())))
    fast = sorted(k for k, m in medians.items() if m < 0.9 * overall)
    return {"sm_medians": medians, "median_of_sms": overall, "fast_sms": fast}


def analyse(directory: str) -> None:
    """Print per_sm_streams for every .npz of `directory` (written by --raw)."""
    import numpy as np

    for name in sorted(os.listdir(directory)):
        if not name.endswith(".npz"):
            continue
        out = per_sm_streams(np.load(os.path.join(directory, name))["programs"])
        meds = sorted(out["sm_medians"].values())
        fast = out["fast_sms"]
        fast_median = statistics.median(out["sm_medians"][k] for k in fast) if fast else float("nan")
        print(f"{name}: SMs {len(meds)}, median stream over SMs {out['median_of_sms']:.2f} µs "
              f"(fastest {meds[0]:.2f}, slowest {meds[-1]:.2f}); {len(fast)} SMs > 10% faster "
              f"(their median {fast_median:.2f}): {fast}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON-lines file to append to (required unless --analyse)")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--shape", action="append", default=[], metavar="B:K:V", help="instead of SHAPES")
    ap.add_argument("--raw", help="directory: the last call's raw stamps per shape (.npz: programs, emits)")
    ap.add_argument("--label", default="", help="recorded with each line (e.g. the variant under test)")
    ap.add_argument("--analyse", metavar="DIR", help="only print per_sm_streams of DIR's .npz files (no GPU)")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=INT",
                    help="a chain._launch_config override (tiles, num_stages, block_v, num_warps, maxnreg), "
                         "for the stamped call and the production call alike")
    args = ap.parse_args(argv)
    if args.analyse:
        analyse(args.analyse)
        return 0

    if not args.out:
        ap.error("--out is required")
    import numpy as np
    import torch

    import specsample
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from specsample.kernels import chain
    from specsample.kernels._launch import interpreting

    cuda = torch.cuda.is_available() and not interpreting()
    device = "cuda" if cuda else "cpu"
    shapes = [tuple(int(v) for v in s.split(":")) for s in args.shape] or (SHAPES if cuda else [(3, 2, 700)])
    try:
        overrides = tuple(sorted((name, int(value)) for name, value in (c.split("=") for c in args.config)))
    except ValueError:
        ap.error(f"--config wants NAME=INT, got {args.config}")
    kernel = load_stamped_kernel(not cuda)
    if cuda:
        from benchmarks.diagnostics.ab_device_time import zero_pause_flush

        flush = zero_pause_flush()
    for b, k, v in shapes:
        inputs = make_inputs(Case("chain", b, k, v, "float32"), device)
        p, x, q, u = (inputs[name] for name in ("target_probs", "draft_token_ids", "draft_probs", "uniforms"))
        if overrides:  # the production kernel under the same plan (the public call takes no plan)
            production = functools.partial(chain._launch, p, x, q, None, u, None, None, **dict(overrides))
        else:  # the public call, with its repeat-call fast path
            production = functools.partial(specsample.chain_rejection_sample, p, x, q, uniforms=u)
        call, programs, emits, result = stamped_call(kernel, p, x, q, u, overrides)
        call()
        want = production()
        record = {"label": args.label, "B": b, "K": k, "V": v, "calls": args.calls, "config": dict(overrides),
                  "equal_to_production": all(torch.equal(a, c) for a, c in zip(result, want, strict=True)),
                  "programs": programs.shape[0]}  # fmt: skip
        if cuda:
            record.update(timed_medians(call, production, flush, args.calls,
                                        lambda: timeline(programs.cpu().numpy(), emits.cpu().numpy())))  # fmt: skip
            if args.raw:
                os.makedirs(args.raw, exist_ok=True)
                np.savez_compressed(
                    os.path.join(args.raw, f"{args.label or 'stamps'}-B{b}-K{k}-V{v}.npz"),
                    programs=programs.cpu().numpy(),
                    emits=emits.cpu().numpy(),
                )
        else:
            record.update(timeline(programs.cpu().numpy(), emits.cpu().numpy()))
            record["stamps_nonzero"] = bool(np.any(programs.cpu().numpy()))
        append_record(args.out, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
