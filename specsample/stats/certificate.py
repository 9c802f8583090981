"""Certificate: the record every specsample statistical assertion returns.

A certificate says what was tested, against which law, with which design (alpha, beta, eps or
delta, n) and what came out (statistic, p-value, TV bound, pass/fail), plus the seed that
reproduces it. It serialises to JSON so `make verify` can collect certificates into a report.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no inf/nan; keep them readable
    return value


@dataclass
class Certificate:
    """What one statistical (or deterministic) check proved.

    Fields:
      name       short identifier of the check (e.g. "gof", "ks", "coupling", "inverse_cdf_grid")
      what       one sentence: what is guaranteed if `passed` (e.g. "TV(kernel, target) <= 2e-3
                 at confidence 1-1e-6")
      law        the law tested against (free text: "target p", "Exp(1)", ...)
      n          sample size (rows, draws, grid points)
      alpha      declared false-fail rate of the assertion (None for deterministic checks)
      beta       declared false-pass rate at discrepancy eps (None if no power claim)
      eps        the discrepancy (TV, or Kolmogorov distance for KS) detected w.p. >= 1-beta
      delta      confidence parameter of a TV bound (P(true TV > tv_bound) <= delta)
      statistic  the test statistic (X^2, KS distance, mismatches, max deviation, ...)
      p_value    p-value of the statistic where one exists
      tv_bound   an upper confidence bound on TV where one exists
      seed       the seed that produced the data (None if not given)
      passed     the decision
      detail     anything else (pooled table, per-part p-values, bounds), JSON-serialisable
    """

    name: str
    what: str
    law: str = ""
    n: int = 0
    alpha: float | None = None
    beta: float | None = None
    eps: float | None = None
    delta: float | None = None
    statistic: float | None = None
    p_value: float | None = None
    tv_bound: float | None = None
    seed: int | None = None
    passed: bool = True
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict of JSON-native values (numpy scalars/arrays converted, inf as a string)."""
        return _jsonable(asdict(self))

    def to_json(self, **kwargs: Any) -> str:
        """JSON text of `to_dict()` (kwargs go to json.dumps)."""
        return json.dumps(self.to_dict(), **kwargs)

    def summary(self) -> str:
        """One line: verdict, name, what, and the design numbers that are set."""
        parts = [f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.what}"]
        for key in ("n", "alpha", "beta", "eps", "delta", "statistic", "p_value", "tv_bound", "seed"):
            value = getattr(self, key)
            if value is not None and not (key == "n" and value == 0):
                parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
        return " ".join(parts)

    def __str__(self) -> str:
        return self.summary()
