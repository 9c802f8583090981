"""The logits edge, determinism and batch-invariance certificates (verify/logits_edges.py): the float64
reference, an own-stream sampler and our kernel (interpreter) pass them, and each sub-check fails on a
sampler with the bug it is there for. Deterministic verdicts: no alpha (the freshness threshold's
margin is checked by test_freshness_threshold_design)."""

import numpy as np
import pytest

from specsample.reference.logits import rejection_sample_logits_reference
from specsample.verify.budgets import get_budget
from specsample.verify.cases import case_rng
from specsample.verify.examples.logits_own_stream import rejection_sample_logits_own_stream
from specsample.verify.logits_edges import (
    FRESH_MAX_SAME,
    _requests,
    certify_logits_batch_invariance,
    certify_logits_determinism,
    certify_logits_edges,
    fresh_fraction,
)
from specsample.verify.logits_family import LogitsSampler, mutable_logits_sampler, specsample_logits_sampler

CI = get_budget("ci")


def _reference(lg, ids, dl, *, temperature, seeds, offsets, num_draft_tokens=None):
    return rejection_sample_logits_reference(
        lg, ids, dl, temperature=temperature, seeds=seeds, offsets=offsets, num_draft_tokens=num_draft_tokens
    )


def _nan_is_a_value(lg, ids, dl, **kw):  # NaN logits read as a large finite logit
    return _reference(np.nan_to_num(np.asarray(lg), nan=50.0), ids, dl, **kw)


def _empty_row_emits_token0(lg, ids, dl, **kw):  # vLLM's answer to a residual without mass
    res = _reference(lg, ids, dl, **kw)
    rows = np.arange(res.tokens.shape[0])
    tokens = res.tokens.copy()
    empty = tokens[rows, res.num_accepted] < 0
    tokens[rows[empty], res.num_accepted[empty]] = 0
    return res._replace(tokens=tokens, valid=np.ones_like(res.valid))


def _invalid_ids_clipped(lg, ids, dl, **kw):  # ids folded into range instead of rejected
    res = _reference(lg, np.clip(ids, 0, np.asarray(lg).shape[2] - 1), dl, **kw)
    keep = np.arange(res.tokens.shape[1] - 1)[None, :] < res.num_accepted[:, None]
    tokens = res.tokens.copy()
    tokens[:, :-1] = np.where(keep, np.asarray(ids), tokens[:, :-1])  # echo the caller's ids
    return res._replace(tokens=tokens)


def _bad_temperature_is_one(lg, ids, dl, *, temperature, **kw):
    t = np.asarray(temperature, np.float64)
    return _reference(lg, ids, dl, temperature=np.where((t >= 0) & (t < np.inf), t, 1.0), **kw)


def _ragged_ignored(lg, ids, dl, *, num_draft_tokens=None, **kw):
    return _reference(lg, ids, dl, **kw)


@pytest.mark.parametrize(
    "fn, check",
    [
        (_nan_is_a_value, "nonfinite_logits"),
        (_empty_row_emits_token0, "no_mass_rows"),
        (_invalid_ids_clipped, "invalid_ids"),
        (_bad_temperature_is_one, "bad_temperature"),
        (_ragged_ignored, "ragged"),
    ],
)
def test_each_sub_check_fails_on_its_bug(fn, check):
    rec = certify_logits_edges(LogitsSampler(fn, fn.__name__), CI)
    assert rec.status == "fail" and f"{check}" in rec.detail, rec.detail


def test_reference_and_own_stream_sampler_pass():
    for sampler in (
        mutable_logits_sampler(),
        LogitsSampler(rejection_sample_logits_own_stream, "own", noise=None),
    ):
        rec = certify_logits_edges(sampler, CI)
        assert rec.status == "pass", rec.detail


def test_out_of_vocab_mutant_is_named():
    rec = certify_logits_edges(mutable_logits_sampler({"nan_logits_out_of_vocab"}), CI)
    assert rec.status == "fail" and "emitted id 40 outside [0, 40)" in rec.detail, rec.detail


def test_our_kernel_passes():
    rec = certify_logits_edges(specsample_logits_sampler("auto"), CI)
    assert rec.status == "pass", rec.detail


def _offset_ignored(lg, ids, dl, *, offsets, **kw):  # FlashInfer's frozen randomness
    return _reference(lg, ids, dl, offsets=np.zeros_like(np.asarray(offsets)), **kw)


_CALLS = []


def _fresh_every_call(lg, ids, dl, *, seeds, **kw):  # a stream that is not a function of the seeds
    _CALLS.append(1)
    return _reference(lg, ids, dl, seeds=np.asarray(seeds) + len(_CALLS), **kw)


def _seed_index0(lg, ids, dl, *, seeds, **kw):  # FlashInfer's per-request seeds read at index 0
    seeds = np.asarray(seeds)
    return _reference(lg, ids, dl, seeds=np.full_like(seeds, seeds[0]), **kw)


@pytest.mark.parametrize(
    "fn, law, words",
    [
        (_offset_ignored, "determinism", "offset ignored"),
        (_fresh_every_call, "determinism", "two identical calls differ"),
        (_seed_index0, "batch_invariance", "changed some request's outputs"),
    ],
)
def test_determinism_and_batch_invariance_fail_on_their_bugs(fn, law, words):
    cert = {"determinism": certify_logits_determinism, "batch_invariance": certify_logits_batch_invariance}[
        law
    ]
    rec = cert(LogitsSampler(fn, fn.__name__), CI)
    assert rec.status == "fail" and words in rec.detail, rec.detail


def test_freshness_threshold_design():
    """The determinism certificate fails a sampler when more than FRESH_MAX_SAME of its sampled rows
    repeat after offsets + 1. On the certificate's own requests the reference repeats far fewer (about
    0.2), so the threshold cannot fail a correct sampler (Hoeffding bound in logits_edges.py)."""
    rng = case_rng("logits-determinism", 0)
    ref = mutable_logits_sampler()
    for classic in (True, False):
        lg, ids, dl, temps, seeds, offsets = _requests(rng, 512, classic)
        a, b = (ref(lg, ids, dl, temps, seeds, offsets + d) for d in (0, 1))
        assert fresh_fraction(a, b, temps) < 0.4 < FRESH_MAX_SAME


def test_reference_and_kernel_pass_determinism_and_batch_invariance():
    for sampler in (mutable_logits_sampler(), specsample_logits_sampler("auto")):
        for cert in (certify_logits_determinism, certify_logits_batch_invariance):
            rec = cert(sampler, CI)
            assert rec.status == "pass", (sampler.name, rec.law, rec.detail)
