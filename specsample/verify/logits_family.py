"""Certificates for logits-space rejection samplers (`rejection_sample_logits` signature).

A logits sampler is fn(target_logits [B, K+1, V], draft_token_ids [B, K], draft_logits [B, K, V] | None,
*, temperature [B], seeds [B], offsets [B], num_draft_tokens [B] | None) -> SampleResult.
Laws: coupling_seeded (token for token against `specsample.reference.logits` on the same Philox
stream, rows flagged ambiguous by the reference excluded), greedy (deterministic: T = 0 rows accept
x iff x = argmax and emit the argmax, mixed with sampled rows in one batch), conditional (designed GOF
of the joint (a, token) law at T = 0.7 and 1.5 against `reference.logits.output_law`), and once per
sampler edge (deterministic: non-finite logits, rows without mass, invalid ids and temperatures,
ragged counts), determinism and batch_invariance (`verify/logits_edges.py`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from specsample.reference.logits import output_law, rejection_sample_logits_reference, softmax_logits
from specsample.verify import logits_edges as E
from specsample.verify import stats_bridge as sb
from specsample.verify.budgets import Budget
from specsample.verify.cases import case_rng, round_to_dtype
from specsample.verify.certify import (
    CertRecord,
    GofTally,
    _fmt,
    budget_gof,
    case_free,
    gof_rows,
    law_seed,
    seeded_coupling_record,
)
from specsample.verify.exact_laws import counts_from_outputs
from specsample.verify.protocol import (
    SamplerUnavailable,
    _torch_device,
    as_chain_output,
    external_inputs,
    to_torch,
)

LOGITS_BUGS = {
    "greedy_at_T1": "greedy rows (temperature 0) are sampled at temperature 1 (SGLang #37134)",
    "nan_logits_out_of_vocab": "a sampled row whose emitting logits hold a NaN emits id V, outside the "
    "vocabulary (vLLM #20531, #21876)",
}


OWN_STREAM = (
    "the sampler draws from a stream of its own (no specsample_noise = 'specsample' declared): nothing "
    "to couple with; greedy and conditional certify its law"
)


@dataclass
class LogitsSampler:
    """A logits sampler behind the protocol. `noise` is "specsample" when its seeded path draws our
    Philox stream (docs/semantics.md), which coupling_seeded compares with token for token, or None
    for a stream of its own (coupling_seeded is skipped, the laws still apply)."""

    fn: object
    name: str
    inputs: str = "numpy"
    device: str = "cpu"
    is_kernel: bool = False
    noise: str | None = "specsample"

    def __post_init__(self):
        if self.noise not in ("specsample", None):
            raise ValueError(
                f"LogitsSampler {self.name}: noise must be 'specsample' or None; got {self.noise!r}"
            )

    def __call__(self, lg, ids, dl, temperature, seeds, offsets, n=None, dtype="float32"):
        """The sampler on numpy inputs; a torch sampler gets the logits as `dtype` tensors (the case's
        values are exact in it), a numpy one their float64 values."""
        if self.inputs == "numpy":
            res = self.fn(
                lg, ids, dl, temperature=temperature, seeds=seeds, offsets=offsets, num_draft_tokens=n
            )
            return as_chain_output(res)
        import torch

        d = self.device
        logit_dtype = getattr(torch, dtype)
        kw = {} if n is None else {"num_draft_tokens": to_torch(n, d, torch.int64)}
        res = self.fn(
            to_torch(lg, d, logit_dtype),
            to_torch(ids, d, torch.int64),
            None if dl is None else to_torch(dl, d, logit_dtype),
            temperature=to_torch(temperature, d, torch.float32),
            seeds=to_torch(seeds, d, torch.int64),
            offsets=to_torch(offsets, d, torch.int64),
            **kw,
        )
        return as_chain_output(res)


def _reference_fn(bugs=frozenset()):
    def fn(lg, ids, dl, *, temperature, seeds, offsets, num_draft_tokens=None):
        t = np.asarray(temperature, np.float64)
        if "greedy_at_T1" in bugs:
            t = np.where(t == 0, 1.0, t)
        res = rejection_sample_logits_reference(
            lg, ids, dl, temperature=t, seeds=seeds, offsets=offsets, num_draft_tokens=num_draft_tokens
        )
        if "nan_logits_out_of_vocab" in bugs:
            lg = np.asarray(lg)
            rows = np.arange(lg.shape[0])
            a = res.num_accepted.astype(np.int64)
            nan_row = np.isnan(lg[rows, a]).any(axis=1) & (t > 0) & (t < np.inf)
            tokens = res.tokens.copy()
            tokens[rows[nan_row], a[nan_row]] = lg.shape[2]
            res = res._replace(tokens=tokens)
        return res

    return fn


def mutable_logits_sampler(bugs=frozenset(), name="logits-reference") -> LogitsSampler:
    return LogitsSampler(_reference_fn(frozenset(bugs)), name)


def mutant_factory(bug: str):
    return lambda: mutable_logits_sampler({bug}, name=f"mutant:{bug}")


def specsample_logits_sampler(device="auto", module="specsample.kernels.logits") -> LogitsSampler:
    try:
        fn = importlib.import_module(module).rejection_sample_logits
    except (ImportError, AttributeError) as exc:
        raise SamplerUnavailable(f"{module}.rejection_sample_logits is not importable yet: {exc}") from exc
    return LogitsSampler(fn, "specsample", "torch", _torch_device(device), True)


def external_logits_sampler(fn, name: str, device="auto", inputs=None) -> LogitsSampler:
    """A bare function with our `rejection_sample_logits` signature behind the protocol (torch inputs
    unless `inputs` or its `specsample_inputs` says "numpy"; its `specsample_noise` attribute declares
    "specsample" when it draws our Philox stream)."""
    inputs, device = external_inputs(fn, device, inputs)
    return LogitsSampler(fn, name, inputs, device, noise=getattr(fn, "specsample_noise", None))


def logits_cases():
    """(name, target logits [K+1, V], draft logits [K, V] or None, drafts [K], dtype): float64 arrays of
    values exact in `dtype`, the logits' dtype a torch sampler is called with."""
    out = []
    for vocab, k, classic in ((10, 2, True), (33, 3, False), (17, 2, True)):
        name = f"logits_V{vocab}_K{k}_{'classic' if classic else 'onehot'}"
        rng = case_rng(name)
        lg = round_to_dtype(rng.normal(0, 2, (k + 1, vocab)), "float32")
        dl = round_to_dtype(lg[:k] + rng.normal(0, 1, (k, vocab)), "float32") if classic else None
        drafts = rng.integers(0, vocab, k)
        drafts[0] = int(np.argmax(lg[0]))  # a greedy row accepts draft 0
        out.append((name, lg, dl, drafts, "float32"))
    # mass on eight tokens in three groups of 256 (the residual draw's unit; the last group partial),
    # -inf logits elsewhere: the cases where the draw's group-level race decides the law. In bfloat16
    # too, classic and one-hot: 16-bit logits take their own kernel paths (a stats tile loaded ahead;
    # classic drafts: the race over p in the merge), and 700 columns are two stats tiles on the GPU
    for suffix, dtype, classic in (("classic", "float32", True), ("classic_bf16", "bfloat16", True),
                                   ("onehot_bf16", "bfloat16", False)):  # fmt: skip
        name = f"logits_three_groups_V700_K2_{suffix}"
        rng = case_rng(name)
        support = np.array([3, 100, 256, 300, 511, 512, 650, 699])
        lg = np.full((3, 700), -np.inf)
        dl = np.full((2, 700), -np.inf)
        lg[:, support] = round_to_dtype(rng.normal(0, 1.5, (3, support.size)), dtype)
        dl[:, support] = round_to_dtype(lg[:2, support] + rng.normal(0, 1, (2, support.size)), dtype)
        drafts = support[rng.integers(0, support.size, 2)]
        drafts[0] = int(np.argmax(lg[0]))
        out.append((name, lg, dl if classic else None, drafts, dtype))
    # K + 1 = 17 positions, one past what the statistics pass decides itself (the kernel's tail holds a
    # request's decisions in one word, K + 1 <= 16): longer chains take the lazy pass's screen and the
    # accept kernel. Draft rows close to the target and a drafted id favoured by 3 nats keep the chain
    # accepting, so the later positions are reached
    for classic in (True, False):
        name = f"logits_V9_K16_{'classic' if classic else 'onehot'}"
        rng = case_rng(name)
        k = 16
        drafts = rng.integers(0, 9, k)
        lg = rng.normal(0, 1.5, (k + 1, 9))
        lg[np.arange(k), drafts] += 3.0
        lg = round_to_dtype(lg, "float32")
        dl = round_to_dtype(lg[:k] + rng.normal(0, 0.3, (k, 9)), "float32") if classic else None
        out.append((name, lg, dl, drafts, "float32"))
    return out


COUPLING_WIDE_ROWS = 65_536  # coupling rows of a case with (K+1) V > 1024 (the three-groups case)


def certify_logits_coupling(sampler, case, budget: Budget, salt=0) -> CertRecord:
    """Seeded coupling with the float64 reference. The reference materialises [rows, K+1, V] float64
    log-probabilities, so a wide case ((K+1) V > 1024) runs at most COUPLING_WIDE_ROWS rows (the
    full budget's 1,048,576 rows would need ~17 GB per array at V = 700); the record states n."""
    name, lg, dl, drafts, dtype = case
    if sampler.noise is None:
        return CertRecord(sampler.name, name, "coupling_seeded", "skip", OWN_STREAM)
    seed = law_seed(name, "coupling_seeded", salt)
    rng = np.random.default_rng(seed)
    rows = budget.seeded_rows if lg.size <= 1024 else min(budget.seeded_rows, COUPLING_WIDE_ROWS)
    temps = rng.choice([0.0, 0.5, 1.0, 1.7], rows)
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = rng.integers(0, 1 << 40, rows, dtype=np.int64)
    k = lg.shape[0] - 1
    ids = np.where(rng.random((rows, k)) < 0.5, drafts, rng.integers(0, lg.shape[1], (rows, k)))
    L = np.broadcast_to(lg, (rows, *lg.shape))
    D = None if dl is None else np.broadcast_to(dl, (rows, *dl.shape))
    out = sampler(L, ids, D, temps, seeds, offsets, dtype=dtype)
    ref = rejection_sample_logits_reference(L, ids, D, temperature=temps, seeds=seeds, offsets=offsets)
    mism = (
        np.any(out.tokens != ref.tokens, axis=1)
        | (out.num_accepted != ref.num_accepted)
        | (out.valid != ref.valid)
    )
    hard = mism & ~ref.ambiguous
    ucb = sb.tv_ucb_from_coupling(int(mism.sum()), rows, budget.coupling_delta)
    stmt = (
        f"seeded path equals reference.logits on the same Philox stream (T in 0, 0.5, 1, 1.7): "
        f"{int(mism.sum())} mismatches in {rows} rows ({int(hard.sum())} outside float tolerance)"
    )

    def describe(b: int) -> str:
        return f"e.g. T={temps[b]}: sampler {out.tokens[b].tolist()} vs reference {ref.tokens[b].tolist()}"

    return seeded_coupling_record(sampler.name, name, stmt, rows, hard, ucb, seed, describe)


def certify_greedy(sampler, case, budget: Budget, salt=0) -> CertRecord:
    """T = 0 rows, mixed with T = 1 rows: exact greedy semantics."""
    name, lg, dl, drafts, dtype = case
    rng = case_rng(f"{name}/greedy", salt)
    rows = 256
    k, vocab = lg.shape[0] - 1, lg.shape[1]
    temps = np.where(np.arange(rows) % 2 == 0, 0.0, 1.0)
    arg = np.argmax(lg, axis=1)
    ids = np.where(rng.random((rows, k)) < 0.7, arg[:k], rng.integers(0, vocab, (rows, k)))
    seeds = rng.integers(0, 1 << 62, rows, dtype=np.int64)
    offsets = rng.integers(0, 1 << 40, rows, dtype=np.int64)
    L = np.broadcast_to(lg, (rows, *lg.shape))
    D = None if dl is None else np.broadcast_to(dl, (rows, *dl.shape))
    out = sampler(L, ids, D, temps, seeds, offsets, dtype=dtype)
    g = temps == 0
    match = ids == arg[None, :k]
    want_a = np.cumprod(match, axis=1).sum(axis=1)
    errs = []
    if np.any(out.num_accepted[g] != want_a[g]):
        errs.append("greedy rows: accepted count differs from 'accept iff x == argmax'")
    emitted = out.tokens[np.arange(rows), np.clip(out.num_accepted, 0, k)]
    if np.any(emitted[g] != arg[np.clip(out.num_accepted[g], 0, k)]):
        errs.append("greedy rows: emitted token is not the argmax of its row")
    stmt = "temperature-0 rows are exactly greedy (accept iff x = argmax, emit the argmax) in a mixed batch"
    return CertRecord(
        sampler.name, name, "greedy", "fail" if errs else "pass", stmt, int(g.sum()), detail="; ".join(errs)
    )


def certify_logits_conditional(sampler, case, budget: Budget, salt=0) -> CertRecord:
    name, lg, dl, drafts, dtype = case
    k, vocab = lg.shape[0] - 1, lg.shape[1]
    tally, parts, total_rows = GofTally(), [], 0
    seed = law_seed(name, "conditional", salt)
    temps = (0.7, 1.5) if budget.eps <= 0.04 else ((0.7,) if k % 2 else (1.5,))  # interpreter: one T per case
    for temp in temps:
        p = softmax_logits(lg, temp)
        q = None if dl is None else softmax_logits(dl, temp)
        law = output_law(p, drafts, q)
        rows = gof_rows(law, budget)
        seeds = np.full(rows, seed, np.int64)
        offsets = (1 << 32) - rows // 2 + np.arange(rows, dtype=np.int64)
        out = sampler(
            np.broadcast_to(lg, (rows, *lg.shape)),
            np.broadcast_to(drafts, (rows, k)),
            None if dl is None else np.broadcast_to(dl, (rows, *dl.shape)),
            np.full(rows, temp),
            seeds,
            offsets,
            dtype=dtype,
        )
        counts = counts_from_outputs(out.tokens, out.num_accepted, vocab, k)
        g = budget_gof(counts.ravel(), law.ravel(), budget, f"{name} T={temp}", seed)
        tally.add(f"T={temp}", g)
        parts.append(f"T={temp}: n={rows}, p={_fmt(g.pvalue)}")
        total_rows += rows
    stmt = f"joint (a, token) law at T in {temps}, alpha={budget.alpha:g} each: " + "; ".join(parts)
    return tally.record(sampler.name, name, "conditional", stmt, budget, seed, n=total_rows)


LOGITS_LAWS = {
    "coupling_seeded": certify_logits_coupling,
    "greedy": certify_greedy,
    "conditional": certify_logits_conditional,
}


LOGITS_GLOBAL = {  # case-independent (inputs of their own): run once per sampler
    "edge": case_free(E.certify_logits_edges),
    "determinism": case_free(E.certify_logits_determinism),
    "batch_invariance": case_free(E.certify_logits_batch_invariance),
}


def _wanted(law: str, key: str, laws, only) -> bool:
    return (laws is None or law in laws) and (not only or any(tok in key for tok in only))


def certify_logits(
    sampler, budget: Budget, *, salt: int = 0, only=None, laws=None, progress=None
) -> list[CertRecord]:
    """Every logits certificate of `sampler`, each passed to `progress` as soon as it finishes (so a
    run's per-certificate lines, its streamed partial report and its --max-seconds check come between
    certificates, not after the whole family: GPU run 257 saw none of them for 330 s)."""
    recs = []

    def done(rec):
        recs.append(rec)
        if progress is not None:
            progress(rec)

    for law, fn in LOGITS_GLOBAL.items():
        case = E.LOGITS_GLOBAL_CASE[law]
        if _wanted(law, f"{sampler.name}/{case}/{law}", laws, only):
            done(_run(law, fn, sampler, (case,), budget, salt))
    for case in logits_cases():
        for law, fn in LOGITS_LAWS.items():
            if _wanted(law, f"{sampler.name}/{case[0]}/{law}", laws, only):
                done(_run(law, fn, sampler, case, budget, salt))
    return recs


def _run(law, fn, sampler, case, budget, salt):
    import time

    t0 = time.perf_counter()
    try:
        rec = fn(sampler, case, budget, salt)
    except Exception as exc:  # noqa: BLE001 - a crash is a finding
        rec = CertRecord(
            sampler.name, case[0], law, "error", f"raised {type(exc).__name__}: {str(exc)[:300]}"
        )
    rec.seconds = time.perf_counter() - t0
    return rec
