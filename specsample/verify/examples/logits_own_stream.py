"""External `rejection_sample_logits`-signature samplers on a random stream of their own, for
`specsample verify --target ... --family logits`: one correct, one with SGLang's greedy bug.

    specsample verify --target specsample.verify.examples.logits_own_stream:rejection_sample_logits_own_stream

Both run specsample's float64 reference on re-keyed seeds (seed XOR a constant): the same sampler on
a different stream, as an engine's own RNG would be. They declare no `specsample_noise`, so the
verifier does not couple their draws with its reference and certifies them by their laws (greedy,
conditional). The planted bug:
- `rejection_sample_logits_greedy_at_t1`: temperature-0 (greedy) rows are sampled at T = 1
  (SGLang #37134).
The verifier must pass the first and fail the second. Do not use them for anything else.
"""

from __future__ import annotations

import numpy as np

from specsample.reference.logits import rejection_sample_logits_reference

_REKEY = np.int64(0x5DEECE66D)


def rejection_sample_logits_own_stream(
    target_logits, draft_token_ids, draft_logits=None, *, temperature, seeds, offsets, num_draft_tokens=None
):
    """Correct: the reference's sampler, drawn from re-keyed seeds."""
    return rejection_sample_logits_reference(
        target_logits,
        draft_token_ids,
        draft_logits,
        temperature=temperature,
        seeds=np.asarray(seeds, np.int64) ^ _REKEY,
        offsets=offsets,
        num_draft_tokens=num_draft_tokens,
    )


def rejection_sample_logits_greedy_at_t1(
    target_logits, draft_token_ids, draft_logits=None, *, temperature, seeds, offsets, num_draft_tokens=None
):
    """Bug: rows with temperature 0 are sampled at temperature 1."""
    t = np.asarray(temperature, np.float64)
    return rejection_sample_logits_own_stream(
        target_logits,
        draft_token_ids,
        draft_logits,
        temperature=np.where(t == 0, 1.0, t),
        seeds=seeds,
        offsets=offsets,
        num_draft_tokens=num_draft_tokens,
    )


for _fn in (rejection_sample_logits_own_stream, rejection_sample_logits_greedy_at_t1):
    _fn.specsample_family = "logits"
    _fn.specsample_inputs = "numpy"
