"""Where the classic logits call's race spends its time, by `%globaltimer` stamps inside the race kernel.

    TRITON_CACHE_DIR=/tmp/tc_race python3 benchmarks/diagnostics/race_stamps.py --out race.jsonl \
        [--config '{"race_tau": "seeded"}'] [--case logits:64:4:151936:bfloat16]

Issue 6's classic bf16 (64, 4, 151936) stands 2-3 µs over what it may take (benchmarks/NOTES.md, session
51), and two levers predicted to cut the race's reads (race_tau "seeded": 1.7% of its tiles read instead of
13.4%, by screen_simulation.py) gave nothing. This tells whether the race's reads or its wait cost the time.
`_logits_race_kernel`, `_race_block`, `_race_merge` and `_screened_race` are copied from
specsample/kernels/logits.py's source (so the copy follows any change there) with stamps added; every
race program (grid: request blocks x vocabulary chunks of row j) records
- s0 at its start (PDL: it may start while the statistics pass runs),
- s1 once its wait ends (race_poll: its request's ready word, released by the tail's emitter),
- s2 once its chunk's candidates are computed (the screened race's reads),
- s3 once the arrival and, for the request block's last program, the merge and emit are issued,
- s4 after its final griddepcontrol.wait (POLL with PDL: the whole statistics pass has completed),
- the tiles it read (`want` held: the screen let them through; every tile unscreened), the arrival
  counter it saw (NC2 - 1: it merged) and its SM.
The programs that finish before the pass ends all wait in that final wait, so min(s4) is the pass's end as
the race sees it (with no such program it is later: `early_programs` says how many there were). Per call
every stamp is taken relative to the earliest s0; a record gives medians over `--calls` calls, each
preceded by ab_device_time.py's zero_pause flush (do_bench's dirty L2 plus a 100 µs device pause), of
- `pass_end` (min s4), `race_end` (max s3) and `race_after_pass` = race_end - pass_end: what the race adds
  to the call beyond the statistics pass,
- `ready_median`, `ready_last` (s1), `ready_last_to_pass_end` (pass_end - max s1),
- for the programs that end after the pass (`late_programs`): their median wait end relative to the pass
  end, their median read time (s2 - s1) and merge time (s3 - s2),
- `tiles_read_frac` (tiles read / tiles the programs own), `programs_reading` (programs reading any tile),
- `read_median` and `read_max` (s2 - s1 over all programs).
zero_pause_us of the stamped call and the production call in the same process say what the stamps cost.
`--inputs all_accept` times lazy_stats.py's every-draft-accepted inputs instead of the benchmark's.
Under TRITON_INTERPRET=1 the stamps read 0 (a smoke test: outputs equal to the production kernel's, tiles
counted).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, REPO)

from benchmarks.diagnostics.ab_device_time import parse_case  # noqa: E402  (no torch at import)
from benchmarks.diagnostics._stamps import append_record, load_generated, replace_once, timed_medians  # noqa: E402

STAMPS = ("start", "ready", "read", "merge", "pass_wait")  # s0..s4
WORDS = len(STAMPS) + 3  # + tiles read, arrival counter seen, SM


def _replace(src: str, old: str, new: str, times: int = 1) -> str:
    """replace_once on logits.py's source."""
    return replace_once(src, old, new, "logits.py", times)


_WANT = "        want = (tb > _NEG_INF) & (tb >= tl.maximum(best, tau)) & ((step == 0) | (t != lead))\n"
_SCREEN_EDITS = (
    ("    for step in range(TILES + 1):", "    nread = tl.zeros((BLOCK_ROWS,), tl.int32)\n    for step in range(TILES + 1):"),
    (_WANT, _WANT + "        nread += want.to(tl.int32)\n"),
    ("    return best_r, group_r, best_p, group_p\n", "    return best_r, group_r, best_p, group_p, nread\n"),
)
_UNSCREENED = "        best_p, group_p = _best_slot(mass_p - log_e, zs)  # unused with P_IN_MERGE\n"
_BLOCK_EDITS = (
    ("        best_r, group_r, best_p, group_p = _screened_race(",
     "        best_r, group_r, best_p, group_p, nread = _screened_race("),
    (_UNSCREENED, _UNSCREENED + "        nread = tl.zeros((BLOCK_ROWS,), tl.int32) + TILES\n"),
    ("    _race_merge(req,", "    s2 = _gt((best_r > 0).to(tl.int32))\n    arrived = _race_merge(req,"),
)  # fmt: skip
_REQ = "    req = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)\n"
_FINAL_WAIT = "    if POLL:\n        if PDL:\n            gdc_wait()\n"
_STORE = (
    "    at = stamp_ptr + (tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)) * "
    + str(WORDS)
    + "\n"
    + "".join(f"    tl.store(at + {i}, s{i})\n" for i in range(len(STAMPS)))
    + f"    tl.store(at + {len(STAMPS)}, tl.max(nread, axis=0).to(tl.int64))\n"
    + f"    tl.store(at + {len(STAMPS) + 1}, arrived.to(tl.int64))\n"
    + f"    tl.store(at + {len(STAMPS) + 2}, _smid(req.to(tl.int32)))\n"
)
_KERNEL_EDITS = (
    ("def _logits_race_kernel(\n", "def _logits_race_kernel_stamped(\n    stamp_ptr,\n"),
    (_REQ, _REQ + "    s0 = _gt(req.to(tl.int32))\n"),
    ("    _race_block(tl.program_id(0),",
     "    s1 = _gt(req.to(tl.int32))\n    nread, s2, arrived = _race_block(tl.program_id(0),"),
    (_FINAL_WAIT, "    s3 = _gt(req.to(tl.int32) + arrived)\n" + _FINAL_WAIT + "    s4 = _gt(req.to(tl.int32))\n" + _STORE),
)  # fmt: skip


def stamped_sources(kl) -> str:
    """The generated module's source: stamped `_screened_race`, `_race_merge`, `_race_block` and
    `_logits_race_kernel_stamped` (they shadow logits.py's names in the generated module)."""
    screen = inspect.getsource(kl._screened_race.fn)
    for old, new in _SCREEN_EDITS:
        screen = _replace(screen, old, new)
    merge = inspect.getsource(kl._race_merge.fn).rstrip("\n") + "\n    return arrived\n"
    block = inspect.getsource(kl._race_block.fn)
    for old, new in _BLOCK_EDITS:
        block = _replace(block, old, new)
    block = block.rstrip("\n") + "\n    return nread, s2, arrived\n"
    kernel = inspect.getsource(kl._logits_race_kernel.fn)
    for old, new in _KERNEL_EDITS:
        kernel = _replace(kernel, old, new)
    return "\n\n".join((screen, merge, block, kernel)) + "\n"


def load_stamped_kernel(interpreting: bool):
    """`_logits_race_kernel_stamped`, from a generated module."""
    from specsample.kernels import logits as kl

    return load_generated("specsample.kernels.logits", stamped_sources(kl), interpreting,
                          "race_stamped_gen")._logits_race_kernel_stamped  # fmt: skip


def race_grid(x: dict, config: dict) -> tuple[int, int, int]:
    """(request blocks, chunks, tiles per program) of the race launch under `config`."""
    from specsample.kernels import logits as kl

    batch, k_plus_1, vocab = x["target_logits"].shape
    cfg = kl.launch_config(batch, k_plus_1, vocab, config or None, logit_bytes=x["target_logits"].element_size())
    chunk = cfg["race_block"] * cfg["race_tiles"]
    return -(-batch // cfg["race_rows"]), -(-vocab // chunk), cfg["race_tiles"]


@contextlib.contextmanager
def stamping(kernel, stamps):
    """logits._launch with the stamped race kernel, `stamps` [P, WORDS] int64 as its first argument."""
    from specsample.kernels import logits as kl

    kernel_args, race = kl._kernel_args, kl._logits_race_kernel

    def with_stamps(*args, **kwargs):
        stats, accept, last = kernel_args(*args, **kwargs)
        return stats, accept, (stamps, *last)

    kl._kernel_args, kl._logits_race_kernel = with_stamps, kernel
    try:
        yield
    finally:
        kl._kernel_args, kl._logits_race_kernel = kernel_args, race


def timeline(st, tiles: int) -> dict:
    """One call's stamps [P, WORDS] (numpy int64) as µs after the earliest program start (docstring)."""
    import numpy as np

    s = (st[:, : len(STAMPS)] - st[:, 0].min()) / 1e3
    nread = st[:, len(STAMPS)]
    pass_end = float(s[:, 4].min())
    late = s[:, 3] > pass_end
    out = {
        "start_last": float(s[:, 0].max()),
        "ready_median": float(np.median(s[:, 1])),
        "ready_last": float(s[:, 1].max()),
        "pass_end": pass_end,
        "early_programs": int((s[:, 3] <= pass_end).sum()),
        "race_end": float(s[:, 3].max()),
        "race_after_pass": float(s[:, 3].max()) - pass_end,
        "ready_last_to_pass_end": pass_end - float(s[:, 1].max()),
        "read_median": float(np.median(s[:, 2] - s[:, 1])),
        "read_max": float((s[:, 2] - s[:, 1]).max()),
        "late_programs": int(late.sum()),
        "tiles_read_frac": float(nread.sum()) / (len(nread) * tiles),
        "programs_reading": int((nread > 0).sum()),
        "end": float(s[:, 4].max()),
    }
    if late.any():
        out["late_ready_to_pass_end"] = float(np.median(s[late, 1] - pass_end))
        out["late_read_median"] = float(np.median(s[late, 2] - s[late, 1]))
        out["late_merge_median"] = float(np.median(s[late, 3] - s[late, 2]))
        out["late_reading"] = int((nread[late] > 0).sum())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--case", action="append", default=[], metavar="logits:B:K:V:DTYPE",
                    help="instead of classic bf16 (64, 4, 151936) (repeatable)")  # fmt: skip
    ap.add_argument("--config", action="append", default=[], metavar="JSON",
                    help="launch_config overrides, each timed (default: the defaults alone)")
    ap.add_argument("--inputs", choices=("bench", "all_accept"), default="bench")
    ap.add_argument("--raw", help="directory: the last call's stamps per case and config (.npy)")
    args = ap.parse_args(argv)
    import numpy as np
    import torch

    from benchmarks.diagnostics.lazy_stats import all_accept
    from benchmarks.floors import Case
    from benchmarks.inputs import make_inputs
    from specsample.kernels import logits as kl
    from specsample.kernels._launch import interpreting

    cuda = torch.cuda.is_available() and not interpreting()
    device = "cuda" if cuda else "cpu"
    default_case = ("logits", 64, 4, 151936, "bfloat16") if cuda else ("logits", 3, 2, 700, "float32")
    cases = [parse_case(c, ("logits",)) for c in args.case] or [default_case]
    configs = [json.loads(c) for c in args.config] or [{}]
    kernel = load_stamped_kernel(not cuda)
    if cuda:
        from benchmarks.diagnostics.ab_device_time import zero_pause_flush

        flush = zero_pause_flush()
    for name, b, k, v, dtype in cases:
        x = make_inputs(Case(name, b, k, v, dtype), device)
        if args.inputs == "all_accept":
            x = all_accept(x)
        for config in configs:
            blocks, chunks, tiles = race_grid(x, config)
            stamps = torch.zeros(blocks * chunks, WORDS, dtype=torch.int64, device=device)

            def production(c=config):
                return kl.rejection_sample_logits(**x, _config=dict(c))

            def call(c=config, s=stamps):
                with stamping(kernel, s):
                    return kl.rejection_sample_logits(**x, _config=dict(c))

            got, want = call(), production()
            record = {"case": f"{name}:{b}:{k}:{v}:{dtype}", "inputs": args.inputs, "config": config,
                      "programs": blocks * chunks, "tiles": tiles, "calls": args.calls,
                      "num_accepted_mean": float(want.num_accepted.float().mean()),
                      "equal_to_production": all(torch.equal(g, w) for g, w in zip(got, want, strict=True))}  # fmt: skip
            if cuda:
                record.update(timed_medians(call, production, flush, args.calls,
                                            lambda s=stamps, t=tiles: timeline(s.cpu().numpy(), t)))  # fmt: skip
                if args.raw:
                    os.makedirs(args.raw, exist_ok=True)
                    tag = "-".join(f"{k}_{v}" for k, v in sorted(config.items())) or "default"
                    np.save(os.path.join(args.raw, f"{tag}-{args.inputs}-B{b}-K{k}-V{v}-{dtype}.npy"), stamps.cpu().numpy())
            else:
                st = stamps.cpu().numpy()
                record.update(timeline(st, tiles))
                record["tiles_read"] = int(st[:, len(STAMPS)].sum())
                record["merges"] = int((st[:, len(STAMPS) + 1] == chunks - 1).sum())
            append_record(args.out, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
