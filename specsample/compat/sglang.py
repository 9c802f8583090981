"""SGLang's speculative-sampling entry points, implemented on specsample's kernels (and the reverse:
SGLang's own function behind our sampler protocol, for the verifier).

Drop-in replacements (same signature, same output layout, outputs written in place):

    chain_speculative_sampling_triton(predicts, accept_index, accept_token_num, candidates,
        retrive_index, retrive_next_token, retrive_next_sibling, uniform_samples,
        uniform_samples_for_final_sampling, target_probs, draft_probs,
        threshold_single=1.0, threshold_acc=1.0, deterministic=True) -> None
    fast_sample(probs, num_samples=1) -> (sample_p [B, n], sample_index [B, n] int64)

SGLang's chain layout, S = num_draft_tokens = K + 1 slots per request:
  candidates [bs, S]         column 0 is the root (last committed token, unused), 1..S-1 the drafts
  retrive_index [bs, S]      global slot id of each slot (b * S + j in EAGLE), indexes predicts
  uniform_samples [bs, S]    column j - 1 decides draft slot j; the last column is unused
  uniform_samples_for_final_sampling [bs]   the separate coin of the emitted token
  target_probs [bs, S, V]    row j = target distribution after slot j (row S-1 = the bonus row)
  draft_probs [bs, S-1, V]   row j = the draft distribution slot j + 1 was drawn from
                             ([bs, S, V] is accepted too; its last row is never read)
Outputs, with a = number of accepted drafts:
  predicts[retrive_index[b, j]] = token emitted after slot j, j = 0..a (accepted draft j + 1 for j < a,
                                  the residual or bonus token for j = a); other entries untouched
  accept_index[b, 0..a] = retrive_index[b, 0..a]; later columns untouched (EAGLE fills them with -1)
  accept_token_num[b] = a (the emitted token is not counted)

The translation is candidates[:, 1:] -> draft_token_ids, [uniform_samples[:, :K], final coin] ->
uniforms [bs, K+1], then `specsample.chain_rejection_sample`, then a gather/scatter of its [bs, K+1]
tokens through retrive_index. Given the same coins, the tokens are exactly ours. Where SGLang's own
kernel differs from our semantics (docs/semantics.md), ours holds: a draft with q(x) = 0 is rejected
(SGLang accepts it when p(x) > 0), an empty residual falls back to p instead of returning token V-1,
and a request whose emitting target row has no mass gets -1 in its predicts slot. retrive_next_token
and retrive_next_sibling are ignored (a chain is assumed, as SGLang's Triton kernel does);
threshold_single / threshold_acc must be 1 (exact sampling) and `deterministic` is always true here.
No host synchronisation: the call can be captured in a CUDA graph.
"""

from __future__ import annotations

import torch

from specsample.kernels._checks import FLOAT_DTYPES as _FLOAT_DTYPES
from specsample.kernels._checks import ID_DTYPES as _INT_DTYPES
from specsample.kernels._checks import check_tensor as _check
from specsample.kernels._checks import fail as _fail


def native_inputs(candidates, uniform_samples, uniform_samples_for_final_sampling, draft_probs):
    """SGLang inputs -> (draft_token_ids [bs, K], uniforms [bs, K+1] fp32, draft_probs [bs, K, V]).

    Views where possible; the only copy is the [bs, K+1] uniforms."""
    num_k = candidates.shape[1] - 1
    uniforms = torch.cat(
        [uniform_samples[:, :num_k].float(), uniform_samples_for_final_sampling.reshape(-1, 1).float()], dim=1
    )
    q = None if draft_probs is None else draft_probs[:, :num_k]
    return candidates[:, 1:], uniforms, q


def write_outputs(tokens, num_accepted, retrive_index, predicts, accept_index, accept_token_num) -> None:
    """Scatter our [bs, K+1] tokens / [bs] num_accepted into SGLang's predicts / accept_index /
    accept_token_num through retrive_index (entries past the accepted slots keep their values)."""
    slots = retrive_index.long()
    cols = torch.arange(slots.shape[1], device=slots.device)
    taken = cols[None, :] <= num_accepted.long()[:, None]  # root + accepted slots
    flat = slots.reshape(-1)
    kept = predicts.index_select(0, flat).view_as(slots)
    predicts.index_copy_(0, flat, torch.where(taken, tokens.to(predicts.dtype), kept).reshape(-1))
    accept_index.copy_(torch.where(taken, slots.to(accept_index.dtype), accept_index))
    accept_token_num.copy_(num_accepted.to(accept_token_num.dtype))


def chain_speculative_sampling_triton(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    uniform_samples: torch.Tensor,
    uniform_samples_for_final_sampling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    deterministic: bool = True,
) -> None:
    """SGLang's chain verification (see the module docstring for the layout) on
    `specsample.chain_rejection_sample`. Writes predicts, accept_index and accept_token_num in place."""
    # a chain is assumed (as SGLang's Triton kernel does) and the kernel is always deterministic
    del retrive_next_token, retrive_next_sibling, deterministic
    if threshold_single != 1.0 or threshold_acc != 1.0:
        _fail(ValueError, "threshold_single/threshold_acc", "1.0 (exact, lossless verification)",
              (threshold_single, threshold_acc))  # fmt: skip
    if not isinstance(candidates, torch.Tensor) or candidates.dim() != 2 or candidates.shape[1] < 1:
        _fail(
            ValueError, "candidates", "a [bs, S] tensor with S >= 1", getattr(candidates, "shape", candidates)
        )
    bs, slots = candidates.shape
    if not isinstance(target_probs, torch.Tensor) or target_probs.dim() != 3:
        _fail(ValueError, "target_probs", f"a [bs, S, V] = [{bs}, {slots}, V] tensor",
              getattr(target_probs, "shape", target_probs))  # fmt: skip
    vocab = target_probs.shape[2]
    _check("target_probs", target_probs, (bs, slots, vocab), _FLOAT_DTYPES)
    _check("candidates", candidates, (bs, slots), _INT_DTYPES)
    _check("retrive_index", retrive_index, (bs, slots), _INT_DTYPES)
    _check("uniform_samples", uniform_samples, (bs, slots), _FLOAT_DTYPES)
    _check("uniform_samples_for_final_sampling", uniform_samples_for_final_sampling, (bs,), _FLOAT_DTYPES)
    _check("accept_index", accept_index, (bs, slots), _INT_DTYPES)
    _check("accept_token_num", accept_token_num, (bs,), _INT_DTYPES)
    if not isinstance(predicts, torch.Tensor) or predicts.dim() != 1 or predicts.dtype not in _INT_DTYPES:
        _fail(ValueError, "predicts", "a 1-D int32/int64 tensor indexed by retrive_index",
              getattr(predicts, "shape", predicts))  # fmt: skip
    if draft_probs is not None:
        rows = (
            draft_probs.shape[1] if isinstance(draft_probs, torch.Tensor) and draft_probs.dim() == 3 else -1
        )
        _check("draft_probs", draft_probs, (bs, slots if rows == slots else slots - 1, vocab), _FLOAT_DTYPES)

    from specsample.kernels.chain import chain_rejection_sample

    ids, uniforms, q = native_inputs(
        candidates, uniform_samples, uniform_samples_for_final_sampling, draft_probs
    )
    res = chain_rejection_sample(target_probs, ids, q, uniforms=uniforms)
    write_outputs(res.tokens, res.num_accepted, retrive_index, predicts, accept_index, accept_token_num)


def fast_sample(probs: torch.Tensor, num_samples: int = 1):
    """SGLang's `fast_sample(probs, num_samples)`: (sample_p [B, n] in probs' dtype, sample_index
    [B, n] int64), one draw (n = 1) or n draws without replacement per row, on
    `specsample.fast_sample` (exponential race; randomness from torch's default generator, so it is
    fresh on every CUDA-graph replay). Rows with no positive finite mass return index -1 and p 0
    (SGLang's torch version returns index 0 there)."""
    from specsample.kernels.gumbel import fast_sample as _fast_sample

    return _fast_sample(probs, num_samples)


# ------------------------------------------------------------------------------------------------
# Reverse direction: SGLang's function behind our chain-sampler protocol (specsample.verify)
# ------------------------------------------------------------------------------------------------


def sglang_layout(target_probs, draft_token_ids, draft_probs, uniforms):
    """Our inputs -> SGLang's, built the way EAGLE builds them: root column 0, retrive_index
    b * S + j, predicts zeros, accept_index -1, one-hot draft_probs when ours are None."""
    bs, slots, vocab = target_probs.shape
    device = target_probs.device
    ids = draft_token_ids.long()
    if draft_probs is None:
        valid = (ids >= 0) & (ids < vocab)
        draft_probs = torch.zeros(bs, slots - 1, vocab, dtype=torch.float32, device=device)
        draft_probs.scatter_(2, ids.clamp(0, vocab - 1)[..., None], valid[..., None].float())
    root = torch.zeros(bs, 1, dtype=torch.int64, device=device)
    return dict(
        predicts=torch.zeros(bs * slots, dtype=torch.int32, device=device),
        accept_index=torch.full((bs, slots), -1, dtype=torch.int32, device=device),
        accept_token_num=torch.zeros(bs, dtype=torch.int32, device=device),
        candidates=torch.cat([root, ids], dim=1),
        retrive_index=torch.arange(bs * slots, dtype=torch.int64, device=device).view(bs, slots),
        retrive_next_token=torch.full((bs, slots), -1, dtype=torch.int64, device=device),
        retrive_next_sibling=torch.full((bs, slots), -1, dtype=torch.int64, device=device),
        uniform_samples=uniforms.float().contiguous(),  # column S-1 is unused by SGLang
        uniform_samples_for_final_sampling=uniforms[:, slots - 1].float().contiguous(),
        target_probs=target_probs.float(),
        draft_probs=draft_probs.float(),
    )


def read_outputs(predicts, accept_index, accept_token_num, retrive_index):
    """SGLang's outputs -> (tokens [bs, S] int64 in our layout, -1 padded; num_accepted [bs])."""
    a = accept_token_num.long()
    slots = retrive_index.long()
    cols = torch.arange(slots.shape[1], device=slots.device)
    tokens = predicts.long()[slots]
    return torch.where(cols[None, :] <= a[:, None], tokens, -1), a


_ENGINE_MODULES = (
    "sglang.kernels.ops.speculative.reject_sampling",  # after sglang PR #31582
    "sglang.srt.speculative.reject_sampling",  # where PR #26312 added it
)


def _import_engine_fn():
    import importlib

    errors = []
    for name in _ENGINE_MODULES:
        try:
            return importlib.import_module(name).chain_speculative_sampling_triton
        except (ImportError, AttributeError) as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("SGLang's chain_speculative_sampling_triton not found: " + "; ".join(errors))


def chain_sampler(engine_fn=None):
    """A function with our chain-sampler signature (specsample.verify.protocol) that runs SGLang's
    `chain_speculative_sampling_triton` (imported from sglang when `engine_fn` is None). Uniforms are
    passed through unchanged, so the verifier's coupling tests apply. SGLang has no ragged drafts and
    no seeded path: num_draft_tokens must be None and uniforms are required."""
    if engine_fn is None:
        engine_fn = _import_engine_fn()

    def sglang_chain(
        target_probs, draft_token_ids, draft_probs=None, *, num_draft_tokens=None, uniforms=None
    ):
        if num_draft_tokens is not None:
            _fail(ValueError, "num_draft_tokens", "None (SGLang has no ragged drafts)", "a tensor")
        if uniforms is None:
            _fail(ValueError, "uniforms", "a [B, K+1] tensor (SGLang takes its coins as inputs)", None)
        args = sglang_layout(target_probs, draft_token_ids, draft_probs, uniforms)
        engine_fn(**args, threshold_single=1.0, threshold_acc=1.0, deterministic=True)
        tokens, a = read_outputs(args["predicts"], args["accept_index"], args["accept_token_num"],
                                 args["retrive_index"])  # fmt: skip
        return {"tokens": tokens, "num_accepted": a}

    return sglang_chain
