"""Float64 numpy references of every specsample kernel and the exact output laws they follow.

Numpy only (no torch, no triton). Each reference takes exactly the kernel's inputs plus the
kernel's random numbers (uniforms or exponential noise) and returns the kernel's outputs.
"""

from specsample.reference.chain import (
    ChainReferenceResult,
    chain_rejection_reference,
    chain_seeded_uniforms,
    clean_mass,
)

__all__ = [
    "ChainReferenceResult",
    "chain_rejection_reference",
    "chain_seeded_uniforms",
    "clean_mass",
]
