"""Adversarial input corpus for every public kernel: out-of-range ids (-1, V, 2^31-1, -2^31), NaN /
inf / negative / all-zero rows, V = 1 and tile-boundary vocabularies, ragged counts outside [0, K],
stride-0 broadcasts, bf16/fp16, K = 0, B = 0, per-row temperatures (0, tiny, inf, negative, NaN) and a
1-element temperature tensor. Run under `compute-sanitizer --tool memcheck` (ci/gpu/sanitize.sh) it
must report 0 errors; on its own it also checks that every emitted id lies in [-1, V), that `valid`
is exactly "emitted token != -1", that softmax outputs are finite, and writes the table of what each
bad input gets to $OUT/fuzz_table.json (rendered into docs/reliability.md by
tests/reliability/reliability_table.py). Works on CUDA, and on CPU under TRITON_INTERPRET=1
(`--device cpu`, smaller corpus).

The 1-element temperature tensor of sample_from_logits / renorm_draft_probs is the input of an
out-of-bounds read found on CPU by tests/reliability (fixed in c1f948d, kept as a regression case).
"""

from __future__ import annotations

import argparse
import json
import os

import torch

import specsample as ss
from specsample.kernels._launch import H200_SMS

BAD_IDS = {"-1": -1, "V": None, "2^31-1": 2**31 - 1, "-2^31": -(2**31)}
KINDS = ["ok", "nan_row", "zero_row", "inf_entry", "negative_entries", "mass_in_last_lane"]


def _probs(kind: str, shape, dtype, device, gen):
    x = torch.rand(*shape, generator=gen, device=device, dtype=torch.float32) + 1e-3
    x = x / x.sum(-1, keepdim=True)
    if kind == "nan_row":
        x[..., :] = float("nan")
    elif kind == "zero_row":
        x.zero_()
    elif kind == "inf_entry":
        x[..., 0] = float("inf")
    elif kind == "negative_entries":
        x[..., ::2] = -0.5
    elif kind == "mass_in_last_lane":
        x.zero_()
        x[..., -1] = 1.0
    return x.to(dtype)


def cases(device: str, small: bool, vocabs: list[int] | None = None):
    """The full corpus puts one bad id at a time into rows 0 and 1; the small one (CPU) puts all four
    at once, one per row ("mixed"), so it is 4x smaller. `vocabs` replaces the vocabulary sizes (e.g.
    4097 and 8200 for the GPU stats passes' unmasked chunks, which need a 4096-column chunk inside V)."""
    vocabs = vocabs or ([1, 7, 1023, 1024, 1025, 4097] if not small else [1, 7, 33, 1025])
    ids = {"mixed": None} if small else BAD_IDS
    for V in vocabs:
        for kind in KINDS:
            for id_name, bad in ids.items():
                for dtype in (torch.float32, torch.bfloat16):
                    yield dict(V=V, kind=kind, ids=id_name, bad=V if bad is None else bad, dtype=dtype)


def _check_ids(name, t, V):
    t = t.long()
    bad = ((t < -1) | (t >= V)).sum().item()
    if bad:
        raise AssertionError(f"{name}: {bad} ids outside [-1, {V})")


def _summary(name, r, V) -> dict:
    """Counts of what the op did, plus the first two columns of tokens; checks valid == (emitted != -1)."""
    _check_ids(name, r.tokens, V)
    emitted = r.tokens.long().gather(1, r.num_accepted.long()[:, None])[:, 0]
    if not torch.equal(emitted >= 0, r.valid):
        raise AssertionError(f"{name}: valid is not 'emitted token != -1'")
    return dict(valid=int(r.valid.sum()), fallback=int(r.fallback.sum()), accepted=r.num_accepted.tolist(),
                tokens=r.tokens[:, :2].tolist())  # fmt: skip


def _finite_softmax(name, probs):
    if not bool(torch.isfinite(probs).all()):
        raise AssertionError(f"{name}: non-finite probabilities")


def run_case(c, device, gen):
    B, K, V, dtype = 4, 3, c["V"], c["dtype"]
    out = {}
    p = _probs(c["kind"], (B, K + 1, V), dtype, device, gen)
    q = _probs("ok", (B, K, V), dtype, device, gen)
    ids = torch.randint(0, V, (B, K), generator=gen, device=device)
    if c["ids"] == "mixed":
        for row, bad in enumerate((-1, V, 2**31 - 1, -(2**31))):
            ids[row, row % K] = bad
    else:
        ids[0, 0] = c["bad"]
        ids[1, 1] = c["bad"]
    n = torch.tensor([0, K, -3, K + 5], device=device)
    seeds = torch.arange(B, device=device, dtype=torch.int64) + 2**40
    offsets = torch.full((B,), 2**33 - 1, device=device, dtype=torch.int64)
    for label, kwargs in (
        ("chain_classic", dict(draft_probs=q)),
        ("chain_onehot", dict()),
        ("chain_classic_ragged", dict(draft_probs=q, num_draft_tokens=n)),
        ("chain_broadcast", dict(draft_probs=q[:1].expand(B, K, V))),
        ("chain_int32_ids", dict(draft_probs=q)),
    ):
        x = ids.int() if label == "chain_int32_ids" else ids
        r = ss.chain_rejection_sample(p, x, seeds=seeds, offsets=offsets, **kwargs)
        out[label] = _summary(label, r, V)
    # K = 0: the bonus row only
    r = ss.chain_rejection_sample(p[:, :1], ids[:, :0], q[:, :0], seeds=seeds, offsets=offsets)
    out["chain_k0"] = _summary("chain_k0", r, V)

    logits = torch.log(p.float().clamp_min(0)).to(dtype)
    if c["kind"] == "nan_row":
        logits = p  # NaN logits
    temp = torch.tensor([0.0, 0.7, 1.0, 2.0], device=device)
    odd_temp = torch.tensor([1e-30, float("inf"), -1.0, float("nan")], device=device)
    draft_logits = torch.log(q.float()).to(dtype)
    for label, dl, t, nd in (
        ("logits_classic", draft_logits, temp, None),
        ("logits_onehot", None, temp, None),
        ("logits_classic_ragged", draft_logits, temp, n),
        ("logits_odd_temperatures", draft_logits, odd_temp, None),
    ):
        r = ss.rejection_sample_logits(logits, ids, dl, temperature=t, seeds=seeds, offsets=offsets,
                                       num_draft_tokens=nd)  # fmt: skip
        out[label] = _summary(label, r, V)

    for ns in (1, 2, 5):
        sp, si = ss.fast_sample(p[:, 0], num_samples=ns, seeds=seeds, offsets=offsets)
        _check_ids(f"fast_sample_n{ns}", si, V)
        out[f"fast_sample_n{ns}"] = si.tolist()
        if ns == 1:
            first = si
    # the same 4 rows and keys repeated until the batch has >= 4 x 132 tiles of 1024 tokens, where the
    # grouped race draws its token in the merge on a GPU instead of in every chunk (B = 4 here):
    # every copy must return the B = 4 ids
    reps = -(-4 * H200_SMS // (B * -(-V // 1024)))
    _, si = ss.fast_sample(p[:, 0].repeat(reps, 1), seeds=seeds.repeat(reps), offsets=offsets.repeat(reps))
    _check_ids("fast_sample_large_batch", si, V)
    if not torch.equal(si.view(reps, B, 1), first.expand(reps, B, 1)):
        raise AssertionError("fast_sample_large_batch: a repeated row's id differs from the B = 4 call's")
    out["fast_sample_large_batch"] = si[:B].tolist()
    temps = torch.tensor([0.0, 0.5, 1.0, 3.0], device=device)
    row_logits = torch.log(p[:, 0].float())
    probs_out = torch.empty(B, V, device=device)
    tok = ss.sample_from_logits(row_logits, temps, seeds=seeds, offsets=offsets, probs_out=probs_out)
    _check_ids("sample_from_logits", tok, V)
    _finite_softmax("sample_from_logits probs_out", probs_out)
    out["sample_from_logits"] = tok.tolist()
    renorm = ss.renorm_draft_probs(draft_logits, temps)
    _finite_softmax("renorm_draft_probs", renorm)
    out["renorm_draft_probs"] = dict(rows=B * K, with_mass=int((renorm.sum(-1) > 0).sum()))
    # a 1-element temperature tensor (documented; an out-of-bounds read before c1f948d)
    one_t = torch.tensor([0.7], device=device)
    tok = ss.sample_from_logits(row_logits, one_t, seeds=seeds, offsets=offsets)
    _check_ids("sample_from_logits_1elem_T", tok, V)
    out["sample_from_logits_1elem_T"] = tok.tolist()
    renorm = ss.renorm_draft_probs(draft_logits, one_t)
    _finite_softmax("renorm_draft_probs_1elem_T", renorm)
    out["renorm_draft_probs_1elem_T"] = dict(rows=B * K, with_mass=int((renorm.sum(-1) > 0).sum()))
    return out


def empty_batch(device) -> dict:
    """B = 0 for every op: empty outputs of the right shapes, no launch."""
    z, s = torch.zeros, torch.zeros(0, dtype=torch.int64, device=device)
    res = {}
    r = ss.chain_rejection_sample(z(0, 4, 7, device=device), z(0, 3, dtype=torch.int64, device=device),
                                  seeds=s, offsets=s)  # fmt: skip
    res["chain"] = list(r.tokens.shape)
    r = ss.rejection_sample_logits(z(0, 4, 7, device=device), z(0, 3, dtype=torch.int64, device=device),
                                   temperature=z(0, device=device), seeds=s, offsets=s)  # fmt: skip
    res["logits"] = list(r.tokens.shape)
    res["fast_sample"] = list(ss.fast_sample(z(0, 7, device=device), 2, seeds=s, offsets=s)[1].shape)
    res["sample_from_logits"] = list(
        ss.sample_from_logits(z(0, 7, device=device), 1.0, seeds=s, offsets=s).shape
    )
    res["renorm_draft_probs"] = list(ss.renorm_draft_probs(z(0, 3, 7, device=device), 1.0).shape)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--vocabs", default="", help="comma-separated vocabulary sizes (default: the corpus's)")
    args = ap.parse_args()
    vocabs = [int(v) for v in args.vocabs.split(",") if v]
    gen = torch.Generator(device=args.device).manual_seed(1)
    table, launched = [], 0
    for c in cases(args.device, args.small or args.device == "cpu", vocabs):
        res = run_case(c, args.device, gen)
        launched += len(res)
        table.append({**{k: str(v) for k, v in c.items() if k != "bad"}, "result": res})
    table.append({"V": "7", "kind": "empty batch (B = 0)", "ids": "-", "dtype": "torch.float32",
                  "result": empty_batch(args.device)})  # fmt: skip
    if args.device == "cuda":
        torch.cuda.synchronize()
    checks = "all ids in [-1, V), valid == (token != -1), softmax outputs finite"
    print(f"fuzz corpus: {len(table)} cases, {launched} op calls, {checks}")
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fuzz_table.json"), "w") as f:
        json.dump(table, f)


if __name__ == "__main__":
    main()
