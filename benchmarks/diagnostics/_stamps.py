"""What the stamp diagnostics share (chain_stamps.py, race_stamps.py): the stamp functions spliced into a kernel's
copy, a checked text edit of that copy, and loading the generated module (Triton reads a kernel's source from its
file, so the copy must be one)."""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import tempfile

STAMP_GPU = '''
@triton.jit
def _gt(after):
    """%globaltimer (ns), read once `after` is available: the max over its lanes."""
    t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [after.to(tl.int32)],
                                  dtype=tl.int64, is_pure=False, pack=1)
    return tl.max(t, axis=0)


@triton.jit
def _smid(after):
    """%smid, the SM the program runs on."""
    t = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [after.to(tl.int32)],
                                  dtype=tl.int32, is_pure=False, pack=1)
    return tl.max(t, axis=0).to(tl.int64)
'''
STAMP_INTERPRETER = """
@triton.jit
def _gt(after):
    return tl.max(after.to(tl.int64) * 0, axis=0)


@triton.jit
def _smid(after):
    return tl.max(after.to(tl.int64) * 0, axis=0)
"""


def replace_once(src: str, old: str, new: str, what: str, times: int = 1) -> str:
    """`src` with `old` replaced by `new`, which must occur exactly `times` times (else `what`, the kernel's
    module, changed under the edit: fail rather than stamp the wrong place)."""
    if src.count(old) != times:
        raise RuntimeError(f"{what} changed: {old!r} occurs {src.count(old)} times (expected {times})")
    return src.replace(old, new)


def load_generated(module: str, sources: str, interpreting: bool, name: str):
    """The module generated from `sources` (the stamped copies) after the names of `module` (e.g.
    "specsample.kernels.chain") and the stamp functions for the GPU or the interpreter; returns it."""
    head = (
        "import triton\nimport triton.language as tl\n"
        f"import {module} as _kernels\n"
        "globals().update({k: v for k, v in vars(_kernels).items() if not k.startswith('__')})\n\n"
    )
    src = head + (STAMP_INTERPRETER if interpreting else STAMP_GPU) + "\n\n" + sources
    path = os.path.join(tempfile.mkdtemp(), f"{name}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed_medians(call, production, flush, calls: int, read) -> dict:
    """Medians over `calls` calls of `call`, each after `flush`, of the fields of `read()` (that call's stamps
    as a timeline dict; a field some calls lack takes the median over those that have it), then the zero_pause
    µs of the stamped and the production call (ab_device_time.timed_after, 100 calls each). GPU only."""
    import torch

    from benchmarks.diagnostics.ab_device_time import timed_after

    lines = []
    for _ in range(calls):
        flush()
        call()
        torch.cuda.synchronize()
        lines.append(read())
    keys = dict.fromkeys(key for line in lines for key in line)
    out = {key: round(statistics.median(t[key] for t in lines if key in t), 3) for key in keys}
    out["zero_pause_us_stamped"] = round(timed_after(call, flush, 100), 3)
    out["zero_pause_us_production"] = round(timed_after(production, flush, 100), 3)
    return out


def append_record(path: str, record: dict) -> None:
    """One JSON line appended to `path`, and printed."""
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps(record), flush=True)
