"""Pure parsing of system-level timelines (Nsight Systems CSV, torch.profiler Chrome traces).

Both sources reduce to :class:`GpuEvent` (kernels, memcpys, memsets on the GPU) plus the
host time spent in launch API calls, and then to one :class:`TimelineSummary` per call of
the candidate: kernel count, GPU busy time, idle gaps between GPU activities, host launch
overhead and copies. :func:`timeline_findings` turns a summary into findings and hints.

Formats (documented; real samples to be recorded on the GPU machine):

* ``nsys stats --report cuda_gpu_trace --format csv``: columns include ``Start (ns)``,
  ``Duration (ns)`` and ``Name``; memory operations are named ``[CUDA memcpy ...]`` /
  ``[CUDA memset]``.
* ``nsys stats --report cuda_api_sum --format csv``: ``Total Time (ns)``, ``Num Calls``,
  ``Name`` per CUDA API function.
* ``torch.profiler`` ``export_chrome_trace``: ``{"traceEvents": [...]}`` with complete
  events (``"ph": "X"``, ``ts``/``dur`` in microseconds) of category ``kernel``,
  ``gpu_memcpy``, ``gpu_memset`` (GPU) and ``cuda_runtime`` / ``cuda_driver`` (host API).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cutegen.profilers._base import Finding

#: Launch calls (the CuTe DSL launches with cudaLaunchKernelExC, seen in H200 traces).
_LAUNCH_API = re.compile(r"^(cuda|cu)(LaunchKernel|LaunchKernelExC?|LaunchCooperativeKernel|"
                         r"GraphLaunch|LibraryGetKernel)(_v\d+)?(_ptsz)?$")


@dataclass(frozen=True, slots=True)
class GpuEvent:
    """One GPU activity: ``kind`` is "kernel", "memcpy" or "memset"; times in nanoseconds."""

    kind: str
    name: str
    start_ns: float
    duration_ns: float

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True, slots=True)
class TimelineSummary:
    """GPU and launch activity per call of the candidate.

    Attributes:
        source: "nsys" or "torch.profiler".
        calls: calls the numbers are divided by.
        kernels_per_call: kernel launches per call.
        kernel_us_per_call: GPU time in kernels per call.
        busy_us_per_call: GPU time with any activity per call.
        span_us_per_call: first GPU start to last GPU end, divided by calls.
        idle_us_per_call: span minus busy: gaps between GPU activities.
        launch_api_us_per_call: host time in kernel-launch API calls per call (None if unknown).
        memcpy_per_call / memcpy_us_per_call: copies and their GPU time per call.
        memset_per_call: memsets per call.
        kernel_names: distinct kernel names, in first-seen order.
    """

    source: str
    calls: int
    kernels_per_call: float
    kernel_us_per_call: float
    busy_us_per_call: float
    span_us_per_call: float
    idle_us_per_call: float
    launch_api_us_per_call: float | None
    memcpy_per_call: float
    memcpy_us_per_call: float
    memset_per_call: float
    kernel_names: tuple[str, ...] = ()


def _rows(text: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Name" in line and "," in line), None)
    if start is None:
        return []
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def _num(row: dict[str, str], *keys: str) -> float | None:
    for k in keys:
        v = row.get(k)
        if v not in (None, ""):
            try:
                return float(str(v).replace(",", ""))
            except ValueError:
                return None
    return None


def parse_nsys_gpu_trace(text: str) -> tuple[GpuEvent, ...]:
    """Parse ``nsys stats --report cuda_gpu_trace --format csv`` into GPU events.

    Rows without a start or duration are skipped; a ``[CUDA memcpy ...]`` name is a copy,
    ``[CUDA memset ...]`` a memset, anything else a kernel.
    """
    out = []
    for row in _rows(text):
        start = _num(row, "Start (ns)", "Start")
        dur = _num(row, "Duration (ns)", "Duration")
        name = row.get("Name") or ""
        if start is None or dur is None:
            continue
        low = name.lower()
        kind = "memcpy" if "memcpy" in low and name.startswith("[") else \
            "memset" if "memset" in low and name.startswith("[") else "kernel"
        out.append(GpuEvent(kind, name, start, dur))
    return tuple(sorted(out, key=lambda e: e.start_ns))


def parse_nsys_api_sum(text: str) -> float:
    """Total nanoseconds spent in kernel-launch API calls, from ``cuda_api_sum`` CSV."""
    total = 0.0
    for row in _rows(text):
        if _LAUNCH_API.match((row.get("Name") or "").strip()):
            total += _num(row, "Total Time (ns)", "Total Time") or 0.0
    return total


def parse_torch_trace(text: str) -> tuple[tuple[GpuEvent, ...], float]:
    """Parse a torch.profiler Chrome trace: GPU events, and launch-API time in ns.

    Raises:
        ValueError: when the text is not a Chrome trace.
    """
    data = json.loads(text)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    gpu: list[GpuEvent] = []
    api_ns = 0.0
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        try:
            ts, dur = float(ev["ts"]) * 1e3, float(ev.get("dur", 0.0)) * 1e3
        except (KeyError, TypeError, ValueError):
            continue
        if cat in kinds:
            gpu.append(GpuEvent(kinds[cat], str(ev.get("name", "")), ts, dur))
        elif cat in ("cuda_runtime", "cuda_driver") and _LAUNCH_API.match(str(ev.get("name", ""))):
            api_ns += dur
    return tuple(sorted(gpu, key=lambda e: e.start_ns)), api_ns


def candidate_window(events: Sequence[GpuEvent], kernel_regex: str) -> tuple[GpuEvent, ...]:
    """The events from the first to the last kernel whose name matches ``kernel_regex``.

    A whole-process trace (nsys) also holds input set-up and warm-up; this keeps the part
    where the candidate ran. Empty when no kernel matches.
    """
    pat = re.compile(kernel_regex)
    idx = [i for i, e in enumerate(events) if e.kind == "kernel" and pat.search(e.name)]
    return tuple(events[idx[0]:idx[-1] + 1]) if idx else ()


def summarize_timeline(
    events: Iterable[GpuEvent], *, calls: int, source: str, launch_api_ns: float | None = None
) -> TimelineSummary:
    """Reduce GPU events of ``calls`` calls to per-call numbers.

    Raises:
        ValueError: for ``calls < 1``.
    """
    if calls < 1:
        raise ValueError("calls must be >= 1")
    evs = sorted(events, key=lambda e: e.start_ns)
    kernels = [e for e in evs if e.kind == "kernel"]
    copies = [e for e in evs if e.kind == "memcpy"]
    busy = 0.0
    cur_start = cur_end = None
    for e in evs:
        if cur_end is None or e.start_ns > cur_end:
            if cur_end is not None and cur_start is not None:
                busy += cur_end - cur_start
            cur_start, cur_end = e.start_ns, e.end_ns
        else:
            cur_end = max(cur_end, e.end_ns)
    if cur_end is not None and cur_start is not None:
        busy += cur_end - cur_start
    span = (max(e.end_ns for e in evs) - evs[0].start_ns) if evs else 0.0
    per = 1e3 * calls
    return TimelineSummary(
        source=source,
        calls=calls,
        kernels_per_call=len(kernels) / calls,
        kernel_us_per_call=sum(e.duration_ns for e in kernels) / per,
        busy_us_per_call=busy / per,
        span_us_per_call=span / per,
        idle_us_per_call=max(span - busy, 0.0) / per,
        launch_api_us_per_call=None if launch_api_ns is None else launch_api_ns / per,
        memcpy_per_call=len(copies) / calls,
        memcpy_us_per_call=sum(e.duration_ns for e in copies) / per,
        memset_per_call=sum(1 for e in evs if e.kind == "memset") / calls,
        kernel_names=tuple(dict.fromkeys(e.name for e in kernels)),
    )


def timeline_findings(s: TimelineSummary) -> tuple[Finding, ...]:
    """Facts and ``hint.*`` findings from a per-call timeline summary (pure)."""
    out = [
        Finding("timeline.source", s.source, f"timeline from {s.source}"),
        Finding("timeline.calls", s.calls),
        Finding("timeline.kernels_per_call", round(s.kernels_per_call, 3),
                f"{s.kernels_per_call:g} kernel launch(es) per call"),
        Finding("timeline.kernel_us_per_call", round(s.kernel_us_per_call, 3),
                f"{s.kernel_us_per_call:.2f} us of kernel time per call"),
        Finding("timeline.idle_us_per_call", round(s.idle_us_per_call, 3),
                f"{s.idle_us_per_call:.2f} us per call with the GPU idle between activities"),
        Finding("timeline.memcpy_per_call", round(s.memcpy_per_call, 3)),
        Finding("timeline.memset_per_call", round(s.memset_per_call, 3)),
    ]
    if s.launch_api_us_per_call is not None:
        out.append(Finding("timeline.launch_api_us_per_call", round(s.launch_api_us_per_call, 3),
                           f"{s.launch_api_us_per_call:.2f} us per call in kernel-launch API calls"))
    span = s.span_us_per_call
    if s.kernels_per_call > 1 and span > 0 and s.idle_us_per_call / span > 0.1:
        out.append(Finding("hint.fuse_kernels", round(s.kernels_per_call, 3),
                           f"{s.kernels_per_call:g} kernels per call with {s.idle_us_per_call:.1f} us"
                           " idle between them: fuse them into one kernel"))
    api = s.launch_api_us_per_call
    if api is not None and s.kernel_us_per_call > 0 and api > s.kernel_us_per_call:
        out.append(Finding("hint.launch_overhead", round(api, 3),
                           f"launching costs {api:.1f} us on the host, more than the"
                           f" {s.kernel_us_per_call:.1f} us the kernels run: do more work per launch"))
    if s.memcpy_per_call > 0:
        out.append(Finding("hint.memcpy", round(s.memcpy_per_call, 3),
                           f"{s.memcpy_per_call:g} memory copies per call ({s.memcpy_us_per_call:.1f} us):"
                           " remove copies from forward (no .contiguous()/.to() on the hot path)"))
    return tuple(out)
