"""Hypothesis fuzzing of invalid inputs against every public op.

Metadata: every argument of an op is, with probability ~1/3, replaced by something wrong (another
shape, another dtype, a Python scalar, a list, None). Whatever comes, the op either raises
ValueError/TypeError whose message names an argument (for a disagreement, e.g. of batch sizes,
either side may be named), or (when every
change happened to be acceptable) returns outputs that satisfy the contract. Any other exception
(IndexError, RuntimeError, an interpreter error from inside a kernel) fails.

Values: small random shapes (B <= 8, K <= 4, V <= 40, every dtype and id dtype, ragged counts,
stride-0 or strided layouts) filled with the hostile rows of reliability_batches.py, checked by
reliability_oracle.py: CPU memcheck clean, ids in [-1, V), flags and tokens equal to the float64
reference on rows not within float tolerance of a boundary.

Hypothesis runs derandomized in CI (tests/conftest.py profile "ci", max_examples = 20): each value
test runs 2x that (40 examples), the metadata test 10x (200), since most of its examples stop before
any launch: 360 examples, ~55 s on two CPU cores. HYPOTHESIS_PROFILE=verify scales them (x15).
The examples are deterministic, so there is no alpha: a failing example is a bug (hypothesis prints its blob).
Open defects (test_defect_regressions.py) are kept out of what is checked.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from reliability_batches import (
    LOGIT_POISON,
    PROB_POISON,
    TEMPERATURES,
    draft_ids,
    guarded,
    logit_rows,
    prob_kinds,
    prob_rows,
    ragged_counts,
    seeds_offsets,
    temperatures,
)
from reliability_oracle import (
    check_chain,
    check_fast_sample,
    check_logits,
    check_renorm,
    check_sample_from_logits,
)

import specsample as ss

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
ID_DTYPES = [torch.int32, torch.int64]
_BASE = settings()
VALUE_EXAMPLES = _BASE.max_examples * 2  # 40 per value test in CI (~0.3 s each under the interpreter)
METADATA_EXAMPLES = _BASE.max_examples * 10  # 200 in CI: most stop at host validation (~10 ms)

shapes = st.tuples(st.integers(1, 8), st.integers(0, 4), st.integers(1, 40))
layouts = st.sampled_from(["contiguous", "strided", "guarded"])
value_seeds = st.integers(0, 2**32 - 1)
# the drafted batch of the chain and logits value tests: (B, K, V), value dtype, id dtype, draft
# distribution given or not (classic / one-hot), ragged counts or not
drafted_batches = dict(
    shape=shapes,
    dtype=st.sampled_from(DTYPES),
    id_dtype=st.sampled_from(ID_DTYPES),
    classic=st.booleans(),
    ragged=st.booleans(),
)


def _laid_out(values: np.ndarray, dtype: torch.dtype, how: str, poison: float) -> torch.Tensor:
    """`values` as a `dtype` tensor laid out as `how` says: contiguous, every dim strided by 2, or
    guarded (a view between `poison` columns, reliability_batches.guarded)."""
    if how == "guarded":
        return guarded(values, dtype, poison)
    t = torch.from_numpy(values).to(dtype)
    if how == "strided":
        big = torch.empty([2 * s for s in t.shape], dtype=t.dtype)
        view = big[tuple(slice(None, None, 2) for _ in t.shape)]
        view.copy_(t)
        return view
    return t


# ------------------------------------------------------------------------------------------------
# values
# ------------------------------------------------------------------------------------------------


@settings(max_examples=VALUE_EXAMPLES)
@given(**drafted_batches, seeded=st.booleans(), layout=layouts, seed=value_seeds)
def test_fuzz_chain_values(shape, dtype, id_dtype, classic, ragged, seeded, layout, seed):
    batch, num_k, vocab = shape
    rng = np.random.default_rng(seed)
    kinds = prob_kinds(dtype)
    p = _laid_out(prob_rows(rng, (batch, num_k + 1, vocab), kinds), dtype, layout, PROB_POISON)
    q = (
        _laid_out(prob_rows(rng, (batch, num_k, vocab), kinds), dtype, layout, PROB_POISON)
        if classic
        else None
    )
    x = draft_ids(rng, batch, num_k, vocab, id_dtype)
    n = ragged_counts(rng, batch, num_k, id_dtype) if ragged else None
    if seeded:
        seeds, offsets = seeds_offsets(rng, batch)
        out = check_chain(p, x, q, n, seeds=seeds, offsets=offsets)
    else:
        u = torch.from_numpy(rng.random((batch, num_k + 1)).astype(np.float32))
        out = check_chain(p, x, q, n, uniforms=u)
    note(f"{out}")


@settings(max_examples=VALUE_EXAMPLES)
@given(**drafted_batches, layout=layouts, seed=value_seeds)
def test_fuzz_rejection_sample_logits_values(shape, dtype, id_dtype, classic, ragged, layout, seed):
    batch, num_k, vocab = shape
    rng = np.random.default_rng(seed)
    lg = _laid_out(logit_rows(rng, (batch, num_k + 1, vocab)), dtype, layout, LOGIT_POISON)
    dl = _laid_out(logit_rows(rng, (batch, num_k, vocab)), dtype, layout, LOGIT_POISON) if classic else None
    x = draft_ids(rng, batch, num_k, vocab, id_dtype)
    n = ragged_counts(rng, batch, num_k, id_dtype) if ragged else None
    seeds, offsets = seeds_offsets(rng, batch)
    out = check_logits(lg, x, dl, n, temperature=temperatures(rng, batch), seeds=seeds, offsets=offsets)
    note(f"{out}")


@settings(max_examples=VALUE_EXAMPLES)
@given(
    shape=shapes,
    dtype=st.sampled_from(DTYPES),
    num_samples=st.integers(1, 12),
    layout=layouts,
    broadcast_seed=st.booleans(),
    seed=value_seeds,
)
def test_fuzz_fast_sample_values(shape, dtype, num_samples, layout, broadcast_seed, seed):
    batch, _, vocab = shape
    rng = np.random.default_rng(seed)
    probs = _laid_out(prob_rows(rng, (batch, vocab), prob_kinds(dtype)), dtype, layout, PROB_POISON)
    seeds, offsets = seeds_offsets(rng, 1 if broadcast_seed else batch)
    check_fast_sample(probs, num_samples, seeds=seeds, offsets=offsets)


@settings(max_examples=VALUE_EXAMPLES)
@given(
    shape=shapes,
    dtype=st.sampled_from(DTYPES),
    per_row=st.booleans(),
    with_probs_out=st.booleans(),
    layout=layouts,
    seed=value_seeds,
)
def test_fuzz_sample_from_logits_and_renorm_values(shape, dtype, per_row, with_probs_out, layout, seed):
    batch, num_k, vocab = shape
    rng = np.random.default_rng(seed)
    logits = _laid_out(logit_rows(rng, (batch, vocab)), dtype, layout, LOGIT_POISON)
    seeds, offsets = seeds_offsets(rng, batch)
    temps = temperatures(rng, batch, TEMPERATURES)
    temperature = temps if per_row else float(temps[0])
    probs_out = guarded(np.zeros((batch, vocab)), torch.float32, -3.0) if with_probs_out else None
    check_sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out)
    lead = logit_rows(rng, (batch, max(num_k, 1), vocab))
    check_renorm(torch.from_numpy(lead).to(dtype), temps if per_row else float(temps[0]))


# ------------------------------------------------------------------------------------------------
# metadata
# ------------------------------------------------------------------------------------------------

B, K, V = 3, 2, 6


def _valid_arguments(op: str) -> dict:
    s = torch.arange(B, dtype=torch.int64)
    if op == "chain_rejection_sample":
        return dict(
            target_probs=torch.full((B, K + 1, V), 1 / V),
            draft_token_ids=torch.zeros(B, K, dtype=torch.int64),
            draft_probs=torch.full((B, K, V), 1 / V),
            num_draft_tokens=torch.full((B,), K),
            uniforms=torch.full((B, K + 1), 0.5),
        )
    if op == "rejection_sample_logits":
        return dict(
            target_logits=torch.zeros(B, K + 1, V),
            draft_token_ids=torch.zeros(B, K, dtype=torch.int32),
            draft_logits=torch.zeros(B, K, V),
            temperature=torch.ones(B),
            seeds=s,
            offsets=s,
            num_draft_tokens=torch.full((B,), K),
        )
    if op == "fast_sample":
        return dict(probs=torch.full((B, V), 1 / V), num_samples=2, seeds=s, offsets=s)
    if op == "sample_from_logits":
        return dict(
            logits=torch.zeros(B, V),
            temperature=torch.ones(B),
            seeds=s,
            offsets=s,
            probs_out=torch.zeros(B, V),
        )
    return dict(draft_logits=torch.zeros(B, K, V), temperature=torch.ones(B))


_POSITIONAL = {"fast_sample": 1, "sample_from_logits": 2, "renorm_draft_probs": 2}
_NEEDS_TENSOR_T = {"rejection_sample_logits"}


@st.composite
def _bad_value(draw, value):
    """Something wrong in place of `value`: a tensor of another shape or dtype, a scalar, a list,
    None, or a tensor on the meta device."""
    kinds = (
        ["shape", "dtype", "scalar", "list", "none", "meta"]
        if isinstance(value, torch.Tensor)
        else ["scalar", "none", "negative", "big"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "shape":
        dims = draw(st.lists(st.integers(0, 7), min_size=0, max_size=4))
        dtype = value.dtype
        return torch.zeros(dims, dtype=dtype)
    if kind == "dtype":
        dtype = draw(
            st.sampled_from(
                [
                    torch.float64,
                    torch.float32,
                    torch.float16,
                    torch.int16,
                    torch.int32,
                    torch.int64,
                    torch.uint8,
                    torch.bool,
                ]
            )
        )
        return value.to(dtype)
    if kind == "scalar":
        return draw(st.sampled_from([0, 1, -1, 0.5, True, float("nan")]))
    if kind == "list":
        return value.tolist()
    if kind == "meta":
        return value.to("meta")
    if kind == "negative":
        return -draw(st.integers(0, 2**40))
    if kind == "big":
        return draw(st.integers(65, 2**40))
    return None


@settings(max_examples=METADATA_EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(
        [
            "chain_rejection_sample",
            "rejection_sample_logits",
            "fast_sample",
            "sample_from_logits",
            "renorm_draft_probs",
        ]
    ),
    data=st.data(),
)
def test_fuzz_metadata_every_op(op, data):
    kwargs = _valid_arguments(op)
    changed = [name for name in kwargs if data.draw(st.integers(0, 2), label=f"change {name}") == 0]
    for name in changed:
        kwargs[name] = data.draw(_bad_value(kwargs[name]), label=name)
    note(f"{op}: changed {changed}")
    names = list(kwargs)
    positional = [kwargs.pop(name) for name in names[: _POSITIONAL.get(op, 0)]]
    fn = getattr(ss, op)
    try:
        out = fn(*positional, **kwargs)
    except (ValueError, TypeError) as err:
        message = str(err)
        # an agreement error (batch, K, V) may name either side: any argument of the op counts
        named = [n for n in names if n in message] + [w for w in ("randomness", "V must") if w in message]
        assert named, f"{op}: changed {changed}, but the message names no argument: {message!r}"
        return
    # every change was acceptable (e.g. None for an optional argument, a scalar temperature)
    if op in ("chain_rejection_sample", "rejection_sample_logits"):
        assert ((out.tokens >= -1) & (out.tokens < V)).all()
    elif op == "fast_sample":
        assert ((out[1] >= -1) & (out[1] < V)).all()
    elif op == "sample_from_logits":
        assert ((out >= -1) & (out < V)).all()
    else:
        assert torch.isfinite(out).all()
