"""H200 spot check: B*(K+1)*V > 2^31 elements (B = 2048, K = 7, V = 262144, bf16, materialised —
no stride-0 broadcast, so element offsets really exceed 2^31) gives the right law and no overflow.

Every target row carries its mass on the last M = 16 token ids (V-16 .. V-1), so every token read
sits at element offsets up to B*(K+1)*V - 1 ~ 4.3e9 > 2^31 - 1. Classic drafts: q on the same
16 ids with another law; drafts x_i ~ q. The joint law of (accepted count a, emitted token) over
(K+1) x 16 cells is computed exactly below (float64), and the tokens of the rows whose offsets
exceed 2^31 (b >= 1024) from R seeded calls are tested with a designed chi-square
(specsample.stats.assert_gof, alpha = 1e-6, beta = 1e-6, eps stated). Prints one JSON line and
writes it to $OUT/large_index.json.
"""

import json
import os
import time

import numpy as np
import torch

import specsample as ss
from specsample.stats import assert_gof

B, K, V, M = 2048, 7, 262144, 16
HIGH_ROW = 1024  # rows b >= 1024 start at element offset >= 1024 * 8 * 262144 = 2^31
ROUNDS = 300
EPS, ALPHA, BETA = 0.02, 1e-6, 1e-6


def joint_law(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[(K+1), M] exact law of (a, token) for the kernel's semantics on the raw (bf16-cast, not
    exactly normalised) values p, q at every position, with drafts x_i ~ q / sum(q)."""
    accept_x = np.minimum(1.0, p / q)  # u q(x) < p(x) with u ~ U[0, 1)
    beta = float(np.sum(q / q.sum() * accept_x))
    resid = np.maximum(p - q, 0.0)
    resid /= resid.sum()
    law = np.zeros((K + 1, M))
    for a in range(K):
        law[a] = beta**a * (1.0 - beta) * resid
    law[K] = beta**K * p / p.sum()
    return law


def main() -> None:
    rng = np.random.default_rng(20261129)
    p16 = rng.dirichlet(np.ones(M)).astype(np.float64)
    q16 = rng.dirichlet(np.ones(M)).astype(np.float64)
    # exactly representable in bf16, then renormalised law of the *cast* values
    p16 = torch.tensor(p16, dtype=torch.bfloat16).double().numpy()
    q16 = torch.tensor(q16, dtype=torch.bfloat16).double().numpy()
    law = joint_law(p16, q16)

    dev = "cuda"
    target = torch.zeros(B, K + 1, V, dtype=torch.bfloat16, device=dev)
    draft = torch.zeros(B, K, V, dtype=torch.bfloat16, device=dev)
    target[..., V - M :] = torch.tensor(p16, dtype=torch.bfloat16, device=dev)
    draft[..., V - M :] = torch.tensor(q16, dtype=torch.bfloat16, device=dev)
    assert target.numel() > 2**31 and target.is_contiguous()
    seeds = torch.arange(B, dtype=torch.int64, device=dev) * 7919 + 13
    offsets = torch.zeros(B, dtype=torch.int64, device=dev)
    qn = torch.tensor(q16 / q16.sum(), device=dev)
    gen = torch.Generator(device=dev).manual_seed(7)

    counts = np.zeros((K + 1) * M, dtype=np.int64)
    out_of_support = 0
    t0 = time.time()
    for r in range(ROUNDS):
        x = (V - M) + torch.multinomial(qn.expand(B * K, M), 1, generator=gen).view(B, K)
        res = ss.chain_rejection_sample(target, x, draft, seeds=seeds, offsets=offsets + r)
        a = res.num_accepted.long()
        tok = res.tokens.long().gather(1, a[:, None])[:, 0]
        hi_a, hi_tok = a[HIGH_ROW:], tok[HIGH_ROW:]
        out_of_support += int(((hi_tok < V - M) | (hi_tok >= V)).sum())
        cell = hi_a * M + (hi_tok - (V - M)).clamp(0, M - 1)
        counts += torch.bincount(cell, minlength=(K + 1) * M).cpu().numpy()
    torch.cuda.synchronize()
    elapsed = time.time() - t0

    n = int(counts.sum())
    result = {
        "B": B,
        "K": K,
        "V": V,
        "dtype": "bf16",
        "elements": target.numel(),
        "rows_tested": B - HIGH_ROW,
        "rounds": ROUNDS,
        "n": n,
        "out_of_support": out_of_support,
        "eps": EPS,
        "alpha": ALPHA,
        "beta": BETA,
        "seconds": round(elapsed, 1),
    }
    try:
        cert = assert_gof(
            counts,
            law.reshape(-1),
            eps=EPS,
            alpha=ALPHA,
            beta=BETA,
            label="joint (a, token) at element offsets > 2^31",
        )
        result.update(passed=out_of_support == 0, p_value=cert.p_value)
    except AssertionError as err:
        result.update(passed=False, error=str(err)[:2000])
    print(json.dumps(result))
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "large_index.json"), "w") as f:
        json.dump(result, f, indent=1)
    raise SystemExit(0 if result["passed"] else 1)


if __name__ == "__main__":
    main()
