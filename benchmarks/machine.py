"""What machine a benchmark ran on: GPU model (and its slug for per-GPU baselines), versions, commit."""

from __future__ import annotations

import datetime
import platform
import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def gpu_slug(gpu_name: str) -> str:
    """Directory name for a GPU model's baselines: 'NVIDIA H200' -> 'h200',
    'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3', 'cpu' -> 'cpu'."""
    name = gpu_name.strip().lower()
    name = re.sub(r"^nvidia\s+", "", name)
    slug = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    if not slug:
        raise ValueError(f"cannot make a baseline directory name from GPU name {gpu_name!r}")
    return slug


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def gpu_name() -> str:
    """torch's name for CUDA device 0, or 'cpu' without CUDA."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def l2_cache_bytes(default: int = 60 << 20) -> int:
    """L2 size of CUDA device 0 as torch reports it (H200: ~60 MB); `default` when unknown."""
    import torch

    if not torch.cuda.is_available():
        return default
    size = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
    return int(size) if size else default


def machine_info() -> dict:
    """GPU name, SM count, L2, memory, driver, CUDA runtime, torch, triton, python, commit, UTC time."""
    import torch
    import triton

    info: dict = {
        "gpu": gpu_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "cuda_runtime": torch.version.cuda,
        "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": _run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT),
        "dirty": bool(_run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT)),
    }
    info["gpu_slug"] = gpu_slug(info["gpu"])
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info["sm_count"] = props.multi_processor_count
        info["l2_cache_bytes"] = l2_cache_bytes()
        info["memory_bytes"] = props.total_memory
        info["driver"] = _run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"]
        )
    return info
