"""Launcher helpers shared by every kernel family: device checks and interpreter-aware tiling."""

from __future__ import annotations

import functools
import os

import torch


@functools.cache
def interpreting() -> bool:
    """True when Triton runs kernels with its CPU interpreter (TRITON_INTERPRET=1). Read once, as our
    kernel modules are decorated: `triton.jit` reads the variable at decoration, so setting it later
    changes only modules decorated afterwards (nothing in specsample sets it once triton is imported)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


if interpreting():
    from specsample.kernels._interpreter_compat import install as _install_interpreter_compat

    _install_interpreter_compat()  # Triton <= 3.6's interpreter on NumPy >= 2.4 (see the module)


# Streaming multiprocessors of the H200, the GPU every default tiling was measured on; the launchers
# size their vocabulary splits (programs per SM) with it
H200_SMS = 132


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for host integers (plain Python: triton.cdiv is a constexpr-function wrapper in
    triton >= 3.7 and costs microseconds per call on the launch path)."""
    return -(-a // b)


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1), for host integers."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def int32_offsets_fit(columns: int, *strides: int) -> bool:
    """Whether every element offset col * stride, col < `columns`, fits in int32 (then a kernel may
    add 32-bit column offsets to a 64-bit row pointer)."""
    return columns * max(1, *(abs(s) for s in strides)) < 2**31


_PDL = os.environ.get("SPECSAMPLE_PDL", "1")
if _PDL not in ("0", "1"):
    raise ValueError(f"SPECSAMPLE_PDL must be '0' or '1', got {_PDL!r}")


@functools.cache
def supports_pdl(device: torch.device) -> bool:
    """Whether kernels on `device` may use programmatic dependent launch (griddepcontrol and the
    launch attribute): NVIDIA GPUs of compute capability 9.0 (Hopper) and later, never under the
    interpreter (on older GPUs the PTX would not assemble), and not with SPECSAMPLE_PDL=0 (read at
    import: plain stream-ordered launches, e.g. for a profiler or sanitizer that wants them)."""
    if _PDL == "0" or interpreting() or device.type != "cuda" or torch.version.hip is not None:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


def check_device(name: str, t: torch.Tensor) -> None:
    """Raise ValueError when `t` cannot be launched on: CUDA always, CPU only under the interpreter."""
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu" and interpreting():
        return
    raise ValueError(
        f"{name} is on device {t.device}; specsample kernels need CUDA tensors "
        "(or CPU tensors with TRITON_INTERPRET=1 set before triton is imported)"
    )


def other_cuda_device(t) -> torch.device | None:
    """`t`'s device when it is a CUDA device other than the current one, else None. Triton launches
    on the current device and its current stream; torch's own ops run on their inputs' device. So a
    public launcher given tensors on another GPU calls itself again under torch.cuda.device(that
    device): its launches, scratch and stream are then that device's, as a torch op's would be."""
    if isinstance(t, torch.Tensor) and t.is_cuda and t.device.index != torch.cuda.current_device():
        return t.device
    return None


def rows_per_program(num_rows: int, gpu_rows: int = 1, interp_rows: int = 256) -> int:
    """Rows each program handles: 1 on the GPU (fills the SMs), hundreds under the interpreter,
    whose cost is per program instance and per op, not per element. Always a power of two."""
    want = gpu_rows if not interpreting() else min(interp_rows, max(1, num_rows))
    return 1 << (max(1, want) - 1).bit_length()
