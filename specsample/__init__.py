"""specsample: Triton kernels for the sampling step of speculative decoding, each certified by
statistics against a float64 numpy reference.

Public API (DESIGN.md §2)::

    chain_rejection_sample(target_probs, draft_token_ids, draft_probs=None, *, ...)
    rejection_sample_logits(target_logits, draft_token_ids, draft_logits=None, *, ...)
    fast_sample(probs, num_samples=1, *, generator=None, seeds=None, offsets=None)
    sample_from_logits(logits, temperature, *, seeds, offsets, probs_out=None)
    renorm_draft_probs(draft_logits, temperature)

The kernels import torch and triton lazily, so `specsample.reference` and `specsample.stats`
(numpy/scipy only) stay importable without them.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "SampleResult": "specsample.kernels.result",
    "chain_rejection_sample": "specsample.kernels.chain",
    "rejection_sample_logits": "specsample.kernels.logits",
    "fast_sample": "specsample.kernels.gumbel",
    "sample_from_logits": "specsample.kernels.gumbel",
    "renorm_draft_probs": "specsample.kernels.gumbel",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'specsample' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
