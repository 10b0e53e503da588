"""The built-in ``ncu`` profiler: Nsight Compute hardware counters for the candidate's kernels.

Runs ``ncu --clock-control none --kernel-name regex:<kernel_regex> --launch-count N
--metrics <set> --export <workdir>/ncu <launch_argv>``, with the metric set chosen by the
stage-1 bottleneck (:func:`cutegen.profilers._ncu_metrics.metrics_for`), then reads the
report back with ``ncu --import ... --csv --page raw --print-units base`` and parses it
with the pure :func:`parse_ncu_csv`. The ``.ncu-rep`` is kept as the artifact (open it in
the Nsight Compute GUI). Registered through the ``cutegen`` entry point ``ncu``.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cutegen import hookimpl
from cutegen.profilers._base import (
    Bottleneck,
    BottleneckKind,
    Finding,
    ProfileReport,
    ProfileTarget,
    Status,
)
from cutegen.profilers._counters import run_counters_tool
from cutegen.profilers._ncu_metrics import (
    ALL_METRICS,
    STALL_ADVICE,
    STALL_METRIC,
    metrics_for,
)
from cutegen.profilers._run import ToolRun, find_tool, gpu_visible, run_tool

NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")


@dataclass(frozen=True, slots=True)
class NcuKernel:
    """One profiled kernel launch.

    Attributes:
        id: ncu's launch id.
        name: the kernel's name.
        metrics: metric name -> value (numbers as float/int; text kept as str).
        units: metric name -> unit as printed ("" when none).
    """

    id: int
    name: str
    metrics: Mapping[str, float | int | str] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)

    def number(self, metric: str) -> float | None:
        v = self.metrics.get(metric)
        return float(v) if isinstance(v, (int, float)) else None


_ID_COLUMNS = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
               "Stream", "Block Size", "Grid Size", "Device", "CC", "Section Name",
               "Kernel Time", "Function Name", "Demangled Name", "Estimated Speedup",
               "Estimated Speedup Type", "Rule Name", "Rule Type", "Rule Description"}
_NUMBER = re.compile(r"^[-+]?(\d{1,3}(,\d{3})+|\d+)(\.\d*)?([eE][-+]?\d+)?$")


def parse_ncu_csv(text: str) -> tuple[NcuKernel, ...]:
    """Parse ``ncu --csv`` output: the ``raw`` page (one row per launch, one column per
    metric, optionally a units row) or the ``details`` page (one row per metric, with
    ``Metric Name`` / ``Metric Unit`` / ``Metric Value`` columns).

    Lines before the header (``==PROF==`` messages, the program's own output) are skipped.

    Args:
        text: the CSV text.

    Returns:
        One :class:`NcuKernel` per launch id, in order; empty when no table is found.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return ()
    rows = [r for r in csv.reader(io.StringIO("\n".join(
        line for line in lines[start:] if line.startswith('"')))) if r]
    header, body = rows[0], rows[1:]
    if {"Metric Name", "Metric Value"} <= set(header):
        return _parse_details(header, body)
    return _parse_raw(header, body)


def _parse_raw(header: list[str], body: list[list[str]]) -> tuple[NcuKernel, ...]:
    col = {name: i for i, name in enumerate(header)}
    units: dict[str, str] = {}
    if body and body[0][col["ID"]].strip() == "":
        units = {h: body[0][i] for i, h in enumerate(header) if i < len(body[0]) and h not in _ID_COLUMNS}
        body = body[1:]
    out = []
    for row in body:
        if len(row) != len(header):
            continue
        metrics = {h: v for h, raw in zip(header, row, strict=True) if h not in _ID_COLUMNS
                   and (v := _value(raw)) is not None}
        out.append(NcuKernel(_int(row[col["ID"]]), row[col.get("Kernel Name", 0)], metrics,
                             {k: units.get(k, "") for k in metrics}))
    return tuple(out)


def _parse_details(header: list[str], body: list[list[str]]) -> tuple[NcuKernel, ...]:
    col = {name: i for i, name in enumerate(header)}
    kernels: dict[int, tuple[str, dict[str, float | int | str], dict[str, str]]] = {}
    for row in body:
        if len(row) != len(header):
            continue
        kid = _int(row[col["ID"]])
        name, metrics, units = kernels.setdefault(kid, (row[col.get("Kernel Name", 0)], {}, {}))
        v = _value(row[col["Metric Value"]])
        if v is not None:
            metrics[row[col["Metric Name"]]] = v
            units[row[col["Metric Name"]]] = row[col["Metric Unit"]] if "Metric Unit" in col else ""
    return tuple(NcuKernel(k, n, m, u) for k, (n, m, u) in kernels.items())


def _value(raw: str) -> float | int | str | None:
    s = raw.strip()
    if not s or s.lower() in ("n/a", "nan"):
        return None
    if _NUMBER.match(s):
        s = s.replace(",", "")
        if re.fullmatch(r"[-+]?\d+", s):
            return int(s)
        return float(s)
    return s


def _int(raw: str) -> int:
    try:
        return int(raw.replace(",", ""))
    except ValueError:
        return -1


def ncu_findings(kernels: Sequence[NcuKernel], bottleneck: Bottleneck | None = None) -> tuple[Finding, ...]:
    """Findings for the longest profiled kernel: its metrics, then ``hint.*`` advice (pure).

    Args:
        kernels: parsed launches (see :func:`parse_ncu_csv`).
        bottleneck: the stage-1 class; decides which hints matter.

    Returns:
        The findings (empty when ``kernels`` is).
    """
    if not kernels:
        return ()
    main = max(kernels, key=lambda k: k.number("gpu__time_duration.sum") or 0.0)
    kind = bottleneck.kind if bottleneck else BottleneckKind.UNKNOWN
    out = [Finding("ncu.kernels", len(kernels), f"{len(kernels)} kernel launch(es) profiled"),
           Finding("ncu.kernel", main.name[:200])]
    for m in ALL_METRICS:
        v = main.metrics.get(m.name)
        if isinstance(v, (int, float)):
            unit = main.units.get(m.name, "")
            pct = ".pct" in m.name or m.name.endswith("_pct")
            suffix = "%" if pct else f" {unit}" if unit else ""
            out.append(Finding(m.name, v, f"{m.label}: {v:.4g}{suffix}"))
    num = main.number
    sectors, requests = num("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), num(
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    if sectors is not None and requests:
        out.append(Finding("ncu.load_sectors_per_request", round(sectors / requests, 3),
                           f"{sectors / requests:.2f} sectors per global load request"))
    out += _hints(main, kind)
    return tuple(out)


def _hints(k: NcuKernel, kind: BottleneckKind) -> list[Finding]:
    num = k.number
    tips: list[Finding] = []
    used = num("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct")
    if used is not None and used < 60:
        tips.append(Finding("hint.coalescing", round(used, 2),
                            f"global loads use only {used:.0f}% of each fetched 32-byte sector:"
                            " have consecutive threads read consecutive addresses"))
    dram = num("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    if dram is not None and dram >= 80:
        tips.append(Finding("hint.dram", round(dram, 2),
                            f"DRAM at {dram:.0f}% of peak: at the bandwidth limit, only moving"
                            " fewer bytes (fusion, reuse, narrower types) makes it faster"))
    achieved = num("sm__warps_active.avg.pct_of_peak_sustained_active")
    if achieved is not None and achieved < 30 and kind is not BottleneckKind.COMPUTE:
        limits = {n: v for n in ("registers", "shared_mem", "warps", "blocks")
                  if (v := num(f"launch__occupancy_limit_{n}")) is not None}
        limiter = min(limits, key=lambda n: limits[n]) if limits else "unknown"
        limiter = "shared_memory" if limiter == "shared_mem" else limiter
        theo = num("sm__maximum_warps_per_active_cycle_pct")
        tips.append(Finding("ncu.achieved_occupancy", round(achieved / 100, 4)))
        # the value is what limits it: the rewriter's rules key on that, not on the text
        tips.append(Finding("hint.occupancy", limiter,
                            f"achieved occupancy {achieved:.0f}%"
                            + (f" (theoretical {theo:.0f}%)" if theo is not None else "")
                            + f", limited by {limiter.replace('_', ' ')}: too few warps to hide latency"))
    stalls = {r: v for r in STALL_ADVICE if (v := num(STALL_METRIC.format(r))) is not None}
    if stalls:
        top = max(stalls, key=lambda r: stalls[r])
        # waiting on memory is what a kernel at the DRAM limit does: no advice to act on
        saturated = top == "long_scoreboard" and dram is not None and dram >= 80
        if top != "not_selected" and stalls[top] >= 0.5 and not saturated:
            tips.append(Finding("hint.stall", top,
                                f"top warp stall: {top.replace('_', ' ')} ({stalls[top]:.1f} warps"
                                f" per issue cycle): {STALL_ADVICE[top]}"))
    tensor = num("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
    if kind is BottleneckKind.COMPUTE and tensor is not None:
        if tensor < 1.0:
            tips.append(Finding("hint.tensor_cores", "wgmma",
                                "the tensor pipe is idle: a matmul on sm_90a should use WGMMA (HGMMA)"))
        elif tensor < 60:
            tips.append(Finding("hint.tensor_pipe", round(tensor, 2),
                                f"tensor pipe busy {tensor:.0f}% of active cycles: feed it faster"
                                " (deeper TMA pipeline, larger tiles, two consumer warpgroups)"))
    return tips


class NcuProfiler:
    """Nsight Compute counters for the candidate's kernels (needs a GPU and ncu)."""

    name = "ncu"

    def __init__(self, *, binary: str | None = None, launch_count: int = 4) -> None:
        self._binary = binary
        self.launch_count = launch_count

    def _find(self, path: str | None = None) -> str | None:
        return self._binary or find_tool("ncu", path=path, candidates=NCU_CANDIDATES)

    def is_available(self) -> bool:
        return self._find() is not None and gpu_visible()

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        return bottleneck.measured

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        t0 = time.monotonic()

        def report(status: Status, error: str | None = None, *, artifact: Path | None = None,
                   findings: tuple[Finding, ...] = ()) -> ProfileReport:
            return ProfileReport(self.name, status, findings, artifact, error,
                                 time.monotonic() - t0)

        binary = self._find(target.search_path)
        if binary is None:
            return report(Status.UNAVAILABLE, "ncu not found on PATH")
        if not target.launch_argv:
            return report(Status.UNAVAILABLE, "no launcher for this candidate")
        kind = target.bottleneck.kind if target.bottleneck else None
        metrics = list(metrics_for(kind))
        base = target.workdir / "ncu"
        rep = base.with_suffix(".ncu-rep")
        run = self._collect(binary, metrics, base, target, t0 + timeout_s)
        rejected = rejected_metrics(run, metrics)
        if not run.ok and rejected and not run.timed_out:
            metrics = [m for m in metrics if m not in rejected]
            run = self._collect(binary, metrics, base, target, t0 + timeout_s)
        (target.workdir / "ncu.log").write_text(run.stdout + run.stderr)
        if run.timed_out:
            return report(Status.TIMEOUT, run.describe())
        if not run.ok or not rep.is_file():
            return report(Status.FAILED, explain_failure(run, target.kernel_regex))
        imp = run_tool([binary, "--import", str(rep), "--csv", "--page", "raw",
                        "--print-units", "base"], timeout_s=max(t0 + timeout_s - time.monotonic(), 1.0),
                       env=target.child_env(), cap_bytes=8 << 20)
        (target.workdir / "ncu.csv").write_text(imp.stdout)
        if imp.timed_out:
            return report(Status.TIMEOUT, imp.describe(), artifact=rep)
        kernels = parse_ncu_csv(imp.stdout)
        if not imp.ok or not kernels:
            return report(Status.FAILED, "could not read the ncu report back: " + imp.describe(),
                          artifact=rep)
        note = f"ncu rejected metrics: {', '.join(sorted(rejected))}" if rejected else None
        return report(Status.OK, note, findings=ncu_findings(kernels, target.bottleneck), artifact=rep)

    def _collect(self, binary: str, metrics: Sequence[str], base: Path,
                 target: ProfileTarget, deadline: float) -> ToolRun:
        argv = [binary, "--clock-control", "none", "--target-processes", "all",
                "--kernel-name", f"regex:{target.kernel_regex}",
                "--launch-count", str(self.launch_count),
                "--metrics", ",".join(metrics), "--export", str(base), "--force-overwrite",
                *target.launch_argv]
        return run_counters_tool(argv, timeout_s=max(deadline - time.monotonic(), 1.0),
                                 env=target.child_env(), cwd=target.workdir)


def rejected_metrics(run: ToolRun, metrics: Sequence[str]) -> set[str]:
    """Metric names ncu complained about in ``==ERROR==``/``==WARNING==`` lines (pure)."""
    bad: set[str] = set()
    for line in (run.stdout + "\n" + run.stderr).splitlines():
        if line.startswith(("==ERROR==", "==WARNING==")) and "metric" in line.lower():
            bad.update(m for m in metrics if m in line or m.split(".")[0] in line)
    return bad


def explain_failure(run: ToolRun, kernel_regex: str) -> str:
    """One line for a failed ncu run, naming the common causes (pure)."""
    text = run.stdout + run.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return ("no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root"
                " or allow profiling for all users")
    if "No kernels were profiled" in text:
        return f"ncu profiled no kernel matching regex:{kernel_regex}"
    return run.describe()


@hookimpl
def register_profilers() -> list[NcuProfiler]:
    """The ``ncu`` profiler."""
    return [NcuProfiler()]
