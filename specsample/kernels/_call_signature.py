"""The metadata of a launcher's tensor arguments as one hashable tuple: the key of its repeat-call memo.

A launcher checks its arguments and plans its launch from their metadata alone: dtype, shape,
strides, device, and whether the data pointer is 16-byte aligned (which Triton specialises on). It
never reads their values on the host. So a call whose tensors have the metadata of an earlier call
that launched passes the same checks and gets the same plan and the same compiled kernel; only the
data pointers differ. The launchers keep a memo from this signature to a prepared launch
(`_compiled_launch.bind_keyed`) and skip the checks and the planning on a hit: on the H200 host
that saved 19-57% of an eager call's host time (runs 156-157), and `triton.testing.do_bench`
counts the host's time whenever it outlasts the L2 flush (benchmarks/NOTES.md, session 25).

What is not in the signature must not change a launcher's checks or plan: its non-tensor arguments
(the launcher adds those it reads to its memo key) and process-wide settings (the interpreter, the
launch path: read once or checked on every launch). The current CUDA device is in it, since the
prepared launch runs on the device that was current when it was prepared.
"""

from __future__ import annotations

import torch

from specsample.kernels._launch import interpreting


def tensor_signature(*tensors) -> tuple | None:
    """((per argument: None when absent, else (class, dtype, shape, strides, device, data pointer
    16-byte aligned)), current CUDA device or -1 under the interpreter). The device, not its index:
    CPU and meta tensors share the index -1 (test_fuzz_invalid found a meta tensor served by a CPU
    call's entry under the interpreter). None when an argument lacks a strided tensor's metadata
    (sparse and other layouts have no strides); the launcher's full path then reports it. The class
    is part of the key, so a tensor subclass never hits an entry a plain tensor made (and an object
    that only looks like a tensor never launches, so nothing is remembered under its signature)."""
    try:
        meta = tuple([None if t is None else (t.__class__, t.dtype, t.shape, t.stride(), t.device,
                                              t.data_ptr() & 15 == 0) for t in tensors])  # fmt: skip
    except (AttributeError, TypeError, RuntimeError, NotImplementedError):  # not a strided tensor
        return None
    return meta, -1 if interpreting() else torch.cuda.current_device()
