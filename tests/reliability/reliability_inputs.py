"""The catalogue of bad metadata given to every public op, and what each must raise.

One `BadCall` per bad input: the op, a short description, a builder of the call (lazy, so
collecting the tests allocates nothing), the exception type, and three message fragments that the
message must contain: the argument's name, the expected value (shape, dtype, range, device) and the
actual one. `test_host_validation.py` asserts every entry; `reliability_table.py` renders them into
docs/reliability.md, so the table is exactly what the tests check.

All calls start from one valid call per op (B = 2, K = 3, V = 5) and change one thing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import specsample as ss

B, K, V = 2, 3, 5
F32, F64, BF16, I32, I64 = torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64


@dataclass(frozen=True)
class BadCall:
    op: str
    what: str
    build: Callable[[], tuple[Callable, tuple, dict]]
    exc: type
    name: str
    expected: str
    actual: str
    bug: str | None = None  # a known defect: the test is xfail(strict=True) with this reason

    @property
    def id(self) -> str:
        return f"{self.op}:{self.what}"


def _probs(*shape, dtype=F32):
    return torch.full(shape, 1.0 / max(shape[-1], 1), dtype=dtype)


def _ids(*shape, dtype=I64):
    return torch.zeros(shape, dtype=dtype)


def _seeds(n=B, dtype=I64):
    return torch.arange(n, dtype=dtype)


def _huge_vocab(rank: int):
    """A stride-0 view with V = 2^31 - 1 columns (no memory): the int32 token-id limit."""
    shape = (B, K + 1, 2**31 - 1) if rank == 3 else (B, 2**31 - 1)
    return torch.zeros((1,) * rank).expand(*shape)


# ------------------------------------------------------------------------------------------------
# chain_rejection_sample
# ------------------------------------------------------------------------------------------------


def _chain(change: dict):
    def build():
        kw = dict(target_probs=_probs(B, K + 1, V), draft_token_ids=_ids(B, K), draft_probs=_probs(B, K, V),
                  uniforms=torch.full((B, K + 1), 0.5))  # fmt: skip
        kw.update({k: (v() if callable(v) else v) for k, v in change.items()})
        kw = {k: v for k, v in kw.items() if v is not _DROP}
        return ss.chain_rejection_sample, (), kw

    return build


_DROP = object()
_C = "chain_rejection_sample"

# fmt: off
CHAIN = [
    BadCall(_C, "target_probs a list", _chain({"target_probs": lambda: [[[0.2] * V] * (K + 1)] * B}),
            TypeError, "target_probs", "a torch.Tensor", "list"),
    BadCall(_C, "target_probs float64", _chain({"target_probs": lambda: _probs(B, K + 1, V, dtype=F64)}),
            TypeError, "target_probs", "torch.float32", "torch.float64"),
    BadCall(_C, "target_probs int64", _chain({"target_probs": lambda: _ids(B, K + 1, V)}),
            TypeError, "target_probs", "torch.bfloat16", "torch.int64"),
    BadCall(_C, "target_probs 2-D", _chain({"target_probs": lambda: _probs(B, V)}),
            ValueError, "target_probs", "[B, K+1, V]", "(2, 5)"),
    BadCall(_C, "target_probs V = 0", _chain({"target_probs": lambda: _probs(B, K + 1, 0)}),
            ValueError, "target_probs", "V >= 1", "(2, 4, 0)"),
    BadCall(_C, "target_probs K+1 = 0", _chain({"target_probs": lambda: _probs(B, 0, V)}),
            ValueError, "target_probs", "K+1 >= 1", "(2, 0, 5)"),
    BadCall(_C, "target_probs V = 2^31-1 (stride-0 view)", _chain({"target_probs": lambda: _huge_vocab(3)}),
            ValueError, "target_probs", "V < 2^31 - 1", "2147483647"),
    BadCall(_C, "target_probs on meta", _chain({"target_probs": lambda: _probs(B, K + 1, V).to("meta")}),
            ValueError, "target_probs", "CUDA tensors", "meta"),
    BadCall(_C, "draft_token_ids [B, K+1] (K+1 vs K)", _chain({"draft_token_ids": lambda: _ids(B, K + 1)}),
            ValueError, "draft_token_ids", "(2, 3)", "(2, 4)"),
    BadCall(_C, "draft_token_ids batch B+1", _chain({"draft_token_ids": lambda: _ids(B + 1, K)}),
            ValueError, "draft_token_ids", "(2, 3)", "(3, 3)"),
    BadCall(_C, "draft_token_ids 1-D", _chain({"draft_token_ids": lambda: _ids(B * K)}),
            ValueError, "draft_token_ids", "(2, 3)", "(6,)"),
    BadCall(_C, "draft_token_ids float32", _chain({"draft_token_ids": lambda: _probs(B, K)}),
            TypeError, "draft_token_ids", "torch.int32", "torch.float32"),
    BadCall(_C, "draft_token_ids int16", _chain({"draft_token_ids": lambda: _ids(B, K, dtype=torch.int16)}),
            TypeError, "draft_token_ids", "torch.int64", "torch.int16"),
    BadCall(_C, "draft_token_ids a list", _chain({"draft_token_ids": lambda: [[0] * K] * B}),
            TypeError, "draft_token_ids", "a torch.Tensor", "list"),
    BadCall(_C, "draft_token_ids on meta", _chain({"draft_token_ids": lambda: _ids(B, K).to("meta")}),
            ValueError, "draft_token_ids", "device cpu", "meta"),
    BadCall(_C, "draft_probs [B, K+1, V] (K+1 vs K)", _chain({"draft_probs": lambda: _probs(B, K + 1, V)}),
            ValueError, "draft_probs", "(2, 3, 5)", "(2, 4, 5)"),
    BadCall(_C, "draft_probs vocabulary V+1", _chain({"draft_probs": lambda: _probs(B, K, V + 1)}),
            ValueError, "draft_probs", "(2, 3, 5)", "(2, 3, 6)"),
    BadCall(_C, "draft_probs batch B+1", _chain({"draft_probs": lambda: _probs(B + 1, K, V)}),
            ValueError, "draft_probs", "(2, 3, 5)", "(3, 3, 5)"),
    BadCall(_C, "draft_probs float64", _chain({"draft_probs": lambda: _probs(B, K, V, dtype=F64)}),
            TypeError, "draft_probs", "torch.float16", "torch.float64"),
    BadCall(_C, "num_draft_tokens [B+1]", _chain({"num_draft_tokens": lambda: _ids(B + 1)}),
            ValueError, "num_draft_tokens", "(2,)", "(3,)"),
    BadCall(_C, "num_draft_tokens [B, 1]", _chain({"num_draft_tokens": lambda: _ids(B, 1)}),
            ValueError, "num_draft_tokens", "(2,)", "(2, 1)"),
    BadCall(_C, "num_draft_tokens float32", _chain({"num_draft_tokens": lambda: _probs(B)}),
            TypeError, "num_draft_tokens", "torch.int32", "torch.float32"),
    BadCall(_C, "uniforms [B, K] (K vs K+1)", _chain({"uniforms": lambda: torch.rand(B, K)}),
            ValueError, "uniforms", "(2, 4)", "(2, 3)"),
    BadCall(_C, "uniforms [B+1, K+1]", _chain({"uniforms": lambda: torch.rand(B + 1, K + 1)}),
            ValueError, "uniforms", "(2, 4)", "(3, 4)"),
    BadCall(_C, "uniforms float64", _chain({"uniforms": lambda: torch.rand(B, K + 1, dtype=F64)}),
            TypeError, "uniforms", "torch.float32", "torch.float64"),
    BadCall(_C, "uniforms bfloat16", _chain({"uniforms": lambda: torch.rand(B, K + 1).to(BF16)}),
            TypeError, "uniforms", "torch.float32", "torch.bfloat16"),
    BadCall(_C, "seeds without offsets", _chain({"uniforms": _DROP, "seeds": _seeds}),
            ValueError, "seeds/offsets", "both tensors", "['seeds']"),
    BadCall(_C, "offsets without seeds", _chain({"uniforms": _DROP, "offsets": _seeds}),
            ValueError, "seeds/offsets", "both tensors", "['offsets']"),
    BadCall(_C, "seeds int32",
            _chain({"uniforms": _DROP, "seeds": lambda: _seeds(dtype=I32), "offsets": _seeds}),
            TypeError, "seeds", "torch.int64", "torch.int32"),
    BadCall(_C, "offsets [B+1]",
            _chain({"uniforms": _DROP, "seeds": _seeds, "offsets": lambda: _seeds(B + 1)}),
            ValueError, "offsets", "(2,)", "(3,)"),
    BadCall(_C, "seeds a Python int", _chain({"uniforms": _DROP, "seeds": 7, "offsets": _seeds}),
            TypeError, "seeds", "a torch.Tensor", "int"),
    BadCall(_C, "uniforms and seeds/offsets", _chain({"seeds": _seeds, "offsets": _seeds}),
            ValueError, "randomness", "exactly one of", "['uniforms', 'seeds', 'offsets']"),
    BadCall(_C, "uniforms and generator", _chain({"generator": lambda: torch.Generator()}),
            ValueError, "randomness", "exactly one of", "['uniforms', 'generator']"),
    BadCall(_C, "generator an int", _chain({"uniforms": _DROP, "generator": 5}),
            TypeError, "generator", "a torch.Generator", "int"),
]

# ------------------------------------------------------------------------------------------------
# rejection_sample_logits
# ------------------------------------------------------------------------------------------------

_L = "rejection_sample_logits"


def _logits(change: dict):
    def build():
        kw = dict(target_logits=torch.zeros(B, K + 1, V), draft_token_ids=_ids(B, K),
                  draft_logits=torch.zeros(B, K, V), temperature=torch.ones(B), seeds=_seeds(),
                  offsets=_seeds())  # fmt: skip
        kw.update({k: (v() if callable(v) else v) for k, v in change.items()})
        kw = {k: v for k, v in kw.items() if v is not _DROP}
        return ss.rejection_sample_logits, (), kw

    return build


LOGITS = [
    BadCall(_L, "target_logits float64",
            _logits({"target_logits": lambda: torch.zeros(B, K + 1, V, dtype=F64)}),
            TypeError, "target_logits", "torch.float32", "torch.float64"),
    BadCall(_L, "target_logits 2-D", _logits({"target_logits": lambda: torch.zeros(B, V)}),
            ValueError, "target_logits", "[B, K+1, V]", "(2, 5)"),
    BadCall(_L, "target_logits V = 0", _logits({"target_logits": lambda: torch.zeros(B, K + 1, 0)}),
            ValueError, "target_logits", "V >= 1", "(2, 4, 0)"),
    BadCall(_L, "target_logits V = 2^31-1 (stride-0 view)",
            _logits({"target_logits": lambda: _huge_vocab(3)}),
            ValueError, "target_logits", "V < 2^31 - 1", "2147483647"),
    BadCall(_L, "target_logits a tuple", _logits({"target_logits": (0.0,)}),
            TypeError, "target_logits", "a torch.Tensor", "tuple"),
    BadCall(_L, "draft_token_ids [B, K+1] (K+1 vs K)", _logits({"draft_token_ids": lambda: _ids(B, K + 1)}),
            ValueError, "draft_token_ids", "(2, 3)", "(2, 4)"),
    BadCall(_L, "draft_token_ids batch B-1", _logits({"draft_token_ids": lambda: _ids(B - 1, K)}),
            ValueError, "draft_token_ids", "(2, 3)", "(1, 3)"),
    BadCall(_L, "draft_token_ids uint8", _logits({"draft_token_ids": lambda: _ids(B, K, dtype=torch.uint8)}),
            TypeError, "draft_token_ids", "torch.int32", "torch.uint8"),
    BadCall(_L, "draft_logits [B, K+1, V] (K+1 vs K)",
            _logits({"draft_logits": lambda: torch.zeros(B, K + 1, V)}),
            ValueError, "draft_logits", "(2, 3, 5)", "(2, 4, 5)"),
    BadCall(_L, "draft_logits vocabulary V-1", _logits({"draft_logits": lambda: torch.zeros(B, K, V - 1)}),
            ValueError, "draft_logits", "(2, 3, 5)", "(2, 3, 4)"),
    BadCall(_L, "draft_logits int32", _logits({"draft_logits": lambda: _ids(B, K, V, dtype=I32)}),
            TypeError, "draft_logits", "torch.float32", "torch.int32"),
    BadCall(_L, "temperature None", _logits({"temperature": None}),
            TypeError, "temperature", "a torch.Tensor", "NoneType"),
    BadCall(_L, "temperature a float", _logits({"temperature": 1.0}),
            TypeError, "temperature", "a torch.Tensor", "float"),
    BadCall(_L, "temperature [B+1]", _logits({"temperature": lambda: torch.ones(B + 1)}),
            ValueError, "temperature", "(2,)", "(3,)"),
    BadCall(_L, "temperature [B, 1]", _logits({"temperature": lambda: torch.ones(B, 1)}),
            ValueError, "temperature", "(2,)", "(2, 1)"),
    BadCall(_L, "temperature float64", _logits({"temperature": lambda: torch.ones(B, dtype=F64)}),
            TypeError, "temperature", "torch.float32", "torch.float64"),
    BadCall(_L, "seeds None", _logits({"seeds": None}),
            TypeError, "seeds", "a torch.Tensor", "NoneType"),
    BadCall(_L, "seeds int32", _logits({"seeds": lambda: _seeds(dtype=I32)}),
            TypeError, "seeds", "torch.int64", "torch.int32"),
    BadCall(_L, "offsets [B-1]", _logits({"offsets": lambda: _seeds(B - 1)}),
            ValueError, "offsets", "(2,)", "(1,)"),
    BadCall(_L, "offsets float32", _logits({"offsets": lambda: _probs(B)}),
            TypeError, "offsets", "torch.int64", "torch.float32"),
    BadCall(_L, "num_draft_tokens [B+1]", _logits({"num_draft_tokens": lambda: _ids(B + 1)}),
            ValueError, "num_draft_tokens", "(2,)", "(3,)"),
    BadCall(_L, "num_draft_tokens bool",
            _logits({"num_draft_tokens": lambda: torch.ones(B, dtype=torch.bool)}),
            TypeError, "num_draft_tokens", "torch.int32", "torch.bool"),
    BadCall(_L, "seeds on meta", _logits({"seeds": lambda: _seeds().to("meta")}),
            ValueError, "seeds", "device cpu", "meta"),
]

# ------------------------------------------------------------------------------------------------
# fast_sample
# ------------------------------------------------------------------------------------------------

_F = "fast_sample"


def _fast(change: dict):
    def build():
        kw = dict(probs=_probs(B, V), num_samples=1, seeds=_seeds(), offsets=_seeds())
        kw.update({k: (v() if callable(v) else v) for k, v in change.items()})
        kw = {k: v for k, v in kw.items() if v is not _DROP}
        return ss.fast_sample, (kw.pop("probs"),), kw

    return build


FAST = [
    BadCall(_F, "probs a list",
            _fast({"probs": [[0.2] * V] * B}),
            TypeError, "probs", "a torch.Tensor", "list"),
    BadCall(_F, "probs 3-D",
            _fast({"probs": lambda: _probs(B, K, V)}),
            ValueError, "probs", "[B, V]", "[2, 3, 5]"),
    BadCall(_F, "probs 1-D", _fast({"probs": lambda: _probs(V)}), ValueError, "probs", "[B, V]", "[5]"),
    BadCall(_F, "probs float64", _fast({"probs": lambda: _probs(B, V, dtype=F64)}),
            TypeError, "probs", "float32, bfloat16 or float16", "torch.float64"),
    BadCall(_F, "probs int32", _fast({"probs": lambda: _ids(B, V, dtype=I32)}),
            TypeError, "probs", "float32, bfloat16 or float16", "torch.int32"),
    BadCall(_F, "probs V = 0",
            _fast({"probs": lambda: _probs(B, 0)}),
            ValueError, "probs", "V >= 1", "V = 0"),
    BadCall(_F, "probs V = 2^31-1 (stride-0 view)", _fast({"probs": lambda: _huge_vocab(2)}),
            ValueError, "V", "below 2^31 - 1", "2147483647"),
    BadCall(_F, "probs on meta", _fast({"probs": lambda: _probs(B, V).to("meta")}),
            ValueError, "probs", "CUDA tensors", "meta"),
    BadCall(_F, "num_samples = 0", _fast({"num_samples": 0}), ValueError, "num_samples", "[1, 64]", "0"),
    BadCall(_F, "num_samples = -1", _fast({"num_samples": -1}), ValueError, "num_samples", "[1, 64]", "-1"),
    BadCall(_F, "num_samples = 65", _fast({"num_samples": 65}), ValueError, "num_samples", "[1, 64]", "65"),
    BadCall(_F, "num_samples = 2.0",
            _fast({"num_samples": 2.0}),
            TypeError, "num_samples", "an int", "float"),
    BadCall(_F, "num_samples = True",
            _fast({"num_samples": True}),
            TypeError, "num_samples", "an int", "bool"),
    BadCall(_F, "seeds int32", _fast({"seeds": lambda: _seeds(dtype=I32)}),
            TypeError, "seeds", "torch.int64", "torch.int32"),
    BadCall(_F, "seeds [B+1]", _fast({"seeds": lambda: _seeds(B + 1)}), ValueError, "seeds", "[2]", "[3]"),
    BadCall(_F, "offsets [B, 1]", _fast({"offsets": lambda: _seeds().reshape(B, 1)}),
            ValueError, "offsets", "[2]", "[2, 1]"),
    BadCall(_F, "seeds a Python int", _fast({"seeds": 3}), TypeError, "seeds", "int64 torch.Tensor", "int"),
    BadCall(_F, "seeds on meta",
            _fast({"seeds": lambda: _seeds().to("meta")}),
            ValueError, "seeds", "cpu", "meta"),
    BadCall(_F, "seeds without offsets", _fast({"offsets": _DROP}),
            ValueError, "seeds and offsets", "together", "offsets = None"),
    BadCall(_F, "offsets without seeds", _fast({"seeds": _DROP}),
            ValueError, "seeds and offsets", "together", "seeds = None"),
    BadCall(_F, "generator and seeds/offsets", _fast({"generator": lambda: torch.Generator()}),
            ValueError, "generator", "either generator or seeds/offsets", "not both"),
]

# ------------------------------------------------------------------------------------------------
# sample_from_logits
# ------------------------------------------------------------------------------------------------

_S = "sample_from_logits"


def _sfl(change: dict):
    def build():
        kw = dict(logits=torch.zeros(B, V), temperature=1.0, seeds=_seeds(), offsets=_seeds())
        kw.update({k: (v() if callable(v) else v) for k, v in change.items()})
        kw = {k: v for k, v in kw.items() if v is not _DROP}
        return ss.sample_from_logits, (kw.pop("logits"), kw.pop("temperature")), kw

    return build


SAMPLE = [
    BadCall(_S, "logits 3-D", _sfl({"logits": lambda: torch.zeros(B, K, V)}), ValueError, "logits", "[B, V]",
            "[2, 3, 5]"),
    BadCall(_S, "logits float64", _sfl({"logits": lambda: torch.zeros(B, V, dtype=F64)}),
            TypeError, "logits", "float32, bfloat16 or float16", "torch.float64"),
    BadCall(_S, "logits V = 0", _sfl({"logits": lambda: torch.zeros(B, 0)}), ValueError, "logits", "V >= 1",
            "V = 0"),
    BadCall(_S, "logits V = 2^31-1 (stride-0 view)", _sfl({"logits": lambda: _huge_vocab(2)}),
            ValueError, "V", "below 2^31 - 1", "2147483647"),
    BadCall(_S, "temperature a bool",
            _sfl({"temperature": True}),
            TypeError, "temperature", "a float", "bool"),
    BadCall(_S, "temperature a string",
            _sfl({"temperature": "1.0"}),
            TypeError, "temperature", "a float", "str"),
    BadCall(_S, "temperature int64 tensor", _sfl({"temperature": lambda: torch.ones(B, dtype=I64)}),
            TypeError, "temperature", "a floating dtype", "torch.int64"),
    BadCall(_S, "temperature [B+1]", _sfl({"temperature": lambda: torch.ones(B + 1)}),
            ValueError, "temperature", "[2]", "[3]"),
    BadCall(_S, "temperature on meta", _sfl({"temperature": lambda: torch.ones(B).to("meta")}),
            ValueError, "temperature", "cpu", "meta"),
    BadCall(_S, "seeds None", _sfl({"seeds": None}),
            ValueError, "seeds", "int64 tensors [B]", "seeds = None"),
    BadCall(_S, "offsets None", _sfl({"offsets": None}),
            ValueError, "offsets", "int64 tensors [B]", "offsets = None"),
    BadCall(_S, "offsets int32", _sfl({"offsets": lambda: _seeds(dtype=I32)}),
            TypeError, "offsets", "torch.int64", "torch.int32"),
    BadCall(_S, "seeds [B+1]", _sfl({"seeds": lambda: _seeds(B + 1)}), ValueError, "seeds", "[2]", "[3]"),
    BadCall(_S, "probs_out [B, V+1]", _sfl({"probs_out": lambda: torch.zeros(B, V + 1)}),
            ValueError, "probs_out", "[2, 5]", "[2, 6]"),
    BadCall(_S, "probs_out int32", _sfl({"probs_out": lambda: _ids(B, V, dtype=I32)}),
            TypeError, "probs_out", "floating", "torch.int32"),
    BadCall(_S, "probs_out a list", _sfl({"probs_out": [[0.0] * V] * B}),
            TypeError, "probs_out", "floating torch.Tensor", "list"),
    BadCall(_S, "probs_out on meta", _sfl({"probs_out": lambda: torch.zeros(B, V).to("meta")}),
            ValueError, "probs_out", "cpu", "meta"),
]

# ------------------------------------------------------------------------------------------------
# renorm_draft_probs
# ------------------------------------------------------------------------------------------------

_R = "renorm_draft_probs"


def _renorm(change: dict):
    def build():
        kw = dict(draft_logits=torch.zeros(B, K, V), temperature=torch.ones(B))
        kw.update({k: (v() if callable(v) else v) for k, v in change.items()})
        return ss.renorm_draft_probs, (kw["draft_logits"], kw["temperature"]), {}

    return build


RENORM = [
    BadCall(_R, "draft_logits a float", _renorm({"draft_logits": 0.5}),
            TypeError, "draft_logits", "a torch.Tensor", "float"),
    BadCall(_R, "draft_logits 0-d", _renorm({"draft_logits": lambda: torch.tensor(0.0)}),
            ValueError, "draft_logits", "[..., V]", "[]"),
    BadCall(_R, "draft_logits int64", _renorm({"draft_logits": lambda: _ids(B, K, V)}),
            TypeError, "draft_logits", "float32, bfloat16 or float16", "torch.int64"),
    BadCall(_R, "draft_logits V = 0", _renorm({"draft_logits": lambda: torch.zeros(B, K, 0)}),
            ValueError, "draft_logits", "V >= 1", "V = 0"),
    BadCall(_R, "temperature [K] (not a prefix of [B, K])", _renorm({"temperature": lambda: torch.ones(K)}),
            ValueError, "temperature", "[2, 3]", "[3]"),
    BadCall(_R, "temperature [B, K, V] (too many dims)",
            _renorm({"temperature": lambda: torch.ones(B, K, V)}),
            ValueError, "temperature", "[2, 3]", "[2, 3, 5]"),
    BadCall(_R, "temperature int32 tensor", _renorm({"temperature": lambda: torch.ones(B, dtype=I32)}),
            TypeError, "temperature", "a floating dtype", "torch.int32"),
    BadCall(_R, "temperature None", _renorm({"temperature": None}),
            TypeError, "temperature", "a float or a torch.Tensor", "NoneType"),
]

# fmt: on
CATALOGUE: list[BadCall] = [*CHAIN, *LOGITS, *FAST, *SAMPLE, *RENORM]
