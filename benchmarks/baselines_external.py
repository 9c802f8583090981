"""The engines' own kernels as benchmark providers, timed only when their packages import.

Neither SGLang, vLLM nor FlashInfer is installed on the development machine or on the H200 box, so
these adapters have never run: each is written from the engine's documented signature
(../shared/research/*.md) and every failure is recorded as a skip with its reason, never a crash.

- flashinfer: `flashinfer.sampling.chain_speculative_sampling(draft_probs, draft_token_ids,
  target_probs)` for chain (classic only: it needs draft probabilities) and
  `flashinfer.sampling.sampling_from_probs(probs)` for fast_sample.
- sglang: `chain_speculative_sampling_triton(...)` (fp32, classic) with its slot layout built outside
  the timed call, and `fast_sample(probs, num_samples)` from `spec_utils`.
- vllm: its `rejection_sample` needs a SamplingMetadata that only its model runner builds; not wired,
  the skip reason says so.

Each entry of ENGINE_PROVIDERS is (name, kernels, build(case, inputs) -> call, unavailable(case)).
"""

from __future__ import annotations

import functools
import importlib

from benchmarks.floors import Case

SGLANG_CHAIN_MODULES = (
    "sglang.kernels.ops.speculative.reject_sampling",
    "sglang.srt.speculative.reject_sampling",
)
SGLANG_FAST_SAMPLE_MODULES = (
    "sglang.srt.speculative.spec_utils",
    "sglang.kernels.ops.speculative.spec_utils",
)


@functools.cache
def _find(modules: tuple[str, ...], attr: str):
    """(function, None) from the first module that imports and has `attr`, else (None, reason)."""
    reasons = []
    for name in modules:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # engines fail to import for many reasons; report which
            reasons.append(f"{name}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        if hasattr(module, attr):
            return getattr(module, attr), None
        reasons.append(f"{name} has no {attr}")
    return None, "not importable (" + "; ".join(reasons) + ")"


# --- FlashInfer -------------------------------------------------------------------------------


def _flashinfer_unavailable(case: Case) -> str | None:
    if case.kernel == "chain":
        return _find(("flashinfer.sampling",), "chain_speculative_sampling")[1]
    if case.kernel == "fast_sample":
        return _find(("flashinfer.sampling",), "sampling_from_probs")[1]
    return f"flashinfer has no {case.kernel} equivalent wired here"


def _flashinfer_build(case: Case, x: dict):
    if case.kernel == "chain":
        fn = _find(("flashinfer.sampling",), "chain_speculative_sampling")[0]
        ids = x["draft_token_ids"].int()
        return lambda: fn(x["draft_probs"], ids, x["target_probs"])
    fn = _find(("flashinfer.sampling",), "sampling_from_probs")[0]
    return lambda: fn(x["probs"])


# --- SGLang -----------------------------------------------------------------------------------


def _sglang_unavailable(case: Case) -> str | None:
    if case.kernel == "chain":
        reason = _find(SGLANG_CHAIN_MODULES, "chain_speculative_sampling_triton")[1]
        if reason is None and case.dtype != "float32":
            return "SGLang's Triton chain kernel takes fp32 probabilities only"
        return reason
    if case.kernel == "fast_sample":
        return _find(SGLANG_FAST_SAMPLE_MODULES, "fast_sample")[1]
    return f"sglang has no {case.kernel} equivalent wired here"


def _sglang_build(case: Case, x: dict):
    import torch

    if case.kernel == "fast_sample":
        fn = _find(SGLANG_FAST_SAMPLE_MODULES, "fast_sample")[0]
        return lambda: fn(x["probs"], 1)
    fn = _find(SGLANG_CHAIN_MODULES, "chain_speculative_sampling_triton")[0]
    B, K, dev = case.B, case.K, x["target_probs"].device
    S = K + 1  # slot 0 is the root (last committed token), slots 1..K the drafts
    candidates = torch.cat([torch.zeros(B, 1, dtype=torch.int64, device=dev), x["draft_token_ids"]], dim=1)
    retrive_index = torch.arange(B * S, dtype=torch.int64, device=dev).view(B, S)
    chain_next = torch.full((B, S), -1, dtype=torch.int64, device=dev)
    uniform_samples = x["uniforms"][:, :S].contiguous()
    uniform_final = x["uniforms"][:, K].contiguous()
    predicts = torch.zeros(B * S, dtype=torch.int32, device=dev)
    accept_index = torch.full((B, S), -1, dtype=torch.int32, device=dev)
    accept_token_num = torch.zeros(B, dtype=torch.int32, device=dev)
    return lambda: fn(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=accept_token_num,
        candidates=candidates,
        retrive_index=retrive_index,
        retrive_next_token=chain_next,
        retrive_next_sibling=chain_next,
        uniform_samples=uniform_samples,
        uniform_samples_for_final_sampling=uniform_final,
        target_probs=x["target_probs"],
        draft_probs=x["draft_probs"],
        threshold_single=1.0,
        threshold_acc=1.0,
        deterministic=True,
    )


# --- vLLM -------------------------------------------------------------------------------------


def _vllm_unavailable(case: Case) -> str | None:
    reason = _find(("vllm.v1.sample.rejection_sampler",), "rejection_sample")[1]
    if reason is not None:
        return reason
    return "vllm imports, but its rejection_sample needs a SamplingMetadata from its model runner: not wired"


def _vllm_build(case: Case, x: dict):
    raise NotImplementedError(_vllm_unavailable(case))


ENGINE_PROVIDERS = (
    ("sglang", ("chain", "fast_sample"), _sglang_build, _sglang_unavailable),
    ("vllm", ("chain", "chain_onehot", "logits", "logits_onehot"), _vllm_build, _vllm_unavailable),
    ("flashinfer", ("chain", "fast_sample"), _flashinfer_build, _flashinfer_unavailable),
)
