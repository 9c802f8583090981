"""Run 259 step 1 (session 49): does the race kernel's compile fail on the device for the verify's bf16
three-groups case (GPU run 258: TritonGPURemoveLayoutConversions failed on _logits_race_kernel, bf16,
2 tiles, unscreened, race_p_in_merge, race_poll; the same TTIR compiles offline with PyPI's Triton
3.6.0)? Each config in a fresh process (argv[1] = JSON overrides, argv[2] = 'broadcast' or
'contiguous'), so a compile is never cached."""

import json
import os
import sys
import time

import numpy as np
import torch

from specsample import rejection_sample_logits
from specsample.verify.logits_family import logits_cases

config, layout = json.loads(sys.argv[1]), sys.argv[2]
CASE = "logits_three_groups_V700_K2_classic_bf16"
name, lg, dl, drafts, dtype = next(c for c in logits_cases() if c[0] == CASE)
rows, k = int(os.environ.get("REPRO_ROWS", 65_536)), drafts.size  # fewer for a CPU smoke run
dev = "cuda" if torch.cuda.is_available() else "cpu"
rng = np.random.default_rng(0)
dt = getattr(torch, dtype)
t = torch.from_numpy(lg).to(dev, dt).unsqueeze(0).expand(rows, *lg.shape)
d = torch.from_numpy(dl).to(dev, dt).unsqueeze(0).expand(rows, *dl.shape)
if layout == "contiguous":
    t, d = t.contiguous(), d.contiguous()
ids = torch.from_numpy(np.broadcast_to(drafts, (rows, k)).copy()).to(dev)
temps = torch.from_numpy(rng.choice([0.0, 0.5, 1.0, 1.7], rows).astype(np.float32)).to(dev)
seeds = torch.from_numpy(rng.integers(0, 1 << 62, rows, dtype=np.int64)).to(dev)
offsets = torch.from_numpy(rng.integers(0, 1 << 40, rows, dtype=np.int64)).to(dev)
t0 = time.perf_counter()
try:
    out = rejection_sample_logits(t, ids, d, temperature=temps, seeds=seeds, offsets=offsets, _config=config)
    if dev == "cuda":
        torch.cuda.synchronize()
    result = dict(ok=True, accepted=float(out.num_accepted.float().mean()))
except Exception as exc:  # noqa: BLE001 - the finding
    result = dict(ok=False, error=f"{type(exc).__name__}: {str(exc)[:300]}")
print(json.dumps(dict(config=config, layout=layout, s=round(time.perf_counter() - t0, 1), **result)))
