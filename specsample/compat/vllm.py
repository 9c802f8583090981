"""vLLM's (model runner V1) `rejection_sample` on specsample's kernels, and the reverse: vLLM's own
function behind our sampler protocol, for the verifier.

Drop-in replacement for `vllm.v1.sample.rejection_sampler.rejection_sample`:

    rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                     target_logits, bonus_token_ids, sampling_metadata, synthetic_mode=False,
                     synthetic_conditional_rates=None, use_fp64_gumbel=False, *, uniforms=None)
        -> output_token_ids [B, max_spec_len + 1] int32

vLLM's ragged layout, T = sum(num_draft_tokens) flattened draft positions:
  draft_token_ids [T]          the drafts of request b at rows start_b .. start_b + n_b - 1
                               (start_b = cu_num_draft_tokens[b] - n_b); a negative id is a
                               placeholder and is rejected
  num_draft_tokens list[int]   n_b on the host; cu_num_draft_tokens [B] its inclusive cumsum on the
                               device
  draft_probs [T, V] | None    q of each draft; None = one-hot drafts (greedy / n-gram proposals)
  target_logits [T, V]         processed target logits (temperature, top-k/top-p already applied by
                               vLLM; greedy rows unscaled): p = softmax(target_logits) in float32
  bonus_token_ids [B, 1]       the token vLLM's sampler drew from the bonus row, emitted when every
                               draft is accepted
  sampling_metadata            read: all_greedy, all_random, temperature [B] (0 = greedy row),
                               generators {request index: torch.Generator}
Output: row b = the accepted drafts, then the recovered token (residual draw at the first rejection)
or the bonus token, then -1 (PLACEHOLDER_TOKEN_ID). Greedy rows follow vLLM's greedy rule: accept while
the draft equals the target argmax, then emit the argmax (or the bonus token after a full match).

Randomness. `uniforms` [B, max_spec_len + 1] (our layout: column i < n_b decides draft i, column
max_spec_len drives the recovered token by inverse CDF) makes the call a deterministic function of its
inputs: the tokens are then exactly `specsample.chain_rejection_sample`'s. Without it the adapter draws
them the way vLLM does: float64 torch.rand from the global generator, overwritten per seeded request
from its generator (requests with no drafts consume nothing), rounded to float32 below 1. That host
loop over `generators` is vLLM's own; there is no host synchronisation beyond it.

Cost. When every request has max_spec_len drafts (the uniform decode step), target rows are used in
place: softmax writes into a [T + 1, V] buffer viewed as [B, K+1, V] (row K of request b is request
b + 1's first row, or the spare row, and is never used: the bonus token comes from vLLM). Ragged
batches gather the rows into the padded layout first (one copy of B (K+1) V floats).

Differences from vLLM's kernels, where ours is docs/semantics.md: acceptance is
`(u + 2^-25) q(x) < p(x)`, the uniform's 2^-24 cell midpoint (vLLM: `p(x) / q(x) >= u`, which accepts
a draft of ratio below 2^-24 at u = 0), the recovered token is drawn
by inverse CDF at one uniform (vLLM: an exponential race), an empty residual falls back to p (vLLM
returns token 0), and a row whose target has no mass emits -1 in the recovered slot.
"""

from __future__ import annotations

import torch

from specsample.kernels._checks import FLOAT_DTYPES as _FLOAT_DTYPES
from specsample.kernels._checks import ID_DTYPES as _INT_DTYPES
from specsample.kernels._checks import check_tensor as _check
from specsample.kernels._checks import fail as _fail
from specsample.reference.chain import UNIFORM_HALF_STEP

PLACEHOLDER_TOKEN_ID = -1
_BELOW_ONE = 1.0 - 2.0**-24  # largest float32 below 1


def padded_rows(cu_num_draft_tokens, max_spec_len: int, num_tokens: int):
    """(rows [B, K+1] int64, n [B] int64) on the device: rows[b, i] is the flat row of draft i of
    request b for i < n_b, and some valid row (never used as a draft row) otherwise."""
    cu = cu_num_draft_tokens.long()
    n = cu - torch.cat([cu.new_zeros(1), cu[:-1]])
    start = cu - n
    pos = torch.arange(max_spec_len + 1, device=cu.device)
    rows = start[:, None] + torch.minimum(pos[None, :], (n - 1).clamp_min(0)[:, None])
    return rows.clamp_(0, max(num_tokens - 1, 0)), n


def draw_uniforms(num_draft_tokens, max_spec_len, generators, device) -> torch.Tensor:
    """[B, K+1] float32 uniforms drawn as vLLM draws its acceptance uniforms: float64 torch.rand,
    rows of seeded requests (with at least one draft) redrawn from their generator, then rounded to
    float32 and clamped below 1."""
    batch = len(num_draft_tokens)
    u = torch.rand((batch, max_spec_len + 1), dtype=torch.float64, device=device)
    for req, generator in (generators or {}).items():
        if num_draft_tokens[req] > 0:
            u[req].uniform_(generator=generator)
    return u.float().clamp_(max=_BELOW_ONE)


def _greedy_tokens(rows, n, ids, target_logits, bonus, max_spec_len):
    """vLLM's greedy rule on [B, K] padded drafts: accept while draft == argmax, emit the argmax at
    the first mismatch, the bonus token after a full match."""
    argmax = target_logits.argmax(dim=-1)[rows[:, :max_spec_len]]  # [B, K]
    pos = torch.arange(max_spec_len + 1, device=ids.device)
    live = pos[None, :max_spec_len] < n[:, None]
    match = (ids == argmax) & live
    a = torch.cumprod(match.to(torch.int32), dim=1).sum(dim=1)
    emitted = torch.where(a == n, bonus, argmax.gather(1, a.clamp(max=max_spec_len - 1)[:, None]).squeeze(1))
    ids_k1 = torch.cat([ids, ids.new_full((ids.shape[0], 1), PLACEHOLDER_TOKEN_ID)], dim=1)
    out = torch.where(pos[None, :] < a[:, None], ids_k1, PLACEHOLDER_TOKEN_ID)
    return torch.where(pos[None, :] == a[:, None], emitted[:, None], out)


def rejection_sample(
    draft_token_ids: torch.Tensor,
    num_draft_tokens: list[int],
    max_spec_len: int,
    cu_num_draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor | None,
    target_logits: torch.Tensor,
    bonus_token_ids: torch.Tensor,
    sampling_metadata,
    synthetic_mode: bool = False,
    synthetic_conditional_rates: torch.Tensor | None = None,
    use_fp64_gumbel: bool = False,
    *,
    uniforms: torch.Tensor | None = None,
) -> torch.Tensor:
    """vLLM's `rejection_sample` (see the module docstring for the layout) on
    `specsample.chain_rejection_sample`. Returns [B, max_spec_len + 1] int32, -1 padded."""
    del synthetic_conditional_rates, use_fp64_gumbel  # no synthetic mode; uniforms are never fp64-raced
    if synthetic_mode:
        _fail(NotImplementedError, "synthetic_mode", "False (a benchmarking mode, not a sampler)", True)
    batch = len(num_draft_tokens)
    if not isinstance(target_logits, torch.Tensor) or target_logits.dim() != 2:
        _fail(ValueError, "target_logits", "a [T, V] tensor", getattr(target_logits, "shape", target_logits))
    num_tokens, vocab = target_logits.shape
    if sum(num_draft_tokens) != num_tokens or min(num_draft_tokens, default=0) < 0:
        _fail(ValueError, "num_draft_tokens", f"non-negative counts summing to T = {num_tokens}",
              list(num_draft_tokens))  # fmt: skip
    if max(num_draft_tokens, default=0) > max_spec_len or max_spec_len < 1:
        _fail(ValueError, "max_spec_len", ">= 1 and >= max(num_draft_tokens)", max_spec_len)
    _check("target_logits", target_logits, (num_tokens, vocab), _FLOAT_DTYPES)
    _check("draft_token_ids", draft_token_ids, (num_tokens,), _INT_DTYPES)
    _check("cu_num_draft_tokens", cu_num_draft_tokens, (batch,), _INT_DTYPES)
    _check("bonus_token_ids", bonus_token_ids, (batch, 1), _INT_DTYPES)
    if draft_probs is not None:
        _check("draft_probs", draft_probs, (num_tokens, vocab), _FLOAT_DTYPES)
    if uniforms is not None:
        _check("uniforms", uniforms, (batch, max_spec_len + 1), (torch.float32,))
    device = target_logits.device
    k = max_spec_len
    out_dtype = torch.int32

    rows, n = padded_rows(cu_num_draft_tokens, k, num_tokens)
    bonus = bonus_token_ids.reshape(batch).long()
    pos = torch.arange(k + 1, device=device)
    if num_tokens == 0:  # no drafts anywhere: every request emits its bonus token
        return torch.where(pos[None, :] == 0, bonus[:, None], PLACEHOLDER_TOKEN_ID).to(out_dtype)
    ids = draft_token_ids.long()[rows[:, :k]]

    greedy_out = None
    if not sampling_metadata.all_random:
        greedy_out = _greedy_tokens(rows, n, ids, target_logits, bonus, k)
        if sampling_metadata.all_greedy:
            return greedy_out.to(out_dtype)

    from specsample.kernels.chain import chain_rejection_sample

    uniform_batch = all(c == k for c in num_draft_tokens)
    if uniform_batch:  # rows used in place; one spare row keeps request B-1's unused row K in bounds
        buf = torch.empty((num_tokens + 1) * vocab, dtype=torch.float32, device=device)
        torch.softmax(
            target_logits, dim=-1, dtype=torch.float32, out=buf[: num_tokens * vocab].view(num_tokens, vocab)
        )
        buf[num_tokens * vocab :].fill_(1.0)
        p = buf.as_strided((batch, k + 1, vocab), (k * vocab, vocab, 1))
        q = None if draft_probs is None else draft_probs.view(batch, k, vocab)
    else:
        p = torch.softmax(target_logits.index_select(0, rows.reshape(-1)), dim=-1, dtype=torch.float32)
        p = p.view(batch, k + 1, vocab)
        q = (
            None
            if draft_probs is None
            else draft_probs.index_select(0, rows[:, :k].reshape(-1)).view(batch, k, vocab)
        )
    if uniforms is None:
        uniforms = draw_uniforms(num_draft_tokens, k, getattr(sampling_metadata, "generators", None), device)
    res = chain_rejection_sample(p, ids, q, num_draft_tokens=None if uniform_batch else n, uniforms=uniforms)
    a = res.num_accepted.long()
    bonus_slot = (pos[None, :] == a[:, None]) & (a == n)[:, None]
    out = torch.where(bonus_slot, bonus[:, None], res.tokens.long())
    if greedy_out is not None:
        out = torch.where((sampling_metadata.temperature == 0)[:, None], greedy_out, out)
    return out.to(out_dtype)


# ------------------------------------------------------------------------------------------------
# Reverse direction: vLLM's function behind our chain-sampler protocol (specsample.verify)
# ------------------------------------------------------------------------------------------------


class _AllRandom:
    """The fields of vLLM's SamplingMetadata that `rejection_sample` reads, for all-random batches."""

    all_greedy = False
    all_random = True

    def __init__(self, batch: int, device):
        self.temperature = torch.ones(batch, dtype=torch.float32, device=device)
        self.generators: dict = {}


def vllm_layout(target_probs, draft_token_ids, draft_probs, num_draft_tokens):
    """Our padded inputs -> vLLM's ragged ones (host-side: the verifier's inputs are host data).
    Returns (kwargs for rejection_sample without bonus_token_ids, n list)."""
    batch, k_plus_1, vocab = target_probs.shape
    k = k_plus_1 - 1
    device = target_probs.device
    n = (
        [k] * batch
        if num_draft_tokens is None
        else [min(max(int(c), 0), k) for c in num_draft_tokens.tolist()]
    )
    rows = [(b, i) for b in range(batch) for i in range(n[b])]
    bi = torch.tensor([r[0] for r in rows], dtype=torch.int64, device=device)
    ii = torch.tensor([r[1] for r in rows], dtype=torch.int64, device=device)
    logits = torch.log(target_probs.float()[bi, ii])  # softmax(log p) = p / sum(p); p = 0 -> -inf
    cu = torch.tensor(n, dtype=torch.int64, device=device).cumsum(0).to(torch.int32)
    return dict(
        draft_token_ids=draft_token_ids.to(torch.int32)[bi, ii].contiguous(),
        num_draft_tokens=n,
        max_spec_len=k,
        cu_num_draft_tokens=cu,
        draft_probs=None if draft_probs is None else draft_probs.float()[bi, ii].contiguous(),
        target_logits=logits.contiguous(),
        sampling_metadata=_AllRandom(batch, device),
    ), n


def bonus_tokens(target_probs, n, u_last) -> torch.Tensor:
    """[B, 1] bonus tokens drawn from row n_b by our inverse CDF at u_last (what our kernel emits
    after a full accept)."""
    batch = target_probs.shape[0]
    rows = target_probs.float()[
        torch.arange(batch, device=target_probs.device), torch.as_tensor(n).to(target_probs.device)
    ]
    rows = torch.nan_to_num(rows, nan=0.0, posinf=0.0).clamp_min(0.0)
    cdf = rows.cumsum(-1)
    thresh = ((u_last.double() + UNIFORM_HALF_STEP) * cdf[:, -1].double()).float()  # docs/semantics.md
    idx = (cdf <= thresh[:, None]).sum(-1).clamp(max=rows.shape[1] - 1)
    return idx.view(batch, 1).to(torch.int32)


def chain_sampler(engine_fn=None):
    """A function with our chain-sampler signature that runs vLLM's `rejection_sample` (imported
    from vllm when `engine_fn` is None). Column i < K of `uniforms` is injected as vLLM's acceptance
    uniform of draft i and column K draws the bonus token; vLLM draws its recovered tokens with its
    own exponential race (torch's global generator), so the verifier can certify vLLM's law but
    cannot couple its recovered tokens with ours (`specsample_rng = "partly own"`)."""
    patch_uniforms = engine_fn is None
    if engine_fn is None:
        from vllm.v1.sample import rejection_sampler as _module

        engine_fn = _module.rejection_sample

    def vllm_chain(target_probs, draft_token_ids, draft_probs=None, *, num_draft_tokens=None, uniforms=None):
        if uniforms is None:
            _fail(ValueError, "uniforms", "a [B, K+1] tensor", None)
        kwargs, n = vllm_layout(target_probs, draft_token_ids, draft_probs, num_draft_tokens)
        k = kwargs["max_spec_len"]
        bonus = bonus_tokens(target_probs, n, uniforms[:, k])
        if patch_uniforms:
            flat = torch.cat([uniforms[b, : n[b]] for b in range(len(n))]).double()
            saved = _module.generate_uniform_probs
            _module.generate_uniform_probs = lambda *args, **kw: flat
            try:
                out = engine_fn(**kwargs, bonus_token_ids=bonus)
            finally:
                _module.generate_uniform_probs = saved
        else:
            out = engine_fn(**kwargs, bonus_token_ids=bonus, uniforms=uniforms.float())
        out = out.long()
        num_accepted = ((out != PLACEHOLDER_TOKEN_ID).sum(dim=1) - 1).clamp_min(0)
        return {"tokens": out, "num_accepted": num_accepted}

    vllm_chain.specsample_rng = "partly own" if patch_uniforms else "injected"
    return vllm_chain
