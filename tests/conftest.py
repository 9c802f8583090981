"""Test configuration: kernels run under the Triton interpreter when there is no GPU.

TRITON_INTERPRET must be set before triton is first imported, so it is decided here, before any
specsample kernel module is imported by a test.
"""

import importlib.metadata
import os
import shutil
import subprocess


def _has_cuda() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


HAS_CUDA = _has_cuda()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# The verify plugin's fixtures (specsample_certify, specsample_budget) come from the package's pytest11
# entry point once it is installed (`make setup`). From a plain checkout on PYTHONPATH, or with plugin
# autoloading off, load the plugin here (both at once would register it twice).
_PLUGIN = "specsample.verify.pytest_plugin"
if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") or not any(
    ep.value == _PLUGIN for ep in importlib.metadata.entry_points(group="pytest11")
):
    pytest_plugins = [_PLUGIN]

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    max_examples=20,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.register_profile("verify", deadline=None, database=None, print_blob=True, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def device() -> str:
    """'cuda' on a GPU machine, else 'cpu' (kernels then run under the interpreter)."""
    return "cuda" if HAS_CUDA else "cpu"


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; CPU CI runs kernels under TRITON_INTERPRET=1")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
