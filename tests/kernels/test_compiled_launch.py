"""The compiled-launch cache (kernels/_compiled_launch.py): which calls reuse a compiled kernel.

On CPU the interpreter always takes Triton's path, so these tests drive `launch` with a stand-in
kernel (recording every call) and the interpreter check switched off: a repeat key must go to the
cached compiled launcher with every parameter in signature order; anything Triton specialises on
(dtype, 16-byte alignment, scalar values, constexprs, options, device) must miss. `bind_keyed`'s
launches go to the C launcher itself, or back to launch_keyed wherever that cannot be done. The GPU
test at the end checks the real thing: the direct path's outputs, and those of the launchers'
remembered repeat calls, equal Triton's path bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from specsample.kernels import _compiled_launch as cl
from specsample.kernels import chain as kc
from specsample.kernels import gumbel as kg


def _kern(a_ptr, b_ptr, n, stride, SCALE, FLAG=False):  # the stand-in kernel's signature
    pass


class _Run:
    """Triton 3.6's launcher object: called by `compiled.run(...)`; `launch` is its C function."""

    def __init__(self, log):
        self.log, self.launch_cooperative_grid, self.launch_pdl = log, False, True
        self.global_scratch_size = self.profile_scratch_size = 0

    def __call__(self, *call):
        self.log.append(("direct", call))

    def launch(self, *call):
        self.log.append(("c", call))


class _Compiled:
    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, "fn-handle", "meta"
        self.run = _Run(log)

    def __getitem__(self, grid):
        return lambda *args: self.log.append(("runner", grid, args))


class _Kernel:
    def __init__(self):
        self.fn, self.log = _kern, []

    def __getitem__(self, grid):
        def jit_run(*args, **meta):
            self.log.append(("jit", grid, args, meta))
            return _Compiled(self.log)

        return jit_run


@pytest.fixture
def gpu_like(monkeypatch):
    """launch() as on a GPU with Triton 3.6: interpreter off, device 0, stream 7."""
    monkeypatch.setattr(cl, "interpreting", lambda: False)
    monkeypatch.setattr(cl, "_hooks_installed", lambda: False)
    monkeypatch.setattr(cl, "_RUN_SIGNATURE_KNOWN", True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 7, raising=False)
    cl.clear_launch_cache()
    yield
    cl.clear_launch_cache()


def _kinds(k):
    return [e[0] for e in k.log]


def test_repeat_call_uses_the_compiled_launcher_with_every_parameter(gpu_like):
    k, a, b = _Kernel(), torch.zeros(8), torch.zeros(8)
    cl.launch(k, (3, 2), a, b, 8, 1, SCALE=4, num_warps=4)
    cl.launch(k, (5, 2), a, b, 8, 1, SCALE=4, num_warps=4)
    assert _kinds(k) == ["jit", "direct"]
    call = k.log[1][1]
    # grid (5, 2, 1), stream, function, packed metadata, no launch metadata or hooks, then the
    # parameters in signature order: positional, constexpr SCALE, FLAG's default
    assert call[:9] == (5, 2, 1, 7, "fn-handle", "meta", None, None, None)
    assert call[9:11] == (a, b) and call[11:] == (8, 1, 4, False)
    assert cl.launch_cache_size() == 1


@pytest.mark.parametrize(
    "change",
    ["dtype", "misaligned", "scalar", "constexpr", "option", "device"],
)
def test_anything_triton_specialises_on_misses(gpu_like, monkeypatch, change):
    k, base = _Kernel(), torch.zeros(16)
    a, n, meta = base[:8], 8, dict(SCALE=4, num_warps=4)
    cl.launch(k, (1,), a, a, n, 1, **meta)
    if change == "dtype":
        a = a.double()
    elif change == "misaligned":
        a = base[1:9]  # 4-byte offset: data_ptr % 16 != 0
    elif change == "scalar":
        n = 16
    elif change == "constexpr":
        meta["SCALE"] = 8
    elif change == "option":
        meta["num_warps"] = 8
    elif change == "device":
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    cl.launch(k, (1,), a, a, n, 1, **meta)
    assert _kinds(k) == ["jit", "jit"]
    assert cl.launch_cache_size() == 2


def test_aligned_views_share_a_compiled_kernel(gpu_like):
    k, base = _Kernel(), torch.zeros(64)
    cl.launch(k, (1,), base[:8], base[:8], 8, 1, SCALE=4)
    cl.launch(k, (1,), base[4:12], base[16:24], 8, 1, SCALE=4)  # 16 and 64 bytes in: still aligned
    assert _kinds(k) == ["jit", "direct"]


def test_jit_path_hooks_and_interpreter_always_go_through_triton(gpu_like, monkeypatch):
    k, a = _Kernel(), torch.zeros(8)
    with cl.use_launch_path("jit"):
        for _ in range(2):
            cl.launch(k, (1,), a, a, 8, 1, SCALE=4)
    monkeypatch.setattr(cl, "_hooks_installed", lambda: True)
    cl.launch(k, (1,), a, a, 8, 1, SCALE=4)
    cl.launch(k, (1,), a, a, 8, 1, SCALE=4)
    monkeypatch.setattr(cl, "_hooks_installed", lambda: False)
    monkeypatch.setattr(cl, "interpreting", lambda: True)
    cl.launch(k, (1,), a, a, 8, 1, SCALE=4)
    assert _kinds(k) == ["jit"] * 5
    assert cl.launch_cache_size() == 0


def test_unknown_triton_version_uses_the_public_runner(gpu_like, monkeypatch):
    monkeypatch.setattr(cl, "_RUN_SIGNATURE_KNOWN", False)
    k, a = _Kernel(), torch.zeros(8)
    cl.launch(k, (2,), a, a, 8, 1, SCALE=4)
    cl.launch(k, (2,), a, a, 8, 1, SCALE=4)
    assert _kinds(k) == ["jit", "runner"]
    assert k.log[1][1] == (2,) and k.log[1][2][2:] == (8, 1, 4, False)


def test_cache_is_bounded(gpu_like, monkeypatch):
    monkeypatch.setattr(cl, "_MAX_ENTRIES", 3)
    k, a = _Kernel(), torch.zeros(8)
    for n in range(5):
        cl.launch(k, (1,), a, a, n, 1, SCALE=4)
    assert cl.launch_cache_size() <= 3


def test_keyed_launch_reuses_by_the_callers_key(gpu_like, monkeypatch):
    """launch_keyed: a repeat key goes to the compiled launcher with every parameter in signature
    order; a new key, another device, the jit path, hooks and the interpreter go through Triton."""
    k, a = _Kernel(), torch.zeros(8)
    cl.launch_keyed(k, (3,), ("f32", True, 8), (a, a, 8, 1), dict(SCALE=4, num_warps=4))
    cl.launch_keyed(k, (5,), ("f32", True, 8), (a, a, 8, 1), dict(SCALE=4, num_warps=4))
    assert _kinds(k) == ["jit", "direct"]
    assert k.log[1][1][:4] == (5, 1, 1, 7) and k.log[1][1][9:] == (a, a, 8, 1, 4, False)
    cl.launch_keyed(k, (5,), ("f32", True, 16), (a, a, 16, 1), dict(SCALE=4, num_warps=4))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    cl.launch_keyed(k, (5,), ("f32", True, 8), (a, a, 8, 1), dict(SCALE=4, num_warps=4))
    with cl.use_launch_path("jit"):
        cl.launch_keyed(k, (5,), ("f32", True, 8), (a, a, 8, 1), dict(SCALE=4, num_warps=4))
    monkeypatch.setattr(cl, "interpreting", lambda: True)
    cl.launch_keyed(k, (5,), ("f32", True, 8), (a, a, 8, 1), dict(SCALE=4, num_warps=4))
    assert _kinds(k) == ["jit", "direct", "jit", "jit", "jit", "jit"]
    assert cl.launch_cache_size() == 3
    cl.clear_launch_cache()
    assert cl.launch_cache_size() == 0


def _bound(k, a, key=("f32", True, 8)):
    meta = dict(SCALE=4, num_warps=4)
    cl.launch_keyed(k, (3, 2), key, (a, a, 8, 1), meta)  # fills the cache (Triton's path)
    return cl.bind_keyed(k, (3, 2), key, meta)


def test_bound_launch_calls_the_c_launcher_with_every_parameter(gpu_like, monkeypatch):
    """bind_keyed after a launch_keyed of its key: each call goes to the C launcher with the grid, the
    stream current at the call, the function, the cooperative-grid / PDL flags, no scratch, the
    packed metadata, no launch metadata or hooks, then the parameters in signature order."""
    k, a, b = _Kernel(), torch.zeros(8), torch.zeros(8)
    current = [7]
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: current[0], raising=False)
    go = _bound(k, a)
    go((b, a, 8, 1))
    current[0] = 9  # another stream, e.g. a CUDA graph capture's
    go((a, b, 8, 1))
    assert _kinds(k) == ["jit", "c", "c"]
    head = ("fn-handle", False, True, None, None, "meta", None, None, None)
    assert k.log[1][1] == (3, 2, 1, 7, *head, b, a, 8, 1, 4, False)
    assert k.log[2][1] == (3, 2, 1, 9, *head, a, b, 8, 1, 4, False)


def test_bound_launch_follows_the_jit_path_and_hooks_per_call(gpu_like, monkeypatch):
    k, a = _Kernel(), torch.zeros(8)
    go = _bound(k, a)
    with cl.use_launch_path("jit"):
        go((a, a, 8, 1))
    monkeypatch.setattr(cl, "_hooks_installed", lambda: True)
    go((a, a, 8, 1))
    monkeypatch.setattr(cl, "_hooks_installed", lambda: False)
    go((a, a, 8, 1))
    assert _kinds(k) == ["jit", "jit", "jit", "c"]


@pytest.mark.parametrize("case", ["not_cached", "scratch", "jit_at_bind", "interpreter", "unknown_triton"])
def test_bound_launch_falls_back_to_launch_keyed(gpu_like, monkeypatch, case):
    """Where the C launcher cannot be called directly, every call of the bound launch is a
    launch_keyed: a cache miss goes through Triton, a hit through the compiled kernel's run."""
    k, a = _Kernel(), torch.zeros(8)
    meta, key = dict(SCALE=4, num_warps=4), ("f32", True, 8)
    if case == "not_cached":
        go = cl.bind_keyed(k, (3, 2), key, meta)
        go((a, a, 8, 1))
        go((a, a, 8, 1))
        assert _kinds(k) == ["jit", "direct"]
        return
    if case == "scratch":
        cl.launch_keyed(k, (3, 2), key, (a, a, 8, 1), meta)
        cl._CACHE[(k, 0, ("keyed", key))][0].run.global_scratch_size = 64
        go = cl.bind_keyed(k, (3, 2), key, meta)
    elif case == "jit_at_bind":
        cl.launch_keyed(k, (3, 2), key, (a, a, 8, 1), meta)
        with cl.use_launch_path("jit"):
            go = cl.bind_keyed(k, (3, 2), key, meta)
    elif case == "interpreter":
        cl.launch_keyed(k, (3, 2), key, (a, a, 8, 1), meta)
        monkeypatch.setattr(cl, "interpreting", lambda: True)
        go = cl.bind_keyed(k, (3, 2), key, meta)
    else:
        cl.launch_keyed(k, (3, 2), key, (a, a, 8, 1), meta)
        monkeypatch.setattr(cl, "_RUN_SIGNATURE_KNOWN", False)
        go = cl.bind_keyed(k, (3, 2), key, meta)
    go((a, a, 8, 1))
    want = {"scratch": "direct", "jit_at_bind": "direct", "interpreter": "jit", "unknown_triton": "runner"}
    assert _kinds(k) == ["jit", want[case]]


def test_clearing_the_cache_clears_the_memos(gpu_like):
    memo = cl.call_memo()
    cl.remember(memo, "signature", "entry")
    assert memo == {"signature": "entry"}
    cl.clear_launch_cache()
    assert memo == {}


def test_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(cl, "_MAX_ENTRIES", 3)
    memo = cl.call_memo()
    for n in range(5):
        cl.remember(memo, n, n)
        assert len(memo) <= 3 and memo[n] == n


def test_bad_launch_path_is_refused():
    with pytest.raises(ValueError, match="direct' or 'jit"):
        with cl.use_launch_path("fast"):
            pass


def _every_family(p, x, q, seeds, offsets, temp):
    import specsample as ss

    return (
        ss.chain_rejection_sample(p, x, q, seeds=seeds, offsets=offsets),
        ss.fast_sample(p[:, 0], 2, seeds=seeds, offsets=offsets),
        ss.rejection_sample_logits(
            torch.log(p), x, torch.log(q), temperature=temp, seeds=seeds, offsets=offsets
        ),
        _sample_from_logits_with_probs(torch.log(p[:, 0]), temp, seeds, offsets),
    )


def _sample_from_logits_with_probs(logits, temp, seeds, offsets):
    import specsample as ss

    probs = torch.empty_like(logits)
    token = ss.sample_from_logits(logits, temp, seeds=seeds, offsets=offsets, probs_out=probs)
    return token, probs


@pytest.mark.gpu
def test_direct_path_equals_triton_path_on_the_gpu():
    """Every kernel family (sample_from_logits with its softmax write too), aligned and misaligned
    inputs: the cached launcher's outputs equal Triton's own path bit for bit (same seeds), and
    repeat calls do hit the cache (chain and fast_sample: their repeat-call memos, whose bound
    launches call the C launcher)."""
    g = torch.Generator(device="cuda").manual_seed(5)
    batch, k, vocab = 6, 3, 1000
    base = torch.rand(batch * (k + 1) * vocab + 1, device="cuda", generator=g)
    for offset in (0, 1):  # 1: a 4-byte offset, so the pointers are not 16-byte aligned
        p = base[offset : offset + batch * (k + 1) * vocab].view(batch, k + 1, vocab)
        p = p / p.sum(-1, keepdim=True)
        args = (
            p,
            torch.randint(0, vocab, (batch, k), device="cuda", generator=g),
            torch.softmax(torch.randn(batch, k, vocab, device="cuda", generator=g), -1),
            torch.arange(batch, device="cuda", dtype=torch.int64),
            torch.full((batch,), 3, device="cuda", dtype=torch.int64),
            torch.full((batch,), 0.8, device="cuda"),
        )
        with cl.use_launch_path("jit"):
            want = _every_family(*args)
        cl.clear_launch_cache()
        _every_family(*args)  # fills the cache
        filled = cl.launch_cache_size()
        assert len(kc._REPEATS) == len(kg._REPEATS) == 1  # the chain and fast_sample calls remembered
        got = _every_family(*args)  # every launch from the cache, chain's and fast_sample's remembered
        assert cl.launch_cache_size() == filled > 0 and len(kc._REPEATS) == len(kg._REPEATS) == 1
        for w, h in zip(want, got, strict=True):
            for a, b in zip(w, h, strict=True):
                assert torch.equal(a, b)
