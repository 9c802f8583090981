"""The tester is tested: every planted bug in the mutant catalogue is killed at budget `ci` on CPU.

Reduced size (the CLI's `--mutants` runs the full catalogue with every certificate): each mutant stops
at its first failed certificate (`stop_at_first_kill`), reference mutants on the full `ci` case list,
kernel mutants (textual patches of the Triton kernels, run by the interpreter on the CPU) on two cases.
The unmutated baselines must pass the same certificates, so a kill is the planted bug's doing.
Statistical certificates involved run at alpha = 1e-6 each (eps = 0.04, beta = 1e-3 for the
references; eps = 0.06 for the interpreted kernel); every kill recorded below is either deterministic
(edge, coupling, grid, batch invariance) or far beyond the detectable TV.

This module runs the reference-copy mutants and the baselines; the kernel mutants run in three modules of
their own (tests/verify/mutant_parts.py says why), and the test below checks that the four parts cover
the catalogue.
"""

import pytest

from specsample.verify import mutants as M
from tests.verify.mutant_parts import PARTS, assert_every_mutant_killed, part_of, run_part


@pytest.fixture(scope="module")
def mutant_run():
    return run_part("reference")


def test_catalogue_has_the_required_bugs():
    names = {m.name for m in M.catalogue()}
    required = {
        "residual_from_p",
        "swapped_residual",
        "unclamped_residual",
        "inverse_cdf_off_by_one",
        "reused_coin",
        "gumbel_p_times_E",
        "norm_sum_zero_last_token",
        "norm_sum_zero_token0",
        "le_accepts_zero_prob",
        "tile_tail_unmasked",
        "philox_offset_ignored",
        "offset_int32_overflow",
        "invalid_draft_accepted",
        "greedy_at_T1",
        "nan_logits_out_of_vocab",
        "kernel_logits_nan_not_cleaned",
        "kernel_logits_lazy_accepted_as_rejected",
        "bonus_wrong_position",
        "gumbel_tile_tail",
    }
    assert required <= names, required - names
    assert len(names) >= 15
    assert any(m.applied_to.startswith("kernel") for m in M.catalogue())


def test_baselines_pass(mutant_run):
    _, baseline = mutant_run
    bad = [f"{r.sampler}/{r.case}/{r.law}: {r.detail[:200]}" for r in baseline if not r.passed]
    assert not bad, bad


def test_every_reference_mutant_is_killed(mutant_run):
    assert_every_mutant_killed(mutant_run[0], "reference")


def test_the_parts_cover_the_catalogue():
    """Every mutant lies in exactly one of the four parts (part_of is a function), every part holds
    some, and the kernel parts hold every kernel mutant: none is left unrun by the split."""
    catalogue = M.catalogue()
    parts = {m.name: part_of(m) for m in catalogue}
    assert len(parts) == len(catalogue)
    assert set(parts.values()) == set(PARTS)
    assert all((parts[m.name] != "reference") == m.applied_to.startswith("kernel") for m in catalogue)


def test_patch_must_match_exactly_once():
    with pytest.raises(ValueError, match="occurs 0 times"):
        M.patched_module("specsample.verify.examples.sglang_like", [(r"this text is not in the module", "x")])
    with pytest.raises(ValueError, match=r"occurs ([2-9]|\d\d+) times"):
        M.patched_module("specsample.verify.examples.sglang_like", [(r"np\.", "numpy.")])
