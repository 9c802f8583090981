"""What the compiled logits kernels must keep, read off the PTX that Triton emits for sm_90.

Triton compiles to PTX on any machine (no GPU, no ptxas needed), so these run in CPU CI. They run
the compiler in a subprocess: this process has TRITON_INTERPRET=1 set, under which `triton.jit`
returns interpreter objects that the compiler cannot take.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# benchmarks/sass/kernel_sass.py compiles our kernels offline (it unsets TRITON_INTERPRET on import);
# here the stats kernel as the GPU plan launches it at (64, 4, 151936) with fp32 logits: 512 x 8
# one-warp tiles, 32-bit lane offsets, programmatic dependent launch, the lazy pass (kernels/logits.py
# _plan)
_STATS_PTX = r"""
import json, sys
sys.path.insert(0, "benchmarks/sass")
from kernel_sass import compile_kernel

flags = dict(HAS_DRAFT_LOGITS=int(sys.argv[1] == "classic"), LANE_I32=1, PDL=1, LAZY=1, NCB=64)
print(json.dumps(compile_kernel("logits-stats", 512, 1, 1, 8, flags).asm["ptx"]))
"""


def _stats_pass_ptx(drafts: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"  # the launch default, stated (Triton 3.9 warns otherwise)
    done = subprocess.run([sys.executable, "-c", _STATS_PTX, drafts], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _policy_operand(store: str) -> str:
    return store.rstrip(";").rsplit(",", 1)[-1].strip()


@pytest.mark.parametrize("drafts", ["classic", "one-hot"])
def test_stats_pass_stores_its_statistics_evict_last(drafts):
    """Every global store of the logits statistics pass (target and draft chunk max / sum-exp /
    argmax; with one-hot drafts the part statistics) carries the L2 evict-last policy. H200 run 121
    measured it (same session, three rounds): 0.7-4.7 µs less of do_bench's device time per one-hot
    call, the pass itself being faster (run 124; kernels/logits.py `_store_statistic`). Fails
    when any of those stores loses the policy: the PTX store then has no L2::cache_hint operand, or
    one whose policy is not evict_last."""
    ptx = _stats_pass_ptx(drafts)
    evict_last = set(re.findall(r"createpolicy\.fractional\.L2::evict_last\.b64\s+(%rd\d+)", ptx))
    stores = [line.strip() for line in ptx.splitlines() if re.search(r"\bst\.global\.", line)]
    # classic: 3 target + 2 draft statistics; one-hot: 3 chunk statistics + 2 part statistics per
    # tile-loop copy (the kernel has several: masked / unmasked chunks, the last tile)
    assert len(stores) >= 5, stores
    # a hinted store's last operand is its policy register: `st.global...L2::cache_hint [a], {v}, %rdN;`
    lacking = [s for s in stores if "L2::cache_hint" not in s or _policy_operand(s) not in evict_last]
    assert not lacking, f"{len(lacking)} of {len(stores)} stores without the evict-last policy: {lacking[:3]}"
