"""benchmarks/diagnostics/lazy_stats.py: the cases it times (`--case`) and its all-accepted inputs. The
timing itself needs the GPU."""

from __future__ import annotations

import pytest
import torch

from benchmarks.diagnostics.ab_device_time import parse_case
from benchmarks.diagnostics.lazy_stats import CASES, KERNELS, all_accept


def test_case_option_parses_like_the_default_cases():
    """'KERNEL:B:K:V:DTYPE' (the `--case` of every diagnostic) gives a CASES entry; every default case
    round-trips through it."""
    assert parse_case("logits_onehot:16:4:128256:bfloat16", KERNELS) == (
        "logits_onehot",
        16,
        4,
        128256,
        "bfloat16",
    )
    for case in CASES:
        assert parse_case(":".join(map(str, case)), KERNELS) == case


@pytest.mark.parametrize(
    "text",
    ["chain:16:4:128256:float32", "logits:16:4:128256:int8", "logits:16:4", "logits:16:4:1e5:float32",
     "logits,16,4,128256,float32"],
)  # fmt: skip
def test_case_option_rejects_what_it_cannot_time(text):
    """A case lazy_stats cannot time stops the script with the option named."""
    with pytest.raises(SystemExit, match="--case"):
        parse_case(text, KERNELS)


def test_case_option_takes_any_kernel_where_none_are_named():
    """ab_device_time's and logits_stage_time's cases may name any kernel; the dtype is still checked."""
    assert parse_case("chain:1:4:32000:float32") == ("chain", 1, 4, 32000, "float32")
    with pytest.raises(SystemExit, match="--case"):
        parse_case("chain:1:4:32000:fp32")


def test_all_accept_makes_every_draft_certain():
    """Classic: draft logits equal to the target's (p = q, every ratio 1); one-hot: the drafted token's
    target logit raised by 60, so that log p(x) > -1e-20 at these logits."""
    gen = torch.Generator().manual_seed(0)
    b, k, v = 3, 2, 50
    target = torch.randn(b, k + 1, v, generator=gen)
    ids = torch.randint(0, v, (b, k), generator=gen)
    draft = torch.zeros(b, k, v)
    classic = all_accept({"target_logits": target, "draft_token_ids": ids, "draft_logits": draft})
    assert torch.equal(classic["draft_logits"], target[:, :k])
    onehot = all_accept({"target_logits": target, "draft_token_ids": ids})
    log_p = torch.log_softmax(onehot["target_logits"][:, :k].double(), dim=-1).gather(2, ids[..., None])
    assert bool((log_p > -1e-20).all()) and torch.equal(onehot["target_logits"][:, k], target[:, k])
