"""The sampler protocol: what the verifier certifies, and adapters that put samplers behind it.

A chain sampler is any callable with our `chain_rejection_sample` signature (DESIGN.md §2):

    fn(target_probs [B, K+1, V], draft_token_ids [B, K], draft_probs [B, K, V] | None, *,
       num_draft_tokens [B] | None, uniforms [B, K+1] | None, seeds [B] | None, offsets [B] | None)
    -> tokens [B, K+1], num_accepted [B], fallback [B], valid [B]

returned as our SampleResult, a 4-tuple, a dict or any object with those attributes; torch or numpy.
`ChainSampler` wraps such a callable: the runner always calls it with numpy inputs (stride-0
broadcast views included) and gets numpy outputs back. Adapters:

- "specsample": our Triton kernel (`specsample.chain_rejection_sample`), torch tensors on the device;
- "reference": the float64 numpy reference (`specsample.reference.chain`);
- "sglang" / "vllm" / "flashinfer": the engines' functions, wrapped by `specsample.compat` when the
  engine package is installed (a clear SamplerUnavailable otherwise);
- `--target MODULE:FUNCTION`: any external function with our signature (torch inputs by default;
  a function with attribute `specsample_inputs = "numpy"` gets numpy arrays).

Gumbel samplers (`fast_sample` signature: probs [B, V], num_samples, seeds, offsets -> indices [B, n])
are wrapped the same way by `GumbelSampler`, logits samplers by `logits_family.LogitsSampler`; an
external function of either family (`--target` with `--family`, or its `specsample_family`
attribute) is coupled with our Philox stream only where its `specsample_noise` attribute says it
draws it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specsample.reference.gumbel import fast_sample_reference
from specsample.verify import mutable_reference as mref


class SamplerUnavailable(RuntimeError):
    """The requested sampler cannot be loaded here (package missing, kernel not built yet)."""


@dataclass
class ChainOutput:
    """Numpy view of a chain sampler's result."""

    tokens: np.ndarray  # [B, K+1] int64
    num_accepted: np.ndarray  # [B] int64
    fallback: np.ndarray  # [B] bool
    valid: np.ndarray  # [B] bool


def _to_numpy(a) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    return np.asarray(a)


def as_chain_output(res) -> ChainOutput:
    """Normalise a sampler's return value (SampleResult, tuple, dict, object) to a ChainOutput."""
    if isinstance(res, dict):
        parts = [res[k] for k in ("tokens", "num_accepted", "fallback", "valid")]
    elif hasattr(res, "tokens") and hasattr(res, "num_accepted"):
        parts = [res.tokens, res.num_accepted, getattr(res, "fallback", None), getattr(res, "valid", None)]
    elif isinstance(res, (tuple, list)) and len(res) >= 2:
        parts = list(res[:4]) + [None] * (4 - len(res[:4]))
    else:
        raise TypeError(f"sampler returned {type(res).__name__}; expected SampleResult, a tuple or a dict")
    tokens = _to_numpy(parts[0]).astype(np.int64)
    num_accepted = _to_numpy(parts[1]).astype(np.int64).reshape(-1)
    bsz = tokens.shape[0]
    fallback = np.zeros(bsz, bool) if parts[2] is None else _to_numpy(parts[2]).astype(bool).reshape(-1)
    if parts[3] is None:
        valid = tokens[np.arange(bsz), np.clip(num_accepted, 0, tokens.shape[1] - 1)] >= 0
    else:
        valid = _to_numpy(parts[3]).astype(bool).reshape(-1)
    return ChainOutput(tokens, num_accepted, fallback, valid)


@dataclass
class ChainSampler:
    """A chain sampler behind the protocol.

    fn: the callable; name: shown in reports; inputs: 'numpy' or 'torch'; device: torch device for
    'torch' inputs; supports_seeds: whether fn takes seeds/offsets (the production RNG path);
    description: one line for the report."""

    fn: Callable
    name: str
    inputs: str = "numpy"
    device: str = "cpu"
    supports_seeds: bool = True
    description: str = ""
    is_kernel: bool = False

    def __call__(
        self,
        p,
        ids,
        q=None,
        *,
        num_draft_tokens=None,
        uniforms=None,
        seeds=None,
        offsets=None,
        dtype: str = "float32",
    ) -> ChainOutput:
        if self.inputs == "numpy":
            res = self.fn(
                p, ids, q, num_draft_tokens=num_draft_tokens, uniforms=uniforms, seeds=seeds, offsets=offsets
            )
            return as_chain_output(res)
        import torch

        tdtype = {
            "float32": torch.float32,
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
            "float64": torch.float32,
        }[dtype]
        kw = {}
        if num_draft_tokens is not None:
            kw["num_draft_tokens"] = to_torch(num_draft_tokens, self.device, torch.int64)
        if uniforms is not None:
            kw["uniforms"] = to_torch(uniforms, self.device, torch.float32)
        if seeds is not None:
            kw["seeds"] = to_torch(seeds, self.device, torch.int64)
            kw["offsets"] = to_torch(offsets, self.device, torch.int64)
        res = self.fn(
            to_torch(p, self.device, tdtype),
            to_torch(ids, self.device, torch.int64),
            None if q is None else to_torch(q, self.device, tdtype),
            **kw,
        )
        return as_chain_output(res)


def to_torch(a, device: str, dtype):
    """numpy -> torch on `device`; a stride-0 leading axis stays a stride-0 expand (no copy)."""
    import torch

    a = np.asarray(a)
    if a.ndim >= 1 and a.shape[0] > 1 and a.strides[0] == 0:
        one = torch.from_numpy(np.array(a[0])).to(device=device, dtype=dtype)
        return one.unsqueeze(0).expand(a.shape)
    return torch.from_numpy(np.array(a)).to(device=device, dtype=dtype)


# --------------------------------------------------------------------------------------------
# chain adapters
# --------------------------------------------------------------------------------------------


def reference_chain_fn(p, ids, q=None, *, num_draft_tokens=None, uniforms=None, seeds=None, offsets=None):
    """The float64 reference behind our signature; seeds/offsets map to the kernel's Philox uniforms."""
    from specsample.reference.chain import chain_rejection_reference, chain_seeded_uniforms

    if uniforms is None:
        if seeds is None:
            raise ValueError("reference sampler: pass uniforms or seeds/offsets")
        uniforms = chain_seeded_uniforms(seeds, offsets, np.asarray(p).shape[1] - 1)
    r = chain_rejection_reference(p, ids, q, uniforms=uniforms, num_draft_tokens=num_draft_tokens)
    return r.tokens, r.num_accepted, r.fallback, r.valid


def reference_sampler() -> ChainSampler:
    return ChainSampler(
        reference_chain_fn,
        "reference",
        "numpy",
        "cpu",
        True,
        "float64 numpy reference (specsample.reference.chain)",
    )


def mutable_chain_fn(bugs=frozenset()):
    """Verify's own float64 chain sampler with planted `bugs` (see mutable_reference)."""
    bugs = frozenset(bugs)

    def fn(p, ids, q=None, *, num_draft_tokens=None, uniforms=None, seeds=None, offsets=None):
        if uniforms is None:
            uniforms = mref.seeded_uniforms(seeds, offsets, np.asarray(p).shape[1], bugs)
        return mref.chain_sample(p, ids, q, num_draft_tokens, uniforms, bugs)

    return fn


def mutable_sampler(bugs=frozenset(), name: str = "verify-baseline") -> ChainSampler:
    return ChainSampler(
        mutable_chain_fn(bugs),
        name,
        "numpy",
        "cpu",
        True,
        f"verify's float64 chain sampler, bugs={sorted(bugs)}",
    )


def _torch_device(device: str) -> str:
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def specsample_sampler(device: str = "auto", module: str = "specsample.kernels.chain") -> ChainSampler:
    """Our Triton chain kernel (or a module with the same launcher, e.g. a mutant copy)."""
    try:
        mod = importlib.import_module(module)
        fn = mod.chain_rejection_sample
    except (ImportError, AttributeError) as exc:
        raise SamplerUnavailable(f"{module}.chain_rejection_sample is not importable yet: {exc}") from exc
    return ChainSampler(
        fn,
        "specsample",
        "torch",
        _torch_device(device),
        True,
        f"Triton kernel {module}.chain_rejection_sample",
        is_kernel=True,
    )


_ENGINES = {
    "sglang": ("sglang", "specsample.compat.sglang", "SGLang"),
    "vllm": ("vllm", "specsample.compat.vllm", "vLLM"),
    "flashinfer": ("flashinfer", "specsample.compat.flashinfer", "FlashInfer"),
}


def engine_sampler(engine: str, device: str = "auto") -> ChainSampler:
    """An engine's own chain sampler behind our protocol, via `specsample.compat.<engine>`.

    Raises SamplerUnavailable naming the missing package when the engine is not installed."""
    package, compat_module, label = _ENGINES[engine]
    if importlib.util.find_spec(package) is None:
        raise SamplerUnavailable(
            f"adapter '{engine}': the {label} package ('{package}') is not installed in this environment; "
            f"install it (pip install {package}) on a machine with a GPU to certify {label}'s sampler"
        )
    try:
        mod = importlib.import_module(compat_module)
        factory = mod.chain_sampler
    except (ImportError, AttributeError) as exc:
        raise SamplerUnavailable(
            f"adapter '{engine}': {label} is installed but {compat_module}.chain_sampler (the wrapper of "
            f"{label}'s function into our signature) is not available: {exc}"
        ) from exc
    fn = factory()
    return ChainSampler(
        fn,
        engine,
        getattr(fn, "specsample_inputs", "torch"),
        _torch_device(device),
        _takes_seeds(fn),
        f"{label} via {compat_module}",
    )


def _takes_seeds(fn) -> bool:
    try:
        return "seeds" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


FAMILIES = ("chain", "gumbel", "logits")


def load_target(spec: str) -> Callable:
    """The function `MODULE:FUNCTION` names; the module may also be a path to a .py file."""
    if ":" not in spec:
        raise ValueError(f"--target: expected MODULE:FUNCTION, got {spec!r}")
    mod_name, fn_name = spec.rsplit(":", 1)
    try:
        if mod_name.endswith(".py"):
            loc = importlib.util.spec_from_file_location("specsample_verify_target", mod_name)
            mod = importlib.util.module_from_spec(loc)
            loc.loader.exec_module(mod)
        else:
            mod = importlib.import_module(mod_name)
        return getattr(mod, fn_name)
    except (ImportError, AttributeError, FileNotFoundError) as exc:
        raise SamplerUnavailable(f"--target {spec}: cannot load: {exc}") from exc


def target_family(fn: Callable, family: str | None = None) -> str:
    """Which signature an external function has: `family` when given, else the function's
    `specsample_family` attribute, else "chain"."""
    family = family or getattr(fn, "specsample_family", "chain")
    if family not in FAMILIES:
        raise ValueError(f"family: expected one of {', '.join(FAMILIES)}; got {family!r}")
    return family


def target_sampler(spec: str, device: str = "auto") -> ChainSampler:
    """`MODULE:FUNCTION` with our `chain_rejection_sample` signature -> ChainSampler."""
    return external_chain_sampler(load_target(spec), spec, device)


def external_inputs(fn: Callable, device: str, inputs=None) -> tuple[str, str]:
    """(inputs, device) of an external function: torch tensors on `device` unless `inputs` or the
    function's `specsample_inputs` attribute says "numpy" (then on the CPU)."""
    inputs = inputs or getattr(fn, "specsample_inputs", "torch")
    return inputs, (_torch_device(device) if inputs == "torch" else "cpu")


def external_chain_sampler(fn: Callable, name: str, device: str = "auto", inputs=None) -> ChainSampler:
    """A bare function with our chain signature behind the protocol."""
    inputs, device = external_inputs(fn, device, inputs)
    return ChainSampler(fn, name, inputs, device, _takes_seeds(fn), f"external function {name}")


def chain_sampler_for(adapter: str, device: str = "auto") -> ChainSampler:
    """The sampler an `--adapter` name selects."""
    if adapter == "reference":
        return reference_sampler()
    if adapter == "specsample":
        return specsample_sampler(device)
    if adapter in _ENGINES:
        return engine_sampler(adapter, device)
    raise ValueError(
        f"--adapter: expected one of specsample, reference, sglang, vllm, flashinfer; got {adapter!r}"
    )


# --------------------------------------------------------------------------------------------
# Gumbel (fast_sample) samplers
# --------------------------------------------------------------------------------------------


GUMBEL_NOISES = ("token", "grouped", None)


@dataclass
class GumbelSampler:
    """fast_sample-style sampler: fn(probs [B, V], num_samples, seeds, offsets) -> indices [B, n].
    `noise` names the seeded noise contract its one-sample draws follow, which the coupling_seeded
    certificate compares against: "token" (the per-token race, `reference.gumbel.race_top_n` on
    STREAM_GUMBEL), "grouped" (`reference.gumbel.grouped_race`, specsample's fast_sample) or None (a
    random stream of the sampler's own: coupling_seeded is skipped, the laws still apply)."""

    fn: Callable
    name: str
    inputs: str = "numpy"
    device: str = "cpu"
    description: str = ""
    is_kernel: bool = False
    noise: str | None = "token"

    def __post_init__(self):
        if self.noise not in GUMBEL_NOISES:
            raise ValueError(
                f"GumbelSampler {self.name}: noise must be one of {GUMBEL_NOISES}; got {self.noise!r}"
            )

    def __call__(self, probs, num_samples: int, seeds, offsets, dtype: str = "float32") -> np.ndarray:
        if self.inputs == "numpy":
            return np.asarray(self.fn(probs, num_samples, seeds, offsets), dtype=np.int64)
        import torch

        tdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
        out = self.fn(
            to_torch(probs, self.device, tdtype),
            num_samples,
            seeds=to_torch(seeds, self.device, torch.int64),
            offsets=to_torch(offsets, self.device, torch.int64),
        )
        idx = out[1] if isinstance(out, (tuple, list)) else out
        return _to_numpy(idx).astype(np.int64).reshape(np.asarray(probs).shape[0], num_samples)


def reference_gumbel_fn(bugs=frozenset()):
    def fn(probs, num_samples, seeds, offsets):
        return mref.gumbel_sample(probs, seeds, offsets, num_samples, bugs)

    return fn


def reference_gumbel_sampler(bugs=frozenset(), name: str = "reference") -> GumbelSampler:
    return GumbelSampler(
        reference_gumbel_fn(bugs),
        name,
        "numpy",
        "cpu",
        f"float64 Gumbel-max on the kernel's Philox noise, bugs={sorted(bugs)}",
    )


def reference_grouped_gumbel_sampler(name: str = "reference-grouped") -> GumbelSampler:
    """fast_sample's float64 reference: the grouped race for one sample, the per-token top-n race
    otherwise (`reference.gumbel.fast_sample_reference`)."""

    def fn(probs, num_samples, seeds, offsets):
        return fast_sample_reference(probs, seeds, offsets, num_samples)[1]

    return GumbelSampler(
        fn,
        name,
        "numpy",
        "cpu",
        "float64 grouped race (one sample) on the kernel's Philox noise",
        noise="grouped",
    )


def specsample_gumbel_sampler(
    device: str = "auto", module: str = "specsample.kernels.gumbel"
) -> GumbelSampler:
    try:
        mod = importlib.import_module(module)
        fn = mod.fast_sample
    except (ImportError, AttributeError) as exc:
        raise SamplerUnavailable(f"{module}.fast_sample is not importable yet: {exc}") from exc

    def call(probs, num_samples, *, seeds, offsets):
        return fn(probs, num_samples, seeds=seeds, offsets=offsets)

    return GumbelSampler(
        call,
        "specsample",
        "torch",
        _torch_device(device),
        f"Triton kernel {module}.fast_sample",
        is_kernel=True,
        noise="grouped",
    )


def external_gumbel_sampler(fn: Callable, name: str, device: str = "auto", inputs=None) -> GumbelSampler:
    """A bare function with our `fast_sample` signature behind the protocol. Its seeded noise is what
    its `specsample_noise` attribute declares ("token", "grouped"); without one the draws come from a
    stream of its own and coupling_seeded is skipped."""
    inputs, device = external_inputs(fn, device, inputs)
    noise = getattr(fn, "specsample_noise", None)
    return GumbelSampler(fn, name, inputs, device, f"external function {name}", noise=noise)
