"""Host-side validation of every public op: each bad input of the catalogue
(reliability_inputs.py) raises the documented exception type before any kernel launch, and its
message names the argument, the expected value and the actual one. The same errors come through
the torch.library ops (specsample.ops) unchanged."""

from __future__ import annotations

import pytest
import torch
from reliability_inputs import CATALOGUE, BadCall

import specsample.ops  # noqa: F401  (registers torch.ops.specsample.*)


def _marks(case: BadCall):
    return [pytest.mark.xfail(strict=True, reason=case.bug)] if case.bug else []


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in CATALOGUE])
def test_bad_metadata_raises_a_precise_error(case: BadCall):
    fn, args, kwargs = case.build()
    with pytest.raises(case.exc) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    for role, fragment in (("argument", case.name), ("expected", case.expected), ("actual", case.actual)):
        assert fragment in message, f"{case.id}: the {role} {fragment!r} is missing from {message!r}"


_OPS_ARGS = {
    "chain_rejection_sample": (
        "target_probs",
        "draft_token_ids",
        "draft_probs",
        "num_draft_tokens",
        "uniforms",
        "seeds",
        "offsets",
    ),
    "rejection_sample_logits": (
        "target_logits",
        "draft_token_ids",
        "draft_logits",
        "temperature",
        "seeds",
        "offsets",
        "num_draft_tokens",
    ),
    "fast_sample": ("probs", "num_samples", "seeds", "offsets"),
    "sample_from_logits": ("logits", "temperature", "seeds", "offsets", "probs_out"),
    "renorm_draft_probs": ("draft_logits", "temperature"),
}


def _through_ops(case: BadCall):
    """The catalogue call as a torch.ops.specsample call, or None when the op's schema cannot even
    take the bad argument (a list, a Python int for a tensor, a generator): the dispatcher rejects
    those itself."""
    fn, args, kwargs = case.build()
    names = _OPS_ARGS[case.op]
    values = dict(zip(names, args, strict=False))
    values.update(kwargs)
    if case.op == "sample_from_logits":
        values.setdefault("probs_out", None)  # no default in the op's schema (specsample/ops.py)
    if set(values) - set(names):
        return None
    for name, value in values.items():
        tensor_like = isinstance(value, torch.Tensor) or value is None
        if name == "num_samples":
            tensor_like = type(value) is int
        if name == "temperature" and case.op == "sample_from_logits":
            tensor_like = isinstance(value, torch.Tensor)
        if not tensor_like:
            return None
    op = getattr(torch.ops.specsample, case.op)
    return lambda: op(**values)


# every catalogue entry the op schemas can carry (no lists / Python ints / generators for tensors),
# except meta-device inputs: with a meta tensor among the inputs the dispatcher runs the op's fake
# (metadata-only) implementation, which returns empty outputs without validating
_OPS_CASES = [c for c in CATALOGUE if not c.bug and "meta" not in c.what and _through_ops(c) is not None]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in _OPS_CASES])
def test_torch_ops_raise_the_same_error(case: BadCall):
    call = _through_ops(case)
    with pytest.raises(case.exc) as info:
        call()
    message = str(info.value)
    for fragment in (case.name, case.expected, case.actual):
        assert fragment in message, f"{case.id} via torch.ops: {fragment!r} missing from {message!r}"
