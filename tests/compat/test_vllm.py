"""specsample.compat.vllm: vLLM's ragged `rejection_sample` over our kernels, token for token.

Inputs are built the way vLLM's model runner builds them (flattened drafts, `num_draft_tokens` as a
host list, `cu_num_draft_tokens` its inclusive cumsum on the device, -1 placeholder drafts, bonus
tokens [B, 1], a SamplingMetadata with per-request temperature, 0 for greedy rows). The expected
output is written by a plain loop over requests from the native `chain_rejection_sample` result on
padded inputs (random rows) or from the target argmax (greedy rows), following vLLM's documented
layout. All comparisons are exact.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from specsample.compat import vllm
from specsample.kernels.chain import chain_rejection_sample
from specsample.stats.seeding import current_test_seed

V = 24


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(current_test_seed())


def vllm_inputs(gen, device, num_draft_tokens, max_spec_len, classic=True, greedy_rows=()):
    batch, total = len(num_draft_tokens), sum(num_draft_tokens)
    logits = 2.0 * torch.randn(total, V, generator=gen)
    draft_probs = torch.softmax(logits + torch.randn(total, V, generator=gen), -1)
    drafts = torch.multinomial(draft_probs, 1, generator=gen).view(-1).to(torch.int32)
    if total > 3:
        drafts[3] = -1  # a placeholder draft
    temperature = torch.ones(batch)
    temperature[list(greedy_rows)] = 0.0
    meta = SimpleNamespace(
        all_greedy=len(greedy_rows) == batch,
        all_random=len(greedy_rows) == 0,
        temperature=temperature.to(device),
        generators={},
    )
    t = dict(
        draft_token_ids=drafts.to(device),
        num_draft_tokens=list(num_draft_tokens),
        max_spec_len=max_spec_len,
        cu_num_draft_tokens=torch.tensor(num_draft_tokens).cumsum(0).to(torch.int32).to(device),
        draft_probs=draft_probs.to(device) if classic else None,
        target_logits=logits.to(device),
        bonus_token_ids=torch.randint(0, V, (batch, 1), generator=gen).to(torch.int32).to(device),
        sampling_metadata=meta,
    )
    uniforms = torch.rand(batch, max_spec_len + 1, generator=gen).to(device)
    return t, uniforms


def expected_output(t, uniforms):
    """vLLM's output rows from the native sampler on padded inputs / the argmax rule, by a loop."""
    n_list, k = t["num_draft_tokens"], t["max_spec_len"]
    batch = len(n_list)
    probs = torch.softmax(t["target_logits"].float(), -1)
    starts = [sum(n_list[:b]) for b in range(batch)]
    p = torch.full((batch, k + 1, V), 1.0 / V, device=probs.device)
    q = torch.full((batch, k, V), 1.0 / V, device=probs.device)
    ids = torch.full((batch, k), -1, dtype=torch.int64, device=probs.device)
    for b in range(batch):
        for i in range(n_list[b]):
            p[b, i] = probs[starts[b] + i]
            q[b, i] = t["draft_probs"][starts[b] + i] if t["draft_probs"] is not None else 0.0
            ids[b, i] = t["draft_token_ids"][starts[b] + i]
    n = torch.tensor(n_list, device=probs.device)
    res = chain_rejection_sample(p, ids, q if t["draft_probs"] is not None else None,
                                 num_draft_tokens=n, uniforms=uniforms)  # fmt: skip
    tokens, accepted = res.tokens.cpu(), res.num_accepted.cpu()
    argmax = t["target_logits"].argmax(-1).cpu()
    bonus = t["bonus_token_ids"].cpu().view(-1)
    out = torch.full((batch, k + 1), -1, dtype=torch.int32)
    for b in range(batch):
        if float(t["sampling_metadata"].temperature[b]) == 0.0:  # greedy
            for i in range(n_list[b]):
                target = int(argmax[starts[b] + i])
                out[b, i] = target
                if target != int(ids[b, i]):
                    break
            else:
                out[b, n_list[b]] = bonus[b]
        else:
            a = int(accepted[b])
            out[b, :a] = tokens[b, :a]
            out[b, a] = bonus[b] if a == n_list[b] else tokens[b, a]
    return out


CASES = {
    "uniform-classic": ([3, 3, 3, 3, 3, 3], 3, True, ()),
    "uniform-onehot-mixed-greedy": ([2, 2, 2, 2, 2], 2, False, (1, 3)),
    "ragged-classic-mixed-greedy": ([3, 0, 2, 3, 1, 3, 2], 3, True, (2,)),
    "ragged-onehot": ([1, 4, 0, 2, 4], 4, False, ()),
    "all-greedy": ([2, 0, 3, 1], 3, True, (0, 1, 2, 3)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_rejection_sample_equals_native(case, gen, device):
    """Same uniforms -> the native tokens in vLLM's [B, max_spec_len + 1] int32 layout: accepted
    drafts, recovered or bonus token, -1; greedy rows by the argmax rule; placeholders rejected."""
    n_list, k, classic, greedy = CASES[case]
    # repeat the batch so every path (full accept, early reject) occurs
    t, u = vllm_inputs(
        gen, device, n_list * 8, k, classic, tuple(g + len(n_list) * r for r in range(8) for g in greedy)
    )
    got = vllm.rejection_sample(**t, uniforms=u)
    assert got.dtype == torch.int32 and got.shape == (len(n_list) * 8, k + 1)
    want = expected_output(t, u)
    assert torch.equal(got.cpu(), want), f"{case}:\n{got}\nvs\n{want}"
    lengths = (got != -1).sum(1).cpu()
    assert bool((lengths == 1).any()) or case == "all-greedy", "no early rejection exercised"


def test_rejection_sample_without_uniforms_uses_seeded_generators(gen, device):
    """With no uniforms the adapter draws them like vLLM: a request with its own generator gets the
    same output whenever that generator restarts from the same seed, whatever the global RNG does."""
    t, _ = vllm_inputs(gen, device, [3, 3, 3, 3], 3)
    outs = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        t["sampling_metadata"].generators = {
            2: torch.Generator(device=device).manual_seed(current_test_seed("g"))
        }
        outs.append(vllm.rejection_sample(**t))
    assert torch.equal(outs[0][2], outs[1][2])


@pytest.mark.parametrize("bad", ["counts", "max_spec_len", "bonus", "synthetic"])
def test_rejection_sample_rejects_bad_metadata(bad, gen, device):
    """Inconsistent metadata raises, naming the argument (checked on the host, no sync)."""
    t, u = vllm_inputs(gen, device, [2, 2], 2)
    if bad == "counts":
        t["num_draft_tokens"] = [2, 1]
    elif bad == "max_spec_len":
        t["max_spec_len"] = 1
        u = u[:, :2]
    elif bad == "bonus":
        t["bonus_token_ids"] = t["bonus_token_ids"].view(-1)
    exc = NotImplementedError if bad == "synthetic" else ValueError
    names = {"counts": "num_draft_tokens", "max_spec_len": "max_spec_len", "bonus": "bonus_token_ids"}
    with pytest.raises(exc, match=names.get(bad, "synthetic_mode")):
        vllm.rejection_sample(**t, uniforms=u, synthetic_mode=bad == "synthetic")


def test_reverse_wrapper_round_trip(gen, device):
    """chain_sampler() (vLLM's function behind our protocol) with our adapter as the engine returns
    the native tokens for ragged classic and one-hot drafts: the layout translation is exact."""
    batch, k = 48, 3
    p = torch.softmax(2.0 * torch.randn(batch, k + 1, V, generator=gen), -1).to(device)
    q = torch.softmax(2.0 * torch.randn(batch, k, V, generator=gen), -1).to(device)
    ids = torch.randint(0, V, (batch, k), generator=gen).to(device)
    n = torch.randint(0, k + 1, (batch,), generator=gen).to(device)
    u = torch.rand(batch, k + 1, generator=gen).to(device)
    wrapped = vllm.chain_sampler(engine_fn=vllm.rejection_sample)
    for draft in (q, None):
        native = chain_rejection_sample(p, ids, draft, num_draft_tokens=n, uniforms=u)
        got = wrapped(p, ids, draft, num_draft_tokens=n, uniforms=u)
        assert torch.equal(got["num_accepted"], native.num_accepted.long())
        assert torch.equal(got["tokens"], native.tokens.long())


def test_rejection_sample_with_no_drafts_emits_bonus_tokens(gen, device):
    """T = 0 (no request has drafts): every row is [bonus, -1, ...], for random and greedy rows."""
    t, u = vllm_inputs(gen, device, [0, 0, 0], 2, greedy_rows=(1,))
    got = vllm.rejection_sample(**t, uniforms=u).cpu()
    want = torch.full((3, 3), -1, dtype=torch.int32)
    want[:, 0] = t["bonus_token_ids"].cpu().view(-1)
    assert torch.equal(got, want)
