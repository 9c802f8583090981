"""pytest plugin (entry point `specsample`): run specsample's certification from any test suite.

Options:
    --specsample-budget {ci,standard,full}   budget of the certificates (default: ci)

Fixtures:
    specsample_budget   the selected `Budget`
    specsample_certify  certify(fn_or_sampler, family=None, laws=None, only=None, inputs=None,
                        device="cpu") -> Certification. family: "chain", "gumbel" or "logits"
                        (default: the function's `specsample_family`, else chain);
                        `.assert_passed()` raises AssertionError listing every failed
                        certificate (law, case, statement)

An engine's test suite certifies its own sampler with our signature in three lines::

    def test_my_sampler_is_lossless(specsample_certify):
        specsample_certify(my_engine.chain_sample, laws=["edge", "coupling", "joint"]).assert_passed()

Imports are lazy: loading the plugin costs nothing until a fixture is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("specsample")
    group.addoption(
        "--specsample-budget",
        action="store",
        default="ci",
        choices=("ci", "standard", "full"),
        help="budget of specsample certificates (default: ci)",
    )


@dataclass
class Certification:
    """The records of one certification and a one-line verdict."""

    records: list = field(default_factory=list)

    @property
    def failed(self) -> list:
        return [r for r in self.records if not r.passed]

    @property
    def failed_laws(self) -> list:
        return sorted({r.law for r in self.failed})

    def assert_passed(self) -> Certification:
        if not self.records:
            raise AssertionError("specsample certification ran no certificate (check laws/only)")
        if self.failed:
            lines = [
                f"{len(self.failed)} of {len(self.records)} specsample certificates failed "
                f"(laws: {', '.join(self.failed_laws)}):"
            ]
            lines += [f"  {r.case} / {r.law}: {r.statement} {r.detail}"[:400] for r in self.failed[:12]]
            raise AssertionError("\n".join(lines))
        return self


def certify(
    fn_or_sampler,
    *,
    family: str | None = None,
    budget="ci",
    laws=None,
    only=None,
    inputs=None,
    device: str = "cpu",
    name: str | None = None,
    salt: int = 0,
) -> Certification:
    """Certify a sampler at `budget`: a protocol object, or a bare function with the signature of
    `family` ("chain", "gumbel" or "logits"; default: the function's `specsample_family` attribute,
    else chain). A bare Gumbel or logits function is coupled with our Philox stream only where its
    `specsample_noise` attribute declares it; otherwise its draws are certified by the laws alone."""
    from specsample.verify import runner
    from specsample.verify.budgets import Budget, get_budget
    from specsample.verify.logits_family import LogitsSampler
    from specsample.verify.protocol import GumbelSampler, target_family

    b = budget if isinstance(budget, Budget) else get_budget(budget)
    sampler = fn_or_sampler
    if hasattr(sampler, "fn"):  # a protocol object: its class says its family
        kinds = ((GumbelSampler, "gumbel"), (LogitsSampler, "logits"))
        family = family or next((f for cls, f in kinds if isinstance(sampler, cls)), "chain")
    else:
        family = target_family(fn_or_sampler, family)
        label = name or getattr(fn_or_sampler, "__qualname__", "sampler")
        sampler = runner.external_sampler(fn_or_sampler, label, family, device, inputs)
    recs = runner.certify_sampler_family(family, sampler, b, only=only, laws=laws, salt=salt)
    return Certification(recs)


@pytest.fixture(scope="session")
def specsample_budget(request):
    from specsample.verify.budgets import get_budget

    return get_budget(request.config.getoption("--specsample-budget"))


@pytest.fixture
def specsample_certify(specsample_budget):
    def run(fn_or_sampler, **kw):
        kw.setdefault("budget", specsample_budget)
        return certify(fn_or_sampler, **kw)

    return run
