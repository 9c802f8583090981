"""Who gets timed: our kernels, the plain-PyTorch baselines and the engines' kernels when importable.

A provider turns (case, inputs) into a zero-argument call. `unavailable(case)` says why it cannot run
(a kernel not importable yet, an engine not installed, a dtype it does not take), so a run records a
skip with that reason instead of failing.

SPECSAMPLE_BENCH_SLOWED=<kernels> (comma-separated kernel names, or "all") makes our provider call
its launcher twice per call for those kernels, keeping the provider name "specsample": a deliberately
slowed kernel that the regression gate (benchmarks/compare.py) must catch. Records say slowed=True.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from benchmarks import baselines_external, baselines_torch
from benchmarks.floors import KERNELS, Case
from benchmarks.records import OURS

Call = Callable[[], object]
SLOWED_ENV = "SPECSAMPLE_BENCH_SLOWED"


@dataclass(frozen=True)
class Provider:
    name: str
    kernels: tuple[str, ...]
    build: Callable[[Case, dict], Call]
    unavailable: Callable[[Case], str | None]


def slowed_kernels() -> frozenset[str]:
    """Kernels whose "specsample" provider runs twice per call (SPECSAMPLE_BENCH_SLOWED)."""
    raw = os.environ.get(SLOWED_ENV, "").strip()
    if not raw:
        return frozenset()
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(KERNELS)
    unknown = names - set(KERNELS)
    if unknown:
        raise ValueError(f"{SLOWED_ENV} names unknown kernels {sorted(unknown)}; expected 'all' or {KERNELS}")
    return frozenset(names)


# ours: public function per kernel (DESIGN.md §2), imported lazily through the package.
_OURS_FUNCTION = {
    "chain": "chain_rejection_sample",
    "chain_onehot": "chain_rejection_sample",
    "fast_sample": "fast_sample",
    "sample_from_logits": "sample_from_logits",
    "logits": "rejection_sample_logits",
    "logits_onehot": "rejection_sample_logits",
}


def _ours_function(kernel: str):
    import specsample

    return getattr(specsample, _OURS_FUNCTION[kernel])


def _ours_unavailable(case: Case) -> str | None:
    try:
        _ours_function(case.kernel)
    except (ImportError, AttributeError) as exc:
        return f"specsample.{_OURS_FUNCTION[case.kernel]} not importable: {type(exc).__name__}: {exc}"
    return None


def _ours_once(case: Case, x: dict) -> Call:
    fn = _ours_function(case.kernel)
    k = case.kernel
    if k in ("chain", "chain_onehot"):
        return lambda: fn(
            x["target_probs"], x["draft_token_ids"], x.get("draft_probs"), uniforms=x["uniforms"]
        )
    if k == "fast_sample":
        return lambda: fn(x["probs"], 1, seeds=x["seeds"], offsets=x["offsets"])
    if k == "sample_from_logits":
        return lambda: fn(x["logits"], x["temperature"], seeds=x["seeds"], offsets=x["offsets"])
    return lambda: fn(
        x["target_logits"],
        x["draft_token_ids"],
        x.get("draft_logits"),
        temperature=x["temperature"],
        seeds=x["seeds"],
        offsets=x["offsets"],
    )


def _ours_build(case: Case, x: dict) -> Call:
    once = _ours_once(case, x)
    if case.kernel not in slowed_kernels():
        return once

    def twice():
        once()
        return once()

    return twice


def _torch_build(case: Case, x: dict) -> Call:
    k = case.kernel
    if k in ("chain", "chain_onehot"):
        return lambda: baselines_torch.chain_rejection_torch(
            x["target_probs"], x["draft_token_ids"], x.get("draft_probs"), x["uniforms"]
        )
    if k == "sample_from_logits":
        return lambda: baselines_torch.sample_from_logits_torch(x["logits"], x["temperature"])
    if k in ("logits", "logits_onehot"):
        return lambda: baselines_torch.rejection_sample_logits_torch(
            x["target_logits"], x["draft_token_ids"], x.get("draft_logits"), x["temperature"]
        )
    raise ValueError(f"provider 'torch' has no {k} implementation")


def _always(case: Case) -> str | None:
    return None


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider(OURS, KERNELS, _ours_build, _ours_unavailable),
        Provider(
            "torch",
            ("chain", "chain_onehot", "sample_from_logits", "logits", "logits_onehot"),
            _torch_build,
            _always,
        ),
        Provider(
            "torch_multinomial",
            ("fast_sample",),
            lambda case, x: lambda: baselines_torch.fast_sample_multinomial(x["probs"]),
            _always,
        ),
        Provider(
            "torch_gumbel",
            ("fast_sample",),
            lambda case, x: lambda: baselines_torch.fast_sample_gumbel(x["probs"]),
            _always,
        ),
        *(Provider(*entry) for entry in baselines_external.ENGINE_PROVIDERS),
    )
}


def providers_for(kernel: str, names: tuple[str, ...] | None = None) -> list[Provider]:
    """Providers that implement `kernel`, in registry order, optionally restricted to `names`."""
    if names is not None:
        unknown = set(names) - set(PROVIDERS)
        if unknown:
            raise ValueError(f"unknown providers {sorted(unknown)}; known: {sorted(PROVIDERS)}")
    return [p for p in PROVIDERS.values() if kernel in p.kernels and (names is None or p.name in names)]
