"""Case families: the (p, q, drafts) inputs every chain sampler is certified on (stats.md §8.7).

A `ChainCase` is one request — target rows p [K+1, V], draft rows q [K, V] or None (one-hot drafts),
fixed draft ids [K] and a draft count n <= K — that the runner broadcasts (stride 0) to as many rows
as a law needs. Probabilities are renormalised in float64 and then rounded to the case's dtype; the
exact laws are computed from the rounded values, so the target is the law *given the kernel's actual
inputs*. Each family targets one failure mode: tile-boundary vocabularies, Dirichlet rows at several
concentrations, sparse supports (including mass only in the last tile), one-hot and two-point rows,
extreme dynamic range, p == q (the norm_sum == 0 path), disjoint supports, q tiny where p is large,
bf16-representable values, unnormalised drafts and ragged draft counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

# Vocabulary sizes at tile boundaries of the kernels' BLOCK_V (powers of two) and tiny edge sizes.
TILE_BOUNDARY_VOCABS = (1, 2, 3, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129)


def case_rng(name: str, salt: int = 0) -> np.random.Generator:
    """A generator seeded by a stable hash of the case name (never by the outcome)."""
    digest = hashlib.sha256(f"{name}/{salt}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def round_to_dtype(a: np.ndarray, dtype: str) -> np.ndarray:
    """Round float64 values to `dtype` ('float32', 'float16', 'bfloat16', 'float64') and back."""
    a = np.asarray(a, dtype=np.float64)
    if dtype == "float64":
        return a.copy()
    if dtype == "float32":
        return a.astype(np.float32).astype(np.float64)
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float64)
    if dtype == "bfloat16":  # round to nearest even on the top 16 bits of the float32 pattern
        b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        rounded = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
        return rounded.astype(np.uint32).view(np.float32).astype(np.float64)
    raise ValueError(f"dtype: expected float32, float16, bfloat16 or float64, got {dtype!r}")


@dataclass(frozen=True)
class ChainCase:
    """One chain-sampling request. `p` [K+1, V] and `q` [K, V] hold values exactly representable
    in `dtype`; `drafts` [K] int64 are the fixed draft ids (possibly invalid on purpose)."""

    name: str
    family: str
    p: np.ndarray
    q: np.ndarray | None
    drafts: np.ndarray
    num_draft_tokens: int
    dtype: str = "float32"
    note: str = ""
    tags: tuple = field(default_factory=tuple)

    @property
    def vocab(self) -> int:
        return int(self.p.shape[1])

    @property
    def k(self) -> int:
        return int(self.p.shape[0] - 1)

    @property
    def one_hot(self) -> bool:
        return self.q is None

    def draft_distribution(self) -> np.ndarray:
        """[K, V] law the joint-law run draws drafts from: q (classic), or for one-hot drafts a
        fixed law independent of the uniforms (the cleaned, normalised target row blended with uniform)."""
        if self.q is not None:
            d = np.clip(self.q, 0, None)
        else:
            d = 0.5 * np.clip(self.p[:-1], 0, None) / np.clip(self.p[:-1], 0, None).sum(1, keepdims=True)
            d = d + 0.5 / self.vocab
        s = d.sum(axis=1, keepdims=True)
        s[s == 0] = 1.0
        return d / s


def _normalise(a: np.ndarray) -> np.ndarray:
    s = a.sum(axis=-1, keepdims=True)
    s[s == 0] = 1.0
    return a / s


def _make(name, family, p, q, drafts, n=None, dtype="float32", note="", tags=()):
    p = round_to_dtype(_normalise(np.asarray(p, np.float64)), dtype)
    if q is not None:
        q = round_to_dtype(_normalise(np.asarray(q, np.float64)), dtype)
    drafts = np.asarray(drafts, np.int64)
    k = p.shape[0] - 1
    return ChainCase(name, family, p, q, drafts, k if n is None else int(n), dtype, note, tuple(tags))


def _draw_drafts(rng, q_or_p: np.ndarray) -> np.ndarray:
    d = _normalise(np.clip(q_or_p, 0, None))
    return np.array([rng.choice(d.shape[1], p=row) for row in d], np.int64)


def _overlap_drafts(rng, p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Fixed drafts whose acceptance probability min(1, p/q) is closest to 1/2 (ties: first id), so
    the fixed-draft laws see acceptances and rejections at every position."""
    k = q.shape[0]
    pc, qc = np.clip(p[:k], 0, None), np.clip(q, 0, None)
    beta = np.where(qc > 0, np.minimum(1.0, pc / np.where(qc > 0, qc, 1.0)), -1.0)
    score = np.where(beta >= 0, np.minimum(beta, 1.0 - beta), -1.0)
    return np.argmax(score, axis=1).astype(np.int64)


def dirichlet_case(vocab: int, k: int, alpha: float, one_hot: bool = False, dtype="float32") -> ChainCase:
    name = (
        f"dirichlet{alpha:g}_V{vocab}_K{k}"
        + ("_onehot" if one_hot else "")
        + ("" if dtype == "float32" else f"_{dtype}")
    )
    rng = case_rng(name)
    p = rng.dirichlet(np.full(vocab, alpha), size=k + 1)
    q = None if one_hot else rng.dirichlet(np.full(vocab, alpha), size=k)
    drafts = _draw_drafts(rng, p[:k]) if one_hot else _overlap_drafts(rng, p, q)
    return _make(name, "dirichlet", p, q, drafts, dtype=dtype, note=f"Dirichlet({alpha:g}) rows")


def sparse_case(vocab: int, k: int, last_tile_only: bool = False) -> ChainCase:
    name = f"sparse{'_lasttile' if last_tile_only else ''}_V{vocab}_K{k}"
    rng = case_rng(name)
    if last_tile_only:  # all mass in the last few tokens (the last tile of any BLOCK_V split)
        mask = np.zeros((k + 1, vocab), bool)
        mask[:, max(0, vocab - 3) :] = True
        qmask = np.zeros((k, vocab), bool)
        qmask[:, max(0, vocab - 5) : vocab - 1] = True
    else:
        mask = rng.random((k + 1, vocab)) < 0.3
        qmask = rng.random((k, vocab)) < 0.3
        mask[:, rng.integers(vocab)] = True
        qmask[:, rng.integers(vocab)] = True
    p = rng.random((k + 1, vocab)) * mask
    q = rng.random((k, vocab)) * qmask
    drafts = _overlap_drafts(rng, p, q)
    return _make(
        name,
        "sparse",
        p,
        q,
        drafts,
        note="random zero masks" if not last_tile_only else "mass only in the last tile",
    )


def two_point_case(vocab: int, k: int) -> ChainCase:
    name = f"two_point_V{vocab}_K{k}"
    rng = case_rng(name)
    p = np.zeros((k + 1, vocab))
    q = np.zeros((k, vocab))
    for i in range(k + 1):
        a, b = rng.choice(vocab, 2, replace=False)
        p[i, a], p[i, b] = 0.7, 0.3
    for i in range(k):
        a = int(np.flatnonzero(p[i])[0])
        b = rng.integers(vocab)
        q[i, a] += 0.4
        q[i, b] += 0.6
    drafts = _draw_drafts(rng, q)
    return _make(name, "two_point", p, q, drafts, note="two-point p and q")


def one_hot_target_case(vocab: int, k: int) -> ChainCase:
    """p = delta at one token per position; one-hot drafts, some equal to it, some not."""
    name = f"one_hot_target_V{vocab}_K{k}"
    rng = case_rng(name)
    tgt = rng.integers(vocab, size=k + 1)
    p = np.zeros((k + 1, vocab))
    p[np.arange(k + 1), tgt] = 1.0
    drafts = tgt[:k].copy()
    drafts[-1] = (tgt[k - 1] + 1) % vocab  # the last draft misses: p = delta, residual = 0 -> fallback
    return _make(
        name, "one_hot", p, None, drafts, note="p one-hot; last draft off-target (residual p minus x)"
    )


def extreme_range_case(vocab: int, k: int) -> ChainCase:
    name = f"extreme_range_V{vocab}_K{k}"
    rng = case_rng(name)
    p = 10.0 ** (-rng.uniform(0, 30, size=(k + 1, vocab)))
    q = 10.0 ** (-rng.uniform(0, 30, size=(k, vocab)))
    p[:, 0] = 1.0
    drafts = _overlap_drafts(rng, p, q)
    return _make(
        name, "extreme_range", p, q, drafts, note="probabilities spanning 1e-30..1 (float32 denormals)"
    )


def p_equals_q_case(vocab: int, k: int) -> ChainCase:
    """q == p; draft 0 has zero probability, so it is rejected with an all-zero residual (fallback)."""
    name = f"p_equals_q_V{vocab}_K{k}"
    rng = case_rng(name)
    p = rng.dirichlet(np.ones(vocab), size=k + 1)
    p[0, 0] = 0.0
    q = p[:k].copy()
    drafts = _draw_drafts(rng, q)
    drafts[0] = 0
    return _make(
        name, "p_equals_q", p, q, drafts, note="q == p; draft 0 has p = q = 0: norm_sum == 0 -> fallback"
    )


def disjoint_case(vocab: int, k: int) -> ChainCase:
    name = f"disjoint_V{vocab}_K{k}"
    rng = case_rng(name)
    half = vocab // 2
    p = np.zeros((k + 1, vocab))
    q = np.zeros((k, vocab))
    p[:, :half] = rng.random((k + 1, half))
    q[:, half:] = rng.random((k, vocab - half))
    drafts = _draw_drafts(rng, q)
    return _make(name, "disjoint", p, q, drafts, note="disjoint supports: drafts never accepted")


def q_tiny_case(vocab: int, k: int) -> ChainCase:
    name = f"q_tiny_V{vocab}_K{k}"
    rng = case_rng(name)
    p = rng.dirichlet(np.ones(vocab), size=k + 1)
    q = rng.dirichlet(np.ones(vocab), size=k)
    drafts = np.argmax(p[:k], axis=1)
    q[np.arange(k), drafts] = 1e-6
    return _make(name, "q_tiny", p, q, drafts, note="q(x) tiny where p(x) is the largest: always accepted")


def scaled_draft_case(vocab: int, k: int) -> ChainCase:
    """Unnormalised draft rows q = 1.5 p (not renormalised): residual max(0, p - q) == 0 on every
    rejection, so every rejected row takes the norm_sum == 0 fallback."""
    name = f"scaled_draft_V{vocab}_K{k}"
    rng = case_rng(name)
    p = round_to_dtype(rng.dirichlet(np.ones(vocab), size=k + 1), "float32")
    q = round_to_dtype(1.5 * p[:k], "float32")
    drafts = _draw_drafts(rng, q)
    return ChainCase(
        name, "scaled_draft", p, q, drafts, k, "float32", "q = 1.5 p (unnormalised): fallback path"
    )


def ragged_case(vocab: int, k: int, n: int) -> ChainCase:
    name = f"ragged_V{vocab}_K{k}_n{n}"
    rng = case_rng(name)
    p = rng.dirichlet(np.full(vocab, 0.5), size=k + 1)
    q = rng.dirichlet(np.full(vocab, 0.5), size=k)
    drafts = _draw_drafts(rng, q)
    return _make(name, "ragged", p, q, drafts, n=n, note=f"num_draft_tokens = {n} < K: bonus from p[{n}]")


def bf16_case(vocab: int, k: int) -> ChainCase:
    return dirichlet_case(vocab, k, 0.5, dtype="bfloat16")


def invalid_draft_case(vocab: int, k: int) -> ChainCase:
    """Drafts -1 (padding) and V (out of range): always rejected, never read."""
    name = f"invalid_draft_V{vocab}_K{k}"
    rng = case_rng(name)
    p = rng.dirichlet(np.ones(vocab), size=k + 1)
    q = rng.dirichlet(np.ones(vocab), size=k)
    drafts = _draw_drafts(rng, q)
    drafts[0] = -1 if k == 1 else drafts[0]
    if k >= 2:
        drafts[1] = vocab
    return _make(name, "invalid_draft", p, q, drafts, note="draft ids -1 / V: rejected")


def chain_cases(budget: str) -> list[ChainCase]:
    """The case list of a budget. `ci` keeps V <= 65 (GOF cells) and K <= 3 (CPU interpreter);
    `standard` and `full` add LLM-sized vocabularies."""
    cases = [
        dirichlet_case(8, 2, 1.0),
        dirichlet_case(33, 3, 0.1),
        dirichlet_case(9, 2, 10.0),
        dirichlet_case(31, 2, 0.5, one_hot=True),
        dirichlet_case(1, 1, 1.0),
        sparse_case(32, 2),
        sparse_case(65, 1, last_tile_only=True),
        two_point_case(7, 2),
        one_hot_target_case(16, 2),
        extreme_range_case(16, 2),
        p_equals_q_case(12, 2),
        disjoint_case(10, 2),
        q_tiny_case(8, 2),
        scaled_draft_case(8, 2),
        ragged_case(12, 3, 1),
        bf16_case(17, 2),
        invalid_draft_case(9, 2),
    ]
    if budget in ("standard", "full"):
        cases += [
            dirichlet_case(129, 2, 0.3),
            dirichlet_case(1024, 4, 0.1),
            dirichlet_case(1023, 2, 1.0, one_hot=True),
            sparse_case(4097, 2, last_tile_only=True),
            dirichlet_case(32000, 4, 0.05),
        ]
    if budget == "full":
        cases += [
            dirichlet_case(8192 + 1, 3, 0.2),
            dirichlet_case(151936, 4, 0.02, dtype="bfloat16"),
        ]
    return cases
