"""Multiple testing (Holm, Bonferroni), the p-value meta-test's edges, and seeding."""

import numpy as np
import pytest

from specsample.stats import bonferroni, holm, pvalues_uniform, repro_line, seed_stream, test_seed


def test_holm_and_bonferroni_decisions():
    p = [0.01, 0.02, 0.03, 0.5]
    assert bonferroni(p, 0.05).tolist() == [True, False, False, False]
    assert holm(p, 0.05).tolist() == [True, False, False, False]
    p = [0.011, 0.012, 0.013, 0.001]  # Holm: 0.001 <= .0125, .011 <= .0167, .012 <= .025, .013 <= .05
    assert holm(p, 0.05).tolist() == [True, True, True, True]
    assert bonferroni(p, 0.05).tolist() == [True, True, False, True]


def test_holm_gate_equals_bonferroni_and_rejects_a_superset():
    """Holm rejects something iff Bonferroni does (so its family-wise error equals Bonferroni's,
    <= alpha) and always rejects a superset; checked on 2,000 p-vectors skewed towards 0."""
    rng = np.random.default_rng(1)
    for _ in range(2_000):
        p = rng.random(5) ** 3
        assert holm(p, 0.05).any() == bonferroni(p, 0.05).any()
        assert np.all(holm(p, 0.05) >= bonferroni(p, 0.05))


def test_pvalues_uniform_fails_on_piled_up_small_pvalues():
    p = np.linspace(0.0005, 0.9995, 1000)  # perfectly uniform grid passes
    assert pvalues_uniform(p, 1e-6).passed
    with pytest.raises(AssertionError, match=r"(?s)not uniform.*decile counts"):
        pvalues_uniform(np.concatenate([p, np.full(300, 1e-4)]), 1e-6)
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        pvalues_uniform([0.5, 1.5], 1e-6)


def test_seed_is_stable_and_salted(monkeypatch):
    monkeypatch.delenv("SPECSAMPLE_SEED", raising=False)
    monkeypatch.delenv("SPECSAMPLE_VARY_SEED", raising=False)
    a = test_seed("tests/x.py::test_a")
    assert a == test_seed("tests/x.py::test_a")
    assert a != test_seed("tests/x.py::test_b")
    assert 0 <= a < 2**63
    salted = test_seed("tests/x.py::test_a", salt="gof")
    assert salted != a
    assert repro_line(salted) == f"reproduce with: SPECSAMPLE_SEED={a}"


def test_seed_env_overrides(monkeypatch, capsys):
    monkeypatch.setenv("SPECSAMPLE_SEED", "12345")
    assert test_seed("anything") == 12345
    assert test_seed("anything", salt="s") == test_seed("other", salt="s")
    monkeypatch.delenv("SPECSAMPLE_SEED")
    monkeypatch.setenv("SPECSAMPLE_VARY_SEED", "1")
    s1, s2 = test_seed("t"), test_seed("t")
    assert s1 != s2  # fresh entropy (equal with probability 2^-63)
    assert "SPECSAMPLE_VARY_SEED" in capsys.readouterr().err
    monkeypatch.setenv("SPECSAMPLE_SEED", "not-a-number")
    with pytest.raises(ValueError, match="SPECSAMPLE_SEED"):
        test_seed("t")


def test_seed_stream_is_deterministic_and_distinct():
    a = seed_stream(7)
    b = seed_stream(7)
    first = [next(a) for _ in range(50)]
    assert first == [next(b) for _ in range(50)]
    assert len(set(first)) == 50 and all(0 <= s < 2**63 for s in first)
