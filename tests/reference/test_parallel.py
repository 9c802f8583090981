"""The row-parallel reference equals the serial one element for element (forked workers, blocks of
rows, stride-0 broadcast inputs kept as views)."""

from __future__ import annotations

import numpy as np
import pytest

from specsample.reference.chain import chain_rejection_reference
from specsample.reference.parallel import chain_rejection_reference_parallel


@pytest.mark.parametrize("classic", [True, False], ids=["classic", "onehot"])
def test_parallel_equals_serial(classic):
    rng = np.random.default_rng(11)
    batch, num_k, vocab = 1001, 3, 257  # 1001 rows: blocks of unequal size
    p = np.broadcast_to(rng.dirichlet(np.full(vocab, 0.2), size=num_k + 1), (batch, num_k + 1, vocab))
    q = rng.dirichlet(np.full(vocab, 0.2), size=(batch, num_k)) if classic else None
    x = rng.integers(-1, vocab + 1, size=(batch, num_k))  # some invalid ids
    u = rng.random((batch, num_k + 1))
    n = rng.integers(0, num_k + 1, size=batch)
    serial = chain_rejection_reference(p, x, q, uniforms=u, num_draft_tokens=n, tol=1e-12)
    parallel = chain_rejection_reference_parallel(
        p, x, q, uniforms=u, num_draft_tokens=n, tol=1e-12, workers=2, min_elements=0
    )
    assert serial._fields == parallel._fields
    for name, a, b in zip(serial._fields, serial, parallel, strict=True):
        assert np.array_equal(a, b), name
