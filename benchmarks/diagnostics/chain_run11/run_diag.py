"""Where the chain kernel's device time goes (H200): CUDA-graph µs of diagnostic variants."""

import json, os, sys, importlib.util
import torch, triton
from triton.testing import do_bench

sys.path.insert(0, os.getcwd())


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


here = os.path.dirname(__file__)
v1 = load("chain_v1", os.path.join(here, "chain_v1.py"))
dg = load("chain_diag", os.path.join(here, "chain_diag.py"))
OUT = os.environ.get("OUT", "out")
gen = torch.Generator(device="cuda").manual_seed(1)


def graph_time(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return do_bench(g.replay, warmup=25, rep=200, return_mode="median") * 1e3


def inputs(b, k, v, dtype=torch.float32):
    logits = torch.randn(b, k + 1, v, generator=gen, device="cuda") * 3.0
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:, :k] + torch.randn(b, k, v, generator=gen, device="cuda"), -1)
    x = torch.multinomial(q.reshape(-1, v), 1, generator=gen).reshape(b, k)
    u = torch.rand(b, k + 1, generator=gen, device="cuda")
    return p.to(dtype), x, q.to(dtype), u


res = []
for shape in [(1, 4, 32000), (16, 4, 128256), (64, 4, 151936), (128, 8, 128256)]:
    b, k, v = shape
    p, x, q, u = inputs(*shape)

    def rec(name, fn):
        try:
            us = graph_time(fn)
        except Exception as e:
            us = float("nan")
            print(name, "ERR", repr(e)[:300])
        res.append(dict(shape=shape, variant=name, graph_us=us))
        print(shape, name, f"{us:.1f}", flush=True)

    rec("v1 default", lambda: v1._launch(p, x, q, None, u, None, None))
    rec("v1 1024/4", lambda: v1._launch(p, x, q, None, u, None, None, block_v=1024, num_warps=4))
    for bv, w, t, s in [(1024, 4, 16, 3), (1024, 4, 4, 3), (2048, 4, 8, 3), (1024, 4, 1, 1)]:
        t = min(t, triton.cdiv(v, bv))
        cfg = dict(block_v=bv, num_warps=w, tiles=t, num_stages=s if t > 1 else 1)
        tag = f"{bv}/{w}/t{t}/s{cfg['num_stages']}"
        for diag, persist in [(0, False), (0, True), (1, True), (2, True), (4, True), (8, True), (15, True)]:
            rec(
                f"v2 {tag} diag{diag}{' persist' if persist else ''}",
                lambda d=diag, pe=persist, c=cfg: dg._launch(
                    p, x, q, None, u, None, None, diag=d, persist=pe, **c
                ),
            )
    # bf16 at the best-guess config
    pb, xb, qb, ub = inputs(*shape, dtype=torch.bfloat16)
    rec("v1 default bf16", lambda: v1._launch(pb, xb, qb, None, ub, None, None))
    rec(
        "v2 1024/4/t16/s3 persist bf16",
        lambda: dg._launch(
            pb,
            xb,
            qb,
            None,
            ub,
            None,
            None,
            persist=True,
            block_v=1024,
            num_warps=4,
            tiles=min(16, triton.cdiv(v, 1024)),
            num_stages=3,
        ),
    )
    del p, q, pb, qb
    torch.cuda.empty_cache()
# copy bandwidth
src = torch.empty(256 * 2**20 // 4, device="cuda")
dst = torch.empty_like(src)
ms = do_bench(lambda: dst.copy_(src), warmup=10, rep=100, return_mode="median")
res.append(dict(copy_bw=2 * src.numel() * 4 / (ms * 1e-3)))
os.makedirs(OUT, exist_ok=True)
json.dump(res, open(os.path.join(OUT, "chain_diag.json"), "w"), indent=1)
