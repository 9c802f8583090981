"""Adversarial input corpus for every public kernel: out-of-range ids (-1, V, 2^31-1, -2^31), NaN /
inf / negative / all-zero rows, V = 1 and tile-boundary vocabularies, ragged counts outside [0, K],
stride-0 broadcasts, bf16/fp16. Run under `compute-sanitizer --tool memcheck` (ci/gpu/sanitize.sh) it
must report 0 errors; on its own it also checks that every emitted id lies in [-1, V) and writes the
table of what each bad input gets to $OUT/fuzz_table.json. Works on CUDA, and on CPU under
TRITON_INTERPRET=1 (`--device cpu`, smaller corpus).
"""

from __future__ import annotations

import argparse
import json
import os

import torch

import specsample as ss

BAD_IDS = {"-1": -1, "V": None, "2^31-1": 2**31 - 1, "-2^31": -(2**31)}


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


def cases(device: str, small: bool):
    vocabs = [1, 7, 1023, 1024, 1025, 4097] if not small else [1, 7, 33]
    kinds = ["ok", "nan_row", "zero_row", "inf_entry", "negative_entries", "mass_in_last_lane"]
    for V in vocabs:
        for kind in kinds:
            for id_name, bad in BAD_IDS.items():
                for dtype in (torch.float32, torch.bfloat16):
                    yield dict(V=V, kind=kind, ids=id_name, bad=V if bad is None else bad, dtype=dtype)


def _check_ids(name, t, V):
    t = t.long()
    bad = ((t < -1) | (t >= V)).sum().item()
    if bad:
        raise AssertionError(f"{name}: {bad} ids outside [-1, {V})")


def _summary(r) -> dict:
    return dict(tokens=r.tokens[:, :2].tolist(), fallback=r.fallback.tolist(), valid=r.valid.tolist())


def run_case(c, device, gen):
    B, K, V, dtype = 4, 3, c["V"], c["dtype"]
    out = {}
    p = _probs(c["kind"], (B, K + 1, V), dtype, device, gen)
    q = _probs("ok", (B, K, V), dtype, device, gen)
    ids = torch.randint(0, V, (B, K), generator=gen, device=device)
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
    ):
        r = ss.chain_rejection_sample(p, ids, seeds=seeds, offsets=offsets, **kwargs)
        _check_ids(label, r.tokens, V)
        out[label] = _summary(r)
    try:
        logits = torch.log(p.float().clamp_min(0)).to(dtype)
        if c["kind"] == "nan_row":
            logits = p  # NaN logits
        temp = torch.tensor([0.0, 0.7, 1.0, 2.0], device=device)
        for label, dl in (("logits_classic", torch.log(q.float()).to(dtype)), ("logits_onehot", None)):
            r = ss.rejection_sample_logits(logits, ids, dl, temperature=temp, seeds=seeds, offsets=offsets)
            _check_ids(label, r.tokens, V)
            out[label] = _summary(r)
    except (ImportError, AttributeError) as err:
        out["logits"] = f"skipped: {err}"
    try:
        for ns in (1, 2):
            sp, si = ss.fast_sample(p[:, 0], num_samples=min(ns, V), seeds=seeds, offsets=offsets)
            _check_ids(f"fast_sample_n{ns}", si, V)
            out[f"fast_sample_n{ns}"] = si.tolist()
        temps = torch.tensor([0.0, 0.5, 1.0, 3.0], device=device)
        tok = ss.sample_from_logits(torch.log(p[:, 0].float()), temps, seeds=seeds, offsets=offsets)
        tok = tok[0] if isinstance(tok, tuple) else tok
        _check_ids("sample_from_logits", tok, V)
        out["sample_from_logits"] = tok.tolist()
    except (ImportError, AttributeError) as err:
        out["gumbel"] = f"skipped: {err}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    gen = torch.Generator(device=args.device).manual_seed(1)
    table, launched = [], 0
    for c in cases(args.device, args.small or args.device == "cpu"):
        res = run_case(c, args.device, gen)
        launched += len(res)
        table.append({**{k: str(v) for k, v in c.items() if k != "bad"}, "result": res})
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"fuzz corpus: {len(table)} cases, {launched} op calls, all ids in [-1, V)")
    out = os.environ.get("OUT", "out")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "fuzz_table.json"), "w") as f:
        json.dump(table, f)


if __name__ == "__main__":
    main()
