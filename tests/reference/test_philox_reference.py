"""The numpy Philox4x32-10 (specsample.reference.philox) against published known-answer vectors and
an independent one-element-at-a-time oracle. The kernels are pinned to this generator bit for bit by
tests/kernels/test_philox.py, so an error here would move every seeded kernel with it."""

import numpy as np
import pytest

from specsample.reference import philox as rp
from specsample.stats import current_test_seed

# Random123's kat_vectors for philox4x32 with 10 rounds: (counter, key) -> output words.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def _philox_one(c, k, rounds=10):
    """Philox4x32 on Python ints, one counter at a time (the Random123 definition)."""
    c0, c1, c2, c3 = c
    k0, k1 = k
    for _ in range(rounds):
        p0, p1 = 0xCD9E8D57 * c2, 0xD2511F53 * c0
        c0, c1, c2, c3 = (p0 >> 32) ^ c1 ^ k0, p0 & 0xFFFFFFFF, (p1 >> 32) ^ c3 ^ k1, p1 & 0xFFFFFFFF
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c0, c1, c2, c3


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_known_answer_vectors(counter, key, expected):
    assert _philox_one(counter, key) == expected  # the oracle itself
    got = rp.philox4x32(*counter, *key)
    assert tuple(int(w) for w in got) == expected
    assert all(w.dtype == np.uint32 and w.shape == () for w in got)


def test_blocked_rounds_equal_the_oracle_across_block_edges():
    """A [3, _BLOCK + 5] call with per-row keys and offsets (the coupling certificates' layout):
    elements on both sides of every block edge, and random ones, equal the one-at-a-time oracle."""
    rng = np.random.default_rng(current_test_seed())
    rows, cols = 3, rp._BLOCK + 5
    seeds = rng.integers(-(2**63), 2**63 - 1, (rows, 1), dtype=np.int64)
    offsets = rng.integers(0, 2**62, (rows, 1), dtype=np.int64)
    index = np.arange(cols, dtype=np.int64)[None, :] + (1 << 33)  # index above 2^32: truncated to 32 bits
    words = np.stack(rp.philox_words(seeds, offsets, index, rp.STREAM_GUMBEL, position=7), axis=-1)
    assert words.shape == (rows, cols, 4) and words.dtype == np.uint32
    flat_edges = [e + d for e in range(0, rows * cols, rp._BLOCK) for d in (-1, 0, 1)]
    picks = {(f // cols, f % cols) for f in flat_edges if 0 <= f < rows * cols}
    random_cells = zip(rng.integers(0, rows, 20), rng.integers(0, cols, 20), strict=True)
    picks |= {(int(r), int(c)) for r, c in random_cells}
    for r, c in sorted(picks):
        s, o = int(seeds[r, 0]) & (2**64 - 1), int(offsets[r, 0])
        counter = (int(index[0, c]) & 0xFFFFFFFF, (rp.STREAM_GUMBEL << 24) | 7, o & 0xFFFFFFFF, o >> 32)
        assert tuple(int(w) for w in words[r, c]) == _philox_one(counter, (s & 0xFFFFFFFF, s >> 32)), (r, c)
