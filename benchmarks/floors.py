"""Benchmark cases and their memory floors (DESIGN.md §5).

Every specsample kernel is memory-bound, so its time floor is the bytes it must read from device
memory divided by the device copy bandwidth measured in the same run (bytes read + written per
second of a large device-to-device copy). Must-read bytes per kernel, with s = element size:

    chain               2 * B * V * s          one residual (or bonus) row of p and of q per request;
                                               the K accept tests are gathers
    chain_onehot        B * V * s              q is a point mass: only the row of p
    fast_sample         B * V * s              one read of each probability row
    sample_from_logits  B * V * s              one read of each logit row
    logits              B*(K+1)*V*s + B*K*V*s  every target row is normalised, plus every draft row
    logits_onehot       B * (K+1) * V * s      no draft logits
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}

KERNELS = ("chain", "chain_onehot", "fast_sample", "sample_from_logits", "logits", "logits_onehot")

# The kernels whose shapes carry a draft length K; the others take K = 0.
KERNELS_WITH_K = ("chain", "chain_onehot", "logits", "logits_onehot")


@dataclass(frozen=True, order=True)
class Case:
    """One benchmark shape: kernel family, batch B, drafts per request K, vocabulary V, input dtype."""

    kernel: str
    B: int
    K: int
    V: int
    dtype: str

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {tuple(DTYPE_BYTES)}, got {self.dtype!r}")
        if self.B < 1 or self.V < 1:
            raise ValueError(f"B and V must be >= 1, got B={self.B}, V={self.V}")
        if self.kernel in KERNELS_WITH_K and self.K < 1:
            raise ValueError(f"{self.kernel} needs K >= 1, got K={self.K}")
        if self.kernel not in KERNELS_WITH_K and self.K != 0:
            raise ValueError(f"{self.kernel} has no draft length: K must be 0, got K={self.K}")

    @property
    def label(self) -> str:
        """Short id used in test ids and tables, e.g. 'chain-B64-K4-V151936-float32'."""
        return f"{self.kernel}-B{self.B}-K{self.K}-V{self.V}-{self.dtype}"


def must_read_bytes(case: Case) -> int:
    """Bytes the kernel must read from device memory at least (module docstring)."""
    s = DTYPE_BYTES[case.dtype]
    B, K, V = case.B, case.K, case.V
    if case.kernel == "chain":
        return 2 * B * V * s
    if case.kernel in ("chain_onehot", "fast_sample", "sample_from_logits"):
        return B * V * s
    if case.kernel == "logits":
        return B * (K + 1) * V * s + B * K * V * s
    if case.kernel == "logits_onehot":
        return B * (K + 1) * V * s
    raise AssertionError(f"unreachable: kernel {case.kernel!r} was validated by Case")


def floor_us(case: Case, copy_bandwidth_bytes_per_s: float) -> float:
    """Time floor in microseconds: must-read bytes over the measured device copy bandwidth."""
    if not copy_bandwidth_bytes_per_s > 0:
        raise ValueError(f"copy bandwidth must be > 0 bytes/s, got {copy_bandwidth_bytes_per_s!r}")
    return must_read_bytes(case) / copy_bandwidth_bytes_per_s * 1e6
