"""Run one public op on (possibly hostile) values and check everything that must hold whatever the
values are; shared by the adversarial-corpus tests and the hypothesis fuzzers.

Each `check_*` function:
  1. runs the op under the CPU memcheck (reliability_memcheck.py): no access outside the tensors
     of any launch;
  2. checks the output contract from metadata: shapes, dtypes, every id in [-1, V) (chain/logits
     tokens) or [-1, V) (Gumbel indices), -1 padding after the emitted token, num_accepted in
     [0, clamp(n, 0, K)], an invalid row emits -1;
  3. compares with the float64 reference of specsample.reference on the same random numbers:
     tokens, num_accepted, fallback and valid must be equal on every row the reference does not
     flag as within float tolerance of a decision boundary (chain/logits `ambiguous`; Gumbel:
     best-score margin <= REL_TOL). Ambiguous rows are counted and returned, and must be rare.

The float tolerances: the kernels compute in float32 on inputs that are exact in float64, so a
decision can flip only when the compared quantities agree to a few float32 ulps times the number of
terms summed. CHAIN_TOL = (V + 8) 2^-24 relative bounds a float32 cumsum over V terms with a
few roundings on top; LOGITS_TOL = 1e-4 (the logits reference's own default, which accounts for
exp/log in float32); Gumbel REL_TOL = 1e-5 on the score margin (float32 log/exp noise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from reliability_memcheck import memcheck

import specsample as ss
from specsample.reference import gumbel as rg
from specsample.reference.chain import chain_rejection_reference, chain_seeded_uniforms
from specsample.reference.logits import rejection_sample_logits_reference

LOGITS_TOL = 1e-4
GUMBEL_REL_TOL = 1e-5


@dataclass
class Outcome:
    """What one checked call did: rows, rows flagged ambiguous, rows per outcome."""

    rows: int
    ambiguous: int
    valid: int
    fallback: int
    launches: int


def np64(t: torch.Tensor | None) -> np.ndarray | None:
    """Exact float64 (or int64) numpy copy of a tensor (bf16/fp16 widen exactly)."""
    if t is None:
        return None
    t = t.detach().cpu()
    return t.double().numpy() if t.is_floating_point() else t.long().numpy()


def _check_chain_like(label, res, x, n, vocab, ref, ambiguous) -> tuple[int, int, int]:
    batch, k_plus_1 = res.tokens.shape[0], x.shape[1] + 1
    num_k = k_plus_1 - 1
    assert res.tokens.dtype == torch.int32 and tuple(res.tokens.shape) == (batch, k_plus_1), label
    assert res.num_accepted.dtype == torch.int32 and tuple(res.num_accepted.shape) == (batch,), label
    assert res.fallback.dtype == torch.bool and res.valid.dtype == torch.bool, label
    tokens, a = res.tokens.long().numpy(), res.num_accepted.long().numpy()
    fallback, valid = res.fallback.numpy(), res.valid.numpy()
    outside = (tokens < -1) | (tokens >= vocab)
    assert not outside.any(), (
        f"{label}: ids outside [-1, {vocab}) in rows {np.flatnonzero(outside.any(1))[:5]}"
    )
    n_eff = np.full(batch, num_k) if n is None else np.clip(np64(n), 0, num_k)
    assert ((a >= 0) & (a <= n_eff)).all(), f"{label}: num_accepted outside [0, n]: {a}, n {n_eff}"
    cols = np.arange(k_plus_1)[None, :]
    emitted = tokens[np.arange(batch), a]
    assert (tokens[cols > a[:, None]] == -1).all(), f"{label}: tokens after the emitted one are not -1"
    assert ((emitted == -1) == ~valid).all(), f"{label}: valid must be exactly 'emitted token != -1'"
    if num_k:
        x64 = np64(x)
        prefix = cols[:, :num_k] < a[:, None]
        assert (tokens[:, :num_k][prefix] == x64[prefix]).all(), f"{label}: accepted prefix != drafts"
    keep = ~ambiguous
    for name, got, want in (("tokens", tokens, ref.tokens), ("num_accepted", a, ref.num_accepted),
                            ("fallback", fallback, ref.fallback), ("valid", valid, ref.valid)):  # fmt: skip
        differs = (np.asarray(got).reshape(batch, -1) != np.asarray(want).reshape(batch, -1)).any(1)
        diff = np.flatnonzero(differs & keep)
        assert diff.size == 0, (
            f"{label}: {name} differs from the float64 reference on {diff.size} unambiguous rows, first "
            f"{diff[:5].tolist()}: kernel {np.asarray(got)[diff[:3]].tolist()}, "
            f"reference {np.asarray(want)[diff[:3]].tolist()}"
        )
    return int(ambiguous.sum()), int(valid.sum()), int(fallback.sum())


def check_chain(p, x, q=None, n=None, *, uniforms=None, seeds=None, offsets=None, label="chain") -> Outcome:
    """chain_rejection_sample on uniforms or seeds/offsets, checked against the float64 reference."""
    with memcheck() as report:
        res = ss.chain_rejection_sample(p, x, q, num_draft_tokens=n, uniforms=uniforms, seeds=seeds,
                                        offsets=offsets)  # fmt: skip
    report.assert_clean()
    batch, k_plus_1, vocab = p.shape
    u = np64(uniforms) if seeds is None else chain_seeded_uniforms(np64(seeds), np64(offsets), k_plus_1 - 1)
    ref = chain_rejection_reference(np64(p), np64(x), np64(q), uniforms=u,
                                    num_draft_tokens=np64(n), tol=(vocab + 8) * 2.0**-24)  # fmt: skip
    amb, valid, fallback = _check_chain_like(label, res, x, n, vocab, ref, ref.ambiguous)
    return Outcome(batch, amb, valid, fallback, report.launches)


def check_logits(lg, x, dl=None, n=None, *, temperature, seeds, offsets, label="logits") -> Outcome:
    """rejection_sample_logits checked against its float64 reference (same Philox words)."""
    with memcheck() as report:
        res = ss.rejection_sample_logits(lg, x, dl, temperature=temperature, seeds=seeds, offsets=offsets,
                                         num_draft_tokens=n)  # fmt: skip
    report.assert_clean()
    batch, _, vocab = lg.shape
    ref = rejection_sample_logits_reference(np64(lg), np64(x), np64(dl), temperature=np64(temperature),
                                            seeds=np64(seeds), offsets=np64(offsets),
                                            num_draft_tokens=np64(n), tol=LOGITS_TOL)  # fmt: skip
    amb, valid, fallback = _check_chain_like(label, res, x, n, vocab, ref, ref.ambiguous)
    return Outcome(batch, amb, valid, fallback, report.launches)


def _check_ids(label, got: np.ndarray, want: np.ndarray, near: np.ndarray, vocab: int) -> int:
    """ids in [-1, V) everywhere; equal to the reference on rows that are not a near-tie."""
    outside = (got < -1) | (got >= vocab)
    assert not outside.any(), (
        f"{label}: ids outside [-1, {vocab}) in rows {np.flatnonzero(outside.any(-1))[:5]}"
    )
    diff = np.flatnonzero((got.reshape(len(got), -1) != want.reshape(len(want), -1)).any(1) & ~near)
    assert diff.size == 0, (
        f"{label}: differs from the float64 reference on {diff.size} rows without a near-tie, first "
        f"{diff[:5].tolist()}: kernel {got[diff[:3]].tolist()}, reference {want[diff[:3]].tolist()}"
    )
    return int(near.sum())


def check_fast_sample(probs, num_samples, *, seeds, offsets, label="fast_sample") -> Outcome:
    """fast_sample on seeds/offsets checked against fast_sample_reference (same Philox noise)."""
    with memcheck() as report:
        sample_p, sample_index = ss.fast_sample(probs, num_samples, seeds=seeds, offsets=offsets)
    report.assert_clean()
    batch, vocab = probs.shape
    assert sample_index.dtype == torch.int64 and tuple(sample_index.shape) == (batch, num_samples), label
    assert sample_p.dtype == probs.dtype and tuple(sample_p.shape) == (batch, num_samples), label
    p64 = np64(probs)
    _, ref_ids = rg.fast_sample_reference(p64, np64(seeds), np64(offsets), num_samples)
    seeds64, offsets64 = np.broadcast_to(np64(seeds), (batch,)), np.broadcast_to(np64(offsets), (batch,))
    noise = rg.gumbel_exponentials(seeds64, offsets64, vocab)
    margin = rg.race_margin(p64, noise, num_samples)
    got = sample_index.numpy()
    amb = _check_ids(label, got, ref_ids, margin <= GUMBEL_REL_TOL, vocab)
    # sample_p is probs at the index (exact), 0 where -1; a returned id always has mass
    at = np.take_along_axis(p64, np.maximum(got, 0), axis=1)
    want_p = np.where(got >= 0, at, 0.0)
    assert np.array_equal(np64(sample_p), want_p), f"{label}: sample_p is not probs[index] (0 for -1)"
    has_mass = (at > 0) & np.isfinite(at)
    assert has_mass[got >= 0].all(), f"{label}: a returned id has no mass"
    valid = int((got[:, 0] >= 0).sum())
    return Outcome(batch, amb, valid, 0, report.launches)


def check_sample_from_logits(logits, temperature, *, seeds, offsets, probs_out=None,
                             label="sample_from_logits") -> Outcome:  # fmt: skip
    """sample_from_logits checked against sample_from_logits_reference; probs_out (when given)
    against softmax_with_temperature (one-hot of the returned token on greedy rows)."""
    with memcheck() as report:
        token = ss.sample_from_logits(logits, temperature, seeds=seeds, offsets=offsets, probs_out=probs_out)
    report.assert_clean()
    batch, vocab = logits.shape
    assert token.dtype == torch.int64 and tuple(token.shape) == (batch,), label
    l64 = np64(logits)
    temps = np64(temperature) if isinstance(temperature, torch.Tensor) else np.float64(temperature)
    seeds64 = np.broadcast_to(np64(seeds), (batch,))
    offsets64 = np.broadcast_to(np64(offsets), (batch,))
    want = rg.sample_from_logits_reference(l64, temps, seeds64, offsets64)
    noise = rg.gumbel_exponentials(seeds64, offsets64, vocab)
    t = np.broadcast_to(np.asarray(temps, dtype=np.float64).reshape(-1), (batch,))
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.where(t > 0, 1.0 / np.where(t > 0, t, 1.0), 1.0)
        finite = np.where(np.isfinite(l64), np.abs(l64), 0.0).max(axis=1, initial=0.0)
        # the gap is absolute in log space: float32 error of l / T plus that of log E. An exact tie
        # (gap 0: equal logits on greedy rows, or noise absorbed by |l| / T >> 1) is not ambiguous:
        # both sides must then pick the smallest id.
        gap = rg.logits_margin(l64, temps, noise)
        near = (gap <= 4 * 2.0**-24 * finite * scale + 4e-6) & (gap > 0)
    got = token.numpy()
    amb = _check_ids(label, got[:, None], want[:, None], near, vocab)
    if probs_out is not None:
        soft = rg.softmax_with_temperature(l64, temps)
        greedy = ~(t > 0)
        soft[greedy] = 0.0
        hot = got[greedy]
        soft[np.flatnonzero(greedy)[hot >= 0], hot[hot >= 0]] = 1.0
        err = np.abs(np64(probs_out) - soft).max(initial=0.0)
        assert err < 1e-5, f"{label}: probs_out differs from softmax(l / T) by {err:.2e}"
    return Outcome(batch, amb, int((got >= 0).sum()), 0, report.launches)


def check_renorm(draft_logits, temperature, label="renorm_draft_probs") -> Outcome:
    """renorm_draft_probs against softmax_with_temperature: rows sum to 1 or are all 0, no NaN."""
    with memcheck() as report:
        out = ss.renorm_draft_probs(draft_logits, temperature)
    report.assert_clean()
    assert out.dtype == torch.float32 and out.shape == draft_logits.shape, label
    vocab = draft_logits.shape[-1]
    l64 = np64(draft_logits).reshape(-1, vocab)
    rows = l64.shape[0]
    if isinstance(temperature, torch.Tensor) and temperature.numel() > 1:
        lead = draft_logits.shape[:-1]
        t = np64(temperature).reshape(tuple(temperature.shape) + (1,) * (len(lead) - temperature.dim()))
        temps = np.broadcast_to(t, lead).reshape(rows)
    else:
        temps = float(temperature.reshape(-1)[0]) if isinstance(temperature, torch.Tensor) else temperature
    want = rg.softmax_with_temperature(l64, temps)
    got = np64(out).reshape(rows, vocab)
    assert np.isfinite(got).all() and (got >= 0).all(), f"{label}: NaN, inf or negative output"
    err = np.abs(got - want).max(initial=0.0)
    assert err < 1e-5, f"{label}: differs from softmax(l / T) by {err:.2e}"
    return Outcome(rows, 0, int((want.sum(1) > 0).sum()), 0, report.launches)
