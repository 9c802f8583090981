"""specsample.kernels._interpreter_compat: Triton <= 3.6's interpreter converts a one-element array to
a loop bound with int(array), which NumPy >= 2.4 refuses; our kernels loop over runtime bounds
(e.g. the logits statistics' chunks), so without the shim every such kernel fails under
TRITON_INTERPRET=1 there. Deterministic checks, no alpha."""

import numpy as np
import torch
import triton
import triton.language as tl

import specsample.kernels._launch  # noqa: F401  (installs the shim under the interpreter)
from specsample.kernels import _interpreter_compat


@triton.jit
def _runtime_bound_sum_kernel(out_ptr, n, STEP: tl.constexpr):  # out_ptr: [1] int32
    """sum of range(0, n, STEP), the loop bound a runtime argument."""
    acc = tl.zeros((), tl.int32)
    for i in range(0, n, STEP):
        acc += i
    tl.store(out_ptr, acc)


def test_a_kernel_loops_over_a_runtime_bound(device):
    """Fails under Triton 3.6's interpreter with NumPy 2.4 unless the shim is installed."""
    out = torch.zeros(1, dtype=torch.int32, device=device)
    _runtime_bound_sum_kernel[(1,)](out, 10, STEP=3)
    assert out.item() == sum(range(0, 10, 3))


class _Handle:
    def __init__(self, data):
        self.data = data


class _Scalar:
    def __init__(self, data):
        self.handle = _Handle(data)


def test_index_reads_one_element_arrays_of_any_rank():
    assert _interpreter_compat._index(_Scalar(np.array([7], np.int32))) == 7
    assert _interpreter_compat._index(_Scalar(np.array(-3, np.int64))) == -3
    assert _interpreter_compat._index(_Scalar(np.array([[5]], np.uint32))) == 5
