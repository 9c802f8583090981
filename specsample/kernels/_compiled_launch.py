"""Launch a Triton kernel through its compiled launcher, skipping JITFunction.run on repeat calls.

`kernel[grid](*args, **meta)` re-derives on every call what a repeat call already knows: it binds
~30 arguments, specialises each one (type, 16-byte alignment, divisibility), builds a string cache
key, checks globals and only then calls the compiled kernel's C launcher. On the H200 host
(Python 3.12, Triton 3.6) that is about half of an eager call's 94-106 µs (benchmarks/NOTES.md,
run 14), and `triton.testing.do_bench` counts it whenever it outlasts the L2-flush memset.

`launch(kernel, grid, *args, **meta)` keys each call by what can change Triton's choice of compiled
kernel, and a key seen before goes straight to the launcher Triton built for it:
- every tensor argument: dtype and whether its data pointer is 16-byte aligned (what Triton
  specialises a pointer on);
- every other argument by value (ints, floats, None, bools): strictly finer than Triton's
  specialisation of scalars (type by range, == 1, divisible by 16), so two calls with one key always
  get the same compiled kernel;
- the keyword arguments (constexprs and options such as num_warps) by value, and the current device.
A new key goes through `kernel[grid](...)` once, which compiles or finds the kernel, launches it and
returns it; the key then maps to that compiled kernel. So the first call of every shape is Triton's
own path, and a repeat call launches the very kernel Triton chose for that key.

Every call that takes Triton's path (and so may compile) runs inside the context that
`compile_under(kernel, scope)` registered for the kernel, if any: how a launcher changes its
kernel's compilation (kernels/_copy_policy.py).

Falls back to Triton's path on every call when: the interpreter runs (TRITON_INTERPRET=1), a
Triton launch hook is installed (profilers such as proton read it), the Triton version's compiled
kernels lack the attributes used here, or `SPECSAMPLE_TRITON_LAUNCH=jit` is set (for A/B timing and
as an escape hatch). Not covered: changing TRITON_DEBUG or Triton's global knobs after the first call
of a shape (the cached kernel keeps the knobs it was compiled under).
"""

from __future__ import annotations

import contextlib
import inspect
import os

import torch
import triton

from specsample.kernels._launch import interpreting

try:
    from triton import knobs as _knobs
except ImportError:  # older Triton: no knobs module, no launch hooks to honour
    _knobs = None

# Triton 3.6's launcher signature (measured on the H200, the version it runs); other versions go
# through the compiled kernel's public `compiled[grid](*args)` runner, which builds the same call
_RUN_SIGNATURE_KNOWN = triton.__version__.startswith("3.6.")
_Tensor = torch.Tensor
_MAX_ENTRIES = 4096  # distinct (kernel, shape, alignment) keys kept; cleared wholesale beyond this
_CACHE: dict[tuple, tuple] = {}  # (kernel, device, key) -> (compiled kernel, trailing parameters)
_MEMOS: list[dict] = []  # the launchers' repeat-call memos (call_memo), cleared with _CACHE
_SCOPES: dict = {}  # kernel -> a context-manager factory around its Triton-path calls (compile_under)
_path = os.environ.get("SPECSAMPLE_TRITON_LAUNCH", "direct")
if _path not in ("direct", "jit"):
    raise ValueError(f"SPECSAMPLE_TRITON_LAUNCH must be 'direct' or 'jit', got {_path!r}")


def launch_path() -> str:
    """'direct' (repeat calls use the cached compiled launcher) or 'jit' (always kernel[grid])."""
    return _path


@contextlib.contextmanager
def use_launch_path(path: str):
    """Temporarily set the launch path (benchmarks time both in one process)."""
    global _path
    if path not in ("direct", "jit"):
        raise ValueError(f"launch path must be 'direct' or 'jit', got {path!r}")
    old, _path = _path, path
    try:
        yield
    finally:
        _path = old


def clear_launch_cache() -> None:
    """Forget every cached compiled kernel and every launcher's repeat-call memo (the next call of
    each shape takes Triton's path)."""
    _CACHE.clear()
    for memo in _MEMOS:
        memo.clear()


def call_memo() -> dict:
    """A launcher's memo of repeat calls: call signature -> a prepared launch (see `bind_keyed`).
    Cleared by `clear_launch_cache`; bounded by `remember`."""
    memo: dict = {}
    _MEMOS.append(memo)
    return memo


def remember(memo: dict, signature, entry) -> None:
    """memo[signature] = entry, clearing the memo wholesale when it holds _MAX_ENTRIES already."""
    if len(memo) >= _MAX_ENTRIES:
        memo.clear()
    memo[signature] = entry


def compile_under(kernel, scope) -> None:
    """Run every Triton-path call of `kernel` (the calls that may compile it) inside `scope()`, a
    context manager; None removes the scope. Calls through a cached launcher never compile and skip
    it."""
    if scope is None:
        _SCOPES.pop(kernel, None)
    else:
        _SCOPES[kernel] = scope


def _triton_call(kernel, grid: tuple, args: tuple, meta: dict):
    """`kernel[grid](*args, **meta)` inside the kernel's compile scope, if it has one."""
    scope = _SCOPES.get(kernel)
    with scope() if scope is not None else contextlib.nullcontext():
        return kernel[grid](*args, **meta)


def launch_cache_size() -> int:
    return len(_CACHE)


def _hooks_installed() -> bool:
    if _knobs is None:
        return False
    hook = _knobs.runtime.launch_enter_hook
    # Triton 3.6 holds a HookChain (a list of calls), older versions None or a callable
    return hook is not None and bool(getattr(hook, "calls", True))


def _trailing_params(kernel, num_positional: int, meta: dict) -> tuple:
    """The kernel's parameters after the positional ones, in signature order: taken from `meta`
    (constexprs) or their defaults. Triton's launcher takes every parameter positionally and skips
    the constexpr ones itself."""
    params = list(inspect.signature(kernel.fn).parameters.values())[num_positional:]
    return tuple(meta[p.name] if p.name in meta else p.default for p in params)


def _launchable(compiled) -> bool:
    return all(hasattr(compiled, a) for a in ("run", "function", "packed_metadata"))


def launch(kernel, grid: tuple, *args, **meta) -> None:
    """`kernel[grid](*args, **meta)`, through the cached compiled launcher when this call's key has
    been launched before on this device."""
    if _path == "jit" or interpreting() or _hooks_installed():
        _triton_call(kernel, grid, args, meta)
        return
    _launch_cached(kernel, grid, _launch_key(args, meta), args, meta)


def _launch_key(args: tuple, meta: dict) -> tuple:
    """`launch`'s cache key: per argument, ints (most of them) as they are, tensors by dtype and
    16-byte alignment, anything else (None, floats, bools) by value; then the keyword arguments."""
    return (
        tuple([a if a.__class__ is int else (a.dtype, a.data_ptr() & 15 == 0) if isinstance(a, _Tensor) else a
               for a in args]),
        tuple(meta.items()),
    )  # fmt: skip


def launch_keyed(kernel, grid: tuple, key: tuple, args: tuple, meta: dict) -> None:
    """`kernel[grid](*args, **meta)` like `launch`, keyed by the caller's `key` instead of one built
    from every argument (that key costs ~0.4 µs per tensor argument on every call; a launcher knows
    which of its arguments can change the compiled kernel and keys only those).

    The caller's contract: two calls with equal `key` (on one device) must have equal `meta`, equal
    int arguments, and tensor arguments of equal dtype and equal 16-byte alignment, so the key must
    hold every int argument, the dtype and `data_ptr() % 16 == 0` of every tensor whose dtype or
    alignment can vary (the caller's inputs), and whatever `meta` is derived from. Tensors the
    launcher allocates itself (outputs from torch.empty, persistent scratch) are always 16-byte
    aligned with a fixed dtype and need no entry."""
    if _path == "jit" or interpreting() or _hooks_installed():
        _triton_call(kernel, grid, args, meta)
        return
    _launch_cached(kernel, grid, ("keyed", key), args, meta)  # tagged: never equal to launch()'s keys


def bind_keyed(kernel, grid: tuple, key: tuple, meta: dict):
    """`go(args)` with the effect of `launch_keyed(kernel, grid, key, args, meta)` for any `args` that
    meet launch_keyed's contract for `key`, with the per-call lookups done once, now: call it right
    after a `launch_keyed` of the same (kernel, grid, key, meta) on the same device, which put the
    compiled kernel in the cache.

    `go` calls Triton 3.6's C launcher itself (not the compiled kernel's Python `run`, which only adds
    scratch allocation when the kernel has none: ~1 µs per call on the H200 host, run 155), fetching the
    current stream on every call (a CUDA graph capture changes it). It falls back to `launch_keyed`
    on every call while the jit path is chosen or a launch hook is installed, and for good when the
    kernel is not cached (interpreter, jit path at bind time), needs scratch, or Triton's version is
    not the one whose launcher signature is known. Callers must key their memo of `go` by the
    current device too: `go` launches on the device that was current when it was bound."""

    def keyed(args: tuple) -> None:
        launch_keyed(kernel, grid, key, args, meta)

    return _bind(kernel, grid, ("keyed", key), keyed)


def bind(kernel, grid: tuple, args: tuple, meta: dict):
    """`bind_keyed` for a kernel launched with `launch(kernel, grid, *args, **meta)`: `go(new_args)`
    launches like `launch` for arguments of the same key as `args` (every int and float argument
    equal, tensors of equal dtype and 16-byte alignment, as `launch` keys them)."""

    def keyed(new_args: tuple) -> None:
        launch(kernel, grid, *new_args, **meta)

    return _bind(kernel, grid, _launch_key(args, meta), keyed)


def _bind(kernel, grid: tuple, cache_key: tuple, keyed):
    """The C-launcher call for the compiled kernel cached under (kernel, current device, cache_key),
    or `keyed` (the launch through the cache) where that cannot be done: see `bind_keyed`."""
    if _path == "jit" or interpreting() or not _RUN_SIGNATURE_KNOWN:
        return keyed
    device = torch.cuda.current_device()
    hit = _CACHE.get((kernel, device, cache_key))
    run = hit[0].run if hit is not None else None
    c_launch = getattr(run, "launch", None)
    if c_launch is None or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return keyed
    compiled, trailing = hit
    g0, g1, g2 = grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1
    # C launcher arguments after the stream: the function, cooperative-grid and PDL flags, the two
    # scratch pointers (none), the kernel's metadata, launch metadata and enter / exit hooks (none)
    flags = (run.launch_cooperative_grid, run.launch_pdl)
    head = (compiled.function, *flags, None, None, compiled.packed_metadata, None, None, None)
    raw_stream = torch._C._cuda_getCurrentRawStream

    def go(args: tuple) -> None:
        if _path == "jit" or _hooks_installed():
            keyed(args)
            return
        c_launch(g0, g1, g2, raw_stream(device), *head, *args, *trailing)

    return go


def _launch_cached(kernel, grid: tuple, key: tuple, args: tuple, meta: dict) -> None:
    """Launch through the compiled kernel cached under (kernel, current device, key); a miss goes
    through Triton's `kernel[grid]` and caches the compiled kernel it returns."""
    device = torch.cuda.current_device()
    full_key = (kernel, device, key)
    hit = _CACHE.get(full_key)
    if hit is None:
        compiled = _triton_call(kernel, grid, args, meta)
        if _launchable(compiled):
            if len(_CACHE) >= _MAX_ENTRIES:
                _CACHE.clear()
            _CACHE[full_key] = (compiled, _trailing_params(kernel, len(args), meta))
        return
    compiled, trailing = hit
    if not _RUN_SIGNATURE_KNOWN:
        compiled[grid](*args, *trailing)
        return
    g1 = grid[1] if len(grid) > 1 else 1
    g2 = grid[2] if len(grid) > 2 else 1
    stream = torch._C._cuda_getCurrentRawStream(device)
    # launch metadata and the enter/exit hooks are None: no hook is installed (checked by the callers)
    compiled.run(grid[0], g1, g2, stream, compiled.function, compiled.packed_metadata, None, None, None,
                 *args, *trailing)  # fmt: skip
