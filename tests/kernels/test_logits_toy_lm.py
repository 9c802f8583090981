"""End-to-end losslessness: speculative rounds driven by `rejection_sample_logits` over a toy
target/draft language model generate sequences whose law is the target model's, exactly.

Each round `speculative_generate` hands the sampler the target rows p [N, K+1, V] (and the draft
rows q for classic drafts); the adapter passes logits T * log(p) (and T * log(q)) at temperature T,
so softmax(logits / T) = p up to float32 rounding (relative 1e-7), with log 0 = -inf for the
tables' zero-probability tokens. Per-round seeds are fresh draws from the test's seeded stream.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.reference.toy_lm import (
    random_toy_lm,
    sequence_index,
    speculative_generate,
    target_sequence_law,
)
from specsample.stats import assert_gof, chi2_min_samples, current_test_seed
from tests.kernels.test_logits_cases import sample_logits

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

V, ORDER, K, LENGTH = 3, 1, 2, 4  # 81 sequence cells
EPS = 0.05
N = int(1.1 * chi2_min_samples(V**LENGTH, EPS, 1e-7, 1e-6))


def logits_sampler(temperature: float, seeds: np.random.Generator):
    """A `speculative_generate` sampler running the logits kernel on T * log(p) at temperature T."""

    def sample(p, x, q, *, uniforms):
        n = p.shape[0]
        with np.errstate(divide="ignore"):
            lg = torch.tensor(temperature * np.log(p), dtype=torch.float32)
            dl = None if q is None else torch.tensor(temperature * np.log(q), dtype=torch.float32)
        return sample_logits(
            lg, torch.tensor(x, dtype=torch.int64), dl,
            temperature=torch.full((n,), temperature),
            seeds=torch.tensor(seeds.integers(0, 2**63 - 1, n, dtype=np.int64)),
            offsets=torch.tensor(seeds.integers(0, 2**62, n, dtype=np.int64)),
        )  # fmt: skip

    return sample


@pytest.mark.parametrize("mode,temperature", [("classic", 0.7), ("one_hot_sampled", 1.3)], ids=str)
def test_speculative_rounds_are_lossless(mode, temperature):
    """V = 3, order-1 Markov target and draft (Dirichlet rows, 20% zero entries), K = 2 drafts per
    round, sequences of L = 4 tokens: the 81 sequence counts pass `assert_gof` against
    target_sequence_law at alpha = 1e-6 with power 1 - 1e-6 against TV >= 0.05,
    n = 1.1 * chi2_min_samples(81, 0.05, 1e-7, 1e-6) sequences; zero-mass sequences never occur."""
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    target = random_toy_lm(V, ORDER, rng, zero_prob=0.2)
    draft = random_toy_lm(V, ORDER, rng, zero_prob=0.2)
    sampler = logits_sampler(temperature, np.random.default_rng(rng.integers(2**63)))
    sequences = speculative_generate(target, draft, [0], LENGTH, K, sampler, rng, N, mode=mode)
    counts = np.bincount(sequence_index(sequences, V), minlength=V**LENGTH)
    law = target_sequence_law(target, [0], LENGTH).ravel()
    assert_gof(
        counts, law, eps=EPS, alpha=1e-6, beta=1e-6, seed=seed, label=f"toy LM via logits kernel, {mode}"
    )
