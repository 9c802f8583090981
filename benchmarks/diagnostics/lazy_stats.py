"""The lazy statistics pass of `rejection_sample_logits` (`stats_lazy`) against the eager one, on the H200.

    python3 benchmarks/diagnostics/lazy_stats.py --out lazy.jsonl [--rounds 2]

With `stats_lazy` the stats programs skip the rows of a request after a draft that an earlier
position's last program found certainly rejected (kernels/logits.py `_stats_block`). How much that
saves depends on where requests reject, so each of issue 6's eight cases is timed on two inputs:
- `bench`: the benchmark's inputs (benchmarks/inputs.py; classic acceptance ~0.55 per draft, one-hot
  drafts the draft argmax, accepted with p(x), ~0.1 at these shapes);
- `all_accept`: the worst case for the lazy pass, every draft accepted so every row is read (classic:
  draft logits equal to the target's, so p = q; one-hot: the drafted token's target logit raised by
  60, so p(x) ~ 1), which leaves the flags' and arrivals' cost without any saving.
The configurations (CONFIGS: eager and lazy) are timed in each round with the harness's timers
(`timed_configuration` of ab_device_time.py: do_bench median, CUDA-graph replay, zero_pause), and
their outputs compared (`equal_to_default`: against eager, which must hold bit for bit). For
each lazy configuration the script also counts the target rows the pass read (`rows_read`, of B (K+1)): the
statistics scratch is set to NaN before one call and a row whose chunks all stay NaN was skipped. With
`stats_recheck` (the default since session 42) a row whose programs stopped partway counts as read, so the
count no longer measures bytes: time is the measure.
One JSON line per (round, case, input, configuration); `--tree DIR` times DIR's specsample instead
of this checkout's (the harness is always this checkout's), e.g. a copy with a timing-only patch;
`--cases` keeps the cases whose label holds one of its comma-separated substrings; `--case` times other
shapes instead of the eight.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..", "..")))

from benchmarks.diagnostics.ab_device_time import parse_case  # noqa: E402  (no torch at import)

CONFIGS = ({"stats_lazy": False}, {"stats_lazy": True})  # (run 185 also timed a bounded wait, since removed)
CASES = (  # issue 6's eight cases
    ("logits", 64, 4, 151936, "float32"),
    ("logits", 64, 4, 151936, "bfloat16"),
    ("logits", 128, 8, 128256, "float32"),
    ("logits", 128, 8, 128256, "bfloat16"),
    ("logits_onehot", 64, 4, 151936, "float32"),
    ("logits_onehot", 64, 4, 151936, "bfloat16"),
    ("logits_onehot", 128, 8, 128256, "float32"),
    ("logits_onehot", 128, 8, 128256, "bfloat16"),
)


def all_accept(x: dict) -> dict:
    """The inputs with every draft accepted (module docstring)."""
    import torch

    x = dict(x)
    num_k = x["draft_token_ids"].shape[1]
    if x.get("draft_logits") is not None:
        x["draft_logits"] = x["target_logits"][:, :num_k].clone()
    else:
        lg = x["target_logits"].clone()
        rows = torch.arange(lg.shape[0], device=lg.device)[:, None]
        cols = torch.arange(num_k, device=lg.device)[None, :]
        lg[rows, cols, x["draft_token_ids"]] += 60.0
        x["target_logits"] = lg
    return x


def rows_read(x: dict, config: dict) -> int:
    """Target rows whose statistics one call computed (module docstring)."""
    import torch

    from specsample.kernels import logits as kl
    from specsample.kernels._stream_buffers import stream_buffer

    batch, k_plus_1, vocab = x["target_logits"].shape
    cfg = kl.launch_config(batch, k_plus_1, vocab, config, logit_bytes=x["target_logits"].element_size())
    nc = -(-vocab // (cfg["stats_block"] * cfg["stats_tiles"]))
    kl.rejection_sample_logits(**x, _config=config)
    buf = stream_buffer(x["target_logits"].device, "logits_tmax", batch * k_plus_1 * nc, torch.float32)
    buf.fill_(float("nan"))
    kl.rejection_sample_logits(**x, _config=config)
    stats = buf[: batch * k_plus_1 * nc].view(batch * k_plus_1, nc)
    return int((~torch.isnan(stats).all(dim=1)).sum())


KERNELS = ("logits", "logits_onehot")  # what `--case` may name


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tree", help="directory holding the specsample package (default: this checkout)")
    ap.add_argument(
        "--cases",
        default="",
        help="comma-separated substrings: time only the cases whose label holds one (default: all eight)",
    )
    ap.add_argument("--case", action="append", default=[], metavar="KERNEL:B:K:V:DTYPE",
                    help="time these cases instead of issue 6's eight (repeatable), e.g. "
                         "logits_onehot:16:4:128256:bfloat16")  # fmt: skip
    ap.add_argument("--config", action="append", default=[], metavar="JSON",
                    help="time these launch_config overrides instead of CONFIGS (repeatable), e.g. "
                         '\'{"stats_lazy": true, "stats_tiles": 4}\'')  # fmt: skip
    args = ap.parse_args(argv)
    configs = [json.loads(c) for c in args.config] or list(CONFIGS)
    cases = [parse_case(c, KERNELS) for c in args.case] or list(CASES)
    # another specsample tree (e.g. a patched copy: `git archive HEAD specsample | tar -x -C DIR`)
    if args.tree:
        sys.path.insert(0, os.path.abspath(args.tree))
    from benchmarks.diagnostics.ab_device_time import timed_configuration, zero_pause_flush
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from benchmarks.timing import CudaTimer
    from specsample.kernels import logits as kl

    timer = CudaTimer()
    flush = zero_pause_flush()
    with open(args.out, "a") as out:
        for rnd in range(args.rounds):
            for kernel, b, k, v, dtype in cases:
                case = Case(kernel, b, k, v, dtype)
                if args.cases and not any(c in case.label for c in args.cases.split(",")):
                    continue
                bench = make_inputs(case, "cuda")
                for name, x in (("bench", bench), ("all_accept", all_accept(bench))):
                    eager = kl.rejection_sample_logits(**x, _config={"stats_lazy": False})
                    for config in configs:
                        row = dict(round=rnd, case=case.label, inputs=name, **config,
                                   num_accepted_mean=float(eager.num_accepted.float().mean()),
                                   **timed_configuration(lambda c=config: kl.rejection_sample_logits(**x, _config=c),
                                                         eager, timer, flush))  # fmt: skip
                        if config.get("stats_lazy", True) and rnd == 0:
                            row["rows_read"] = rows_read(x, config)
                            row["rows"] = b * (k + 1)
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
