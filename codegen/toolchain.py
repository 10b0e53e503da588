"""Versions of everything a number depends on, and the environment fingerprint.

Stored on each run row (a resumed run refuses a changed toolchain) and with baselines
(cached per task + environment). Only cheap imports; torch is read only if already
installed, and the GPU only if torch sees one.
"""

from __future__ import annotations

import hashlib
import json
import platform
from functools import cache
from importlib.metadata import PackageNotFoundError, version


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


@cache
def versions() -> dict[str, str]:
    """Versions of python, cutegen, torch, triton, nvidia-cutlass-dsl and the GPU/driver.

    The GPU entries are present only when torch sees a CUDA device.
    """
    out = {
        "python": platform.python_version(),
        "cutegen": _pkg("cutegen"),
        "torch": _pkg("torch"),
        "triton": _pkg("triton"),
        "nvidia-cutlass-dsl": _pkg("nvidia-cutlass-dsl"),
    }
    try:
        import torch

        out["torch"] = torch.__version__
        if torch.cuda.is_available():
            out["cuda"] = str(torch.version.cuda)
            out["gpu"] = torch.cuda.get_device_name(0)
            out["driver"] = _driver_version()
    except Exception:  # noqa: BLE001 - a broken torch install still has a fingerprint
        pass
    return out


def _driver_version() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
            return v.decode() if isinstance(v, bytes) else str(v)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001
        return "unknown"


#: The entries a resumed run must find unchanged (the GPU model is compared separately
#: when both sides have one, so a compile-only run can continue on a GPU machine).
RESUME_KEYS = ("cutegen", "torch", "nvidia-cutlass-dsl")


def fingerprint(v: dict[str, str] | None = None) -> str:
    """A short hash of the versions that affect timings (for baseline caching)."""
    v = versions() if v is None else v
    keys = ("torch", "triton", "nvidia-cutlass-dsl", "cuda", "gpu", "driver")
    blob = json.dumps({k: v.get(k, "") for k in keys}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def diff(old: dict[str, str], new: dict[str, str], keys: tuple[str, ...] = RESUME_KEYS) -> list[str]:
    """Human-readable differences between two version maps on ``keys``."""
    return [f"{k}: {old.get(k, 'absent')} -> {new.get(k, 'absent')}"
            for k in keys if old.get(k) != new.get(k)]


@cache
def nvdisasm_for_dsl() -> bool:
    """Whether the CuTe DSL can dump SASS here: it needs nvdisasm >= 13.4 (the
    ``nvidia-cuda-nvdisasm`` wheel, or a CUDA toolkit that new). Without it only PTX and
    cubin are kept, and SASS comes from disassembling the cubin (cuobjdump)."""
    import re
    import shutil
    import subprocess

    try:
        v = version("nvidia-cuda-nvdisasm")
        return tuple(int(x) for x in v.split(".")[:2]) >= (13, 4)
    except (PackageNotFoundError, ValueError):
        pass
    exe = shutil.which("nvdisasm")
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.search(r"release (\d+)\.(\d+)", out)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (13, 4)
