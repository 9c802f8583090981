"""Where a `rejection_sample_logits` call's time goes, by prefixes of its three launches.

    python3 benchmarks/diagnostics/logits_stage_time.py --out stages.jsonl [--case logits:64:4:151936:bfloat16]
                                                        [--config '{"classic_tail": false}']

The call launches three kernels: statistics, accept, then race (classic drafts) or pick (one-hot).
This times the call with only its first launch, with its first two, and whole, under
ab_device_time's zero_pause timer (a 256 MB zero_ flush and a 100 µs device pause before each call,
event-timed median of 100 calls: do_bench's device time without its host-bound readings) and as
graph-free back-to-back calls (warm_us: event-timed median, no flush). Launches are left out by
wrapping the kernel module's `launch_keyed`: the kernels that run are the package's own, with its
plan and its programmatic dependent launches. A call cut short leaves wrong outputs, never a stuck
arrival counter (the race's counters are zeroed by its own last program, which then does not run).
The launcher's repeat-call memo is off while a prefix is timed, so every timed call also pays the
full path's host time (zero_pause is not host-bound; warm_us may be at B = 1). Differences between
prefixes are what each later kernel adds to the call, overlap included; the
statistics pass alone against read_floor.py's bare read says what the pass costs over its bytes.
One JSON line per (case, prefix) to --out.

The statistics pass is timed eager (SPECSAMPLE_LAZY_STATS=0 unless set): the lazy pass's flags are
reset by the accept kernel, so a prefix without it would leave them set and later calls would skip
rows (kernels/logits.py, session 31). The eager pass also keeps one-hot drafts on three launches: their
lazy tail (stats_tail, which decides in the statistics pass and has no accept launch) is not timed here
unless SPECSAMPLE_LAZY_STATS=1 is set, and their prefixes of 1 and 2 are then the same launch. The same
holds for classic drafts, whose tail (`classic_tail`) is the default since session 47 (`--config`, a
launch_config override given to every call, turns it off): with SPECSAMPLE_LAZY_STATS=1 the prefix of 1 is
the statistics pass with its tail, and 3 adds the race. Under the tail only the whole call (3) is a
meaningful prefix since session 60: the pick or race zeroes the tail's flags, word and counters after the
pass (the programs of rows already unused no longer arrive, so the pass cannot), and a prefix without it
leaves them set, so that its later calls skip rows and miscount arrivals (their outputs are wrong and
their times are not the pass's). Time the tail's pass alone in a patched copy, or the eager pass here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

STAGES = ("stats", "accept", "race")  # the launch keys' first element; the pick counts as the race


def stage_of(key: tuple) -> str:
    """The stage of a launch_keyed key: ('stats' | 'accept' | 'race' | 'pick', ...)."""
    return "race" if key[0] == "pick" else key[0]


class _Forgetful(dict):
    """A repeat-call memo that remembers nothing (every call takes the launcher's full path)."""

    def __setitem__(self, key, value) -> None:
        pass


def limit_launches(module, stages: int):
    """Wrap `module.launch_keyed` so that only the first `stages` of STAGES launch, with the module's
    repeat-call memo (`_REPEATS`, kernels/_call_signature.py) switched off: a remembered call would
    launch all three kernels without going through `launch_keyed`. Returns a function that restores
    both."""
    original, memo = module.launch_keyed, module._REPEATS
    allowed = set(STAGES[:stages])

    def launch_keyed(kernel, grid, key, args, meta):
        if stage_of(key) in allowed:
            original(kernel, grid, key, args, meta)

    module.launch_keyed = launch_keyed
    module._REPEATS = _Forgetful()

    def restore():
        module.launch_keyed, module._REPEATS = original, memo

    return restore


def config_call(module, inputs: dict, config: dict):
    """A call of `module.rejection_sample_logits` on `inputs` with the launch_config override `config` (the
    provider's call, `benchmarks/providers.py`, takes the default config)."""
    return lambda: module.rejection_sample_logits(**inputs, _config=config)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--label", default="head")
    ap.add_argument("--case", action="append", default=[], metavar="KERNEL:B:K:V:DTYPE",
                    help="time these cases instead of the list (repeatable)")  # fmt: skip
    ap.add_argument("--config", type=json.loads, default=None, metavar="JSON",
                    help="a launch_config override for every call (default: the provider's call)")  # fmt: skip
    args = ap.parse_args(argv)
    sys.path.insert(0, REPO)
    os.environ.setdefault("SPECSAMPLE_LAZY_STATS", "0")  # read at import (module docstring)
    import torch

    import specsample.kernels.logits as kernel_module
    from benchmarks.diagnostics.ab_device_time import CASES, parse_case, timed_after, zero_pause_flush
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from benchmarks.providers import PROVIDERS
    from benchmarks.records import OURS

    zero_pause = zero_pause_flush()
    with open(args.out, "a") as out:
        logits_cases = [c for c in CASES if c[0] in ("logits", "logits_onehot")]  # issue 6's eight
        for kernel, b, k, v, dtype in [parse_case(c) for c in args.case] or logits_cases:
            case = Case(kernel, b, k, v, dtype)
            inputs = make_inputs(case, torch.device("cuda"))
            fn = (
                config_call(kernel_module, inputs, args.config)
                if args.config
                else PROVIDERS[OURS].build(case, inputs)
            )
            for stages in range(1, len(STAGES) + 1):
                restore = limit_launches(kernel_module, stages)
                try:
                    fn()
                    torch.cuda.synchronize()
                    row = dict(label=args.label, case=case.label, stages=list(STAGES[:stages]), config=args.config,
                               zero_pause_us=timed_after(fn, zero_pause, 100),
                               warm_us=timed_after(fn, lambda: None, 100))  # fmt: skip
                finally:
                    restore()
                out.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
