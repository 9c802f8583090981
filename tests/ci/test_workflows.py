"""The CI workflow files are valid YAML and run the same make targets a developer runs."""

import importlib.util
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


def _pytest_shards():
    spec = importlib.util.spec_from_file_location("pytest_shards", ROOT / "ci/gpu/pytest_shards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_session_tests_step_runs_the_sharded_suite():
    text = (ROOT / "ci/gpu_session.sh").read_text()
    line = re.search(r"^\s*tests\)\s*step tests (.*?);;", text, re.M)
    assert line and "ci/gpu/pytest_shards.py" in line.group(1) and line.group(1).split()[-1] == "tests"


@pytest.mark.parametrize("shards", [1, 3, 8])
def test_pytest_shards_run_every_test_file_exactly_once(shards):
    """The shards together hold each test_*.py of the suite once (a file left out would go unrun on
    the GPU; one in two shards would run twice), in at most `shards` non-empty groups."""
    ps = _pytest_shards()
    files = ps.find_test_files(["tests"])
    every = sorted(p for p in (ROOT / "tests").rglob("test_*.py") if "__pycache__" not in p.parts)
    assert files == every and len(files) > 50
    groups = ps.assign(files, shards)
    assert 1 <= len(groups) <= shards and all(groups)
    assert sorted(f for g in groups for f in g) == every


def test_pytest_shards_exit_status_says_whether_every_shard_passed(tmp_path):
    """Exit 1 when any shard fails (a GPU CI step must go red), 0 when all pass; one log per shard."""
    ps = _pytest_shards()
    (tmp_path / "test_good.py").write_text("def test_ok():\n    assert True\n")
    (tmp_path / "test_bad.py").write_text("def test_broken():\n    assert False\n")
    good, bad = str(tmp_path / "test_good.py"), str(tmp_path / "test_bad.py")
    assert ps.main(["--shards", "2", "--out", str(tmp_path / "both"), good, bad]) == 1
    assert len(list((tmp_path / "both").glob("tests-shard-*.log"))) == 2
    assert ps.main(["--shards", "2", "--out", str(tmp_path / "good"), good]) == 0
