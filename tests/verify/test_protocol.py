"""Sampler protocol and adapters: output normalisation, engine adapters without the engine installed,
external targets, and the baseline sampler against the project reference on hypothesis cases."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specsample.reference.chain import chain_rejection_reference
from specsample.verify import mutable_reference as mref
from specsample.verify.protocol import (
    SamplerUnavailable,
    as_chain_output,
    chain_sampler_for,
    target_sampler,
)
from specsample.verify.strategies import adversarial_uniform_rows, chain_cases


@pytest.mark.parametrize(
    "engine,package", [("sglang", "sglang"), ("vllm", "vllm"), ("flashinfer", "flashinfer")]
)
def test_engine_adapter_names_the_missing_package(engine, package):
    with pytest.raises(SamplerUnavailable, match=f"'{package}'.*not installed"):
        chain_sampler_for(engine, "cpu")


def test_unknown_adapter_and_bad_target_are_usage_errors():
    with pytest.raises(ValueError, match="--adapter"):
        chain_sampler_for("tensorrt", "cpu")
    with pytest.raises(ValueError, match="MODULE:FUNCTION"):
        target_sampler("no_colon_here", "cpu")
    with pytest.raises(SamplerUnavailable, match="cannot load"):
        target_sampler("specsample.verify.examples.sglang_like:missing", "cpu")


def test_outputs_are_normalised_from_tuple_dict_and_result():
    t = (
        torch.tensor([[1, -1]], dtype=torch.int32),
        torch.tensor([0]),
        torch.tensor([True]),
        torch.tensor([True]),
    )
    for res in (t, dict(zip(("tokens", "num_accepted", "fallback", "valid"), t, strict=True))):
        out = as_chain_output(res)
        assert out.tokens.dtype == np.int64 and out.tokens.tolist() == [[1, -1]]
        assert out.fallback.tolist() == [True] and out.valid.tolist() == [True]
    with pytest.raises(TypeError, match="SampleResult"):
        as_chain_output(3)


@settings(max_examples=40)
@given(case=chain_cases(), data=st.data())
def test_baseline_sampler_matches_reference_on_adversarial_cases(case, data):
    """Deterministic coupling (no alpha): verify's baseline == specsample.reference.chain on
    hypothesis-drawn cases and uniforms, including endpoints and exact thresholds."""
    u = data.draw(adversarial_uniform_rows(case))
    rows = u.shape[0]
    p = np.broadcast_to(case.p, (rows, *case.p.shape))
    q = None if case.q is None else np.broadcast_to(case.q, (rows, *case.q.shape))
    ids = np.broadcast_to(case.drafts, (rows, case.k))
    n = np.full(rows, case.num_draft_tokens)
    ref = chain_rejection_reference(p, ids, q, uniforms=u, num_draft_tokens=n)
    got = mref.chain_sample(p, ids, q, n, u)
    assert np.array_equal(got[0], ref.tokens)
    assert np.array_equal(got[1], ref.num_accepted)
    assert np.array_equal(got[2], ref.fallback)
    assert np.array_equal(got[3], ref.valid)
