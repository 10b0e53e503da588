"""The built-in ``nsys`` profiler: the system-level view of a candidate's calls.

Kernel launches per call, GPU idle gaps, host launch overhead and memory copies. It runs
the launcher under ``nsys profile --trace=cuda`` and reads ``nsys stats`` CSV reports.
Where nsys is missing or cannot make a report (on our H200 it wrote only a ``.qdstrm``),
it falls back to torch.profiler (CUPTI) inside the launcher
(``CUTEGEN_LAUNCH_TORCH_PROFILE``, see :mod:`cutegen.profilers.protocol`) and reports the
same findings with ``timeline.source = "torch.profiler"``. Registered through the
``cutegen`` entry point ``nsys``.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

from cutegen import hookimpl
from cutegen.profilers import protocol
from cutegen.profilers._base import (
    Bottleneck,
    BottleneckKind,
    ProfileReport,
    ProfileTarget,
    Status,
)
from cutegen.profilers._run import find_tool, gpu_visible, run_tool
from cutegen.profilers._timeline import (
    TimelineSummary,
    candidate_window,
    parse_nsys_api_sum,
    parse_nsys_gpu_trace,
    parse_torch_trace,
    summarize_timeline,
    timeline_findings,
)

NSYS_CANDIDATES = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)


class NsysProfiler:
    """Kernel count, launch gaps, host overhead and copies per call (needs a GPU)."""

    name = "nsys"

    def __init__(self, *, binary: str | None = None, repeat: int = 5, warmup: int = 1,
                 torch_fallback: bool = True) -> None:
        self._binary = binary
        self.repeat = repeat
        self.warmup = warmup
        self.torch_fallback = torch_fallback

    def _find(self, path: str | None = None) -> str | None:
        return self._binary or find_tool("nsys", path=path, candidates=NSYS_CANDIDATES)

    def is_available(self) -> bool:
        torch_ok = self.torch_fallback and importlib.util.find_spec("torch") is not None
        return gpu_visible() and (self._find() is not None or torch_ok)

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        return bottleneck.measured and (bottleneck.kind is BottleneckKind.LATENCY
                                         or bottleneck.n_kernels > 1)

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        if not target.launch_argv:
            return ProfileReport(self.name, Status.UNAVAILABLE, error="no launcher for this candidate",
                                 seconds=time.monotonic() - t0)
        notes: list[str] = []
        binary = self._find(target.search_path)
        if binary is None:
            notes.append("nsys not found")
        else:
            got = self._with_nsys(binary, target, deadline)
            if isinstance(got, ProfileReport):
                return got
            if isinstance(got, tuple):
                summary, rep = got
                return self._ok(summary, rep, None, t0)
            notes.append(got)
        if not self.torch_fallback:
            return ProfileReport(self.name, Status.UNAVAILABLE, error="; ".join(notes),
                                 seconds=time.monotonic() - t0)
        got = self._with_torch(target, deadline)
        if isinstance(got, ProfileReport):
            return got
        if isinstance(got, tuple):
            summary, trace = got
            return self._ok(summary, trace, "; ".join(notes + ["used torch.profiler"]), t0)
        return ProfileReport(self.name, Status.FAILED, error="; ".join(notes + [got]),
                             seconds=time.monotonic() - t0)

    def _ok(self, summary: TimelineSummary, artifact: Path, note: str | None, t0: float) -> ProfileReport:
        return ProfileReport(self.name, Status.OK, timeline_findings(summary), artifact, note,
                             time.monotonic() - t0)

    def _env(self, target: ProfileTarget, **extra: str) -> dict[str, str] | None:
        return target.child_env(**{protocol.ENV_REPEAT: str(self.repeat),
                                   protocol.ENV_WARMUP: str(self.warmup), **extra})

    def _with_nsys(self, binary: str, target: ProfileTarget,
                   deadline: float) -> tuple[TimelineSummary, Path] | ProfileReport | str:
        """A summary, a final report (timeout), or why nsys could not be used."""
        base = target.workdir / "nsys"
        run = run_tool([binary, "profile", "--trace=cuda", "--sample=none", "--cpuctxsw=none",
                        "--force-overwrite=true", f"--output={base}", *target.launch_argv],
                       timeout_s=_left(deadline), env=self._env(target), cwd=target.workdir)
        if run.timed_out:
            return ProfileReport(self.name, Status.TIMEOUT, error=run.describe(), seconds=run.seconds)
        rep = base.with_suffix(".nsys-rep")
        if not run.ok or not rep.is_file():
            return "nsys could not make a report: " + run.describe()
        stats = run_tool([binary, "stats", "--report", "cuda_gpu_trace,cuda_api_sum", "--format",
                          "csv", "--force-export=true", f"--output={base}", str(rep)],
                         timeout_s=_left(deadline), env=target.child_env(), cwd=target.workdir)
        trace = _first(target.workdir, "*cuda_gpu_trace*.csv")
        if not stats.ok or trace is None:
            return "nsys stats failed: " + stats.describe()
        api = _first(target.workdir, "*cuda_api_sum*.csv")
        result = protocol.parse_launch_result(run.stdout)
        calls = (result.calls + result.warmup) if result else 1
        events = candidate_window(parse_nsys_gpu_trace(trace.read_text()), target.kernel_regex)
        if not events:
            return f"nsys saw no kernel matching {target.kernel_regex!r}"
        api_ns = parse_nsys_api_sum(api.read_text()) if api is not None else None
        return summarize_timeline(events, calls=calls, source="nsys", launch_api_ns=api_ns), rep

    def _with_torch(self, target: ProfileTarget,
                    deadline: float) -> tuple[TimelineSummary, Path] | ProfileReport | str:
        trace = target.workdir / "torch_trace.json"
        trace.unlink(missing_ok=True)
        run = run_tool(list(target.launch_argv), timeout_s=_left(deadline),
                       env=self._env(target, **{protocol.ENV_TORCH_PROFILE: str(trace)}),
                       cwd=target.workdir)
        if run.timed_out:
            return ProfileReport(self.name, Status.TIMEOUT, error=run.describe(), seconds=run.seconds)
        if not run.ok:
            return "the launcher failed under torch.profiler: " + run.describe()
        if not trace.is_file():
            return (f"the launcher wrote no torch.profiler trace (does it honour "
                    f"{protocol.ENV_TORCH_PROFILE}?)")
        try:
            events, api_ns = parse_torch_trace(trace.read_text())
        except (ValueError, json.JSONDecodeError) as e:
            return f"unreadable torch.profiler trace: {e}"
        if not any(e.kind == "kernel" for e in events):
            return "the torch.profiler trace holds no kernel"
        result = protocol.parse_launch_result(run.stdout)
        calls = result.calls if result else self.repeat
        summary = summarize_timeline(events, calls=calls, source="torch.profiler", launch_api_ns=api_ns)
        return summary, trace


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 1.0)


def _first(folder: Path, pattern: str) -> Path | None:
    return next(iter(sorted(folder.glob(pattern))), None)


@hookimpl
def register_profilers() -> list[NsysProfiler]:
    """The ``nsys`` profiler (with its torch.profiler fallback)."""
    return [NsysProfiler()]
