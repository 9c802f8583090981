"""Throughput of the float64 chain reference (rows, i.e. samples, per second), printed for the
report, with modest floors that a per-row Python loop or an accidental B (K+1) V copy would fail."""

import time

import numpy as np
import pytest

from specsample.reference.chain import chain_rejection_reference
from specsample.stats import test_seed

# (V, rows, floor in rows/s). Floors sit ~10x below what 2 shared CPU cores measured (V = 16:
# ~1e6 rows/s; V = 32768: ~1e3 rows/s; less when other jobs load the cores), so they only fail
# on a real regression.
CASES = [(16, 200_000, 1e5), (32768, 128, 1e2)]
NUM_K = 4


@pytest.mark.parametrize("draft", ["classic", "one_hot"])
@pytest.mark.parametrize(("vocab", "rows", "floor"), CASES, ids=[f"V{v}" for v, _, _ in CASES])
def test_reference_throughput(vocab, rows, floor, draft, capsys, request):
    """Best of 2 timed calls on materialised float32 target/draft rows (16 distinct requests
    tiled over the batch), K = 4, drafts drawn from q so acceptance lengths are realistic;
    asserts rows/s >= floor."""
    rng = np.random.default_rng(test_seed(request.node.nodeid))
    distinct = 16
    p = rng.random((distinct, NUM_K + 1, vocab), dtype=np.float32) ** 4
    p /= p.sum(axis=2, keepdims=True)
    q = 0.5 * p[:, :NUM_K] + 0.5 * rng.random((distinct, NUM_K, vocab), dtype=np.float32) ** 4
    q /= q.sum(axis=2, keepdims=True)
    index = np.arange(rows) % distinct
    cum_q = np.cumsum(q, axis=2, dtype=np.float64)[:, :, None, :]  # [distinct, K, 1, V]
    draws = rng.random((distinct, NUM_K, rows // distinct + 1, 1))
    x = np.argmax(cum_q > draws, axis=3)  # [distinct, K, rows / distinct + 1] draft ids ~ q
    x = x[index, :, np.arange(rows) // distinct]
    target = p[index]
    draft_probs = q[index] if draft == "classic" else None
    uniforms = rng.random((rows, NUM_K + 1))
    best = np.inf
    for _ in range(2):
        start = time.perf_counter()
        chain_rejection_reference(target, x, draft_probs, uniforms=uniforms)
        best = min(best, time.perf_counter() - start)
    rate = rows / best
    with capsys.disabled():
        print(f"\nreference throughput {draft} V={vocab} K={NUM_K}: {rate:.4g} rows/s ({best:.3f} s)")
    assert rate >= floor, f"{rate:.3g} rows/s < floor {floor:.3g} at V={vocab}"
