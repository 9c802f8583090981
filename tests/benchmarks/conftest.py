"""Unit tests of the benchmark harness on CPU: make the repository root importable so that
`benchmarks` (a top-level folder, not installed) resolves to the harness package."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
