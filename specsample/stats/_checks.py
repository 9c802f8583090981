"""Input validation and failure-message formatting shared by the stats assertions."""

from __future__ import annotations

import numpy as np

from .seeding import repro_line


def as_probs(probs, name: str = "probs", *, ndim: int | None = 1) -> np.ndarray:
    """float64 copy of a probability vector (or rows): finite, >= 0, each row summing to 1 within
    1e-6, then renormalised exactly. ValueError naming the argument otherwise."""
    p = np.array(probs, dtype=np.float64)
    if ndim is not None and p.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {p.shape}")
    if p.size == 0:
        raise ValueError(f"{name} must be non-empty")
    if not np.all(np.isfinite(p)) or np.any(p < 0):
        raise ValueError(f"{name} must be finite and >= 0 (zero mass is 0, not NaN/inf/negative)")
    total = p.sum(axis=-1, keepdims=True)
    if np.any(np.abs(total - 1.0) > 1e-6):
        raise ValueError(
            f"{name} must sum to 1 (within 1e-6) along the last axis, got sums {total.ravel()[:4]}"
        )
    return p / total


def as_counts(counts, name: str = "counts", *, size: int | None = None) -> np.ndarray:
    """int64 copy of a 1-D count vector: integers >= 0 (and of length `size` if given)."""
    raw = np.asarray(counts)
    if raw.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {raw.shape}")
    if raw.dtype.kind == "f" and not np.all(raw == np.round(raw)):
        raise ValueError(f"{name} must hold integers")
    c = raw.astype(np.int64)
    if np.any(c < 0):
        raise ValueError(f"{name} must be >= 0")
    if size is not None and c.shape[0] != size:
        raise ValueError(f"{name} must have length {size} (one count per category), got {c.shape[0]}")
    return c


def counts_from_tokens(tokens, num_categories: int) -> np.ndarray:
    """Histogram of token ids over [0, num_categories), counting every category (zero-observed too).

    Raises AssertionError if any id lies outside [0, num_categories): such ids are a sampler bug,
    never silently dropped.
    """
    t = np.asarray(tokens).ravel().astype(np.int64)
    bad = (t < 0) | (t >= num_categories)
    if np.any(bad):
        ids = np.unique(t[bad])[:10]
        raise AssertionError(
            f"{int(bad.sum())} token id(s) outside [0, {num_categories}): first distinct {ids.tolist()}"
        )
    return np.bincount(t, minlength=num_categories).astype(np.int64)


def failure_message(title: str, design: str, table: str, seed: int | None) -> str:
    lines = [title, f"design: {design}"]
    if table:
        lines.append(table)
    lines.append(repro_line(seed))
    return "\n".join(lines)
