"""benchmarks/diagnostics/stream_mechanism.py: every reader (cp.async copies, TMA boxes) reads each
row of p and q exactly once at the chain's tiling, and the PTX stage puts the evict-first policy on
the bulk tensor copies it finds (and on nothing else)."""

import torch

from benchmarks.diagnostics.stream_mechanism import add_bulk_policy, readers

_BULK = (
    "\t@%p2 cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%r8], "
    "[%rd2, {%r115, %r9, %r10}], [%r6];\n"
)
_PTX = ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b32 \t%r<4>;\n" + _BULK + "\tret;\n}\n"


def test_every_reader_reads_each_row_once(device):
    gen = torch.Generator().manual_seed(12)
    p = torch.rand(3, 128 * 40, generator=gen).to(device)  # 10 chunks of 512: spans end in a partial one
    q = torch.rand(3, 128 * 40, generator=gen).to(device)
    want = torch.stack([p.double().sum(1), q.double().sum(1)], dim=1)
    names = []
    for name, (call, buf) in readers(p, q, tiles=3, stages=2).items():
        call()
        torch.testing.assert_close(buf.double().sum(1), want, rtol=1e-6, atol=0.0, msg=name)
        names.append(name)
    assert names == ["copies", "copies_ef", "tma", "tma_ef", "tma8_ef"]


def test_bulk_policy_rewrites_only_bulk_tensor_copies():
    out = add_bulk_policy(_PTX)
    assert "createpolicy.fractional.L2::evict_first.b64 \t%bulk_evict_first, 1.0;" in out
    hinted = "complete_tx::bytes.L2::cache_hint [%r8], [%rd2, {%r115, %r9, %r10}], [%r6], %bulk_evict_first;"
    assert hinted in out
    plain = _PTX.replace(_BULK, "\tcp.async.cg.shared.global [%r1], [%rd1], 16;\n")
    assert add_bulk_policy(plain) == plain


def test_copy_readers_follow_row_strides(device):
    """Rows of p and q taken from [B, K+1, V] and [B, K, V] tensors (the chain's layout, `--scattered`):
    the copy readers use each tensor's own row stride, and the TMA readers are left out."""
    gen = torch.Generator().manual_seed(13)
    p = torch.rand(3, 5, 128 * 8, generator=gen).to(device)[:, 0]
    q = torch.rand(3, 4, 128 * 8, generator=gen).to(device)[:, 0]
    want = torch.stack([p.double().sum(1), q.double().sum(1)], dim=1)
    got = readers(p, q, tiles=1, stages=1)
    assert list(got) == ["copies", "copies_ef"]
    for name, (call, buf) in got.items():
        call()
        torch.testing.assert_close(buf.double().sum(1), want, rtol=1e-6, atol=0.0, msg=name)
