"""The plain-PyTorch baselines implement the algorithms they are compared with (deterministic cases
whose answer is forced by the algorithm), and the benchmark inputs have the documented layout."""

import pytest
import torch

from benchmarks import baselines_torch as bt
from benchmarks.floors import KERNELS, KERNELS_WITH_K, Case
from benchmarks.inputs import allocated_bytes, clone_inputs, make_inputs
from specsample.stats.seeding import current_test_seed


def test_chain_all_accepted_then_bonus_by_inverse_cdf():
    # p == q: every draft accepted for u < 1; the bonus row is one-hot on token 3.
    p = torch.tensor([[[0.25, 0.25, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 0.0, 1.0]]])
    q = p[:, :2].clone()
    ids = torch.tensor([[1, 2]])
    u = torch.tensor([[0.99, 0.99, 0.5]])
    tokens, a, fallback = bt.chain_rejection_torch(p, ids, q, u)
    assert tokens.tolist() == [[1, 2, 3]] and a.tolist() == [2] and fallback.tolist() == [False]
    assert tokens.dtype == torch.int32 and a.dtype == torch.int32


def test_chain_residual_is_p_minus_q_not_p():
    # accept iff u * 0.9 < 0.5; u = 0.9 rejects. Residual max(0, p - q) = [0, 0.4, 0, 0] forces token 1;
    # a residual drawn from p (the classic bug) would give token 0 at u_K = 0.1.
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25]]])
    q = torch.tensor([[[0.9, 0.1, 0.0, 0.0]]])
    tokens, a, fallback = bt.chain_rejection_torch(p, torch.tensor([[0]]), q, torch.tensor([[0.9, 0.1]]))
    assert tokens.tolist() == [[1, -1]] and a.tolist() == [0] and not fallback.item()


def test_chain_inverse_cdf_picks_the_first_cdf_above_u_total():
    p = torch.tensor([[[0.0, 0.0, 1.0, 0.0], [0.1, 0.0, 0.6, 0.3]]])
    ids = torch.tensor([[0]])  # p(x) = 0: rejected whatever u; residual = p_0 (one-hot draft q)
    for u_k, want in ((0.0, 2), (0.999, 2)):
        tokens, a, _ = bt.chain_rejection_torch(p, ids, None, torch.tensor([[0.0, u_k]]))
        assert tokens.tolist() == [[want, -1]] and a.tolist() == [0]
    # bonus from p_1 = [0.1, 0, 0.6, 0.3] with a one-hot draft accepted at u < p(x) = 1
    ids = torch.tensor([[2]])
    for u_k, want in ((0.05, 0), (0.15, 2), (0.65, 2), (0.75, 3), (0.9999, 3)):  # off CDF boundaries
        tokens, a, _ = bt.chain_rejection_torch(p, ids, None, torch.tensor([[0.5, u_k]]))
        assert tokens.tolist() == [[2, want]] and a.tolist() == [1], u_k


def test_chain_empty_residual_falls_back_to_p():
    # q = 2p (unnormalised): accept iff u < 0.5; u = 0.9 rejects and max(0, p - 2p) = 0 everywhere.
    p = torch.tensor([[[0.0, 0.3, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]]])
    tokens, a, fallback = bt.chain_rejection_torch(
        p, torch.tensor([[2]]), 2 * p[:, :1], torch.tensor([[0.9, 0.2]])
    )
    assert fallback.tolist() == [True] and a.tolist() == [0]
    assert tokens.tolist() == [[1, -1]]  # inverse CDF of p at 0.2: cdf [0, .3, 1, 1]


def test_sampling_baselines_never_pick_zero_probability_tokens():
    gen = torch.Generator().manual_seed(current_test_seed() % 2**63)
    B, V = 512, 64
    probs = torch.rand(B, V, generator=gen) * (torch.rand(B, V, generator=gen) < 0.1)
    probs[:, 7] += 1e-3  # every row has mass somewhere
    probs = probs / probs.sum(1, keepdim=True)
    logits = torch.where(probs > 0, torch.log(probs), torch.tensor(float("-inf")))
    torch.manual_seed(current_test_seed("torch global") % 2**63)
    for fn in (bt.fast_sample_gumbel, bt.fast_sample_multinomial):
        p_at, index = fn(probs)
        assert index.shape == (B, 1) and (p_at > 0).all() and torch.equal(p_at, probs.gather(1, index))
    index = bt.sample_from_logits_torch(logits, torch.full((B,), 0.7))
    assert index.shape == (B,) and (probs.gather(1, index.unsqueeze(1)) > 0).all()


def test_logits_baseline_is_softmax_then_chain():
    gen = torch.Generator().manual_seed(current_test_seed() % 2**63)
    case = Case("logits", 4, 3, 50, "float32")
    x = make_inputs(case, "cpu", seed=int(torch.randint(0, 2**31, (1,), generator=gen)))
    tokens, a, fallback = bt.rejection_sample_logits_torch(
        x["target_logits"], x["draft_token_ids"], x["draft_logits"], x["temperature"]
    )
    assert tokens.shape == (4, 4) and a.shape == (4,) and fallback.shape == (4,)
    for b in range(4):
        n = int(a[b])
        assert tokens[b, :n].tolist() == x["draft_token_ids"][b, :n].tolist()
        assert 0 <= int(tokens[b, n]) < 50 and (tokens[b, n + 1 :] == -1).all()


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_inputs_layout(kernel, dtype):
    K = 3 if kernel in KERNELS_WITH_K else 0
    case = Case(kernel, 2, K, 40, dtype)
    x = make_inputs(case, "cpu")
    assert torch.equal(make_inputs(case, "cpu")[next(iter(x))], x[next(iter(x))])  # reproducible
    big = {k: v for k, v in x.items() if v.dim() >= 2 and v.dtype.is_floating_point and k != "uniforms"}
    assert big and all(v.dtype == getattr(torch, dtype) for v in big.values())
    if kernel.startswith("chain"):
        assert x["target_probs"].shape == (2, K + 1, 40) and x["uniforms"].shape == (2, K + 1)
        assert ("draft_probs" in x) == (kernel == "chain")
        sums = x["target_probs"].float().sum(-1)
        assert torch.allclose(sums, torch.ones_like(sums), atol=2e-2)
    if kernel.startswith("logits"):
        assert x["target_logits"].shape == (2, K + 1, 40) and ("draft_logits" in x) == (kernel == "logits")
    if K:
        ids = x["draft_token_ids"]
        assert ids.shape == (2, K) and ids.dtype == torch.int64 and ((0 <= ids) & (ids < 40)).all()
    if "seeds" in x:
        assert x["seeds"].dtype == x["offsets"].dtype == torch.int64 and x["seeds"].shape == (2,)
    copy = clone_inputs(x)
    assert allocated_bytes(copy) == allocated_bytes(x)
    assert all(copy[k].data_ptr() != x[k].data_ptr() and torch.equal(copy[k], x[k]) for k in x)
