"""The chain launcher's contract: metadata validation, value validation on request, layouts (strides,
stride-0 broadcast, bf16/fp16, int32 ids), the three randomness sources, seeded determinism and batch
invariance, and the interpreter throughput CI relies on."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from specsample.kernels import chain as chain_module
from specsample.kernels._launch import interpreting
from specsample.kernels.chain import _launch, chain_rejection_sample
from specsample.stats import seeding

B, K, V = 6, 3, 11
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def inputs(seed: int = 0, batch: int = B, num_k: int = K, vocab: int = V, dtype=torch.float32):
    rng = np.random.default_rng(seed)
    p = torch.from_numpy(rng.dirichlet(np.full(vocab, 0.5), size=(batch, num_k + 1))).to(DEVICE, dtype)
    q = torch.from_numpy(rng.dirichlet(np.full(vocab, 0.5), size=(batch, num_k))).to(DEVICE, dtype)
    x = torch.from_numpy(rng.integers(0, vocab, size=(batch, num_k))).to(DEVICE)
    u = torch.from_numpy(rng.random((batch, num_k + 1))).to(DEVICE, torch.float32)
    return p, x, q, u


def assert_same(a, b):
    for name, got, want in zip(("tokens", "num_accepted", "fallback", "valid"), a, b, strict=True):
        assert torch.equal(got, want), f"{name} differs:\n{got}\n{want}"


# ---------------------------------------------------------------------------------------------
# metadata validation: ValueError / TypeError naming the argument, expected and actual
# ---------------------------------------------------------------------------------------------

_P, _X, _Q, _U = inputs()
_I64 = dict(dtype=torch.int64, device=DEVICE)
_I32 = dict(dtype=torch.int32, device=DEVICE)
_BAD_CALLS = [
    ("target_probs", TypeError, lambda: chain_rejection_sample(_P.double(), _X, _Q, uniforms=_U)),
    ("target_probs", ValueError, lambda: chain_rejection_sample(_P[0], _X, _Q, uniforms=_U)),
    ("target_probs", TypeError, lambda: chain_rejection_sample(_P.cpu().numpy(), _X, _Q, uniforms=_U)),
    ("draft_token_ids", TypeError, lambda: chain_rejection_sample(_P, _X.float(), _Q, uniforms=_U)),
    ("draft_token_ids", ValueError, lambda: chain_rejection_sample(_P, _X[:, :2], _Q, uniforms=_U)),
    ("draft_probs", ValueError, lambda: chain_rejection_sample(_P, _X, _Q[:, :, :5], uniforms=_U)),
    ("draft_probs", TypeError, lambda: chain_rejection_sample(_P, _X, _Q.to(torch.int32), uniforms=_U)),
    ("num_draft_tokens", ValueError,
     lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U, num_draft_tokens=torch.zeros(B + 1, **_I64))),
    ("num_draft_tokens", TypeError,
     lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U, num_draft_tokens=torch.zeros(B, device=DEVICE))),
    ("uniforms", ValueError, lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U[:, :K])),
    ("uniforms", TypeError, lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U.double())),
    ("seeds/offsets", ValueError,
     lambda: chain_rejection_sample(_P, _X, _Q, seeds=torch.zeros(B, **_I64))),
    ("randomness", ValueError,
     lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U, generator=torch.Generator())),
    ("randomness", ValueError,
     lambda: chain_rejection_sample(_P, _X, _Q, uniforms=_U, seeds=torch.zeros(B, **_I64),
                                    offsets=torch.zeros(B, **_I64))),
    ("seeds", TypeError, lambda: chain_rejection_sample(_P, _X, _Q, seeds=torch.zeros(B, **_I32),
                                                        offsets=torch.zeros(B, **_I64))),
    ("offsets", ValueError, lambda: chain_rejection_sample(_P, _X, _Q, seeds=torch.zeros(B, **_I64),
                                                           offsets=torch.zeros(B + 2, **_I64))),
    ("generator", TypeError, lambda: chain_rejection_sample(_P, _X, _Q, generator=123)),
]  # fmt: skip


@pytest.mark.parametrize("name,kind,call", _BAD_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(_BAD_CALLS)])
def test_metadata_errors_name_the_argument(name, kind, call):
    with pytest.raises(kind, match="^" + name.split("/")[0]):
        call()


def test_value_checks_only_with_validate():
    """validate=True rejects negative / non-finite probabilities, used ids outside [0, V) and
    uniforms outside [0, 1); -1 padding past num_draft_tokens is fine. Without it the same inputs
    run (the kernel treats them per docs/semantics.md)."""
    p, x, q, u = inputs()
    bad_p = p.clone()
    bad_p[0, 0, 0] = float("nan")
    bad_x = x.clone()
    bad_x[1, 2] = V
    bad_u = u.clone()
    bad_u[2, 0] = 1.0
    for kwargs, name in (
        (dict(target_probs=bad_p), "target_probs"),
        (dict(draft_probs=-q), "draft_probs"),
        (dict(draft_token_ids=bad_x), "draft_token_ids"),
        (dict(uniforms=bad_u), "uniforms"),
    ):
        args = dict(target_probs=p, draft_token_ids=x, draft_probs=q, uniforms=u) | kwargs
        with pytest.raises(ValueError, match=name):
            chain_rejection_sample(**args, validate=True)
    padded = x.clone()
    padded[:, 1:] = -1
    n = torch.ones(B, dtype=torch.int64, device=DEVICE)
    chain_rejection_sample(p, padded, q, uniforms=u, num_draft_tokens=n, validate=True)


def test_empty_batch_and_no_drafts():
    p, x, q, u = inputs(batch=0)
    res = chain_rejection_sample(p, x, q, uniforms=u)
    assert res.tokens.shape == (0, K + 1) and res.num_accepted.shape == (0,)
    p, x, q, u = inputs(num_k=0)
    res = chain_rejection_sample(p, x, q, uniforms=u)
    assert res.num_accepted.tolist() == [0] * B and bool((res.tokens[:, 0] >= 0).all())


# ---------------------------------------------------------------------------------------------
# layouts
# ---------------------------------------------------------------------------------------------


# the launcher's own tiling, and one row per program over 4-column chunks, 2 per program (V = 11:
# program 0 of a row streams without masks, the GPU's unmasked paths; program 1 holds the tail)
_TILINGS = {"default": {}, "row-programs": dict(block_rows=1, block_v=4, tiles=2)}


@pytest.mark.parametrize("tiling", sorted(_TILINGS))
def test_strided_and_broadcast_inputs_equal_contiguous_copies(tiling):
    """Any strides: a transposed-storage view, a sliced view and a stride-0 broadcast (one p/q row
    expanded to every request, read in place) give the contiguous copy's result bit for bit."""
    cfg = _TILINGS[tiling]
    p, x, q, u = inputs(batch=32)
    p_t = p.transpose(0, 2).contiguous().transpose(0, 2)  # V-major storage
    q_big = torch.zeros(32, K, 2 * V, device=DEVICE)
    q_big[:, :, ::2] = q
    q_s = q_big[:, :, ::2]  # stride 2 in V
    reference = _launch(p, x, q, None, u, None, None, **cfg)
    assert_same(_launch(p_t, x, q_s, None, u, None, None, **cfg), reference)
    p_b = p[:1].expand(32, K + 1, V)
    q_b = q[:1].expand(32, K, V)
    assert p_b.stride(0) == 0
    assert_same(
        _launch(p_b, x, q_b, None, u, None, None, **cfg),
        _launch(p_b.contiguous(), x, q_b.contiguous(), None, u, None, None, **cfg),
    )
    u_t = u.t().contiguous().t()
    assert_same(_launch(p, x, q, None, u_t, None, None, **cfg), reference)
    # the two tilings agree: the chunking changes only the float64 summation order, which moves a
    # CDF boundary by < 2^-45 relative, and these 32 fixed rows sit nowhere near one
    assert_same(reference, _launch(p, x, q, None, u, None, None))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_inputs_equal_their_float32_values(dtype):
    """bf16/fp16 probabilities are read and widened exactly: same result as their fp32 copies;
    int32 ids equal int64 ids."""
    p, x, q, u = inputs(batch=64, dtype=dtype)
    assert_same(_launch(p, x, q, None, u, None, None), _launch(p.float(), x, q.float(), None, u, None, None))
    assert_same(_launch(p, x.int(), q, None, u, None, None), _launch(p, x, q, None, u, None, None))


def test_classic_with_one_hot_draft_probs_equals_the_one_hot_path():
    """q = delta_x makes the classic rule the one-hot rule: accept iff u < p(x), residual
    max(0, p - delta_x) = p with x zeroed."""
    p, x, _, u = inputs(batch=64)
    q = torch.nn.functional.one_hot(x, V).float()
    assert_same(_launch(p, x, q, None, u, None, None), _launch(p, x, None, None, u, None, None))


# ---------------------------------------------------------------------------------------------
# randomness sources, determinism, batch invariance
# ---------------------------------------------------------------------------------------------


def test_generator_path_is_torch_rand_then_the_uniform_path():
    """generator=g draws u = torch.rand(B, K+1, generator=g) and then behaves as uniforms=u; the
    default generator is used when none is given; successive calls advance the stream."""
    p, x, q, _ = inputs(batch=64)
    seed = seeding.current_test_seed() % 2**62
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    first = chain_rejection_sample(p, x, q, generator=g)
    second = chain_rejection_sample(p, x, q, generator=g)
    u_g = torch.Generator(device=DEVICE).manual_seed(seed)
    u1 = torch.rand(64, K + 1, generator=u_g, device=DEVICE)
    u2 = torch.rand(64, K + 1, generator=u_g, device=DEVICE)
    assert_same(first, chain_rejection_sample(p, x, q, uniforms=u1))
    assert_same(second, chain_rejection_sample(p, x, q, uniforms=u2))
    torch.manual_seed(seed)
    default = chain_rejection_sample(p, x, q)
    assert_same(default, first)


def test_seeded_path_is_deterministic_and_batch_invariant():
    """A request's output is a function of its own (inputs, seed, offset): repeated calls agree, and
    permuting the batch, splitting it, or launching the request alone (other BLOCK_ROWS tiling)
    gives the same rows. Different offsets give fresh draws."""
    batch = 96
    p, x, q, _ = inputs(seed=3, batch=batch)
    n = torch.from_numpy(np.random.default_rng(4).integers(0, K + 1, batch)).to(DEVICE)
    seeds = torch.from_numpy(np.random.default_rng(5).integers(-(2**63), 2**63 - 1, batch, dtype=np.int64))
    seeds = seeds.to(DEVICE)
    offsets = torch.arange(batch, dtype=torch.int64, device=DEVICE) * 7

    def call(idx, off=offsets):
        return chain_rejection_sample(p[idx], x[idx], q[idx], num_draft_tokens=n[idx], seeds=seeds[idx],
                                      offsets=off[idx])  # fmt: skip

    full = call(torch.arange(batch))
    assert_same(full, call(torch.arange(batch)))
    perm = torch.from_numpy(np.random.default_rng(6).permutation(batch))
    permuted = call(perm)
    assert_same(permuted, tuple(t[perm] for t in full))
    halves = [call(torch.arange(0, 40)), call(torch.arange(40, batch))]
    assert_same(tuple(torch.cat(parts) for parts in zip(*halves, strict=True)), full)
    alone = call(torch.tensor([17]))
    assert_same(alone, tuple(t[17:18] for t in full))
    # a fresh offset redraws: with 96 requests some emitted token must change
    moved = call(torch.arange(batch), offsets + 1)
    assert not torch.equal(moved.tokens, full.tokens)


# ---------------------------------------------------------------------------------------------
# interpreter throughput (CI sizing relies on it)
# ---------------------------------------------------------------------------------------------


@pytest.mark.skipif(not interpreting(), reason="measures the Triton interpreter (CPU CI)")
@pytest.mark.parametrize("source", ["uniforms", "seeds"])
def test_interpreter_throughput_at_small_vocab(source):
    """>= 1e4 rows/s at V = 16, K = 4 (classic) through the public launcher, measured on 2^15 rows
    after one warm-up call (the statistical tests size their samples on this)."""
    batch, num_k, vocab = 2**15, 4, 16
    p, x, q, u = inputs(batch=batch, num_k=num_k, vocab=vocab)
    if source == "uniforms":
        kwargs = dict(uniforms=u)
    else:
        kwargs = dict(seeds=torch.arange(batch, **_I64), offsets=torch.zeros(batch, **_I64))
    chain_rejection_sample(p, x, q, **kwargs)
    start = time.perf_counter()
    chain_rejection_sample(p, x, q, **kwargs)
    rate = batch / (time.perf_counter() - start)
    print(f"chain interpreter throughput ({source}): {rate:.3g} rows/s")
    assert rate >= 1e4, f"{rate:.3g} rows/s < 1e4 at V = {vocab}"


# ---------------------------------------------------------------------------------------------
# the GPU launch configuration (the interpreter never takes that branch)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("row_bytes", [2, 4, 8])
@pytest.mark.parametrize("batch", [1, 3, 16, 64, 128, 1024, 8192])
@pytest.mark.parametrize("vocab", [1, 2, 7, 255, 512, 513, 32000, 128256, 151936])
def test_gpu_default_config_is_valid(monkeypatch, batch, vocab, row_bytes):
    """The GPU branch of _launch_config gives a power-of-two chunk of 128-1024 columns and between
    one chunk per program and the row's chunk count, at every size: one warp over chunks of at most
    512 columns, or (the latency regime) four warps over one chunk per program; 2 or 3 pipeline
    stages whose loads fit the shared memory of the programs an SM holds; no register cap, or 96."""
    monkeypatch.setattr(chain_module, "interpreting", lambda: False)
    cfg = chain_module._launch_config(batch, vocab, row_bytes=row_bytes)
    assert cfg.block_rows == 1 and cfg.block_v & (cfg.block_v - 1) == 0 and 128 <= cfg.block_v <= 1024
    assert 1 <= cfg.tiles <= min(chain_module._GPU_MAX_TILES, -(-vocab // cfg.block_v))
    assert cfg.num_stages in ((2, 3) if cfg.tiles > 1 else (1,))
    assert cfg.maxnreg in (None, chain_module._GPU_WIDE_MAXNREG)
    if cfg.maxnreg is not None:  # the wide grid: one wave's pipelined loads fit the shared memory
        chunks = -(-vocab // cfg.block_v)
        programs = batch * -(-chunks // cfg.tiles)
        programs_per_sm = -(-programs // chain_module.H200_SMS)
        assert programs_per_sm <= 21  # what an SM holds of one-warp programs under 96 registers
        assert row_bytes * cfg.block_v * cfg.num_stages * programs_per_sm <= 228 * 1024
    assert (cfg.num_warps, cfg.block_v <= 512) == (1, True) or (cfg.num_warps, cfg.tiles) in ((4, 1), (2, 1))
    if cfg.num_warps == 2:  # the latency regime's half chunks: small fp32 batches, small vocabularies
        assert cfg.block_v <= 512 and vocab <= 32768 and row_bytes == 8


def test_gpu_plan_passes_the_register_cap(monkeypatch):
    """The wide grid's register cap reaches the compile options (the launch metadata) on the GPU,
    with the row bytes of the call's dtypes: 2 stages for fp32 p and q, 3 for bf16 ones."""
    monkeypatch.setattr(chain_module, "interpreting", lambda: False)
    plan = chain_module._plan.__wrapped__  # uncached: the cache may hold interpreter plans
    fp32 = plan(64, 5, 151936, True, False, True, False, 8, ())
    bf16 = plan(64, 5, 151936, True, False, True, False, 4, ())
    narrow = plan(128, 9, 128256, True, False, True, False, 8, ())
    assert (fp32.meta["maxnreg"], fp32.meta["NUM_STAGES"], fp32.tiles) == (96, 2, 8)
    assert (bf16.meta["maxnreg"], bf16.meta["NUM_STAGES"], bf16.tiles) == (96, 3, 8)
    assert "maxnreg" not in narrow.meta and narrow.tiles == 16


def test_gpu_default_tiling_at_the_issue_shapes(monkeypatch):
    """One-warp programs over 512-column chunks, 16 chunks per program once the batch gives that
    many chunks to spare (H200 runs 61-62), 8 under a 96-register cap where 16 would leave fewer
    than 12 programs per SM (runs 80-82: (64, 4, 151936)), with 2 pipeline stages where p and q are
    both fp32 (row_bytes 8), else 3; at small batches four warps over one 1024-column chunk per
    program (latency: the widest split, run 66), over V = 32000 with fp32 p and q two warps over
    one 512-column chunk per program (runs 147-150). (block_v, warps, tiles, stages, maxnreg)."""
    monkeypatch.setattr(chain_module, "interpreting", lambda: False)
    shapes = ((1, 32000, 8), (16, 128256, 8), (64, 151936, 8), (64, 151936, 4), (128, 128256, 8),
              (4, 32000, 8), (32, 32000, 8), (8, 32000, 4), (2, 128256, 8), (1, 32000, 4))  # fmt: skip
    tiling = {}
    for batch, vocab, row_bytes in shapes:
        cfg = chain_module._launch_config(batch, vocab, row_bytes=row_bytes)
        tiling[batch, vocab, row_bytes] = (cfg.block_v, cfg.num_warps, cfg.tiles, cfg.num_stages, cfg.maxnreg)
    assert tiling == {(1, 32000, 8): (512, 2, 1, 1, None), (16, 128256, 8): (512, 1, 3, 3, None),
                      (64, 151936, 8): (512, 1, 8, 2, 96), (64, 151936, 4): (512, 1, 8, 3, 96),
                      (128, 128256, 8): (512, 1, 16, 3, None), (4, 32000, 8): (512, 2, 1, 1, None),
                      (32, 32000, 8): (512, 2, 1, 1, None), (8, 32000, 4): (1024, 4, 1, 1, None),
                      (2, 128256, 8): (1024, 4, 1, 1, None),
                      (1, 32000, 4): (1024, 4, 1, 1, None)}  # fmt: skip
