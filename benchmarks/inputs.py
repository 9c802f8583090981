"""Synthetic engine-like inputs for one benchmark case, the same for every provider.

Target logits are N(0, 3^2) per token; draft logits perturb them by N(0, 1) (the ANCHORS.md setup);
probabilities are their softmax, cast to the case dtype. Classic drafts are sampled from q (Gumbel-max
over the draft logits), one-hot drafts are the draft argmax (greedy / EAGLE-argmax drafts).
Temperatures are 0.8 (every row sampled, none greedy). Generated on `device` from a torch.Generator
seeded by `seed`, so a case's inputs are reproducible.

Keys (absent when the kernel has no such input):
    chain, chain_onehot   target_probs [B, K+1, V], draft_probs [B, K, V] (chain only),
                          draft_token_ids [B, K] int64, uniforms [B, K+1] fp32
    fast_sample           probs [B, V], seeds [B] int64, offsets [B] int64
    sample_from_logits    logits [B, V], temperature [B] fp32, seeds, offsets
    logits, logits_onehot target_logits [B, K+1, V], draft_logits [B, K, V] (logits only),
                          draft_token_ids [B, K] int64, temperature [B] fp32, seeds, offsets
"""

from __future__ import annotations

import zlib

import torch

from benchmarks.floors import Case

TEMPERATURE = 0.8
TARGET_LOGIT_SCALE = 3.0
DRAFT_PERTURBATION = 1.0


def case_seed(case: Case) -> int:
    """Stable seed from the case label (crc32), so every run and provider sees the same inputs."""
    return zlib.crc32(case.label.encode())


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def make_inputs(case: Case, device: str | torch.device, seed: int | None = None) -> dict[str, torch.Tensor]:
    """The inputs of `case` (module docstring) on `device`."""
    gen = torch.Generator(device=device)
    gen.manual_seed(case_seed(case) if seed is None else seed)
    B, K, V, dt = case.B, case.K, case.V, _dtype(case.dtype)
    x: dict[str, torch.Tensor] = {}

    def randn(*shape):
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32)

    def seeds_offsets():
        x["seeds"] = torch.randint(0, 2**62, (B,), generator=gen, device=device, dtype=torch.int64)
        x["offsets"] = torch.zeros(B, device=device, dtype=torch.int64)

    if case.kernel in ("fast_sample", "sample_from_logits"):
        logits = randn(B, V) * TARGET_LOGIT_SCALE
        if case.kernel == "fast_sample":
            x["probs"] = torch.softmax(logits, dim=-1).to(dt)
        else:
            x["logits"] = logits.to(dt)
            x["temperature"] = torch.full((B,), TEMPERATURE, device=device)
        seeds_offsets()
        return x

    classic = case.kernel in ("chain", "logits")
    target_logits = randn(B, K + 1, V) * TARGET_LOGIT_SCALE
    draft_logits = target_logits[:, :K] + DRAFT_PERTURBATION * randn(B, K, V)
    if classic:
        u = torch.rand((B, K, V), generator=gen, device=device).clamp_min_(1e-12)
        x["draft_token_ids"] = (draft_logits - torch.log(-torch.log(u))).argmax(dim=-1)
        del u
    else:
        x["draft_token_ids"] = draft_logits.argmax(dim=-1)
    if case.kernel.startswith("chain"):
        x["target_probs"] = torch.softmax(target_logits, dim=-1).to(dt)
        if classic:
            x["draft_probs"] = torch.softmax(draft_logits, dim=-1).to(dt)
        x["uniforms"] = torch.rand((B, K + 1), generator=gen, device=device)
    else:
        x["target_logits"] = target_logits.to(dt)
        if classic:
            x["draft_logits"] = draft_logits.to(dt)
        x["temperature"] = torch.full((B,), TEMPERATURE, device=device)
        seeds_offsets()
    return x


def clone_inputs(x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy with fresh storage (same values, other addresses) for L2 rotation."""
    return {k: v.clone() for k, v in x.items()}


def allocated_bytes(x: dict[str, torch.Tensor]) -> int:
    """Bytes held by the tensors of one input copy."""
    return sum(v.numel() * v.element_size() for v in x.values())
