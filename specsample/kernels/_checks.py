"""Host-side argument checks shared by every launcher and adapter: each failure names the argument,
what was expected and what was given (`name: expected ..., got ...`)."""

from __future__ import annotations

import torch

from specsample.kernels._launch import check_device

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ID_DTYPES = (torch.int32, torch.int64)


def fail(kind: type[Exception], name: str, expected: str, actual) -> None:
    """Raise `kind` with the project's message format."""
    raise kind(f"{name}: expected {expected}, got {actual}")


def check_tensor(name: str, t, shape, dtypes, device: torch.device | None = None,
                 reference: str = "target_probs") -> None:  # fmt: skip
    """TypeError unless `t` is a tensor of one of `dtypes`; ValueError unless its shape is `shape`
    and (when `device` is given) it lives on `device`, the device of the `reference` argument."""
    if not isinstance(t, torch.Tensor):
        fail(TypeError, name, "a torch.Tensor", type(t).__name__)
    if t.dtype not in dtypes:
        fail(TypeError, name, f"dtype in {[str(d) for d in dtypes]}", t.dtype)
    if tuple(t.shape) != tuple(shape):
        fail(ValueError, name, f"shape {tuple(shape)}", tuple(t.shape))
    if device is not None and t.device != device:
        fail(ValueError, name, f"device {device} (that of {reference})", t.device)


def check_target_rows(name: str, t) -> tuple[int, int, int]:
    """The [B, K+1, V] target input of the rejection samplers: a float tensor (FLOAT_DTYPES) with
    K+1 >= 1 and 1 <= V < 2^31 - 1 (token ids are int32), on a device the kernels can run on.
    Returns (B, K+1, V)."""
    if not isinstance(t, torch.Tensor):
        fail(TypeError, name, "a torch.Tensor", type(t).__name__)
    if t.dtype not in FLOAT_DTYPES:
        fail(TypeError, name, f"dtype in {[str(d) for d in FLOAT_DTYPES]}", t.dtype)
    if t.dim() != 3 or t.shape[1] < 1 or t.shape[2] < 1:
        fail(ValueError, name, "shape [B, K+1, V] with K+1 >= 1 and V >= 1", tuple(t.shape))
    check_device(name, t)
    batch, k_plus_1, vocab = t.shape
    if vocab >= 2**31 - 1:
        fail(ValueError, name, "V < 2^31 - 1 (token ids are int32)", vocab)
    return batch, k_plus_1, vocab
