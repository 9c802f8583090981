"""Coupling: the chain kernel equals the float64 reference token for token on the same uniforms.

Rows the reference flags `ambiguous` at tolerance `tol` may differ; `tol` is a rigorous bound on the
kernel's error relative to the quantities compared (docs/semantics.md, "Ambiguity"). The kernel
widens its inputs to float64 first:
- acceptance: u q(x) < p(x) is exact in float64 (24-bit by 24-bit product), so is u < p(x);
- inverse CDF: every cumsum the kernel compares is a float64 sum of at most BLOCK_V in-chunk terms
  plus num_chunks chunk sums of non-negative numbers, whatever the summation order, so its error is
  at most (BLOCK_V + num_chunks) 2^-53 sum(r) (Higham's gamma_n); p - q, u_K * total and the chunk
  offset subtraction add three roundings. tol = (min(V, BLOCK_V) + num_chunks + 5) 2^-53.
The certificate counts every mismatch, ambiguous or not: TV(kernel, reference) <= P(mismatch).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
from hypothesis import given, note
from hypothesis import strategies as st

from specsample.kernels.chain import _launch, _launch_config, chain_rejection_sample
from specsample.reference.chain import chain_rejection_reference
from specsample.stats import seeding, tv_ucb_from_coupling

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # inputs are built on the CPU, run here


def dev(t):
    return None if t is None else t.to(DEVICE)


def row_bytes(case) -> int:
    """Bytes per vocabulary entry of a case's emit row (p, plus q for classic drafts): the GPU's
    default chunk width depends on it at small batches (_launch_config)."""
    return case["p"].element_size() + (case["q"].element_size() if case["q"] is not None else 0)


def coupling_tol(batch: int, vocab: int, block_v: int | None, entry_bytes: int = 8, tiles=None) -> float:
    bv = _launch_config(batch, vocab, block_v, tiles=tiles, row_bytes=entry_bytes).block_v
    return (min(vocab, bv) + triton.cdiv(vocab, bv) + 5) * 2.0**-53


def prob_rows(rng: np.random.Generator, shape, kind: str) -> np.ndarray:
    """[..., V] float64 rows of one family (not necessarily normalised for 'unnormalised')."""
    vocab = shape[-1]
    if kind == "dirichlet":
        return rng.dirichlet(np.full(vocab, rng.choice([0.05, 0.3, 1.0, 5.0])), size=shape[:-1])
    if kind == "sparse":
        rows = rng.dirichlet(np.ones(vocab), size=shape[:-1])
        rows *= rng.random(shape) < 0.3
        return rows
    if kind == "peaked":
        logits = rng.normal(0.0, 6.0, size=shape)
        rows = np.exp(logits - logits.max(-1, keepdims=True))
        return rows / rows.sum(-1, keepdims=True)
    if kind == "tail":  # all mass in the last tile lanes
        rows = np.zeros(shape)
        width = max(1, vocab // 7)
        rows[..., -width:] = rng.random(shape[:-1] + (width,))
        return rows
    if kind == "unnormalised":
        return rng.random(shape) * rng.choice([0.01, 3.0])
    raise ValueError(kind)


def make_case(seed: int, batch: int, num_k: int, vocab: int, kind: str, draft_kind: str, dtype: str,
              ragged: bool, bad_ids: bool, classic: bool, adversarial_u: bool):  # fmt: skip
    """Inputs as torch tensors (kernel dtype) plus their exact float64 values for the reference."""
    rng = np.random.default_rng(seed)
    p = prob_rows(rng, (batch, num_k + 1, vocab), kind)
    if draft_kind == "equal":
        q = p[:, :num_k].copy()
    elif draft_kind == "disjoint":
        q = prob_rows(rng, (batch, num_k, vocab), "dirichlet")
        q *= p[:, :num_k] == 0  # q lives where p has no mass (every draft is rejected)
        q[..., 0] += (q.sum(-1) == 0) * (p[:, :num_k, 0] == 0)
    else:
        q = prob_rows(rng, (batch, num_k, vocab), draft_kind)
    p_t = torch.from_numpy(p).to(DTYPES[dtype])
    q_t = torch.from_numpy(q).to(DTYPES[dtype])
    q64 = q_t.double().numpy()
    # drafts drawn from q where it has mass, uniform otherwise
    weights = q64 + (q64.sum(-1, keepdims=True) == 0)
    cdf = np.cumsum(weights / weights.sum(-1, keepdims=True), axis=-1)
    x = (rng.random((batch, num_k, 1)) < cdf).argmax(-1)
    if bad_ids and num_k:
        bad = rng.random((batch, num_k)) < 0.2
        x = np.where(bad, rng.choice([-1, vocab, vocab + 5, 2**31 - 1, -(2**31)], size=x.shape), x)
    u = rng.random((batch, num_k + 1)).astype(np.float32)
    if adversarial_u:
        pick = rng.random(u.shape)
        u = np.where(pick < 0.1, np.float32(0.0), u)
        u = np.where((pick > 0.9), np.float32(1.0 - 2.0**-24), u)
        if not classic and num_k:  # u exactly p(x): the strict < must reject
            p_x = np.take_along_axis(p_t[:, :num_k].float().numpy(), np.clip(x, 0, vocab - 1)[..., None], 2)
            u[:, :num_k] = np.where(
                (pick[:, :num_k] > 0.45) & (pick[:, :num_k] < 0.6), p_x[..., 0], u[:, :num_k]
            )
    n = rng.integers(-1, num_k + 2, size=batch) if ragged else None
    return dict(
        p=p_t, q=q_t if classic else None, x=torch.from_numpy(x.astype(np.int64)),
        n=None if n is None else torch.from_numpy(n), u=torch.from_numpy(u),
    )  # fmt: skip


def coupling_differences(case, block_v, id_dtype=torch.int64, tiles=None, lane_i64=False, block_rows=None,
                         launch=_launch):  # fmt: skip
    """(rows where `launch`'s outputs differ from the float64 reference, the reference's result, the
    kernel's tokens) for one case: a chain `_launch` (this module's, or a patched copy's) with the given
    tiling overrides, the reference at the kernel's coupling tolerance."""
    p, q, x, n, u = case["p"], case["q"], case["x"], case["n"], case["u"]
    batch, _, vocab = p.shape
    got = launch(dev(p), dev(x.to(id_dtype)), dev(q), dev(n), dev(u), None, None,
                 block_v=block_v, tiles=tiles, lane_i64=lane_i64, block_rows=block_rows)  # fmt: skip
    tol = coupling_tol(batch, vocab, block_v, row_bytes(case), tiles)
    ref = chain_rejection_reference(
        p.double().numpy(), x.numpy(), None if q is None else q.double().numpy(),
        uniforms=u.double().numpy(), num_draft_tokens=None if n is None else n.numpy(), tol=tol,
    )  # fmt: skip
    tokens = got.tokens.cpu().numpy()
    differ = np.any(tokens != ref.tokens, axis=1)
    differ |= got.num_accepted.cpu().numpy() != ref.num_accepted
    differ |= got.fallback.cpu().numpy() != ref.fallback
    differ |= got.valid.cpu().numpy() != ref.valid
    return differ, ref, tokens


def assert_coupled(case, block_v, id_dtype=torch.int64, tiles=None, lane_i64=False, block_rows=None):
    differ, ref, tokens = coupling_differences(case, block_v, id_dtype, tiles, lane_i64, block_rows)
    vocab = case["p"].shape[2]
    tol = coupling_tol(case["p"].shape[0], vocab, block_v, row_bytes(case), tiles)
    bad = np.nonzero(differ & ~ref.ambiguous)[0]
    assert bad.size == 0, (
        f"{bad.size} unambiguous rows differ (tol {tol:.2e}); first {bad[:5]}: kernel {tokens[bad[:3]]} "
        f"ref {ref.tokens[bad[:3]]}"
    )
    # hard guarantees hold on every row, ambiguous or not
    assert np.all((tokens >= -1) & (tokens < vocab))
    return differ, ref


@given(
    seed=st.integers(0, 2**32 - 1),
    vocab=st.sampled_from([1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 65, 1023, 1024, 1025, 2049]),
    num_k=st.integers(0, 4),
    batch=st.integers(1, 48),
    kind=st.sampled_from(["dirichlet", "sparse", "peaked", "tail", "unnormalised"]),
    draft_kind=st.sampled_from(["dirichlet", "sparse", "peaked", "equal", "disjoint"]),
    dtype=st.sampled_from(["fp32", "fp32", "bf16", "fp16"]),
    ragged=st.booleans(),
    bad_ids=st.booleans(),
    classic=st.booleans(),
    adversarial_u=st.booleans(),
    block_v=st.sampled_from([None, None, 8, 16]),
    id_dtype=st.sampled_from([torch.int32, torch.int64]),
    tiles=st.sampled_from([None, None, 1, 2]),
    lane_i64=st.booleans(),
)
def test_kernel_matches_reference_on_same_uniforms(
    seed,
    vocab,
    num_k,
    batch,
    kind,
    draft_kind,
    dtype,
    ragged,
    bad_ids,
    classic,
    adversarial_u,
    block_v,
    id_dtype,
    tiles,
    lane_i64,
):
    """Deterministic: every unambiguous row equal (tokens, num_accepted, fallback, valid), tile
    boundaries (V around BLOCK_V, forced small chunks), sparse/peaked/tail-only/unnormalised rows,
    p == q, disjoint supports, bf16/fp16, ragged counts and invalid ids, endpoint uniforms; `tiles`
    1 or 2 splits a row over several programs (the last to arrive emits, as on the GPU);
    `lane_i64` forces the 64-bit lane offsets used for huge strides."""
    block_v = block_v if vocab <= 65 else None  # forced small chunks only where they stay cheap
    case = make_case(
        seed, batch, num_k, vocab, kind, draft_kind, dtype, ragged, bad_ids, classic, adversarial_u
    )
    differ, ref = assert_coupled(case, block_v, id_dtype, tiles, lane_i64)
    note(f"ambiguous rows {int(ref.ambiguous.sum())}, differing {int(differ.sum())}")


@pytest.mark.statistical
@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
def test_mismatch_rate_certifies_tv_to_reference(classic):
    """Certificate: TV(kernel, reference) <= P(mismatch) <= Clopper-Pearson UCB <= 1e-3 at
    confidence 1 - delta, delta = 1e-6, over n = 3 * 2^14 = 49152 rows (V = 16, K = 4, Dirichlet(0.3)
    targets and drafts, drafts drawn from q, ragged counts; every mismatch counts, ambiguous or not).
    With 0 mismatches the UCB is ln(1/delta)/n = 2.8e-4; the assertion fails from 20 mismatches."""
    seed = seeding.current_test_seed()
    n_rows, vocab, num_k = 3 * 2**14, 16, 4
    rng = np.random.default_rng(seed)
    p = torch.from_numpy(rng.dirichlet(np.full(vocab, 0.3), size=(n_rows, num_k + 1)).astype(np.float32))
    q = torch.from_numpy(rng.dirichlet(np.full(vocab, 0.3), size=(n_rows, num_k)).astype(np.float32))
    cdf = np.cumsum(q.double().numpy(), -1)
    x = torch.from_numpy((rng.random((n_rows, num_k, 1)) * cdf[..., -1:] < cdf).argmax(-1))
    case = dict(p=p, q=q if classic else None, x=x, n=torch.from_numpy(rng.integers(0, num_k + 1, n_rows)),
                u=torch.from_numpy(rng.random((n_rows, num_k + 1)).astype(np.float32)))  # fmt: skip
    differ, ref = assert_coupled(case, None)
    mismatches = int(differ.sum())
    cert = tv_ucb_from_coupling(
        mismatches, n_rows, 1e-6, seed=seed, label=f"chain {'classic' if classic else 'one-hot'}"
    )
    assert cert.tv_bound <= 1e-3, f"{cert.what} ({mismatches}/{n_rows} rows differ, seed {seed})"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
def test_unmasked_chunks_couple(classic, dtype):
    """One row per program (the GPU's layout), 64-column chunks, 2 per program, V = 300: programs 0
    and 1 of a row lie inside V and stream without masks (classic rejected rows read p and q, classic
    bonus rows and one-hot rows p alone), program 2 holds the row's tail and takes the masked loads.
    Every unambiguous row equals the float64 reference (48 requests, K = 2, every row needed). Fails
    when an unmasked path drops a tile, reads q on a bonus row's chunks or forgets to subtract it."""
    case = make_case(seeding.current_test_seed(), 48, 2, 300, "dirichlet", "dirichlet", dtype,
                     False, False, classic, False)  # fmt: skip
    differ, ref = assert_coupled(case, 64, tiles=2, block_rows=1)
    bonus = ref.num_accepted == 2
    # design check: the rows streamed cover the paths named above (classic: both kinds of rows)
    assert not bonus.all() and (bonus.any() or not classic), ref.num_accepted


def test_seeded_path_couples_with_reference_uniforms():
    """The in-kernel Philox uniforms are reference.philox.chain_uniforms: the seeded kernel equals the
    reference fed those uniforms (deterministic, 4096 rows, V = 33 over 3 chunks of 16)."""
    from specsample.reference.chain import chain_seeded_uniforms

    seed = seeding.current_test_seed()
    rng = np.random.default_rng(seed)
    batch, num_k, vocab = 4096, 3, 33
    case = make_case(seed, batch, num_k, vocab, "dirichlet", "dirichlet", "fp32", True, True, True, False)
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=batch, dtype=np.int64))
    offsets = torch.from_numpy(rng.integers(0, 2**62, size=batch, dtype=np.int64))
    p, x, q, n = (dev(case[k]) for k in "pxqn")
    got = _launch(p, x, q, n, None, dev(seeds), dev(offsets), block_v=16)
    u = chain_seeded_uniforms(seeds.numpy(), offsets.numpy(), num_k)
    ref = chain_rejection_reference(case["p"].double().numpy(), case["x"].numpy(), case["q"].double().numpy(),
                                    uniforms=u, num_draft_tokens=case["n"].numpy(),
                                    tol=coupling_tol(batch, vocab, 16))  # fmt: skip
    differ = np.any(got.tokens.cpu().numpy() != ref.tokens, axis=1) & ~ref.ambiguous
    assert not differ.any(), f"{int(differ.sum())} rows differ from the reference on Philox uniforms"


def test_public_launcher_equals_private_launch():
    """chain_rejection_sample with uniforms is _launch with the launcher's own chunk choice."""
    case = make_case(7, 64, 2, 40, "dirichlet", "dirichlet", "fp32", False, False, True, False)
    p, x, q, u = (dev(case[k]) for k in "pxqu")
    a = chain_rejection_sample(p, x, q, uniforms=u)
    b = _launch(p, x, q, None, u, None, None)
    for got, want in zip(a, b, strict=True):
        assert torch.equal(got, want)
