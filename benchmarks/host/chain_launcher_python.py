"""The chain launcher's own Python per call, kernel launch stubbed out (no GPU needed), for two
versions of specsample/kernels/chain.py in one process (timings on a shared 2-core box jump between
processes, so only same-process ratios mean anything).

    TRITON_INTERPRET=1 python benchmarks/host/chain_launcher_python.py OLD.py
        # OLD.py e.g. from: git show REV:specsample/kernels/chain.py > /tmp/chain_old.py

Prints min and median microseconds per call at (B, K, V) = (1, 4, 32000) over 20 alternating rounds
of 500 calls. Triton's own launch cost and the GPU are not in these numbers.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import specsample.kernels.chain as new  # noqa: E402


class _Stub:
    def __getitem__(self, grid):
        return lambda *args, **kwargs: None


def main() -> int:
    spec = importlib.util.spec_from_file_location("chain_old", sys.argv[1])
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    new._chain_kernel = old._chain_kernel = _Stub()
    b, k, v = 1, 4, 32000
    p, q = torch.rand(b, k + 1, v), torch.rand(b, k, v)
    x, u = torch.randint(0, v, (b, k)), torch.rand(b, k + 1)
    times: dict = {"old": [], "new": []}
    for module in (old, new):
        for _ in range(300):
            module.chain_rejection_sample(p, x, q, uniforms=u)
    for _ in range(20):
        for name, module in (("old", old), ("new", new)):
            t0 = time.perf_counter()
            for _ in range(500):
                module.chain_rejection_sample(p, x, q, uniforms=u)
            times[name].append((time.perf_counter() - t0) / 500 * 1e6)
    for name, values in times.items():
        values.sort()
        print(f"{name}: min {values[0]:.1f} us, median {values[len(values) // 2]:.1f} us per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
