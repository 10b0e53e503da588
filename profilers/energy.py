"""The built-in ``energy`` profiler: joules per call from NVML's total-energy counter.

The launcher runs the candidate ``N`` times back to back after a warm-up
(``CUTEGEN_LAUNCH_REPEAT`` / ``CUTEGEN_LAUNCH_WARMUP`` / ``CUTEGEN_LAUNCH_ENERGY``, see
:mod:`cutegen.profilers.protocol`) and reports the energy counter
(``nvmlDeviceGetTotalEnergyConsumption``, millijoules) around the loop. When it does not,
this profiler uses its own NVML samples taken while the launcher ran, interpolated to the
loop's ``time.monotonic_ns()`` bounds. ``N`` is chosen so the loop lasts about
``target_seconds``: the counter advances in steps, so short loops are not measurable.
Numbers include whatever else runs on that GPU at the time.

:func:`objective_value` and :func:`prefer` let a search rank by time, energy or their
product, and prefer the lower-energy kernel between two of matched speed.
Registered through the ``cutegen`` entry point ``energy``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

from cutegen import hookimpl
from cutegen.profilers import protocol
from cutegen.profilers._base import Bottleneck, Finding, ProfileReport, ProfileTarget, Status
from cutegen.profilers._run import gpu_visible, run_tool

Objective = Literal["time", "energy", "edp"]
OBJECTIVES: tuple[str, ...] = ("time", "energy", "edp")


def objective_value(time_us: float, energy_j: float | None, objective: Objective = "time") -> float:
    """The number a search minimizes: ``time`` (us), ``energy`` (J per call) or ``edp``
    (energy-delay product, J x us).

    Raises:
        ValueError: for an unknown objective, or ``energy``/``edp`` without an energy.
    """
    if objective == "time":
        return float(time_us)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if energy_j is None:
        raise ValueError(f"objective {objective!r} needs a measured energy")
    return float(energy_j) if objective == "energy" else float(energy_j) * float(time_us)


def prefer(a: tuple[float, float | None], b: tuple[float, float | None], *,
           rel_tol: float = 0.02) -> int:
    """Compare two kernels given as ``(time_us, energy_j)``: -1 if ``a`` is better, 1 if ``b``, 0 if tied.

    Faster wins; within ``rel_tol`` of each other in time ("matched speed") the one using
    less energy wins, when both energies are known.
    """
    (ta, ea), (tb, eb) = a, b
    if not math.isclose(ta, tb, rel_tol=rel_tol):
        return -1 if ta < tb else 1
    if ea is None or eb is None or ea == eb:
        return 0
    return -1 if ea < eb else 1


def choose_calls(time_us: float | None, *, target_seconds: float = 2.0, min_calls: int = 20,
                 max_calls: int = 200_000) -> int:
    """How many calls make a loop of about ``target_seconds`` (pure)."""
    if not time_us or time_us <= 0:
        return min_calls
    return int(min(max(math.ceil(target_seconds * 1e6 / time_us), min_calls), max_calls))


def energy_from_samples(samples: Sequence[tuple[int, float]], t0_ns: int, t1_ns: int) -> float | None:
    """Joules used between ``t0_ns`` and ``t1_ns`` from ``(monotonic_ns, counter_mJ)`` samples.

    The counter is linearly interpolated between samples. Returns ``None`` when the
    samples do not cover the interval or the counter did not advance.
    """
    pts = sorted(samples)
    if len(pts) < 2 or pts[0][0] > t0_ns or pts[-1][0] < t1_ns or t1_ns <= t0_ns:
        return None

    def at(t: int) -> float:
        for (ta, ea), (tb, eb) in zip(pts, pts[1:], strict=False):
            if ta <= t <= tb:
                return ea if tb == ta else ea + (eb - ea) * (t - ta) / (tb - ta)
        return pts[-1][1]

    used_mj = at(t1_ns) - at(t0_ns)
    return used_mj / 1e3 if used_mj > 0 else None


class _Sampler(threading.Thread):
    """Reads the energy counter every ``period_s`` until stopped."""

    def __init__(self, read_mj: Callable[[], float], period_s: float) -> None:
        super().__init__(daemon=True, name="cutegen-energy-sampler")
        self.read_mj, self.period_s = read_mj, period_s
        self.samples: list[tuple[int, float]] = []
        self.error: str | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        while True:
            try:
                self.samples.append((time.monotonic_ns(), float(self.read_mj())))
            except Exception as e:  # NVML errors end sampling; the launcher may still report
                self.error = f"{type(e).__name__}: {e}"
                return
            if self._stop_event.wait(self.period_s):
                try:
                    self.samples.append((time.monotonic_ns(), float(self.read_mj())))
                except Exception:  # the samples taken so far still count
                    pass
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=5)


def nvml_energy_reader(device: str | None = None) -> Callable[[], float]:
    """A function returning the NVML total-energy counter (mJ) of one GPU.

    Args:
        device: an NVML index ("0") or UUID ("GPU-..."), e.g. the first entry of
            ``CUDA_VISIBLE_DEVICES``; default index 0.

    Raises:
        ImportError / pynvml.NVMLError: when NVML is not usable here.
    """
    import pynvml

    pynvml.nvmlInit()
    if device and device.startswith(("GPU-", "MIG-")):
        handle = pynvml.nvmlDeviceGetHandleByUUID(device)
    else:
        handle = pynvml.nvmlDeviceGetHandleByIndex(int(device) if device and device.isdigit() else 0)
    return lambda: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))


class EnergyProfiler:
    """Joules per call and average power over a loop of calls (needs a GPU and NVML)."""

    name = "energy"

    def __init__(self, *, target_seconds: float = 2.0, warmup: int = 5, poll_s: float = 0.01,
                 reader: Callable[[], float] | None = None) -> None:
        self.target_seconds = target_seconds
        self.warmup = warmup
        self.poll_s = poll_s
        self._reader = reader
        self._available: bool | None = None

    def is_available(self) -> bool:
        if self._reader is not None:
            return True
        if self._available is None:
            try:
                nvml_energy_reader()()
                self._available = gpu_visible()
            except Exception:
                self._available = False
        return self._available

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        return bottleneck.measured

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        t0 = time.monotonic()

        def failed(status: Status, error: str) -> ProfileReport:
            return ProfileReport(self.name, status, error=error, seconds=time.monotonic() - t0)

        if not target.launch_argv:
            return failed(Status.UNAVAILABLE, "no launcher for this candidate")
        time_us = target.bottleneck.time_us if target.bottleneck else None
        if time_us is None and target.evaluation is not None:
            time_us = target.evaluation.time_us
        calls = choose_calls(time_us, target_seconds=self.target_seconds)
        reader = self._reader
        note = None
        if reader is None:
            try:
                visible = (target.env or os.environ).get("CUDA_VISIBLE_DEVICES", "")
                reader = nvml_energy_reader(visible.split(",")[0].strip() or None)
            except Exception as e:
                note = f"no NVML here ({type(e).__name__}); relying on the launcher's readings"
        sampler = _Sampler(reader, self.poll_s) if reader is not None else None
        if sampler is not None:
            sampler.start()
        try:
            run = run_tool(list(target.launch_argv), timeout_s=timeout_s, cwd=target.workdir,
                           env=target.child_env(**{protocol.ENV_REPEAT: str(calls),
                                                   protocol.ENV_WARMUP: str(self.warmup),
                                                   protocol.ENV_ENERGY: "1"}))
        finally:
            if sampler is not None:
                sampler.stop()
        (target.workdir / "energy.log").write_text(run.stdout + run.stderr)
        if run.timed_out:
            return failed(Status.TIMEOUT, run.describe())
        if not run.ok:
            return failed(Status.FAILED, run.describe())
        result = protocol.parse_launch_result(run.stdout)
        if result is None or result.seconds is None:
            return failed(Status.FAILED, "the launcher printed no CUTEGEN_LAUNCH_RESULT line with "
                                         f"t0_ns/t1_ns (does it honour {protocol.ENV_REPEAT}?)")
        joules: float | None
        if result.energy_mj is not None and result.energy_mj[1] > result.energy_mj[0]:
            joules, source = (result.energy_mj[1] - result.energy_mj[0]) / 1e3, "launcher"
        else:
            samples = sampler.samples if sampler is not None else []
            joules = energy_from_samples(samples, result.t0_ns or 0, result.t1_ns or 0)
            source = "sampled"
            if joules is None:
                why = sampler.error if sampler is not None and sampler.error else note
                return failed(Status.FAILED, "no energy reading covers the loop"
                              + (f" ({why})" if why else "; make the loop longer"))
        findings = energy_findings(joules, calls=result.calls, seconds=result.seconds, source=source)
        return ProfileReport(self.name, Status.OK, findings, target.workdir / "energy.log", note,
                             time.monotonic() - t0)


def energy_findings(joules: float, *, calls: int, seconds: float, source: str) -> tuple[Finding, ...]:
    """Findings from the energy of a loop of ``calls`` calls lasting ``seconds`` (pure)."""
    per_call = joules / calls
    power = joules / seconds if seconds > 0 else 0.0
    us_per_call = seconds * 1e6 / calls
    return (
        Finding("energy.j_per_call", per_call, f"{per_call * 1e3:.4g} mJ per call"),
        Finding("energy.avg_power_w", round(power, 2), f"{power:.0f} W average over the loop"),
        Finding("energy.loop_us_per_call", round(us_per_call, 4),
                f"{us_per_call:.2f} us per call back to back (includes launch overhead)"),
        Finding("energy.calls", calls),
        Finding("energy.loop_seconds", round(seconds, 4)),
        Finding("energy.source", source),
    )


@hookimpl
def register_profilers() -> list[EnergyProfiler]:
    """The ``energy`` profiler."""
    return [EnergyProfiler()]
