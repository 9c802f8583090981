"""specsample.compat.sglang: SGLang's signature and layout over our kernels, token for token.

Inputs are built the way SGLang's EAGLE `eagle_sample` builds them (root in candidates column 0,
retrive_index = b * S + j, predicts zeros, accept_index -1, coins from torch.rand); the expected
SGLang outputs are written out from the native `chain_rejection_sample` result by a plain loop over
requests, following SGLang's documented layout. All comparisons are exact.
"""

from __future__ import annotations

import pytest
import torch

from specsample.compat import sglang
from specsample.kernels.chain import chain_rejection_sample
from specsample.kernels.gumbel import fast_sample
from specsample.stats.seeding import current_test_seed


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(current_test_seed())


def eagle_inputs(gen, device, bs=64, num_steps=3, vocab=24, predicts_pad=0, permute=False):
    """SGLang's tensors for a chain of num_steps drafts (S = num_steps + 1 slots per request).

    `permute` stores the requests' slots in reverse batch order inside a larger predicts buffer, so a
    test fails if retrive_index is not what addresses predicts."""
    slots = num_steps + 1
    logits = 2.0 * torch.randn(bs, slots, vocab, generator=gen)
    target = torch.softmax(logits, -1)
    draft = torch.softmax(logits[:, :-1] + torch.randn(bs, slots - 1, vocab, generator=gen), -1)
    drafts = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).view(bs, slots - 1)
    drafts[: bs // 8, -1] = -1  # padded draft ids: rejected, never read
    target[1, 0] = 0.0  # a request whose first target row has no mass: emits -1, valid False
    root = torch.randint(0, vocab, (bs, 1), generator=gen)
    order = torch.arange(bs).flip(0) if permute else torch.arange(bs)
    retrive_index = (order[:, None] * slots + torch.arange(slots)[None, :] + predicts_pad).long()
    t = {
        "predicts": torch.zeros(bs * slots + predicts_pad, dtype=torch.int32),
        "accept_index": torch.full((bs, slots), -1, dtype=torch.int32),
        "accept_token_num": torch.zeros(bs, dtype=torch.int32),
        "candidates": torch.cat([root, drafts], 1).long(),
        "retrive_index": retrive_index,
        "retrive_next_token": torch.where(torch.arange(slots) < slots - 1, torch.arange(slots) + 1, -1)
        .expand(bs, slots)
        .long(),
        "retrive_next_sibling": torch.full((bs, slots), -1, dtype=torch.int64),
        "uniform_samples": torch.rand(bs, slots, generator=gen),
        "uniform_samples_for_final_sampling": torch.rand(bs, generator=gen),
        "target_probs": target,
        "draft_probs": draft,
    }
    return {k: v.to(device) for k, v in t.items()}


def expected_outputs(t):
    """SGLang's outputs written from the native result by a loop over requests."""
    num_k = t["candidates"].shape[1] - 1
    u = torch.cat([t["uniform_samples"][:, :num_k], t["uniform_samples_for_final_sampling"][:, None]], 1)
    res = chain_rejection_sample(t["target_probs"], t["candidates"][:, 1:], t["draft_probs"], uniforms=u)
    predicts = t["predicts"].clone().cpu()
    accept_index = t["accept_index"].clone().cpu()
    tokens, accepted, index = res.tokens.cpu(), res.num_accepted.cpu(), t["retrive_index"].cpu()
    for b in range(tokens.shape[0]):
        a = int(accepted[b])
        for j in range(a + 1):  # slot j (root, then accepted drafts) -> the token emitted after it
            predicts[index[b, j]] = tokens[b, j]
            accept_index[b, j] = index[b, j]
    return predicts, accept_index, accepted.to(torch.int32), res


@pytest.mark.parametrize("layout", ["eagle", "permuted-padded"])
def test_chain_adapter_equals_native(layout, gen, device):
    """Same coins -> exactly the native tokens, scattered to SGLang's predicts / accept_index /
    accept_token_num through retrive_index; untouched entries keep the caller's values."""
    permute = layout != "eagle"
    t = eagle_inputs(gen, device, predicts_pad=5 if permute else 0, permute=permute)
    want_predicts, want_index, want_num, res = expected_outputs(t)
    assert bool((res.num_accepted > 0).any()) and bool((res.num_accepted < 3).any()), (
        "inputs exercise nothing"
    )
    assert not bool(res.valid[1]), "the zero-mass row must exercise the invalid path"
    sglang.chain_speculative_sampling_triton(**t)
    assert torch.equal(t["predicts"].cpu(), want_predicts)
    assert torch.equal(t["accept_index"].cpu(), want_index)
    assert torch.equal(t["accept_token_num"].cpu(), want_num)


def test_chain_adapter_accepts_full_height_draft_probs(gen, device):
    """draft_probs with S rows (last row never read) gives the same outputs as S - 1 rows."""
    t = eagle_inputs(gen, device, bs=16)
    u = {k: v.clone() for k, v in t.items()}
    pad = torch.rand(16, 1, t["draft_probs"].shape[2], generator=gen).to(device)
    u["draft_probs"] = torch.cat([t["draft_probs"], pad], 1)
    sglang.chain_speculative_sampling_triton(**t)
    sglang.chain_speculative_sampling_triton(**u)
    for k in ("predicts", "accept_index", "accept_token_num"):
        assert torch.equal(t[k], u[k]), k


@pytest.mark.parametrize(
    "change, match",
    [
        ({"threshold_acc": 0.5}, "threshold"),
        ({"uniform_samples": "short"}, "uniform_samples"),
        ({"predicts": "2d"}, "predicts"),
        ({"draft_probs": "vocab"}, "draft_probs"),
    ],
)
def test_chain_adapter_rejects_bad_metadata(change, match, gen, device):
    """Lossy thresholds and mis-shaped tensors raise ValueError naming the argument."""
    t = eagle_inputs(gen, device, bs=4)
    key, value = next(iter(change.items()))
    if value == "short":
        t[key] = t[key][:, :-1]
    elif value == "2d":
        t[key] = t[key].view(4, -1)
    elif value == "vocab":
        t[key] = t[key][..., :-1]
    else:
        t[key] = value
    with pytest.raises(ValueError, match=match):
        sglang.chain_speculative_sampling_triton(**t)


def test_reverse_wrapper_round_trip(gen, device):
    """chain_sampler() (SGLang's function behind our protocol) with our adapter plugged in as the
    engine returns the native tokens: the layout translation is exact in both directions, for
    classic and one-hot drafts."""
    t = eagle_inputs(gen, device, bs=32)
    p, q, ids = t["target_probs"], t["draft_probs"], t["candidates"][:, 1:]
    u = torch.rand(32, p.shape[1], generator=gen).to(device)
    wrapped = sglang.chain_sampler(engine_fn=sglang.chain_speculative_sampling_triton)
    for draft in (q, None):
        native = chain_rejection_sample(p, ids, draft, uniforms=u)
        got = wrapped(p, ids, draft, uniforms=u)
        a = native.num_accepted.long()
        assert torch.equal(got["num_accepted"], a)
        assert torch.equal(got["tokens"], native.tokens.long())


def test_fast_sample_equals_native(gen, device):
    """SGLang's fast_sample(probs, num_samples) is our fast_sample on torch's default generator:
    the same generator state gives the same (sample_p, sample_index)."""
    probs = torch.softmax(torch.randn(9, 50, generator=gen), -1).to(device)
    for n in (1, 4):
        torch.manual_seed(current_test_seed(f"n{n}"))
        got = sglang.fast_sample(probs, n)
        torch.manual_seed(current_test_seed(f"n{n}"))
        want = fast_sample(probs, n)
        assert got[0].shape == (9, n) and got[1].dtype == torch.int64
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
