"""`validate=True` (chain_rejection_sample, the one op that offers it): value checks that need a
host sync, each raising ValueError that names the argument, the expected values and how many are
bad. Off by default; on valid inputs it changes nothing."""

from __future__ import annotations

import pytest
import torch

import specsample as ss

B, K, V = 3, 2, 5
NAN, INF = float("nan"), float("inf")


def _call(p=None, x=None, q=None, n=None, u=None, **kw):
    p = torch.full((B, K + 1, V), 0.2) if p is None else p
    x = torch.zeros(B, K, dtype=torch.int64) if x is None else x
    u = torch.full((B, K + 1), 0.5) if u is None else u
    return ss.chain_rejection_sample(p, x, q, num_draft_tokens=n, uniforms=u, validate=True, **kw)


def _poke(shape, index, value):
    t = torch.full(shape, 0.2)
    t[index] = value
    return t


@pytest.mark.parametrize("value, label", [(-0.1, "negative"), (NAN, "NaN"), (INF, "+inf"), (-INF, "-inf")])
@pytest.mark.parametrize("name", ["target_probs", "draft_probs"])
def test_bad_probabilities_are_rejected(name, value, label):
    bad = _poke((B, K + 1, V) if name == "target_probs" else (B, K, V), (1, 0, 3), value)
    with pytest.raises(ValueError) as info:
        _call(p=bad) if name == "target_probs" else _call(q=bad)
    assert str(info.value) == f"{name}: expected finite non-negative probabilities, got 1 bad entries"


@pytest.mark.parametrize("bad_id", [-1, V, 2**31 - 1, -(2**31)])
def test_draft_ids_out_of_range_are_rejected(bad_id):
    x = torch.zeros(B, K, dtype=torch.int64)
    x[0, 1] = bad_id
    x[2, 0] = bad_id
    with pytest.raises(ValueError) as info:
        _call(x=x.int())
    assert str(info.value) == f"draft_token_ids: expected ids in [0, {V}) for used drafts, got 2 out of range"


def test_ids_beyond_the_ragged_count_are_padding_not_errors():
    """-1 padding after n_b drafts is not checked (those ids are never used)."""
    x = torch.tensor([[0, -1], [-1, -1], [4, 0]])
    res = _call(x=x, n=torch.tensor([1, 0, 2]))
    assert res.valid.all()
    with pytest.raises(
        ValueError, match="draft_token_ids: expected ids in \\[0, 5\\) for used drafts, got 1 out"
    ):
        _call(x=x, n=torch.tensor([2, 0, 2]))


@pytest.mark.parametrize("value", [1.0, -0.25, NAN, INF, 2.0])
def test_uniforms_outside_unit_interval_are_rejected(value):
    u = torch.full((B, K + 1), 0.5)
    u[1, K] = value
    with pytest.raises(ValueError) as info:
        _call(u=u)
    assert str(info.value) == "uniforms: expected values in [0, 1), got 1 outside"


def test_valid_inputs_give_the_unvalidated_result():
    gen = torch.Generator().manual_seed(5)
    p = torch.rand(B, K + 1, V, generator=gen)
    q = torch.rand(B, K, V, generator=gen)
    x = torch.randint(0, V, (B, K), generator=gen)
    u = torch.rand(B, K + 1, generator=gen)
    u[0, 0] = 0.0  # 0 is inside [0, 1)
    checked = _call(p, x, q, u=u)
    plain = ss.chain_rejection_sample(p, x, q, uniforms=u)
    for a, b in zip(checked, plain, strict=True):
        assert torch.equal(a, b)


def test_without_validate_bad_values_get_the_defined_result():
    """The same bad values with validate=False (the default) raise nothing: NaN / negative / inf mass
    is no mass, out-of-range ids are rejected, u = 1 picks the last token with mass."""
    p = _poke((B, K + 1, V), (0, 0, 0), NAN)
    p[1] = -1.0  # row 1: no mass anywhere -> invalid
    x = torch.tensor([[0, 1], [2, 3], [V, -1]])
    u = torch.full((B, K + 1), 0.5)
    u[2, K] = 1.0
    res = ss.chain_rejection_sample(p, x, uniforms=u)
    assert res.valid.tolist() == [True, False, True]
    assert res.tokens[1].tolist() == [-1] * (K + 1)
    assert res.num_accepted[2].item() == 0 and res.tokens[2, 0].item() == V - 1
