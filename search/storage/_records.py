"""The frozen records the store takes and returns (besides ``FrozenNode``).

Each maps onto one table of the SQLite store; field names are the column names, so what a
person sees in Datasette is what the code calls it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cutegen.codegen.evaluation import Verdict
from cutegen.profilers import Finding

#: Run statuses. "running" on a run whose session died reads as "interrupted" in reports.
RUN_STATUSES = ("created", "running", "stopped", "finished", "failed")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """What identifies a run and lets it be resumed exactly.

    Attributes:
        task_name / task_path / task_sha256: the task, where it was read from, its hash.
        seed: the run seed; every decision's RNG derives from it and stored facts.
        toolchain: versions of python, torch, the CuTe DSL, cutegen, driver, GPU.
        settings: JSON-able search settings (params, budget, evaluation options, rewriter).
    """

    task_name: str
    task_path: str
    task_sha256: str
    seed: int = 0
    toolchain: Mapping[str, str] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FrozenRun:
    """A run as stored."""

    id: int
    name: str
    config: RunConfig
    created_at: float
    status: str = "created"


@dataclass(frozen=True, slots=True)
class Session:
    """One search process working on a run; the open one is the run's lease.

    A session is "live" while ``ended_at`` is None and its heartbeat is recent.
    """

    id: int
    run_id: int
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    ended_at: float | None = None
    end_reason: str = ""


@dataclass(frozen=True, slots=True)
class StoredResult:
    """The indexed columns of one stored evaluation (enough to rebuild the tree)."""

    id: int  # grows in commit order
    node_id: int
    verdict: Verdict
    reward: float
    time_us: float | None
    speedup_eager: float | None
    speedup_compile: float | None
    gpu_seconds: float = 0.0
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class ProfileRecord:
    """One profiler's report on a node, stored in the node's commit.

    The delayed-profiling hook returns one per profiler that ran, plus one named "stage1"
    whose finding ``stage1.bottleneck`` is the stage-1 class. The findings are the facts;
    the guidance a person or a prompt reads is derived from them (:attr:`guidance`).
    """

    node_id: int
    profiler: str
    status: str  # "ok" | "unavailable" | "failed" | "timeout"
    findings: tuple[Finding, ...] = ()
    artifact_path: str | None = None
    seconds: float = 0.0
    created_at: float = 0.0
    error: str = ""

    @property
    def guidance(self) -> tuple[str, ...]:
        """The one-line summaries of the ``hint.*`` findings, in order."""
        return tuple(f.summary for f in self.findings if f.is_hint and f.summary)


@dataclass(frozen=True, slots=True)
class LessonRecord:
    """What one move did to its parent (search memory).

    ``ratio`` is child speed / parent speed (> 1 = faster) when both were timed.
    """

    run_id: int
    node_id: int
    parent_id: int
    parent_sha256: str
    task_name: str
    task_sha256: str
    move_kind: str
    move_key: str
    description: str
    outcome: str
    ratio: float | None
    parent_time_us: float | None
    child_time_us: float | None
    text: str
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class PruneRecord:
    """A node the search stopped expanding, and why.

    kind: "dead_end" (its last m expansions all failed or were slower than it) or
    "exhausted:<class>" (the rewriter had nothing new of that class for it; node 0 = root).
    """

    run_id: int
    node_id: int
    kind: str
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class BestDecision:
    """One decision of the statistically gated best, with its test statistics."""

    run_id: int
    node_id: int
    previous_best_id: int | None
    accepted: bool
    reason: str
    p_value: float | None = None
    u_statistic: float | None = None
    median_new_us: float | None = None
    median_old_us: float | None = None
    improvement: float | None = None  # 1 - new median / old median
    n_new: int = 0
    n_old: int = 0
    retime_seconds: float = 0.0
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class Baseline:
    """Eager and torch.compile baseline measurements of a task in one environment, cached
    across runs. ``value`` is what the evaluator measured (JSON-able: raw samples of
    "eager" and "compiled", "compiled_error"), see ``cutegen.codegen.backend.BaselineCache``.
    """

    task_sha256: str
    environment: str  # fingerprint of the toolchain versions
    value: Mapping[str, Any]
    created_at: float = 0.0
