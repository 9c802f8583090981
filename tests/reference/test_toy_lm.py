"""End-to-end losslessness over a toy language model: the speculative process' law of the first
L tokens equals the target model's, exactly (enumeration) and for the float64 reference sampler
(designed chi-square)."""

import numpy as np
import pytest

from specsample.reference.chain import chain_rejection_reference
from specsample.reference.laws import ChainLaw, chain_conditional_law, emission_law
from specsample.reference.toy_lm import (
    DRAFT_MODES,
    ToyLanguageModel,
    random_toy_lm,
    sequence_index,
    speculative_generate,
    speculative_sequence_law,
    target_sequence_law,
)
from specsample.stats import assert_gof, chi2_min_samples, test_seed

EXACT = 1e-13


def _models(seed: int, vocab: int, order: int):
    rng = np.random.default_rng(seed)
    target = random_toy_lm(vocab, order, rng, concentration=0.8, zero_prob=0.3)
    draft = random_toy_lm(vocab, order, rng, concentration=0.8, zero_prob=0.3)
    return target, draft


@pytest.mark.parametrize("mode", DRAFT_MODES)
@pytest.mark.parametrize(("vocab", "order", "num_k", "length"), [(3, 1, 2, 4), (3, 2, 3, 4), (4, 1, 3, 3)])
def test_speculative_sequence_law_equals_target_law(mode, vocab, order, num_k, length, request):
    """Exact: enumerating drafts and decisions with chain_conditional_law, the law of the first L
    tokens equals target_sequence_law to float64 rounding (tables with zero entries included)."""
    target, draft = _models(test_seed(request.node.nodeid), vocab, order)
    prompt = [0] * order
    expected = target_sequence_law(target, prompt, length)
    assert abs(expected.sum() - 1.0) <= EXACT
    got = speculative_sequence_law(target, draft, prompt, length, num_k, mode=mode)
    np.testing.assert_allclose(got, expected, rtol=0, atol=EXACT)


def _residual_from_target(p, q, x, n=None) -> ChainLaw:
    """Planted bug (an anchor's real one): on rejection the token is drawn from p, not the residual."""
    law = chain_conditional_law(p, q, x, n)
    joint = law.joint.copy()
    for j in range(joint.shape[0] - 1):
        joint[j] = law.length[j] * emission_law(p[j]).probs
    return law._replace(joint=joint)


def test_enumeration_detects_a_wrong_round_law(request):
    """The exact check can fail: with the residual replaced by p, the sequence law moves away from
    the target's by total variation > 1e-3."""
    target, draft = _models(test_seed(request.node.nodeid), 3, 1)
    expected = target_sequence_law(target, [0], 4)
    wrong = speculative_sequence_law(target, draft, [0], 4, 2, round_law=_residual_from_target)
    assert abs(wrong.sum() - 1.0) <= EXACT
    assert 0.5 * np.abs(wrong - expected).sum() > 1e-3


def test_target_sequence_law_is_a_product_of_conditionals():
    """A hand-computed order-1 model: P(t1, t2) = table[prompt][t1] * table[t1][t2]."""
    model = ToyLanguageModel(np.array([[0.5, 0.5, 0.0], [0.1, 0.2, 0.7], [1.0, 0.0, 0.0]]))
    law = target_sequence_law(model, [2], 2)
    expected = np.outer(model.table[2], np.ones(3)) * model.table
    np.testing.assert_allclose(law, expected, rtol=0, atol=0)


@pytest.mark.parametrize("mode", DRAFT_MODES)
def test_reference_sampler_is_lossless_on_toy_lm(mode, request):
    """Simulation: speculative_generate with chain_rejection_reference (V = 3, order 1, K = 2,
    L = 4: 81 sequence cells) follows target_sequence_law. alpha = 1e-6, power 1 - 1e-6 at TV
    eps = 0.02, n = 1.2 * chi2_min_samples(81, 0.02, 1e-7, 1e-6) sequences."""
    seed = test_seed(request.node.nodeid)
    target, draft = _models(seed, 3, 1)
    rng = np.random.default_rng(seed)
    n = int(1.2 * chi2_min_samples(81, 0.02, 1e-7, 1e-6))
    sequences = speculative_generate(target, draft, [0], 4, 2, chain_rejection_reference, rng, n, mode=mode)
    counts = np.bincount(sequence_index(sequences, 3), minlength=81)
    law = target_sequence_law(target, [0], 4).ravel()
    assert_gof(counts, law, eps=0.02, alpha=1e-6, beta=1e-6, seed=seed, label=f"toy LM, {mode}")


def test_simulation_detects_a_lossy_sampler(request):
    """The simulation check can fail: a sampler that draws the emitted token from p instead of the
    residual (TV > 0.02 from the target law here) is rejected by the same chi-square design."""
    seed = test_seed(request.node.nodeid)
    target, draft = _models(seed, 3, 1)
    law = target_sequence_law(target, [0], 4)
    wrong_law = speculative_sequence_law(target, draft, [0], 4, 2, round_law=_residual_from_target)
    eps = 0.5 * np.abs(wrong_law - law).sum()
    assert eps > 0.02

    def lossy(p, x, q, *, uniforms, num_draft_tokens=None):
        res = chain_rejection_reference(p, x, q, uniforms=uniforms)
        rows = np.flatnonzero(res.num_accepted < x.shape[1])
        from_p = chain_rejection_reference(
            p[rows, res.num_accepted[rows]][:, None, :],
            np.zeros((rows.size, 0), np.int64),
            uniforms=uniforms[rows, -1:],
        )
        res.tokens[rows, res.num_accepted[rows]] = from_p.tokens[:, 0]
        return res

    rng = np.random.default_rng(seed)
    n = int(1.2 * chi2_min_samples(81, 0.02, 1e-7, 1e-6))
    sequences = speculative_generate(target, draft, [0], 4, 2, lossy, rng, n, mode="classic")
    counts = np.bincount(sequence_index(sequences, 3), minlength=81)
    with pytest.raises(AssertionError, match="goodness of fit failed"):
        assert_gof(counts, law.ravel(), eps=0.02, alpha=1e-6, beta=1e-6, seed=seed)


def test_speculative_generate_rejects_bad_sampler_output(request):
    """A sampler emitting an id outside [0, V) is reported, not silently written into sequences."""
    target = ToyLanguageModel(np.full((2, 2), 0.5))

    def broken(p, x, q, *, uniforms, num_draft_tokens=None):
        res = chain_rejection_reference(p, x, q, uniforms=uniforms)
        return res._replace(tokens=np.full_like(res.tokens, 7))

    with pytest.raises(ValueError, match="outside"):
        speculative_generate(
            target, target, [0], 3, 1, broken, np.random.default_rng(test_seed(request.node.nodeid)), 5
        )
