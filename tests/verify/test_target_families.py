"""`--target` (and the pytest plugin) on external Gumbel and logits samplers with streams of their own.

The examples in `specsample.verify.examples.gumbel_own_stream` / `logits_own_stream` are one correct
sampler per family and samplers with the field's seeding / greedy bugs planted. Statistical
certificates here are the ci budget's: alpha = 1e-6 per assertion, power 1 - 1e-3 against TV >= 0.04,
n from the design (stated in each record), so a correct sampler fails a GOF assertion with
probability <= 1e-6; the planted bugs are far outside eps (a frozen stream puts every draw on one
token; seeds[0] for every row makes every top-2 pair the same). greedy and zero_mass are exact."""

import pytest

from specsample.verify import runner
from specsample.verify.budgets import get_budget
from specsample.verify.cli import main
from specsample.verify.examples import gumbel_own_stream as G
from specsample.verify.examples import logits_own_stream as L
from specsample.verify.logits_family import LogitsSampler
from specsample.verify.protocol import GumbelSampler

GUMBEL = "specsample.verify.examples.gumbel_own_stream:"
LOGITS = "specsample.verify.examples.logits_own_stream:"
ONE_LOGITS_CASE = "logits_V10_K2_classic"  # one case keeps the float64 reference's time in CI small


def _verify(*args: str) -> int:
    return main(["verify", "--device", "cpu", "--no-progress", *args])


def _run(target: str, **kw):
    return runner.verify(get_budget("ci"), target=target, device="cpu", **kw)


def test_own_stream_gumbel_sampler_passes_with_its_coupling_skipped():
    run = _run(GUMBEL + "fast_sample_own_stream")
    by_law = {}
    for r in run.records:
        by_law.setdefault(r.law, set()).add(r.status)
    assert not run.failed, [(r.case, r.law, r.detail) for r in run.failed]
    assert by_law["coupling_seeded"] == {"skip"}
    assert by_law["gof"] == {"pass"} and by_law["zero_mass"] == {"pass"}
    assert "pass" in by_law["plackett_luce"]
    skipped = next(r for r in run.records if r.law == "coupling_seeded")
    assert "stream of its own" in skipped.statement


@pytest.mark.parametrize(
    "fn, laws",
    [
        ("fast_sample_frozen_offsets", {"gof", "determinism"}),
        ("fast_sample_seed_index0", {"plackett_luce", "batch_invariance"}),
    ],
)
def test_flashinfer_seeding_bugs_fail_the_laws_they_break(fn, laws):
    """Frozen offsets: offsets + 1 repeats every draw (determinism), and one seed over many offsets
    draws one token (gof). seeds[0] for every row: a request's draws depend on its batch
    (batch_invariance), and many seeds at one offset draw one pair (plackett_luce)."""
    run = _run(GUMBEL + fn)
    assert {r.law for r in run.failed} == laws, [(r.case, r.law, r.status) for r in run.records]


def test_cli_exit_status_follows_the_family():
    assert _verify("--target", GUMBEL + "fast_sample_own_stream", "--only", "V7") == 0
    assert _verify("--target", GUMBEL + "fast_sample_frozen_offsets", "--only", "V7") == 1


def test_target_given_as_a_file_path_with_family_flag(tmp_path):
    """path.py:FUNCTION, the family from --family (the file's function declares none)."""
    src = tmp_path / "my_sampler.py"
    src.write_text(
        "from specsample.verify.examples.gumbel_own_stream import _race\n"
        "def my_fast_sample(probs, num_samples, seeds, offsets):\n"
        "    return _race(probs, num_samples, seeds, offsets)\n"
        "my_fast_sample.specsample_inputs = 'numpy'\n"
    )
    target = f"{src}:my_fast_sample"
    assert _verify("--target", target, "--family", "gumbel", "--only", "zero_mass", "V7") == 0
    # read as a chain sampler (the default), the same function cannot be called: not a pass
    assert _verify("--target", target, "--only", "edge") != 0


def test_logits_own_stream_passes_and_greedy_at_t1_fails():
    ok = _run(LOGITS + "rejection_sample_logits_own_stream", only=[ONE_LOGITS_CASE])
    assert {(r.law, r.status) for r in ok.records} == {
        ("coupling_seeded", "skip"),
        ("greedy", "pass"),
        ("conditional", "pass"),
    }, [(r.law, r.status, r.detail) for r in ok.records]
    bad = _run(LOGITS + "rejection_sample_logits_greedy_at_t1", only=[ONE_LOGITS_CASE + "/greedy"])
    assert [r.law for r in bad.failed] == ["greedy"]


@pytest.mark.parametrize("family", ["chain", "gumbel", "logits"])
def test_family_without_target_keeps_that_family_of_the_adapters(family):
    """`--family` without `--target` plans only the adapters' samplers of that family (the H200's
    `--budget full` runs each family in a call of its own)."""
    plan, _ = runner.plan_samplers(("reference", "specsample"), None, "cpu", family)
    assert plan and {fam for fam, _ in plan} == {family}
    assert len(plan) == (3 if family == "gumbel" else 2)  # reference (+ grouped for gumbel), specsample
    full, _ = runner.plan_samplers(("reference", "specsample"), None, "cpu")
    assert [s.name for fam, s in full if fam == family] == [s.name for _, s in plan]


def test_family_no_adapter_has_is_a_usage_error(capsys):
    """The engines' adapters wrap chain samplers only: asking them for Gumbel certifies nothing."""
    assert _verify("--adapter", "sglang", "--family", "gumbel") == 2
    assert "no gumbel sampler" in capsys.readouterr().err


def test_family_without_target_runs_only_that_family():
    """runner.verify with a family: the logits edge certificates run, no chain or Gumbel certificate does."""
    ci = get_budget("ci")
    run = runner.verify(ci, adapters=("reference",), device="cpu", family="logits", only=["edge"])
    assert run.records and {r.case for r in run.records} == {"logits-edge-cases"}, [
        (r.case, r.law) for r in run.records
    ]


def test_unknown_declared_family_exits_2(tmp_path, capsys):
    src = tmp_path / "odd.py"
    src.write_text("def f(*a, **k):\n    return None\nf.specsample_family = 'beam'\n")
    assert _verify("--target", f"{src}:f") == 2
    assert "beam" in capsys.readouterr().err


def test_declared_noise_contracts_are_checked():
    with pytest.raises(ValueError, match="noise"):
        GumbelSampler(G.fast_sample_own_stream, "x", "numpy", noise="philox")
    with pytest.raises(ValueError, match="noise"):
        LogitsSampler(L.rejection_sample_logits_own_stream, "x", noise="token")


def test_plugin_reads_the_family_from_the_function(specsample_certify):
    cert = specsample_certify(G.fast_sample_own_stream, only=["V7"])
    assert {r.law for r in cert.records} >= {"gof", "plackett_luce", "coupling_seeded"}
    cert.assert_passed()
    bad = specsample_certify(L.rejection_sample_logits_greedy_at_t1, laws=["greedy"], only=[ONE_LOGITS_CASE])
    with pytest.raises(AssertionError, match="laws: greedy"):
        bad.assert_passed()


def test_law_selects_by_exact_name_where_only_matches_substrings():
    """`--only joint` also runs every law of the `disjoint` case (its name contains "joint": H200 run
    210); `laws=["joint"]` runs the joint law alone, on every case."""
    ci = get_budget("ci")
    cases = {"disjoint_V10_K2", "sparse_V32_K2"}

    def names(**kw):
        recs = runner.certify_sampler_family(
            "chain", runner.plan_samplers(("reference",), None, "cpu", "chain")[0][0][1], ci,
            case_filter=lambda c: c.name in cases, **kw,
        )  # fmt: skip
        return {(r.case, r.law) for r in recs}

    by_token = names(only=["joint"])
    assert ("disjoint_V10_K2", "grid") in by_token and ("sparse_V32_K2", "joint") in by_token
    assert names(laws=["joint"]) == {("disjoint_V10_K2", "joint"), ("sparse_V32_K2", "joint")}


def test_unknown_law_is_a_usage_error(capsys, specsample_certify):
    """A misspelt law certifies nothing: the CLI exits 2, the pytest plugin raises, both naming it."""
    assert _verify("--law", "jointt", "--adapter", "reference") == 2
    assert "unknown jointt" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown jointt"):
        specsample_certify(G.fast_sample_own_stream, family="gumbel", laws=["jointt"])
