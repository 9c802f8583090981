"""`load_once`: the load for probability and logit rows that a kernel streams exactly once.

Keeping such lines in L2 only evicts data someone else reuses: in an engine, the logits the LM-head
GEMM just wrote; under `triton.testing.do_bench`, the dirty lines of its 256 MB L2 flush, whose
write-back then competes with our reads. `evict_first` marks our lines as the first to go (PTX
`L1::evict_first` plus an `L2::evict_first` cache policy; `LDG.E.EF` in SASS). Measured on the H200
before it became the default (run 33; `.cs` loads do not compile on Triton 3.6): benchmarks/NOTES.md,
"Streaming loads, do_bench's dirty L2, and the grouped race". Triton 3.6 (the H200's) drops the L2
policy from the shared-memory copies of a software-pipelined loop (`tl.range(num_stages > 1)`,
`cp.async` without `L2::cache_hint`); the chain's launcher puts it back on the PTX
(kernels/_copy_policy.py, run 170), where plain loads in place of the copies had measured slower on
clean or rotated inputs (benchmarks/NOTES.md, session 14).
"""

import triton
import triton.language as tl


@triton.jit
def load_once(pointers, mask, other):
    """tl.load(pointers, mask, other), evicted first from L1 and L2."""
    return tl.load(pointers, mask=mask, other=other, eviction_policy="evict_first")
