"""cutegen.profilers: the Profiler contract, two-stage profiling and the built-in profilers.

Public API:

* the contract: :class:`Profiler`, :class:`ProfileTarget`, :class:`ProfileReport`,
  :class:`Finding`, :class:`Status`, :class:`Bottleneck`, :class:`BottleneckKind`;
* delayed two-stage profiling: :func:`classify` (stage 1, pure), :func:`should_profile`,
  :func:`run_stage2`, :func:`guidance` and :func:`hints`;
* :func:`run_tool` / :func:`find_tool` / :func:`gpu_visible`: the one subprocess helper
  (timeouts kill the process group) and tool lookup; :func:`run_counters_tool` for tools
  that read the GPU's counters (one such session on the host at a time);
* :mod:`cutegen.profilers.protocol`: what ``launch_argv`` understands;
* built-ins, each registered through the ``cutegen`` entry-point group:
  :mod:`~cutegen.profilers.sass`, :mod:`~cutegen.profilers.ncu`,
  :mod:`~cutegen.profilers.nsys`, :mod:`~cutegen.profilers.energy`.
"""

from __future__ import annotations

from cutegen.profilers._base import (
    Bottleneck,
    BottleneckKind,
    Finding,
    FindingValue,
    Profiler,
    ProfileReport,
    ProfileTarget,
    Status,
    artifact_lists,
    artifact_paths,
)
from cutegen.profilers._counters import run_counters_tool
from cutegen.profilers._run import ToolRun, find_tool, gpu_visible, run_tool
from cutegen.profilers._stage import (
    PROFILE_MODES,
    ProfileMode,
    classify,
    guidance,
    hints,
    run_stage2,
    should_profile,
)

__all__ = [
    "PROFILE_MODES",
    "Bottleneck",
    "BottleneckKind",
    "Finding",
    "FindingValue",
    "ProfileMode",
    "ProfileReport",
    "ProfileTarget",
    "Profiler",
    "Status",
    "ToolRun",
    "artifact_lists",
    "artifact_paths",
    "classify",
    "find_tool",
    "gpu_visible",
    "guidance",
    "hints",
    "run_counters_tool",
    "run_stage2",
    "run_tool",
    "should_profile",
]
