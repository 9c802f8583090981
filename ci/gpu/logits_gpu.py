"""GPU check of `rejection_sample_logits` (issue 6): correctness on the device, then performance.

    python3 ci/gpu/logits_gpu.py            # writes $OUT/logits_gpu.json (OUT defaults to ./out)

1. Coupling with the float64 reference on the same Philox stream (device float32 math, approximate
   exp/log included): mismatching rows, rows the reference flags ambiguous, mismatches outside them,
   and the Clopper-Pearson bound TV(kernel, reference) <= CP(mismatches, n, 1e-6).
2. Determinism (two runs bit-identical) and CUDA-graph capture: replays with new seeds copied into
   the captured inputs equal eager calls with those seeds (also checks the arrival counters reset).
3. Performance at (B, K, V) = (64, 4, 151936) and (128, 8, 128256), bf16 and fp32, one-hot and classic
   drafts: do_bench median (eager) and CUDA-graph replay time, the stats phase alone, the floor
   (must-read bytes / copy bandwidth measured in this run) and a plain-PyTorch softmax-then-sample
   implementation measured in the same run; the default against the configurations of SWEEP (precise
   logarithms, 32-bit stats-pass offsets). The best configuration per case is reported.
Hostile cases (1, session 13): NaN, +inf and -inf logits scattered through target and draft rows and
whole rows without a finite logit, against the reference's "no mass" semantics. LOGITS_GPU_NO_PERF=1
runs 1-2 alone; LOGITS_GPU_GRAPH_ONLY=1 only the CUDA-graph checks of 2.
Prints a short table; takes ~2-3 minutes on an H200 (mostly Triton compiles and the float64
reference).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from gpu_common import copy_bandwidth, graph_time  # noqa: E402

from specsample.kernels import logits as L  # noqa: E402
from specsample.reference.logits import rejection_sample_logits_reference  # noqa: E402
from specsample.stats import clopper_pearson  # noqa: E402

OUT = os.environ.get("OUT", "./out")
DEV = "cuda"
SHAPES = [(64, 4, 151936), (128, 8, 128256)]
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
SWEEP = [
    None,  # launch_config defaults: stats kernel (1 warp, 512 x 8 tiles, 32-bit lanes) then race kernel
    {"fast_log": False},  # the precise libdevice logarithms in the race pass (default until run 14)
    # the stats pass's defaults until run 21: 64-bit column offsets, 2048 x 4 tiles (and its 32-bit
    # variant): keeps the run-21 comparison that made 4096 x 2 with lane_i32 the default re-runnable
    {"lane_i32": False, "stats_block": 2048, "stats_tiles": 4},
    {"lane_i32": True, "stats_block": 2048, "stats_tiles": 4},
]
# what perf() times per case. Classic drafts (session 10: target and draft rows in stats programs of
# their own): the default (1-warp programs over 512-column tiles x 8) against 1024 x 4 and 512 x 16
# on 1 warp and session 9's stats layout, 8 warps x 4096 x 2 (the race pass's tilings were swept in
# runs 40-45). One-hot drafts (session 9: the stats pass stores part statistics, the pick kernel
# replaces the race pass): the default (the same stats tiling, 4 warps per request in the pick)
# against 16 tiles per chunk and 2 or 8 warps per request. (Run 48 also timed 8 warps x 4096 x 2,
# 2 warps x 1024 x 8, 32 tiles and a 1-warp pick for one-hot: slower, benchmarks/NOTES.md.)
# the stats tiling until session 9 (classic) / 8 (one-hot); timed and coupled against the default
EIGHT_WARP_STATS = {"stats_block": 4096, "stats_tiles": 2, "stats_warps": 8}
PERF_SWEEP = {
    "classic": [None, {"stats_block": 1024, "stats_tiles": 4}, {"stats_tiles": 16}, EIGHT_WARP_STATS],
    "one-hot": [None, {"stats_tiles": 16}, {"pick_warps": 2}, {"pick_warps": 8}],
}  # fmt: skip
SWEEP_NAMES = "classic: default/1024x4/512x16/8w-4096x2; one-hot: default/512x16/pick-2w/pick-8w"
# LOGITS_GPU_SWEEP=stages: the stats pass with and without tile t + 1 loaded into registers before tile
# t's arithmetic (stats_prefetch, session 12; run 68 also timed Triton's shared-memory pipelining of the
# loop, since removed); the default timed first and last, so the spread of one version is in the table
# LOGITS_GPU_SWEEP=p-in-merge: classic drafts' race programs without the race over p (the fallback's),
# which the last-arriving program runs over row j only where the residual has no mass (session 12)
NO_PREFETCH = {"stats_prefetch": False}
P_IN_MERGE = {"race_p_in_merge": True, "race_screen": False}  # (the screened race has no p race to move)
STREAMED = {"race_screen": False}  # the full classic race (session 19: screened where programs hold >= 8 tiles)
NAMED_SWEEPS = {  # name: (classic configs, one-hot configs, names)
    "stages": ([None, NO_PREFETCH, {"stats_prefetch": True}, None],) * 2
    + ("default/no-prefetch/prefetch/default",),
    "p-in-merge": (
        [None, P_IN_MERGE, None, P_IN_MERGE],
        [None],
        "classic: default/p-in-merge/default/p-in-merge",
    ),
    # LOGITS_GPU_SWEEP=defaults: each case at its default alone (the couplings, then one timing each)
    "defaults": ([None], [None], "default"),
    # LOGITS_GPU_SWEEP=tiles: tilings around the session-12 defaults (race programs with fewer
    # registers fit 1024-token tiles; 16 stats tiles was within 1.5% in run 54)
    "tiles": (
        [
            None,
            {"stats_tiles": 16},
            {"race_block": 1024, "race_tiles": 4},
            {"race_block": 1024, "race_tiles": 8},
            {"race_tiles": 4},
            None,
        ],
        [None, {"stats_tiles": 16}, {"pick_warps": 8}, None],
        "classic: default/stats-16/race-1024x4/race-1024x8/race-512x4/default; "
        "one-hot: default/stats-16/pick-8w/default",
    ),
}
NAMED = NAMED_SWEEPS.get(os.environ.get("LOGITS_GPU_SWEEP", ""))
# one-hot drafts with the pick waiting for the whole pass, not per request (pick_poll off; on by default since
# session 47, run 252)
NO_POLL = {"pick_poll": False}
# classic drafts are decided in the statistics pass (classic_tail), their screened race's threshold shared by
# its programs (race_tau "shared"), each waiting for its own request's emit (race_poll): the default since
# session 47 (runs 253-254). Coupled besides: the accept kernel after the pass with the shared threshold
# (race_tau "shared" without the tail) and with its own (the threshold computed there); the tail with the
# race waiting for the whole pass. The graph checks screen (race programs of 8 tiles; one by default there).
SHARED_TAU = {"race_tau": "shared", "classic_tail": False}
NO_CLASSIC_TAIL = {"classic_tail": False}
NO_RACE_POLL = {"race_poll": False}
# the tail's emitters seeding the shared threshold (race_tau "seeded", session 48; opt-in: no faster on
# the H200, run 261)
SEEDED_TAU = {"race_tau": "seeded"}
SCREEN_GRAPH = {"race_screen": True, "race_tiles": 8}
ONE_HOT_COUPLED = [EIGHT_WARP_STATS,
                   {"stats_block": 1024, "stats_tiles": 8, "stats_warps": 2}, {"pick_warps": 1}]  # fmt: skip
# the stats pass's load-ahead switch against its default per dtype (on for 16-bit logits), both draft kinds
AHEAD_COUPLED = [{"stats_prefetch": False}, {"stats_prefetch": True}]
RESULTS: dict = {"device": None, "coupling": [], "graph": None, "copy_bw": None, "perf": [], "errors": []}


def save() -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "logits_gpu.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def make_inputs(batch, num_k, vocab, dtype, classic, gen, temps=(1.0,)):
    lg = (torch.randn(batch, num_k + 1, vocab, generator=gen, device=DEV) * 3.0).to(dtype)
    dl = (lg[:, :num_k].float() + torch.randn(batch, num_k, vocab, generator=gen, device=DEV)).to(dtype)
    x = torch.randint(0, vocab, (batch, num_k), generator=gen, device=DEV)
    pick = torch.rand(batch, num_k, generator=gen, device=DEV) < 0.5
    x = torch.where(pick, lg[:, :num_k].float().argmax(-1), x)
    t = torch.tensor(temps, device=DEV)[torch.randint(0, len(temps), (batch,), generator=gen, device=DEV)]
    seeds = torch.randint(-(2**62), 2**62, (batch,), generator=gen, device=DEV)
    offsets = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV)
    return dict(target_logits=lg, draft_token_ids=x, draft_logits=dl if classic else None,
                temperature=t.float(), seeds=seeds, offsets=offsets)  # fmt: skip


def spoil(logits, gen, rate=1e-4):
    """NaN, +inf and -inf logits at `rate` each (in place; ~15 of each per row at V = 151936), and
    every logit of every 7th request's last row NaN (a row with no finite logit: -1, not valid)."""
    for value in (float("nan"), float("inf"), float("-inf")):
        hit = torch.rand(logits.shape, generator=gen, device=DEV) < rate
        logits.masked_fill_(hit, value)
    logits[::7, -1] = float("nan")


def coupling(batch, num_k, vocab, dtype_name, classic, gen, config=None, fallback=False, hostile=False):
    """fallback (classic): draft logits equal to the target's and an invalid first draft in half the
    rows, which are rejected with an empty residual and must fall back to p. hostile: NaN / +-inf
    logits in target and draft rows (spoil), which carry no mass."""
    case = make_inputs(batch, num_k, vocab, DTYPES[dtype_name], classic, gen, temps=(0.0, 0.5, 1.0, 2.0))
    if hostile:
        spoil(case["target_logits"], gen)
        if classic:
            spoil(case["draft_logits"], gen)
    case["num_draft_tokens"] = torch.randint(0, num_k + 1, (batch,), generator=gen, device=DEV)
    if fallback:
        case["draft_logits"] = case["target_logits"][:, :num_k].clone()
        invalid = torch.rand(batch, generator=gen, device=DEV) < 0.5
        case["draft_token_ids"][:, 0] = torch.where(invalid, vocab, case["draft_token_ids"][:, 0])
    res = L.rejection_sample_logits(**case, _config=config)
    ref = rejection_sample_logits_reference(**{k: (v.cpu() if isinstance(v, torch.Tensor) else v)
                                               for k, v in case.items()})  # fmt: skip
    tokens, acc = res.tokens.cpu().numpy(), res.num_accepted.cpu().numpy()
    flags = (res.fallback.cpu().numpy() != ref.fallback) | (res.valid.cpu().numpy() != ref.valid)
    differ = (tokens != ref.tokens).any(1) | (acc != ref.num_accepted) | flags
    m = int(differ.sum())
    row = dict(B=batch, K=num_k, V=vocab, dtype=dtype_name, classic=classic, mismatches=m,
               ambiguous=int(ref.ambiguous.sum()), unexplained=int((differ & ~ref.ambiguous).sum()),
               tv_ucb=clopper_pearson(m, batch, 1e-6, "upper"), mean_accepted=float(acc.mean()),
               fallbacks=int(ref.fallback.sum()), config=config or {}, hostile=hostile)  # fmt: skip
    RESULTS["coupling"].append(row)
    print("coupling", row, flush=True)


def graph_check(gen, config=None, classic=True, key=None):
    batch, num_k, vocab = 32, 4, 32000
    case = make_inputs(batch, num_k, vocab, torch.bfloat16, classic, gen, temps=(0.0, 1.0))
    first = L.rejection_sample_logits(**case, _config=config)
    again = L.rejection_sample_logits(**case, _config=config)
    same = all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        L.rejection_sample_logits(**case, _config=config)  # warm-up outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = L.rejection_sample_logits(**case, _config=config)
    replays_ok = True
    for step in range(5):
        new_seeds = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV)
        case["seeds"].copy_(new_seeds)
        case["offsets"].add_(step + 1)
        graph.replay()
        eager = L.rejection_sample_logits(**case, _config=config)
        replays_ok &= all(torch.equal(a, b) for a, b in zip(captured, eager, strict=True))
    torch.cuda.synchronize()
    key = key or ("graph" if classic else "graph_one_hot")
    RESULTS[key] = dict(deterministic=same, replays_equal_eager=bool(replays_ok))
    print(key, RESULTS[key], flush=True)


def torch_reference_impl(target_logits, draft_token_ids, draft_logits, temperature, **_):
    """Plain PyTorch softmax-then-sample (every row materialised in fp32; all rows sampled)."""
    t = temperature[:, None, None]
    p = torch.softmax(target_logits.float() / t, dim=-1)
    batch, k_plus_1, vocab = p.shape
    num_k = k_plus_1 - 1
    x = draft_token_ids.long()
    p_x = p[:, :num_k].gather(-1, x[..., None]).squeeze(-1)
    if draft_logits is not None:
        q = torch.softmax(draft_logits.float() / t, dim=-1)
        q_x = q[:, :num_k].gather(-1, x[..., None]).squeeze(-1)
        accept = torch.rand_like(p_x) * q_x < p_x
    else:
        accept = torch.rand_like(p_x) < p_x
    a = accept.int().cumprod(dim=1).sum(dim=1)
    rows = torch.arange(batch, device=p.device)
    p_j = p[rows, a]
    if draft_logits is not None:
        q_j = q[rows, a.clamp(max=num_k - 1)] * (a < num_k)[:, None]
        r = (p_j - q_j).clamp_min(0)
    else:
        r = p_j.scatter(1, x.gather(1, a.clamp(max=num_k - 1)[:, None]), 0.0)
        r = torch.where((a < num_k)[:, None], r, p_j)
    token = (r / torch.empty_like(r).exponential_()).argmax(dim=1)
    out = torch.where(torch.arange(k_plus_1, device=p.device)[None] < a[:, None],
                      torch.nn.functional.pad(x, (0, 1), value=-1), -1)  # fmt: skip
    out[rows, a] = token
    return out, a


def stats_only(case, cfg):
    lg, dl = case["target_logits"], case["draft_logits"]
    batch, k_plus_1, vocab = lg.shape
    nc1 = triton.cdiv(vocab, cfg["stats_block"] * cfg["stats_tiles"])
    ws = torch.empty(4, batch * k_plus_1, nc1, device=DEV)
    arg = torch.empty(batch * k_plus_1, nc1, device=DEV, dtype=torch.int32)
    has = dl is not None
    sd = dl.stride() if has else (0, 0, 0)
    num_parts = 1 if has else triton.cdiv(vocab, min(L.GROUP_TOKENS, cfg["stats_block"]))
    parts = torch.empty(2, batch * k_plus_1, num_parts, device=DEV)

    def run():
        L._logits_stats_kernel[(triton.cdiv(batch * k_plus_1, cfg["stats_rows"]), nc1, 2 if has else 1)](
            lg, dl if has else lg, case["temperature"], lg, ws[0], ws[1], arg, ws[2], ws[3],
            parts[0], parts[1], arg, arg, arg, arg, arg,  # the lazy pass's pointers (LAZY off: unread)
            arg, arg, arg, arg, arg, arg, arg,  # the tail's outputs and the threshold words (TAIL off: unread)
            batch, vocab, nc1, num_parts, *lg.stride(), *sd, 1, 0, 0, 0, 0, 0, K=k_plus_1 - 1,
            HAS_DRAFT_LOGITS=has,
            RAGGED=False,
            BLOCK_ROWS=cfg["stats_rows"], BLOCK_V=cfg["stats_block"], TILES=cfg["stats_tiles"],
            LANE_I32=L.stats_lane_i32(cfg, vocab, lg.stride(2), sd[2]), PREFETCH=cfg["stats_prefetch"],
            num_warps=cfg["stats_warps"],
        )  # fmt: skip

    return do_bench(run, warmup=25, rep=200, return_mode="median")


def perf(batch, num_k, vocab, dtype_name, classic, bw, gen):
    dtype = DTYPES[dtype_name]
    case = make_inputs(batch, num_k, vocab, dtype, classic, gen)
    elt = torch.empty((), dtype=dtype).element_size()
    floor_bytes = batch * (num_k + 1) * vocab * elt + (batch * num_k * vocab * elt if classic else 0)
    floor_us = floor_bytes / bw * 1e6
    row = dict(B=batch, K=num_k, V=vocab, dtype=dtype_name, mode="classic" if classic else "one-hot",
               floor_us=floor_us, sweep=[])  # fmt: skip
    for over in (NAMED[0] if classic else NAMED[1]) if NAMED else PERF_SWEEP[row["mode"]]:
        cfg = L.launch_config(batch, num_k + 1, vocab, over, logit_bytes=elt)
        try:
            fn = lambda over=over: L.rejection_sample_logits(**case, _config=over)  # noqa: E731
            eager = do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3
            graphed = graph_time(fn) * 1e3
        except Exception as exc:  # record and go on: one bad config must not hide the others
            row["sweep"].append(dict(config=cfg, error=repr(exc)[:400]))
            continue
        try:
            phase1 = stats_only(case, cfg) * 1e3
        except Exception as exc:
            phase1 = float("nan")
            RESULTS["errors"].append(f"stats_only {cfg}: {exc!r}"[:400])
        row["sweep"].append(dict(config=cfg, eager_us=eager, graph_us=graphed, stats_us=phase1))
    ok = [s for s in row["sweep"] if "error" not in s]
    if ok:
        best = min(ok, key=lambda s: s["graph_us"])
        row.update(best_config=best["config"], eager_us=best["eager_us"], graph_us=best["graph_us"],
                   stats_us=best["stats_us"], frac_eager=floor_us / best["eager_us"],
                   frac_graph=floor_us / best["graph_us"])  # fmt: skip
    try:
        row["torch_us"] = do_bench(lambda: torch_reference_impl(**case), warmup=10, rep=100,
                                   return_mode="median") * 1e3  # fmt: skip
    except Exception as exc:
        row["torch_error"] = repr(exc)[:400]
    RESULTS["perf"].append(row)
    save()
    print("perf", {k: v for k, v in row.items() if k != "sweep"}, flush=True)


def main() -> int:
    start = time.time()
    RESULTS["device"] = dict(
        name=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__
    )
    gen = torch.Generator(device=DEV)
    gen.manual_seed(20261129)
    steps = [
        lambda: coupling(256, 4, 32000, "bf16", True, gen),
        lambda: coupling(256, 4, 32000, "fp32", False, gen),
        lambda: coupling(32, 8, 151936, "fp32", True, gen),
        lambda: coupling(128, 4, 151936, "fp32", True, gen, SWEEP[1]),
        lambda: coupling(128, 4, 151936, "bf16", True, gen, SWEEP[2]),
        lambda: coupling(32, 8, 128256, "bf16", False, gen, SWEEP[3]),
        lambda: coupling(128, 4, 151936, "fp32", True, gen, {"race_tiles": 1}),
        lambda: coupling(128, 4, 151936, "bf16", True, gen, EIGHT_WARP_STATS),
        lambda: coupling(64, 8, 128256, "fp32", False, gen, ONE_HOT_COUPLED[0]),
        lambda: coupling(64, 4, 151936, "bf16", False, gen, ONE_HOT_COUPLED[1]),
        lambda: coupling(64, 4, 151936, "fp32", False, gen, ONE_HOT_COUPLED[2]),
        lambda: coupling(64, 4, 151936, "bf16", False, gen, NO_POLL),
        lambda: coupling(128, 4, 151936, "bf16", True, gen, AHEAD_COUPLED[0]),
        lambda: coupling(64, 4, 151936, "bf16", False, gen, AHEAD_COUPLED[0]),
        lambda: coupling(32, 8, 128256, "fp32", True, gen, AHEAD_COUPLED[1]),
        lambda: coupling(64, 4, 151936, "fp32", False, gen, AHEAD_COUPLED[1]),
        lambda: coupling(128, 4, 151936, "bf16", True, gen, P_IN_MERGE),
        lambda: coupling(64, 4, 151936, "fp32", True, gen, P_IN_MERGE, fallback=True),
        lambda: coupling(64, 4, 151936, "fp32", True, gen, None, fallback=True),
        lambda: coupling(64, 4, 151936, "fp32", True, gen, STREAMED),
        lambda: coupling(128, 8, 128256, "bf16", True, gen, STREAMED, fallback=True),
        lambda: coupling(64, 4, 151936, "bf16", True, gen, SHARED_TAU),
        lambda: coupling(128, 8, 128256, "fp32", True, gen, SHARED_TAU, fallback=True),
        lambda: coupling(64, 4, 151936, "bf16", True, gen, NO_CLASSIC_TAIL),
        lambda: coupling(32, 8, 128256, "fp32", True, gen, NO_CLASSIC_TAIL, hostile=True),
        lambda: coupling(64, 4, 151936, "bf16", True, gen, NO_RACE_POLL),
        lambda: coupling(64, 4, 151936, "bf16", True, gen, SEEDED_TAU),
        lambda: coupling(128, 8, 128256, "fp32", True, gen, SEEDED_TAU, fallback=True),
        lambda: coupling(64, 4, 151936, "bf16", True, gen, None, hostile=True),
        lambda: coupling(64, 4, 151936, "bf16", False, gen, None, hostile=True),
        lambda: coupling(32, 8, 128256, "fp32", True, gen, None, hostile=True),
        lambda: coupling(64, 8, 128256, "fp32", False, gen, None, hostile=True),
    ]
    graph_steps = [
        lambda: graph_check(gen),
        lambda: graph_check(gen, classic=False),
        lambda: graph_check(gen, NO_POLL, classic=False, key="graph_one_hot_no_poll"),
        lambda: graph_check(gen, SCREEN_GRAPH, key="graph_classic_screened"),
        lambda: graph_check(gen, {**SCREEN_GRAPH, **NO_CLASSIC_TAIL}, key="graph_classic_no_tail"),
        lambda: graph_check(gen, {**SCREEN_GRAPH, **SHARED_TAU}, key="graph_classic_shared_tau_no_tail"),
        lambda: graph_check(gen, {**SCREEN_GRAPH, **NO_RACE_POLL}, key="graph_classic_no_race_poll"),
        lambda: graph_check(gen, {**SCREEN_GRAPH, **SEEDED_TAU}, key="graph_classic_seeded"),
    ]
    steps += graph_steps
    if os.environ.get("LOGITS_GPU_PERF_ONLY"):  # the timing sweep alone (coupling: a full run)
        steps = []
    if os.environ.get("LOGITS_GPU_GRAPH_ONLY"):  # the CUDA-graph checks alone (with LOGITS_GPU_NO_PERF)
        steps = graph_steps
    for step in steps:
        try:
            step()
        except Exception:
            RESULTS["errors"].append(traceback.format_exc()[-2000:])
            print(traceback.format_exc(), flush=True)
        save()
    try:
        shapes = () if os.environ.get("LOGITS_GPU_NO_PERF") else SHAPES  # =1: the couplings alone
        bw = copy_bandwidth() if shapes else None
        RESULTS["copy_bw"] = bw
        if bw:
            print(f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
        for batch, num_k, vocab in shapes:
            for dtype_name in DTYPES:
                for classic in (False, True):
                    perf(batch, num_k, vocab, dtype_name, classic, bw, gen)
    except Exception:
        RESULTS["errors"].append(traceback.format_exc()[-2000:])
        print(traceback.format_exc(), flush=True)
    RESULTS["wall_s"] = time.time() - start
    save()

    print("\ncoupling (device vs float64 reference, same Philox stream)")
    print(f"{'B,K,V':>16} {'dtype':>5} {'mode':>14} {'mismatch':>8} {'ambig':>6} {'unexpl':>6} {'TV ucb':>8} "
          f"{'fallback':>8}")  # fmt: skip
    for c in RESULTS["coupling"]:
        mode = "classic" if c["classic"] else "one-hot"
        shape = f"{c['B']},{c['K']},{c['V']}"
        mode += "".join(f" {k}" for k in c["config"]) + (" hostile" if c.get("hostile") else "")
        print(f"{shape:>16} {c['dtype']:>5} {mode:>14} {c['mismatches']:>8} {c['ambiguous']:>6} "
              f"{c['unexplained']:>6} {c['tv_ucb']:>8.2e} {c.get('fallbacks', 0):>8}")  # fmt: skip
    graphs = (RESULTS["graph"], RESULTS.get("graph_one_hot"), RESULTS.get("graph_one_hot_no_poll"),
              RESULTS.get("graph_classic_screened"), RESULTS.get("graph_classic_no_tail"),
              RESULTS.get("graph_classic_shared_tau_no_tail"), RESULTS.get("graph_classic_no_race_poll"),
              RESULTS.get("graph_classic_seeded"))  # fmt: skip
    print("graph: {}; one-hot: {}; one-hot pick_poll off: {}; classic screened: {}; classic_tail off: {}; "
          "race_tau shared without the tail: {}; race_poll off: {}; race_tau seeded: {}".format(*graphs))  # fmt: skip
    print(f"\nperformance (us, median); copy bandwidth {RESULTS['copy_bw'] or 0:.3e} B/s")
    print(f"{'B,K,V':>16} {'dtype':>5} {'mode':>8} {'floor':>7} {'eager':>7} {'graph':>7} {'stats':>7} "
          f"{'%floor(g)':>9} {'%floor(e)':>9} {'torch':>7}  graph per config "
          f"{NAMED[2] if NAMED else SWEEP_NAMES}")  # fmt: skip
    for r in RESULTS["perf"]:
        if "graph_us" not in r:
            print(f"{r['B']},{r['K']},{r['V']} {r['dtype']} {r['mode']}: all configs failed: {r['sweep'][0]}")
            continue
        shape = f"{r['B']},{r['K']},{r['V']}"
        torch_us, pct, pct_e = r.get("torch_us", float("nan")), 100 * r["frac_graph"], 100 * r["frac_eager"]
        per = "/".join(f"{x['graph_us']:.1f}" if "graph_us" in x else "err" for x in r["sweep"])
        per += "  stats " + "/".join(f"{x['stats_us']:.1f}" if "stats_us" in x else "err" for x in r["sweep"])
        print(f"{shape:>16} {r['dtype']:>5} {r['mode']:>8} {r['floor_us']:7.1f} {r['eager_us']:7.1f} "
              f"{r['graph_us']:7.1f} {r['stats_us']:7.1f} {pct:8.0f}% {pct_e:8.0f}% "
              f"{torch_us:7.1f}  {per}")  # fmt: skip
    print(f"errors: {len(RESULTS['errors'])}; wall {RESULTS['wall_s']:.0f} s; JSON: {OUT}/logits_gpu.json")
    return 1 if RESULTS["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
