"""Float64 numpy references of every specsample kernel and the exact output laws they follow.

Numpy only (no torch, no triton). Each reference takes exactly the kernel's inputs plus the
kernel's random numbers (uniforms or exponential noise) and returns the kernel's outputs.

    chain    chain_rejection_reference, chain_seeded_uniforms, clean_mass
    laws     exact laws: chain_conditional_law, chain_marginal_law, accepted_length_law,
             position_token_law, emission laws (residual / fallback / bonus), plackett_luce_law
    toy_lm   toy target/draft language models, the speculative loop and its sequence laws
    philox   the numpy Philox4x32-10 twin of the in-kernel generator
"""

from specsample.reference.chain import (
    ChainReferenceResult,
    chain_rejection_reference,
    chain_seeded_uniforms,
    clean_mass,
)
from specsample.reference.laws import (
    ChainLaw,
    EmissionLaw,
    acceptance_prob,
    accepted_length_law,
    bonus_emission_law,
    chain_conditional_law,
    chain_marginal_law,
    emission_law,
    normalize,
    plackett_luce_law,
    position_token_law,
    rejection_emission_law,
)
from specsample.reference.toy_lm import (
    DRAFT_MODES,
    ToyLanguageModel,
    random_toy_lm,
    sequence_index,
    speculative_generate,
    speculative_sequence_law,
    target_sequence_law,
)

__all__ = [
    "DRAFT_MODES",
    "ChainLaw",
    "ChainReferenceResult",
    "EmissionLaw",
    "ToyLanguageModel",
    "acceptance_prob",
    "accepted_length_law",
    "bonus_emission_law",
    "chain_conditional_law",
    "chain_marginal_law",
    "chain_rejection_reference",
    "chain_seeded_uniforms",
    "clean_mass",
    "emission_law",
    "normalize",
    "plackett_luce_law",
    "position_token_law",
    "random_toy_lm",
    "rejection_emission_law",
    "sequence_index",
    "speculative_generate",
    "speculative_sequence_law",
    "target_sequence_law",
]
