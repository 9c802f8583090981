"""Smoke tests of the goodness-of-fit assertion: a correct sampler passes, a planted bug fails."""

import numpy as np
import pytest

from specsample.stats import assert_gof, chi2_min_samples, test_seed


def test_correct_multinomial_passes(request):
    """alpha=1e-6, beta=1e-6, eps=0.02, k=10, n=2e5 (>= designed n): fails a correct sampler w.p. <= 1e-6."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(10))
    n = 200_000
    cert = assert_gof(rng.multinomial(n, p), p, eps=0.02, alpha=1e-6, beta=1e-6, seed=seed)
    assert cert.passed and cert.n == n


def test_planted_bug_fails(request):
    """Swap the largest and smallest probabilities (TV >= 0.1 for this p): fails w.p. >= 1-1e-6."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(10))
    q = p.copy()
    i, j = np.argmax(p), np.argmin(p)
    q[i], q[j] = p[j], p[i]
    eps = 0.5 * float(np.abs(q - p).sum())
    assert eps >= 0.1
    n = chi2_min_samples(10, eps, 1e-7, 1e-6) * 2
    with pytest.raises(AssertionError, match="goodness of fit failed(.|\n)*SPECSAMPLE_SEED="):
        assert_gof(rng.multinomial(n, q), p, eps=eps, alpha=1e-6, beta=1e-6, seed=seed)
