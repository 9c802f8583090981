"""The tester tested (must-show 1): assert_gof's declared error rates, measured by simulation.

For each (k, eps, alpha, beta) of SOUNDNESS_GRID: a law p with two halves of mass 1/2, the
Cauchy-Schwarz-tight alternative q = p (1 + 2 eps sign) (TV = eps, noncentrality exactly
4 n eps^2, the hardest alternative at TV eps for Pearson's test), n = the smallest n assert_gof's
design accepts, and S simulated tables from each (S = SPECSAMPLE_CALIBRATION_SEEDS, default 600).
Assertions use one-sided Clopper-Pearson bounds at confidence 1 - 1e-6 (alpha of these meta-tests
= 1e-6 each): the false-fail rate is consistent with <= alpha, the power with >= 1 - beta.
"""

import numpy as np
import pytest

from specsample.stats import clopper_pearson, gof_design, test_seed
from specsample.stats.calibrate import (
    SOUNDNESS_GRID,
    calibration_seeds,
    designed_n,
    gof_rates,
    two_halves_law,
    worst_case_alternative,
)

META_DELTA = 1e-6


def _detectable_excess(rate: float, seeds: int) -> float:
    # smallest true rate r > rate whose median failure count gives a CP lower bound above `rate`
    m = np.arange(seeds + 1)
    lower = np.array(
        [clopper_pearson(int(k), seeds, META_DELTA, "lower") for k in m[:: max(1, seeds // 400)]]
    )
    first = m[:: max(1, seeds // 400)][np.argmax(lower > rate)]
    return first / seeds


@pytest.mark.statistical
@pytest.mark.parametrize("k, eps, alpha, beta", SOUNDNESS_GRID)
def test_designed_n_meets_declared_alpha_and_beta(request, k, eps, alpha, beta):
    """Meta-test at alpha 1e-6 per side over S tables; detects a true false-fail rate above about
    the `detectable` value printed in the message (eps of the meta-test)."""
    seeds = calibration_seeds(600)
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p, sign = two_halves_law(k, rng)
    q = worst_case_alternative(p, sign, eps)
    assert 0.5 * np.abs(q - p).sum() == pytest.approx(eps)
    n = designed_n(p, eps, alpha, beta)
    design = gof_design(n, p, eps=eps, alpha=alpha, beta=beta)
    assert design["required_n"] <= n < 1.01 * design["required_n"] + 2
    assert design["k_pooled"] == k, "the alternative must be tested without pooling for TV to be eps"
    rates = gof_rates(p, q, n, eps=eps, alpha=alpha, beta=beta, seeds=seeds, seed=seed)
    null_lower = clopper_pearson(rates.null_failures, seeds, META_DELTA, "lower")
    power_upper = clopper_pearson(rates.alt_failures, seeds, META_DELTA, "upper")
    msg = (
        f"k={k} eps={eps} alpha={alpha} beta={beta} n={n} S={seeds}: null failures {rates.null_failures}"
        f" (CP lower {null_lower:.4f}), alternative detections {rates.alt_failures} (CP upper "
        f"{power_upper:.4f}); meta alpha={META_DELTA}, detectable false-fail rate "
        f"~{_detectable_excess(alpha, seeds):.3f}; SPECSAMPLE_SEED={seed}"
    )
    assert null_lower <= alpha, msg
    assert power_upper >= 1 - beta, msg


def test_design_rejects_small_n_and_accepts_designed_n():
    """The design assertion is deterministic: n - 1 below the designed n fails with "design: n too
    small", the designed n goes on to the test (here with counts exactly n p, which pass)."""
    from specsample.stats import assert_gof

    p = np.array([0.1, 0.2, 0.3, 0.4])
    n = designed_n(p, 0.05, 1e-6, 1e-6)
    with pytest.raises(AssertionError, match="design: n too small"):
        counts = np.floor((n - 1) * p).astype(int)
        counts[-1] += n - 1 - counts.sum()
        assert_gof(counts, p, eps=0.05, alpha=1e-6, beta=1e-6)
    counts = np.floor(n * p).astype(int)
    counts[-1] += n - counts.sum()
    cert = assert_gof(counts, p, eps=0.05, alpha=1e-6, beta=1e-6)
    assert cert.passed and cert.n == n and cert.detail["required_n"] <= n


@pytest.mark.statistical
def test_meta_test_sees_an_undersized_design(request):
    """The power meta-test can fail: at a third of the designed n (k=10, eps=0.05, alpha=0.01,
    beta=0.05) the worst-case power is ~0.6 by ncx2, and the 1e-6 Clopper-Pearson upper bound over
    S tables falls below 1 - beta (for S >= 200 this holds with probability > 1 - 1e-6)."""
    seeds = max(200, calibration_seeds(600) // 2)
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p, sign = two_halves_law(10, rng)
    q = worst_case_alternative(p, sign, 0.05)
    n = designed_n(p, 0.05, 0.01, 0.05) // 3
    rates = gof_rates(p, q, n, eps=0.05, alpha=0.01, beta=0.05, seeds=seeds, seed=seed)
    power_upper = clopper_pearson(rates.alt_failures, seeds, META_DELTA, "upper")
    assert power_upper < 0.95, f"n={n}: detections {rates.alt_failures}/{seeds}; SPECSAMPLE_SEED={seed}"
