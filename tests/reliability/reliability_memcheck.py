"""A CPU memcheck for Triton kernels run under the interpreter (TRITON_INTERPRET=1).

What the interpreter itself does with bad addresses (triton 3.9, checked): a masked `tl.load` /
`tl.store` never dereferences its masked-off lanes (the C++ `interpreter.load` reads only lanes whose
mask is true), but a masked-in lane with an out-of-bounds address is read or written *silently*:
a few elements past the end return whatever lies in the neighbouring heap memory, far addresses
crash the process with a segfault. So the interpreter does not report out-of-bounds accesses; this
module does.

`memcheck()` is a context manager. While it is active, every launch records the address extent of
each tensor argument (the bytes spanned by its elements, from its sizes and strides: a view into a
larger buffer does not own the rest of the buffer; an empty tensor owns nothing), and every load,
store and atomic of the kernel checks that all its masked-in lanes fall inside the extent of one
tensor argument of that launch. Violations are collected (kernel, operation, first bad address,
lane count), not raised, so a test can report all of them.

Guarantee: an access outside every argument's extent is reported. An access that stays inside
another argument's extent than the one it was meant for is not (the extents of one launch rarely
touch, and the guard-band tests catch reads of a neighbouring value).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
from triton.runtime import interpreter as _interp_module


@dataclass
class Violation:
    kernel: str
    op: str
    address: int
    lanes: int
    extents: list

    def __str__(self) -> str:
        def distance(extent):
            return min(abs(self.address - extent[1]), abs(self.address - extent[2]))

        near = min(self.extents, key=distance, default=None)
        where = f"nearest argument {near[0]!r} [{near[1]:#x}, {near[2]:#x})" if near else "no tensors"
        return (
            f"{self.kernel}: {self.op} of {self.lanes} lane(s) outside every argument, first at "
            f"{self.address:#x}; {where}"
        )


@dataclass
class MemcheckReport:
    launches: int = 0
    accesses: int = 0
    lanes: int = 0
    violations: list = field(default_factory=list)

    def assert_clean(self) -> None:
        """Raise AssertionError listing every out-of-bounds access seen."""
        if self.violations:
            lines = "\n  ".join(str(v) for v in self.violations[:20])
            raise AssertionError(f"{len(self.violations)} out-of-bounds accesses:\n  {lines}")


def tensor_extent(t: torch.Tensor) -> tuple[int, int]:
    """[first byte, one past the last byte) spanned by the elements of `t` ((0, 0) when empty)."""
    if t.numel() == 0:
        return (0, 0)
    lo = hi = t.data_ptr()
    for size, stride in zip(t.shape, t.stride(), strict=True):
        span = (size - 1) * stride * t.element_size()
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return (lo, hi + t.element_size())


class _State:
    report: MemcheckReport | None = None
    kernel: str = ""
    extents: list = []


class _AuditedInterpreter:
    """Stands in for triton's C++ `interpreter` module: checks addresses, then delegates."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _check(self, op: str, ptrs, mask, itemsize: int) -> None:
        report = _State.report
        if report is None:
            return
        addr = np.asarray(ptrs, dtype=np.uint64)
        if mask is not None:
            addr = addr[np.broadcast_to(np.asarray(mask, dtype=bool), addr.shape)]
        report.accesses += 1
        if addr.size == 0:
            return
        report.lanes += int(addr.size)
        lo, hi = int(addr.min()), int(addr.max()) + itemsize
        for _, start, end in _State.extents:
            if start <= lo and hi <= end:
                return
        inside = np.zeros(addr.shape, dtype=bool)
        for _, start, end in _State.extents:
            inside |= (addr >= np.uint64(start)) & (addr + np.uint64(itemsize) <= np.uint64(end))
        outside = addr[~inside]
        if outside.size:  # else: every lane is in some argument, the lanes just span two of them
            report.violations.append(
                Violation(_State.kernel, op, int(outside[0]), int(outside.size), list(_State.extents))
            )

    def load(self, ptrs, mask, other, dtype):
        self._check("load", ptrs, mask, np.dtype(dtype).itemsize)
        return self._real.load(ptrs, mask, other, dtype)

    def store(self, ptrs, value, mask):
        self._check("store", ptrs, mask, np.asarray(value).dtype.itemsize)
        return self._real.store(ptrs, value, mask)

    def atomic_rmw(self, op, ptrs, value, mask, sem):
        self._check("atomic_rmw", ptrs, mask, np.asarray(value).dtype.itemsize)
        return self._real.atomic_rmw(op, ptrs, value, mask, sem)

    def atomic_cas(self, ptrs, cmp, value, sem):
        self._check("atomic_cas", ptrs, None, np.asarray(value).dtype.itemsize)
        return self._real.atomic_cas(ptrs, cmp, value, sem)


@contextlib.contextmanager
def memcheck():
    """Audit every interpreted kernel launch inside the block; yields the MemcheckReport."""
    executor = _interp_module.GridExecutor
    original_init = executor._init_args_hst
    real = _interp_module._interpreter
    report = MemcheckReport()

    def recording_init(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        names = list(self.arg_names)
        extents = []
        for name, arg in [*zip(names, args_hst, strict=False), *kwargs_hst.items()]:
            if isinstance(arg, torch.Tensor):
                start, end = tensor_extent(arg)
                if end > start:
                    extents.append((name, start, end))
        _State.kernel = getattr(self.fn, "__name__", str(self.fn))
        _State.extents = extents
        report.launches += 1
        return args_hst, kwargs_hst

    executor._init_args_hst = recording_init
    _interp_module._interpreter = _AuditedInterpreter(real)
    _State.report = report
    try:
        yield report
    finally:
        executor._init_args_hst = original_init
        _interp_module._interpreter = real
        _State.report = None
        _State.extents = []
