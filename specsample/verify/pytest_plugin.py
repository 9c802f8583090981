"""pytest plugin (entry point `specsample`): run specsample's certification from any test suite.

Options:
    --specsample-budget {ci,standard,full}   budget of the certificates (default: ci)

Fixtures:
    specsample_budget   the selected `Budget`
    specsample_certify  certify(fn_or_sampler, family="chain", laws=None, only=None, inputs=None,
                        device="cpu") -> Certification; `.assert_passed()` raises AssertionError
                        listing every failed certificate (law, case, statement)

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
    family: str = "chain",
    budget="ci",
    laws=None,
    only=None,
    inputs=None,
    device: str = "cpu",
    name: str | None = None,
    salt: int = 0,
) -> Certification:
    """Certify a sampler (a protocol object, or a bare function with our signature) at `budget`."""
    from specsample.verify import runner
    from specsample.verify.budgets import Budget, get_budget
    from specsample.verify.protocol import ChainSampler, GumbelSampler, _takes_seeds

    b = budget if isinstance(budget, Budget) else get_budget(budget)
    sampler = fn_or_sampler
    if not hasattr(sampler, "fn"):
        fn = fn_or_sampler
        ins = inputs or getattr(fn, "specsample_inputs", "torch")
        label = name or getattr(fn, "__qualname__", "sampler")
        if family == "gumbel":
            sampler = GumbelSampler(fn, label, ins, device)
        else:
            sampler = ChainSampler(fn, label, ins, device, _takes_seeds(fn))
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
