"""Laws of the chain kernel on its production RNG paths (torch generator, per-request Philox seeds).

For one target/draft pair broadcast to every request (stride-0 inputs, as engines batch them) the
exact float64 laws come from `specsample.reference.laws`:
- the joint law of (a, emitted token) over (K+1) x (V+1) cells (the last column is an emitted -1),
  which is what catches a uniform reused between an acceptance test and the residual draw;
- the accepted-length law P(a = j);
- the per-position conditional law of the token written at position i given that i is reached
  (drafts drawn from q / d: p_i itself, the lossless property; fixed drafts:
  alpha_i delta_{x_i} + (1 - alpha_i) rho_i).
Each is a designed chi-square (`stats.assert_gof`): alpha = 1e-6 per assertion (false fail), power
1 - beta = 1 - 1e-6 against any law at TV >= eps = 0.03 on the pooled cells; assert_gof first
asserts that n meets the power design. n = 65536 rows per run; positions whose expected reach count
is below 1.25x the design's required n are not tested (decided from the exact law, before sampling).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specsample.kernels.chain import chain_rejection_sample
from specsample.reference import laws
from specsample.stats import assert_gof, gof_design, seeding

ALPHA, BETA, EPS = 1e-6, 1e-6, 0.03
N_ROWS, K, V = 65536, 3, 8
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def pair(rng: np.random.Generator):
    """A target [K+1, V] and a draft [K, V] close enough to it that later positions are reached."""
    p = rng.dirichlet(np.full(V, 0.8), size=K + 1)
    q = 0.6 * p[:K] + 0.4 * rng.dirichlet(np.full(V, 0.8), size=K)
    p = p.astype(np.float32).astype(np.float64)  # the laws use the exact values the kernel reads
    q = q.astype(np.float32).astype(np.float64)
    return p, q


def draw_drafts(rng, dists, rows):
    cdf = np.cumsum(dists / dists.sum(-1, keepdims=True), axis=-1)
    return np.stack([(rng.random((rows, 1)) < cdf[i]).argmax(-1) for i in range(len(dists))], axis=1)


def sample(p, q, x, source: str, seed: int, classic: bool):
    batch = x.shape[0]
    p_t = torch.from_numpy(p).float().to(DEVICE)[None].expand(batch, K + 1, V)
    q_t = torch.from_numpy(q).float().to(DEVICE)[None].expand(batch, K, V) if classic else None
    x_t = torch.from_numpy(x).to(DEVICE)
    if source == "generator":
        gen = torch.Generator(device=DEVICE).manual_seed(seed % 2**62)
        res = chain_rejection_sample(p_t, x_t, q_t, generator=gen)
    else:
        rng = np.random.default_rng(seed)
        seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=batch, dtype=np.int64)).to(DEVICE)
        offsets = torch.from_numpy(rng.integers(0, 2**62, size=batch, dtype=np.int64)).to(DEVICE)
        res = chain_rejection_sample(p_t, x_t, q_t, seeds=seeds, offsets=offsets)
    return res.tokens.cpu().numpy().astype(np.int64), res.num_accepted.cpu().numpy().astype(np.int64)


def fixed_position_law(p_row, q_row, x):
    alpha = laws.acceptance_prob(p_row, q_row, int(x))
    law = (1 - alpha) * laws.rejection_emission_law(p_row, q_row, int(x)).probs
    law[x] += alpha
    return law


@pytest.mark.statistical
@pytest.mark.parametrize("source", ["generator", "seeds"])
@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
@pytest.mark.parametrize("drafts", ["fixed", "drawn"])
def test_chain_laws_on_production_rng(source, classic, drafts):
    seed = seeding.current_test_seed()
    rng = np.random.default_rng(seed)
    p, q = pair(rng)
    draft_dist = q if classic else rng.dirichlet(np.ones(V), size=K)  # one-hot: any draft law
    q_arg = q if classic else None
    if drafts == "fixed":
        x_row = draw_drafts(rng, draft_dist, 1)[0]
        x = np.broadcast_to(x_row, (N_ROWS, K)).copy()
        law = laws.chain_conditional_law(p, q_arg, x_row)
        position_laws = [
            fixed_position_law(p[i], None if q_arg is None else q[i], x_row[i]) for i in range(K)
        ]
    else:
        x = draw_drafts(rng, draft_dist, N_ROWS)
        law = laws.chain_marginal_law(p, q_arg, draft_dist=draft_dist)
        position_laws = [
            laws.position_token_law(p[i], None if q_arg is None else q[i], draft_dist=draft_dist[i])
            for i in range(K)
        ]
    tokens, accepted = sample(p, q, x, source, seed, classic)
    label = f"chain {'classic' if classic else 'one-hot'}, {drafts} drafts, {source}"

    emitted = tokens[np.arange(N_ROWS), accepted]
    cell = accepted * (V + 1) + np.where(emitted >= 0, emitted, V)
    joint = law.joint_with_invalid().ravel()
    assert_gof(np.bincount(cell, minlength=joint.size), joint, eps=EPS, alpha=ALPHA, beta=BETA, seed=seed,
               label=f"joint (a, token), {label}")  # fmt: skip
    assert_gof(np.bincount(accepted, minlength=K + 1), law.length, eps=EPS, alpha=ALPHA, beta=BETA, seed=seed,
               label=f"accepted length, {label}")  # fmt: skip

    survival = law.survival()
    tested = 0
    for i in range(K):
        required = gof_design(N_ROWS, position_laws[i], eps=EPS, alpha=ALPHA, beta=BETA)["required_n"]
        if survival[i] * N_ROWS < 1.25 * required:
            continue
        reached = accepted >= i
        counts = np.bincount(tokens[reached, i], minlength=V)
        assert_gof(counts, position_laws[i], eps=EPS, alpha=ALPHA, beta=BETA, seed=seed,
                   label=f"token at position {i} given reached, {label}")  # fmt: skip
        tested += 1
    assert tested >= 1, "design: no position reached often enough for the per-position law"
