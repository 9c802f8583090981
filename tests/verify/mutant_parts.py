"""The mutant catalogue in parts, one test module each, so that `ci/gpu/pytest_shards.py` (one shard per
file) runs the parts side by side: on the H200 the whole catalogue in one module's fixture took 421 s of the
suite's 452 s (run 215), each kernel mutant compiling its own patched kernels; the parts took 241 s side by
side in a later run (217; two runs, not a same-run ratio).

Parts: the reference-copy mutants (with the unmutated references' baseline, tests/verify/test_mutants.py),
and the kernel mutants of each family, chain, Gumbel and logits (test_mutants_kernel_<family>.py). H200 run
217, four processes: chain part 238 s, logits 175, reference 103, Gumbel 15.
`test_mutants.py` checks that the parts cover the catalogue, each mutant in exactly one part.
"""

from specsample.verify import mutants as M
from specsample.verify.budgets import get_budget

# the two cases kernel mutants run on in CI (interpreter time): classic drafts and the fallback path
KERNEL_CASES = ("dirichlet1_V8_K2", "p_equals_q_V12_K2")


def part_of(mutant) -> str:
    """The part a mutant belongs to: `reference`, or `kernel_<family>` for a kernel mutant."""
    return f"kernel_{mutant.family}" if mutant.applied_to.startswith("kernel") else "reference"


PARTS = ("reference", "kernel_chain", "kernel_gumbel", "kernel_logits")


def run_part(part: str):
    """(results, baseline records) of `run_mutants` at budget `ci` over one part, each mutant stopping
    at its first failed certificate; the baseline only with the reference part."""
    assert part in PARTS, part
    return M.run_mutants(
        get_budget("ci"),
        stop_at_first_kill=True,
        kernel_case_filter=lambda case: case.name in KERNEL_CASES,
        select=lambda m: part_of(m) == part,
        baseline=part == "reference",
    )


def assert_every_mutant_killed(results, part: str) -> None:
    expected = {m.name for m in M.catalogue() if part_of(m) == part}
    assert {m.name for m in results} == expected, expected ^ {m.name for m in results}
    survivors = [f"{m.name} ({m.applied_to}): {m.error}" for m in results if not m.killed]
    assert not survivors, survivors
    assert all(m.killed_by for m in results)


def assert_real_kernels_unharmed(device: str) -> None:
    """The real chain and fast_sample kernels still equal their float64 references token for token after
    a part's kernel mutants ran (among them `kernel_arrival_counter_kept` and `kernel_gumbel_counter_kept`,
    kernels that leave the persistent arrival counters non-zero on purpose): the harness discards the
    counters around every kernel mutant."""
    import numpy as np
    import torch

    from specsample import chain_rejection_sample, fast_sample
    from specsample.reference.chain import chain_rejection_reference
    from specsample.reference.gumbel import fast_sample_reference, race_margin
    from specsample.reference.philox import gumbel_exponentials
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
    seeds, offsets = rng.integers(0, 1 << 62, 64), rng.integers(0, 1 << 40, 64)
    _, ids = fast_sample(on(p[:, 0]), seeds=on(seeds), offsets=on(offsets))
    _, ref_ids = fast_sample_reference(p[:, 0], seeds, offsets)
    clear = race_margin(p[:, 0], gumbel_exponentials(seeds, offsets, 9)) > 1e-5  # not a float32 near-tie
    assert clear.sum() > 32 and np.array_equal(ids.cpu().numpy()[clear], ref_ids[clear])


def part_module(part: str):
    """(mutant_run fixture, test_every_mutant_is_killed, test_real_kernels_unharmed_after_the_mutants) of a
    kernel part's test module, which binds them to those names so that pytest collects them."""
    import pytest

    @pytest.fixture(scope="module")
    def mutant_run():
        return run_part(part)

    def test_every_mutant_is_killed(mutant_run):
        assert_every_mutant_killed(mutant_run[0], part)

    def test_real_kernels_unharmed_after_the_mutants(mutant_run, device):
        assert_real_kernels_unharmed(device)

    return mutant_run, test_every_mutant_is_killed, test_real_kernels_unharmed_after_the_mutants
