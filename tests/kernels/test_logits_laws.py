"""The law of `rejection_sample_logits` on its production Philox path equals the exact law.

For one request (K = 2, V = 6) replicated over n rows with distinct seeds, the joint law of
(a = num_accepted, emitted token) is known in closed form (`reference.logits.output_law`):
  classic drafts x_i ~ q_i (drawn here):  sum_x prod_i q_i(x_i) * law(a, token | x);
  one-hot, a fixed draft x:              law(a, token | x).
Each run asserts (1) `assert_gof` on the (K+1) x (V+1) cells (the last column is token -1, which has
zero mass) at alpha = 1e-6 with power 1 - 1e-6 against TV >= eps_gof, and (2) the acceptance rate
of draft 0 with a designed exact binomial test: beta = sum_v min(p_0, q_0) (classic, x ~ q) or
p_0(x_0) (one-hot), two-sided at alpha = 1e-6, n large enough that |rate - beta| >= eps_acc is
detected with probability >= 1 - 1e-6 (checked exactly before sampling).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy import stats as sps

from specsample.reference.logits import output_law, softmax_logits
from specsample.stats import assert_gof, current_test_seed
from tests.kernels.test_logits_cases import sample_logits

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy log(0) inside the interpreter

N = 40_000
K, V = 2, 6
ALPHA = BETA = 1e-6
EPS_GOF = 0.035
EPS_ACC = 0.025


def binomial_region(n: int, beta: float, alpha: float) -> tuple[int, int]:
    """Acceptance region [lo, hi] of the exact two-sided binomial test at level alpha (alpha/2 per tail)."""
    lo = int(sps.binom.ppf(alpha / 2, n, beta))
    hi = int(sps.binom.isf(alpha / 2, n, beta))
    return lo, hi


def assert_binomial_design(n: int, beta: float, alpha: float, eps: float, miss: float) -> tuple[int, int]:
    """Deterministic design check: under beta +- eps the count leaves [lo, hi] w.p. >= 1 - miss."""
    lo, hi = binomial_region(n, beta, alpha)
    for alt in (beta - eps, beta + eps):
        if 0.0 <= alt <= 1.0:
            inside = sps.binom.cdf(hi, n, alt) - sps.binom.cdf(lo - 1, n, alt)
            assert inside <= miss, f"design: n={n} misses |rate - {beta:.4f}| >= {eps} w.p. {inside:.2e}"
    return lo, hi


def joint_counts(tokens: np.ndarray, accepted: np.ndarray) -> np.ndarray:
    emitted = tokens[np.arange(tokens.shape[0]), accepted]
    cells = accepted * (V + 1) + np.where(emitted >= 0, emitted, V)
    return np.bincount(cells, minlength=(K + 1) * (V + 1))


@pytest.mark.parametrize("temperature", [0.6, 1.0, 1.8])
@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_joint_law_and_acceptance_rate(classic, temperature):
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    lg = rng.normal(0.0, 1.5, (K + 1, V)).astype(np.float32)
    dl = (lg[:K] + rng.normal(0.0, 1.0, (K, V))).astype(np.float32)
    p = softmax_logits(lg, temperature)
    q = softmax_logits(dl, temperature)
    if classic:
        x = np.stack([rng.choice(V, N, p=q[i]) for i in range(K)], axis=1)
        law = sum(
            np.prod([q[i, xs[i]] for i in range(K)]) * output_law(p, xs, q)
            for xs in itertools.product(range(V), repeat=K)
        )
        beta0 = float(np.minimum(p[0], q[0]).sum())
    else:
        xs = np.argsort(-p[:K], axis=1)[:, 1]  # the second most likely token at each position
        x = np.broadcast_to(xs, (N, K))
        law = output_law(p, xs)
        beta0 = float(p[0, xs[0]])
    lo, hi = assert_binomial_design(N, beta0, ALPHA, EPS_ACC, BETA)

    res = sample_logits(
        torch.from_numpy(lg)[None].expand(N, K + 1, V),
        torch.tensor(x, dtype=torch.int64),
        torch.from_numpy(dl)[None].expand(N, K, V) if classic else None,
        temperature=torch.full((N,), temperature),
        seeds=torch.tensor(rng.integers(0, 2**63 - 1, N, dtype=np.int64)),
        offsets=torch.full((N,), int(rng.integers(0, 2**62)), dtype=torch.int64),
    )
    tokens, accepted = res.tokens.numpy(), res.num_accepted.numpy().astype(np.int64)
    label = f"logits {'classic' if classic else 'one-hot'} T={temperature}"
    assert_gof(joint_counts(tokens, accepted), law.ravel(), eps=EPS_GOF, alpha=ALPHA, beta=BETA, seed=seed,
               label=label)  # fmt: skip
    hits = int((accepted >= 1).sum())
    assert lo <= hits <= hi, (
        f"{label}: draft-0 acceptance {hits}/{N} = {hits / N:.4f} outside [{lo}, {hi}] for beta={beta0:.4f} "
        f"(exact binomial, alpha={ALPHA}, detects |rate - beta| >= {EPS_ACC} w.p. 1-{BETA}; seed {seed})"
    )


SUPPORT = np.array([5, 100, 260, 511, 512, 690])  # groups 0, 0, 1, 1, 2, 2 of the residual draw
N_GROUPS = 20_000
EPS_GROUPS = 0.05


@pytest.mark.parametrize("classic", [False, True], ids=["one-hot", "classic"])
def test_joint_law_across_draw_groups(classic):
    """The residual draw's group race on its production path: V = 700 (groups of 256 tokens: three, the
    last partial) with mass on six tokens, two per group, -inf logits elsewhere; K = 2, T = 1. The
    law of (a, emitted token) is output_law on the six-token restriction (tokens without mass can
    never be emitted, so any other id fails). assert_gof on the 3 x 7 cells at alpha = 1e-6, power
    1 - 1e-6 against TV >= 0.05, n = 20,000 rows (the design check in assert_gof)."""
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    ls = rng.normal(0.0, 1.0, (K + 1, SUPPORT.size)).astype(np.float32)
    ds = (ls[:K] + rng.normal(0.0, 1.0, (K, SUPPORT.size))).astype(np.float32)
    p, q = softmax_logits(ls, 1.0), softmax_logits(ds, 1.0)
    lg = np.full((K + 1, 700), -np.inf, dtype=np.float32)
    dl = np.full((K, 700), -np.inf, dtype=np.float32)
    lg[:, SUPPORT], dl[:, SUPPORT] = ls, ds
    if classic:
        xs = np.stack([rng.choice(SUPPORT.size, N_GROUPS, p=q[i]) for i in range(K)], axis=1)
        law = sum(
            np.prod([q[i, c[i]] for i in range(K)]) * output_law(p, c, q)
            for c in itertools.product(range(SUPPORT.size), repeat=K)
        )
    else:
        c = np.argsort(-p[:K], axis=1)[:, 1]
        xs = np.broadcast_to(c, (N_GROUPS, K))
        law = output_law(p, c)
    res = sample_logits(
        torch.from_numpy(lg)[None].expand(N_GROUPS, K + 1, 700),
        torch.tensor(SUPPORT[xs], dtype=torch.int64),
        torch.from_numpy(dl)[None].expand(N_GROUPS, K, 700) if classic else None,
        temperature=torch.ones(N_GROUPS),
        seeds=torch.tensor(rng.integers(0, 2**63 - 1, N_GROUPS, dtype=np.int64)),
        offsets=torch.full((N_GROUPS,), int(rng.integers(0, 2**62)), dtype=torch.int64),
    )
    tokens, accepted = res.tokens.numpy(), res.num_accepted.numpy().astype(np.int64)
    emitted = tokens[np.arange(N_GROUPS), accepted]
    where = np.full(701, -1)
    where[SUPPORT] = np.arange(SUPPORT.size)
    cell = np.where(emitted >= 0, where[emitted], SUPPORT.size)
    assert np.all(cell >= 0), f"emitted tokens without mass: {np.unique(emitted[cell < 0])[:5]}"
    counts = np.bincount(accepted * (SUPPORT.size + 1) + cell, minlength=(K + 1) * (SUPPORT.size + 1))
    assert_gof(counts, law.ravel(), eps=EPS_GROUPS, alpha=ALPHA, beta=BETA, seed=seed,
               label=f"logits {'classic' if classic else 'one-hot'} across draw groups")  # fmt: skip
