"""Row-parallel float64 references: the same results, computed by forked worker processes.

The float64 references are single-threaded numpy; at LLM vocabularies they are what a large
certificate waits for (verify's `full` budget runs up to 2^31 reference elements per certificate,
~30 s each on one core). Rows are independent, so blocks of rows go to a `fork` pool that reads the
inputs from the parent's memory (nothing is pickled but the row ranges and the results, so stride-0
broadcast inputs stay broadcasts). The workers only run numpy: forking a process that holds a CUDA
context is safe as long as the children never touch CUDA.
"""

from __future__ import annotations

import multiprocessing
import os

import numpy as np

from specsample.reference.chain import ChainReferenceResult, chain_rejection_reference

_JOB: dict = {}  # the inputs of the running job, inherited by the forked workers


def reference_workers() -> int:
    """Worker processes: SPECSAMPLE_REFERENCE_WORKERS, else the CPUs this process may use."""
    env = os.environ.get("SPECSAMPLE_REFERENCE_WORKERS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _slice(a, start: int, stop: int):
    return None if a is None else a[start:stop]


def _chain_block(bounds):
    start, stop = bounds
    j = _JOB
    return chain_rejection_reference(
        _slice(j["p"], start, stop),
        _slice(j["x"], start, stop),
        _slice(j["q"], start, stop),
        uniforms=_slice(j["u"], start, stop),
        num_draft_tokens=_slice(j["n"], start, stop),
        tol=j["tol"],
    )


def chain_rejection_reference_parallel(
    target_probs,
    draft_token_ids,
    draft_probs=None,
    *,
    uniforms,
    num_draft_tokens=None,
    tol: float = 0.0,
    workers: int | None = None,
    min_elements: int = 1 << 24,
) -> ChainReferenceResult:
    """`chain_rejection_reference` on blocks of rows in `workers` forked processes; equal to the
    serial call element for element. Runs serially below `min_elements` rows * V (a pool costs
    ~0.1 s), with one worker, or where `fork` is unavailable."""
    batch = np.shape(draft_token_ids)[0]
    vocab = np.shape(target_probs)[-1]
    workers = reference_workers() if workers is None else max(1, workers)
    workers = min(workers, batch)
    serial = workers <= 1 or batch * vocab < min_elements
    if serial or "fork" not in multiprocessing.get_all_start_methods():
        return chain_rejection_reference(target_probs, draft_token_ids, draft_probs, uniforms=uniforms,
                                          num_draft_tokens=num_draft_tokens, tol=tol)  # fmt: skip
    edges = np.linspace(0, batch, 4 * workers + 1).astype(int)  # 4 blocks per worker balance the load
    bounds = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
    _JOB.update(p=target_probs, x=draft_token_ids, q=draft_probs, u=uniforms, n=num_draft_tokens, tol=tol)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_chain_block, bounds)
    finally:
        _JOB.clear()
    return ChainReferenceResult(*(np.concatenate(field) for field in zip(*parts, strict=True)))
