"""The pytest plugin's fixtures certify a bare function with our signature (deterministic laws only:
edge and coupling, no alpha)."""

import pytest

from specsample.verify.examples.sglang_like import chain_sample_sglang_like
from specsample.verify.protocol import reference_chain_fn


def test_budget_option_defaults_to_ci(specsample_budget):
    assert specsample_budget.name == "ci"


def test_certify_fixture_passes_the_reference(specsample_certify):
    cert = specsample_certify(
        reference_chain_fn, inputs="numpy", laws=["edge", "coupling"], only=["edge", "dirichlet1_V8"]
    )
    cert.assert_passed()
    assert {r.law for r in cert.records} == {"edge", "coupling"}


def test_certify_fixture_fails_the_sglang_like_sampler(specsample_certify):
    cert = specsample_certify(chain_sample_sglang_like, laws=["edge"])
    with pytest.raises(AssertionError, match="laws: edge"):
        cert.assert_passed()
