"""kernels/_copy_policy.py: the L2 evict-first policy put back on pipelined `cp.async` copies.

The rewrite is text to text, so most of it is checked here on PTX written in the shape Triton 3.6
emits (the H200's version, which drops the policy). The last test compiles the chain kernel for sm_90
with the importable Triton, as its launcher does, and reads the copies off the PTX.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from specsample.kernels import _compiled_launch, _copy_policy
from specsample.kernels._copy_policy import add_copy_policy, evict_first_copies, stages_hook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# the shape of Triton 3.6's PTX for a pipelined loop: unhinted copies with a src-size operand, one
# already-hinted copy, a plain evict-first load, and the copies' bookkeeping
_PTX = """//
.version 8.7
.target sm_90a
.address_size 64

.extern .shared .align 16 .b8 global_smem[];
.visible .entry _chain_kernel(
\t.param .u64 .ptr .global .align 1 _chain_kernel_param_0,
\t.param .u32 _chain_kernel_param_1
)
.reqntid 32, 1, 1
{
\t.reg .pred \t%p<9>;
\t.reg .b32 \t%r<40>;
\t.reg .b64 \t%rd<30>;
\tld.param.b64 \t%rd1, [_chain_kernel_param_0];
\tcp.async.cg.shared.global [ %r1 + 0 ], [ %rd2 + 0 ], 0x10, %r2;
\tcp.async.cg.shared.global [ %r3 + 0 ], [ %rd3 + 0 ], 0x10, %r2;
\tcp.async.commit_group;
\t@%p1 cp.async.ca.shared.global [ %r4 + 0 ], [ %rd4 + 0 ], 4;
\tcreatepolicy.fractional.L2::evict_last.b64 \t%rd9, 1.0;
\tcp.async.cg.shared.global.L2::cache_hint [ %r5 + 0 ], [ %rd5 + 0 ], 0x10, %r6, %rd9;
\tcp.async.wait_group \t1;
\tcreatepolicy.fractional.L2::evict_first.b64 \t%rd10, 1.0;
\tld.global.L1::evict_first.L2::cache_hint.v4.b32 { %r7, %r8, %r9, %r10 }, [ %rd6 + 0 ], %rd10;
\tret;
}
"""

_COPY = re.compile(r"\bcp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global\b")


def _copies(ptx: str) -> list[str]:
    return [line.strip() for line in ptx.splitlines() if _COPY.search(line)]


def _evict_first_registers(ptx: str) -> set[str]:
    return set(re.findall(r"createpolicy\.fractional\.L2::evict_first\.b64\s+(%[\w$]+)\s*,\s*1\.0;", ptx))


def test_policy_register_is_declared_at_the_kernels_top_scope():
    """A `.reg` inside a nested block later in the body (an inline-asm block, as Triton emits around
    TMA copies) is not where the policy goes: the register must be declared with the kernel's opening
    declarations, before the first instruction, or the copies cannot see it."""
    nested = "\t{\n\t.reg .pred \t%inner;\n\tsetp.ne.b32 \t%inner, %r1, 0;\n\t}\n"
    ptx = _PTX.replace("\tret;\n", nested + "\tret;\n")
    lines = add_copy_policy(ptx).splitlines()
    declared = next(i for i, line in enumerate(lines) if "%ss_copy_evict_first;" in line and ".reg" in line)
    first_instruction = next(i for i, line in enumerate(lines) if line.strip().startswith("ld.param"))
    assert declared < first_instruction
    assert lines[declared - 1].strip().startswith(".reg .b64")  # right after the opening declarations


def test_every_unhinted_copy_gets_the_evict_first_policy():
    """Each of the three unhinted copies (cg with src-size, predicated ca without) gains
    `.L2::cache_hint` and, as its last operand, a register that `createpolicy` fills with the
    fractional (1.0) evict-first policy; the copy that had a hint keeps its own (evict-last) one.
    Fails if a copy is missed, gets another policy, or the policy register is never created."""
    out = add_copy_policy(_PTX)
    copies = _copies(out)
    assert len(copies) == 4
    evict_first = _evict_first_registers(out)
    hinted = [c for c in copies if ".L2::cache_hint" in c]
    assert len(hinted) == 4
    policies = [c.rstrip(";").rsplit(",", 1)[-1].strip() for c in copies]
    assert policies.count("%rd9") == 1  # the copy that came hinted
    new = [p for p in policies if p != "%rd9"]
    assert len(new) == 3 and len(set(new)) == 1 and new[0] in evict_first
    # declared once, created once, before the first copy
    assert out.count(f".reg .b64 \t{new[0]};") == 1
    assert out.index("createpolicy.fractional.L2::evict_first") < out.index("cp.async")


def test_everything_but_the_copies_is_unchanged():
    """The rewrite touches only the copies and adds two lines after the register declarations:
    dropping those two lines and the new operands gives the input back."""
    out = add_copy_policy(_PTX)
    lines = out.splitlines()
    reg_end = max(i for i, line in enumerate(lines)
                  if line.lstrip().startswith(".reg .") and "copy" not in line)  # fmt: skip
    added = lines[reg_end + 1 : reg_end + 3]
    assert "ss_copy_evict_first" in added[0] and added[1].lstrip().startswith("createpolicy")
    undone = "\n".join(lines[: reg_end + 1] + lines[reg_end + 3 :]) + "\n"
    # drop the hint and the operand from the copies that carry our policy register
    undone = re.sub(r"\.L2::cache_hint( \[[^\n]*), %ss_copy_evict_first;", r"\1;", undone)
    assert undone == _PTX


def test_idempotent_and_a_no_op_without_copies():
    """A second pass changes nothing (every copy has a hint by then), nor does a kernel without
    copies, nor a copy with a qualifier after `.global`; copies outside any kernel entry are an
    error, not a silent pass."""
    once = add_copy_policy(_PTX)
    assert add_copy_policy(once) == once
    plain = _PTX.replace("cp.async", "// cp.async")
    no_copy = "\n".join(line for line in plain.splitlines() if "cp.async" not in line)
    assert add_copy_policy(no_copy) == no_copy
    sized = "\tcp.async.cg.shared.global.L2::128B [ %r8 + 0 ], [ %rd8 + 0 ], 0x10, %r2;"
    out = add_copy_policy(_PTX.replace("\tcp.async.commit_group;", sized + "\n\tcp.async.commit_group;"))
    assert sized in out.splitlines()  # a copy with a prefetch-size qualifier is left as it is
    with pytest.raises(ValueError, match="kernel entry"):
        add_copy_policy("cp.async.cg.shared.global [ %r1 + 0 ], [ %rd2 + 0 ], 0x10;\n")


def _stages(name: str) -> dict:
    def make_ptx(src, metadata):
        metadata["name"] = name
        return _PTX

    return {"ttir": None, "ptx": make_ptx}


def test_hook_rewrites_only_the_named_kernels_after_any_previous_hook():
    """Triton calls the hook with (backend, stages, options, language, capability): the PTX stage
    of a named kernel is rewritten, any other kernel's is not; a hook installed before ours runs
    first, and both enter the cache key that Triton >= 3.9 asks for with a no-argument call."""
    calls = []

    def previous(*args):
        if not args:
            return "theirs", "0" * 64
        calls.append(args[1])
        return None

    hook = stages_hook(frozenset({"_chain_kernel"}), previous)
    ours, other = _stages("_chain_kernel"), _stages("_other_kernel")
    for stages in (ours, other):
        hook("backend", stages, "options", "language", 90)
    assert calls == [ours, other]
    assert ours["ptx"]("src", {}) == add_copy_policy(_PTX) != _PTX
    assert other["ptx"]("src", {}) == _PTX
    key, digest = hook()
    assert key.startswith("theirs+") and "_chain_kernel" in key and len(digest) == 64
    alone_key, alone_digest = stages_hook(frozenset({"_chain_kernel"}))()
    assert alone_key == key.split("+", 1)[1] and alone_digest != digest


def test_context_installs_and_restores_the_knob():
    """Inside `evict_first_copies` Triton's stages hook is ours (wrapping whatever was there);
    after the block, also after an exception, it is what it was."""
    knobs = pytest.importorskip("triton.knobs")
    before = knobs.runtime.add_stages_inspection_hook
    with evict_first_copies("_chain_kernel"):
        assert knobs.runtime.add_stages_inspection_hook is not before
    assert knobs.runtime.add_stages_inspection_hook is before
    with pytest.raises(RuntimeError), evict_first_copies("_chain_kernel"):
        raise RuntimeError("compile failed")
    assert knobs.runtime.add_stages_inspection_hook is before


class _Kernel:
    """Stands in for a JITFunction: kernel[grid](*args, **meta) records whether the scope was on."""

    def __init__(self):
        self.seen = []
        self.scope_on = False

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.seen.append(self.scope_on)

        return run


def test_triton_path_calls_run_inside_the_kernels_compile_scope(monkeypatch):
    """`compile_under(kernel, scope)` wraps every Triton-path call of that kernel (here the jit
    path, which is what the interpreter and a first call take) and no other kernel's."""
    import contextlib

    monkeypatch.setattr(_compiled_launch, "_path", "jit")
    kernel, other = _Kernel(), _Kernel()

    @contextlib.contextmanager
    def scope():
        kernel.scope_on = True
        try:
            yield
        finally:
            kernel.scope_on = False

    _compiled_launch.compile_under(kernel, scope)
    try:
        _compiled_launch.launch(kernel, (1,), 3)
        _compiled_launch.launch_keyed(kernel, (1,), ("k",), (3,), {})
        _compiled_launch.launch(other, (1,), 3)
    finally:
        _compiled_launch.compile_under(kernel, None)
    _compiled_launch.launch(kernel, (1,), 3)
    assert kernel.seen == [True, True, False] and other.seen == [False]


def test_the_chain_launcher_compiles_under_the_policy():
    """The chain kernel is registered for evict-first copies exactly when they are enabled (the
    default; SPECSAMPLE_EVICT_FIRST_COPIES=0 turns them off), and its plans ask for that compile
    variant, so the two never share a compile cache entry."""
    from specsample.kernels import chain

    assert (chain._chain_kernel in _compiled_launch._SCOPES) == _copy_policy.enabled()
    plan = chain._plan(4, 5, 1000, True, False, False, False, 8, ())
    assert plan.meta["EVICT_FIRST_COPIES"] == _copy_policy.variant()
    assert (_copy_policy.variant() > 0) == _copy_policy.enabled()


_CHAIN_PTX = r"""
import json, sys
sys.path.insert(0, "benchmarks/sass")
from kernel_sass import compile_kernel

from specsample.kernels._copy_policy import variant

ptx = compile_kernel("chain", 512, 1, 3, 16, dict(EMIT_LANES=512, EVICT_FIRST_COPIES=variant())).asm["ptx"]
print(json.dumps(ptx))
"""


def test_compiled_chain_copies_carry_the_evict_first_policy(tmp_path):
    """The chain kernel at the H200's (64, 4, 151936) tiling (one warp, 512-column chunks, 16 per
    program, 3 stages), compiled for sm_90 as the launcher compiles it: every pipelined copy of p and
    q carries an L2 cache hint whose register holds the evict-first policy. Run 170 measured what
    the policy is worth on the H200 (kernels/_copy_policy.py). Fails when any copy loses it."""
    unset = ("TRITON_INTERPRET", "SPECSAMPLE_EVICT_FIRST_COPIES")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # a fresh compile: no cached kernel from another version
    done = subprocess.run([sys.executable, "-c", _CHAIN_PTX], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = json.loads(done.stdout.strip().splitlines()[-1])
    copies = _copies(ptx)
    assert len(copies) >= 16, copies  # p and q chunks of the prologue and the loop, several loop copies
    evict_first = _evict_first_registers(ptx)
    for copy in copies:
        assert ".L2::cache_hint" in copy, copy
        assert copy.rstrip(";").rsplit(",", 1)[-1].strip() in evict_first, copy
