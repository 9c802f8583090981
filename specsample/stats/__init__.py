"""specsample.stats: the statistics that certify samplers (numpy/scipy only).

Every assertion returns a `Certificate` and raises AssertionError (with the design, the data
table and a `SPECSAMPLE_SEED=` repro line) on failure. Module map:
  bounds       dkw_epsilon, dkw_min_samples, weissman_l1_epsilon, clopper_pearson, ...
  power        chi2_min_samples, chi2_detectable_tv, chi2_power
  gof          pool_by_expected, chisquare_gof, exact_cellwise_binomial, assert_zero_mass, assert_gof
  certify      tv_ucb_from_coupling, tv_ucb_from_counts, assert_tv_below
  continuous   assert_ks, randomized_pit, race_winner_checks
  meta         pvalues_uniform, holm, bonferroni
  grid         stratified_uniforms, assert_inverse_cdf_grid, assert_accept_reject_grid,
               implied_pmf_by_bisection
  seeding      test_seed, seed_stream
See docs/stats.md for what each guarantees.
"""

from ._checks import counts_from_tokens
from .bounds import (
    clopper_pearson,
    dkw_detectable_discrepancy,
    dkw_epsilon,
    dkw_min_samples,
    tv_certificate_min_samples,
    weissman_l1_epsilon,
)
from .certificate import Certificate
from .certify import assert_tv_below, tv_ucb_from_counts, tv_ucb_from_coupling
from .continuous import assert_ks, ks_distance, race_winner_checks, randomized_pit
from .gof import (
    CellMap,
    assert_gof,
    assert_zero_mass,
    binomial_two_sided_pvalues,
    chisquare_gof,
    exact_cellwise_binomial,
    gof_design,
    gof_policy,
    mc_pvalue,
    pool_by_expected,
    run_gof,
)
from .grid import (
    accept_reject_conditional_law,
    assert_accept_reject_grid,
    assert_implied_pmf,
    assert_inverse_cdf_grid,
    implied_pmf_by_bisection,
    stratified_uniforms,
)
from .meta import bonferroni, holm, pvalues_uniform
from .power import chi2_detectable_tv, chi2_min_samples, chi2_noncentrality, chi2_power, chi2_threshold
from .seeding import current_test_seed, repro_line, seed_stream, test_seed

__all__ = [
    "accept_reject_conditional_law",
    "assert_accept_reject_grid",
    "assert_implied_pmf",
    "assert_inverse_cdf_grid",
    "assert_ks",
    "bonferroni",
    "holm",
    "implied_pmf_by_bisection",
    "ks_distance",
    "pvalues_uniform",
    "race_winner_checks",
    "randomized_pit",
    "run_gof",
    "stratified_uniforms",
    "CellMap",
    "Certificate",
    "assert_gof",
    "assert_tv_below",
    "assert_zero_mass",
    "binomial_two_sided_pvalues",
    "chi2_detectable_tv",
    "chi2_min_samples",
    "chi2_noncentrality",
    "chi2_power",
    "chi2_threshold",
    "chisquare_gof",
    "clopper_pearson",
    "counts_from_tokens",
    "current_test_seed",
    "dkw_detectable_discrepancy",
    "dkw_epsilon",
    "dkw_min_samples",
    "exact_cellwise_binomial",
    "gof_design",
    "gof_policy",
    "mc_pvalue",
    "pool_by_expected",
    "repro_line",
    "seed_stream",
    "test_seed",
    "tv_certificate_min_samples",
    "tv_ucb_from_counts",
    "tv_ucb_from_coupling",
    "weissman_l1_epsilon",
]
