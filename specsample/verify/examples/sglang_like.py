"""An external chain sampler with SGLang's two historical bugs, for `specsample verify --target`.

    specsample verify --target specsample.verify.examples.sglang_like:chain_sample_sglang_like

It has our signature (torch tensors in and out, uniforms or seeds/offsets) and mimics SGLang's
Triton `chain_speculative_sampling` before its fixes:
1. norm_sum == 0 (the residual max(0, p - q) has no mass) returns token V - 1, which usually has zero
   target probability, and reports no fallback;
2. the emitted token reuses the acceptance coin of the rejected draft (before SGLang #7207) instead of
   the fresh column u_K, so the residual draw is confined to the top of its CDF.
The verifier must fail on it and name the laws it breaks (edge/norm_sum_zero, grid, coupling,
conditional, joint, ...). Do not use it for anything else.
"""

from __future__ import annotations

import numpy as np
import torch

from specsample.reference.philox import chain_uniforms


def chain_sample_sglang_like(
    target_probs,
    draft_token_ids,
    draft_probs=None,
    *,
    num_draft_tokens=None,
    uniforms=None,
    seeds=None,
    offsets=None,
):
    """Chain rejection sampling with SGLang's V-1 fallback and reused acceptance coin (see module)."""
    p = target_probs.detach().cpu().float().numpy().astype(np.float64)
    x = draft_token_ids.detach().cpu().numpy().astype(np.int64)
    bsz, k1, vocab = p.shape
    k = k1 - 1
    q = None if draft_probs is None else draft_probs.detach().cpu().float().numpy().astype(np.float64)
    if uniforms is None:
        u = chain_uniforms(seeds.cpu().numpy(), offsets.cpu().numpy(), k1)
    else:
        u = uniforms.detach().cpu().numpy().astype(np.float64)
    n = np.full(bsz, k) if num_draft_tokens is None else num_draft_tokens.cpu().numpy().clip(0, k)
    p = np.nan_to_num(p, nan=0.0, posinf=0.0, neginf=0.0).clip(0, None)
    tokens = np.full((bsz, k1), -1, np.int64)
    accepted = np.zeros(bsz, np.int64)
    for b in range(bsz):
        j = 0
        coin = u[b, k]
        while j < n[b]:
            xj = x[b, j]
            ok = 0 <= xj < vocab
            px = p[b, j, xj] if ok else 0.0
            qx = (q[b, j, xj] if q is not None else 1.0) if ok else 0.0
            if ok and qx > 0 and u[b, j] * qx < px:
                tokens[b, j] = xj
                j += 1
                continue
            coin = u[b, j]  # bug 2: the rejected draft's coin is reused for the residual draw
            break
        if j < n[b]:
            if q is not None:
                r = np.maximum(p[b, j] - np.nan_to_num(q[b, j]).clip(0, None), 0.0)
            else:
                r = p[b, j].copy()
                if 0 <= x[b, j] < vocab:
                    r[x[b, j]] = 0.0
        else:
            r = p[b, j]
        total = r.sum()
        if total <= 0:
            tokens[b, j] = vocab - 1  # bug 1: norm_sum == 0 -> last token
        else:
            cs = np.cumsum(r)
            tokens[b, j] = min(int(np.searchsorted(cs, coin * total, side="right")), vocab - 1)
        accepted[b] = j
    return (
        torch.from_numpy(tokens).to(torch.int32),
        torch.from_numpy(accepted).to(torch.int32),
        torch.zeros(bsz, dtype=torch.bool),
        torch.ones(bsz, dtype=torch.bool),
    )
