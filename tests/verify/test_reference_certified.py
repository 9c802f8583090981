"""The float64 references pass every `ci` certificate of the verifier.

Statistical content: every GOF certificate runs at alpha = 1e-6 per assertion with power 1 - 1e-3
against TV >= eps = 0.04 (n from specsample.stats' design, 4e3..6e4 rows per law); about 100 such
assertions, so this test fails falsely with probability <= 1e-4 (union bound). Coupling certificates
are deterministic given their seeds (0 mismatches, TV <= 2e-3 at delta = 1e-6 from 16384 rows).
Seeds are a hash of (case, law): fixed, never tuned.
"""

import pytest

from specsample.verify import logits_family, runner
from specsample.verify.budgets import get_budget
from specsample.verify.protocol import mutable_sampler, reference_gumbel_sampler, reference_sampler


def _failures(records):
    return [f"{r.case}/{r.law}: {r.statement} {r.detail}"[:300] for r in records if not r.passed]


@pytest.mark.statistical
@pytest.mark.parametrize("family", ["chain", "gumbel", "logits"])
def test_reference_passes_every_ci_certificate(family):
    """alpha = 1e-6 per GOF assertion, eps = 0.04, beta = 1e-3, n per law from the design (module doc)."""
    sampler = {
        "chain": reference_sampler(),
        "gumbel": reference_gumbel_sampler(),
        "logits": logits_family.mutable_logits_sampler(name="reference"),
    }[family]
    recs = runner.certify_sampler_family(family, sampler, get_budget("ci"))
    # logits: 8 cases (logits_family.logits_cases; two in bfloat16, two with K + 1 = 17) x 3 laws, and 3
    # case-free laws
    assert len(recs) >= 20 if family != "logits" else len(recs) == 27
    assert not _failures(recs), _failures(recs)
    # every sampled law states its sample size (summary.tsv's n column)
    assert all(r.n > 0 for r in recs if r.law in ("conditional", "joint", "gof", "coupling_seeded")), [
        (r.case, r.law, r.n) for r in recs
    ]
    laws = {r.law for r in recs if r.status == "pass"}
    expected = {
        "chain": {
            "grid",
            "coupling",
            "coupling_seeded",
            "conditional",
            "accepted_length",
            "joint",
            "edge",
            "determinism",
            "batch_invariance",
        },
        "gumbel": {"coupling_seeded", "gof", "plackett_luce", "zero_mass", "determinism", "batch_invariance"},
        "logits": {"coupling_seeded", "greedy", "conditional", "edge", "determinism", "batch_invariance"},
    }[family]
    assert expected <= laws, f"laws that never passed: {expected - laws}"


def test_verify_baseline_equals_project_reference():
    """The unmutated base of the reference mutants is token-for-token the project reference (so a
    killed mutant differs from the reference only by its planted bug): compared on the coupling
    certificate of every ci case, which runs the baseline against specsample.reference.chain."""
    recs = runner.certify_sampler_family(
        "chain", mutable_sampler(), get_budget("ci"), laws=("coupling", "coupling_seeded", "edge")
    )
    assert not _failures(recs), _failures(recs)
    assert all("0 mismatches" in r.statement or r.law == "edge" for r in recs), [r.statement for r in recs]
