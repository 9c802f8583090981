"""Input builders shared by the tests of `rejection_sample_logits` (no tests here; the name keeps it
with the test_logits_* files it serves)."""

from __future__ import annotations

import numpy as np
import torch

from specsample.kernels.logits import rejection_sample_logits
from specsample.kernels.result import SampleResult
from specsample.reference.logits import rejection_sample_logits_reference

# CPU tensors under the interpreter (tests/conftest.py sets it when there is no GPU), CUDA otherwise.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
TEMPERATURES = (0.0, 0.35, 1.0, 2.5)
BAD_TEMPERATURES = (-1.0, float("nan"), float("inf"))


def make_batch(seed: int, batch: int, num_k: int, vocab: int, *, classic: bool, dtype: str = "fp32",
               edges: bool = True, ragged: bool = True, scale: float = 3.0) -> dict:  # fmt: skip
    """Keyword arguments of `rejection_sample_logits` (torch tensors on CPU).

    Logits N(0, scale^2); drafts perturb them by N(0, 1) (classic). With `edges`: NaN / +-inf logits,
    requests whose target rows have no finite logit, invalid draft ids (-1, V), draft logits equal to
    the target ones (empty residual on rejection), invalid temperatures (negative, NaN, inf) and
    ragged counts outside [0, K]. Half of the drafts are the target argmax, so greedy rows accept.
    """
    rng = np.random.default_rng(seed)
    lg = rng.normal(0.0, scale, (batch, num_k + 1, vocab))
    dl = lg[:, :num_k] + rng.normal(0.0, 1.0, (batch, num_k, vocab)) if classic else None
    x = rng.integers(0, vocab, (batch, num_k))
    temps = rng.choice(TEMPERATURES, batch)
    if edges:
        hole = rng.random(lg.shape) < 0.05
        lg[hole] = rng.choice([np.nan, np.inf, -np.inf], hole.sum())
        lg[rng.random((batch, num_k + 1)) < 0.02] = np.nan  # a target row without mass
        lg[rng.random(batch) < 0.02] = -np.inf  # a request without mass
        if classic:
            hole = rng.random(dl.shape) < 0.05
            dl[hole] = rng.choice([np.nan, np.inf, -np.inf], hole.sum())
            same = rng.random(batch) < 0.1
            dl[same] = lg[same, :num_k]
        x = np.where(rng.random(x.shape) < 0.1, rng.choice([-1, vocab], x.shape), x)
        temps = np.where(rng.random(batch) < 0.05, rng.choice(BAD_TEMPERATURES, batch), temps)
    clean = np.where(np.isfinite(lg[:, :num_k]), lg[:, :num_k], -np.inf)
    x = np.where(rng.random(x.shape) < 0.5, clean.argmax(-1), x)
    out = {
        "target_logits": torch.tensor(lg, dtype=DTYPES[dtype]),
        "draft_token_ids": torch.tensor(x, dtype=torch.int64),
        "draft_logits": torch.tensor(dl, dtype=DTYPES[dtype]) if classic else None,
        "temperature": torch.tensor(temps, dtype=torch.float32),
        "seeds": torch.tensor(rng.integers(-(2**63), 2**63 - 1, batch, dtype=np.int64)),
        "offsets": torch.tensor(rng.integers(0, 2**62, batch, dtype=np.int64)),
    }
    if ragged:
        out["num_draft_tokens"] = torch.tensor(rng.integers(-1, num_k + 2, batch), dtype=torch.int32)
    return out


def _to_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def sample_logits(*args, **kwargs) -> SampleResult:
    """`rejection_sample_logits` with every tensor argument moved to DEVICE and the outputs on CPU,
    so the same tests run under the interpreter and on a GPU."""
    res = rejection_sample_logits(*map(_to_device, args), **{k: _to_device(v) for k, v in kwargs.items()})
    return SampleResult(*(t.cpu() for t in res))


def run_both(case: dict, config: dict | None = None, tol: float = 1e-4):
    """(kernel SampleResult as numpy arrays, reference result) on the same inputs and Philox stream."""
    res = sample_logits(**case, _config=config)
    ref = rejection_sample_logits_reference(**case, tol=tol)
    return tuple(t.numpy() for t in res), ref


def row_mismatch(kernel, ref) -> np.ndarray:
    """[B] bool: any output field of the row differs."""
    tokens, accepted, fallback, valid = kernel
    return (
        (tokens != ref.tokens).any(axis=1)
        | (accepted != ref.num_accepted)
        | (fallback != ref.fallback)
        | (valid != ref.valid)
    )


def subset(case: dict, rows) -> dict:
    """The same requests (inputs, seeds and offsets) restricted to / reordered by `rows`."""
    rows = torch.as_tensor(rows, dtype=torch.int64)
    return {k: (v[rows].contiguous() if isinstance(v, torch.Tensor) else v) for k, v in case.items()}
