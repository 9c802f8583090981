"""Adversarial input batches: every row mixes hostile values the kernels must survive.

Probability rows (target and draft) are drawn from KINDS: a normal row, NaN everywhere, all zero,
one +inf entry, negative entries, all mass in the last lane, a single positive lane, float32
subnormals, values near the float32 maximum (their sum overflows float32). Logit rows: normal, NaN
everywhere, all -inf, a +inf entry, +-1e30, a single finite entry, exact ties. Draft ids: in range,
-1, V, 2^31 - 1, -2^31 (and +-2^40 for int64). Ragged counts: -3, 0, 1, K, K + 5. Temperatures: 0,
1e-30, 0.7, 1, 5, inf, -1, NaN. Seeds and offsets: 0, -1, 2^63 - 1, -2^63, 2^33 - 1, random.

Every float tensor is returned as a view into a larger buffer whose neighbouring columns hold
POISON (a large mass, or a large logit), so an out-of-bounds read of a neighbour changes the result
(and the reference comparison fails) even where it stays inside the allocation.
"""

from __future__ import annotations

import numpy as np
import torch

from specsample.kernels._launch import interpreting

PROB_KINDS = ("ok", "nan_row", "zero_row", "inf_entry", "negative_entries", "last_lane_only", "single_lane",
              "subnormal", "near_float32_max")  # fmt: skip
LOGIT_KINDS = ("ok", "nan_row", "neg_inf_row", "pos_inf_entry", "huge", "single_finite", "ties")
TEMPERATURES = (0.0, 1e-30, 0.7, 1.0, 5.0, float("inf"), -1.0, float("nan"))
SEED_VALUES = (0, -1, 2**63 - 1, -(2**63), 2**33 - 1)
PROB_POISON, LOGIT_POISON = 1.0, 1.0e4


def prob_kinds(dtype: torch.dtype) -> tuple[str, ...]:
    """The probability kinds of a `dtype` batch where the kernels run: PROB_KINDS, less bf16 subnormals
    under the interpreter (triton 3.9's interpreter widens bfloat16 subnormals to float32 wrongly:
    `_convert_float` clamps the exponent, so the kernel sees no mass;
    test_adversarial_values.py::test_bf16_subnormal_mass_survives_on_gpu checks them on the GPU)."""
    skip = {"subnormal"} if dtype == torch.bfloat16 and interpreting() else set()
    return tuple(k for k in PROB_KINDS if k not in skip)


def guarded(values: np.ndarray, dtype: torch.dtype, poison: float) -> torch.Tensor:
    """A [..., V] view (columns 1..V) of a [..., V + 2] buffer whose columns 0 and V + 1 hold
    `poison`: reading lane -1 or lane V of any row returns the poison, never a neighbour's value."""
    shape = values.shape
    buf = torch.full((*shape[:-1], shape[-1] + 2), poison, dtype=dtype)
    view = buf[..., 1 : shape[-1] + 1]
    view.copy_(torch.from_numpy(np.ascontiguousarray(values)).to(dtype))
    return view


def prob_rows(rng: np.random.Generator, shape, kinds=PROB_KINDS) -> np.ndarray:
    """[..., V] float64 rows, each of a kind drawn from `kinds` (normalised where that makes sense)."""
    vocab = shape[-1]
    rows = rng.dirichlet(np.full(vocab, 0.5), size=shape[:-1])
    flat = rows.reshape(-1, vocab)
    for r, kind in enumerate(rng.choice(kinds, size=flat.shape[0])):
        if kind == "nan_row":
            flat[r] = np.nan
        elif kind == "zero_row":
            flat[r] = 0.0
        elif kind == "inf_entry":
            flat[r, rng.integers(vocab)] = np.inf
        elif kind == "negative_entries":
            flat[r, rng.random(vocab) < 0.5] = -0.5
        elif kind == "last_lane_only":
            flat[r] = 0.0
            flat[r, -1] = 1.0
        elif kind == "single_lane":
            flat[r] = 0.0
            flat[r, rng.integers(vocab)] = rng.choice([1.0, 1e-30, 3.0])
        elif kind == "subnormal":
            flat[r] = np.where(rng.random(vocab) < 0.5, 1e-40, 0.0)
        elif kind == "near_float32_max":
            flat[r] = np.where(rng.random(vocab) < 0.5, 3.0e38, 0.0)
    return rows


def logit_rows(rng: np.random.Generator, shape, kinds=LOGIT_KINDS) -> np.ndarray:
    """[..., V] float64 logit rows, each of a kind drawn from `kinds`."""
    vocab = shape[-1]
    rows = rng.normal(0.0, 3.0, size=shape)
    flat = rows.reshape(-1, vocab)
    for r, kind in enumerate(rng.choice(kinds, size=flat.shape[0])):
        if kind == "nan_row":
            flat[r] = np.nan
        elif kind == "neg_inf_row":
            flat[r] = -np.inf
        elif kind == "pos_inf_entry":
            flat[r, rng.integers(vocab)] = np.inf
        elif kind == "huge":
            flat[r] = rng.choice([-1e30, 1e30, 0.0], size=vocab)
        elif kind == "single_finite":
            flat[r] = -np.inf
            flat[r, rng.integers(vocab)] = rng.normal()
        elif kind == "ties":
            flat[r] = 1.5
    return rows


def draft_ids(
    rng: np.random.Generator, batch: int, num_k: int, vocab: int, dtype: torch.dtype
) -> torch.Tensor:
    """[B, K] ids, about a third of them out of range (-1, V, 2^31 - 1, -2^31, and +-2^40 for int64)."""
    bad = [-1, vocab, 2**31 - 1, -(2**31)] + ([2**40, -(2**40)] if dtype == torch.int64 else [])
    ids = rng.integers(0, vocab, size=(batch, num_k))
    swap = rng.random((batch, num_k)) < 0.35
    ids[swap] = rng.choice(bad, size=int(swap.sum()))
    return torch.from_numpy(ids).to(dtype)


def ragged_counts(rng: np.random.Generator, batch: int, num_k: int, dtype=torch.int64) -> torch.Tensor:
    """[B] counts from {-3, 0, 1, K, K + 5} (outside [0, K] is clamped by the kernels)."""
    return torch.from_numpy(rng.choice([-3, 0, 1, num_k, num_k + 5], size=batch)).to(dtype)


def seeds_offsets(rng: np.random.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[B] int64 seeds and offsets, extreme values included."""
    pool = np.array(
        SEED_VALUES + tuple(int(v) for v in rng.integers(-(2**62), 2**62, size=4)), dtype=np.int64
    )
    return torch.from_numpy(rng.choice(pool, size=batch)), torch.from_numpy(rng.choice(pool, size=batch))


def temperatures(rng: np.random.Generator, batch: int, pool=TEMPERATURES) -> torch.Tensor:
    """[B] float32 temperatures drawn from `pool`."""
    return torch.from_numpy(rng.choice(np.array(pool, dtype=np.float32), size=batch))
