"""Rejection sampling from logits (classic and one-hot): ours vs softmax-then-sample in plain PyTorch,
at the issue-6 target shapes in fp32 and bf16.

Each test times CUDA-graph replays inside benchmark.pedantic (benchmarks/suite.py); GPU microseconds per
launch, the do_bench median, the floor and the floor fraction are in extra_info. Skipped without a GPU.
"""

import pytest

from benchmarks.suite import params, run_benchmark

pytestmark = pytest.mark.gpu

KERNELS = ("logits", "logits_onehot")


@pytest.mark.parametrize(("case", "provider"), params(KERNELS))
def test_logits(benchmark, bench_session, case, provider):
    run_benchmark(benchmark, bench_session, case, provider)
