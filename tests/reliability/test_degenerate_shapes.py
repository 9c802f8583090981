"""Degenerate shapes and layouts for every op: empty batch (B = 0), no drafts (K = 0), a single
token (V = 1), ragged counts 0 and K (and outside [0, K]: clamped), non-contiguous, transposed and
stride-0 inputs, int32 vs int64 ids, bf16/fp16 vs fp32 holding the same values. Each case runs under
the CPU memcheck and is checked against the float64 reference (reliability_oracle.py); layout and
dtype variants must also give exactly the result of the plain contiguous fp32 / int64 call.
Deterministic (inputs seeded from the test id), so no alpha."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from reliability_memcheck import memcheck
from reliability_oracle import (
    check_chain,
    check_fast_sample,
    check_logits,
    check_renorm,
    check_sample_from_logits,
)

import specsample as ss
from specsample.stats import seeding

B, K, V = 12, 3, 9


@pytest.fixture
def rng(request) -> np.random.Generator:
    return np.random.default_rng(seeding.test_seed(request.node.nodeid))


def _probs(rng, *shape) -> torch.Tensor:
    return torch.from_numpy(rng.dirichlet(np.full(shape[-1], 0.7), size=shape[:-1])).float()


def _seeds(rng, batch=B):
    return torch.from_numpy(rng.integers(0, 2**62, size=batch)), torch.from_numpy(
        rng.integers(0, 2**40, size=batch)
    )


def _same(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y), f"{x} != {y}"


# ------------------------------------------------------------------------------------------------
# empty batch
# ------------------------------------------------------------------------------------------------


def test_empty_batch_launches_nothing_and_returns_empty_outputs():
    z = torch.zeros
    s = torch.zeros(0, dtype=torch.int64)
    with memcheck() as report:
        chain = ss.chain_rejection_sample(
            z(0, K + 1, V), z(0, K, dtype=torch.int64), z(0, K, V), seeds=s, offsets=s
        )
        chain_u = ss.chain_rejection_sample(z(0, K + 1, V), z(0, K, dtype=torch.int32), uniforms=z(0, K + 1))
        logits = ss.rejection_sample_logits(z(0, K + 1, V), z(0, K, dtype=torch.int64), z(0, K, V),
                                            temperature=z(0), seeds=s, offsets=s)  # fmt: skip
        fast_p, fast_i = ss.fast_sample(z(0, V), 3, seeds=s, offsets=s)
        token = ss.sample_from_logits(z(0, V), 1.0, seeds=s, offsets=s, probs_out=z(0, V))
        renorm = ss.renorm_draft_probs(z(0, K, V), z(0))
    assert report.launches == 0
    for res in (chain, chain_u, logits):
        assert res.tokens.shape == (0, K + 1) and res.tokens.dtype == torch.int32
        assert res.num_accepted.shape == (0,) and res.valid.shape == (0,) and res.fallback.shape == (0,)
    assert fast_p.shape == (0, 3) and fast_i.shape == (0, 3) and fast_i.dtype == torch.int64
    assert token.shape == (0,) and token.dtype == torch.int64
    assert renorm.shape == (0, K, V) and renorm.dtype == torch.float32


# ------------------------------------------------------------------------------------------------
# K = 0, V = 1
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("classic", [True, False])
def test_no_drafts_emits_the_bonus_token(rng, classic):
    """K = 0: every row emits one token from p[b, 0] and accepts nothing."""
    p = _probs(rng, B, 1, V)
    q = torch.zeros(B, 0, V) if classic else None
    x = torch.zeros(B, 0, dtype=torch.int64)
    seeds, offsets = _seeds(rng)
    out = check_chain(p, x, q, seeds=seeds, offsets=offsets)
    assert out.valid == B and out.ambiguous == 0
    lg = torch.log(p)
    out = check_logits(lg, x, torch.zeros(B, 0, V) if classic else None, temperature=torch.full((B,), 0.8),
                       seeds=seeds, offsets=offsets)  # fmt: skip
    assert out.valid == B


def test_single_token_vocabulary(rng):
    """V = 1: the only token is 0; drafts 0 are accepted (p = q = 1), any other id is rejected and
    the residual p - q = 0 falls back to p."""
    p = torch.ones(B, K + 1, 1)
    x = torch.from_numpy(rng.choice([0, 0, -1, 1], size=(B, K)))
    seeds, offsets = _seeds(rng)
    check_chain(p, x, torch.ones(B, K, 1), seeds=seeds, offsets=offsets)
    res = ss.chain_rejection_sample(p, x, torch.ones(B, K, 1), seeds=seeds, offsets=offsets)
    first_bad = np.where((x.numpy() != 0).any(1), (x.numpy() != 0).argmax(1), K)
    assert res.num_accepted.tolist() == first_bad.tolist()
    assert res.fallback.tolist() == (first_bad < K).tolist() and res.valid.all()
    check_logits(torch.zeros(B, K + 1, 1), x, torch.zeros(B, K, 1), temperature=torch.ones(B), seeds=seeds,
                 offsets=offsets)  # fmt: skip
    _, idx = ss.fast_sample(torch.ones(B, 1), 2, seeds=seeds, offsets=offsets)
    assert idx.tolist() == [[0, -1]] * B
    assert ss.sample_from_logits(torch.zeros(B, 1), 0.5, seeds=seeds, offsets=offsets).tolist() == [0] * B
    check_renorm(torch.zeros(B, K, 1), torch.ones(B))


# ------------------------------------------------------------------------------------------------
# ragged counts
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
def test_ragged_counts_outside_range_are_clamped(rng, id_dtype):
    """n = -3 behaves exactly as n = 0 (bonus from p[b, 0]) and n = K + 5 exactly as n = K."""
    p, q = _probs(rng, B, K + 1, V), _probs(rng, B, K, V)
    x = torch.from_numpy(rng.integers(0, V, size=(B, K)))
    raw = torch.from_numpy(rng.choice([-3, 0, 1, K, K + 5, 2**31 - 1], size=B)).to(id_dtype)
    clamped = raw.long().clamp(0, K)
    seeds, offsets = _seeds(rng)
    check_chain(p, x, q, raw, seeds=seeds, offsets=offsets)
    rand = dict(seeds=seeds, offsets=offsets)
    _same(ss.chain_rejection_sample(p, x, q, num_draft_tokens=raw, **rand),
          ss.chain_rejection_sample(p, x, q, num_draft_tokens=clamped, **rand))  # fmt: skip
    lg, dl = torch.log(p), torch.log(q)
    kw = dict(temperature=torch.full((B,), 0.9), seeds=seeds, offsets=offsets)
    check_logits(lg, x, dl, raw, **kw)
    _same(ss.rejection_sample_logits(lg, x, dl, num_draft_tokens=raw, **kw),
          ss.rejection_sample_logits(lg, x, dl, num_draft_tokens=clamped, **kw))  # fmt: skip
    zero = ss.chain_rejection_sample(p, x, q, num_draft_tokens=torch.zeros(B, dtype=id_dtype), seeds=seeds,
                                     offsets=offsets)  # fmt: skip
    assert zero.num_accepted.tolist() == [0] * B and (zero.tokens[:, 1:] == -1).all()


# ------------------------------------------------------------------------------------------------
# layouts and dtypes
# ------------------------------------------------------------------------------------------------


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values stored in reversed dimension order (every stride differs from contiguous)."""
    dims = tuple(range(t.dim()))[::-1]
    return t.permute(dims).contiguous().permute(dims)


def test_chain_layouts_give_the_contiguous_result(rng):
    p, q = _probs(rng, B, K + 1, V), _probs(rng, B, K, V)
    x = torch.from_numpy(rng.integers(-1, V + 1, size=(B, K)))
    u = torch.from_numpy(rng.random((B, K + 1)).astype(np.float32))
    n = torch.from_numpy(rng.integers(0, K + 1, size=B))
    want = ss.chain_rejection_sample(p, x, q, num_draft_tokens=n, uniforms=u)
    variants = {
        "transposed": (_transposed(p), _transposed(x), _transposed(q), n, _transposed(u)),
        "strided": (
            p[:, :, None].expand(B, K + 1, 2, V)[:, :, 1],
            x.repeat_interleave(2, dim=1)[:, ::2],
            q,
            n.repeat_interleave(3)[::3],
            u.repeat_interleave(3, dim=1)[:, ::3],
        ),
        "int32 ids": (p, x.int(), q, n.int(), u),
    }
    for name, (pv, xv, qv, nv, uv) in variants.items():
        check_chain(pv, xv, qv, nv, uniforms=uv, label=f"chain {name}")
        _same(ss.chain_rejection_sample(pv, xv, qv, num_draft_tokens=nv, uniforms=uv), want)


def test_stride_zero_broadcasts(rng):
    """One request's target/draft rows, ids and uniforms broadcast over the batch with stride 0:
    every row is the same request, so every output row equals row 0 of the materialised call."""
    p, q = _probs(rng, 1, K + 1, V).expand(B, K + 1, V), _probs(rng, 1, K, V).expand(B, K, V)
    x = torch.from_numpy(rng.integers(0, V, size=(1, K))).expand(B, K)
    u = torch.from_numpy(rng.random((1, K + 1)).astype(np.float32)).expand(B, K + 1)
    assert p.stride(0) == 0 and x.stride(0) == 0 and u.stride(0) == 0
    res = ss.chain_rejection_sample(p, x, q, uniforms=u)
    check_chain(p, x, q, uniforms=u)
    _same(
        res,
        ss.chain_rejection_sample(p.contiguous(), x.contiguous(), q.contiguous(), uniforms=u.contiguous()),
    )
    assert (res.tokens == res.tokens[:1]).all()
    seeds, offsets = _seeds(rng, 1)
    lg, dl = torch.log(p), torch.log(q)
    kw = dict(temperature=torch.ones(1).expand(B), seeds=seeds.expand(B), offsets=offsets.expand(B))
    check_logits(lg, x, dl, **kw)
    assert (ss.rejection_sample_logits(lg, x, dl, **kw).tokens == res.tokens[:1].new_tensor(
        ss.rejection_sample_logits(lg[:1], x[:1], dl[:1], temperature=torch.ones(1), seeds=seeds,
                                   offsets=offsets).tokens)).all()  # fmt: skip
    probs = p[:, 0]
    check_fast_sample(probs, 2, seeds=seeds, offsets=offsets)  # [1] seeds broadcast over the batch
    _, idx = ss.fast_sample(probs, 2, seeds=seeds, offsets=offsets)
    assert (idx == idx[:1]).all()
    check_sample_from_logits(torch.log(probs), torch.ones(1), seeds=seeds, offsets=offsets)
    check_renorm(dl, torch.full((1,), 0.5))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_equals_fp32_on_the_same_values(rng, dtype):
    """Values exactly representable in the half dtype give exactly the fp32 call's result."""
    p = _probs(rng, B, K + 1, V).to(dtype)
    q = _probs(rng, B, K, V).to(dtype)
    x = torch.from_numpy(rng.integers(0, V, size=(B, K)))
    seeds, offsets = _seeds(rng)
    check_chain(p, x, q, seeds=seeds, offsets=offsets)
    _same(ss.chain_rejection_sample(p, x, q, seeds=seeds, offsets=offsets),
          ss.chain_rejection_sample(p.float(), x, q.float(), seeds=seeds, offsets=offsets))  # fmt: skip
    lg, dl = torch.log(p.float()).to(dtype), torch.log(q.float()).to(dtype)
    kw = dict(temperature=torch.full((B,), 0.8), seeds=seeds, offsets=offsets)
    check_logits(lg, x, dl, **kw)
    _same(
        ss.rejection_sample_logits(lg, x, dl, **kw),
        ss.rejection_sample_logits(lg.float(), x, dl.float(), **kw),
    )
    _same(ss.fast_sample(p[:, 0], 3, seeds=seeds, offsets=offsets)[1:],
          ss.fast_sample(p[:, 0].float(), 3, seeds=seeds, offsets=offsets)[1:])  # fmt: skip
    _same([ss.sample_from_logits(lg[:, 0], 0.7, seeds=seeds, offsets=offsets)],
          [ss.sample_from_logits(lg[:, 0].float(), 0.7, seeds=seeds, offsets=offsets)])  # fmt: skip
