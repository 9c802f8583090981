"""Operator mutation sweep: does some test fail for every one-token change of a kernel's maths?

The mutant catalogue (specsample/verify/mutants.py) plants the bugs the anchors shipped and proves the
certificates catch each. This sweep asks the wider question mechanically: inside every `@triton.jit`
function of one module it changes one operator at a time and runs a test selection against the
changed copy; a mutant no test notices is a survivor, and each survivor is either equivalent (the
change cannot alter any output), unreachable on the CPU (a GPU-only branch: the interpreter's launch
plan never takes it) or a gap in the tests.

Operators (one site each): a comparison flipped at its boundary (< <=, > >=, == !=), & and | swapped,
+ and - swapped, tl.maximum / tl.minimum, tl.max / tl.min and tl.argmax / tl.argmin swapped, and a
logical not (~) dropped. Multiplications are left alone (in these kernels they are index strides and
scales whose change any test sees at once).

Each worker runs its mutants in a private copy of the repository's tracked files (`git ls-files`, as
they are in the working tree: uncommitted edits to tracked tests count, new untracked files do not),
with PYTHONPATH pointing there so the copy, not the installed package, is imported; pytest stops at
the first failure (-x). A mutant whose tests run past --timeout counts as killed by the timeout (a
hang is a failure any CI notices). Before any mutant the unchanged copy must pass the selection, or
the sweep stops: a survivor means nothing if the selection fails anyway.

    python ci/mutation_sweep.py specsample/kernels/chain.py --tests tests/kernels/test_chain_coupling.py \
        tests/kernels/test_chain_edges.py --workers 2 --out sweep.json

CPU only, kernels under TRITON_INTERPRET=1; 4-140 s per mutant on one core
(the chain kernel's tests). Results of the runs kept
in the repository: ci/mutation_results/ (README there).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"), ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
            ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}  # fmt: skip
_BINOP = {ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"), ast.Add: ("+", "-"), ast.Sub: ("-", "+")}
_CALLS = {"maximum": "minimum", "minimum": "maximum", "max": "min", "min": "max", "argmax": "argmin",
          "argmin": "argmax"}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One change: the source text at [start, end) (character offsets) replaced by `new`."""

    ident: str  # function:line:operator[#n], unique within the module (#n: the n-th such site on the line)
    function: str
    line: int  # where the mutated expression starts (its operator may sit on a later line)
    start: int
    end: int
    old: str
    new: str

    def apply(self, source: str) -> str:
        assert source[self.start : self.end] == self.old, (self.ident, source[self.start : self.end])
        return source[: self.start] + self.new + source[self.end :]


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (1-based line numbers index it directly)."""
    starts, at = [0, 0], 0
    for line in source.splitlines(keepends=True):
        at += len(line)
        starts.append(at)
    return starts


def _char(source_lines: list[str], starts: list[int], line: int, col_bytes: int) -> int:
    """Character offset of (line, UTF-8 byte column), as ast reports positions."""
    text = source_lines[line - 1].encode()[:col_bytes].decode()
    return starts[line] + len(text)


def _is_jit(fn: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _token_between(source: str, lo: int, hi: int, token: str) -> int | None:
    """Offset of the operator `token` in source[lo:hi] (the text between two operands) outside
    comments, if it occurs exactly once there; "<" never matches inside "<=" or "<<" (likewise ">")."""
    found, i = [], lo
    while i < hi:
        if source[i] == "#":
            i = source.index("\n", i)
            continue
        if source.startswith(token, i):
            around = source[i - 1 : i] + source[i + len(token) : i + len(token) + 1]
            if not (token in ("<", ">") and any(c in "<>=" for c in around)):
                found.append(i)
        i += 1
    return found[0] if len(found) == 1 else None


def mutants(source: str) -> list[Mutant]:
    """Every one-operator mutant inside the module's @triton.jit functions, in source order."""
    tree = ast.parse(source)
    lines, starts = source.splitlines(keepends=True), _offsets(source)

    def at(node, end=False) -> int:
        if end:
            return _char(lines, starts, node.end_lineno, node.end_col_offset)
        return _char(lines, starts, node.lineno, node.col_offset)

    out: list[Mutant] = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and _is_jit(n)):
        for node in ast.walk(fn):
            site = None
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
                old, new = _COMPARE[type(node.ops[0])]
                site = (at(node.left, end=True), at(node.comparators[0]), old, new)
            elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP:
                old, new = _BINOP[type(node.op)]
                site = (at(node.left, end=True), at(node.right), old, new)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
                start = at(node)
                if source[start] == "~":
                    out.append(Mutant(f"{fn.name}:{node.lineno}:~", fn.name, node.lineno, start, start + 1,
                                      "~", ""))  # fmt: skip
                continue
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _CALLS
                and ast.unparse(node.func.value) == "tl"
            ):
                end = at(node.func, end=True)
                old = node.func.attr
                out.append(Mutant(f"{fn.name}:{node.lineno}:{old}", fn.name, node.lineno, end - len(old), end,
                                  old, _CALLS[old]))  # fmt: skip
                continue
            if site is None:
                continue
            lo, hi, old, new = site
            pos = _token_between(source, lo, hi, old)
            if pos is None:
                continue
            out.append(
                Mutant(f"{fn.name}:{node.lineno}:{old}", fn.name, node.lineno, pos, pos + len(old), old, new)
            )
    out.sort(key=lambda m: m.start)
    seen: dict[str, int] = {}
    unique = []
    for m in out:  # several sites of one operator on one line: number them
        n = seen.get(m.ident, 0)
        seen[m.ident] = n + 1
        unique.append(
            Mutant(m.ident + (f"#{n}" if n else ""), m.function, m.line, m.start, m.end, m.old, m.new)
        )
    return unique


@dataclass
class Outcome:
    ident: str
    line: int
    old: str
    new: str
    status: str  # "killed" (a test failed), "survived", "timeout", "error" (pytest crashed or stopped)
    seconds: float
    first_failure: str


def _copy_tree(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    for rel in files:
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0, ""
    seconds = time.perf_counter() - t0
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "ERROR"))]
    if proc.returncode == 0:
        return "passed", seconds, ""
    if proc.returncode == 1 and failed:
        return "failed", seconds, failed[0][:300]
    return "error", seconds, (failed[0] if failed else proc.stdout[-300:] + proc.stderr[-300:])[:300]


def _imports_from(tree: Path) -> bool:
    """Whether a Python process with the sweep's environment imports specsample from `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = "import specsample, sys; sys.stdout.write(specsample.__file__)"
    got = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    return got.returncode == 0 and Path(got.stdout).resolve().is_relative_to(tree.resolve())


def sweep(module: str, tests: list[str], workers: int, timeout: float, only: list[str] | None = None,
          log=print, stream: Path | None = None) -> dict:  # fmt: skip
    """Run every mutant (or those in `only`) against `tests`; each outcome is also appended to `stream`
    (JSON lines) as it comes, so an interrupted sweep keeps what it ran."""
    source = (REPO / module).read_text()
    todo = [m for m in mutants(source) if not only or m.ident in only]
    root = Path(tempfile.mkdtemp(prefix="mutation_sweep_"))
    trees = []
    for w in range(workers):
        tree = root / f"w{w}"
        _copy_tree(tree)
        if not _imports_from(tree):
            raise SystemExit(f"{tree}: specsample is not imported from the copy (PYTHONPATH); stopping")
        trees.append(tree)
    status, seconds, first = _run_tests(trees[0], tests, timeout)
    log(f"baseline (unchanged copy): {status} in {seconds:.0f} s {first}")
    if status != "passed":
        raise SystemExit("the test selection fails on the unchanged module: a survivor would mean nothing")
    outcomes: list[Outcome] = []
    lock = threading.Lock()

    def work(w: int) -> None:
        tree = trees[w]
        for i in range(w, len(todo), workers):
            m = todo[i]
            (tree / module).write_text(m.apply(source))
            result, secs, failure = _run_tests(tree, tests, timeout)
            verdict = {"failed": "killed", "passed": "survived"}.get(result, result)
            outcome = Outcome(m.ident, m.line, m.old, m.new, verdict, round(secs, 1), failure)
            with lock:
                outcomes.append(outcome)
                if stream is not None:
                    with open(stream, "a") as f:
                        f.write(json.dumps(asdict(outcome)) + "\n")
            change = f"{m.ident} {m.old!r}->{m.new!r}"
            log(f"[{len(outcomes)}/{len(todo)}] {change}: {verdict} ({secs:.0f} s) {failure}")
        (tree / module).write_text(source)

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(work, range(workers)))
    shutil.rmtree(root, ignore_errors=True)
    outcomes.sort(key=lambda o: (o.line, o.ident))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "timeout", "error", "survived")}
    return dict(module=module, tests=tests, baseline_seconds=round(seconds, 1), mutants=len(outcomes),
                counts=counts, outcomes=[asdict(o) for o in outcomes])  # fmt: skip


def survivors_table(result: dict, source: str) -> str:
    """Markdown rows (id, change, the source line) of the mutants no test killed."""
    lines = source.splitlines()
    rows = ["| mutant | change | line |", "|---|---|---|"]
    for o in result["outcomes"]:
        if o["status"] == "survived":
            text = lines[o["line"] - 1].strip().replace("|", "\\|")
            rows.append(f"| `{o['ident']}` | `{o['old']}` -> `{o['new'] or '(dropped)'}` | `{text}` |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="path of the kernel module, relative to the repository root")
    ap.add_argument("--tests", nargs="+", default=[], help="pytest selection run against each mutant")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per mutant before it counts as killed"
    )
    ap.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--out", help="JSON file for the results")
    ap.add_argument(
        "--survivors", metavar="JSON", help="print the survivors of a saved sweep as a table and exit"
    )
    args = ap.parse_args(argv)
    if args.survivors:
        print(survivors_table(json.loads(Path(args.survivors).read_text()), (REPO / args.module).read_text()))
        return 0
    if args.list:
        for m in mutants((REPO / args.module).read_text()):
            print(f"{m.ident}\t{m.old!r} -> {m.new!r}")
        return 0
    if not args.tests:
        ap.error("--tests is required to run a sweep")
    stream = Path(args.out + ".partial.jsonl") if args.out else None
    log = lambda s: print(s, flush=True)  # noqa: E731
    result = sweep(args.module, args.tests, args.workers, args.timeout, args.only, log=log, stream=stream)
    print(json.dumps(result["counts"]))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
