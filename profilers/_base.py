"""The profiler contract: what a profiler receives, what it returns, and the Protocol itself.

Everything here is a frozen value except :class:`Profiler`, the seam that built-in and
third-party profilers implement. Profilers are found through the ``cutegen`` entry-point
group (see :mod:`cutegen.plugins`); this module knows nothing about discovery.

Invariants every profiler keeps (checked by :class:`cutegen.plugins.testing.ProfilerContract`):

* ``profile()`` never raises for a missing tool, a failed or hung run, or output it cannot
  parse: it returns a :class:`ProfileReport` whose ``status`` says what happened. Only
  programming errors raise.
* ``profile()`` returns within ``timeout_s`` plus a few seconds of clean-up, and leaves no
  process behind (use :func:`cutegen.profilers.run_tool`).
* ``report.profiler == profiler.name``.
* Files a profiler writes go under ``target.workdir``.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cutegen.codegen.evaluation import Evaluation

#: Values a finding may carry (JSON scalars).
FindingValue = float | int | str


class Status(str, enum.Enum):
    """How a profiler run ended.

    ``OK``: the tool ran and its output was parsed (findings may still be empty).
    ``UNAVAILABLE``: the tool, the GPU or an input it needs is missing; nothing was run.
    ``FAILED``: the tool ran and failed, or its output could not be read; see ``error``.
    ``TIMEOUT``: the run was killed after ``timeout_s``.
    """

    OK = "ok"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"
    TIMEOUT = "timeout"


class BottleneckKind(str, enum.Enum):
    """Stage-1 class of a node: what limits it, judged from the evaluator's own numbers."""

    MEMORY = "memory"
    COMPUTE = "compute"
    LATENCY = "latency"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Finding:
    """One fact a profiler found.

    Key conventions: raw tool metrics keep the tool's name
    (``dram__throughput.avg.pct_of_peak_sustained_elapsed``); derived facts are
    ``<area>.<name>`` (``sass.ldg_min_bits``); actionable advice is ``hint.<topic>``
    (``hint.vector_width``), whose ``value`` is machine-readable and whose ``summary`` is
    the guidance line rewriters see (see :func:`cutegen.profilers.guidance`).

    Attributes:
        key: stable identifier, no spaces.
        value: a JSON scalar.
        summary: one line (no newline) a prompt may quote; may be empty for raw metrics.
    """

    key: str
    value: FindingValue
    summary: str = ""

    def __post_init__(self) -> None:
        if not self.key or any(c.isspace() for c in self.key):
            raise ValueError(f"finding key must be a non-empty word, got {self.key!r}")
        if "\n" in self.summary:
            raise ValueError(f"finding summary must be one line: {self.summary!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float, str)):
            raise TypeError(f"finding value must be int, float or str, got {self.value!r}")
        if isinstance(self.value, float) and not math.isfinite(self.value):
            raise ValueError(f"finding value must be finite, got {self.value!r}")

    @property
    def is_hint(self) -> bool:
        return self.key.startswith("hint.")

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "summary": self.summary}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Finding:
        return Finding(key=str(d["key"]), value=d["value"], summary=str(d.get("summary", "")))


@dataclass(frozen=True, slots=True)
class Bottleneck:
    """The stage-1 classification of a node (see :func:`cutegen.profilers.classify`).

    Attributes:
        kind: what limits the kernel.
        roofline: which ceiling bounds the *task* ("memory" or "compute"), if known.
        fraction: roofline bound / measured time (1.0 = at the speed of light), if known.
        time_us: the measured median time, ``None`` when the node was not timed.
        n_kernels: how many CuTe DSL kernels the candidate compiled.
        reason: one line saying why, for people and prompts.
    """

    kind: BottleneckKind
    roofline: str | None = None
    fraction: float | None = None
    time_us: float | None = None
    n_kernels: int = 0
    reason: str = ""

    @property
    def measured(self) -> bool:
        """Whether the node was timed on a GPU (profilers that run the kernel need this)."""
        return self.time_us is not None


@dataclass(frozen=True, slots=True)
class ProfileTarget:
    """Everything a profiler may use about one candidate.

    Attributes:
        candidate_id: the candidate's id (its sha256, or a short form of it).
        launch_argv: a command that runs ONE launch of the candidate in a fresh process
            (``python -m cutegen.codegen.launch JOB.json``). Treat it as opaque; the
            launcher honours the ``CUTEGEN_LAUNCH_*`` variables of
            :mod:`cutegen.profilers.protocol`. Empty when the candidate cannot be run here.
        env: the complete environment for processes the profiler starts (as the
            evaluator builds it for its workers); empty means inherit this process's.
        cubin_path / sass_path / ptx_path: compiled artifacts, any may be ``None`` (the first
            of each kind when the candidate compiled several ``@cute.jit`` functions).
        cubin_paths / sass_paths: every compiled function's cubin / SASS (a candidate may
            launch several kernels: a row kernel and a small reduction, say); empty means
            only ``cubin_path`` / ``sass_path``.
        workdir: a folder this profiler may write into (created by the caller).
        evaluation: the node's Evaluation, when it has one.
        bottleneck: the stage-1 class, filled in by :func:`cutegen.profilers.run_stage2`.
        kernel_regex: matches the names of the candidate's kernels (CuTe DSL names them
            ``kernel_cutlass_...``); used to keep a profiler's view to those kernels.
    """

    candidate_id: str
    workdir: Path
    launch_argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cubin_path: Path | None = None
    sass_path: Path | None = None
    ptx_path: Path | None = None
    cubin_paths: tuple[Path, ...] = ()
    sass_paths: tuple[Path, ...] = ()
    evaluation: Evaluation | None = None
    bottleneck: Bottleneck | None = None
    kernel_regex: str = "kernel_cutlass"

    def child_env(self, **extra: str) -> dict[str, str] | None:
        """The environment for a child process, with ``extra`` variables added.

        Returns ``None`` (inherit) when ``env`` is empty and nothing is added.
        """
        if not self.env and not extra:
            return None
        base = dict(self.env) if self.env else dict(os.environ)
        base.update(extra)
        return base

    @property
    def search_path(self) -> str | None:
        """``PATH`` to look tools up in (the target's, else this process's)."""
        return self.env.get("PATH") if self.env else None


@dataclass(frozen=True, slots=True)
class ProfileReport:
    """What one profiler returned for one candidate.

    Attributes:
        profiler: the profiler's name.
        status: how the run ended.
        findings: what was found, in the profiler's order (hints last by convention).
        artifact: the main file kept (``.ncu-rep``, ``.sass``, a trace), under the workdir.
        error: one line saying why, when ``status`` is not ``ok`` (or a note when it is).
        seconds: wall time the profiler took; the search charges it to the budget.
    """

    profiler: str
    status: Status
    findings: tuple[Finding, ...] = ()
    artifact: Path | None = None
    error: str | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def get(self, key: str) -> FindingValue | None:
        """The value of the first finding with this key, or ``None``."""
        return next((f.value for f in self.findings if f.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profiler": self.profiler,
            "status": self.status.value,
            "findings": [f.to_dict() for f in self.findings],
            "artifact": str(self.artifact) if self.artifact is not None else None,
            "error": self.error,
            "seconds": self.seconds,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> ProfileReport:
        art = d.get("artifact")
        return ProfileReport(
            profiler=str(d["profiler"]),
            status=Status(d["status"]),
            findings=tuple(Finding.from_dict(f) for f in d.get("findings", ())),
            artifact=Path(art) if art else None,
            error=d.get("error"),
            seconds=float(d.get("seconds", 0.0)),
        )


@runtime_checkable
class Profiler(Protocol):
    """A profiler: the seam built-in and third-party profilers implement.

    Attributes:
        name: unique among the profilers loaded (``cutegen plugins`` lists them).
    """

    name: str

    def is_available(self) -> bool:
        """Whether this profiler can run here (its tool found, a GPU visible). Cheap; never raises."""
        ...

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        """Whether stage 2 should run this profiler for a node of this class."""
        ...

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        """Profile one candidate.

        Args:
            target: the candidate and its artifacts.
            timeout_s: wall-clock limit for every process this call starts, together.

        Returns:
            A report; its status is ``unavailable``/``failed``/``timeout`` rather than an
            exception when the tool is missing, fails, hangs or prints nonsense.
        """
        ...


def artifact_paths(
    artifacts: Mapping[str, str], run_dir: Path
) -> tuple[Path | None, Path | None, Path | None]:
    """Pick the cubin, SASS and PTX files out of an Evaluation's ``artifacts``.

    Args:
        artifacts: ``Evaluation.artifacts`` (name -> path relative to the run directory).
        run_dir: the run directory those paths are relative to.

    Returns:
        ``(cubin_path, sass_path, ptx_path)``; each the first match by file suffix, or None.
    """

    def pick(suffix: str) -> Path | None:
        for name in sorted(artifacts):
            if name.endswith(suffix) or str(artifacts[name]).endswith(suffix):
                return run_dir / artifacts[name]
        return None

    return pick(".cubin"), pick(".sass"), pick(".ptx")


def artifact_lists(artifacts: Mapping[str, str],
                   run_dir: Path) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """Every cubin and every SASS file of an Evaluation's ``artifacts``, in name order."""
    def every(suffix: str) -> tuple[Path, ...]:
        return tuple(run_dir / artifacts[n] for n in sorted(artifacts)
                     if n.endswith(suffix) or str(artifacts[n]).endswith(suffix))

    return every(".cubin"), every(".sass")
