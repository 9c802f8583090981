"""torch.library registration of the public specsample ops, in the `specsample` namespace.

After `import specsample.ops`:

    torch.ops.specsample.chain_rejection_sample(target_probs, draft_token_ids, draft_probs=None,
        num_draft_tokens=None, uniforms=None, seeds=None, offsets=None)
        -> (tokens [B, K+1] int32, num_accepted [B] int32, fallback [B] bool, valid [B] bool)
    torch.ops.specsample.rejection_sample_logits(target_logits, draft_token_ids, draft_logits=None,
        temperature=..., seeds=..., offsets=..., num_draft_tokens=None)   -> the same four tensors
    torch.ops.specsample.fast_sample(probs, num_samples=1, seeds=None, offsets=None)
        -> (sample_p [B, n] probs.dtype, sample_index [B, n] int64)
    torch.ops.specsample.sample_from_logits / .renorm_draft_probs   (once kernels/gumbel.py has them)

Each op is a `torch.library.triton_op` whose implementation is the Python launcher of DESIGN.md §2,
so eager calls cost one dispatcher hop on top of the launcher. What the registration guarantees:

- Schemas are inferred from the type hints below. Custom ops cannot take keyword-only tensors, so
  the launchers' keyword-only tensors are positional-or-keyword here (pass them by name); required
  ones (`temperature`, `seeds`, `offsets` of the logits op) default to None and are checked by the
  launcher. Python-only arguments are left out: a `torch.Generator` has no schema type, so the ops
  take `uniforms` or `seeds`/`offsets` tensors, or neither (then torch's default generator is used
  inside, which is CUDA-graph safe).
- Fake (meta) implementations return the output shapes and dtypes from metadata alone, so the ops
  trace under FakeTensorMode, `torch.compile(fullgraph=True)` and `torch.export`.
- Declared mutations are exact: no launcher writes its inputs (offsets are not advanced: callers
  advance them between steps), except `sample_from_logits`, which writes `probs_out` when given.
- Under functionalization (AOTAutograd, hence torch.compile) the ops stay opaque: the compiled graph
  calls the launcher, which launches the Triton kernels unchanged. triton_op's default would trace
  into the launcher instead, which needs every kernel launch wrapped in `torch.library.wrap_triton`;
  `DECOMPOSE_UNDER_COMPILE` switches that default back on once the launchers do so.
- On CPU tensors the ops run the kernels under the Triton interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import torch
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.library import triton_op

from specsample.kernels import chain as _chain
from specsample.kernels import gumbel as _gumbel
from specsample.kernels import logits as _logits

NAMESPACE = "specsample"
# False: keep the ops opaque under functionalization (see the module docstring).
DECOMPOSE_UNDER_COMPILE = False

Tensor = torch.Tensor
ChainOutputs = tuple[Tensor, Tensor, Tensor, Tensor]


def _result_fake(batch: int, k_plus_1: int, device: torch.device) -> ChainOutputs:
    """Fake SampleResult: tokens [B, K+1] int32, num_accepted [B] int32, fallback/valid [B] bool."""
    return (
        torch.empty((batch, k_plus_1), dtype=torch.int32, device=device),
        torch.empty((batch,), dtype=torch.int32, device=device),
        torch.empty((batch,), dtype=torch.bool, device=device),
        torch.empty((batch,), dtype=torch.bool, device=device),
    )


def _keep_opaque(mode, op, types, args, kwargs):
    """FunctionalTensorMode rule: dispatch the op as a whole (no tracing into the launcher)."""
    return mode.__torch_dispatch__(op, types, args, kwargs)


def _finish(op, fake):
    """Register the metadata-only fake and, unless decomposing, the opaque functionalization rule."""
    op.register_fake(fake)
    if not DECOMPOSE_UNDER_COMPILE:
        op.register_torch_dispatch(FunctionalTensorMode, _keep_opaque)
    return op


# ------------------------------------------------------------------------------------------------
# chain_rejection_sample
# ------------------------------------------------------------------------------------------------


@triton_op(f"{NAMESPACE}::chain_rejection_sample", mutates_args=())
def chain_rejection_sample(
    target_probs: Tensor,
    draft_token_ids: Tensor,
    draft_probs: Tensor | None = None,
    num_draft_tokens: Tensor | None = None,
    uniforms: Tensor | None = None,
    seeds: Tensor | None = None,
    offsets: Tensor | None = None,
) -> ChainOutputs:
    """`specsample.chain_rejection_sample` as an op (no `generator`, no `validate`)."""
    res = _chain.chain_rejection_sample(
        target_probs, draft_token_ids, draft_probs, num_draft_tokens=num_draft_tokens,
        uniforms=uniforms, seeds=seeds, offsets=offsets,
    )  # fmt: skip
    return tuple(res)


def _chain_fake(target_probs, draft_token_ids, draft_probs=None, num_draft_tokens=None, uniforms=None,
                seeds=None, offsets=None):  # fmt: skip
    batch, k_plus_1, _ = target_probs.shape
    return _result_fake(batch, k_plus_1, target_probs.device)


_finish(chain_rejection_sample, _chain_fake)


# ------------------------------------------------------------------------------------------------
# rejection_sample_logits
# ------------------------------------------------------------------------------------------------


@triton_op(f"{NAMESPACE}::rejection_sample_logits", mutates_args=())
def rejection_sample_logits(
    target_logits: Tensor,
    draft_token_ids: Tensor,
    draft_logits: Tensor | None = None,
    temperature: Tensor | None = None,
    seeds: Tensor | None = None,
    offsets: Tensor | None = None,
    num_draft_tokens: Tensor | None = None,
) -> ChainOutputs:
    """`specsample.rejection_sample_logits` as an op."""
    res = _logits.rejection_sample_logits(
        target_logits, draft_token_ids, draft_logits, temperature=temperature, seeds=seeds,
        offsets=offsets, num_draft_tokens=num_draft_tokens,
    )  # fmt: skip
    return tuple(res)


def _logits_fake(target_logits, draft_token_ids, draft_logits=None, temperature=None, seeds=None,
                 offsets=None, num_draft_tokens=None):  # fmt: skip
    batch, k_plus_1, _ = target_logits.shape
    return _result_fake(batch, k_plus_1, target_logits.device)


_finish(rejection_sample_logits, _logits_fake)


# ------------------------------------------------------------------------------------------------
# fast_sample
# ------------------------------------------------------------------------------------------------


@triton_op(f"{NAMESPACE}::fast_sample", mutates_args=())
def fast_sample(
    probs: Tensor,
    num_samples: int = 1,
    seeds: Tensor | None = None,
    offsets: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """`specsample.fast_sample` as an op (no `generator`)."""
    sample_p, sample_index = _gumbel.fast_sample(probs, num_samples, seeds=seeds, offsets=offsets)
    return sample_p, sample_index


def _fast_sample_fake(probs, num_samples=1, seeds=None, offsets=None):
    batch = probs.shape[0]
    return (
        torch.empty((batch, num_samples), dtype=probs.dtype, device=probs.device),
        torch.empty((batch, num_samples), dtype=torch.int64, device=probs.device),
    )


_finish(fast_sample, _fast_sample_fake)


# ------------------------------------------------------------------------------------------------
# sample_from_logits, renorm_draft_probs (registered when kernels/gumbel.py provides them)
# ------------------------------------------------------------------------------------------------

REGISTERED = ["chain_rejection_sample", "rejection_sample_logits", "fast_sample"]

if hasattr(_gumbel, "sample_from_logits"):

    @triton_op(f"{NAMESPACE}::sample_from_logits", mutates_args=("probs_out",))
    def sample_from_logits(
        logits: Tensor,
        temperature: Tensor,
        seeds: Tensor,
        offsets: Tensor,
        probs_out: Tensor | None,
    ) -> Tensor:
        """`specsample.sample_from_logits` as an op; writes `probs_out` in place when given (pass None
        explicitly otherwise). `probs_out` has no default on purpose: torch <= 2.12 raises IndexError
        when a mutated optional argument is omitted and falls back to its default (pytorch #180618,
        fixed by #180621); seen on the H200 with torch 2.11."""
        return _gumbel.sample_from_logits(
            logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out
        )

    def _sample_from_logits_fake(logits, temperature, seeds, offsets, probs_out):
        return torch.empty((logits.shape[0],), dtype=torch.int64, device=logits.device)

    _finish(sample_from_logits, _sample_from_logits_fake)
    REGISTERED.append("sample_from_logits")

if hasattr(_gumbel, "renorm_draft_probs"):

    @triton_op(f"{NAMESPACE}::renorm_draft_probs", mutates_args=())
    def renorm_draft_probs(draft_logits: Tensor, temperature: Tensor) -> Tensor:
        """`specsample.renorm_draft_probs` as an op: softmax(logits / T), T = 0 -> one-hot."""
        return _gumbel.renorm_draft_probs(draft_logits, temperature)

    def _renorm_fake(draft_logits, temperature):
        return torch.empty(draft_logits.shape, dtype=torch.float32, device=draft_logits.device)

    _finish(renorm_draft_probs, _renorm_fake)
    REGISTERED.append("renorm_draft_probs")
