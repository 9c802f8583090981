"""GPU check of the Gumbel kernels (issue 5): `fast_sample`, `sample_from_logits`, `renorm_draft_probs`.

    python3 ci/gpu/gumbel_gpu.py        # writes $OUT/gumbel_gpu.json (OUT defaults to ./out)

(a) Noise: the kernels' Exp(1) (one approximate log2 per word on the GPU) against the float64
    definition on 2^22 Philox words: max relative error <= 4e-6, never 0 or inf.
(b) Coupling at V = 151936 and 128256, fp32 and bf16, n = 1 and 4, sample_from_logits at T = 0.7:
    kernel ids == the float64 reference on the same Philox words (words dumped by probe kernels,
    scores in torch float64): the grouped race for n = 1 (group scores P_g / E_g, inverse CDF in the
    winning group), the per-token race otherwise; except near-ties (relative score gap <= 1e-5, or
    a draw within 1e-12 of a CDF boundary); Clopper-Pearson TV(kernel, reference) <= 1e-3 at
    delta = 1e-6 counting every mismatch. A few rows are also checked against the numpy reference
    (reference.gumbel) id for id.
(c) Laws, 2^22 draws each from one row broadcast with stride 0: fast_sample at V = 151936
    (softmax of N(0, 3^2) logits), the Plackett-Luce law of triples at V = 6, sample_from_logits at
    V = 32000, designed chi-square (alpha = 1e-6, beta = 1e-6, eps = the smallest of
    0.005/0.01/0.02/0.03 the design allows); race winner KS + independence at V = 1000.
    Pre-registered tail test: 2^27 (1.3e8) draws from one head token (weight 1) and three decades
    of 100 tokens each at relative probability 1e-5, 1e-6, 1e-7; per-decade counts against their
    exact rates by exact two-sided binomial tests at 1e-6 / 3 each.
(d) CUDA graphs: fast_sample captured once with a torch generator and once with seeds/offsets
    (offsets.add_(1) captured), replayed 10^4 times with counts accumulated inside the graph: fresh
    draws every replay, replay == eager for the same RNG state, the law holds on the 10^4 x B draws,
    no device assert; an eager call under torch.cuda.set_sync_debug_mode("error") shows no host sync.
(e) Performance: triton.testing.do_bench median, fp32 and bf16, (B, V) = (1, 151936), (64, 151936),
    (256, 128256), with torch.multinomial and the torch-ops Gumbel (probs / exponential_()).argmax
    measured in the same run, CUDA-graph replay time, device copy bandwidth measured here,
    floor = B V dtype-bytes / bandwidth; the one-launch race (merge in the last-arriving program)
    against the two-launch race, interleaved in the same run; with GUMBEL_GPU_SWEEP=1 the grouped
    race's tiling sweep and the per-token race's default timed beside it.
Prints a summary table; exit code 1 when any check fails. About 2-3 minutes on an H200.
GUMBEL_GPU_SMOKE=1 runs (a)-(c) on the CPU under the Triton interpreter at small sizes.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

SMOKE = os.environ.get("GUMBEL_GPU_SMOKE") == "1"
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from scipy import stats as sps  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from gpu_common import ALPHA, BETA, copy_bandwidth, graph_law_row, graph_time, pick_eps  # noqa: E402

from specsample.kernels import gumbel as kg  # noqa: E402
from specsample.kernels._launch import interpreting  # noqa: E402
from specsample.kernels.philox import STREAM_GUMBEL, STREAM_GUMBEL_GROUP, philox_words  # noqa: E402
from specsample.reference import gumbel as rg  # noqa: E402
from specsample.reference.laws import plackett_luce_law  # noqa: E402
from specsample.stats import assert_gof, tv_ucb_from_coupling  # noqa: E402
from specsample.stats.continuous import race_winner_checks  # noqa: E402

OUT = os.environ.get("OUT", "./out")
DEV = "cpu" if SMOKE else "cuda"
REL_TOL = 1e-5
CDF_TOL = (
    1e-12  # grouped race: float64 scan vs sequential cumulative sum (tests/kernels/test_gumbel_coupling.py)
)
COUPLING_VOCABS = (1000, 4099) if SMOKE else (151936, 128256)
COUPLING_ROWS, COUPLING_BATCH = (512, 256) if SMOKE else (16384, 512)
LAW_ROWS = 2**15 if SMOKE else 2**22
TAIL_DRAWS = 2**16 if SMOKE else 2**27
SHAPES = [(1, 151936), (64, 151936), (256, 128256)]
TARGETS_US = {(1, 151936): 8.0, (64, 151936): 13.0, (256, 128256): 44.0}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
RESULTS: dict = {
    "device": None,
    "noise": None,
    "coupling": [],
    "laws": [],
    "tail": None,
    "graphs": [],
    "sync": None,
    "copy_bw": None,
    "perf": [],
    "sweep": [],
    "merge": [],
    "failures": [],
    "errors": [],
}


def save() -> None:
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "gumbel_gpu.json"), "w") as f:
        json.dump(RESULTS, f, indent=1, default=str)


def check(ok: bool, what: str) -> bool:
    if not ok:
        RESULTS["failures"].append(what)
        print("FAIL:", what, flush=True)
    return ok


# ---------------------------------------------------------------------------------------------
# probes: raw Philox words and the kernels' Exp(1)
# ---------------------------------------------------------------------------------------------


@triton.jit
def _words_kernel(seeds_ptr, offsets_ptr, words_ptr, V, BLOCK: tl.constexpr):
    # words_ptr [B, V] int32: bit pattern of token v's word (v % 4) of philox(index = v // 4)
    row = tl.program_id(0).to(tl.int64)
    v = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(seeds_ptr + row)
    offset = tl.load(offsets_ptr + row)
    group = v // 4
    w0, w1, w2, w3 = philox_words(seed, offset, group, STREAM_GUMBEL, group * 0)
    j = v % 4
    w = tl.where(j == 0, w0, tl.where(j == 1, w1, tl.where(j == 2, w2, w3)))
    tl.store(words_ptr + row * V + v, w.to(tl.int32, bitcast=True), mask=v < V)


@triton.jit
def _noise_kernel(words_ptr, out_ptr, N, BLOCK: tl.constexpr, FAST_LOG2: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    w = tl.load(words_ptr + i, mask=i < N, other=0).to(tl.uint32, bitcast=True)
    tl.store(out_ptr + i, kg._exponential_noise(w, FAST_LOG2), mask=i < N)


def words_of(seeds: torch.Tensor, offsets: torch.Tensor, vocab: int) -> torch.Tensor:
    out = torch.empty((seeds.numel(), vocab), dtype=torch.int32, device=DEV)
    _words_kernel[(seeds.numel(), triton.cdiv(vocab, 1024))](seeds, offsets, out, vocab, BLOCK=1024)
    return out


@triton.jit
def _group_words_kernel(seeds_ptr, offsets_ptr, words_ptr, G, BLOCK: tl.constexpr):
    # words_ptr [B, 3, G] int32: words 0, 1, 2 of philox(index = g, STREAM_GUMBEL_GROUP), the grouped
    # race's E_g and u_g
    row = tl.program_id(0).to(tl.int64)
    g = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(seeds_ptr + row)
    offset = tl.load(offsets_ptr + row)
    w0, w1, w2, _ = philox_words(seed, offset, g, STREAM_GUMBEL_GROUP, g * 0)
    base = words_ptr + row * 3 * G + g
    tl.store(base, w0.to(tl.int32, bitcast=True), mask=g < G)
    tl.store(base + G, w1.to(tl.int32, bitcast=True), mask=g < G)
    tl.store(base + 2 * G, w2.to(tl.int32, bitcast=True), mask=g < G)


def grouped_race64(p: torch.Tensor, seeds: torch.Tensor, offsets: torch.Tensor):
    """(ids [B], ambiguous [B]) of the grouped race (reference.gumbel.grouped_race) in torch float64 on
    the device: ambiguous where the two best group scores are within REL_TOL or u_g C_last lies
    within CDF_TOL of a C_v of the winning group."""
    batch, vocab = p.shape
    groups = triton.cdiv(vocab, kg.GROUP_TOKENS)
    words = torch.empty((batch, 3, groups), dtype=torch.int32, device=DEV)
    _group_words_kernel[(batch, triton.cdiv(groups, 256))](seeds, offsets, words, groups, BLOCK=256)
    w = words.to(torch.int64) & 0xFFFFFFFF
    e = -torch.log1p(-(w[:, 0].double() + 0.5) * 2.0**-32)
    u = (w[:, 1].double() * 2.0**20 + (w[:, 2] >> 12).double()) * 2.0**-52
    q = p.double()
    q = torch.where((q > 0) & torch.isfinite(q), q, 0.0)
    blocks = torch.nn.functional.pad(q, (0, groups * kg.GROUP_TOKENS - vocab)).view(batch, groups, -1)
    mass = blocks.sum(dim=2)
    score = torch.where(mass > 0, mass / e, 0.0)
    top2, _ = torch.topk(score, min(2, groups), dim=1)
    second = top2[:, 1] if groups > 1 else torch.zeros_like(top2[:, 0])
    near = (top2[:, 0] - second) <= REL_TOL * top2[:, 0]
    group = torch.argmax(score, dim=1)  # the first maximum
    found = score.gather(1, group[:, None])[:, 0] > 0
    block = blocks[torch.arange(batch, device=DEV), group]
    cdf = torch.cumsum(block, dim=1)
    target = u.gather(1, group[:, None])[:, 0] * cdf[:, -1]
    hit = (cdf > target[:, None]) & (block > 0)
    lane = torch.arange(block.shape[1], device=DEV)
    last = torch.where(block > 0, lane, -1).max(dim=1).values
    first = torch.where(hit, lane, block.shape[1]).min(dim=1).values
    token = torch.where(first < block.shape[1], first, last)
    ids = torch.where(found, group * kg.GROUP_TOKENS + token, -1)
    cdf_near = (cdf - target[:, None]).abs().min(dim=1).values <= CDF_TOL * cdf[:, -1]
    return ids, near | cdf_near


def exp64(words: torch.Tensor) -> torch.Tensor:
    """float64 Exp(1) = -log1p(-t), t = (word + 1/2) 2^-32, on the device."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    return -torch.log1p(-(w.double() + 0.5) * 2.0**-32)


def noise_accuracy() -> None:
    n = 2**16 if SMOKE else 2**22
    words = torch.randint(-(2**31), 2**31, (n,), dtype=torch.int32, device=DEV)
    words[:4] = torch.tensor([0, -1, 2**31 - 1, -(2**31)], dtype=torch.int32)
    out = torch.empty(n, dtype=torch.float32, device=DEV)
    _noise_kernel[(triton.cdiv(n, 1024),)](words, out, n, BLOCK=1024, FAST_LOG2=not interpreting())
    ref = exp64(words)
    rel = (out.double() / ref - 1).abs()
    row = dict(
        words=n,
        max_rel_err=float(rel.max()),
        finite_positive=bool(torch.isfinite(out).all() and (out > 0).all()),
    )
    RESULTS["noise"] = row
    print("noise", row, flush=True)
    check(row["max_rel_err"] <= 4e-6 and row["finite_positive"], f"noise accuracy {row}")


# ---------------------------------------------------------------------------------------------
# (b) coupling
# ---------------------------------------------------------------------------------------------


def softmax_rows(batch: int, vocab: int, gen: torch.Generator, sigma: float = 3.0) -> torch.Tensor:
    return torch.softmax(torch.randn(batch, vocab, generator=gen, device=DEV) * sigma, dim=-1)


def coupling(vocab: int, dtype_name: str, num_samples: int, gen: torch.Generator) -> None:
    t0 = time.time()
    dtype = DTYPES[dtype_name]
    mismatches = unambiguous = near = rows = 0
    numpy_checked = 0
    for start in range(0, COUPLING_ROWS, COUPLING_BATCH):
        batch = min(COUPLING_BATCH, COUPLING_ROWS - start)
        p = softmax_rows(batch, vocab, gen).to(dtype)
        p[0, : vocab // 2] = 0  # a row with zeros in the first half
        seeds = torch.randint(-(2**63), 2**63 - 1, (batch,), generator=gen, device=DEV, dtype=torch.int64)
        offsets = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV, dtype=torch.int64)
        _, ids = kg.fast_sample(p, num_samples, seeds=seeds, offsets=offsets)
        if num_samples == 1:  # the grouped race
            ref, is_near = grouped_race64(p, seeds, offsets)
            ref = ref[:, None]
        else:
            score = p.double() / exp64(words_of(seeds, offsets, vocab))
            score = torch.where(p.double() > 0, score, 0.0)
            top, ref = torch.topk(score, num_samples + 1, dim=1)
            gap = ((top[:, :-1] - top[:, 1:]) / top[:, :-1].clamp_min(1e-300)).min(dim=1).values
            is_near = gap <= REL_TOL
        differ = (ids != ref[:, :num_samples]).any(dim=1)
        mismatches += int(differ.sum())
        unambiguous += int((differ & ~is_near).sum())
        near += int(is_near.sum())
        rows += batch
        if numpy_checked < 4:  # tie the torch float64 race to the numpy reference, id for id
            k = 4 if not SMOKE else 2
            _, np_ids = rg.fast_sample_reference(
                p[:k].float().cpu().numpy(), seeds[:k].cpu().numpy(), offsets[:k].cpu().numpy(), num_samples
            )
            check(
                np.array_equal(np_ids, ref[:k, :num_samples].cpu().numpy()),
                f"numpy reference != torch float64 race V={vocab}",
            )
            numpy_checked += k
    cert = tv_ucb_from_coupling(
        mismatches, rows, ALPHA, label=f"fast_sample V={vocab} {dtype_name} n={num_samples}"
    )
    row = dict(
        kind="fast_sample",
        vocab=vocab,
        dtype=dtype_name,
        num_samples=num_samples,
        rows=rows,
        mismatches=mismatches,
        unambiguous=unambiguous,
        near_ties=near,
        tv_bound=cert.tv_bound,
        seconds=time.time() - t0,
    )
    RESULTS["coupling"].append(row)
    print("coupling", row, flush=True)
    check(unambiguous == 0, f"coupling {row}: unambiguous mismatches")
    check(cert.tv_bound <= 1e-3 or SMOKE, f"coupling {row}: TV bound above 1e-3")


def coupling_logits(vocab: int, gen: torch.Generator) -> None:
    t0 = time.time()
    mismatches = unambiguous = rows = 0
    temperature = 0.7
    for start in range(0, COUPLING_ROWS, COUPLING_BATCH):
        batch = min(COUPLING_BATCH, COUPLING_ROWS - start)
        logits = torch.randn(batch, vocab, generator=gen, device=DEV) * 3
        seeds = torch.randint(-(2**63), 2**63 - 1, (batch,), generator=gen, device=DEV, dtype=torch.int64)
        offsets = torch.randint(0, 2**62, (batch,), generator=gen, device=DEV, dtype=torch.int64)
        probs_out = torch.empty_like(logits)
        tokens = kg.sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out)
        s = logits.double() / temperature - torch.log(exp64(words_of(seeds, offsets, vocab)))
        top, ref = torch.topk(s, 2, dim=1)
        tol = 4e-6 + 4 * 2.0**-24 * (logits.abs().amax(1).double() / temperature)
        differ = tokens != ref[:, 0]
        mismatches += int(differ.sum())
        unambiguous += int((differ & (top[:, 0] - top[:, 1] > tol)).sum())
        rows += batch
        soft = torch.softmax(logits.double() / temperature, dim=-1)
        check(float((probs_out.double() - soft).abs().max()) < 1e-5, f"probs_out V={vocab}")
    cert = tv_ucb_from_coupling(mismatches, rows, ALPHA, label=f"sample_from_logits V={vocab}")
    row = dict(
        kind="sample_from_logits",
        vocab=vocab,
        rows=rows,
        mismatches=mismatches,
        unambiguous=unambiguous,
        tv_bound=cert.tv_bound,
        seconds=time.time() - t0,
    )
    RESULTS["coupling"].append(row)
    print("coupling", row, flush=True)
    check(unambiguous == 0, f"coupling {row}: unambiguous mismatches")
    check(cert.tv_bound <= 1e-3 or SMOKE, f"coupling {row}: TV bound above 1e-3")


# ---------------------------------------------------------------------------------------------
# (c) laws
# ---------------------------------------------------------------------------------------------


def keys(n: int, gen: torch.Generator):
    seeds = torch.randint(-(2**63), 2**63 - 1, (n,), generator=gen, device=DEV, dtype=torch.int64)
    return seeds, torch.zeros(n, dtype=torch.int64, device=DEV)


def gof_row(name: str, counts: np.ndarray, law: np.ndarray) -> None:
    n = int(counts.sum())
    eps = pick_eps(n, law)
    try:
        cert = assert_gof(counts, law, eps=eps or 0.05, alpha=ALPHA, beta=BETA, label=name)
        ok, p_value = True, cert.p_value
    except AssertionError as e:
        ok, p_value = False, str(e)[:2000]
    row = dict(law=name, n=n, eps=eps, passed=ok, p_value=p_value)
    RESULTS["laws"].append(row)
    print("law", row, flush=True)
    check(ok, f"law {name} rejected")


def laws(gen: torch.Generator) -> None:
    vocab = 4099 if SMOKE else 151936
    p = softmax_rows(1, vocab, gen)[0]
    seeds, offsets = keys(LAW_ROWS, gen)
    _, ids = kg.fast_sample(p[None].expand(LAW_ROWS, vocab), seeds=seeds, offsets=offsets)
    counts = torch.bincount(ids[:, 0], minlength=vocab).cpu().numpy()
    gof_row(f"fast_sample V={vocab}", counts, p.double().cpu().numpy() / p.double().sum().item())

    q = np.array([0.3, 0.25, 0.2, 0.15, 0.1, 0.0])
    law = plackett_luce_law(q, 3).ravel()
    seeds, offsets = keys(LAW_ROWS, gen)
    qt = torch.tensor(q, dtype=torch.float32, device=DEV)
    _, ids = kg.fast_sample(qt[None].expand(LAW_ROWS, 6), 3, seeds=seeds, offsets=offsets)
    cells = (ids[:, 0] * 36 + ids[:, 1] * 6 + ids[:, 2]).cpu().numpy()
    gof_row("Plackett-Luce triples V=6", np.bincount(cells, minlength=216), law)

    lv = 1000 if SMOKE else 32000
    logits = torch.randn(lv, generator=gen, device=DEV) * 2
    seeds, offsets = keys(LAW_ROWS, gen)
    tokens = kg.sample_from_logits(logits[None].expand(LAW_ROWS, lv), 0.8, seeds=seeds, offsets=offsets)
    soft = rg.softmax_with_temperature(logits.cpu().numpy(), 0.8)
    gof_row(f"sample_from_logits V={lv} T=0.8", torch.bincount(tokens, minlength=lv).cpu().numpy(), soft)

    w = softmax_rows(1, 1000, gen, sigma=1.0)[0]
    seeds, offsets = keys(LAW_ROWS, gen)
    _, ids, score = kg._fast_sample(w[None].expand(LAW_ROWS, 1000), 1, None, seeds, offsets, with_score=True)
    total = float(w.double().sum())
    try:
        cert = race_winner_checks(
            (score[:, 0].double() / total).cpu().numpy(),
            ids[:, 0].cpu().numpy(),
            w.double().cpu().numpy() / total,
            alpha=ALPHA,
            kind="race",
            beta=BETA,
        )
        ok, detail = True, cert.detail
    except AssertionError as e:
        ok, detail = False, str(e)[:2000]
    RESULTS["laws"].append(dict(law="race winner V=1000", n=LAW_ROWS, passed=ok, detail=detail))
    print("law race winner", ok, flush=True)
    check(ok, "race winner KS / independence rejected")


def tail_test(gen: torch.Generator) -> None:
    """Pre-registered: head weight 1, 100 tokens at each of 1e-5, 1e-6, 1e-7; count per decade."""
    t0 = time.time()
    decades = (5, 6, 7)
    weights = np.concatenate([[1.0]] + [np.full(100, 10.0**-d) for d in decades])
    law = weights / weights.sum()
    group = np.concatenate([[0]] + [np.full(100, i + 1) for i in range(len(decades))])
    rate = np.array([law[group == i + 1].sum() for i in range(len(decades))])
    row_w = torch.tensor(weights, dtype=torch.float32, device=DEV)
    chunk = min(TAIL_DRAWS, 2**15 if SMOKE else 2**22)
    counts = torch.zeros(len(weights), dtype=torch.int64, device=DEV)
    draws = 0
    while draws < TAIL_DRAWS:
        seeds, offsets = keys(chunk, gen)
        _, ids = kg.fast_sample(row_w[None].expand(chunk, weights.size), seeds=seeds, offsets=offsets)
        counts += torch.bincount(ids[:, 0], minlength=weights.size)
        draws += chunk
    c = counts.cpu().numpy()
    per_decade = np.array([c[group == i + 1].sum() for i in range(len(decades))])
    p_values = [
        float(sps.binomtest(int(k), draws, float(r)).pvalue) for k, r in zip(per_decade, rate, strict=True)
    ]
    ok = all(pv > ALPHA / len(decades) for pv in p_values)
    # relative deviation detectable w.p. 1 - beta per decade (normal approximation of the binomial)
    z = sps.norm.isf(ALPHA / len(decades) / 2) + sps.norm.isf(BETA)
    detectable = [float(z / np.sqrt(draws * r)) for r in rate]
    row = dict(
        draws=draws,
        relative_probability=[10.0**-d for d in decades],
        expected=(draws * rate).tolist(),
        observed=per_decade.tolist(),
        p_values=p_values,
        detectable_rel_dev=detectable,
        passed=ok,
        seconds=time.time() - t0,
    )
    RESULTS["tail"] = row
    print("tail", row, flush=True)
    check(ok, f"tail test rejected: {row}")


# ---------------------------------------------------------------------------------------------
# (d) CUDA graphs and host syncs
# ---------------------------------------------------------------------------------------------


def graph_run(source: str, gen: torch.Generator, replays: int = 10_000, batch: int = 256, vocab: int = 4096):
    t0 = time.time()
    p = softmax_rows(1, vocab, gen, sigma=1.0)[0]
    law = (p.double() / p.double().sum()).cpu().numpy()
    probs = p[None].expand(batch, vocab)
    counts = torch.zeros(vocab, dtype=torch.int64, device=DEV)
    ones = torch.ones(batch, dtype=torch.int64, device=DEV)
    seeds, offsets = keys(batch, gen)
    rng = torch.Generator(device=DEV).manual_seed(4321)
    used_default = False
    graph = torch.cuda.CUDAGraph()
    if source == "generator":
        if hasattr(graph, "register_generator_state"):
            graph.register_generator_state(rng)
        else:
            rng, used_default = None, True

    def step():
        if source == "generator":
            out = kg.fast_sample(probs, generator=rng)
        else:
            out = kg.fast_sample(probs, seeds=seeds, offsets=offsets)
            offsets.add_(1)
        counts.index_add_(0, out[1][:, 0], ones)
        return out[1]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        static = step()
    counts.zero_()
    offsets.zero_()
    state = (
        (rng.get_state() if rng is not None else torch.cuda.get_rng_state())
        if source == "generator"
        else None
    )
    off0 = offsets.clone()
    graph.replay()
    first = static.clone()
    if source == "generator":
        if rng is not None:
            rng.set_state(state)
        else:
            torch.cuda.set_rng_state(state)
        eager = kg.fast_sample(probs, generator=rng)[1]
    else:
        eager = kg.fast_sample(probs, seeds=seeds, offsets=off0)[1]
    equal_eager = bool(torch.equal(eager, first))
    graph.replay()
    fresh = not torch.equal(static, first)
    for _ in range(replays - 2):
        graph.replay()
    torch.cuda.synchronize()  # a device-side assert would surface here
    offsets_ok = source != "seeds" or bool((offsets == replays).all())
    row, checks = graph_law_row(
        source,
        replays,
        counts,
        law,
        used_default=used_default,
        equal_eager=equal_eager,
        fresh=fresh,
        offsets_ok=offsets_ok,
        t0=t0,
        label=f"graph {source} V={vocab}",
    )
    row.update(batch=batch, vocab=vocab, tiling=kg.race_tiling(batch, vocab)._asdict())
    RESULTS["graphs"].append(row)
    print("graph", row, flush=True)
    for ok, message in checks:
        check(ok, message)


def no_host_sync(gen: torch.Generator) -> None:
    p = softmax_rows(8, 151936, gen)
    seeds, offsets = keys(8, gen)
    logits = torch.randn(8, 151936, device=DEV)
    kg.fast_sample(p, 2, seeds=seeds, offsets=offsets)  # compile outside the check
    kg.sample_from_logits(logits, 0.7, seeds=seeds, offsets=offsets, probs_out=torch.empty_like(logits))
    kg.renorm_draft_probs(logits.view(2, 4, -1), torch.ones(2, device=DEV))
    torch.cuda.synchronize()
    ok = True
    try:
        torch.cuda.set_sync_debug_mode("error")
        kg.fast_sample(p, 2, seeds=seeds, offsets=offsets)
        kg.fast_sample(p, 1, generator=None)
        kg.sample_from_logits(logits, 0.7, seeds=seeds, offsets=offsets, probs_out=torch.empty_like(logits))
        kg.renorm_draft_probs(logits.view(2, 4, -1), torch.ones(2, device=DEV))
    except RuntimeError as e:
        ok = False
        RESULTS["sync"] = str(e)[:500]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    RESULTS["sync"] = RESULTS["sync"] or ("no host sync" if ok else "sync")
    check(ok, "a launcher synchronised with the host")


# ---------------------------------------------------------------------------------------------
# (e) performance
# ---------------------------------------------------------------------------------------------


def perf(shape, bw: float, gen: torch.Generator) -> None:
    from triton.testing import do_bench

    batch, vocab = shape
    for name, dtype in DTYPES.items():
        p = softmax_rows(batch, vocab, gen).to(dtype)
        seeds, offsets = keys(batch, gen)

        def ours(p=p, seeds=seeds, offsets=offsets):
            return kg.fast_sample(p, seeds=seeds, offsets=offsets)

        ours_us = do_bench(ours, warmup=25, rep=200, return_mode="median") * 1e3
        ours_gen_us = do_bench(lambda p=p: kg.fast_sample(p), warmup=25, rep=200, return_mode="median") * 1e3
        graphed_us = graph_time(ours) * 1e3
        multinomial_us = (
            do_bench(lambda p=p: torch.multinomial(p, 1), warmup=25, rep=200, return_mode="median") * 1e3
        )
        torch_gumbel_us = (
            do_bench(
                lambda p=p: (p / torch.empty_like(p).exponential_()).argmax(-1),
                warmup=25,
                rep=200,
                return_mode="median",
            )
            * 1e3
        )
        floor_us = batch * vocab * p.element_size() / bw * 1e6
        target = TARGETS_US.get(shape) if name == "fp32" else None
        row = dict(
            batch=batch,
            vocab=vocab,
            dtype=name,
            ours_us=ours_us,
            ours_generator_us=ours_gen_us,
            ours_graph_us=graphed_us,
            multinomial_us=multinomial_us,
            torch_gumbel_us=torch_gumbel_us,
            floor_us=floor_us,
            floor_fraction=floor_us / ours_us,
            target_us=target,
            meets_target=None if target is None else ours_us <= target,
            tiling=kg.race_tiling(batch, vocab)._asdict(),
        )
        RESULTS["perf"].append(row)
        print("perf", row, flush=True)


def sweep(shape, gen: torch.Generator) -> None:
    """CUDA-graph replay time (device time) of the grouped race per tile width (1, 2 or 4 groups),
    warps and programs per SM; every grouped tiling must return the default tiling's ids, bit for
    bit. The per-token race's default (token_race_tiling: screened one-warp tiles for large batches,
    the fast_sample default of session 6) is timed in the same run for the ratio (its draws follow
    the same law with other noise, so its ids are not compared)."""
    batch, vocab = shape
    p = softmax_rows(batch, vocab, gen)
    seeds, offsets = keys(batch, gen)
    default = kg.race_tiling(batch, vocab)
    tried = {default}
    # (block_v, warps, programs per SM); 256-token tiles only at 32 per SM: fewer programs give
    # longer chunks, whose per-group slots (one per tile) no longer fit one warp's registers
    configs = [(256, 1, 32), (512, 1, 16), (512, 1, 32), (1024, 1, 8), (1024, 1, 16), (1024, 1, 32),
               (512, 2, 16), (1024, 2, 8), (1024, 2, 16), (1024, 4, 8), (1024, 4, 16)]  # fmt: skip
    for block_v, warps, programs_per_sm in configs:
        tiles = triton.cdiv(vocab, block_v)
        chunks = max(1, min(tiles, triton.cdiv(programs_per_sm * 132, batch), 256))
        tried.add(kg.RaceTiling(1, block_v, triton.cdiv(tiles, chunks), warps, grouped=True))
    reference = kg._fast_sample(p, 1, None, seeds, offsets, tiling=default)[1]
    token = kg.token_race_tiling(batch, vocab)
    for tiling in [*sorted(tried), token]:
        call = lambda t=tiling: kg._fast_sample(p, 1, None, seeds, offsets, tiling=t)  # noqa: E731
        same = None
        if tiling.grouped:
            same = torch.equal(call()[1], reference)
            check(same, f"sweep {shape} {tiling}: ids differ from the default tiling")
        us = graph_time(call) * 1e3
        RESULTS["sweep"].append(dict(batch=batch, vocab=vocab, tiling=tiling._asdict(), graph_us=us,
                                     default=tiling == default, same_ids=same))  # fmt: skip
    mine = sorted((r for r in RESULTS["sweep"] if r["batch"] == batch), key=lambda r: r["graph_us"])
    base = next(r for r in mine if r["default"])
    tok = next(r for r in mine if not r["tiling"]["grouped"])
    best = [(round(r["graph_us"], 1), tuple(r["tiling"].values())[1:]) for r in mine[:8]]
    print(f"sweep {shape}: default {base['tiling']} {base['graph_us']:.1f} us; per-token race "
          f"{tok['graph_us']:.1f} us ({tok['graph_us'] / base['graph_us']:.2f}x); best", best, flush=True)  # fmt: skip


def merge_compare(shape, gen: torch.Generator) -> None:
    """The merge in the chunk kernel's last-arriving program (default) against the two-launch race,
    same inputs, same run, interleaved three times: CUDA-graph replay time (device time) and eager
    do_bench (host-bound here: one Triton launch fewer per call). Both must return the same tokens."""
    from triton.testing import do_bench

    batch, vocab = shape
    p = softmax_rows(batch, vocab, gen)
    seeds, offsets = keys(batch, gen)
    calls = {
        "fused": lambda: kg._fast_sample(p, 1, None, seeds, offsets),
        "two_launch": lambda: kg._fast_sample(p, 1, None, seeds, offsets, fused_merge=False),
    }
    check(torch.equal(calls["fused"]()[1], calls["two_launch"]()[1]), f"merge {shape}: fused == two-launch")
    graph, eager = {k: [] for k in calls}, {k: [] for k in calls}
    for _ in range(3):
        for name, fn in calls.items():
            graph[name].append(graph_time(fn) * 1e3)
            eager[name].append(do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3)
    row = dict(batch=batch, vocab=vocab)
    for name in calls:
        row[f"{name}_graph_us"] = float(np.median(graph[name]))
        row[f"{name}_eager_us"] = float(np.median(eager[name]))
    row["graph_ratio_two_over_fused"] = row["two_launch_graph_us"] / row["fused_graph_us"]
    row["eager_ratio_two_over_fused"] = row["two_launch_eager_us"] / row["fused_eager_us"]
    RESULTS["merge"].append(row)
    print("merge", {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)


def summary() -> None:
    print("\n=== gumbel_gpu summary ===")
    if RESULTS["noise"]:
        print(
            f"noise: max rel err {RESULTS['noise']['max_rel_err']:.2e} over {RESULTS['noise']['words']} words"
        )
    for r in RESULTS["coupling"]:
        print(
            f"coupling {r['kind']:<18} V={r['vocab']:<7} {r.get('dtype', 'fp32'):<5} "
            f"n={r.get('num_samples', 1)} "
            f"rows={r['rows']} mism={r['mismatches']} unamb={r['unambiguous']} TV<={r['tv_bound']:.2e}"
        )
    for r in RESULTS["laws"]:
        print(f"law {r['law']:<34} n={r['n']} eps={r.get('eps')} passed={r['passed']}")
    if RESULTS["tail"]:
        t = RESULTS["tail"]
        print(
            f"tail: draws={t['draws']} observed={t['observed']} expected={[round(x) for x in t['expected']]} "
            f"p={[f'{x:.2g}' for x in t['p_values']]} passed={t['passed']}"
        )
    for r in RESULTS["graphs"]:
        print(
            f"graph {r['source']:<9} replays={r['replays']} fresh={r['fresh_draws']} "
            f"eager={r['replay_equals_eager']} "
            f"law={r['law_passed']} (eps {r['law_eps']})"
        )
    if RESULTS["sync"]:
        print("host sync:", RESULTS["sync"])
    if RESULTS["copy_bw"]:
        print(f"copy bandwidth {RESULTS['copy_bw'] / 1e12:.2f} TB/s")
    if RESULTS["perf"]:
        print(
            f"{'B':>4} {'V':>7} {'dtype':<5} {'ours':>7} {'graph':>7} {'gen':>7} {'floor':>6} {'frac':>5} "
            f"{'multin':>7} {'t-gumbel':>8} {'target':>6}"
        )
        for r in RESULTS["perf"]:
            print(
                f"{r['batch']:>4} {r['vocab']:>7} {r['dtype']:<5} {r['ours_us']:7.2f} "
                f"{r['ours_graph_us']:7.2f} "
                f"{r['ours_generator_us']:7.2f} {r['floor_us']:6.2f} {r['floor_fraction']:5.2f} "
                f"{r['multinomial_us']:7.1f} {r['torch_gumbel_us']:8.1f} "
                f"{'' if r['target_us'] is None else ('ok' if r['meets_target'] else 'MISS')}"
            )
    for r in RESULTS["merge"]:
        print(
            f"merge B={r['batch']} V={r['vocab']}: graph fused {r['fused_graph_us']:.2f} / two-launch "
            f"{r['two_launch_graph_us']:.2f} us ({r['graph_ratio_two_over_fused']:.2f}x); eager "
            f"{r['fused_eager_us']:.1f} / {r['two_launch_eager_us']:.1f} us ({r['eager_ratio_two_over_fused']:.2f}x)"
        )
    print("failures:", RESULTS["failures"] or "none", "| errors:", len(RESULTS["errors"]))


def main() -> int:
    gen = torch.Generator(device=DEV).manual_seed(20261129)
    RESULTS["device"] = torch.cuda.get_device_name() if not SMOKE else "cpu (interpreter smoke)"
    steps = [("noise", noise_accuracy)]
    for vocab in COUPLING_VOCABS:
        steps.append((f"coupling fp32 n=1 V={vocab}", lambda v=vocab: coupling(v, "fp32", 1, gen)))
    steps += [
        (f"coupling bf16 n=1 V={COUPLING_VOCABS[0]}", lambda: coupling(COUPLING_VOCABS[0], "bf16", 1, gen)),
        (f"coupling fp32 n=4 V={COUPLING_VOCABS[1]}", lambda: coupling(COUPLING_VOCABS[1], "fp32", 4, gen)),
        ("coupling logits", lambda: coupling_logits(COUPLING_VOCABS[0], gen)),
        ("laws", lambda: laws(gen)),
        ("tail", lambda: tail_test(gen)),
    ]
    if not SMOKE:
        steps += [
            ("graph generator", lambda: graph_run("generator", gen)),
            ("graph seeds", lambda: graph_run("seeds", gen)),
            # V = 32000 x 256 rows takes fast_sample's one-warp screened tiling (V = 4096 the wide one)
            ("graph generator V=32000", lambda: graph_run("generator", gen, vocab=32000)),
            ("graph seeds V=32000", lambda: graph_run("seeds", gen, vocab=32000)),
            ("host sync", lambda: no_host_sync(gen)),
            ("copy bandwidth", lambda: RESULTS.__setitem__("copy_bw", copy_bandwidth())),
        ]
        steps += [(f"perf {s}", lambda s=s: perf(s, RESULTS["copy_bw"], gen)) for s in SHAPES]
        steps += [(f"merge {s}", lambda s=s: merge_compare(s, gen)) for s in SHAPES]
        if os.environ.get("GUMBEL_GPU_SWEEP"):  # the tiling sweep of runs 15 and 17
            steps += [(f"sweep {s}", lambda s=s: sweep(s, gen)) for s in SHAPES]
    for name, fn in steps:
        t0 = time.time()
        try:
            fn()
        except Exception:  # noqa: BLE001 - record and continue: one broken step must not hide the rest
            RESULTS["errors"].append({"step": name, "traceback": traceback.format_exc()[-3000:]})
            print(f"ERROR in {name}:\n{traceback.format_exc()}", flush=True)
        print(f"--- {name}: {time.time() - t0:.1f} s", flush=True)
        save()
    summary()
    save()
    return 1 if RESULTS["failures"] or RESULTS["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
