"""plot.py writes a PNG of floor fraction by shape per kernel."""

import pytest

from benchmarks import plot
from benchmarks.floors import Case
from benchmarks.records import make_record, save_records


def _records():
    out = []
    for kernel, K in (("chain", 4), ("fast_sample", 0), ("logits", 8)):
        for V in (32000, 151936):
            for B in (1, 16, 64):
                for provider, us in (("specsample", 5.0 + B), ("torch", 300.0 + 4 * B)):
                    out.append(
                        make_record(
                            Case(kernel, B, K, V, "float32"),
                            provider,
                            median_us=us,
                            graph_us=None,
                            copy_bandwidth_bytes_per_s=4.2e12,
                            gpu="NVIDIA H200",
                        )
                    )
    out.append(
        make_record(
            Case("chain", 64, 4, 151936, "bfloat16"),
            "specsample",
            median_us=20.0,
            graph_us=15.0,
            copy_bandwidth_bytes_per_s=4.2e12,
            gpu="NVIDIA H200",
        )
    )
    return out


def test_plot_cli_writes_a_png_from_a_results_file(tmp_path):
    results = save_records(tmp_path / "h200.json", _records())
    png = tmp_path / "sub" / "h200.png"
    assert plot.main([str(results), str(png)]) == 0
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_plot_refuses_no_records(tmp_path):
    with pytest.raises(ValueError, match="no records"):
        plot.plot_floor_fractions([], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
