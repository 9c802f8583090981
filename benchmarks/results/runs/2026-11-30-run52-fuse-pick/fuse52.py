"""run 52: fuse_pick (pick inside the accept kernel) vs the separate pick kernel, same process, one-hot issue cases."""
import os, sys, time, json
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "ci", "gpu"))
import torch
from triton.testing import do_bench
from gpu_common import graph_time
from specsample.kernels import logits as L

OUT = os.environ.get("OUT", "out")
gen = torch.Generator(device="cuda"); gen.manual_seed(52)
res = []
for (B, K, V) in [(64, 4, 151936), (128, 8, 128256)]:
    for dt in (torch.float32, torch.bfloat16):
        lg = (torch.randn(B, K + 1, V, generator=gen, device="cuda") * 3).to(dt)
        x = torch.randint(0, V, (B, K), generator=gen, device="cuda")
        case = dict(target_logits=lg, draft_token_ids=x, temperature=torch.ones(B, device="cuda"),
                    seeds=torch.randint(0, 2**62, (B,), generator=gen, device="cuda"),
                    offsets=torch.randint(0, 2**62, (B,), generator=gen, device="cuda"))
        t0 = time.time()
        a = L.rejection_sample_logits(**case)
        b = L.rejection_sample_logits(**case, _config={"fuse_pick": True})
        torch.cuda.synchronize()
        same = all(torch.equal(u, v) for u, v in zip(a, b))
        row = dict(B=B, K=K, V=V, dtype=str(dt), same=same, first_calls_s=round(time.time() - t0, 1))
        for rep in range(2):
            for name, cfg in (("separate", None), ("fused", {"fuse_pick": True})):
                fn = lambda cfg=cfg: L.rejection_sample_logits(**case, _config=cfg)
                row.setdefault(name + "_do_bench", []).append(do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3)
                row.setdefault(name + "_graph", []).append(graph_time(fn) * 1e3)
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(200):
                    fn()
                row.setdefault(name + "_host", []).append((time.perf_counter() - t) / 200 * 1e6)
                torch.cuda.synchronize()
        res.append(row)
        print(json.dumps(row), flush=True)
        os.makedirs(OUT, exist_ok=True)
        json.dump(res, open(os.path.join(OUT, "fuse52.json"), "w"), indent=1)
