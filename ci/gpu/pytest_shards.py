"""The test suite as several pytest processes side by side: on a GPU it is bound by Triton compiling
each kernel configuration (one process, H200 run 140: ~1 test/s, the suite past a 10-minute cap), and
compilation runs on the host's cores. H200 run 144: all 1,312 tests in 360 s over eight processes.

    python3 ci/gpu/pytest_shards.py [--shards N] [--out DIR] [--timeout S] [paths ...]

Each test file goes to the shard with the fewest bytes of tests so far (largest files first), so a
file's module fixtures are built once. One log per shard in DIR (tests-shard-I.log); exit status 0
only if every shard passed (pytest's 0, or 5 for a shard whose tests were all deselected)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# --durations: each log names its slowest tests (H200 run 197: one shard of 14 took 505 s of its 520 s
# limit, and its log could not say which file)
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=10"]


def find_test_files(paths: list[str]) -> list[Path]:
    """Every test_*.py under `paths` (files or directories, relative to the repository or absolute),
    sorted."""
    files = set()
    for p in paths:
        path = ROOT / p
        found = [path] if path.is_file() else path.rglob("test_*.py")
        files.update(f for f in found if "__pycache__" not in f.parts)
    return sorted(files)


def assign(files: list[Path], shards: int) -> list[list[Path]]:
    """Largest-first greedy split by file size (a proxy for test count): non-empty shards only."""
    groups: list[list[Path]] = [[] for _ in range(shards)]
    load = [0] * shards
    for f in sorted(files, key=lambda f: (-f.stat().st_size, f)):
        i = load.index(min(load))
        groups[i].append(f)
        load[i] += f.stat().st_size
    return [sorted(g) for g in groups if g]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["tests"])
    ap.add_argument("--shards", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--out", default=os.environ.get("OUT", str(ROOT / "out")))
    ap.add_argument("--timeout", type=float, default=None, help="seconds before a shard is killed")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    groups = assign(find_test_files(args.paths), args.shards)
    t0 = time.monotonic()
    procs = []
    for i, group in enumerate(groups):
        log = open(out / f"tests-shard-{i}.log", "w")
        cmd = PYTEST + [str(f.relative_to(ROOT)) if f.is_relative_to(ROOT) else str(f) for f in group]
        log.write(" ".join(cmd) + "\n")
        log.flush()
        procs.append((i, subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), log))
    failed = 0
    for i, proc, log in procs:
        try:
            left = None if args.timeout is None else max(1.0, args.timeout - (time.monotonic() - t0))
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = "timeout"
        log.close()
        last = (out / f"tests-shard-{i}.log").read_text().strip().splitlines()[-1:]
        print(f"shard {i}: rc {rc} at {time.monotonic() - t0:.0f} s: {last[0] if last else ''}")
        failed += rc not in (0, 5)
    print(f"{len(groups)} shards, {failed} failed, {time.monotonic() - t0:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
