"""Exact output laws in the verifier's cell layout, from `specsample.reference.laws`.

Cell layout: the joint law of (a, y) is a [n+1, V+1] array; row j is "a = j accepted drafts",
column y the emitted token, column V the emitted -1 of a row whose distribution had no mass.
"""

from __future__ import annotations

import numpy as np

from specsample.reference.laws import chain_conditional_law, chain_marginal_law


def chain_joint_law(p, q, drafts, num_draft_tokens=None) -> np.ndarray:
    """[n+1, V+1] exact joint law of (a, y). `drafts` are fixed ids [K] (int) or a per-position draft
    law [K, V] (float: drafts drawn independently once each position is reached)."""
    drafts = np.asarray(drafts)
    if np.issubdtype(drafts.dtype, np.integer):
        law = chain_conditional_law(p, q, drafts, num_draft_tokens)
    else:
        law = chain_marginal_law(p, q, num_draft_tokens, draft_dist=drafts)
    return law.joint_with_invalid()


def accepted_length_law(joint: np.ndarray) -> np.ndarray:
    """P(a = j), j = 0..n, from a joint law."""
    return joint.sum(axis=1)


def counts_from_outputs(tokens, num_accepted, vocab: int, n: int) -> np.ndarray:
    """[n+1, V+1] counts of (a, emitted token); the emitted slot is tokens[b, a] (-1 -> column V).

    Raises ValueError when a sampler returned a or a token outside the documented range."""
    tokens = np.asarray(tokens)
    a = np.asarray(num_accepted).astype(np.int64)
    if a.size and (a.min() < 0 or a.max() > n):
        raise ValueError(f"num_accepted outside [0, {n}]: min {a.min()}, max {a.max()}")
    y = tokens[np.arange(tokens.shape[0]), a].astype(np.int64)
    bad = (y < -1) | (y >= vocab)
    if np.any(bad):
        raise ValueError(f"emitted ids outside [0, {vocab}) and not -1: {np.unique(y[bad])[:8].tolist()}")
    y = np.where(y < 0, vocab, y)
    counts = np.zeros((n + 1, vocab + 1), np.int64)
    np.add.at(counts, (a, y), 1)
    return counts
