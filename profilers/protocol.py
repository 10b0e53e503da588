"""The launcher protocol: how profilers ask ``launch_argv`` for more than one plain launch.

A :class:`~cutegen.profilers.ProfileTarget` carries ``launch_argv``, a command that loads a
candidate and its inputs in a fresh process and runs ONE call of its ``forward``. The
profilers steer it only through environment variables, and read back one line of stdout.
This module is the single definition of that protocol; the launcher
(``python -m cutegen.codegen.launch``) imports the names from here.

Environment variables (all optional; absent means the plain behaviour):

``CUTEGEN_LAUNCH_WARMUP=W``
    untimed calls before the measured ones (default 0 for a plain launch).
``CUTEGEN_LAUNCH_REPEAT=N``
    run the measured call ``N`` times back to back (default 1), then synchronize.
``CUTEGEN_LAUNCH_ENERGY=1``
    read the GPU's total-energy counter (NVML ``nvmlDeviceGetTotalEnergyConsumption``,
    millijoules, on the NVML device whose PCI bus id is the launcher's CUDA device) right
    before the first measured call and right after the final synchronize.
``CUTEGEN_LAUNCH_TORCH_PROFILE=PATH``
    run the measured calls under ``torch.profiler.profile(activities=[CPU, CUDA])`` and
    write its Chrome trace (``prof.export_chrome_trace(PATH)``) before exiting.

Whatever the variables, the launcher brackets the measured calls with
``torch.cuda.profiler.start()`` / ``stop()`` (``cudaProfilerStart/Stop``: a no-op unless a
profiler listens), and, after the final synchronize, prints exactly one line to stdout::

    CUTEGEN_LAUNCH_RESULT {"calls": N, "warmup": W, "t0_ns": ..., "t1_ns": ..., ...}

with ``t0_ns``/``t1_ns`` from ``time.monotonic_ns()`` (one clock for all processes of the
host) taken right before the first measured call and right after the final synchronize,
``energy_mj`` as ``[start, end]`` when energy was asked for and NVML answered (else
``null``), and ``device`` the GPU's name. It exits 0 on success and non-zero (with a
message on stderr) otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ENV_WARMUP = "CUTEGEN_LAUNCH_WARMUP"
ENV_REPEAT = "CUTEGEN_LAUNCH_REPEAT"
ENV_ENERGY = "CUTEGEN_LAUNCH_ENERGY"
ENV_TORCH_PROFILE = "CUTEGEN_LAUNCH_TORCH_PROFILE"

#: The prefix of the launcher's one result line on stdout.
RESULT_PREFIX = "CUTEGEN_LAUNCH_RESULT "


@dataclass(frozen=True, slots=True)
class LaunchResult:
    """What the launcher reports about its measured calls.

    Attributes:
        calls: measured calls made (``CUTEGEN_LAUNCH_REPEAT``).
        warmup: untimed calls made before them.
        t0_ns / t1_ns: ``time.monotonic_ns()`` around the measured calls.
        energy_mj: ``(start, end)`` NVML total-energy readings, when taken.
        device: the GPU's name, when known.
    """

    calls: int
    warmup: int = 0
    t0_ns: int | None = None
    t1_ns: int | None = None
    energy_mj: tuple[float, float] | None = None
    device: str = ""

    @property
    def seconds(self) -> float | None:
        if self.t0_ns is None or self.t1_ns is None:
            return None
        return (self.t1_ns - self.t0_ns) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "warmup": self.warmup,
            "t0_ns": self.t0_ns,
            "t1_ns": self.t1_ns,
            "energy_mj": list(self.energy_mj) if self.energy_mj else None,
            "device": self.device,
        }


def format_launch_result(result: LaunchResult) -> str:
    """The line the launcher prints (without a trailing newline)."""
    return RESULT_PREFIX + json.dumps(result.to_dict(), sort_keys=True)


def parse_launch_result(stdout: str) -> LaunchResult | None:
    """Find the launcher's result line in a process's stdout (the last one wins).

    Args:
        stdout: everything the launcher printed (other lines are ignored).

    Returns:
        The result, or ``None`` when no well-formed line is present.
    """
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith(RESULT_PREFIX.strip()):
            continue
        try:
            d = json.loads(line[len(RESULT_PREFIX.strip()) :].strip())
            return _from_dict(d)
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return None


def _from_dict(d: Mapping[str, Any]) -> LaunchResult:
    if not isinstance(d, Mapping):
        raise TypeError("the result must be a JSON object")
    energy = d.get("energy_mj")
    pair = None
    if energy is not None:
        a, b = energy
        pair = (float(a), float(b))
    t0, t1 = d.get("t0_ns"), d.get("t1_ns")
    calls = int(d["calls"])
    if calls < 1:
        raise ValueError("calls must be positive")
    return LaunchResult(
        calls=calls,
        warmup=int(d.get("warmup", 0)),
        t0_ns=int(t0) if t0 is not None else None,
        t1_ns=int(t1) if t1 is not None else None,
        energy_mj=pair,
        device=str(d.get("device", "")),
    )
