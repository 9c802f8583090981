"""Asking for Triton's CPU interpreter from a command line (`specsample verify --device cpu`, the
benchmark pipeline's dry run) without changing kernels a process already compiles.

`triton.jit` reads TRITON_INTERPRET as each kernel function is decorated. Set before triton's first
import, it makes every kernel of the process interpreted; set later, only the kernel modules loaded
afterwards, next to compiled ones (H200 run 142: a verify `main()` inside a GPU test session turned
the mutants' module copies interpreted, and those failed on Triton 3.6). Imports neither torch nor
triton.
"""

from __future__ import annotations

import os
import sys


def request_interpreter() -> None:
    """Set TRITON_INTERPRET=1 (unless the caller set it) if and only if triton is not imported yet."""
    if "triton" not in sys.modules:
        os.environ.setdefault("TRITON_INTERPRET", "1")
