"""The CPU memcheck (reliability_memcheck.py) can fail: it reports an unmasked load a few elements
past the end of a tensor, a store past the end, a read of a view's neighbour inside the same buffer,
and stays silent on masked-off lanes whose addresses are far out of bounds (the interpreter never
dereferences them)."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from reliability_memcheck import memcheck, tensor_extent

from specsample.kernels._launch import interpreting

pytestmark = pytest.mark.skipif(not interpreting(), reason="audits the Triton CPU interpreter")


@triton.jit
def _shifted_copy_kernel(
    x_ptr,  # [4] fp32
    out_ptr,  # [4] fp32
    shift,
    MASKED: tl.constexpr,
    STORE_SHIFT: tl.constexpr,
):
    # out[i + STORE_SHIFT] = x[i + shift], masked to i + shift < 4 when MASKED
    i = tl.arange(0, 4).to(tl.int64)
    src = i + shift
    if MASKED:
        v = tl.load(x_ptr + src, mask=(src >= 0) & (src < 4), other=0.0)
    else:
        v = tl.load(x_ptr + src)
    tl.store(out_ptr + i + STORE_SHIFT, v)


def _run(x, shift, masked):
    out = torch.zeros(4)
    with memcheck() as report:
        _shifted_copy_kernel[(1,)](x, out, shift, MASKED=masked, STORE_SHIFT=0)
    return report


def test_in_bounds_copy_is_clean():
    report = _run(torch.arange(4.0), 0, masked=False)
    assert report.launches == 1 and report.accesses == 2 and report.lanes == 8
    report.assert_clean()


def test_unmasked_read_past_the_end_is_reported():
    report = _run(torch.arange(4.0), 2, masked=False)
    assert len(report.violations) == 1
    v = report.violations[0]
    assert v.op == "load" and v.lanes == 2 and v.kernel == "_shifted_copy_kernel"
    with pytest.raises(AssertionError, match="1 out-of-bounds accesses"):
        report.assert_clean()


def test_read_of_a_views_neighbour_in_the_same_buffer_is_reported():
    """x is elements 4..7 of a 12-element buffer: reading element 8 stays inside the allocation
    (no segfault, no garbage) but outside x, and is reported."""
    buffer = torch.arange(12.0)
    report = _run(buffer[4:8], 1, masked=False)
    assert [(v.op, v.lanes) for v in report.violations] == [("load", 1)]


def test_store_past_the_end_is_reported():
    out = torch.zeros(8)
    with memcheck() as report:
        _shifted_copy_kernel[(1,)](torch.arange(4.0), out[:4], 0, MASKED=False, STORE_SHIFT=3)
    assert [(v.op, v.lanes) for v in report.violations] == [("store", 3)]
    assert out[3:7].tolist() == [0.0, 1.0, 2.0, 3.0]  # the interpreter did write past the view


@pytest.mark.parametrize("shift", [2, 1000, 2**40, -(2**40)])
def test_masked_off_far_addresses_are_not_accesses(shift):
    report = _run(torch.arange(4.0), shift, masked=True)
    report.assert_clean()


def test_extent_of_strided_and_broadcast_views():
    base = torch.zeros(6, 5)
    assert tensor_extent(base[1:3, ::2]) == (base.data_ptr() + 20, base.data_ptr() + 20 + (5 + 4 + 1) * 4)
    row = torch.zeros(5)
    assert tensor_extent(row.expand(3, 5)) == (row.data_ptr(), row.data_ptr() + 20)
    assert tensor_extent(torch.zeros(0, 5)) == (0, 0)
