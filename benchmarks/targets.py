"""The speed targets the kernel issues set, and the table that sets measured values against them.

Issue 4 (chain, fp32, do_bench median): (B, K, V) = (1, 4, 32000) <= 10 us; (16, 4, 128256) <= 12 us;
(64, 4, 151936) <= 26 us; (128, 8, 128256) <= 44 us.
Issue 5 (fast_sample, fp32, do_bench median): (B, V) = (1, 151936) <= 8 us; (64, 151936) <= 13 us;
(256, 128256) <= 44 us and >= 70% of the floor.
Issue 6 (logits, bf16 and fp32, classic and one-hot): >= 70% of the floor at (64, 4, 151936) and
(128, 8, 128256).
`anchors` are the ANCHORS.md figures (one earlier H200 run, do_bench median, us) for context only:
they were not measured in the same run, unlike the torch baselines the table also shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.floors import Case
from benchmarks.records import OURS, Record


@dataclass(frozen=True)
class Target:
    case: Case
    max_us: float | None  # do_bench median must be <= this
    min_floor_fraction: float | None  # floor_us / median_us must be >= this
    issue: int
    anchors: dict = field(default_factory=dict, compare=False, hash=False)

    def met_by(self, median_us: float, floor_fraction: float) -> bool:
        """The issue's criterion on one timing (a do_bench or zero_pause median, µs) and the floor's
        share of it: within max_us and at least the minimum share."""
        return (self.max_us is None or median_us <= self.max_us) and (
            self.min_floor_fraction is None or floor_fraction >= self.min_floor_fraction
        )

    def goal(self) -> str:
        """The criterion as the tables print it, e.g. '<= 44 us and >= 70% floor'."""
        parts = (
            None if self.max_us is None else f"<= {self.max_us:g} us",
            None if self.min_floor_fraction is None else f">= {self.min_floor_fraction:.0%} floor",
        )
        return " and ".join(p for p in parts if p)


def _chain(B, K, V, max_us, anchors):
    return Target(Case("chain", B, K, V, "float32"), max_us, None, 4, anchors)


def _fast(B, V, max_us, frac, anchors):
    return Target(Case("fast_sample", B, 0, V, "float32"), max_us, frac, 5, anchors)


TARGETS: tuple[Target, ...] = (
    _chain(1, 4, 32000, 10.0, {"sglang": 15.6, "vllm": 136, "flashinfer": 17.2, "torch": 639}),
    _chain(16, 4, 128256, 12.0, {"sglang": 90.7, "vllm": 120, "flashinfer": 51.3, "torch": 468}),
    _chain(64, 4, 151936, 26.0, {"sglang": 120, "vllm": 153, "flashinfer": 81.8, "torch": 613}),
    _chain(128, 8, 128256, 44.0, {"sglang": 166, "vllm": 362, "flashinfer": 92.3, "torch": 795}),
    _fast(1, 151936, 8.0, None, {"torch_multinomial": 144, "torch_gumbel": 34.0, "flashinfer": 23.7}),
    _fast(64, 151936, 13.0, None, {"torch_multinomial": 152, "torch_gumbel": 96.8, "flashinfer": 47.2}),
    _fast(256, 128256, 44.0, 0.70, {"torch_multinomial": 359, "torch_gumbel": 282, "flashinfer": 70.0}),
    *(
        Target(Case(kernel, B, K, 151936 if B == 64 else 128256, dtype), None, 0.70, 6)
        for kernel in ("logits", "logits_onehot")
        for (B, K) in ((64, 4), (128, 8))
        for dtype in ("float32", "bfloat16")
    ),
)


@dataclass
class TargetRow:
    target: Target
    ours: Record | None
    baselines: dict  # provider -> median_us measured in the same run
    meets: bool | None  # None when ours was not measured


def evaluate(targets: tuple[Target, ...], records: list[Record]) -> list[TargetRow]:
    """Set every target against our record for its shape and the same-run baseline records."""
    rows = []
    for t in targets:
        same = [r for r in records if r.case == t.case]
        ours = next((r for r in same if r.provider == OURS), None)
        baselines = {r.provider: r.median_us for r in same if r.provider != OURS}
        meets = None if ours is None else t.met_by(ours.median_us, ours.floor_fraction)
        rows.append(TargetRow(t, ours, baselines, meets))
    return rows


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def targets_markdown(rows: list[TargetRow]) -> str:
    """Markdown table: target, measured median, floor, floor fraction, verdict, same-run baselines
    with their time ratio to ours, and the ANCHORS.md figures for context."""
    head = (
        "| issue | kernel | B | K | V | dtype | target | ours median us | floor us | floor frac | meets |"
        " same-run baselines: us (x ours) | ANCHORS.md (earlier run) us |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for row in rows:
        t, c, ours = row.target, row.target.case, row.ours
        goal = t.goal()
        base = ", ".join(
            f"{p} {us:.1f} ({us / ours.median_us:.1f}x)" if ours else f"{p} {us:.1f}"
            for p, us in sorted(row.baselines.items())
        )
        anchors = ", ".join(f"{p} {us:g}" for p, us in t.anchors.items()) or "-"
        verdict = {True: "yes", False: "NO", None: "not measured"}[row.meets]
        lines.append(
            f"| {t.issue} | {c.kernel} | {c.B} | {c.K} | {c.V} | {c.dtype} | {goal} | "
            f"{_fmt(ours and ours.median_us)} | {_fmt(ours and ours.floor_us, '.2f')} | "
            f"{_fmt(ours and ours.floor_fraction, '.2f')} | {verdict} | {base or '-'} | {anchors} |"
        )
    return head + "\n".join(lines) + "\n"
