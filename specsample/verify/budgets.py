"""Budgets: how many rows each certificate uses and at which error rates.

`ci`       CPU, Triton interpreter, 2 cores: the whole `make verify` within minutes. alpha = 1e-6 per
           statistical assertion (about 100 of them: family-wise false-fail <= 1e-4 by the union bound),
           power 1 - 1e-3 against TV >= 0.04 on every GOF law; coupling TV <= 2e-3 at delta = 1e-6.
`standard` GPU default: alpha = 1e-7, beta = 1e-6, eps = 0.01; coupling on 10^6 rows.
`full`     H200, millions of rows per case (<= 10 minutes): alpha = 1e-9, beta = 1e-9, eps = 0.005 on GOF
           (capped at 8 10^6 rows), coupling on 4 10^6 rows (TV <= 3.5e-6 at delta = 1e-6 with 0 mismatches).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    name: str
    alpha: float  # per statistical assertion (false fail)
    beta: float  # false pass at the design eps
    eps: float  # GOF design: TV distance caught with probability >= 1 - beta
    gof_min_rows: int
    gof_max_rows: int
    coupling_rows: int
    coupling_delta: float
    coupling_eps: float  # pass iff TV(sampler, reference) upper bound <= coupling_eps
    seeded_rows: int
    grid_n1: int
    grid_n2: int
    gumbel_plackett_max_vocab: int
    graph_replays: int
    reference_elements: int = 1 << 30  # cap on rows * V for certificates that run the numpy reference

    def reference_rows(self, rows: int, vocab: int, floor: int = 4096) -> int:
        """`rows`, capped so that the float64 reference processes at most `reference_elements` values."""
        return int(min(rows, max(floor, self.reference_elements // max(vocab, 1))))


BUDGETS = {
    "ci": Budget(
        "ci", alpha=1e-6, beta=1e-3, eps=0.04, gof_min_rows=4_000, gof_max_rows=60_000,
        coupling_rows=16_384, coupling_delta=1e-6, coupling_eps=2e-3, seeded_rows=4_096,
        grid_n1=128, grid_n2=128, gumbel_plackett_max_vocab=16, graph_replays=0,
    ),
    "standard": Budget(
        "standard", alpha=1e-7, beta=1e-6, eps=0.01, gof_min_rows=100_000, gof_max_rows=2_000_000,
        coupling_rows=1_000_000, coupling_delta=1e-6, coupling_eps=5e-5, seeded_rows=262_144,
        grid_n1=512, grid_n2=512, gumbel_plackett_max_vocab=64, graph_replays=2_000,
        reference_elements=1 << 29,
    ),
    "full": Budget(
        "full", alpha=1e-9, beta=1e-9, eps=0.005, gof_min_rows=1_000_000, gof_max_rows=8_000_000,
        coupling_rows=4_000_000, coupling_delta=1e-6, coupling_eps=1e-5, seeded_rows=1_048_576,
        grid_n1=1024, grid_n2=1024, gumbel_plackett_max_vocab=128, graph_replays=10_000,
        reference_elements=1 << 31,
    ),
}  # fmt: skip


def get_budget(name: str) -> Budget:
    try:
        return BUDGETS[name]
    except KeyError:
        raise ValueError(f"--budget: expected one of {sorted(BUDGETS)}, got {name!r}") from None


def for_sampler(budget: Budget, sampler) -> Budget:
    """The budget a sampler runs at. Under the Triton interpreter (a torch sampler on the CPU) the
    `ci` budget is scaled to what the interpreter affords (about 5 10^3 rows/s): GOF designed for
    eps = 0.06 instead of 0.04 (same alpha and beta), coupling on 8192 random rows (TV <= 3e-3 at
    delta = 1e-6), a 64 x 64 grid. Numpy samplers (references, reference mutants) always run at `ci`."""
    from dataclasses import replace

    if getattr(sampler, "inputs", "numpy") == "numpy":
        # numpy samplers (references, reference mutants) run on the CPU: the `ci` budget everywhere
        # (the GPU budgets are for kernels; the references are proven at `ci` in CPU CI)
        return BUDGETS["ci"]
    if budget.name != "ci":
        return budget
    if str(getattr(sampler, "device", "cpu")).startswith("cuda"):
        return budget
    return replace(
        budget,
        eps=0.06,
        coupling_rows=8192,
        coupling_eps=3e-3,
        seeded_rows=2048,
        grid_n1=64,
        grid_n2=64,
        gof_min_rows=2000,
    )
