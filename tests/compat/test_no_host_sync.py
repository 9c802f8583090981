"""GPU: the adapters never synchronise with the host and replay correctly from a CUDA graph.

`torch.cuda.set_sync_debug_mode("error")` makes any synchronising CUDA call raise, so an eager call
that completes proves the adapter has no host sync; capture + replay with the inputs refilled in place
must equal an eager call on the refilled inputs (exact equality).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from specsample.compat import flashinfer, sglang, vllm
from specsample.stats.seeding import current_test_seed

pytestmark = pytest.mark.gpu
V = 4096


def _sglang_args(gen, bs=8, slots=4):
    target = torch.softmax(torch.randn(bs, slots, V, generator=gen), -1)
    draft = torch.softmax(torch.randn(bs, slots - 1, V, generator=gen), -1)
    t = {
        "predicts": torch.zeros(bs * slots, dtype=torch.int32),
        "accept_index": torch.full((bs, slots), -1, dtype=torch.int32),
        "accept_token_num": torch.zeros(bs, dtype=torch.int32),
        "candidates": torch.randint(0, V, (bs, slots), generator=gen),
        "retrive_index": torch.arange(bs * slots).view(bs, slots),
        "retrive_next_token": torch.full((bs, slots), -1),
        "retrive_next_sibling": torch.full((bs, slots), -1),
        "uniform_samples": torch.rand(bs, slots, generator=gen),
        "uniform_samples_for_final_sampling": torch.rand(bs, generator=gen),
        "target_probs": target,
        "draft_probs": draft,
    }
    return {k: v.cuda() for k, v in t.items()}


def _flashinfer_args(gen, bs=8, s=3):
    draft = torch.softmax(torch.randn(bs, s, V, generator=gen), -1)
    target = torch.softmax(torch.randn(bs, s + 1, V, generator=gen), -1)
    ids = torch.randint(0, V, (bs, s), generator=gen)
    seed = torch.randint(0, 2**62, (bs,), generator=gen)
    offset = torch.randint(0, 2**40, (bs,), generator=gen)
    return [t.cuda() for t in (draft, ids, target, seed, offset)]


def _vllm_args(gen, n=(3, 3, 3, 3), k=3):
    total = sum(n)
    meta = SimpleNamespace(all_greedy=False, all_random=False, generators={},
                           temperature=torch.tensor([1.0, 0.0, 1.0, 1.0]).cuda())  # fmt: skip
    return dict(
        draft_token_ids=torch.randint(0, V, (total,), generator=gen).to(torch.int32).cuda(),
        num_draft_tokens=list(n),
        max_spec_len=k,
        cu_num_draft_tokens=torch.tensor(n).cumsum(0).to(torch.int32).cuda(),
        draft_probs=torch.softmax(torch.randn(total, V, generator=gen), -1).cuda(),
        target_logits=torch.randn(total, V, generator=gen).cuda(),
        bonus_token_ids=torch.randint(0, V, (len(n), 1), generator=gen).to(torch.int32).cuda(),
        sampling_metadata=meta,
        uniforms=torch.rand(len(n), k + 1, generator=gen).cuda(),
    )


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(current_test_seed())


def _no_sync(fn):
    fn()  # compile the kernels first (compilation may synchronise)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_adapters_never_sync(gen):
    t = _sglang_args(gen)
    _no_sync(lambda: sglang.chain_speculative_sampling_triton(**t))
    _no_sync(lambda: sglang.fast_sample(t["target_probs"][:, 0], 2))
    draft, ids, target, seed, offset = _flashinfer_args(gen)
    _no_sync(lambda: flashinfer.chain_speculative_sampling(draft, ids, target, seed=seed, offset=offset))
    v = _vllm_args(gen)
    _no_sync(lambda: vllm.rejection_sample(**v))


def _capture(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def test_sglang_adapter_replays_from_a_cuda_graph(gen):
    static = _sglang_args(gen)
    graph, _ = _capture(lambda: sglang.chain_speculative_sampling_triton(**static))
    for _ in range(3):
        fresh = _sglang_args(gen)
        for k in ("uniform_samples", "uniform_samples_for_final_sampling", "target_probs", "draft_probs",
                  "candidates"):  # fmt: skip
            static[k].copy_(fresh[k])
        for k in ("predicts", "accept_index", "accept_token_num"):
            static[k].copy_(fresh[k])
        graph.replay()
        sglang.chain_speculative_sampling_triton(**fresh)
        torch.cuda.synchronize()
        for k in ("predicts", "accept_index", "accept_token_num"):
            assert torch.equal(static[k], fresh[k]), k


def test_flashinfer_adapter_replays_with_advanced_offsets(gen):
    draft, ids, target, seed, offset = _flashinfer_args(gen)
    graph, out = _capture(
        lambda: flashinfer.chain_speculative_sampling(draft, ids, target, seed=seed, offset=offset)
    )
    for _ in range(3):
        offset.add_(draft.shape[1] + 1)  # the caller advances offsets between steps
        graph.replay()
        want = flashinfer.chain_speculative_sampling(draft, ids, target, seed=seed, offset=offset)
        torch.cuda.synchronize()
        assert torch.equal(out[0], want[0]) and torch.equal(out[2], want[2])
