"""Host time of an eager repeat call of `rejection_sample_logits`, part by part.

    python3 benchmarks/diagnostics/host_breakdown.py --out host.jsonl [--case KERNEL:B:K:V:DTYPE]

`triton.testing.do_bench` (issue 6's timer) reads host time, not device time, whenever a call's host
time outlasts its L2 flush (~68 µs on the H200): run 298 (session 63) read one-hot bf16 (64, 4, 151936)
at 31.5 µs in the one process whose host time per call was 40.6 µs and at 37-59 µs in processes at
60-78 µs. This script times what a repeat call (the tensors' metadata seen before:
kernels/_call_signature.py) spends on the host, as the call runs it, one part at a time:

- `call`: the whole call;
- `signature`: `tensor_signature` of its seven tensor arguments; `memo_get`: the repeat memo's lookup;
- `empty_result`: the four output tensors; `empty_one`: one `torch.empty` of the tokens' shape;
- `kernel_args`: the kept scratch and the kernels' argument tuples;
- `launches`: the prepared launches (two or three) with those arguments, in order.

`decomposed` runs the parts in the call's order; `check_decomposed` asserts that it returns what the
call returns for the same inputs (the breakdown times the real path). Each part: median over `rounds`
of `calls` back-to-back runs (no synchronisation inside a round; one after each), µs per run. One JSON
line per case is appended to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

CASES = ("logits_onehot:64:4:151936:bfloat16", "logits:64:4:151936:bfloat16")
ARGS = ("target_logits", "draft_token_ids", "draft_logits", "temperature", "seeds", "offsets")


def _tensors(x: dict) -> tuple:
    """The call's seven tensor arguments in `tensor_signature`'s order (num_draft_tokens absent)."""
    return (*[x.get(name) for name in ARGS], None)


def _call(x: dict):
    from specsample.kernels.logits import rejection_sample_logits

    lg, ids, dl, temperature, seeds, offsets, _ = _tensors(x)
    return rejection_sample_logits(lg, ids, dl, temperature=temperature, seeds=seeds, offsets=offsets)


def _remembered(x: dict) -> tuple:
    """(tensors, signature, the repeat memo's entry) of the call on `x`, which must have launched once."""
    from specsample.kernels import logits as L
    from specsample.kernels._call_signature import tensor_signature

    tensors = _tensors(x)
    signature = tensor_signature(*tensors)
    repeat = L._REPEATS.get(signature)
    if repeat is None:
        raise RuntimeError("the call was not remembered: no repeat path to time")
    return tensors, signature, repeat


def _outputs(repeat):
    from specsample.kernels.result import empty_result

    device, batch, k_plus_1 = repeat.plan_args[:3]
    return empty_result(batch, k_plus_1, device)


def _kernel_args(repeat, tensors: tuple, result) -> tuple:
    """The kept scratch and the kernels' argument tuples, as _RepeatLogits takes them."""
    from specsample.kernels import logits as L

    scratch = repeat.scratch.get(repeat.plan_args[0], lambda: L._plan(*repeat.plan_args)[2])
    return L._kernel_args(*tensors[:6], None, result, scratch, repeat.sizes)


def _launches(repeat, args: tuple) -> None:
    for go, stage in zip(repeat.go, repeat.stages, strict=True):
        go(args[stage])


def parts(x: dict) -> dict:
    """name -> zero-argument callable, each one part of a repeat call on inputs `x` (after one call)."""
    import torch

    from specsample.kernels import logits as L
    from specsample.kernels._call_signature import tensor_signature

    _call(x)
    tensors, signature, repeat = _remembered(x)
    device, batch, k_plus_1 = repeat.plan_args[:3]
    result = _outputs(repeat)
    args = _kernel_args(repeat, tensors, result)
    return {
        "call": lambda: _call(x),
        "signature": lambda: tensor_signature(*tensors),
        "memo_get": lambda: L._REPEATS.get(signature),
        "empty_result": lambda: _outputs(repeat),
        "empty_one": lambda: torch.empty(batch, k_plus_1, dtype=torch.int32, device=device),
        "kernel_args": lambda: _kernel_args(repeat, tensors, result),
        "launches": lambda: _launches(repeat, args),
    }


def decomposed(x: dict):
    """The repeat call rebuilt from the parts `parts` times, in the call's order; returns its result."""
    tensors, _, repeat = _remembered(x)
    result = _outputs(repeat)
    _launches(repeat, _kernel_args(repeat, tensors, result))
    return result


def check_decomposed(x: dict) -> None:
    """The decomposed path returns what the call returns (same inputs, same seeds and offsets)."""
    import torch

    want, got = _call(x), decomposed(x)
    for name, a, b in zip(want._fields, want, got, strict=True):
        if not torch.equal(a, b):
            raise AssertionError(f"decomposed call differs from the call in {name}")


def time_parts(x: dict, calls: int, rounds: int, sync) -> dict:
    """µs per run of each part (ab_device_time.per_call_us: the median over rounds of `calls` runs)."""
    from benchmarks.diagnostics.ab_device_time import per_call_us

    return {name: per_call_us(fn, calls, rounds, sync) for name, fn in parts(x).items()}


def main(argv: list[str] | None = None) -> int:
    import torch

    from benchmarks.diagnostics.ab_device_time import parse_case
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--case", action="append", help="KERNEL:B:K:V:DTYPE (logits kernels), repeatable")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    with open(args.out, "a") as out:
        for text in args.case or CASES:
            case = Case(*parse_case(text, ("logits", "logits_onehot")))
            x = make_inputs(case, args.device)
            check_decomposed(x)
            times = time_parts(x, args.calls, args.rounds, sync)
            row = {"case": text, "calls": args.calls, "rounds": args.rounds, "device": args.device}
            row.update({f"{k}_us": round(v, 3) for k, v in times.items()})
            out.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
