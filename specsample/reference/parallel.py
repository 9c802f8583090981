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
    return a[start:stop] if isinstance(a, np.ndarray) else a


def _run_block(bounds):
    start, stop = bounds
    fn, args, kwargs = _JOB["fn"], _JOB["args"], _JOB["kwargs"]
    return fn(
        *(_slice(a, start, stop) for a in args), **{k: _slice(v, start, stop) for k, v in kwargs.items()}
    )


def _concat(parts):
    first = parts[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(parts)
    fields = [_concat(list(field)) for field in zip(*parts, strict=True)]
    return type(first)(*fields) if hasattr(first, "_fields") else type(first)(fields)


def map_rows(fn, *args, rows: int, elements: int, workers: int | None = None, min_elements: int = 1 << 24,
             **kwargs):  # fmt: skip
    """fn(*args, **kwargs) computed on blocks of rows by `workers` forked processes and concatenated
    along axis 0. Every numpy-array argument is sliced by rows (its axis 0 must be the row axis,
    `rows` long); other arguments are passed whole. fn must return an array or a tuple / NamedTuple
    of arrays whose axis 0 is the row axis. Serial below `min_elements` (the work, e.g. rows * V),
    with one worker, or where `fork` is unavailable."""
    workers = min(reference_workers() if workers is None else max(1, workers), max(rows, 1))
    if workers <= 1 or elements < min_elements or "fork" not in multiprocessing.get_all_start_methods():
        return fn(*args, **kwargs)
    edges = np.linspace(0, rows, 4 * workers + 1).astype(int)  # 4 blocks per worker balance the load
    bounds = [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]
    _JOB.update(fn=fn, args=args, kwargs=kwargs)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_run_block, bounds)
    finally:
        _JOB.clear()
    return _concat(parts)


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
    """`chain_rejection_reference` on blocks of rows in forked worker processes (map_rows); equal
    to the serial call element for element."""
    batch = np.shape(draft_token_ids)[0]
    return map_rows(
        chain_rejection_reference, target_probs, draft_token_ids, draft_probs,
        uniforms=uniforms, num_draft_tokens=num_draft_tokens, tol=tol,
        rows=batch, elements=batch * np.shape(target_probs)[-1], workers=workers, min_elements=min_elements,
    )  # fmt: skip
