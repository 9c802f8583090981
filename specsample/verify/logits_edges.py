"""Deterministic certificates for logits samplers (`rejection_sample_logits` signature): edge semantics,
determinism and batch invariance. No randomness in the verdicts: every property below holds for any
random stream, so a sampler with a stream of its own is held to them too (docs/semantics.md, the
logits path).

Every sub-check asks of each row (the structure): ids in [-1, V) (vLLM's NaN logits gave
out-of-vocabulary tokens, #20531); 0 <= a <= n; the first a tokens are the drafts and each has a finite
target logit (and, classic, a finite draft logit: q(x) > 0); the token at a is -1 exactly when its row
has no finite logit, otherwise one with a finite logit; -1 after it; `valid` iff that token is >= 0.
Temperature-0 rows and rows with an invalid temperature (negative, NaN, inf) must equal the float64
reference exactly, since they draw nothing. The sub-checks differ in their inputs:
- nonfinite_logits  NaN / +inf / -inf logits sprinkled in target and draft rows, drafts often on them
- no_mass_rows      target rows with no finite logit at the bonus position or the first
- invalid_ids       ids -1, V, V + 7, -2^31, 2^31 - 1 and 2^40 between valid ones
- bad_temperature   T in {-1, NaN, inf} beside greedy and sampled rows
- ragged            num_draft_tokens in [0, K]; greedy rows whose drafts are all the argmax accept n
determinism: the same call twice gives the same outputs, and advancing the offsets draws afresh.
batch_invariance: a request's outputs do not depend on its batch mates (permuted, halved, alone, or
beside rows of NaN logits and invalid temperatures).
"""

from __future__ import annotations

import numpy as np

from specsample.reference.logits import rejection_sample_logits_reference
from specsample.verify.cases import case_rng, round_to_dtype
from specsample.verify.certify import CertRecord, _structure_violations, exact_record, law_seed

VOCAB, K, ROWS = 40, 3, 256
# the case names of the certificates below in reports (the chain family's are "edge-cases", "seeded-batch")
LOGITS_GLOBAL_CASE = {
    "edge": "logits-edge-cases",
    "determinism": "logits-seeded-batch",
    "batch_invariance": "logits-seeded-batch",
}
_BAD_T = (-1.0, np.nan, np.inf)


def _logits(rng, rows: int, k1: int) -> np.ndarray:
    return round_to_dtype(rng.normal(0.0, 2.0, (rows, k1, VOCAB)), "float32")


def _sprinkle(rng, lg: np.ndarray, share: float) -> np.ndarray:
    """lg with about `share` of its entries NaN, +inf or -inf."""
    out = lg.copy()
    hit = rng.random(lg.shape) < share
    out[hit] = rng.choice([np.nan, np.inf, -np.inf], int(hit.sum()))
    return out


def _batch(rng, rows: int = ROWS, classic: bool = True):
    lg = _logits(rng, rows, K + 1)
    dl = round_to_dtype(lg[:, :K] + rng.normal(0.0, 1.0, (rows, K, VOCAB)), "float32") if classic else None
    temps = rng.choice([0.0, 0.6, 1.4], rows)
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = rng.integers(0, 1 << 40, rows, dtype=np.int64)
    return lg, dl, temps, seeds, offsets


def _argmax_drafts(lg: np.ndarray, rng, share: float) -> np.ndarray:
    """Drafts equal to the row's argmax with probability `share` (so greedy rows accept some), else
    uniform ids."""
    arg = np.argmax(np.where(np.isfinite(lg[:, :K]), lg[:, :K], -np.inf), axis=2)
    return np.where(rng.random(arg.shape) < share, arg, rng.integers(0, VOCAB, arg.shape))


def _count(mask) -> int:
    return int(np.sum(mask))


def _structure(label, out, lg, ids, dl, temps, n) -> list[str]:
    """The row properties every sampler must have, whatever its random stream (module docstring): the
    chain's output structure (certify._structure_violations), then what the logits say about mass."""
    rows, k1, vocab = lg.shape
    k = k1 - 1
    if out.tokens.shape != (rows, k1):
        return [f"{label}: tokens of shape {out.tokens.shape}, want {(rows, k1)}"]
    n = np.full(rows, k) if n is None else np.clip(n, 0, k)
    broken = _structure_violations(out, ids, n, vocab)
    if broken:
        return [f"{label}: {broken}"]
    errs = []
    tok, a = out.tokens, out.num_accepted
    r = np.arange(rows)
    finite = np.isfinite(lg)
    if k:
        acc = np.arange(k)[None, :] < a[:, None]
        safe = np.clip(ids, 0, vocab - 1)
        mass = finite[r[:, None], np.arange(k)[None, :], safe] & (ids >= 0) & (ids < vocab)
        if dl is not None:  # sampled rows accept only where q(x) > 0; greedy rows ignore the draft's logits
            mass &= np.isfinite(dl[r[:, None], np.arange(k)[None, :], safe]) | (temps == 0)[:, None]
        if np.any(acc & ~mass):
            bad = np.unique(ids[acc & ~mass])[:4].tolist()
            errs.append(f"{label}: drafts without mass accepted (ids {bad}: invalid or non-finite logit)")
    emitted = tok[r, a]
    ok_t = (temps >= 0) & (temps < np.inf)  # NaN compares False
    has_mass = finite[r, a].any(axis=1) & ok_t
    if np.any(has_mass & (emitted < 0)):
        errs.append(
            f"{label}: -1 emitted from a row with finite logits in {_count(has_mass & (emitted < 0))} rows"
        )
    if np.any(~has_mass & (emitted >= 0)):
        errs.append(f"{label}: a token emitted from a row without a finite logit or a valid temperature")
    got_mass = finite[r, a, np.clip(emitted, 0, vocab - 1)]
    if np.any((emitted >= 0) & ~got_mass):
        bad = sorted(set(emitted[(emitted >= 0) & ~got_mass].tolist()))[:4]
        errs.append(f"{label}: tokens with a non-finite target logit emitted: {bad}")
    if np.any(out.valid != (emitted >= 0)):  # _structure_violations checks one direction only
        errs.append(
            f"{label}: `valid` disagrees with the emitted token in {_count(out.valid != (emitted >= 0))} rows"
        )
    return errs


def _exact_rows(label, out, ref, where) -> list[str]:
    """Rows that draw nothing (greedy, invalid temperature) must equal the reference."""
    differ = where & (
        np.any(out.tokens != ref.tokens, axis=1)
        | (out.num_accepted != ref.num_accepted)
        | (out.valid != ref.valid)
    )
    if not differ.any():
        return []
    b = int(np.flatnonzero(differ)[0])
    return [
        f"{label}: {int(differ.sum())} greedy / invalid-temperature rows differ from the reference, e.g. "
        f"{out.tokens[b].tolist()} vs {ref.tokens[b].tolist()}"
    ]


def _run(sampler, label, lg, ids, dl, temps, seeds, offsets, n=None) -> list[str]:
    out = sampler(lg, ids, dl, temps, seeds, offsets, n=n)
    ref = rejection_sample_logits_reference(
        lg, ids, dl, temperature=temps, seeds=seeds, offsets=offsets, num_draft_tokens=n
    )
    drawless = ~((temps > 0) & (temps < np.inf))
    return _structure(label, out, lg, ids, dl, temps, n) + _exact_rows(label, out, ref, drawless)


def _check_nonfinite_logits(sampler, rng) -> list[str]:
    errs = []
    for classic in (True, False):
        lg, dl, temps, seeds, offsets = _batch(rng, classic=classic)
        lg = _sprinkle(rng, lg, 0.25)
        ids = _argmax_drafts(lg, rng, 0.5)
        hole = rng.random(ids.shape) < 0.3  # drafts on a non-finite target logit, when the row has one
        nonfinite = ~np.isfinite(lg[:, :K])
        pick = np.argmax(nonfinite * rng.random(nonfinite.shape), axis=2)
        ids = np.where(hole & nonfinite.any(axis=2), pick, ids)
        if classic:
            dl = _sprinkle(rng, dl, 0.1)
        label = f"nonfinite_logits ({'classic' if classic else 'one-hot'})"
        errs += _run(sampler, label, lg, ids, dl, temps, seeds, offsets)
    return errs


def _check_no_mass_rows(sampler, rng) -> list[str]:
    errs = []
    for classic in (True, False):
        lg, dl, temps, seeds, offsets = _batch(rng, classic=classic)
        ids = _argmax_drafts(lg, rng, 1.0)  # greedy rows reach the bonus row
        empty = rng.choice([np.nan, -np.inf, np.inf], (ROWS, VOCAB))
        lg[: ROWS // 2, K] = empty[: ROWS // 2]  # no mass at the bonus position
        lg[ROWS // 2 :, 0] = empty[ROWS // 2 :]  # no mass at the first: every draft 0 is rejected
        label = f"no_mass_rows ({'classic' if classic else 'one-hot'})"
        errs += _run(sampler, label, lg, ids, dl, temps, seeds, offsets)
    return errs


def _check_invalid_ids(sampler, rng) -> list[str]:
    lg, dl, temps, seeds, offsets = _batch(rng)
    ids = _argmax_drafts(lg, rng, 0.8)
    bad = np.array([-1, VOCAB, VOCAB + 7, -(1 << 31), (1 << 31) - 1, 1 << 40], np.int64)
    where = rng.random(ids.shape) < 0.35
    ids = np.where(where, bad[rng.integers(0, bad.size, ids.shape)], ids)
    errs = _run(sampler, "invalid_ids (classic)", lg, ids, dl, temps, seeds, offsets)
    return errs + _run(sampler, "invalid_ids (one-hot)", lg, ids, None, temps, seeds, offsets)


def _check_bad_temperature(sampler, rng) -> list[str]:
    lg, dl, temps, seeds, offsets = _batch(rng)
    ids = _argmax_drafts(lg, rng, 0.8)
    temps = np.where(np.arange(ROWS) % 2 == 0, np.array(_BAD_T)[np.arange(ROWS) % 3], temps)
    return _run(sampler, "bad_temperature", lg, ids, dl, temps, seeds, offsets)


def _check_ragged(sampler, rng) -> list[str]:
    lg, dl, temps, seeds, offsets = _batch(rng)
    ids = _argmax_drafts(lg, rng, 1.0)
    n = rng.integers(0, K + 1, ROWS)
    errs = _run(sampler, "ragged", lg, ids, dl, temps, seeds, offsets, n=n)
    return errs


LOGITS_EDGE_CHECKS = {
    "nonfinite_logits": _check_nonfinite_logits,
    "no_mass_rows": _check_no_mass_rows,
    "invalid_ids": _check_invalid_ids,
    "bad_temperature": _check_bad_temperature,
    "ragged": _check_ragged,
}


def certify_logits_edges(sampler, budget, salt: int = 0) -> CertRecord:
    """Every edge sub-check; the certificate fails naming every one that failed."""
    errs = []
    for name, check in LOGITS_EDGE_CHECKS.items():
        try:
            errs += check(sampler, case_rng(f"logits-edge/{name}", salt))
        except Exception as exc:  # noqa: BLE001 - a crash on an edge input is a finding
            errs.append(f"{name}: raised {type(exc).__name__}: {str(exc)[:200]}")
    stmt = f"deterministic logits edge semantics ({', '.join(LOGITS_EDGE_CHECKS)})"
    seed = law_seed("logits-edge", "edge", salt)
    return exact_record(sampler.name, LOGITS_GLOBAL_CASE["edge"], "edge", stmt, errs, ROWS, seed)


def _same(a, b) -> np.ndarray:
    """Per row: tokens, num_accepted and valid all equal."""
    return np.all(a.tokens == b.tokens, axis=1) & (a.num_accepted == b.num_accepted) & (a.valid == b.valid)


def _requests(rng, rows: int, classic: bool):
    """Distinct requests (logits of their own per row), mixed temperatures, half the drafts the argmax."""
    lg, dl, temps, seeds, offsets = _batch(rng, rows, classic)
    temps = rng.choice([0.0, 0.6, 1.0, 1.4], rows)
    return lg, _argmax_drafts(lg, rng, 0.5), dl, temps, seeds, offsets


# Two draws of one of these requests (all K + 1 tokens, a and valid) agree with probability about 0.2
# (the reference on 4096 of them: 0.20 classic, 0.17 one-hot); a sampler that ignores the offset
# agrees on every row. Over the ~380 sampled rows of 512, failing above 90% identical is a
# deterministic verdict for a correct sampler (Hoeffding: below exp(-2 * 380 * 0.5^2) < 1e-80 if its
# agreement were even 0.4); tests/verify/test_logits_edge_certificates.py checks the reference's
# fraction on the certificate's own requests.
FRESH_MAX_SAME = 0.9


def fresh_fraction(a, b, temps) -> float:
    """The share of sampled rows (0 < T < inf) whose outputs agree between two calls."""
    sampled = (temps > 0) & (temps < np.inf)
    return float(np.mean(_same(a, b)[sampled]))


def certify_logits_determinism(sampler, budget, salt: int = 0) -> CertRecord:
    """Same inputs, same outputs; the offset advanced by one, fresh draws."""
    rng = case_rng("logits-determinism", salt)
    errs = []
    for classic in (True, False):
        kind = "classic" if classic else "one-hot"
        lg, ids, dl, temps, seeds, offsets = _requests(rng, 512, classic)
        a = sampler(lg, ids, dl, temps, seeds, offsets)
        if not _same(a, sampler(lg, ids, dl, temps, seeds, offsets)).all():
            errs.append(f"{kind}: two identical calls differ")
        same = fresh_fraction(a, sampler(lg, ids, dl, temps, seeds, offsets + 1), temps)
        if same > FRESH_MAX_SAME:
            errs.append(
                f"{kind}: advancing offsets by 1 left {same:.1%} of sampled rows identical (offset ignored?)"
            )
    stmt = (
        f"same inputs -> same outputs; offsets + 1 -> at most {FRESH_MAX_SAME:.0%} of sampled rows unchanged"
    )
    seed = law_seed("logits-determinism", "determinism", salt)
    return exact_record(
        sampler.name, LOGITS_GLOBAL_CASE["determinism"], "determinism", stmt, errs, 1024, seed
    )


def certify_logits_batch_invariance(sampler, budget, salt: int = 0) -> CertRecord:
    """A request's outputs alone, in a permuted batch, in half of it, and beside junk rows."""
    rng = case_rng("logits-batch-invariance", salt)
    errs = []
    rows = 256
    for classic in (True, False):
        kind = "classic" if classic else "one-hot"
        batch = _requests(rng, rows, classic)
        lg, ids, dl, temps, seeds, offsets = batch
        base = _rows_of(sampler, batch, np.arange(rows))
        perm = rng.permutation(rows)
        for label, sel in (
            ("permuting the batch", perm),
            ("a sub-batch", np.arange(rows // 2, rows)),
            ("request 7 alone", np.arange(7, 8)),
        ):
            out = _rows_of(sampler, batch, sel)
            if not _same(out, _take(base, sel)).all():
                errs.append(f"{kind}: {label} changed some request's outputs")
        junk_lg = lg.copy()
        junk_lg[::4] = np.nan
        junk_t = temps.copy()
        junk_t[1::4] = np.nan
        out = sampler(junk_lg, ids, dl, junk_t, seeds, offsets)
        kept = np.arange(rows) % 4 >= 2
        if not _same(out, base)[kept].all():
            errs.append(f"{kind}: batch mates with NaN logits or temperatures changed some request's outputs")
    stmt = (
        "seeded outputs invariant to permutation, sub-batching, batch size 1 and NaN / invalid-T batch mates"
    )
    seed = law_seed("logits-batch-invariance", "batch_invariance", salt)
    return exact_record(
        sampler.name, LOGITS_GLOBAL_CASE["batch_invariance"], "batch_invariance", stmt, errs, 2 * rows, seed
    )


def _rows_of(sampler, batch, sel):
    """The sampler called on the requests `sel` of batch = (lg, ids, dl, temps, seeds, offsets)."""
    lg, ids, dl, temps, seeds, offsets = batch
    return sampler(lg[sel], ids[sel], None if dl is None else dl[sel], temps[sel], seeds[sel], offsets[sel])


def _take(out, sel):
    return type(out)(out.tokens[sel], out.num_accepted[sel], out.fallback[sel], out.valid[sel])
