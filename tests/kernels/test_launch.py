"""specsample.kernels._launch: which devices get programmatic dependent launch."""

from __future__ import annotations

import pytest
import torch

from specsample.kernels import _launch


@pytest.fixture
def gpu(monkeypatch):
    """A compiled-kernel (not interpreted) CUDA build whose device reports a given capability."""
    _launch.supports_pdl.cache_clear()
    monkeypatch.setattr(_launch, "interpreting", lambda: False)
    monkeypatch.setattr(torch.version, "hip", None)

    def with_capability(capability):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        _launch.supports_pdl.cache_clear()

    yield with_capability
    _launch.supports_pdl.cache_clear()


@pytest.mark.parametrize(
    "capability,expected", [((8, 0), False), ((8, 9), False), ((9, 0), True), ((10, 0), True)]
)
def test_pdl_needs_hopper_or_later(gpu, capability, expected):
    """griddepcontrol assembles only for sm_90+: an A100 / L4 must get plain launches."""
    gpu(capability)
    assert _launch.supports_pdl(torch.device("cuda", 0)) is expected


def test_no_pdl_under_the_interpreter_on_cpu_or_rocm(gpu, monkeypatch):
    gpu((9, 0))
    assert not _launch.supports_pdl(torch.device("cpu"))
    monkeypatch.setattr(_launch, "interpreting", lambda: True)
    assert not _launch.supports_pdl(torch.device("cuda", 0))
    gpu((9, 0))  # clears the cache
    monkeypatch.setattr(_launch, "interpreting", lambda: False)
    monkeypatch.setattr(torch.version, "hip", "6.0")
    assert not _launch.supports_pdl(torch.device("cuda", 0))


def test_pdl_off_by_environment(gpu, monkeypatch):
    """SPECSAMPLE_PDL=0 turns it off on a Hopper GPU."""
    gpu((9, 0))
    monkeypatch.setattr(_launch, "_PDL", "0")
    assert not _launch.supports_pdl(torch.device("cuda", 0))
