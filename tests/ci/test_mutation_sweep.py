"""ci/mutation_sweep.py's mutants: one operator changed per mutant, only inside @triton.jit functions,
never in comments, and the sweep's verdicts read off pytest's exit."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "ci" / "mutation_sweep.py"
_spec = importlib.util.spec_from_file_location("mutation_sweep", _PATH)
sweep = importlib.util.module_from_spec(_spec)
sys.modules["mutation_sweep"] = sweep
_spec.loader.exec_module(sweep)

SOURCE = '''"""Module docstring: a < b & c + d."""
import triton
import triton.language as tl


def host(a, b):
    return a < b and a + b  # not a kernel: never mutated


@triton.jit
def _kernel(x, y, n):
    ok = (x < n) & (y <= n)  # a comment with < and & and +
    z = tl.maximum(x, y) + (x - y)
    w = ~ok | (x >= 1)
    é = 1; s = tl.max(z, axis=0) if x == y else x << 2  # noqa: E702 (columns in bytes)
    return tl.where(ok, z
                    - w, s)
'''


def test_every_mutant_changes_one_operator_inside_jit_functions_only():
    ms = sweep.mutants(SOURCE)
    got = sorted((m.line, m.old, m.new) for m in ms)
    assert got == sorted([
        (12, "<", "<="), (12, "<=", "<"), (12, "&", "|"),
        (13, "maximum", "minimum"), (13, "+", "-"), (13, "-", "+"),
        (14, "~", ""), (14, "|", "&"), (14, ">=", ">"),
        (15, "max", "min"), (15, "==", "!="),
        (16, "-", "+"),
    ])  # fmt: skip
    assert len({m.ident for m in ms}) == len(ms)
    base = ast.dump(ast.parse(SOURCE))
    for m in ms:
        changed = m.apply(SOURCE)
        assert ast.dump(ast.parse(changed)) != base, m.ident  # parses, and differs
        assert changed.count("\n") == SOURCE.count("\n")
        assert changed.splitlines()[: m.line - 1] == SOURCE.splitlines()[: m.line - 1]
        line = changed.splitlines()[m.line - 1]
        assert "# a comment with < and & and +" in line or m.line != 12  # comments untouched
        assert m.function == "_kernel"


def test_apply_refuses_a_source_that_moved():
    m = sweep.mutants(SOURCE)[0]
    with pytest.raises(AssertionError):
        m.apply("\n" + SOURCE)


def test_the_repository_kernels_yield_mutants_that_all_parse():
    chain = (_PATH.parents[1] / "specsample" / "kernels" / "chain.py").read_text()
    ms = sweep.mutants(chain)
    assert len(ms) > 100
    for m in ms:
        ast.parse(m.apply(chain))


@pytest.mark.parametrize(
    "body, verdict",
    [("def test_ok():\n    assert True\n", "passed"), ("def test_bad():\n    assert False\n", "failed"),
     ("import nonexistent_module_xyz\n", "error")],
)  # fmt: skip
def test_verdict_is_read_off_pytest(tmp_path, body, verdict):
    (tmp_path / "test_probe.py").write_text(body)
    status, _, first = sweep._run_tests(tmp_path, ["test_probe.py"], timeout=120)
    assert status == verdict
    assert (verdict == "failed") == first.startswith("FAILED")
