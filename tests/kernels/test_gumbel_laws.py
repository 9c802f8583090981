"""Laws of the Gumbel kernels on the production RNG path (in-kernel Philox, or keys from a torch
generator), by designed tests from `specsample.stats`:
  - one draw: designed chi-square of fast_sample against p / sum(p) on Hypothesis-generated
    distributions (zeros included), of sample_from_logits against softmax(l / T), and of the
    generator path;
  - without replacement: the Plackett-Luce law of ordered pairs and triples;
  - the race winner: 1 / max(p / E) ~ Exp(sum p), independent of the argmax (KS + joint chi-square).
Every draw comes from its own Philox key (a distinct random int64 seed per row), so rows are i.i.d.
Each assertion states alpha (false-fail rate), eps (TV detected with probability 1 - beta) and n.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specsample.kernels import gumbel as kg
from specsample.kernels._launch import interpreting
from specsample.reference.gumbel import softmax_with_temperature
from specsample.reference.laws import plackett_luce_law
from specsample.stats import assert_gof, counts_from_tokens, current_test_seed, gof_design
from specsample.stats.continuous import race_winner_checks

BETA = 1e-6  # every designed test detects its eps with probability >= 1 - 1e-6


def _designed_n(law, eps: float, alpha: float, floor: int = 2000) -> int:
    """Smallest n (from `floor`, iterating the pooled design) with n >= the design's required n."""
    n = floor
    while (required := gof_design(n, law, eps=eps, alpha=alpha, beta=BETA)["required_n"]) > n:
        n = required
    return n


def _keys(seed: int, batch: int, device: str):
    rng = np.random.default_rng(seed)
    seeds = torch.from_numpy(rng.integers(-(2**63), 2**63 - 1, size=batch, dtype=np.int64)).to(device)
    return seeds, torch.zeros(batch, dtype=torch.int64, device=device)


def _draw(p: np.ndarray, n: int, num_samples: int, seed: int, device: str, with_score=False):
    """n i.i.d. draws of fast_sample from one row p (stride-0 batch of n rows, distinct keys)."""
    probs = torch.from_numpy(p.astype(np.float32)).to(device)[None, :].expand(n, p.size)
    seeds, offsets = _keys(seed, n, device)
    sample_p, ids, score = kg._fast_sample(probs, num_samples, None, seeds, offsets, with_score=with_score)
    return ids.cpu().numpy(), (score.cpu().numpy() if with_score else None)


HYPOTHESIS_EXAMPLES = 8
ALPHA_EACH = 1e-6 / HYPOTHESIS_EXAMPLES  # Bonferroni over the examples Hypothesis tries
EPS_ONE_DRAW = 0.05


@st.composite
def _distributions(draw):
    vocab = draw(st.integers(2, 24))
    weights = draw(
        st.lists(
            st.one_of(st.just(0.0), st.floats(1e-3, 1.0), st.floats(1e-6, 1e-3)),
            min_size=vocab,
            max_size=vocab,
        )
    )
    weights[draw(st.integers(0, vocab - 1))] = draw(st.floats(0.05, 1.0))  # at least one with mass
    scale = draw(st.sampled_from([1.0, 1e-3, 37.0]))  # fast_sample does not need normalised rows
    return np.asarray(weights) * scale


@pytest.mark.statistical
@settings(max_examples=HYPOTHESIS_EXAMPLES)
@given(p=_distributions())
def test_one_draw_follows_p(device, p):
    """Designed chi-square (specsample.stats.assert_gof): alpha = 1.25e-7 per example (1e-6 over
    the 8 examples), eps = 0.05 TV detected w.p. 1 - 1e-6, n from the design (~1.5e4-4e4 draws);
    zero-probability tokens must never appear (exact)."""
    law = p / p.sum()
    n = _designed_n(law, EPS_ONE_DRAW, ALPHA_EACH)
    seed = current_test_seed(",".join(f"{x:.9g}" for x in p))  # a function of the test id and example
    ids, _ = _draw(p, n, 1, seed, device)
    assert ids.min() >= 0
    counts = counts_from_tokens(ids[:, 0], p.size)
    assert_gof(counts, law, eps=EPS_ONE_DRAW, alpha=ALPHA_EACH, beta=BETA, seed=seed, label="fast_sample")


@pytest.mark.statistical
@pytest.mark.parametrize("num_samples", [2, 3])
def test_without_replacement_follows_plackett_luce(device, num_samples):
    """Ordered pairs / triples from p = (0.4, 0.25, 0.2, 0.1, 0.05, 0) against the exact
    Plackett-Luce law (reference.laws.plackett_luce_law, 30 / 60 positive cells of 6^n):
    alpha = 1e-6, eps = 0.03 TV, n from the design (~4.2e4 / 5.5e4). Ids in a row are distinct."""
    p = np.array([0.4, 0.25, 0.2, 0.1, 0.05, 0.0])
    law = plackett_luce_law(p, num_samples).ravel()
    n = _designed_n(law, 0.03, 1e-6)
    seed = current_test_seed()
    ids, _ = _draw(p, n, num_samples, seed, device)
    assert ids.min() >= 0
    assert all(np.all(ids[:, i] != ids[:, j]) for i in range(num_samples) for j in range(i))
    cells = np.ravel_multi_index(tuple(ids.T), (p.size,) * num_samples)
    counts = counts_from_tokens(cells, law.size)
    assert_gof(
        counts, law, eps=0.03, alpha=1e-6, beta=BETA, seed=seed, label=f"Plackett-Luce n={num_samples}"
    )


def _spread_over_groups() -> np.ndarray:
    """V = 700 (groups [0, 256), [256, 512), [512, 700)): 9 tokens with mass in all three groups,
    unnormalised (sum 1.031), every other token 0."""
    p = np.zeros(700)
    p[[3, 100, 200, 256, 300, 511, 512, 650, 699]] = [0.2, 1e-3, 0.05, 0.1, 0.02, 0.13, 0.25, 0.15, 0.13]
    return p


@pytest.mark.statistical
@pytest.mark.parametrize("pick_in_chunk", [False, True])
def test_one_draw_follows_p_across_groups(device, pick_in_chunk):
    """The grouped race between several groups (the Hypothesis rows above fit in one group of 256):
    9 tokens with mass over 3 groups of V = 700, the token drawn in the merge and in each chunk
    (256-token tiles, 2 per chunk, pick_in_chunk); designed chi-square, alpha = 1e-6, eps = 0.05 TV
    detected w.p. 1 - 1e-6, n from the design; no zero-mass token appears (exact)."""
    p = _spread_over_groups()
    law = p / p.sum()
    n = _designed_n(law, EPS_ONE_DRAW, 1e-6)
    seed = current_test_seed()
    probs = torch.from_numpy(p.astype(np.float32)).to(device)[None, :].expand(n, p.size)
    seeds, offsets = _keys(seed, n, device)
    rows = min(n, 1024) if interpreting() else 1
    tiling = kg.RaceTiling(rows, 256, 2, 1, grouped=True, pick_in_chunk=pick_in_chunk)
    ids = kg._fast_sample(probs, 1, None, seeds, offsets, tiling=tiling)[1].cpu().numpy()[:, 0]
    assert np.all(p[ids] > 0)
    assert_gof(counts_from_tokens(ids, p.size), law, eps=EPS_ONE_DRAW, alpha=1e-6, beta=BETA, seed=seed,
               label=f"grouped race pick_in_chunk={pick_in_chunk}")  # fmt: skip


@pytest.mark.statistical
@pytest.mark.parametrize("spread", [False, True])
def test_race_winner_is_exponential_and_independent_of_the_argmax(device, spread):
    """W = sum(p) / max(P_g / E_g) ~ Exp(1) independently of the emitted token (the grouped race's
    winning score; unnormalised p: V = 9 with a zero, sum 3.1, one group; or 9 tokens over 3
    groups of V = 700, sum 1.031): KS of W against Exp(1) at alpha/2 and a chi-square of (token,
    Exp-quantile decile of W) against p / sum(p) x 1/10 at alpha/2 (stats.race_winner_checks);
    alpha = 1e-6, n = 60000 (KS detects Kolmogorov distance ~0.016 w.p. 1 - 1e-6)."""
    p = _spread_over_groups() if spread else np.array([1.2, 0.6, 0.4, 0.3, 0.25, 0.15, 0.1, 0.1, 0.0])
    seed = current_test_seed()
    ids, score = _draw(p, 60000, 1, seed, device, with_score=True)
    # the kernel's own float32 max p / E; with q = p / sum(p), max q / E = score / sum(p) and the
    # check's S = 1 / (score / sum(p)) = sum(p) / score, so the Exp(sum p) scale is what is tested
    total = p.sum()
    race_winner_checks(
        score[:, 0] / total, ids[:, 0], p / total, alpha=1e-6, kind="race", beta=BETA, seed=seed
    )


@pytest.mark.statistical
def test_sample_from_logits_follows_the_tempered_softmax(device):
    """sample_from_logits at T = 0.6 on logits N(0, 1.5^2), V = 20 with one -inf and one NaN,
    against softmax(l / T) in float64: designed chi-square, alpha = 1e-6, eps = 0.04, n from the
    design (~2.5e4)."""
    seed = current_test_seed()
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 1.5, size=20).astype(np.float32)
    logits[3], logits[11] = -np.inf, np.nan
    law = softmax_with_temperature(logits, 0.6)
    n = _designed_n(law, 0.04, 1e-6)
    seeds, offsets = _keys(seed, n, device)
    x = torch.from_numpy(logits).to(device)[None, :].expand(n, 20)
    tokens = kg.sample_from_logits(x, 0.6, seeds=seeds, offsets=offsets).cpu().numpy()
    assert_gof(
        counts_from_tokens(tokens, 20), law, eps=0.04, alpha=1e-6, beta=BETA, seed=seed, label="logits"
    )


@pytest.mark.statistical
def test_generator_path_follows_p(device):
    """fast_sample with keys drawn from a seeded torch.Generator (the CUDA-graph path): designed
    chi-square against p (V = 12), alpha = 1e-6, eps = 0.05, n from the design (~1.3e4)."""
    p = np.array([0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.05, 0.03, 0.02, 0.01, 0.0, 0.0])
    n = _designed_n(p, 0.05, 1e-6)
    gen = torch.Generator(device=device)
    seed = current_test_seed()
    gen.manual_seed(seed % 2**62)
    probs = torch.from_numpy(p.astype(np.float32)).to(device)[None, :].expand(n, p.size)
    _, ids = kg.fast_sample(probs, generator=gen)
    counts = counts_from_tokens(ids[:, 0].cpu().numpy(), p.size)
    assert_gof(counts, p, eps=0.05, alpha=1e-6, beta=BETA, seed=seed, label="generator path")


@pytest.mark.statistical
def test_grouped_race_with_weights_near_float_max(device):
    """Two groups of 256 weights 3e38 each (V = 512; a float32 sum of a group's raw weights would
    overflow, and two infinite group scores would hand every draw to group 0): the group of the
    draw follows (1/2, 1/2), designed chi-square, alpha = 1e-6, eps = 0.05 TV detected
    w.p. 1 - 1e-6, n from the design; every draw is a token in [0, 512)."""
    p = np.full(512, 3e38)
    law = np.array([0.5, 0.5])
    n = _designed_n(law, 0.05, 1e-6)
    seed = current_test_seed()
    ids, _ = _draw(p, n, 1, seed, device)
    assert ids.min() >= 0 and ids.max() < 512
    counts = counts_from_tokens(ids[:, 0] // 256, 2)
    assert_gof(counts, law, eps=0.05, alpha=1e-6, beta=BETA, seed=seed, label="grouped race, weights 3e38")
