"""Floors: must-read bytes per kernel (DESIGN.md §5) and floor = bytes / copy bandwidth."""

import pytest

from benchmarks.floors import Case, floor_us, must_read_bytes

H200_COPY_BANDWIDTH = 4.24e12  # bytes/s, read + written (ANCHORS.md)


@pytest.mark.parametrize(
    ("case", "anchors_floor_us"),
    [
        # The floors ANCHORS.md printed for its H200 run, derived there by hand from the same model.
        (Case("chain", 1, 4, 32000, "float32"), 0.06),
        (Case("chain", 16, 4, 128256, "float32"), 3.9),
        (Case("chain", 64, 4, 151936, "float32"), 18.3),
        (Case("chain", 128, 8, 128256, "float32"), 31.0),
        (Case("fast_sample", 1, 0, 151936, "float32"), 0.14),
        (Case("fast_sample", 64, 0, 151936, "float32"), 9.2),
        (Case("fast_sample", 256, 0, 128256, "float32"), 31.0),
    ],
    ids=lambda v: v.label if isinstance(v, Case) else str(v),
)
def test_floor_matches_the_anchors_table(case, anchors_floor_us):
    got = floor_us(case, H200_COPY_BANDWIDTH)
    digits = 2 if anchors_floor_us < 1 else 1
    assert round(got, digits) == anchors_floor_us, (case.label, got)


def test_must_read_bytes_per_kernel():
    B, K, V = 3, 5, 1000
    assert must_read_bytes(Case("chain", B, K, V, "float32")) == 2 * B * V * 4
    assert must_read_bytes(Case("chain", B, K, V, "bfloat16")) == 2 * B * V * 2
    assert must_read_bytes(Case("chain_onehot", B, K, V, "float32")) == B * V * 4
    assert must_read_bytes(Case("fast_sample", B, 0, V, "float16")) == B * V * 2
    assert must_read_bytes(Case("sample_from_logits", B, 0, V, "float32")) == B * V * 4
    assert must_read_bytes(Case("logits", B, K, V, "bfloat16")) == B * (K + 1) * V * 2 + B * K * V * 2
    assert must_read_bytes(Case("logits_onehot", B, K, V, "float32")) == B * (K + 1) * V * 4


def test_floor_scales_inversely_with_bandwidth():
    case = Case("logits", 8, 4, 32000, "float32")
    assert floor_us(case, 1e12) == pytest.approx(2 * floor_us(case, 2e12))
    assert floor_us(case, 1e12) == pytest.approx(must_read_bytes(case) / 1e12 * 1e6)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("softmax", 1, 0, 10, "float32"), "kernel must be one of"),
        (("chain", 1, 4, 10, "int8"), "dtype must be one of"),
        (("chain", 1, 0, 10, "float32"), "needs K >= 1"),
        (("fast_sample", 1, 2, 10, "float32"), "K must be 0"),
        (("fast_sample", 0, 0, 10, "float32"), "B and V must be >= 1"),
    ],
)
def test_case_rejects_bad_metadata(args, match):
    with pytest.raises(ValueError, match=match):
        Case(*args)


def test_floor_rejects_nonpositive_bandwidth():
    with pytest.raises(ValueError, match="copy bandwidth must be > 0"):
        floor_us(Case("chain", 1, 1, 10, "float32"), 0.0)
