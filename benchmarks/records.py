"""Benchmark result records: one per (kernel, provider, shape, dtype), with floor and same-run baseline.

A record is what `benchmarks/results/<gpu>.json` lists and what the regression gate compares:

    kernel, provider, B, K, V, dtype   what was timed (`provider` "specsample" is ours)
    median_us            triton.testing.do_bench median per call (L2 flushed before each call)
    graph_us             per-launch median of CUDA-graph replays over rotated input copies (or None)
    floor_us             must-read bytes / device copy bandwidth measured in the same run
    floor_fraction       floor_us / median_us (1.0 = at the memory floor)
    graph_floor_fraction floor_us / graph_us
    bandwidth_GBps       must-read bytes / median_us (effective bandwidth)
    baseline             the same-run baseline provider this record is compared with (None for baselines)
    baseline_median_us   that baseline's median_us for the same shape (None when it was not measured)
    speedup              baseline_median_us / median_us
    must_read_bytes, copy_bandwidth_GBps, gpu, slowed (True when the deliberately slowed variant ran)

Files on disk come in three shapes, all read by `load_records`: a bare list of records (results
file), {"machine": ..., "records": [...]} (baseline file, pytest suite output), and a
pytest-benchmark --benchmark-json report whose benchmarks carry the record in extra_info["record"].
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from benchmarks.floors import Case, floor_us, must_read_bytes

OURS = "specsample"

# The plain-PyTorch provider each kernel's records are set against (benchmarks/baselines_torch.py).
BASELINE_OF = {
    "chain": "torch",
    "chain_onehot": "torch",
    "fast_sample": "torch_gumbel",
    "sample_from_logits": "torch",
    "logits": "torch",
    "logits_onehot": "torch",
}


@dataclass
class Record:
    kernel: str
    provider: str
    B: int
    K: int
    V: int
    dtype: str
    median_us: float
    floor_us: float
    floor_fraction: float
    bandwidth_GBps: float
    baseline: str | None
    baseline_median_us: float | None
    speedup: float | None
    graph_us: float | None
    graph_floor_fraction: float | None
    must_read_bytes: int
    copy_bandwidth_GBps: float
    gpu: str
    slowed: bool = False

    @property
    def case(self) -> Case:
        return Case(self.kernel, self.B, self.K, self.V, self.dtype)

    @property
    def key(self) -> tuple:
        """Identity of a measurement across runs: (kernel, provider, B, K, V, dtype)."""
        return (self.kernel, self.provider, self.B, self.K, self.V, self.dtype)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Record:
        names = {f.name for f in fields(cls)}
        missing = names - set(d) - {"slowed"}
        if missing:
            raise ValueError(f"record is missing fields {sorted(missing)}: {d!r}")
        return cls(**{k: v for k, v in d.items() if k in names})


def make_record(
    case: Case,
    provider: str,
    *,
    median_us: float,
    graph_us: float | None,
    copy_bandwidth_bytes_per_s: float,
    gpu: str,
    slowed: bool = False,
) -> Record:
    """A record from timings; floor, fractions and effective bandwidth are derived here, nowhere else."""
    if not median_us > 0:
        raise ValueError(f"median_us must be > 0, got {median_us!r} for {case.label} / {provider}")
    if graph_us is not None and not graph_us > 0:
        raise ValueError(f"graph_us must be > 0 or None, got {graph_us!r} for {case.label} / {provider}")
    nbytes = must_read_bytes(case)
    floor = floor_us(case, copy_bandwidth_bytes_per_s)
    return Record(
        kernel=case.kernel,
        provider=provider,
        B=case.B,
        K=case.K,
        V=case.V,
        dtype=case.dtype,
        median_us=float(median_us),
        floor_us=floor,
        floor_fraction=floor / median_us,
        bandwidth_GBps=nbytes / median_us / 1e3,
        baseline=None,
        baseline_median_us=None,
        speedup=None,
        graph_us=None if graph_us is None else float(graph_us),
        graph_floor_fraction=None if graph_us is None else floor / graph_us,
        must_read_bytes=nbytes,
        copy_bandwidth_GBps=copy_bandwidth_bytes_per_s / 1e9,
        gpu=gpu,
        slowed=slowed,
    )


def attach_baselines(records: list[Record]) -> list[Record]:
    """Fill baseline / baseline_median_us / speedup of every non-baseline record from the record of
    its kernel's plain-PyTorch provider (BASELINE_OF) for the same shape in the same list."""
    by_key = {r.key: r for r in records}
    for r in records:
        base_provider = BASELINE_OF[r.kernel]
        if r.provider == base_provider:
            continue
        r.baseline = base_provider
        base = by_key.get((r.kernel, base_provider, r.B, r.K, r.V, r.dtype))
        r.baseline_median_us = None if base is None else base.median_us
        r.speedup = None if base is None else base.median_us / r.median_us
    return records


def save_records(path: Path, records: list[Record], machine: dict | None = None) -> Path:
    """Write a bare list (machine None) or {"machine": machine, "records": [...]}; creates parents."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [r.to_dict() for r in records]
    payload = rows if machine is None else {"machine": machine, "records": rows}
    path.write_text(json.dumps(payload, indent=1, sort_keys=False) + "\n")
    return path


def load_records(path: Path) -> tuple[list[Record], dict]:
    """(records, machine info) from any of the three file shapes in the module docstring."""
    data = json.loads(Path(path).read_text())
    if isinstance(data, list):
        return [Record.from_dict(d) for d in data], {}
    if isinstance(data, dict) and "records" in data:
        return [Record.from_dict(d) for d in data["records"]], dict(data.get("machine") or {})
    if isinstance(data, dict) and "benchmarks" in data:
        rows = [b.get("extra_info", {}).get("record") for b in data["benchmarks"]]
        return [Record.from_dict(d) for d in rows if d], dict(data.get("machine_info") or {})
    raise ValueError(f"{path}: not a records list, a baseline file or a pytest-benchmark report")
