"""Deterministic certificates for chain samplers: edge semantics, determinism, batch invariance and
CUDA-graph replay. No randomness in the verdicts: each sub-check states an exact property.

Edge sub-checks (DESIGN.md §1, docs/semantics.md):
- norm_sum_zero     p == q with a zero-probability draft, and q = 1.5 p: the rejected row falls back to p
                    (`fallback` True) and emits a token with p > 0 (SGLang emits V-1, vLLM token 0)
- zero_prob_draft   a draft with p(x) = 0 is rejected even at u = 0 (the `<=` bug accepts it)
- invalid_ids       ids -1, -5, V, V + 7 and q(x) in {0, -inf, NaN, +inf} are rejected, nothing crashes
- nan_rows          an all-NaN emitting row gives -1 and valid False; NaN/inf/negative entries of a row
                    carry no mass and are never emitted
- zero_mass         sparse rows at tile-boundary vocabularies, u in {0, 2^-24, 1 - 2^-24} and random:
                    every emitted token has positive mass in the row it was drawn from
- endpoints         u_K = 0 emits the first token with mass
- ragged            num_draft_tokens = 0 emits from p[0]; n_b < K never accepts beyond n_b
"""

from __future__ import annotations

import numpy as np

from specsample.reference.chain import chain_rejection_reference
from specsample.verify.budgets import Budget
from specsample.verify.cases import case_rng, round_to_dtype
from specsample.verify.certify import (
    U_MAX,
    U_STEP,
    CertRecord,
    _fmt,
    _structure_violations,
    budget_gof,
    law_seed,
)
from specsample.verify.protocol import ChainSampler


def _dirichlet(rng, shape, alpha=1.0):
    return round_to_dtype(rng.dirichlet(np.full(shape[-1], alpha), size=shape[:-1]), "float32")


def _call(sampler, p, ids, q, u, n=None):
    return sampler(p, np.asarray(ids, np.int64), q, num_draft_tokens=n, uniforms=np.asarray(u, np.float64))


def _check_norm_sum_zero(sampler, rng) -> list[str]:
    errs = []
    vocab = 12
    p = _dirichlet(rng, (2, vocab))
    p[0, 0] = 0.0
    p[0, vocab - 1] = 0.0  # V-1 has no mass: SGLang's answer is a zero-probability token
    p[0] /= p[0].sum()
    p = round_to_dtype(p, "float32")
    q = p[:1].copy()
    rows = 16
    u = np.column_stack([rng.random(rows), rng.random(rows)])
    out = _call(
        sampler,
        np.broadcast_to(p, (rows, 2, vocab)),
        np.zeros((rows, 1)),
        np.broadcast_to(q, (rows, 1, vocab)),
        u,
    )
    y = out.tokens[:, 0]
    if np.any(out.num_accepted != 0):
        errs.append("norm_sum_zero: p == q with p(x) = q(x) = 0: the draft was accepted")
    if not np.all(out.fallback):
        errs.append("norm_sum_zero: p == q, rejected draft: fallback flag not set")
    if not np.all((y >= 0) & (y < vocab)) or np.any(p[0, np.clip(y, 0, vocab - 1)] <= 0):
        errs.append(
            f"norm_sum_zero: emitted tokens {sorted(set(y.tolist()))[:6]} include one with p = 0 "
            "or out of range"
        )
    # q = 1.5 p: rejection whenever u >= 2/3, residual max(0, p - 1.5 p) == 0
    q2 = round_to_dtype(1.5 * p[:1], "float32")
    x = int(np.argmax(p[0]))
    u2 = np.column_stack([np.linspace(0.7, U_MAX, rows), rng.random(rows)])
    out = _call(
        sampler,
        np.broadcast_to(p, (rows, 2, vocab)),
        np.full((rows, 1), x),
        np.broadcast_to(q2, (rows, 1, vocab)),
        u2,
    )
    y = out.tokens[:, 0]
    if np.any(out.num_accepted != 0) or not np.all(out.fallback):
        errs.append("norm_sum_zero: q = 1.5 p, u >= 0.7: expected rejection with fallback")
    if np.any((y < 0) | (y >= vocab)) or np.any(p[0, np.clip(y, 0, vocab - 1)] <= 0):
        errs.append(f"norm_sum_zero: q = 1.5 p: emitted tokens {sorted(set(y.tolist()))[:6]} include p = 0")
    return errs


def _check_zero_prob_draft(sampler, rng) -> list[str]:
    errs = []
    vocab = 9
    p = _dirichlet(rng, (2, vocab))
    p[0, 3] = 0.0
    q = _dirichlet(rng, (1, vocab))
    u = np.array([[0.0, 0.5], [U_STEP, 0.5]])
    for label, qq in (("classic", np.broadcast_to(q, (2, 1, vocab))), ("one-hot", None)):
        out = _call(sampler, np.broadcast_to(p, (2, 2, vocab)), np.full((2, 1), 3), qq, u)
        if np.any(out.num_accepted != 0):
            errs.append(
                f"zero_prob_draft ({label}): draft with p(x) = 0 accepted at u = "
                f"{u[out.num_accepted != 0, 0].tolist()}"
            )
    return errs


def _check_invalid_ids(sampler, rng) -> list[str]:
    errs = []
    vocab = 10
    p = _dirichlet(rng, (3, vocab))
    ids = np.array([[-1, 2], [-5, 2], [vocab, 2], [vocab + 7, 2]])
    rows = ids.shape[0]
    u = np.zeros((rows, 3))
    q = np.broadcast_to(_dirichlet(rng, (2, vocab)), (rows, 2, vocab))
    for label, qq in (("classic", q), ("one-hot", None)):
        try:
            out = _call(sampler, np.broadcast_to(p, (rows, 3, vocab)), ids, qq, u)
        except Exception as exc:  # noqa: BLE001
            errs.append(f"invalid_ids ({label}): raised {type(exc).__name__}: {exc}")
            continue
        if np.any(out.num_accepted != 0):
            errs.append(
                f"invalid_ids ({label}): out-of-range draft accepted (ids "
                f"{ids[out.num_accepted != 0, 0].tolist()})"
            )
        viol = _structure_violations(out, ids, np.full(rows, 2), vocab)
        if viol:
            errs.append(f"invalid_ids ({label}): {viol}")
    for bad in (0.0, -np.inf, np.nan, np.inf):
        qb = _dirichlet(rng, (2, vocab))
        qb[0, 4] = bad
        out = _call(
            sampler, np.broadcast_to(p, (1, 3, vocab)), np.array([[4, 2]]), qb[None], np.zeros((1, 3))
        )
        if out.num_accepted[0] != 0:
            errs.append(f"invalid_ids: draft with q(x) = {bad} accepted")
    return errs


def _check_nan_rows(sampler, rng) -> list[str]:
    errs = []
    vocab = 11
    p = _dirichlet(rng, (2, vocab))
    p[0, :] = np.nan  # emitting row (draft rejected: p[0, x] is NaN -> no mass)
    q = _dirichlet(rng, (1, vocab))
    out = _call(sampler, p[None], np.array([[2]]), q[None], np.array([[0.3, 0.6]]))
    if out.tokens[0, 0] != -1 or out.valid[0]:
        errs.append(
            f"nan_rows: all-NaN emitting row gave token {out.tokens[0, 0]} "
            f"valid={bool(out.valid[0])} (want -1, False)"
        )
    p2 = _dirichlet(rng, (2, vocab))
    p2[0, [0, 4]] = np.nan
    p2[0, 6] = np.inf
    p2[0, 10] = np.inf  # last lane: an unsanitised +inf wins the 'largest token with mass' guard
    p2[0, 7] = -0.5
    p2[0, 2] = 0.0
    rows = 64
    u = np.column_stack([np.full(rows, U_MAX), np.concatenate([[0.0, U_STEP, U_MAX], rng.random(rows - 3)])])
    out = _call(
        sampler,
        np.broadcast_to(p2, (rows, 2, vocab)),
        np.full((rows, 1), 2),
        np.broadcast_to(q, (rows, 1, vocab)),
        u,
    )
    y = out.tokens[np.arange(rows), out.num_accepted]
    bad = ~np.isin(y, [1, 3, 5, 8, 9])
    if np.any(bad) or not np.all(out.valid):
        errs.append(
            f"nan_rows: row with NaN/inf/negative entries emitted {sorted(set(y[bad].tolist()))} or invalid"
        )
    # bonus row NaN with num_draft_tokens = 0
    p3 = _dirichlet(rng, (2, vocab))
    p3[0] = np.nan
    out = _call(sampler, p3[None], np.array([[2]]), q[None], np.array([[0.1, 0.5]]), n=np.array([0]))
    if out.tokens[0, 0] != -1 or out.valid[0]:
        errs.append("nan_rows: num_draft_tokens = 0 and an all-NaN p[0]: expected -1 and valid False")
    return errs


def _check_zero_mass(sampler, rng) -> list[str]:
    errs = []
    for vocab in (31, 32, 33, 65, 129):
        p = _dirichlet(rng, (3, vocab))
        p[:, : vocab - 3] *= rng.random((3, vocab - 3)) < 0.2  # mostly zeros, mass in the last tile
        p[:, -1] = 0.0
        q = _dirichlet(rng, (2, vocab))
        rows = 256
        u = rng.random((rows, 3))
        u[:64, 2] = 0.0
        u[64:128, 2] = U_MAX
        u[128:160, 2] = U_STEP
        u[:, :2] = np.where(rng.random((rows, 2)) < 0.5, u[:, :2], U_MAX)
        ids = rng.integers(0, vocab, (rows, 2))
        for label, qq in (("classic", np.broadcast_to(q, (rows, 2, vocab))), ("one-hot", None)):
            out = _call(sampler, np.broadcast_to(p, (rows, 3, vocab)), ids, qq, u)
            a = out.num_accepted
            y = out.tokens[np.arange(rows), a]
            if np.any((y < 0) | (y >= vocab)):
                errs.append(
                    f"zero_mass V={vocab} ({label}): emitted ids "
                    f"{sorted(set(y[(y < 0) | (y >= vocab)].tolist()))[:5]}"
                )
                continue
            if np.any(p[a, y] <= 0):
                errs.append(
                    f"zero_mass V={vocab} ({label}): emitted zero-probability tokens "
                    f"{sorted(set(y[p[a, y] <= 0].tolist()))[:5]}"
                )
            acc_ids = ids[:, 0][a > 0]
            if np.any(p[0, acc_ids] <= 0):
                errs.append(f"zero_mass V={vocab} ({label}): accepted a zero-probability draft")
    return errs


def _check_endpoints(sampler, rng) -> list[str]:
    errs = []
    vocab = 33
    p = _dirichlet(rng, (2, vocab))
    p[1, :5] = 0.0
    q = _dirichlet(rng, (1, vocab))
    x = int(np.argmax(q[0] - p[0]))  # a draft with q > p: rejected for u near 1
    u = np.array([[U_MAX, 0.0], [0.0, 0.0]])
    out = _call(
        sampler, np.broadcast_to(p, (2, 2, vocab)), np.full((2, 1), x), np.broadcast_to(q, (2, 1, vocab)), u
    )
    ref = chain_rejection_reference(
        np.broadcast_to(p, (2, 2, vocab)), np.full((2, 1), x), np.broadcast_to(q, (2, 1, vocab)), uniforms=u
    )
    if not np.array_equal(out.tokens, ref.tokens):
        errs.append(
            f"endpoints: u_K = 0 gave {out.tokens.tolist()}, expected {ref.tokens.tolist()} "
            "(first token with mass)"
        )
    # u_K = 0 is a cell [0, 2^-24) of the float32 uniform: the inverse CDF is taken at its midpoint
    # 2^-25 (docs/semantics.md), so a first token of negligible mass (1e-30) is not emitted; a sampler
    # evaluating at u_K itself emits it with probability 2^-24 per row (found at the `full` budget).
    tiny = np.zeros((1, 2, 8))
    tiny[0, :, 1], tiny[0, :, 2], tiny[0, :, 3] = 1e-30, 0.5, 0.5
    draft = np.zeros((1, 1, 8))
    draft[0, 0, 3] = 1.0  # x = 3 with p/q = 0.5: rejected at u_0 = 0.9, residual (0, 1e-30, 0.5, 0, ...)
    u = np.array([[0.9, 0.0]])
    out = _call(sampler, tiny, np.array([[3]]), draft, u)
    ref = chain_rejection_reference(tiny, np.array([[3]]), draft, uniforms=u)
    if not np.array_equal(out.tokens, ref.tokens):
        errs.append(
            f"endpoints: u_K = 0 with a first token of mass 1e-30 gave {out.tokens.tolist()}, expected "
            f"{ref.tokens.tolist()} (inverse CDF at the uniform's cell midpoint u_K + 2^-25)"
        )
    # the same at an acceptance test: u_0 = 0 and p(x) / q(x) = 2e-30 must reject (m_0 q < p fails)
    tiny[0, 0, 1], tiny[0, 0, 3] = 1e-30, 0.0
    draft[0, 0, :] = 0.0
    draft[0, 0, 1] = draft[0, 0, 2] = 0.5
    u = np.array([[0.0, 0.5]])
    out = _call(sampler, tiny, np.array([[1]]), draft, u)
    ref = chain_rejection_reference(tiny, np.array([[1]]), draft, uniforms=u)
    if not (np.array_equal(out.tokens, ref.tokens) and np.array_equal(out.num_accepted, ref.num_accepted)):
        errs.append(
            f"endpoints: u_0 = 0 with p(x) / q(x) = 2e-30 gave a = {out.num_accepted.tolist()}, tokens "
            f"{out.tokens.tolist()}, expected a = 0, {ref.tokens.tolist()} (acceptance at the cell midpoint)"
        )
    return errs


def _check_ragged(sampler, rng) -> list[str]:
    errs = []
    vocab = 8
    p = _dirichlet(rng, (4, vocab))
    p[0, :4] = 0.0
    q = np.broadcast_to(p[:3], (3, vocab))  # p == q: every draft with mass is accepted
    ids = np.broadcast_to(np.argmax(p[:3], axis=1), (3, 3))
    n = np.array([0, 1, 2])
    out = _call(
        sampler,
        np.broadcast_to(p, (3, 4, vocab)),
        ids,
        np.broadcast_to(q, (3, 3, vocab)),
        np.full((3, 4), 0.25),
        n=n,
    )
    if not np.array_equal(out.num_accepted, n):
        errs.append(
            f"ragged: num_draft_tokens {n.tolist()} with certain acceptance gave a = "
            f"{out.num_accepted.tolist()}"
        )
    y0 = out.tokens[0, 0]
    if not (0 <= y0 < vocab) or p[0, y0] <= 0:
        errs.append(f"ragged: n_b = 0 emitted {y0}, not a token of p[0]")
    viol = _structure_violations(out, ids, n, vocab)
    if viol:
        errs.append(f"ragged: {viol}")
    return errs


EDGE_CHECKS = {
    "norm_sum_zero": _check_norm_sum_zero,
    "zero_prob_draft": _check_zero_prob_draft,
    "invalid_ids": _check_invalid_ids,
    "nan_rows": _check_nan_rows,
    "zero_mass": _check_zero_mass,
    "endpoints": _check_endpoints,
    "ragged": _check_ragged,
}


def certify_edges(sampler: ChainSampler, budget: Budget, salt: int = 0) -> CertRecord:
    """All edge sub-checks; the certificate fails naming every sub-check that failed."""
    errs, done = [], []
    for name, check in EDGE_CHECKS.items():
        rng = case_rng(f"edge/{name}", salt)
        try:
            errs += check(sampler, rng)
        except Exception as exc:  # noqa: BLE001 - a crash on an edge input is a finding
            errs.append(f"{name}: raised {type(exc).__name__}: {str(exc)[:200]}")
        done.append(name)
    stmt = f"deterministic edge semantics ({', '.join(done)})"
    return CertRecord(
        sampler.name, "edge-cases", "edge", "fail" if errs else "pass", stmt, detail="; ".join(errs)
    )


def _seeded_batch(rng, rows: int, vocab: int = 24, k: int = 3):
    p = _dirichlet(rng, (k + 1, vocab), 0.5)
    q = _dirichlet(rng, (k, vocab), 0.5)
    ids = rng.integers(0, vocab, (rows, k))
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = rng.integers(0, 1 << 40, rows, dtype=np.int64)
    return p, q, ids, seeds, offsets


def certify_determinism(sampler: ChainSampler, budget: Budget, salt: int = 0) -> CertRecord:
    """The same inputs twice give identical outputs, on the uniforms path and on the seeded path."""
    rng = case_rng("determinism", salt)
    rows = 2048
    p, q, ids, seeds, offsets = _seeded_batch(rng, rows)
    P = np.broadcast_to(p, (rows, *p.shape))
    Q = np.broadcast_to(q, (rows, *q.shape))
    u = rng.integers(0, 1 << 24, (rows, p.shape[0])) * U_STEP
    errs = []
    a, b = sampler(P, ids, Q, uniforms=u), sampler(P, ids, Q, uniforms=u)
    if not np.array_equal(a.tokens, b.tokens):
        errs.append("uniforms path: two identical calls differ")
    if sampler.supports_seeds:
        a, b = (
            sampler(P, ids, Q, seeds=seeds, offsets=offsets),
            sampler(P, ids, Q, seeds=seeds, offsets=offsets),
        )
        if not np.array_equal(a.tokens, b.tokens):
            errs.append("seeded path: two identical calls differ")
        c = sampler(P, ids, Q, seeds=seeds, offsets=offsets + 1)
        same = float(np.mean(np.all(a.tokens == c.tokens, axis=1)))
        # fresh randomness: advancing the offset must change the uniforms; with these rows a
        # sampler that ignores offsets repeats every row (same = 1); a correct one repeats a row with
        # probability < 0.9 each (checked on the reference), so same < 0.9 over 2048 rows is certain.
        if same > 0.9:
            errs.append(
                f"seeded path: advancing offsets by 1 left {same:.1%} of rows identical (offset ignored?)"
            )
    stmt = "same inputs -> same outputs; advancing the Philox offset gives fresh draws"
    return CertRecord(
        sampler.name,
        "seeded-batch",
        "determinism",
        "fail" if errs else "pass",
        stmt,
        rows,
        seed=law_seed("determinism", "determinism", salt),
        detail="; ".join(errs),
    )


def certify_batch_invariance(sampler: ChainSampler, budget: Budget, salt: int = 0) -> CertRecord:
    """A request's seeded output is the same alone, in a permuted batch, in a sub-batch, and next to
    NaN rows."""
    if not sampler.supports_seeds:
        return CertRecord(
            sampler.name, "seeded-batch", "batch_invariance", "skip", "sampler takes no seeds/offsets"
        )
    rng = case_rng("batch_invariance", salt)
    rows = 512
    p, q, ids, seeds, offsets = _seeded_batch(rng, rows)
    P = np.ascontiguousarray(np.broadcast_to(p, (rows, *p.shape)))
    Q = np.ascontiguousarray(np.broadcast_to(q, (rows, *q.shape)))
    base = sampler(P, ids, Q, seeds=seeds, offsets=offsets)
    errs = []
    perm = rng.permutation(rows)
    out = sampler(P[perm], ids[perm], Q[perm], seeds=seeds[perm], offsets=offsets[perm])
    if not np.array_equal(out.tokens, base.tokens[perm]):
        errs.append("permuting the batch changed some request's tokens")
    sub = np.arange(rows // 2, rows)
    out = sampler(P[sub], ids[sub], Q[sub], seeds=seeds[sub], offsets=offsets[sub])
    if not np.array_equal(out.tokens, base.tokens[sub]):
        errs.append("a sub-batch changed some request's tokens")
    one = sampler(P[7:8], ids[7:8], Q[7:8], seeds=seeds[7:8], offsets=offsets[7:8])
    if not np.array_equal(one.tokens[0], base.tokens[7]):
        errs.append("request 7 alone differs from request 7 in the batch")
    Pn = P.copy()
    Pn[::2] = np.nan
    out = sampler(Pn, ids, Q, seeds=seeds, offsets=offsets)
    if not np.array_equal(out.tokens[1::2], base.tokens[1::2]):
        errs.append("NaN batch mates changed some request's tokens")
    stmt = "seeded outputs invariant to batch permutation, sub-batching, batch size 1 and NaN batch mates"
    return CertRecord(
        sampler.name,
        "seeded-batch",
        "batch_invariance",
        "fail" if errs else "pass",
        stmt,
        rows,
        detail="; ".join(errs),
    )


def certify_cuda_graph(sampler: ChainSampler, budget: Budget, salt: int = 0) -> CertRecord:
    """GPU only: capture the seeded kernel and an in-graph offset advance in a CUDA graph, replay it
    `graph_replays` times: replay r equals the eager call at offset o + r (token for token), two
    replays differ, and the pooled accepted-length counts follow the exact law (designed GOF)."""
    name = "cuda_graph"
    if not (sampler.is_kernel and str(sampler.device).startswith("cuda")) or budget.graph_replays <= 0:
        return CertRecord(sampler.name, "graph", name, "skip", "needs a CUDA device and a kernel sampler")
    import torch

    from specsample.verify.exact_laws import chain_joint_law

    rng = case_rng("cuda_graph", salt)
    rows, vocab, k = 1024, 4096, 4
    p = _dirichlet(rng, (k + 1, vocab), 0.1)
    q = _dirichlet(rng, (k, vocab), 0.1)
    x = np.argmax(q, axis=1)
    dev = sampler.device
    P = torch.from_numpy(p).to(dev, torch.float32).unsqueeze(0).expand(rows, k + 1, vocab)
    Q = torch.from_numpy(q).to(dev, torch.float32).unsqueeze(0).expand(rows, k, vocab)
    ids = torch.from_numpy(x).to(dev).unsqueeze(0).expand(rows, k).contiguous()
    seeds = torch.arange(rows, device=dev, dtype=torch.int64) + 12345
    offsets = torch.full((rows,), (1 << 32) - 3, device=dev, dtype=torch.int64)
    fn = sampler.fn
    eager0 = fn(P, ids, Q, seeds=seeds, offsets=offsets.clone()).tokens.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn(P, ids, Q, seeds=seeds, offsets=offsets.clone())
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        res = fn(P, ids, Q, seeds=seeds, offsets=offsets)
        offsets.add_(1)
    offsets.fill_((1 << 32) - 3)
    errs = []
    counts = np.zeros(k + 1, np.int64)
    prev = None
    for r in range(budget.graph_replays):
        graph.replay()
        tok = res.tokens
        if r == 0 and not torch.equal(tok, eager0):
            errs.append("replay 0 differs from the eager call with the same seeds/offsets")
        if prev is not None and torch.equal(tok, prev):
            errs.append(f"replay {r} repeated replay {r - 1}: offset not advanced inside the graph")
            break
        prev = tok.clone()
        counts += np.bincount(res.num_accepted.cpu().numpy().astype(np.int64), minlength=k + 1)
    torch.cuda.synchronize()
    law = chain_joint_law(p, q, x).sum(axis=1)
    g = budget_gof(counts, law, budget, "cuda graph replays")
    if not g.passed:
        errs.append(f"accepted-length law over replays: {g.message}")
    stmt = (
        f"{budget.graph_replays} CUDA-graph replays x {rows} rows: replay == eager, fresh draws per replay, "
        f"accepted-length law p={_fmt(g.pvalue)}"
    )
    return CertRecord(
        sampler.name,
        "graph",
        name,
        "fail" if errs else "pass",
        stmt,
        budget.graph_replays * rows,
        alpha=budget.alpha,
        pvalue=g.pvalue,
        detail="; ".join(errs),
    )
