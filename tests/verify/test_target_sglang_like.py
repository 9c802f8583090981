"""`--target` on an external sampler with SGLang's bugs (norm_sum == 0 -> V-1, reused acceptance
coin) fails and names the failed laws. Deterministic certificates (edge, grid, coupling): no alpha."""

from specsample.verify import runner
from specsample.verify.budgets import get_budget

TARGET = "specsample.verify.examples.sglang_like:chain_sample_sglang_like"


def test_sglang_like_target_fails_naming_the_laws():
    run = runner.verify(
        get_budget("ci"),
        target=TARGET,
        device="cpu",
        only=["edge", "dirichlet1_V8_K2/grid", "p_equals_q_V12_K2/coupling"],
    )
    failed = {r.law: r for r in run.failed}
    assert {"edge", "grid", "coupling"} <= set(failed), sorted(failed)
    # the V-1 fallback is named by the edge certificate, the reused coin by the grid certificate
    assert "norm_sum_zero" in failed["edge"].detail
    assert "emitted tokens [11]" in failed["edge"].detail  # V - 1 = 11 has p = 0 in that check
    assert "position 0" in failed["grid"].detail
