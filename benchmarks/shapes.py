"""Which shapes are benchmarked: engine shapes (B in 1..256, K in 1..8, V in the four vocabularies of
today's models, fp32 and bf16), in three selections.

- target: the shapes the kernel issues set targets on (benchmarks/targets.py), each also in bf16,
  plus a few untargeted shapes (sample_from_logits, one-hot chain).
  The pytest-benchmark suites time these by default (about 3 minutes on an H200).
- run: target + a sweep of B x V at K = 4 in fp32 for chain, fast_sample and logits, which the
  floor-fraction plot draws (`run_h200.py` default, under about 4 minutes).
- full: B in {1, 4, 16, 64, 128, 256} x K in {1, 4, 8} x every V x fp32/bf16 for every kernel
  (SPECSAMPLE_BENCH_FULL=1 or --full; roughly 20 minutes).
Order matters: `run_h200.py` measures in this order and stops at its time budget, so targets come first.
"""

from __future__ import annotations

import os

from benchmarks.floors import KERNELS, KERNELS_WITH_K, Case
from benchmarks.targets import TARGETS

FULL_ENV = "SPECSAMPLE_BENCH_FULL"
VOCABS = (32000, 128256, 151936, 262144)
DTYPES = ("float32", "bfloat16")
SWEEP_B = (1, 16, 64, 256)
SWEEP_KERNELS = ("chain", "fast_sample", "logits")
FULL_B = (1, 4, 16, 64, 128, 256)
FULL_K = (1, 4, 8)
# Shapes without a target that the suite still times: the logits-side Gumbel draw and the one-hot chain.
UNTARGETED = (
    Case("sample_from_logits", 1, 0, 151936, "float32"),
    Case("sample_from_logits", 64, 0, 151936, "float32"),
    Case("sample_from_logits", 64, 0, 151936, "bfloat16"),
    Case("sample_from_logits", 256, 0, 128256, "float32"),
    Case("chain_onehot", 16, 4, 128256, "float32"),
    Case("chain_onehot", 64, 4, 151936, "float32"),
)


def full_requested() -> bool:
    return os.environ.get(FULL_ENV, "").strip() not in ("", "0")


def _dedup(cases) -> list[Case]:
    seen, out = set(), []
    for c in cases:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def target_cases() -> list[Case]:
    """Every target shape in fp32 and in bf16 (to record how bf16 changes it), then UNTARGETED."""
    cases = []
    for t in TARGETS:
        for dtype in DTYPES:
            cases.append(Case(t.case.kernel, t.case.B, t.case.K, t.case.V, dtype))
    return _dedup([*cases, *UNTARGETED])


def sweep_cases() -> list[Case]:
    """B x V at K = 4 (K = 0 for fast_sample), fp32, for the plot."""
    cases = []
    for kernel in SWEEP_KERNELS:
        k = 4 if kernel in KERNELS_WITH_K else 0
        for V in VOCABS:
            for B in SWEEP_B:
                cases.append(Case(kernel, B, k, V, "float32"))
    return cases


def full_cases() -> list[Case]:
    cases = []
    for kernel in KERNELS:
        ks = FULL_K if kernel in KERNELS_WITH_K else (0,)
        for dtype in DTYPES:
            for V in VOCABS:
                for K in ks:
                    for B in FULL_B:
                        cases.append(Case(kernel, B, K, V, dtype))
    return cases


def selected_cases(
    selection: str, *, full: bool = False, kernels: tuple[str, ...] | None = None
) -> list[Case]:
    """Cases of `selection` ("target" or "run"), or of every selection when `full`, optionally only
    for `kernels`; duplicates removed, order kept."""
    if selection not in ("target", "run"):
        raise ValueError(f"selection must be 'target' or 'run', got {selection!r}")
    if kernels is not None and set(kernels) - set(KERNELS):
        raise ValueError(f"unknown kernels {sorted(set(kernels) - set(KERNELS))}; known: {KERNELS}")
    cases = target_cases()
    if selection == "run" or full:
        cases += sweep_cases()
    if full:
        cases += full_cases()
    return [c for c in _dedup(cases) if kernels is None or c.kernel in kernels]
