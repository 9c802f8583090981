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


class _ClaimsCuda(torch.Tensor):
    """A CPU tensor that reports itself on cuda:`index` (no GPU needed to test the device choice)."""

    index = 0

    @property
    def is_cuda(self):
        return True

    @property
    def device(self):
        return torch.device("cuda", self.index)


@pytest.mark.parametrize("current,index,expected", [(0, 0, None), (0, 1, 1), (1, 0, 0), (3, 3, None)])
def test_other_cuda_device_names_the_inputs_device_when_it_is_not_current(
    monkeypatch, current, index, expected
):
    """The public launchers re-enter themselves under torch.cuda.device(d) exactly when their first
    tensor lives on a CUDA device d other than the current one (the 2-GPU test in
    test_input_device.py runs them there)."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    t = torch.zeros(2).as_subclass(_ClaimsCuda)
    t.index = index
    got = _launch.other_cuda_device(t)
    assert got == (None if expected is None else torch.device("cuda", expected))
    assert _launch.other_cuda_device(torch.zeros(2)) is None  # a CPU tensor (the interpreter's)
    assert _launch.other_cuda_device([1.0]) is None  # not a tensor: the checks reject it later
