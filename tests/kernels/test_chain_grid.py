"""Deterministic verification of the chain kernel on stratified uniform grids (research/stats.md §6).

No randomness and no alpha: the kernel is a function of its uniforms, so on the centred grid its
counts must sit within the proven bound of the exact law of the float32 inputs it reads.
Float terms (bounds passed to the grid assertions); the kernel widens its inputs to float64:
- cdf_abs_err: the kernel's inverse CDF compares float64 cumsums with u * total; each is a sum of
  <= BLOCK_V in-chunk terms plus num_chunks chunk sums of non-negative numbers, off by at most
  (BLOCK_V + num_chunks) 2^-53 of the total in any order (Higham's gamma_n), plus the roundings of
  p - q, u * total and the chunk offset subtraction: (V + chunks + 5) 2^-53;
- accept_abs_err = 0: u q(x) < p(x) is exact in float64 (24-bit by 24-bit product), so is u < p(x).
Grid points (k + 1/2)/N with N a power of two are exact in float32.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import triton

from specsample.kernels.chain import _launch, _launch_config
from specsample.reference.laws import rejection_emission_law
from specsample.stats import assert_accept_reject_grid, assert_inverse_cdf_grid, seeding, stratified_uniforms

V = 16
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def cdf_err(vocab: int, block_v: int | None = None) -> float:
    bv = _launch_config(1, vocab, block_v).block_v
    return (min(vocab, bv) + triton.cdiv(vocab, bv) + 5) * 2.0**-53


def rows(rng, count, concentration=0.5):
    return rng.dirichlet(np.full(V, concentration), size=count).astype(np.float32)


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
@pytest.mark.parametrize("block_v", [None, 4])
def test_emitted_token_given_reject_on_inverse_cdf_grid(classic, block_v):
    """Draft x rejected with certainty (classic: q(x) > 0 = p(x); one-hot: u_0 = 1 - 2^-24 > p(x)),
    u_K on the N = 2^14 grid: counts of the emitted token obey |count_v - N rho_v| < 1 + 2 N err and
    cumulative deviation <= 1/2 + N err, rho the exact residual law (x zeroed for one-hot); the same
    for the bonus token (n = 0) against p. block_v = 4 splits V = 16 over 4 chunks."""
    n_grid = 2**14
    rng = np.random.default_rng(seeding.current_test_seed())
    p = rows(rng, 2)
    q = rows(rng, 1)[0]
    x = int(np.argmax(q))
    p[0, x] = 0.0 if classic else p[0, x]
    u = np.empty((n_grid, 2), dtype=np.float32)
    u[:, 0] = 1.0 - 2.0**-24
    u[:, 1] = stratified_uniforms(n_grid, dtype=np.float32)
    p_t = torch.from_numpy(p).to(DEVICE)[None].expand(n_grid, 2, V)
    q_t = torch.from_numpy(q).to(DEVICE)[None, None].expand(n_grid, 1, V) if classic else None
    x_t = torch.full((n_grid, 1), x, dtype=torch.int64, device=DEVICE)
    u_t = torch.from_numpy(u).to(DEVICE)
    res = _launch(p_t, x_t, q_t, None, u_t, None, None, block_v=block_v)
    assert res.num_accepted.sum().item() == 0
    rho = rejection_emission_law(p[0].astype(np.float64), q.astype(np.float64) if classic else None, x).probs
    counts = np.bincount(res.tokens[:, 0].cpu().numpy(), minlength=V)
    assert_inverse_cdf_grid(counts, rho, n_grid, cdf_err(V, block_v), label="residual given reject")

    bonus = _launch(p_t, x_t, q_t, torch.zeros(n_grid, dtype=torch.int64, device=DEVICE), u_t, None, None,
                    block_v=block_v)  # fmt: skip
    p0 = p[0].astype(np.float64)
    counts = np.bincount(bonus.tokens[:, 0].cpu().numpy(), minlength=V)
    assert_inverse_cdf_grid(counts, p0 / p0.sum(), n_grid, cdf_err(V, block_v), label="bonus from p")


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
def test_two_stage_accept_reject_grid(classic):
    """Every draft x of V = 16 on the N1 x N2 = 64 x 64 grid of (u_0, u_K): the counts of the token
    written at position 0 follow P(y | x) = r_x 1[y = x] + (1 - r_x) rho_x(y) within
    (1/(2 N1) + accept_err)|1[y = x] - rho_x(y)| + (1 + 2 N2 cdf_err)/N2, for each x separately
    (kills bugs that cancel in the marginal, e.g. ignoring the draft and sampling p)."""
    n1 = n2 = 64
    rng = np.random.default_rng(seeding.current_test_seed())
    p = rows(rng, 1, 0.7)[0]
    q = rows(rng, 1, 0.7)[0]
    grid = stratified_uniforms((n1, n2), dims=2, dtype=np.float32)  # [N1 N2, 2], u_0 slowest
    total = n1 * n2
    batch = V * total
    x = np.repeat(np.arange(V), total)[:, None]
    u = np.tile(grid, (V, 1))
    p_t = torch.from_numpy(np.stack([p, p])).to(DEVICE)[None].expand(batch, 2, V)
    q_t = torch.from_numpy(q).to(DEVICE)[None, None].expand(batch, 1, V) if classic else None
    res = _launch(p_t, torch.from_numpy(x).to(DEVICE), q_t, None, torch.from_numpy(u).to(DEVICE), None, None)
    y = res.tokens[:, 0].cpu().numpy().astype(np.int64)
    counts = np.zeros((V, V), dtype=np.int64)
    np.add.at(counts, (x[:, 0], y), 1)
    assert_accept_reject_grid(
        counts, p.astype(np.float64), q.astype(np.float64) if classic else None, N1=n1, N2=n2,
        accept_abs_err=0.0, cdf_abs_err=cdf_err(V),
        label=f"chain {'classic' if classic else 'one-hot'} position 0",
    )  # fmt: skip
