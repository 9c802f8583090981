"""Plain-PyTorch versions of the sampling algorithms: the baselines a user would write with torch ops.

They implement the same algorithms as the specsample kernels (DESIGN.md §1) so that a same-run time
ratio is meaningful, vectorised over the batch, with no host synchronisation (CUDA-graph capturable):

- `chain_rejection_torch`: accept draft i iff m_i q_i(x_i) < p_i(x_i) (one-hot: m_i < p_i(x_i)),
  m_i = u_i + 2^-25,
  a = number of leading accepts, then one token from the residual max(0, p_a - q_a) (the bonus row
  p_K when a = K) by inverse CDF at u_K + 2^-25: the smallest v with cumsum_v > (u_K + 2^-25) * total;
  an empty residual falls back to p_a.
- `fast_sample_multinomial`: torch.multinomial; `fast_sample_gumbel`: argmax p / E, E ~ Exp(1) in
  torch ops (three passes over the row: noise, divide, argmax).
- `sample_from_logits_torch`: softmax(logits / T), then the torch-ops Gumbel draw.
- `rejection_sample_logits_torch`: softmax-then-sample: p = softmax(target_logits / T) and
  q = softmax(draft_logits / T) materialised in fp32, torch.rand uniforms, then the chain above.
They assume valid inputs (ids in range, finite probabilities, temperatures > 0); the kernels'
edge-case semantics are not reproduced, since only well-formed benchmark inputs reach them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specsample.reference.chain import UNIFORM_HALF_STEP


def chain_rejection_torch(
    target_probs: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_probs: torch.Tensor | None,
    uniforms: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(tokens [B, K+1] int32 -1 padded, num_accepted [B] int32, fallback [B] bool) for
    target_probs [B, K+1, V], draft_token_ids [B, K], draft_probs [B, K, V] or None (one-hot),
    uniforms [B, K+1] in [0, 1)."""
    B, K1, V = target_probs.shape
    K = K1 - 1
    ids = draft_token_ids.long()
    rows = torch.arange(B, device=target_probs.device)
    p_at_draft = target_probs[:, :K].gather(2, ids.unsqueeze(-1)).squeeze(-1).float()
    u_mid = uniforms[:, :K].double() + UNIFORM_HALF_STEP  # the uniform's cell midpoint (docs/semantics.md)
    if draft_probs is None:
        accept = u_mid < p_at_draft.double()
    else:
        q_at_draft = draft_probs.gather(2, ids.unsqueeze(-1)).squeeze(-1).float()
        accept = u_mid * q_at_draft.double() < p_at_draft.double()
    num_accepted = accept.long().cumprod(dim=1).sum(dim=1)  # leading accepts, [B]

    p_row = target_probs[rows, num_accepted].float()  # [B, V]: residual or bonus row of p
    rejected = (num_accepted < K).unsqueeze(1)
    q_pos = num_accepted.clamp(max=K - 1)
    if draft_probs is None:
        q_row = torch.zeros_like(p_row).scatter_(1, ids[rows, q_pos].unsqueeze(1), 1.0)
    else:
        q_row = draft_probs[rows, q_pos].float()
    residual = (p_row - q_row * rejected).clamp_min(0.0)  # the bonus row has no draft to subtract
    total = residual.sum(dim=1)
    fallback = total <= 0
    residual = torch.where(fallback.unsqueeze(1), p_row, residual)
    total = torch.where(fallback, p_row.sum(dim=1), total)
    cdf = residual.cumsum(dim=1)
    target = ((uniforms[:, K].double() + UNIFORM_HALF_STEP) * total).float().unsqueeze(1)
    token = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp_(max=V - 1)

    positions = torch.arange(K1, device=target_probs.device)
    tokens = torch.where(positions < num_accepted.unsqueeze(1), F.pad(ids, (0, 1)), -1)
    tokens.scatter_(1, num_accepted.unsqueeze(1), token.unsqueeze(1))
    return tokens.int(), num_accepted.int(), fallback


def fast_sample_multinomial(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sample_p [B, 1], sample_index [B, 1] int64) by torch.multinomial."""
    index = torch.multinomial(probs, 1)
    return probs.gather(1, index), index


def _gumbel_argmax(probs: torch.Tensor) -> torch.Tensor:
    noise = torch.empty(probs.shape, dtype=torch.float32, device=probs.device).exponential_()
    noise.clamp_min_(torch.finfo(torch.float32).tiny)
    return (probs.float() / noise).argmax(dim=1, keepdim=True)


def fast_sample_gumbel(probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sample_p [B, 1], sample_index [B, 1] int64): argmax p / E, E ~ Exp(1), in torch ops."""
    index = _gumbel_argmax(probs)
    return probs.gather(1, index), index


def sample_from_logits_torch(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """sample_index [B] int64 from softmax(logits / T) (materialised), by the torch-ops Gumbel draw."""
    probs = torch.softmax(logits.float() / temperature.unsqueeze(1), dim=-1)
    return _gumbel_argmax(probs).squeeze(1)


def rejection_sample_logits_torch(
    target_logits: torch.Tensor,
    draft_token_ids: torch.Tensor,
    draft_logits: torch.Tensor | None,
    temperature: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Softmax-then-sample: chain_rejection_torch on softmax(logits / T) with torch.rand uniforms."""
    B, K1, _ = target_logits.shape
    t = temperature.view(-1, 1, 1)
    p = torch.softmax(target_logits.float() / t, dim=-1)
    q = None if draft_logits is None else torch.softmax(draft_logits.float() / t, dim=-1)
    uniforms = torch.rand((B, K1), device=target_logits.device)
    return chain_rejection_torch(p, draft_token_ids, q, uniforms)
