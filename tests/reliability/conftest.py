"""tests/reliability runs on CPU under the Triton interpreter: its memcheck audits the interpreter's
loads and stores, and its inputs are CPU tensors. On a GPU machine (no TRITON_INTERPRET) only the
tests marked `gpu` run here; the device-side memcheck there is compute-sanitizer over
ci/gpu/fuzz_corpus.py (ci/gpu/sanitize.sh)."""

import pytest

from specsample.kernels._launch import interpreting


def pytest_collection_modifyitems(config, items):
    if interpreting():
        return
    skip = pytest.mark.skip(reason="CPU-interpreter suite; on the GPU run ci/gpu/sanitize.sh")
    for item in items:
        if "tests/reliability/" in item.nodeid and "gpu" not in item.keywords:
            item.add_marker(skip)
