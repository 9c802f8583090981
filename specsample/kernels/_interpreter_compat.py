"""Triton's interpreter on NumPy >= 2.4: loop bounds that are kernel arguments.

The interpreter holds every scalar as a one-element array, and Triton up to 3.6 turns one into a
Python int with `int(array)` (its `tensor.__index__`, used by `range(0, n, step)` over a runtime `n`).
NumPy 2.4 made that conversion of a 1-d array an error, so every kernel with such a loop fails under
`TRITON_INTERPRET=1` there ("only 0-dimensional arrays can be converted to Python scalars"). Triton
3.9 converts a squeezed array instead. `install()` gives older Triton the same conversion; it changes
nothing where the installed interpreter and NumPy already agree, and nothing outside the interpreter.
"""

from __future__ import annotations

import functools

import numpy as np


def numpy_refuses_1d_scalars() -> bool:
    """Whether NumPy raises on int() of a one-element 1-d array (NumPy >= 2.4)."""
    try:
        int(np.array([1]))
    except TypeError:
        return True
    return False


def _index(self) -> int:
    return int(np.asarray(self.handle.data).squeeze())  # as Triton 3.9's interpreter does


@functools.cache
def install() -> bool:
    """Wrap the interpreter's tensor patching so `__index__` reads one-element arrays (once per
    process; call only under the interpreter). Returns whether the wrapper was installed: False where
    NumPy still converts 1-d arrays or the installed Triton already indexes them."""
    if not numpy_refuses_1d_scalars():
        return False
    from triton.runtime import interpreter

    patch = getattr(interpreter, "_patch_lang_tensor", None)
    if patch is None or "int(self.handle.data)" not in _source(patch):
        return False

    @functools.wraps(patch)
    def patch_lang_tensor(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)

    interpreter._patch_lang_tensor = patch_lang_tensor
    return True


def _source(fn) -> str:
    import inspect

    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""
