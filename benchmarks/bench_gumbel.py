"""Gumbel-max sampling (fast_sample, sample_from_logits): ours vs torch.multinomial, the torch-ops Gumbel
draw, SGLang and FlashInfer (when importable), at the issue-5 target shapes in fp32 and bf16.

Each test times CUDA-graph replays inside benchmark.pedantic (benchmarks/suite.py); GPU microseconds per
launch, the do_bench median, the floor and the floor fraction are in extra_info. Skipped without a GPU.
"""

import pytest

from benchmarks.suite import params, run_benchmark

pytestmark = pytest.mark.gpu

KERNELS = ("fast_sample", "sample_from_logits")


@pytest.mark.parametrize(("case", "provider"), params(KERNELS))
def test_gumbel(benchmark, bench_session, case, provider):
    run_benchmark(benchmark, bench_session, case, provider)
