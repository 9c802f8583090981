"""The CI workflow files are valid YAML and run the same make targets a developer runs."""

import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")
ROOT = Path(__file__).resolve().parents[2]


def _run_lines(path: Path) -> list[str]:
    doc = yaml.safe_load(path.read_text())
    assert set(doc) >= {"name", "jobs"} and (True in doc or "on" in doc), f"{path}: not a workflow"
    return [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]


def test_cpu_workflow_runs_make_test_and_verify():
    runs = _run_lines(ROOT / "ci/github/cpu.yml")
    assert "make test" in runs and "make verify" in runs


def test_gpu_workflow_runs_make_verify_and_bench_on_a_gpu_runner():
    path = ROOT / "ci/github/gpu.yml"
    runs = _run_lines(path)
    assert "make verify" in runs and "make bench" in runs
    jobs = yaml.safe_load(path.read_text())["jobs"]
    assert all("gpu" in job["runs-on"] and "self-hosted" in job["runs-on"] for job in jobs.values())


def test_ci_run_calls_the_readme_test_command():
    assert "make test" in (ROOT / ".ci/run").read_text()
    assert "make test" in (ROOT / "README.md").read_text()


def test_gpu_session_test_halves_cover_every_test_path_once():
    """ci/gpu_session.sh's tests-gpu + tests-cpu steps together run exactly the suite's top-level
    entries (a new tests/ directory left out of both would go unrun on capped GPU machines)."""
    text = (ROOT / "ci/gpu_session.sh").read_text().replace("\\\n", " ")
    halves = []
    for part in ("tests-gpu", "tests-cpu"):
        line = re.search(rf"^\s*{part}\)\s*step {part} (.*?);;", text, re.M)
        assert line, f"ci/gpu_session.sh has no {part} step"
        halves += [w for w in line.group(1).split() if w.startswith("tests/")]
    entries = sorted(f"tests/{p.name}" for p in (ROOT / "tests").iterdir()
                     if (p.is_dir() and p.name != "__pycache__") or p.name.startswith("test_"))  # fmt: skip
    assert sorted(halves) == entries
