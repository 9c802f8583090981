"""Same-run A/B of two specsample trees on the H200: our kernels only, the benchmark harness's timers.

    python3 benchmarks/diagnostics/ab_device_time.py --tree /path/to/base --label base --out a.jsonl
    python3 benchmarks/diagnostics/ab_device_time.py --label new --out a.jsonl      # this checkout

`--tree DIR` puts DIR first on sys.path, so `import specsample` takes DIR/specsample (make it with
`git archive <commit> specsample | tar -x -C DIR`); the harness (`benchmarks/`) is always this
checkout's. Each case is timed as `run_h200.py` times it (benchmarks/timing.py: do_bench median with
the L2 flush, and CUDA-graph replays over rotated input copies), plus the host time per call
(host_us: median of 5 rounds of 200 back-to-back calls, enqueue only) and, once per process, the
device time of do_bench's L2 flush (flush_us: a 256 MB zero_, event-timed median of 20): do_bench
measures device time only while host_us + the flush's own launch stays below flush_us. Two
do_bench-shaped loops isolate what the flush leaves in L2: zero_flush_us flushes with do_bench's
zero_ (L2 ends full of dirty lines, whose write-back our reads then pay for) and read_flush_us with
a read of the same 256 MB (L2 ends clean); zero_pause_us is zero_flush_us with a 100 µs device-side
pause (torch.cuda._sleep) between the flush and the start event, so the call is queued before its
start event fires while the host needs less than the flush plus the pause (~165 µs) per call:
do_bench's device time without its host-bound readings (run 96: the pause leaves the dirty lines'
cost unchanged). Each is an event-timed median of 100 calls. One JSON line per case is appended to
--out; `--case KERNEL:B:K:V:DTYPE` (repeatable) times those shapes instead of the list below.
Alternate base / new calls in one device session (base, new, base, new) and compare medians: that is
the same-run ratio benchmarks/NOTES.md asks for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

CASES = (  # kernel, B, K, V, dtype: the issue shapes of the kernels the change touches
    ("chain", 1, 4, 32000, "float32"),
    ("chain", 16, 4, 128256, "float32"),
    ("chain", 128, 8, 128256, "float32"),
    ("fast_sample", 1, 0, 151936, "float32"),
    ("fast_sample", 64, 0, 151936, "float32"),
    ("fast_sample", 256, 0, 128256, "float32"),
    ("fast_sample", 256, 0, 128256, "bfloat16"),
    ("sample_from_logits", 64, 0, 151936, "float32"),
    ("logits", 64, 4, 151936, "float32"),
    ("logits_onehot", 128, 8, 128256, "float32"),
    ("chain", 64, 4, 151936, "float32"),
    ("logits", 128, 8, 128256, "float32"),  # the rest of issue 6's eight cases
    ("logits", 64, 4, 151936, "bfloat16"),
    ("logits", 128, 8, 128256, "bfloat16"),
    ("logits_onehot", 64, 4, 151936, "float32"),
    ("logits_onehot", 64, 4, 151936, "bfloat16"),
    ("logits_onehot", 128, 8, 128256, "bfloat16"),
    ("chain", 64, 4, 151936, "bfloat16"),  # chain's bf16 record (issue 4) and its one-hot drafts
    ("chain", 128, 8, 128256, "bfloat16"),
    ("chain_onehot", 16, 4, 128256, "float32"),
    ("chain_onehot", 64, 4, 151936, "float32"),
    ("chain_onehot", 64, 4, 151936, "bfloat16"),
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", help="directory holding the specsample package (default: this checkout)")
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: every case)")
    ap.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="KERNEL:B:K:V:DTYPE",
        help="time these cases instead of the list (repeatable), e.g. chain:1:4:151936:float32",
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, REPO)
    if args.tree:
        sys.path.insert(0, os.path.abspath(args.tree))
    import specsample
    from benchmarks.floors import Case
    from benchmarks.harness import BenchSession
    from benchmarks.providers import PROVIDERS
    from benchmarks.records import OURS

    only = {k for k in args.only.split(",") if k}
    session = BenchSession.create()
    flush_us = _flush_us()
    with open(args.out, "a") as out:
        for kernel, b, k, v, dtype in [parse_case(c) for c in args.case] or CASES:
            if only and kernel not in only:
                continue
            case = Case(kernel, b, k, v, dtype)
            t0 = time.time()
            records, skips = session.measure(case, [PROVIDERS[OURS]])
            row = dict(label=args.label, tree=os.path.dirname(specsample.__file__), case=case.label,
                       median_us=records[0].median_us if records else None,
                       graph_us=records[0].graph_us if records else None,
                       host_us=_host_us(session, case, PROVIDERS[OURS]), flush_us=flush_us,
                       **_flushed_us(session, case, PROVIDERS[OURS]),
                       skips=[s.reason for s in skips], seconds=round(time.time() - t0, 1))  # fmt: skip
            out.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return 0


DTYPES = ("float32", "bfloat16", "float16")


def parse_case(text: str, kernels: tuple[str, ...] | None = None) -> tuple:
    """'chain:1:4:151936:float32' -> ('chain', 1, 4, 151936, 'float32'), the `--case` of every diagnostic
    that takes one. Anything else stops the script with the option named: not five fields, a kernel
    outside `kernels` (where given), a dtype outside DTYPES, B, K or V not an integer."""
    parts = text.split(":")
    if len(parts) != 5 or (kernels and parts[0] not in kernels) or parts[4] not in DTYPES:
        kinds = f" with KERNEL one of {kernels}" if kernels else ""
        raise SystemExit(f"--case wants KERNEL:B:K:V:DTYPE{kinds}, DTYPE one of {DTYPES}; got {text!r}")
    try:
        b, k, v = (int(f) for f in parts[1:4])
    except ValueError:
        raise SystemExit(f"--case {text!r}: B, K and V must be integers") from None
    return parts[0], b, k, v, parts[4]


def _host_us(session, case, provider, calls: int = 200, rounds: int = 5) -> float:
    """Median over rounds of the host time per call of `calls` back-to-back calls (no sync inside)."""
    import torch

    from benchmarks.inputs import make_inputs

    fn = provider.build(case, make_inputs(case, session.device))
    return per_call_us(fn, calls, rounds, torch.cuda.synchronize)


def per_call_us(fn, calls: int, rounds: int, sync) -> float:
    """µs of host time per run of `fn`: the median over `rounds` of `calls` back-to-back runs, after one
    warm-up run; `sync()` after the warm-up and after each round (no synchronisation inside a round)."""
    import statistics

    fn()
    sync()
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per_call.append((time.perf_counter() - t0) / calls * 1e6)
        sync()
    return statistics.median(per_call)


def sleep_cycles_per_us() -> float:
    """torch.cuda._sleep's cycles per microsecond on this GPU (event-timed once)."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    start.record()
    torch.cuda._sleep(2_000_000)
    end.record()
    torch.cuda.synchronize()
    return 2_000_000 / (start.elapsed_time(end) * 1e3)


def _flushed_us(session, case, provider, calls: int = 100) -> dict:
    """Event-timed medians of one call after a 256 MB flush, as do_bench times it: do_bench's zero_
    flush, a read flush (a sum over the same buffer), and the zero_ flush plus a 100 µs pause."""
    import torch

    from benchmarks.inputs import make_inputs

    fn = provider.build(case, make_inputs(case, session.device))
    cache = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    flushes = dict(zero_flush_us=cache.zero_, read_flush_us=lambda: cache.sum(),
                   zero_pause_us=zero_pause_flush(cache=cache))  # fmt: skip
    out = {}
    for name, flush in flushes.items():
        fn()
        torch.cuda.synchronize()
        out[name] = timed_after(fn, flush, calls)
    return out


def zero_pause_flush(pause_us: float = 100.0, cache=None):
    """A flush as zero_pause_us times it: do_bench's 256 MB zero_ (of `cache`, or a buffer of its
    own), then a device-side pause of `pause_us` (torch.cuda._sleep), so the timed call is queued
    before its start event fires."""
    import torch

    if cache is None:
        cache = torch.zeros(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    pause = int(pause_us * sleep_cycles_per_us())

    def flush():
        cache.zero_()
        torch.cuda._sleep(pause)

    return flush


def timed_configuration(call, reference, timer, flush) -> dict:
    """One configuration of a sweep: whether `call()`'s outputs equal `reference` (tuples of
    tensors), and its do_bench median and CUDA-graph time (`timer`, benchmarks.timing.CudaTimer)
    and zero_pause time (`flush` from zero_pause_flush), in µs."""
    import torch

    same = all(torch.equal(a, b) for a, b in zip(call(), reference, strict=True))
    timing = timer.time([call])
    return dict(do_bench_us=timing.median_us, graph_us=timing.graph_us,
                zero_pause_us=timed_after(call, flush, 100), equal_to_default=same)  # fmt: skip


def timed_after(call, flush, calls: int) -> float:
    """Median µs of `call` bracketed by CUDA events, each call preceded by `flush` (outside them)."""
    import statistics

    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for start, end in zip(starts, ends, strict=True):
        flush()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends, strict=True))


def _flush_us(repeats: int = 20) -> float:
    """Device time of triton.testing.do_bench's L2 flush: zero_ of a 256 MB int32 buffer."""
    import statistics

    import torch

    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        cache.zero_()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


if __name__ == "__main__":
    raise SystemExit(main())
