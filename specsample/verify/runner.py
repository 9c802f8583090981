"""The certification runner: sampler x case x law -> CertRecord, within a budget.

`certify_sampler_family(family, sampler, budget)` runs every law of a family ("chain", "gumbel",
"logits") on every case of the budget; `verify(...)` picks the samplers an invocation asks for
(adapters, an external target, our kernels) and runs them all. Nothing is retried; seeds are a
pure function of (case, law, salt), salt = 0 except in calibration runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specsample.verify import certify as C
from specsample.verify import edges as E
from specsample.verify import gumbel_family as G
from specsample.verify import logits_family as L
from specsample.verify.budgets import Budget, for_sampler
from specsample.verify.cases import chain_cases
from specsample.verify.protocol import (
    SamplerUnavailable,
    chain_sampler_for,
    external_chain_sampler,
    external_gumbel_sampler,
    load_target,
    reference_grouped_gumbel_sampler,
    reference_gumbel_sampler,
    specsample_gumbel_sampler,
    target_family,
)

CHAIN_CASE_LAWS = {
    "grid": C.certify_grid,
    "coupling": C.certify_coupling,
    "coupling_seeded": C.certify_coupling_seeded,
    "joint": C.certify_joint,
}
CHAIN_GLOBAL = {
    "edge": E.certify_edges,
    "determinism": E.certify_determinism,
    "batch_invariance": E.certify_batch_invariance,
    "cuda_graph": E.certify_cuda_graph,
}
ALL_LAWS = (
    "grid",
    "coupling",
    "coupling_seeded",
    "conditional",
    "accepted_length",
    "joint",
    "edge",
    "determinism",
    "batch_invariance",
    "cuda_graph",
    "gof",
    "plackett_luce",
    "zero_mass",
    "greedy",
)


def _selected(only, *parts) -> bool:
    if not only:
        return True
    key = "/".join(str(p) for p in parts)
    return any(tok in key for tok in only)


def _tick(progress, rec):
    if progress is not None:
        progress(rec)


def certify_chain(sampler, budget: Budget, *, only=None, case_filter=None, salt=0, progress=None, laws=None):
    """The case-independent laws (edge, determinism, batch invariance, CUDA graph), then every chain
    law on every case of the budget."""
    recs = []
    for law, fn in CHAIN_GLOBAL.items():
        if (laws is not None and law not in laws) or not _selected(only, sampler.name, law):
            continue
        rec = C.timed(C.case_free(fn), sampler, _Global(law), budget, salt=salt)
        rec.law = law
        recs.append(rec)
        _tick(progress, rec)
    for case in chain_cases(budget.name):
        if case_filter is not None and not case_filter(case):
            continue
        fixed_run = None
        for law in ("grid", "coupling", "coupling_seeded", "conditional", "accepted_length", "joint"):
            if (laws is not None and law not in laws) or not _selected(only, sampler.name, case.name, law):
                continue
            if law in ("conditional", "accepted_length"):
                t0 = time.perf_counter()
                try:
                    if fixed_run is None:
                        fixed_run = C.run_fixed_drafts(sampler, case, budget, salt)
                    fn = C.certify_conditional if law == "conditional" else C.certify_accepted_length
                    rec = fn(sampler, case, budget, salt, run=fixed_run)
                except Exception as exc:  # noqa: BLE001 - a crash is a finding
                    rec = C.CertRecord(
                        sampler.name, case.name, law, "error", f"raised {type(exc).__name__}: {exc}"
                    )
                rec.seconds = time.perf_counter() - t0
            else:
                rec = C.timed(CHAIN_CASE_LAWS[law], sampler, case, budget, salt=salt)
                rec.law = law
            recs.append(rec)
            _tick(progress, rec)
    return recs


@dataclass
class _Global:
    name: str


GUMBEL_GLOBAL = {  # case-independent (inputs of their own): run once per sampler
    "zero_mass": G.certify_gumbel_zero_mass,
    "determinism": G.certify_gumbel_determinism,
    "batch_invariance": G.certify_gumbel_batch_invariance,
}
GUMBEL_GLOBAL_CASE = {
    "zero_mass": "tile-boundaries",
    "determinism": "gumbel-seeded-batch",
    "batch_invariance": "gumbel-seeded-batch",
}


def certify_gumbel(sampler, budget: Budget, *, only=None, case_filter=None, salt=0, progress=None, laws=None):
    recs = []
    fns = {
        "coupling_seeded": G.certify_gumbel_coupling,
        "gof": G.certify_gumbel_gof,
        "plackett_luce": G.certify_plackett_luce,
    }
    for name, p in G.gumbel_cases(budget.name):
        for law, fn in fns.items():
            if (laws is not None and law not in laws) or not _selected(only, sampler.name, name, law):
                continue
            t0 = time.perf_counter()
            try:
                rec = fn(sampler, name, p, budget, salt)
            except Exception as exc:  # noqa: BLE001
                rec = C.CertRecord(sampler.name, name, law, "error", f"raised {type(exc).__name__}: {exc}")
            rec.seconds = time.perf_counter() - t0
            recs.append(rec)
            _tick(progress, rec)
    for law, fn in GUMBEL_GLOBAL.items():
        if (laws is None or law in laws) and _selected(only, sampler.name, GUMBEL_GLOBAL_CASE[law], law):
            rec = C.timed(C.case_free(fn), sampler, _Global(GUMBEL_GLOBAL_CASE[law]), budget, salt=salt)
            rec.law = law
            recs.append(rec)
            _tick(progress, rec)
    return recs


def certify_sampler_family(
    family, sampler, budget, *, only=None, case_filter=None, salt=0, progress=None, laws=None
):
    _check_laws(laws)
    budget = for_sampler(budget, sampler)
    if family == "chain":
        return certify_chain(
            sampler, budget, only=only, case_filter=case_filter, salt=salt, progress=progress, laws=laws
        )
    if family == "gumbel":
        return certify_gumbel(
            sampler, budget, only=only, case_filter=case_filter, salt=salt, progress=progress, laws=laws
        )
    if family == "logits":
        return L.certify_logits(sampler, budget, salt=salt, only=only, laws=laws, progress=progress)
    raise ValueError(f"family: expected chain, gumbel or logits, got {family!r}")


def _check_laws(laws) -> None:
    """A ValueError naming any of `laws` (exact law names, or None for all) that is not in ALL_LAWS."""
    unknown = sorted(set(laws or ()) - set(ALL_LAWS))
    if unknown:
        raise ValueError(f"laws: unknown {', '.join(unknown)}; expected some of {', '.join(ALL_LAWS)}")


@dataclass
class VerifyRun:
    """Everything one `specsample verify` invocation produced."""

    budget: str
    device: str
    records: list = field(default_factory=list)
    unavailable: list = field(default_factory=list)  # (sampler, reason)
    seconds: float = 0.0
    stopped: str = ""  # why the run ended before every certificate ran ("" when complete)

    @property
    def failed(self) -> list:
        return [r for r in self.records if not r.passed]


def external_sampler(fn, name: str, family: str, device: str = "auto", inputs=None):
    """A bare function with the signature of `family` ("chain", "gumbel", "logits") behind the
    protocol: what `--target` and the pytest plugin certify."""
    build = {
        "chain": external_chain_sampler,
        "gumbel": external_gumbel_sampler,
        "logits": L.external_logits_sampler,
    }[target_family(fn, family)]
    return build(fn, name, device, inputs)


def plan_samplers(adapters, target: str | None, device: str, family: str | None = None):
    """[(family, sampler)] and [(name, reason)] for what cannot be loaded.

    With no adapter and no target: the float64 references (chain, gumbel, logits) and our kernels.
    A target's family is `family`, else its function's `specsample_family`, else chain. Without a
    target, `family` keeps only the adapters' samplers of that family (a ValueError if none has one)."""
    plan, missing = [], []
    if target:
        fn = load_target(target)
        fam = target_family(fn, family)
        plan.append((fam, external_sampler(fn, target, fam, device)))
        return plan, missing

    def wanted(fam: str) -> bool:
        return family is None or fam == family

    for adapter in adapters:
        if wanted("chain"):
            try:
                plan.append(("chain", chain_sampler_for(adapter, device)))
            except SamplerUnavailable as exc:
                missing.append((adapter, str(exc)))
        if adapter == "reference":
            for fam, sampler in (
                ("gumbel", reference_gumbel_sampler),
                ("gumbel", reference_grouped_gumbel_sampler),
                ("logits", lambda: L.mutable_logits_sampler(name="reference")),
            ):
                if wanted(fam):
                    plan.append((fam, sampler()))
        if adapter == "specsample":
            for fam, build in (
                ("gumbel", specsample_gumbel_sampler),
                ("logits", L.specsample_logits_sampler),
            ):
                if not wanted(fam):
                    continue
                try:
                    plan.append((fam, build(device)))
                except SamplerUnavailable as exc:
                    missing.append((f"specsample {fam}", str(exc)))
    if family is not None and not plan and not missing:
        names = ", ".join(adapters)
        raise ValueError(f"--family {family}: no {family} sampler among the adapters {names}")
    return plan, missing


def verify(
    budget: Budget,
    *,
    adapters=("reference", "specsample"),
    target=None,
    family=None,
    device="auto",
    only=None,
    salt=0,
    progress: Callable | None = None,
    max_seconds: float | None = None,
    laws=None,
) -> VerifyRun:
    """Every certificate of every planned sampler. With `max_seconds`, no certificate starts once that
    much time has passed: the run keeps what finished and says so in `stopped` (the CLI then exits
    3, not 0: an incomplete run certifies nothing about the certificates it skipped). `laws`: exact law
    names (ALL_LAWS) to run, where `only` matches substrings of sampler/case/law."""
    _check_laws(laws)
    t0 = time.perf_counter()
    plan, missing = plan_samplers(adapters, target, device, family)
    run = VerifyRun(budget.name, device, unavailable=missing)

    def tick(rec):
        run.records.append(rec)
        _tick(progress, rec)
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            raise _Deadline

    try:
        for family, sampler in plan:
            certify_sampler_family(family, sampler, budget, only=only, salt=salt, progress=tick, laws=laws)
    except _Deadline:
        run.stopped = (
            f"stopped after {time.perf_counter() - t0:.0f} s (--max-seconds {max_seconds:g}): "
            f"{len(run.records)} of the selected certificates ran, the rest were not run"
        )
    run.seconds = time.perf_counter() - t0
    return run


class _Deadline(Exception):
    """Raised between two certificates once verify's max_seconds has passed."""
