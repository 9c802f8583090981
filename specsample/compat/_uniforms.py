"""The chain kernel's seeded uniforms, materialised: adapters whose engine contract needs the
uniforms themselves (FlashInfer's independent acceptance count) draw them here and pass them to
`chain_rejection_sample(uniforms=...)`, which is then bit-identical to its own seeded path.

u[b, i] = uniform_from_word(word 0 of philox(seeds[b], offsets[b], index=i, STREAM_CHAIN_UNIFORM,
position=0)), i = 0..K (numpy twin: `specsample.reference.philox.chain_uniforms`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from specsample.kernels._launch import cdiv, check_device, interpreting, next_pow2
from specsample.kernels.philox import STREAM_CHAIN_UNIFORM, philox_words, uniform_from_word


@triton.jit
def _chain_uniforms_kernel(
    seed_ptr,  # [B] int64, element stride ss_b (0 broadcasts one seed)
    offset_ptr,  # [B] int64, element stride so_b
    u_ptr,  # [B, NUM_COLUMNS] fp32 out, contiguous
    B, ss_b, so_b,
    NUM_COLUMNS: tl.constexpr,
    COLUMNS_POW2: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
):  # fmt: skip
    # u[b, i] = (w >> 8) 2^-24, w = word 0 of Philox(key = seed_b; counter = (i, STREAM << 24, offset_b))
    rows = tl.program_id(0).to(tl.int64) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS).to(tl.int64)
    cols = tl.arange(0, COLUMNS_POW2).to(tl.int64)
    row_ok = rows < B
    seed = tl.load(seed_ptr + rows * ss_b, mask=row_ok, other=0).to(tl.int64)
    offset = tl.load(offset_ptr + rows * so_b, mask=row_ok, other=0).to(tl.int64)
    zero = rows[:, None] * 0 + cols[None, :] * 0
    w0, _, _, _ = philox_words(seed[:, None] + zero, offset[:, None] + zero, cols[None, :] + zero,
                               STREAM_CHAIN_UNIFORM, zero)  # fmt: skip
    mask = row_ok[:, None] & (cols[None, :] < NUM_COLUMNS)
    tl.store(u_ptr + rows[:, None] * NUM_COLUMNS + cols[None, :], uniform_from_word(w0), mask=mask)


def seeded_chain_uniforms(seeds: torch.Tensor, offsets: torch.Tensor, num_columns: int) -> torch.Tensor:
    """[B, num_columns] float32: the uniforms `chain_rejection_sample(seeds=, offsets=)` draws for
    K = num_columns - 1. seeds, offsets: int64 [B] (stride 0 allowed). No host synchronisation."""
    for name, t in (("seeds", seeds), ("offsets", offsets)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != 1:
            raise TypeError(f"{name}: expected a 1-D int64 torch.Tensor, got {getattr(t, 'dtype', type(t))}")
        check_device(name, t)
    if seeds.shape != offsets.shape:
        raise ValueError(
            f"seeds/offsets: expected equal shapes [B], got {tuple(seeds.shape)} and {tuple(offsets.shape)}"
        )
    batch = seeds.shape[0]
    out = torch.empty((batch, num_columns), dtype=torch.float32, device=seeds.device)
    if batch == 0:
        return out
    block_rows = min(256, next_pow2(batch)) if interpreting() else 16
    _chain_uniforms_kernel[(cdiv(batch, block_rows),)](
        seeds, offsets, out, batch, seeds.stride(0), offsets.stride(0),
        NUM_COLUMNS=num_columns, COLUMNS_POW2=next_pow2(num_columns), BLOCK_ROWS=block_rows,
    )  # fmt: skip
    return out
