"""benchmarks/diagnostics/profile/summarize_source.py: the stall shares it prints are the samples of
each SASS instruction (predicates stripped for the opcode) over the total, from a plain or gzipped
source page with ncu's preamble lines before the header."""

import gzip

import pytest

from benchmarks.diagnostics.profile.summarize_source import main

PAGE = [
    '"Kernel Name","_chain_kernel"',
    '"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_math"',
    '"0x10","WARPSYNC.ALL","60","58","2"',
    '"0x20","@P1 LDG.E R2, desc[UR4][R4.64]","30","30","0"',
    '"0x30","LDG.E R3, desc[UR4][R6.64]","10","0","10"',
]


@pytest.mark.parametrize("compressed", [False, True])
def test_shares_by_opcode_and_instruction(tmp_path, capsys, compressed):
    path = tmp_path / ("page.csv.gz" if compressed else "page.csv")
    text = "\n".join(PAGE) + "\n"
    if compressed:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    assert main([str(path), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "3 SASS lines" in out and "stall samples 100" in out
    lines = out.splitlines()
    by_op = {
        ln.split()[0]: ln.split()[1] for ln in lines if ln.startswith("  ") and "%" in ln and "0x" not in ln
    }
    assert by_op == {"WARPSYNC.ALL": "60.0%", "LDG.E": "40.0%"}
    top = [ln for ln in lines if ln.strip().startswith("0x")]
    assert len(top) == 2 and "60.0%" in top[0] and "stall_long_sb=58" in top[0] and "30.0%" in top[1]


def test_address_ranges(tmp_path, capsys):
    """--cuts splits the samples at offsets from the first instruction: 0x10 alone, then the rest."""
    path = tmp_path / "page.csv"
    path.write_text("\n".join(PAGE) + "\n")
    assert main([str(path), "--top", "1", "--cuts", "0x10", "--names", "start,loads"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ranges = {ln.split()[0]: ln.split()[-1] for ln in lines if " from 0x" in ln}
    assert ranges == {"start": "60.0%", "loads": "40.0%"}
