"""Helpers shared by the H200 scripts in ci/gpu/: the statistical design constants, the eps a run
can certify, copy bandwidth, CUDA-graph timing, and the summary of a CUDA-graph replay run."""

from __future__ import annotations

import time

import numpy as np
import torch

from specsample.stats import assert_gof, gof_design

ALPHA, BETA = 1e-6, 1e-6  # every GOF assertion of the GPU scripts: false-fail alpha, power 1 - beta


def pick_eps(n: int, law: np.ndarray) -> float | None:
    """The smallest eps the power design supports for n draws from `law` (exact law only, no data);
    None when not even 0.05 is (a near-degenerate law, e.g. an acceptance probability ~1e-4)."""
    for eps in (0.005, 0.01, 0.02, 0.03, 0.05):
        if gof_design(n, law, eps=eps, alpha=ALPHA, beta=BETA)["required_n"] <= n:
            return eps
    return None


def copy_bandwidth(device: str = "cuda") -> float:
    """Bytes read + written per second by a 2 GiB device-to-device copy (do_bench median)."""
    from triton.testing import do_bench

    src = torch.empty(2**29, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    return 2 * src.numel() * 4 / (ms * 1e-3)


def chain_perf_inputs(batch, num_k, vocab, dtype, gen, device="cuda"):
    """(p, x, q, u) for timing the chain kernel: p = softmax of N(0, 3^2) logits, q = softmax of those
    logits plus N(0, 1) noise, drafts x drawn from q, uniforms u; p and q cast to `dtype`."""
    logits = torch.randn(batch, num_k + 1, vocab, generator=gen, device=device) * 3.0
    p = torch.softmax(logits, -1)
    noise = torch.randn(batch, num_k, vocab, generator=gen, device=device)
    q = torch.softmax(logits[:, :num_k] + noise, -1)
    x = torch.multinomial(q.reshape(-1, vocab), 1, generator=gen).reshape(batch, num_k)
    u = torch.rand(batch, num_k + 1, generator=gen, device=device)
    return p.to(dtype), x, q.to(dtype), u


def graph_time(fn) -> float:
    """Median ms per replay of a CUDA graph holding one call of `fn` (warmed up on a side stream)."""
    from triton.testing import do_bench

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return do_bench(graph.replay, warmup=25, rep=200, return_mode="median")


def graph_law_row(source: str, replays: int, counts, law: np.ndarray, *, used_default: bool,
                  equal_eager: bool, fresh: bool, offsets_ok: bool, t0: float, label: str):  # fmt: skip
    """(result row, [(passed, failure message)]) of a CUDA-graph replay run: `counts` accumulated
    inside the graph over all replays are tested against the exact `law` by the designed chi-square
    (alpha = beta = 1e-6, eps = the smallest pick_eps supports for n, 0.05 at worst)."""
    c = counts.cpu().numpy().astype(np.int64)
    n = int(c.sum())
    eps = pick_eps(n, law) or 0.05
    try:
        cert = assert_gof(c, law, eps=eps, alpha=ALPHA, beta=BETA, label=label)
        law_ok, p_value = True, cert.p_value
    except AssertionError as e:
        law_ok, p_value = False, str(e)[:2000]
    row = dict(
        source=source, replays=replays, samples=n, used_default_generator=used_default,
        replay_equals_eager=equal_eager, fresh_draws=fresh, offsets_advanced=offsets_ok,
        law_eps=eps, law_passed=law_ok, law_p_value=p_value, seconds=time.time() - t0,
    )  # fmt: skip
    checks = [
        (equal_eager, f"graph {source}: replay differs from eager"),
        (fresh, f"graph {source}: two replays gave identical tokens"),
        (offsets_ok, f"graph {source}: offsets not advanced by the captured add_"),
        (law_ok, f"graph {source}: law rejected"),
    ]
    return row, checks
