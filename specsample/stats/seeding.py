"""Seeds derived from the test id, with environment overrides for reproduction and calibration.

    test_seed(nodeid, salt="")   stable 63-bit seed = hash(nodeid) (then mixed with salt)
    SPECSAMPLE_SEED=<int>        replaces hash(nodeid) by <int> (reproduce a reported failure)
    SPECSAMPLE_VARY_SEED=1       replaces hash(nodeid) by fresh entropy, logged (calibration runs:
                                 measure the real false-fail rate over many runs, as TFP's --vary_seed)

A salted seed remembers the base seed it came from, so a failure message can print the
`SPECSAMPLE_SEED=<base>` line that reproduces the whole test, whichever salt the assertion used.
Seeds are never chosen by looking at outcomes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import sys
from collections.abc import Iterator

import numpy as np

_LOG = logging.getLogger("specsample.stats")
_SEED_MASK = (1 << 63) - 1  # seeds fit an int64 Philox key
_BASE_OF: dict[int, int] = {}  # derived seed -> base seed, for repro lines


def _hash63(*parts: str) -> int:
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & _SEED_MASK


def _base_seed(nodeid: str) -> int:
    fixed = os.environ.get("SPECSAMPLE_SEED", "").strip()
    if fixed:
        try:
            return int(fixed, 0) & _SEED_MASK
        except ValueError as exc:
            raise ValueError(f"SPECSAMPLE_SEED must be an integer, got {fixed!r}") from exc
    if os.environ.get("SPECSAMPLE_VARY_SEED", "").strip() not in ("", "0"):
        seed = secrets.randbits(63)
        message = f"SPECSAMPLE_VARY_SEED: {nodeid} uses seed {seed} (reproduce: SPECSAMPLE_SEED={seed})"
        _LOG.warning(message)
        print(message, file=sys.stderr)
        return seed
    return _hash63("specsample-test", nodeid)


def test_seed(nodeid: str, salt: str = "") -> int:
    """A seed in [0, 2^63) that is a pure function of (nodeid, salt) unless overridden by env.

    Guarantees: the same nodeid and salt give the same seed on every machine and Python version
    (blake2b, not `hash()`); different salts give independent-looking seeds; SPECSAMPLE_SEED makes
    the base seed fixed; SPECSAMPLE_VARY_SEED=1 draws it from system entropy and logs it.
    """
    base = _base_seed(nodeid)
    seed = base if salt == "" else _hash63("specsample-salt", str(base), salt)
    _BASE_OF[seed] = base
    return seed


test_seed.__test__ = False  # not a pytest test despite the name


def current_test_seed(salt: str = "") -> int:
    """`test_seed` of the pytest test now running (from PYTEST_CURRENT_TEST); ValueError outside pytest."""
    current = os.environ.get("PYTEST_CURRENT_TEST")
    if not current:
        raise ValueError("current_test_seed: PYTEST_CURRENT_TEST is not set (not inside a pytest test)")
    return test_seed(current.rsplit(" (", 1)[0], salt)


def base_seed_of(seed: int | None) -> int | None:
    """The base seed `seed` was derived from by `test_seed` (itself if unknown)."""
    if seed is None:
        return None
    return _BASE_OF.get(int(seed), int(seed))


def repro_line(seed: int | None) -> str:
    """The environment line that reproduces a run that used `seed`."""
    if seed is None:
        return "seed: none given (pass seed=... to the assertion to get a repro line)"
    return f"reproduce with: SPECSAMPLE_SEED={base_seed_of(seed)}"


def seed_stream(seed: int) -> Iterator[int]:
    """An endless stream of independent child seeds in [0, 2^63) (numpy SeedSequence spawning).

    Guarantees: deterministic in `seed`; children are statistically independent streams.
    """
    sequence = np.random.SeedSequence(int(seed))
    while True:
        (child,) = sequence.spawn(1)
        yield int(child.generate_state(1, np.uint64)[0]) & _SEED_MASK
