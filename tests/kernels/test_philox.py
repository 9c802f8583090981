"""The in-kernel Philox stream is bit-identical with its numpy twin (and with Triton's own
`tl.randint` where the two share a counter layout); the float conversions agree with float64."""

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from specsample.kernels import philox as kp
from specsample.reference import philox as rp

N = 1024


@triton.jit
def _philox_probe_kernel(seed_ptr, off_ptr, words_ptr, exp_ptr, unif_ptr, randint_ptr, N: tl.constexpr):
    # words_ptr [N, 4] int32 (bit pattern of uint32); exp_ptr, unif_ptr [N] fp32; randint_ptr [N]
    i = tl.arange(0, N)
    s = tl.load(seed_ptr)
    o = tl.load(off_ptr)
    w0, w1, w2, w3 = kp.philox_words(s, o, i, kp.STREAM_GUMBEL, i * 0 + 3)
    tl.store(words_ptr + i * 4 + 0, w0.to(tl.int32, bitcast=True))
    tl.store(words_ptr + i * 4 + 1, w1.to(tl.int32, bitcast=True))
    tl.store(words_ptr + i * 4 + 2, w2.to(tl.int32, bitcast=True))
    tl.store(words_ptr + i * 4 + 3, w3.to(tl.int32, bitcast=True))
    tl.store(exp_ptr + i, kp.exponential_from_word(w0))
    tl.store(unif_ptr + i, kp.uniform_from_word(w1))
    tl.store(randint_ptr + i, tl.randint(s, i.to(tl.int32)).to(tl.int32, bitcast=True))


@pytest.mark.parametrize("seed,offset", [(0, 0), (1234, 5), (2**40 + 7, 2**33 + 9), (-1, 2**62 + 3)])
def test_philox_bit_identical_with_numpy(device, seed, offset):
    words = torch.empty(N * 4, dtype=torch.int32, device=device)
    expo = torch.empty(N, dtype=torch.float32, device=device)
    unif = torch.empty(N, dtype=torch.float32, device=device)
    tri = torch.empty(N, dtype=torch.int32, device=device)
    seed_t = torch.tensor([seed], dtype=torch.int64, device=device)
    off_t = torch.tensor([offset], dtype=torch.int64, device=device)
    _philox_probe_kernel[(1,)](seed_t, off_t, words, expo, unif, tri, N=N)

    ref = np.stack(rp.philox_words(seed, offset, np.arange(N), rp.STREAM_GUMBEL, 3), -1).reshape(-1)
    got = words.cpu().numpy().view(np.uint32)
    assert np.array_equal(got, ref), f"{np.count_nonzero(got != ref)} of {ref.size} words differ"

    # uniforms are exact; Exp(1) noise within a few float32 ulps of the float64 value
    assert np.array_equal(unif.cpu().numpy().astype(np.float64), rp.uniform_from_word(ref[1::4]))
    rel = np.abs(expo.cpu().numpy() / rp.exponential_from_word(ref[0::4]) - 1.0)
    tolerance = 4e-6 if device == "cuda" else 1e-6  # GPU log is an approximation, numpy's is not
    assert rel.max() < tolerance, rel.max()

    # our counter layout with (index, 0, 0, 0) is Triton's own randint stream
    seed_u = seed & 0xFFFFFFFFFFFFFFFF
    std = rp.philox4x32(np.arange(N), 0, 0, 0, seed_u & 0xFFFFFFFF, seed_u >> 32)[0]
    assert np.array_equal(tri.cpu().numpy().view(np.uint32), std)


def test_exponential_conversion_covers_both_ends():
    words = np.array([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=np.uint32)
    e = rp.exponential_from_word(words)
    assert np.all(np.isfinite(e)) and np.all(e > 0)
    assert e[0] == pytest.approx(2.0**-33, rel=1e-12)  # smallest E: rare tokens keep their odds
    assert e[-1] == pytest.approx(-np.log(0.5 * 2.0**-32), rel=1e-12)


def test_uniform_conversion_is_in_unit_interval():
    u = rp.uniform_from_word(np.array([0, 255, 256, 2**32 - 1], dtype=np.uint32))
    assert u[0] == 0.0 and u[1] == 0.0 and u[2] == 2.0**-24 and u[3] == 1.0 - 2.0**-24


def test_uniform_half_step_twins_agree():
    """The kernels and the float64 references use a uniform at the same cell midpoint u + 2^-25: the
    kernel constexpr equals the reference constant, and it is half the 2^-24 grid step of
    uniform_from_word (docs/semantics.md)."""
    from specsample.reference.chain import UNIFORM_HALF_STEP

    assert kp.UNIFORM_HALF_STEP.value == UNIFORM_HALF_STEP == 2.0**-25
    step = float(rp.uniform_from_word(np.array([256], dtype=np.uint32))[0])  # word >> 8 == 1
    assert UNIFORM_HALF_STEP == step / 2
