"""The tester is tested: every planted bug in the mutant catalogue is killed at budget `ci` on CPU.

Reduced size (the CLI's `--mutants` runs the full catalogue with every certificate): each mutant stops
at its first failed certificate (`stop_at_first_kill`), reference mutants on the full `ci` case list,
kernel mutants (textual patches of the Triton chain kernel, run by the interpreter) on two cases.
The unmutated baselines must pass the same certificates, so a kill is the planted bug's doing.
Statistical certificates involved run at alpha = 1e-6 each (eps = 0.04, beta = 1e-3 for the
references; eps = 0.06 for the interpreted kernel); every kill recorded below is either deterministic
(edge, coupling, grid, batch invariance) or far beyond the detectable TV.
"""

import pytest

from specsample.verify import mutants as M
from specsample.verify.budgets import get_budget


@pytest.fixture(scope="module")
def mutant_run():
    two = lambda case: case.name in ("dirichlet1_V8_K2", "p_equals_q_V12_K2")  # noqa: E731
    return M.run_mutants(get_budget("ci"), stop_at_first_kill=True, kernel_case_filter=two)


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


def test_every_mutant_is_killed(mutant_run):
    results, _ = mutant_run
    survivors = [f"{m.name} ({m.applied_to}): {m.error}" for m in results if not m.killed]
    assert not survivors, survivors
    assert all(m.killed_by for m in results)


def test_patch_must_match_exactly_once():
    with pytest.raises(ValueError, match="occurs 0 times"):
        M.patched_module("specsample.verify.examples.sglang_like", [(r"this text is not in the module", "x")])
    with pytest.raises(ValueError, match=r"occurs ([2-9]|\d\d+) times"):
        M.patched_module("specsample.verify.examples.sglang_like", [(r"np\.", "numpy.")])


def test_kernel_mutants_leave_no_state_behind(mutant_run, device):
    """After the catalogue (which includes `kernel_arrival_counter_kept` and
    `kernel_gumbel_counter_kept`, kernels that leave the persistent arrival counters non-zero on
    purpose) the real chain and fast_sample kernels still equal their float64 references token for
    token: the harness discards the counters around every kernel mutant."""
    import numpy as np
    import torch

    from specsample import chain_rejection_sample
    from specsample.reference.chain import chain_rejection_reference
    from specsample.stats import current_test_seed

    rng = np.random.default_rng(current_test_seed())
    p = rng.dirichlet(np.ones(9), size=(64, 3)).astype(np.float32)
    q = rng.dirichlet(np.ones(9), size=(64, 2)).astype(np.float32)
    x = rng.integers(0, 9, size=(64, 2))
    u = rng.random((64, 3)).astype(np.float32)
    on = lambda a: torch.from_numpy(a).to(device)  # noqa: E731
    got = chain_rejection_sample(on(p), on(x), on(q), uniforms=on(u))
    ref = chain_rejection_reference(p, x, q, uniforms=u)
    assert np.array_equal(got.tokens.cpu().numpy()[~ref.ambiguous], ref.tokens[~ref.ambiguous])
    assert np.array_equal(got.num_accepted.cpu().numpy(), ref.num_accepted)
    from specsample import fast_sample
    from specsample.reference.gumbel import fast_sample_reference, race_margin
    from specsample.reference.philox import gumbel_exponentials

    seeds, offsets = rng.integers(0, 1 << 62, 64), rng.integers(0, 1 << 40, 64)
    _, ids = fast_sample(on(p[:, 0]), seeds=on(seeds), offsets=on(offsets))
    _, ref_ids = fast_sample_reference(p[:, 0], seeds, offsets)
    clear = race_margin(p[:, 0], gumbel_exponentials(seeds, offsets, 9)) > 1e-5  # not a float32 near-tie
    assert clear.sum() > 32 and np.array_equal(ids.cpu().numpy()[clear], ref_ids[clear])
    killed = {m.name: m.killed_by for m in mutant_run[0]}
    assert killed["kernel_inverse_cdf_left_end"] and killed["kernel_accept_left_end"], killed
    assert killed["kernel_gumbel_counter_kept"], killed
