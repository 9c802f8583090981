"""Engine-signature adapters (import the submodule you need; nothing is imported eagerly).

- `specsample.compat.sglang`: `chain_speculative_sampling_triton(...)` and `fast_sample(probs, n)` with
  SGLang's signatures and in-place output layout (predicts / accept_index / accept_token_num through
  retrive_index).
- `specsample.compat.vllm`: `rejection_sample(...)` with vLLM's ragged layout (flattened drafts,
  cu_num_draft_tokens, optional draft_probs, bonus tokens, -1 placeholders, greedy rows).
- `specsample.compat.flashinfer`: `chain_speculative_sampling(draft_probs, draft_token_ids,
  target_probs, ...)` with FlashInfer's outputs and counters.

Each module also has `chain_sampler(engine_fn=None)`: the engine's own function (imported only when
called, so the engines need not be installed) behind specsample's chain-sampler protocol, which is
how `specsample.verify` certifies the engines' samplers. Tokens given the same uniforms are exactly
those of `specsample.chain_rejection_sample`; docs/engines.md has the few lines to change in each
engine.
"""
