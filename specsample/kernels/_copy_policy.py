"""The L2 evict-first policy on the shared-memory copies of a software-pipelined loop.

`load_once` (kernels/_row_loads.py) marks the rows a kernel streams once as the first lines to
leave L2. In a loop that Triton pipelines (`tl.range(num_stages > 1)`) those loads become `cp.async`
copies, and Triton 3.6 (the H200's) emits the copies without the policy (Triton 3.9 keeps it). The
chain then pays for the dirty lines its reads push out of L2: under do_bench, the write-back of the
256 MB flush. Run 170 (benchmarks/NOTES.md, session 28) measured the policy put back on the PTX:
do_bench fp32 (64, 4, 151936) 37.3 -> 34.0 µs, (128, 8, 128256) 50.4 -> 46.4, bf16 (64, 4, 151936)
25.0 -> 24.0, other shapes equal, outputs equal.

`add_copy_policy(ptx)` gives every plain `cp.async.{ca,cg}.shared.global` copy (no qualifier after
`.global`) the suffix `.L2::cache_hint` and one evict-first policy register, created once at the top
of the kernel. Copies that already carry a hint (or a prefetch size) are left alone, so on a Triton
that keeps the policy the rewrite changes nothing.

`evict_first_copies(*names)` runs it as a stage of Triton's own compiler
(`knobs.runtime.add_stages_inspection_hook`) for the kernels called `names`, and only within the
block: the launchers compile our kernels inside it (kernels/_compiled_launch.py, `compile_under`),
so no other kernel's code is touched (a thread compiling another kernel at that moment passes
through the hook unchanged; on Triton >= 3.9 the hook's tag enters that compile's cache key). A
hook someone else installed keeps running first.

`add_policy` and `rewriting_ptx` are the same two steps for any copy instruction (the diagnostic
benchmarks/diagnostics/stream_mechanism.py puts the policy on TMA copies with them).

`SPECSAMPLE_EVICT_FIRST_COPIES=0` turns the rewrite off (an escape hatch). The launchers pass
`variant()` to the kernel as a constexpr, so the compile cache keeps the two apart, and a new version
of the rewrite apart from the old, on every Triton (3.6's cache key leaves stages hooks out).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re

_ENV = "SPECSAMPLE_EVICT_FIRST_COPIES"
_enabled = os.environ.get(_ENV, "1")
if _enabled not in ("0", "1"):
    raise ValueError(f"{_ENV} must be '0' or '1', got {_enabled!r}")

_POLICY = "%ss_copy_evict_first"
_COPY = re.compile(
    r"(?P<head>cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global)"
    r"(?P<args>\s+\[[^\]]*\]\s*,\s*\[[^\]]*\]\s*,[^;]*);"
)
_ENTRY = re.compile(r"\.entry\s+[A-Za-z_$][\w$]*\s*\(")
_LINES = re.compile(r"[^\n]*\n")
_TOP_DECL = re.compile(r"\s*(\.reg\s|//|$)")  # a declaration, a comment or a blank line
# the rewrite's version: a launcher passes it to its kernel as a constexpr (`variant()`), so a change
# here is a new compile cache entry also on Triton 3.6, whose cache key leaves stages hooks out
_VERSION = 1


def enabled() -> bool:
    """Whether the launchers compile with evict-first copies (SPECSAMPLE_EVICT_FIRST_COPIES)."""
    return _enabled == "1"


def variant() -> int:
    """The compile variant a launcher passes as a constexpr: 0 without the rewrite, else its version."""
    return _VERSION if enabled() else 0


def add_copy_policy(ptx: str) -> str:
    """`ptx` (one kernel, as Triton emits it) with the L2 evict-first policy on every plain
    `cp.async` copy; unchanged when there is none."""
    return add_policy(ptx, _COPY, _POLICY)


def add_policy(ptx: str, copy: re.Pattern, register: str) -> str:
    """`ptx` with `.L2::cache_hint` and an evict-first policy held in `register` (declared and created
    once, after the kernel's register declarations) on every instruction `copy` matches: a pattern
    with groups `head` (the opcode, where the qualifier goes) and `args` (the operands, where the
    policy operand goes). Unchanged when nothing matches."""
    if not copy.search(ptx):
        return ptx
    entry = _ENTRY.search(ptx)
    if entry is None:
        raise ValueError("copies outside a kernel entry: not a Triton kernel's PTX")
    # after the declarations that open the kernel's body: a later `.reg` may sit in a nested scope
    # (an inline-asm block's `{ .reg ... }`), where the policy register would be invisible to the copies
    at = ptx.index("\n", ptx.index("{", ptx.index(")", entry.end()))) + 1
    for line in _LINES.finditer(ptx, at):
        if not _TOP_DECL.match(line.group()):
            break
        at = line.end()
    prologue = (f"\t.reg .b64 \t{register};\n"
                f"\tcreatepolicy.fractional.L2::evict_first.b64 \t{register}, 1.0;\n")  # fmt: skip
    copies = copy.sub(lambda m: f"{m['head']}.L2::cache_hint{m['args']}, {register};", ptx[at:])
    return ptx[:at] + prologue + copies


def stages_hook(names: frozenset, previous=None, rewrite=add_copy_policy, tag: str = "evict-first-copies"):
    """A Triton stages-inspection hook that rewrites (`rewrite(ptx) -> ptx`) the PTX of the kernels
    called `names` after `previous` (another hook, or None) has run. Triton calls it with (backend,
    stages, options, language, capability) when it builds a compile pipeline, and Triton >= 3.9 also
    with no arguments, for a (key, hash) pair that enters the compile cache key (`tag` names the
    rewrite there)."""
    tag = f"specsample-{tag}-{_VERSION}-{','.join(sorted(names))}"

    def hook(*args):
        if not args:
            key, digest = tag, hashlib.sha256(tag.encode()).hexdigest()
            if previous is not None:
                prev_key, prev_digest = previous()
                key = f"{prev_key}+{tag}"
                digest = hashlib.sha256(f"{prev_digest}{digest}".encode()).hexdigest()
            return key, digest
        if previous is not None:
            previous(*args)
        stages = args[1]
        make_ptx = stages.get("ptx")
        if make_ptx is not None:

            def ptx_stage(src, metadata):
                ptx = make_ptx(src, metadata)
                return rewrite(ptx) if metadata.get("name") in names else ptx

            stages["ptx"] = ptx_stage
        return None

    return hook


def evict_first_copies(*names: str):
    """Within the block, Triton compiles the kernels called `names` with evict-first copies."""
    return rewriting_ptx(add_copy_policy, "evict-first-copies", *names)


@contextlib.contextmanager
def rewriting_ptx(rewrite, tag: str, *names: str):
    """Within the block, Triton compiles the kernels called `names` with `rewrite` applied to their
    PTX (stages_hook); a no-op on Triton < 3.4."""
    try:
        from triton import knobs
    except ImportError:  # Triton < 3.4: no stages hook, the copies keep Triton's own code
        yield
        return
    previous = knobs.runtime.add_stages_inspection_hook
    knobs.runtime.add_stages_inspection_hook = stages_hook(frozenset(names), previous, rewrite, tag)
    try:
        yield
    finally:
        knobs.runtime.add_stages_inspection_hook = previous
