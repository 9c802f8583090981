"""Hypothesis strategies for the case families (stats.md §8.7).

`chain_cases()` draws whole `ChainCase`s: tile-boundary vocabulary sizes, probability rows from a
`one_of` of Dirichlet(alpha) at several concentrations, sparse supports (including mass only in the
last tile), one-hot, two-point, uniform, extreme dynamic range (1e-30..1), exact ties; draft rows that
are independent, equal to p, disjoint from p, tiny where p is large, or absent (one-hot drafts); draft
ids that are valid, zero-probability or invalid (-1, V). Rows are renormalised in float64 and then
rounded to float32 or bfloat16; laws are computed from the rounded values.
`adversarial_uniform_rows(case)` draws uniforms including 0, 2^-24, the acceptance thresholds and their
lattice neighbours, and 1 - 2^-24.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from specsample.verify.cases import TILE_BOUNDARY_VOCABS, ChainCase, round_to_dtype

U_STEP = 2.0**-24


def vocab_sizes(max_vocab: int = 129):
    return st.one_of(
        st.sampled_from([v for v in TILE_BOUNDARY_VOCABS if v <= max_vocab]), st.integers(1, max_vocab)
    )


@st.composite
def prob_rows(draw, rows: int, vocab: int):
    """[rows, V] float64 rows (not yet normalised; every row has mass)."""
    kind = draw(
        st.sampled_from(
            ["dirichlet", "sparse", "last_tile", "one_hot", "two_point", "uniform", "extreme", "ties"]
        )
    )
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if kind == "dirichlet":
        alpha = draw(st.sampled_from([0.01, 0.1, 1.0, 10.0]))
        out = rng.dirichlet(np.full(vocab, alpha), size=rows)
    elif kind == "sparse":
        out = rng.random((rows, vocab)) * (rng.random((rows, vocab)) < 0.3)
    elif kind == "last_tile":
        out = np.zeros((rows, vocab))
        out[:, max(0, vocab - 3) :] = rng.random((rows, min(3, vocab)))
    elif kind == "one_hot":
        out = np.zeros((rows, vocab))
        out[np.arange(rows), rng.integers(0, vocab, rows)] = 1.0
    elif kind == "two_point":
        out = np.zeros((rows, vocab))
        out[np.arange(rows), rng.integers(0, vocab, rows)] += 0.7
        out[np.arange(rows), rng.integers(0, vocab, rows)] += 0.3
    elif kind == "uniform":
        out = np.ones((rows, vocab))
    elif kind == "extreme":
        out = 10.0 ** (-rng.uniform(0, 30, (rows, vocab)))
    else:  # exact ties
        out = rng.integers(1, 3, (rows, vocab)).astype(np.float64)
    out[out.sum(axis=1) == 0, 0] = 1.0
    return out


@st.composite
def chain_cases(draw, max_vocab: int = 65, max_k: int = 3):
    """A ChainCase with adversarial structure; see the module docstring."""
    vocab = draw(vocab_sizes(max_vocab))
    k = draw(st.integers(1, max_k))
    dtype = draw(st.sampled_from(["float32", "float32", "bfloat16"]))
    p = draw(prob_rows(k + 1, vocab))
    relation = draw(st.sampled_from(["independent", "equal", "disjoint", "tiny", "one_hot_draft"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if relation == "independent":
        q = draw(prob_rows(k, vocab))
    elif relation == "equal":
        q = p[:k].copy()
    elif relation == "disjoint":
        q = np.where(p[:k] > 0, 0.0, 1.0)
        q[q.sum(axis=1) == 0, 0] = 1.0
    elif relation == "tiny":
        q = draw(prob_rows(k, vocab))
        q[np.arange(k), np.argmax(p[:k], axis=1)] = 1e-7
    else:
        q = None
    p = round_to_dtype(p / p.sum(axis=1, keepdims=True), dtype)
    if q is not None:
        q = round_to_dtype(q / q.sum(axis=1, keepdims=True), dtype)
    ids = rng.integers(0, vocab, k)
    for i in range(k):
        choice = draw(st.sampled_from(["random", "random", "argmax_p", "zero_p", "invalid"]))
        if choice == "argmax_p":
            ids[i] = int(np.argmax(p[i]))
        elif choice == "zero_p" and np.any(p[i] == 0):
            ids[i] = int(np.flatnonzero(p[i] == 0)[0])
        elif choice == "invalid":
            ids[i] = draw(st.sampled_from([-1, vocab, vocab + 3]))
    n = draw(st.integers(0, k))
    return ChainCase(f"hyp_V{vocab}_K{k}_{relation}", "hypothesis", p, q, ids.astype(np.int64), n, dtype)


@st.composite
def adversarial_uniform_rows(draw, case: ChainCase, rows: int = 16):
    """[rows, K+1] uniforms on the 2^-24 lattice with endpoint and threshold values mixed in."""
    specials = [0.0, U_STEP, 0.5, 1.0 - U_STEP]
    for i in range(case.k):
        x = int(case.drafts[i])
        if 0 <= x < case.vocab:
            qx = 1.0 if case.q is None else float(case.q[i, x])
            if qx > 0:
                t = min(float(case.p[i, x]) / qx, 1.0 - U_STEP)
                lat = np.floor(t / U_STEP) * U_STEP
                specials += [lat, min(lat + U_STEP, 1.0 - U_STEP)]
    lattice = st.integers(0, (1 << 24) - 1).map(lambda k: k * U_STEP)
    value = st.one_of(st.sampled_from(specials), lattice)
    flat = draw(st.lists(value, min_size=rows * (case.k + 1), max_size=rows * (case.k + 1)))
    return np.asarray(flat, np.float64).reshape(rows, case.k + 1)
