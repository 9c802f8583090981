"""CLI exit codes and report files. Deterministic certificates only (edge, coupling, grid) plus one
GOF law (alpha = 1e-6, eps = 0.04, n from the design) on one case, so false failures have
probability <= 1e-6 per GOF assertion."""

import json

from specsample.verify.cli import main

TARGET = "specsample.verify.examples.sglang_like:chain_sample_sglang_like"


def _verify(*args: str) -> int:
    """Exit status of `verify --device cpu --no-progress ARGS`."""
    return main(["verify", "--device", "cpu", "--no-progress", *args])


def test_reference_passes_and_writes_the_report(tmp_path):
    rc = _verify(
        "--adapter",
        "reference",
        "--only",
        "edge",
        "dirichlet1_V8_K2",
        "gumbel_dirichlet1_V7",
        "--report",
        str(tmp_path),
    )
    assert rc == 0
    files = {p.name for p in tmp_path.iterdir()}
    assert {"report.md", "certificates.json", "pvalue_qq.png"} <= files, files
    assert any(f.startswith("accepted_length_") for f in files)
    assert any(f.startswith("frequencies_") for f in files)
    certs = json.loads((tmp_path / "certificates.json").read_text())["certificates"]
    assert certs and all(c["status"] in ("pass", "skip") for c in certs)
    assert "## Summary" in (tmp_path / "report.md").read_text()
    # every certificate was also streamed as it finished (what a run stopped by a timeout keeps)
    lines = (tmp_path / "certificates.partial.jsonl").read_text().splitlines()
    streamed = [json.loads(line) for line in lines]
    assert [(c["sampler"], c["case"], c["law"], c["status"]) for c in streamed] == [
        (c["sampler"], c["case"], c["law"], c["status"]) for c in certs
    ]
    assert all(c["elapsed_s"] >= 0 for c in streamed)


def test_failing_target_exits_1(tmp_path, capsys):
    rc = _verify("--target", TARGET, "--only", "edge", "--report", str(tmp_path))
    assert rc == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "edge" in out and "norm_sum_zero" in out


def test_uninstalled_engine_exits_2(capsys):
    rc = _verify("--adapter", "vllm")
    assert rc == 2
    assert "not installed" in capsys.readouterr().err


def test_unloadable_target_exits_2(capsys):
    rc = _verify("--target", "no.such.module:fn")
    assert rc == 2


def test_requested_engine_missing_next_to_reference_exits_2(capsys):
    rc = _verify("--adapter", "reference", "flashinfer", "--only", "edge")
    assert rc == 2
    assert "not certified: flashinfer" in capsys.readouterr().out


def test_max_seconds_stops_between_certificates_and_exits_3(tmp_path, capsys):
    """--max-seconds 0: the first certificate runs (the check comes after each one), nothing after
    it starts; the report says the run is incomplete, keeps what finished, and the exit status is 3,
    neither a pass (0) nor a failure (1)."""
    rc = _verify("--adapter", "reference", "--only", "edge", "coupling", "--max-seconds", "0",
                 "--report", str(tmp_path))  # fmt: skip
    assert rc == 3
    out = capsys.readouterr().out
    assert "INCOMPLETE" in out and "--max-seconds 0" in out
    data = json.loads((tmp_path / "certificates.json").read_text())
    assert len(data["certificates"]) == 1 and data["certificates"][0]["status"] == "pass"
    assert "1 of the selected certificates ran, the rest were not run" in data["stopped"]
    assert "**Incomplete**" in (tmp_path / "report.md").read_text()
    # without the limit the same selection runs more than one certificate and passes
    assert _verify("--adapter", "reference", "--only", "edge", "coupling", "--report", str(tmp_path)) == 0
    assert len(json.loads((tmp_path / "certificates.json").read_text())["certificates"]) > 1


def test_max_seconds_stops_the_logits_family_between_certificates(tmp_path, monkeypatch):
    """The logits family hands each certificate to the run as it finishes, so --max-seconds stops the
    family after its first certificate and the partial report streams it then. (It handed them over
    only after its last: GPU run 257's verify wrote no certificate in 330 s and ran past its
    --max-seconds.) Counted by the certificates actually run, not those reported."""
    import specsample.verify.logits_family as L

    ran = []
    run = L._run
    monkeypatch.setattr(L, "_run", lambda law, *rest: (ran.append(law), run(law, *rest))[1])
    rc = _verify(
        "--adapter", "reference", "--family", "logits", "--max-seconds", "0", "--report", str(tmp_path)
    )
    assert rc == 3
    assert len(ran) == 1, f"{len(ran)} logits certificates ran after the limit had passed: {ran}"
    certs = json.loads((tmp_path / "certificates.json").read_text())["certificates"]
    assert len(certs) == 1 and len((tmp_path / "certificates.partial.jsonl").read_text().splitlines()) == 1


def test_cpu_run_in_a_process_that_imported_triton_leaves_triton_interpret_unset(monkeypatch):
    """`triton.jit` reads TRITON_INTERPRET as each kernel is decorated, so a main() that set it in a
    GPU test session turned every kernel module loaded afterwards (the verify tests' module copies)
    into interpreted ones: H200 run 142, three verify tests failed so. It may set it only before
    triton's first import."""
    import os

    import triton  # noqa: F401

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert _verify("--adapter", "reference", "--only", "edge", "dirichlet1_V8_K2") == 0
    assert "TRITON_INTERPRET" not in os.environ
