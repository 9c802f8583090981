"""PNG of floor fraction by shape per kernel: `python benchmarks/plot.py RESULTS.json OUT.png`.

One panel per kernel; x = batch B (log scale), y = floor_us / median_us (log scale, 1 = at the
memory floor, dashed line at the 70% target). Colour = vocabulary V, line style = provider (ours
solid), marker = dtype; a line joins the shapes that differ only in B.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floors import KERNELS
from benchmarks.records import OURS, Record, load_records

_STYLE = {OURS: "-", "torch": "--", "torch_gumbel": "--", "torch_multinomial": ":"}
_MARKER = {"float32": "o", "bfloat16": "s", "float16": "^"}


def plot_floor_fractions(records: list[Record], path: Path, title: str = "") -> Path:
    """Write the PNG to `path` (parents created) and return it; raises ValueError without records."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not records:
        raise ValueError("no records to plot")
    kernels = [k for k in KERNELS if any(r.kernel == k for r in records)]
    vocabs = sorted({r.V for r in records})
    colours = {v: plt.get_cmap("tab10")(i % 10) for i, v in enumerate(vocabs)}
    ncols = min(3, len(kernels))
    nrows = (len(kernels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.0 * ncols, 4.4 * nrows), squeeze=False)
    for ax, kernel in zip(axes.flat, kernels, strict=False):
        lines = defaultdict(list)
        for r in records:
            if r.kernel == kernel:
                lines[(r.provider, r.K, r.V, r.dtype)].append(r)
        for (provider, K, V, dtype), rs in sorted(lines.items(), key=lambda kv: (kv[0][0] != OURS, kv[0])):
            rs.sort(key=lambda r: r.B)
            label = (
                f"{provider} V={V}" + (f" K={K}" if K else "") + ("" if dtype == "float32" else f" {dtype}")
            )
            ax.plot(
                [r.B for r in rs],
                [r.floor_fraction for r in rs],
                linestyle=_STYLE.get(provider, "-."),
                marker=_MARKER.get(dtype, "x"),
                color=colours[V],
                alpha=1.0 if provider == OURS else 0.6,
                label=label,
            )
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axhline(0.7, color="grey", linewidth=0.8, linestyle="--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_ylim(top=1.5)
        ax.set_title(kernel)
        ax.set_xlabel("batch B")
        ax.set_ylabel("floor / median time")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    for ax in list(axes.flat)[len(kernels) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="records file (results list, baseline or pytest report)")
    parser.add_argument("png", type=Path)
    args = parser.parse_args(argv)
    records, machine = load_records(args.results)
    plot_floor_fractions(records, args.png, title=str(machine.get("gpu", "")))
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
