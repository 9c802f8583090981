"""The result type shared by the chain and logits rejection samplers."""

from __future__ import annotations

from typing import NamedTuple

import torch


class SampleResult(NamedTuple):
    """Output of `chain_rejection_sample` / `rejection_sample_logits`.

    tokens        [B, K+1] int32: the accepted drafts, then the emitted token (residual draw at the
                  first rejection, or the bonus token when all drafts were accepted), then -1.
                  The emitted slot is -1 when its target row has no valid mass (`valid` False).
    num_accepted  [B] int32: a, the number of accepted drafts (0 <= a <= n_b).
    fallback      [B] bool: the residual max(0, p - q) had no mass (norm_sum == 0) and the token
                  was drawn from p itself.
    valid         [B] bool: False when the emitting target row had no positive finite mass.
    """

    tokens: torch.Tensor
    num_accepted: torch.Tensor
    fallback: torch.Tensor
    valid: torch.Tensor


def empty_result(batch: int, k_plus_1: int, device: torch.device) -> SampleResult:
    """Uninitialised outputs for a launch to fill (every field is written for every row)."""
    return SampleResult(
        torch.empty(batch, k_plus_1, dtype=torch.int32, device=device),
        torch.empty(batch, dtype=torch.int32, device=device),
        torch.empty(batch, dtype=torch.bool, device=device),
        torch.empty(batch, dtype=torch.bool, device=device),
    )
