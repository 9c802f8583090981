"""FlashInfer's `chain_speculative_sampling` on specsample's kernels, and the reverse: FlashInfer's
own function behind our sampler protocol, for the verifier.

Drop-in replacement for `flashinfer.sampling.chain_speculative_sampling`:

    chain_speculative_sampling(draft_probs, draft_token_ids, target_probs,
        maybe_output_accepted_token_num=None, maybe_output_emitted_draft_token_num=None,
        deterministic=True, generator=None, seed=None, offset=None, *, uniforms=None)
        -> (output_token_ids [B, S+1] int32, output_accepted_token_num [B],
            output_emitted_draft_token_num [B])

Layout (FlashInfer's): draft_probs [B, S, V], draft_token_ids [B, S], target_probs [B, S+1, V] (the
last row is the bonus row) — exactly ours, so no copy is made. Outputs:
  output_token_ids[b] = the accepted drafts, then the correction (residual) or bonus token, then -1
  output_accepted_token_num[b] += the number of drafts that pass the acceptance test when every
      position is tested on its own (not stopping at the first rejection): draft/target agreement
  output_emitted_draft_token_num[b] += the number of drafts actually accepted (the correction/bonus
      token is not counted)
The counters are accumulated in place into the tensors passed (any integer dtype; FlashInfer itself
silently drops int64 counters) or start from zero.

Randomness, as FlashInfer's: `uniforms` [B, S+1] fp32 (our layout: column i < S decides draft i,
column S the emitted token; tokens are then exactly `specsample.chain_rejection_sample`'s), or
`seed`/`offset` (ints or int64 tensors of length 1 or B; tensors keep the call CUDA-graph safe and
the caller advances `offset` between steps), or `generator` (torch.rand). Request b's Philox key is
seed[b], or seed + b * 0x9E3779B97F4A7C15 (mod 2^64) for a single seed, so rows never share a
stream. The uniforms are materialised ([B, S+1] floats) because the acceptance count needs them.
`deterministic` is accepted and ignored: every specsample kernel is deterministic.

Where FlashInfer's kernel differs from our semantics (docs/semantics.md), ours holds: a negative
(padding) draft id is rejected instead of read out of bounds, q(x) = 0 rejects the draft, an empty
residual falls back to p (FlashInfer 0.7.4 writes -1, older versions garbage), and bf16/fp16 inputs
are read as they are (FlashInfer copies them to fp32).
"""

from __future__ import annotations

import torch

from specsample.compat._uniforms import seeded_chain_uniforms
from specsample.kernels._checks import FLOAT_DTYPES as _FLOAT_DTYPES
from specsample.kernels._checks import ID_DTYPES as _INT_DTYPES
from specsample.kernels._checks import check_tensor as _check
from specsample.kernels._checks import fail as _fail
from specsample.reference.chain import UNIFORM_HALF_STEP

_ROW_KEY_STEP = -7046029254386353131  # 0x9E3779B97F4A7C15 as a signed int64


def _per_row(name: str, value, batch: int, device) -> tuple[torch.Tensor, bool]:
    """int or int64 tensor of length 1 / B -> ([B] int64 tensor, whether it was a single value)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return torch.full((batch,), value, dtype=torch.int64, device=device), True
    if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.dim() > 1:
        _fail(
            TypeError, name, "an int or a 1-D int64 tensor of length 1 or B", getattr(value, "dtype", value)
        )
    value = value.reshape(-1)
    if value.shape[0] not in (1, batch):
        _fail(ValueError, name, f"length 1 or B = {batch}", value.shape[0])
    if value.device != device:
        _fail(ValueError, name, f"device {device}", value.device)
    return value.expand(batch), value.shape[0] == 1


def flashinfer_uniforms(batch, columns, device, generator=None, seed=None, offset=None) -> torch.Tensor:
    """[B, S+1] float32 uniforms from FlashInfer's randomness arguments (see the module docstring)."""
    if (seed is None) != (offset is None):
        _fail(ValueError, "seed/offset", "both or neither", (type(seed).__name__, type(offset).__name__))
    if seed is None:
        return torch.rand((batch, columns), generator=generator, dtype=torch.float32, device=device)
    seeds, single = _per_row("seed", seed, batch, device)
    offsets, _ = _per_row("offset", offset, batch, device)
    if single:
        seeds = seeds + torch.arange(batch, dtype=torch.int64, device=device) * _ROW_KEY_STEP
    return seeded_chain_uniforms(seeds.contiguous(), offsets.contiguous(), columns)


def _clean(values: torch.Tensor) -> torch.Tensor:
    v = values.float()
    return torch.where(torch.isfinite(v) & (v > 0), v, torch.zeros_like(v))


def independent_acceptances(target_probs, draft_token_ids, draft_probs, uniforms) -> torch.Tensor:
    """[B] int64: drafts i < S with ok(x_i), q_i(x_i) > 0 and (u_i + 2^-25) q_i(x_i) < p_i(x_i) (cleaned,
    the kernel's test in float64), every position tested whether or not an earlier one was rejected."""
    num_k, vocab = draft_token_ids.shape[1], target_probs.shape[2]
    x = draft_token_ids.long()
    ok = (x >= 0) & (x < vocab)
    xc = x.clamp(0, vocab - 1)[..., None]
    p_x = _clean(target_probs[:, :num_k].gather(2, xc).squeeze(2))
    q_x = _clean(draft_probs.gather(2, xc).squeeze(2))
    u_mid = uniforms[:, :num_k].double() + UNIFORM_HALF_STEP  # docs/semantics.md: the uniform's cell midpoint
    return (ok & (q_x > 0) & (u_mid * q_x.double() < p_x.double())).sum(dim=1)


def chain_speculative_sampling(
    draft_probs: torch.Tensor,
    draft_token_ids: torch.Tensor,
    target_probs: torch.Tensor,
    maybe_output_accepted_token_num: torch.Tensor | None = None,
    maybe_output_emitted_draft_token_num: torch.Tensor | None = None,
    deterministic: bool = True,
    generator: torch.Generator | None = None,
    seed=None,
    offset=None,
    *,
    uniforms: torch.Tensor | None = None,
):
    """FlashInfer's chain speculative sampling (see the module docstring) on
    `specsample.chain_rejection_sample`: (output_token_ids, accepted counter, emitted counter)."""
    del deterministic  # always deterministic
    if not isinstance(target_probs, torch.Tensor) or target_probs.dim() != 3 or target_probs.shape[1] < 2:
        _fail(
            ValueError,
            "target_probs",
            "a [B, S+1, V] tensor with S >= 1",
            getattr(target_probs, "shape", None),
        )
    batch, columns, vocab = target_probs.shape
    num_k = columns - 1
    _check("target_probs", target_probs, (batch, columns, vocab), _FLOAT_DTYPES)
    _check("draft_probs", draft_probs, (batch, num_k, vocab), _FLOAT_DTYPES)
    _check("draft_token_ids", draft_token_ids, (batch, num_k), _INT_DTYPES)
    counters = []
    given = {
        "maybe_output_accepted_token_num": maybe_output_accepted_token_num,
        "maybe_output_emitted_draft_token_num": maybe_output_emitted_draft_token_num,
    }
    for name, t in given.items():
        if t is None:
            t = torch.zeros(batch, dtype=torch.int32, device=target_probs.device)
        _check(name, t, (batch,), _INT_DTYPES)
        counters.append(t)
    device = target_probs.device
    if uniforms is None:
        uniforms = flashinfer_uniforms(batch, columns, device, generator, seed, offset)
    else:
        if generator is not None or seed is not None:
            _fail(ValueError, "uniforms", "no generator/seed/offset alongside explicit uniforms", "both")
        _check("uniforms", uniforms, (batch, columns), (torch.float32,))

    from specsample.kernels.chain import chain_rejection_sample

    res = chain_rejection_sample(target_probs, draft_token_ids, draft_probs, uniforms=uniforms)
    accepted, emitted = counters
    accepted.add_(
        independent_acceptances(target_probs, draft_token_ids, draft_probs, uniforms).to(accepted.dtype)
    )
    emitted.add_(res.num_accepted.to(emitted.dtype))
    return res.tokens, accepted, emitted


# ------------------------------------------------------------------------------------------------
# Reverse direction: FlashInfer's function behind our chain-sampler protocol (specsample.verify)
# ------------------------------------------------------------------------------------------------


def seeds_from_uniforms(uniforms: torch.Tensor) -> torch.Tensor:
    """[B] int64 keys hashed on the device from each row of uniforms (for engines that cannot take
    uniforms: equal rows give equal keys, distinct rows independent-looking ones)."""
    words = (uniforms.double() * 2.0**24).long()
    key = torch.zeros(words.shape[0], dtype=torch.int64, device=words.device)
    for i in range(words.shape[1]):
        key = (key ^ words[:, i]) * _ROW_KEY_STEP + i
    return key


def chain_sampler(engine_fn=None):
    """A function with our chain-sampler signature that runs FlashInfer's chain_speculative_sampling
    (imported from flashinfer when `engine_fn` is None). FlashInfer draws its own uniforms (cuRAND
    Philox), so each row's `uniforms` only key its seed: the verifier can certify FlashInfer's laws,
    not couple its tokens with ours (`specsample_rng = "own"`). One-hot drafts are passed as one-hot
    draft_probs; ragged drafts are not supported by FlashInfer."""
    own_rng = engine_fn is None
    if engine_fn is None:
        from flashinfer.sampling import chain_speculative_sampling as engine_fn

    def flashinfer_chain(
        target_probs, draft_token_ids, draft_probs=None, *, num_draft_tokens=None, uniforms=None
    ):
        if num_draft_tokens is not None:
            _fail(ValueError, "num_draft_tokens", "None (FlashInfer has no ragged drafts)", "a tensor")
        if uniforms is None:
            _fail(ValueError, "uniforms", "a [B, S+1] tensor", None)
        batch, columns, vocab = target_probs.shape
        ids = draft_token_ids
        if draft_probs is None:
            x = ids.long()
            draft_probs = torch.zeros(
                batch, columns - 1, vocab, dtype=torch.float32, device=target_probs.device
            )
            draft_probs.scatter_(
                2, x.clamp(0, vocab - 1)[..., None], ((x >= 0) & (x < vocab))[..., None].float()
            )
        if own_rng:
            seeds = seeds_from_uniforms(uniforms)
            zero = torch.zeros_like(seeds)
            out, _, emitted = engine_fn(
                draft_probs.float(), ids.int(), target_probs.float(), seed=seeds, offset=zero
            )
        else:
            out, _, emitted = engine_fn(draft_probs, ids, target_probs, uniforms=uniforms)
        return {"tokens": out.long(), "num_accepted": emitted.long()}

    flashinfer_chain.specsample_rng = "own" if own_rng else "injected"
    return flashinfer_chain
