"""The mutant catalogue: planted bugs the certificates must kill ("the tester is tested").

Two mechanisms:
- kernel mutants: a textual patch of a Triton kernel module's source. `patched_module` asserts that
  the patched snippet occurs exactly once (a mutant can never silently become a no-op), writes the
  patched source to a temporary file and imports it under a new module name, so `triton.jit` sees
  real source. The mutant sampler calls the patched module's launcher.
- reference mutants: verify's own float64 sampler (`mutable_reference`) with one bug switched on, used
  where a kernel mutant is impractical or the kernel has not landed; the description says so.

`run_mutants` certifies every mutant at a budget and records, per mutant, whether it was killed and
by which certificates (law and case). The unmutated baseline must pass the same certificates, or a
kill would mean nothing; the result carries the baseline's verdict.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specsample.kernels._arrivals import discard_arrival_counters
from specsample.verify import mutable_reference as mref
from specsample.verify.protocol import (
    ChainSampler,
    SamplerUnavailable,
    mutable_sampler,
    reference_gumbel_sampler,
    specsample_gumbel_sampler,
    specsample_sampler,
)


@dataclass
class Mutant:
    """One planted bug: `build()` returns the mutated sampler (chain or gumbel family)."""

    name: str
    description: str
    family: str  # "chain" | "gumbel" | "logits"
    applied_to: str  # "kernel specsample.kernels.chain" | "reference copy (verify.mutable_reference)" ...
    build: Callable
    anchor: str = ""  # where the bug was seen in the field

    def result(self, killed: bool, killed_by: list, error: str, examples: list | None = None) -> MutantResult:
        """This mutant's verdict, under its name, description, family, target and anchor."""
        return MutantResult(
            self.name,
            self.description,
            self.family,
            self.applied_to,
            self.anchor,
            killed,
            killed_by,
            error,
            examples if examples is not None else [],
        )


@dataclass
class MutantResult:
    name: str
    description: str
    family: str
    applied_to: str
    anchor: str
    killed: bool
    killed_by: list = field(default_factory=list)
    error: str = ""
    examples: list = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


_PATCH_COUNTER = [0]


def patched_module(module_name: str, patches: list[tuple[str, str]]):
    """Import a copy of `module_name` with each (pattern, replacement) patch applied exactly once.

    `pattern` is a regular expression (tolerant of casts and spacing the kernel author may change);
    ValueError if it does not match exactly once in the module's source."""
    mod = importlib.import_module(module_name)
    src = inspect.getsource(mod)
    for pattern, replacement in patches:
        count = len(re.findall(pattern, src))
        if count != 1:
            raise ValueError(
                f"mutant patch for {module_name}: pattern occurs {count} times (need exactly 1): {pattern!r}"
            )
        src = re.sub(pattern, replacement, src)
    _PATCH_COUNTER[0] += 1
    new_name = f"{module_name}_mutant{_PATCH_COUNTER[0]}"
    tmpdir = Path(tempfile.mkdtemp(prefix="specsample_mutant_"))
    path = tmpdir / (new_name.replace(".", "_") + ".py")
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(new_name, path)
    new_mod = importlib.util.module_from_spec(spec)
    new_mod.__package__ = mod.__package__  # relative imports resolve as in the original
    sys.modules[new_name] = new_mod
    spec.loader.exec_module(new_mod)
    return new_mod


def _ref_chain(bug: str) -> Callable[[], ChainSampler]:
    return lambda: mutable_sampler({bug}, name=f"mutant:{bug}")


def _ref_gumbel(bug: str):
    return lambda: reference_gumbel_sampler({bug}, name=f"mutant:{bug}")


_ANCHORS = {
    "residual_from_p": "DESIGN.md §4 (classic rejection-sampling mistake)",
    "swapped_residual": "DESIGN.md §4",
    "unclamped_residual": "DESIGN.md §4",
    "inverse_cdf_off_by_one": "DESIGN.md §4",
    "reused_coin": "SGLang before #7207",
    "shared_column": "vLLM #47386, #54282",
    "norm_sum_zero_last_token": "SGLang Triton kernel",
    "norm_sum_zero_token0": "vLLM MRV1/MRV2",
    "le_accepts_zero_prob": "SGLang #35771",
    "acceptance_inverted": "stats.md §5 mutant table",
    "invalid_draft_accepted": "SGLang (q = -inf accepted), FlashInfer #879",
    "one_hot_residual_not_zeroed": "one-hot draft semantics (DESIGN.md §1)",
    "bonus_wrong_position": "ragged layouts (vLLM cu_num_draft_tokens)",
    "nan_not_sanitised": "vLLM #20531, #21876, #45060",
    "tile_tail_unmasked": "vLLM GHSA-8wr5-jm2h-8r4f",
    "philox_offset_ignored": "FlashInfer (randomness frozen across CUDA-graph replays)",
    "offset_int32_overflow": "vLLM #46560, #47383, #48055",
    "seed_index0": "FlashInfer (per-request seeds read at index 0)",
    "gumbel_p_times_E": "DESIGN.md §4",
    "gumbel_tile_tail": "vLLM GHSA-8wr5-jm2h-8r4f",
    "gumbel_noise_on_logits": "stats.md §5 mutant table",
    "kernel_le_accepts_zero_prob": "SGLang #35771",
    "kernel_accept_left_end": "docs/semantics.md (uniform cell midpoint)",
    "kernel_inverse_cdf_left_end": "verify --budget full, H200 run 16",
    "kernel_unclamped_residual": "DESIGN.md §4",
    "kernel_norm_sum_zero_last_token": "SGLang Triton kernel",
    "kernel_reused_coin": "SGLang before #7207",
    "kernel_bonus_wrong_position": "ragged layouts",
    "kernel_arrival_counter_kept": "persistent counters (kernels/_arrivals.py)",
    "kernel_gumbel_counter_kept": "persistent counters (kernels/_arrivals.py)",
    "kernel_grouped_uniform_from_e_word": "docs/semantics.md: u_g from words 1-2, E_g from word 0",
    "kernel_logits_group_uniform_from_e_word": "docs/semantics.md: u_g from words 1-2, E_g from word 0",
    "kernel_shared_column": "vLLM #47386",
    "kernel_offset_ignored": "FlashInfer (frozen randomness across CUDA-graph replays)",
    "kernel_offset_int32_overflow": "vLLM #46560",
    "kernel_nan_not_sanitised": "vLLM #20531",
    "greedy_at_T1": "SGLang #37134",
    "nan_logits_out_of_vocab": "vLLM #20531, #21876",
    "kernel_logits_nan_not_cleaned": "vLLM #20531, #45060",
}

# Kernel patches: (name, module, description, [(old, new), ...]). Each snippet must occur exactly once
# in the module's source, or building the mutant fails (and the mutant counts as not killed).
_CHAIN = "specsample.kernels.chain"
_GUMBEL = "specsample.kernels.gumbel"
_LOGITS = "specsample.kernels.logits"
KERNEL_PATCHES: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    (
        "kernel_le_accepts_zero_prob",
        _CHAIN,
        "chain kernel: acceptance tests u*q <= p and u <= p (a zero-probability draft is accepted at u = 0)",
        [  # SGLang compares the raw uniform (no cell midpoint) with <=
            (
                r"accept = ok & \(q_x > 0\.0\) & \(u_mid \* q_x < p_x\)",
                "accept = ok & (q_x > 0.0) & (u.to(tl.float64) * q_x <= p_x)",
            ),
            (r"accept = ok & \(u_mid < p_x\)", "accept = ok & (u.to(tl.float64) <= p_x)"),
        ],
    ),
    (
        "kernel_unclamped_residual",
        _CHAIN,
        "chain kernel: residual |p - q| instead of max(0, p - q)",
        [
            (
                r"r = p_j - tl\.minimum\(p32, q32\)\.to\(tl\.float64\)",
                "r = tl.abs(p_j - q32.to(tl.float64))",
            )
        ],
    ),
    (
        "kernel_norm_sum_zero_last_token",
        _CHAIN,
        "chain kernel: norm_sum == 0 emits token V - 1 (SGLang)",
        [
            (
                r"token = tl\.where\(valid & \(pick >= 0\), chunk \* BLOCK_V \+ pick, -1\)",
                "token = tl.where(fallback, V - 1, "
                "tl.where(valid & (pick >= 0), chunk * BLOCK_V + pick, -1))",
            )
        ],
    ),
    (
        "kernel_inverse_cdf_left_end",
        _CHAIN,
        "chain kernel: the inverse CDF at u_K instead of u_K + 2^-25 (u_K = 0 emits the first token with "
        "any mass; found by the full budget on the H200, run 16)",
        [
            (
                r"target = \(u_last\.to\(tl\.float64\) \+ UNIFORM_HALF_STEP\) \* total",
                "target = u_last.to(tl.float64) * total",
            )
        ],
    ),
    (
        "kernel_accept_left_end",
        _CHAIN,
        "chain kernel: acceptance compares u instead of u + 2^-25 (u = 0 accepts a draft of any positive "
        "ratio p / q, however small)",
        [
            (
                r"u_mid = u\.to\(tl\.float64\) \+ UNIFORM_HALF_STEP",
                "u_mid = u.to(tl.float64)",
            )
        ],
    ),
    (
        "kernel_reused_coin",
        _CHAIN,
        "chain kernel: the emitted token reuses the rejected draft's uniform u_a",
        [(r"u_last = _uniforms\(K, ", "u_last = _uniforms(tl.where(rejected, a, K), ")],
    ),
    (
        "kernel_bonus_wrong_position",
        _CHAIN,
        "chain kernel: the bonus token is drawn from p[K] instead of p[n_b]",
        [
            (
                r"p_row = p_ptr \+ \(rows \* sp_b \+ a \* sp_k\)\n",
                "p_row = p_ptr + (rows * sp_b + tl.where(rejected, a, K) * sp_k)\n",
            )
        ],
    ),
    (
        "kernel_shared_column",
        _CHAIN,
        "chain kernel: every column reads Philox index 0 (shared draft/residual noise)",
        [(r"index = cols \+ rows \* 0", "index = cols * 0 + rows * 0")],
    ),
    (
        "kernel_arrival_counter_kept",
        _CHAIN,
        "chain kernel: the last program does not reset its row block's arrival counter (the next call "
        "never emits)",
        [(r"tl\.atomic_xchg\(arrivals_ptr \+ pid_rows, 0,", "tl.atomic_add(arrivals_ptr + pid_rows, 0,")],
    ),
    (
        "kernel_gumbel_counter_kept",
        _GUMBEL,
        "fast_sample kernel: the last program does not reset its row block's arrival counter (the next "
        "call never merges its chunks: its outputs are never written)",
        [(r"tl\.atomic_xchg\(arrivals_ptr \+ row_block, 0,", "tl.atomic_add(arrivals_ptr + row_block, 0,")],
    ),
    (
        "kernel_grouped_uniform_from_e_word",
        _GUMBEL,
        "fast_sample kernel: the grouped race draws the token inside the winning group with a uniform "
        "built from E_g's own Philox word (the group's win and its inverse CDF become dependent)",
        [
            (
                r"tl\.where\(group == best\[:, None\], uniform52_from_words\(w1, w2\)",
                "tl.where(group == best[:, None], uniform52_from_words(w0, w2)",
            ),
            (
                r"_, w1, w2, _ = philox_words\(seed, offset, group, STREAM_GUMBEL_GROUP, seed \* 0\)\n"
                r"            u = uniform52_from_words\(w1, w2\)",
                "w0, w1, w2, _ = philox_words(seed, offset, group, STREAM_GUMBEL_GROUP, seed * 0)\n"
                "            u = uniform52_from_words(w0, w2)",
            ),
        ],
    ),
    (
        "kernel_logits_group_uniform_from_e_word",
        _LOGITS,
        "rejection_sample_logits kernel: the residual draw picks the token inside the winning group "
        "with a uniform built from E_g's own Philox word (the group's win and its inverse CDF become "
        "dependent)",
        [
            (
                r"u_g = uniform52_from_words\(words_g\[1\], words_g\[2\]\)",
                "u_g = uniform52_from_words(words_g[0], words_g[2])",
            ),
        ],
    ),
    (
        "kernel_offset_ignored",
        _CHAIN,
        "chain kernel: the Philox offset is not applied (frozen across replays)",
        [(r"philox_words\(seed, offset, ", "philox_words(seed, offset * 0, ")],
    ),
    (
        "kernel_offset_int32_overflow",
        _CHAIN,
        "chain kernel: offsets truncated to int32",
        [(r"(offset = tl\.load\(offset_ptr[^\n]*?)\.to\(tl\.int64\)", r"\1.to(tl.int32).to(tl.int64)")],
    ),
    (
        "kernel_nan_not_sanitised",
        _CHAIN,
        "chain kernel: NaN and +inf probabilities are not cleaned to zero mass",
        [
            (
                r"return tl\.where\(\(v > 0\.0\) & \(v <= 3\.4028234663852886e38\), v, 0\.0\)",
                "return tl.where(v < 0.0, 0.0, v)",
            )
        ],
    ),
    (
        "kernel_logits_nan_not_cleaned",
        _LOGITS,
        "rejection_sample_logits kernel: a statistics chunk whose sum comes out NaN is never read again "
        "through the NaN / inf clean, so NaN and +inf logits reach the statistics",
        [(r"return tl\.max\(bad, axis=0\) > 0", "return tl.max(bad, axis=0) > 1")],
    ),
    (
        "kernel_logits_lazy_accepted_as_rejected",
        _LOGITS,
        "rejection_sample_logits kernel: the lazy statistics pass takes drafts the accept kernel accepts "
        "for certainly rejected, so it skips rows (after them) that the accept kernel then uses",
        [
            (
                r"reject_sampled = \(d_x == _NEG_INF\) \| \(u > ratio \* _LAZY_MARGIN\)",
                "reject_sampled = (d_x == _NEG_INF) | (u < ratio * _LAZY_MARGIN)",
            ),
            (
                r"reject_sampled = u > p_x \* _LAZY_MARGIN",
                "reject_sampled = u < p_x * _LAZY_MARGIN",
            ),
        ],
    ),
    (
        "kernel_logits_tail_emits_before_prefix",
        _LOGITS,
        "rejection_sample_logits kernel, one-hot drafts: the statistics pass's tail takes a request's emit "
        "position as fixed at its first decided row, before the rows before it are decided (a draft "
        "accepted at position 0 emits the bonus token, whatever the later drafts)",
        [(r"return j, \(word\.to\(tl\.int64\) & prefix\) == prefix", "return j, word != 0")],
    ),
]


def catalogue(include_kernel: bool = True) -> list[Mutant]:
    """Every mutant: reference-copy mutants for all chain and gumbel bugs, plus kernel mutants."""
    out = []
    reference_copy = "reference copy (verify.mutable_reference)"
    for family, bugs, factory in (
        ("chain", mref.CHAIN_BUGS, _ref_chain),
        ("gumbel", mref.GUMBEL_BUGS, _ref_gumbel),
    ):
        for bug, desc in bugs.items():
            out.append(Mutant(bug, desc, family, reference_copy, factory(bug), _ANCHORS.get(bug, "")))
    from specsample.verify import logits_family

    for bug, desc in logits_family.LOGITS_BUGS.items():
        out.append(
            Mutant(
                bug,
                desc,
                "logits",
                "reference copy (verify.logits_family)",
                logits_family.mutant_factory(bug),
                _ANCHORS.get(bug, ""),
            )
        )
    if include_kernel:
        for name, module, desc, patches in KERNEL_PATCHES:
            family = module.rsplit(".", 1)[1] if module != _CHAIN else "chain"

            def build(module=module, patches=patches, name=name, family=family):
                mod = patched_module(module, patches)
                if family == "gumbel":
                    s = specsample_gumbel_sampler("auto", mod.__name__)
                elif family == "logits":
                    from specsample.verify.logits_family import specsample_logits_sampler

                    s = specsample_logits_sampler("auto", mod.__name__)
                else:
                    s = specsample_sampler("auto", mod.__name__)
                s.name = f"mutant:{name}"
                return s

            out.append(
                Mutant(name, desc, family, f"kernel {module} (textual patch)", build, _ANCHORS.get(name, ""))
            )
    return out


class _Killed(Exception):
    pass


def _stop_on_fail(rec):
    if not rec.passed:
        raise _Killed(rec)


def run_mutants(
    budget,
    *,
    only=None,
    case_filter=None,
    kernel_case_filter=None,
    progress=None,
    salt: int = 0,
    stop_at_first_kill: bool = False,
    include_kernel: bool = True,
    select=None,
    baseline: bool = True,
):
    """Certify each mutant at `budget`; returns (list[MutantResult], baseline records).

    Every mutant runs every certificate (killed_by lists every law that failed) unless
    `stop_at_first_kill`. Kernel mutants run under the interpreter on the CPU, so they use
    `kernel_case_filter` (default: DEFAULT_KERNEL_MUTANT_CASES); the baseline for them is the
    unmutated kernel, certified by `make verify` itself. `only` keeps the mutants whose name
    contains one of its strings, `select(mutant)` those it returns True for (given both, a
    mutant must pass both); `baseline=False` skips the unmutated references' certificates (returns []
    for them), for a caller that certifies them once and runs the catalogue in parts."""
    from specsample.verify import logits_family, runner

    if kernel_case_filter is None:
        kernel_case_filter = lambda case: case.name in DEFAULT_KERNEL_MUTANT_CASES  # noqa: E731
    results = []
    base = []
    if baseline:
        base = runner.certify_sampler_family(
            "chain", mutable_sampler(name="verify-baseline"), budget, case_filter=case_filter, salt=salt
        )
        base += runner.certify_sampler_family(
            "gumbel",
            reference_gumbel_sampler(name="gumbel-baseline"),
            budget,
            case_filter=case_filter,
            salt=salt,
        )
        base += logits_family.certify_logits(logits_family.mutable_logits_sampler(), budget, salt=salt)
    for m in catalogue(include_kernel):
        if only and not any(tok in m.name for tok in only):
            continue
        if select is not None and not select(m):
            continue
        kernel = m.applied_to.startswith("kernel")
        try:
            sampler = m.build()
        except (SamplerUnavailable, ValueError, ImportError, AttributeError) as exc:
            results.append(m.result(False, [], f"could not build: {exc}"))
            if progress:
                progress(m.name, False)
            continue
        stop = stop_at_first_kill
        recs = []

        def collect(rec, recs=recs, stop=stop):
            recs.append(rec)
            if stop:
                _stop_on_fail(rec)

        if kernel:  # each kernel mutant starts from zeroed arrival counters and leaves none behind
            discard_arrival_counters()
        try:
            if m.family == "logits":
                for rec in logits_family.certify_logits(sampler, budget, salt=salt):
                    collect(rec)
            else:
                runner.certify_sampler_family(
                    m.family,
                    sampler,
                    budget,
                    salt=salt,
                    progress=collect,
                    case_filter=kernel_case_filter if kernel else case_filter,
                )
        except _Killed:
            pass
        finally:
            if kernel:
                discard_arrival_counters()
        failed = [r for r in recs if not r.passed]
        killed_by = sorted({r.law for r in failed})
        examples = [f"{r.law} on {r.case}: {(r.detail or r.statement)[:160]}" for r in failed[:3]]
        results.append(m.result(bool(failed), killed_by, "" if failed else "survived", examples))
        if progress:
            progress(m.name, bool(failed))
    return results, base


# Cases kernel mutants run on (interpreter time): classic, one-hot, the fallback path, ragged counts.
DEFAULT_KERNEL_MUTANT_CASES = (
    "dirichlet1_V8_K2",
    "dirichlet0.5_V31_K2_onehot",
    "p_equals_q_V12_K2",
    "ragged_V12_K3_n1",
)
