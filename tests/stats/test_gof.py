"""Pooling, the three parts of assert_gof, failure messages, and TV certificates."""

import json

import numpy as np
import pytest

from specsample.stats import (
    assert_gof,
    assert_tv_below,
    assert_zero_mass,
    chi2_min_samples,
    chisquare_gof,
    counts_from_tokens,
    exact_cellwise_binomial,
    pool_by_expected,
    test_seed,
    tv_ucb_from_counts,
    tv_ucb_from_coupling,
)


def test_pooling_uses_expected_counts_only():
    """Descending p, merge until n p >= floor, remainder into the last cell, p = 0 left out;
    the result does not depend on any observed count (there is none in the signature)."""
    p = np.array([0.4, 0.0, 0.3, 0.15, 0.1, 0.03, 0.02])
    cells = pool_by_expected(p, 100, min_expected=20)
    assert cells.cell_of[1] == -1
    assert np.all(100 * cells.probs >= 20) or cells.num_cells == 1
    assert cells.probs.sum() == pytest.approx(1.0)
    # exact expectation: {0}: 40, {2}: 30, {3, 4}: 25, remainder {5, 6}: 5 < 20 merged into {3, 4}
    assert [m.tolist() for m in cells.members] == [[0], [2], [3, 4, 5, 6]]
    assert cells.multi_member_mass() == pytest.approx(0.3)
    single = pool_by_expected(p, 10, min_expected=20)
    assert single.num_cells == 1


def test_zero_observed_categories_are_counted():
    """A sampler that never emits token 3 (p_3 = 0.2) fails even though its cell is empty."""
    p = np.array([0.4, 0.2, 0.2, 0.2])
    counts = np.array([10_000, 5000, 5000, 0])
    res = chisquare_gof(counts, p)
    assert res.p_value < 1e-100
    with pytest.raises(AssertionError, match="goodness of fit failed"):
        assert_gof(counts, p, eps=0.05, alpha=1e-6, beta=1e-6)


def test_zero_mass_is_deterministic_and_message_has_repro_line(request):
    seed = test_seed(request.node.nodeid)
    p = np.array([0.5, 0.0, 0.5])
    assert assert_zero_mass([3, 0, 4], p).passed
    with pytest.raises(AssertionError, match=r"(?s)id 1: count 1.*SPECSAMPLE_SEED="):
        assert_zero_mass([3, 1, 4], p, seed=seed)
    with pytest.raises(AssertionError, match="zero-mass"):
        assert_gof([5000, 1, 5000], p, eps=0.1, alpha=1e-6, beta=1e-6, seed=seed)


def test_counts_from_tokens_refuses_out_of_range_ids():
    assert counts_from_tokens([0, 2, 2], 4).tolist() == [1, 0, 2, 0]
    with pytest.raises(AssertionError, match="outside"):
        counts_from_tokens([0, 4], 4)
    with pytest.raises(AssertionError, match="outside"):
        counts_from_tokens([-1, 0], 4)


def test_cellwise_binomial_sees_a_bug_inside_a_pooled_cell(request):
    """Two sparse tokens swap their probabilities (0.004 and 0.0005): pooled together the chi-square
    cannot see it, the exact per-token test can (count ~ 40 vs expected 5 at n = 10^4)."""
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = np.array([0.5, 0.3, 0.1955, 0.004, 0.0005])
    q = p.copy()
    q[3], q[4] = p[4], p[3]
    counts = rng.multinomial(10_000, q)
    res = exact_cellwise_binomial(counts, p, alpha=1e-6)
    assert 4 in res.rejected.tolist()
    with pytest.raises(AssertionError, match="exact binomial rejects"):
        assert_gof(counts, p, eps=0.1, alpha=1e-6, beta=1e-6, seed=seed)


def test_failure_message_holds_table_design_and_repro(request):
    """A shifted law (TV 0.1) at the designed n: the message has the pooled table, the design
    (alpha, beta, eps, n, k) and SPECSAMPLE_SEED=<base seed of the test>."""
    seed = test_seed(request.node.nodeid, salt="table")
    rng = np.random.default_rng(seed)
    p = np.full(6, 1 / 6)
    q = np.array([0.3, 0.1, 0.1, 0.1, 1 / 6, 4 / 15])
    n = chi2_min_samples(6, 0.1, 1e-7, 1e-6) * 2
    with pytest.raises(AssertionError) as info:
        assert_gof(rng.multinomial(n, q), p, eps=0.1, alpha=1e-6, beta=1e-6, seed=seed, label="shifted")
    text = str(info.value)
    assert "pooled table" in text and "(o-e)/sqrt(e)" in text
    assert "alpha=1e-06" in text and "beta=1e-06" in text and "eps=0.1" in text and f"n={n}" in text
    assert f"SPECSAMPLE_SEED={test_seed(request.node.nodeid)}" in text


def test_certificate_round_trips_through_json(request):
    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(5))
    cert = assert_gof(rng.multinomial(100_000, p), p, eps=0.03, alpha=1e-6, beta=1e-6, seed=seed)
    data = json.loads(cert.to_json())
    assert data["name"] == "gof" and data["n"] == 100_000 and data["seed"] == seed
    assert data["alpha"] == 1e-6 and data["eps"] == 0.03 and data["passed"] is True
    assert data == cert.to_dict()
    assert "PASS gof" in str(cert)


def test_tv_from_coupling_is_clopper_pearson():
    """0 mismatches in 1.4e4 rows certifies ~1e-3 at delta 1e-6 (research/stats.md §6.4)."""
    cert = tv_ucb_from_coupling(0, 14_000, 1e-6)
    assert cert.tv_bound == pytest.approx(9.87e-4, rel=1e-2)
    assert tv_ucb_from_coupling(28, 500_000, 1e-6).tv_bound == pytest.approx(1.2e-4, rel=0.05)
    assert_tv_below(cert, 1e-3)
    with pytest.raises(AssertionError, match="TV bound"):
        assert_tv_below(tv_ucb_from_coupling(50, 14_000, 1e-6), 1e-3)


@pytest.mark.statistical
@pytest.mark.parametrize("k, peaked", [(8, False), (1000, True)])
def test_tv_from_counts_covers_the_true_tv(request, k, peaked):
    """Coverage check over 200 tables (delta = 0.05 so misses are visible): the bound is >= the
    true TV in every table where it should be; misses counted must have Clopper-Pearson lower bound
    (confidence 1 - 1e-6) <= 0.05. The sampler is off by a known TV (~0.02)."""
    from specsample.stats import clopper_pearson

    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.05 if peaked else 1.0))
    q = 0.98 * p + 0.02 * rng.dirichlet(np.ones(k))
    true_tv = 0.5 * np.abs(q - p).sum()
    misses = 0
    for counts in rng.multinomial(20_000, q, size=200):
        misses += tv_ucb_from_counts(counts, p, 0.05).tv_bound < true_tv
    assert clopper_pearson(misses, 200, 1e-6, "lower") <= 0.05, f"misses {misses}/200, seed {seed}"


@pytest.mark.statistical
def test_mc_pvalue_is_valid_for_sparse_tables(request):
    """Sparse table (k = 30, n = 60, expected 2 per cell): over 300 null tables the MC p-value
    (999 simulations) rejects at 0.05 at a rate whose Clopper-Pearson lower bound (confidence
    1 - 1e-6) is <= 0.05; a law at TV 0.23 (noncentrality 73 at n = 300) gets p-value <= 0.01."""
    from specsample.stats import clopper_pearson, mc_pvalue

    seed = test_seed(request.node.nodeid)
    rng = np.random.default_rng(seed)
    p = np.full(30, 1 / 30)
    rejections = sum(
        mc_pvalue(c, p, n_sims=999, seed=int(rng.integers(2**63))) <= 0.05
        for c in rng.multinomial(60, p, size=300)
    )
    assert clopper_pearson(rejections, 300, 1e-6, "lower") <= 0.05, f"{rejections}/300; seed {seed}"
    q = np.r_[np.full(10, 0.1 / 10), np.full(20, 0.9 / 20)]
    assert mc_pvalue(rng.multinomial(300, q), p, n_sims=999, seed=seed) <= 0.01
