"""What a run report shows, gathered from the store into frozen records (no HTML here).

:func:`build_run_report` reads one run: every evaluation in commit order with the gated
best after it (for "best speedup against evaluations / GPU-minutes"), verdict counts, LLM
spending, the tree (:mod:`.graph`), the best node's path from its seed with the profiler
findings along it, the best kernel's evaluation with bootstrap intervals of its speedups,
and the environment the numbers were taken in. Everything is derived from stored rows, so
a report can be rebuilt at any time; a missing candidate file (a store copied without its
run folder) is reported, not fatal. :func:`find_source` is shared with :mod:`.export`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx

from cutegen.codegen.candidate import sha256_text
from cutegen.codegen.evaluation import Evaluation, Timing
from cutegen.errors import StorageError
from cutegen.search import session_live
from cutegen.search._node import FrozenNode
from cutegen.search.report.graph import best_path, build_graph
from cutegen.search.storage import BaseStorage, BestDecision, FrozenRun, Session


@dataclass(frozen=True, slots=True)
class Point:
    """One evaluation of the run, in commit order, with the gated best after it."""

    index: int  # 1-based count of evaluations so far
    node_id: int
    verdict: str
    speedup: float | None  # this candidate vs eager
    gpu_minutes: float  # cumulative GPU time after it (evaluations' GPU time, profiling, re-timing)
    best_speedup: float | None  # the gated best's speedup after it
    best_node: int | None


@dataclass(frozen=True, slots=True)
class PathStep:
    """One node on the path from the seed to the best, with what profilers said of it."""

    node_id: int
    move: str
    move_kind: str
    verdict: str | None
    time_us: float | None
    speedup: float | None
    ratio_vs_parent: float | None  # parent time / this time (> 1 = faster)
    guidance: tuple[str, ...] = ()
    findings: tuple[tuple[str, str, str], ...] = ()  # (profiler, key = value, summary)
    profiler_status: tuple[str, ...] = ()  # "ncu: unavailable (...)"


@dataclass(frozen=True, slots=True)
class FailedNode:
    """A node whose evaluation failed, with what the evaluator said (``cutegen nodes RUN
    --failed`` lists the same)."""

    node_id: int
    depth: int
    move: str
    verdict: str
    stage: str
    message: str


@dataclass(frozen=True, slots=True)
class LLMSummary:
    """What the run spent on LLM calls."""

    calls: int = 0  # logical calls (retries of one call counted once)
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    by_model: Mapping[str, float] = field(default_factory=dict)
    outcomes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything ``cutegen report`` draws, for one run (see the module docstring)."""

    run: FrozenRun
    state: str
    generated_at: float
    points: tuple[Point, ...]
    verdicts: Mapping[str, int]
    graph: nx.DiGraph
    node: FrozenNode | None  # the node reported on: the gated best, or the one asked for
    is_gated_best: bool
    evaluation: Evaluation | None
    path: tuple[PathStep, ...]
    source: str | None
    source_note: str
    ci_eager: tuple[float, float] | None
    ci_compile: tuple[float, float] | None
    best_history: tuple[BestDecision, ...]
    llm: LLMSummary
    gpu_seconds: float
    wall_seconds: float
    sessions: tuple[Session, ...]
    prunes: Mapping[str, int]
    tolerance: str
    gate_rejections: tuple[BestDecision, ...] = ()  # challengers the gate kept out
    failures: tuple[FailedNode, ...] = ()  # every failed node, in node order


def find_source(storage: BaseStorage, run: FrozenRun, node: FrozenNode) -> tuple[str | None, str]:
    """A node's candidate source, and a note on where it came from.

    The run folder is tried first; when the file is missing (a store copied without its
    run folder), a bundled seed or a seed file named in the run's settings with the same
    sha256 stands in. Returns ``(None, why)`` when nothing matches.
    """
    try:
        return storage.get_source(node.id), f"{node.source_path} in the run folder"
    except StorageError as e:
        missing = str(e)
    candidates: list[Path] = []
    try:
        from cutegen.codegen.tasks import seeds_dir

        candidates += sorted(seeds_dir().glob("*.py"))
    except (ImportError, OSError):  # pragma: no cover - a partial install
        pass
    candidates += [Path(s.get("path", "")) for s in
                   dict(run.config.settings).get("seed_candidates", []) if s.get("path")]
    for p in candidates:
        try:
            text = p.read_text(encoding="utf-8")
        except OSError:
            continue
        if sha256_text(text) == node.source_sha256:
            return text, (f"{p} (same sha256; the run folder's copy is missing: {missing})")
    return None, f"not available: {missing}"


def tolerance_text(task_name: str, task_path: str) -> str:
    """How outputs were compared, for the task's dtype (from its name) and overrides."""
    from cutegen.codegen.numerics import FP32_STEPS, K_MAX, K_RMSE, TOLERANCES

    dtype = next((d for tag, d in (("bf16", "bfloat16"), ("fp16", "float16"),
                                   ("fp64", "float64")) if tag in task_name), "float32")
    atol, rtol = TOLERANCES[dtype]
    override = _task_tolerance(task_path)
    if override:
        atol = float(override.get("atol", atol))
        rtol = float(override.get("rtol", rtol))
    src = "the task's TOLERANCE" if override else f"the {dtype} row of the tolerance table"
    return (f"|out - ref64| <= atol + rtol*|ref64| with atol={atol:g}, rtol={rtol:g} ({src}; "
            f"ref64 = the task's Model in float64), or as accurate as the task's own dtype: "
            f"rmse <= {K_RMSE:g}x and max error <= {K_MAX:g}x the native reference's (+ atol)"
            + ("" if dtype == "float64" else
               f", at least {FP32_STEPS:g} fp32 rounding steps of ref64's rms and largest value"))


def _task_tolerance(task_path: str) -> dict[str, float] | None:
    from cutegen.codegen.tasks import declared_tolerance

    try:
        return declared_tolerance(Path(task_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def progress_points(storage: BaseStorage, run_id: int) -> tuple[Point, ...]:
    """Evaluations in commit order with cumulative GPU time and the gated best after each.

    A gate decision is committed with the evaluation of the node it judged, so its
    re-timing seconds count from that evaluation on.
    """
    results = storage.get_results(run_id)
    speed = {r.node_id: r.speedup_eager for r in results}
    decided: dict[int, list[BestDecision]] = {}
    for d in storage.get_best_history(run_id):
        decided.setdefault(d.node_id, []).append(d)
    out: list[Point] = []
    gpu_s, best = 0.0, None
    for i, r in enumerate(results, start=1):
        gpu_s += r.gpu_seconds
        for d in decided.get(r.node_id, ()):
            gpu_s += d.retime_seconds
            if d.accepted:
                best = d.node_id
        out.append(Point(i, r.node_id, r.verdict.value, r.speedup_eager, gpu_s / 60.0,
                         speed.get(best) if best is not None else None, best))
    return tuple(out)


def _path_steps(storage: BaseStorage, node: FrozenNode) -> tuple[PathStep, ...]:
    steps: list[PathStep] = []
    parent_time: float | None = None
    for n in storage.lineage(node.id):
        ev = storage.get_evaluation(n.id)
        t = ev.time_us if ev else None
        guidance: list[str] = []
        findings: list[tuple[str, str, str]] = []
        status: list[str] = []
        for p in storage.get_profiles(n.id):
            guidance += [g for g in p.guidance if g not in guidance]
            if p.status != "ok":
                status.append(f"{p.profiler}: {p.status}")
            for f in p.findings:
                findings.append((p.profiler, f"{f.key} = {f.value}", f.summary))
        ratio = parent_time / t if parent_time and t else None
        steps.append(PathStep(n.id, n.move.description, n.move.kind,
                              ev.verdict.value if ev else None, t,
                              ev.speedup_eager if ev else None, ratio, tuple(guidance),
                              tuple(findings), tuple(status)))
        parent_time = t
    return tuple(steps)


def _ci(base: Timing | None, cand: Timing | None) -> tuple[float, float] | None:
    if not (base and cand and base.samples_us and cand.samples_us):
        return None
    from cutegen.codegen.stats import bootstrap_ratio_ci

    return bootstrap_ratio_ci(base.samples_us, cand.samples_us)


def llm_summary(storage: BaseStorage, run_id: int) -> LLMSummary:
    """Calls, tokens and dollars of a run's LLM calls (every attempt is charged)."""
    calls = storage.get_llm_calls(run_id)
    by_model: dict[str, float] = {}
    outcomes: dict[str, int] = {}
    for c in calls:
        by_model[c.model] = by_model.get(c.model, 0.0) + (c.cost_usd or 0.0)
        outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1
    logical = {c.call_id or f"#{i}" for i, c in enumerate(calls)}
    return LLMSummary(len(logical), len(calls), sum(c.prompt_tokens or 0 for c in calls),
                      sum(c.completion_tokens or 0 for c in calls),
                      sum(c.cost_usd or 0.0 for c in calls),
                      by_model, outcomes)


def failed_nodes(storage: BaseStorage, run_id: int) -> tuple[FailedNode, ...]:
    """The run's nodes whose evaluation failed, in node order, with their messages."""
    out = []
    for n in storage.get_nodes(run_id):
        ev = storage.get_evaluation(n.id)
        if ev is not None and not ev.ok:
            out.append(FailedNode(n.id, n.depth, n.move.description, ev.verdict.value,
                                  ev.stage.label, ev.message))
    return tuple(out)


def run_state(run: FrozenRun, sessions: list[Session], now: float) -> str:
    """The run's status, with "running" read as "interrupted" when no session is alive."""
    live = any(session_live(s, now=now) for s in sessions)
    return "interrupted" if run.status == "running" and not live else run.status


def build_run_report(storage: BaseStorage, run: FrozenRun, *, node_id: int | None = None,
                     now: float | None = None) -> RunReport:
    """Gather a run's report from the store.

    Args:
        node_id: report on this node instead of the run's gated best.
        now: the time stamped on the report (default: the clock).

    Raises:
        StorageError: the node does not exist or belongs to another run.
    """
    now = time.time() if now is None else now
    best = storage.get_best_node(run.id)
    node = best
    if node_id is not None:
        node = storage.get_node(node_id)
        if node.run_id != run.id:
            raise StorageError(f"node {node_id} does not belong to run {run.name!r}")
    gated = node is not None and best is not None and node.id == best.id
    history = storage.get_best_history(run.id)
    results = storage.get_results(run.id)
    verdicts: dict[str, int] = {}
    for r in results:
        verdicts[r.verdict.value] = verdicts.get(r.verdict.value, 0) + 1
    sessions = storage.get_sessions(run.id)
    prunes: dict[str, int] = {}
    for p in storage.get_prunes(run.id):
        prunes[p.kind.split(":")[0]] = prunes.get(p.kind.split(":")[0], 0) + 1
    ev = storage.get_evaluation(node.id) if node is not None else None
    source, note = find_source(storage, run, node) if node is not None else (None, "")
    graph = build_graph(storage, run.id)
    return RunReport(
        run=run, state=run_state(run, sessions, now), generated_at=now,
        points=progress_points(storage, run.id), verdicts=verdicts, graph=graph, node=node,
        is_gated_best=gated, evaluation=ev,
        path=_path_steps(storage, node) if node is not None else (),
        source=source, source_note=note,
        ci_eager=_ci(ev.eager, ev.timing) if ev else None,
        ci_compile=_ci(ev.compiled, ev.timing) if ev else None,
        best_history=tuple(d for d in history if d.accepted),
        gate_rejections=tuple(d for d in history if not d.accepted),
        llm=llm_summary(storage, run.id),
        gpu_seconds=sum(r.gpu_seconds for r in results)
        + sum(d.retime_seconds for d in history),
        wall_seconds=sum(max(0.0, (s.ended_at or s.heartbeat_at) - s.started_at)
                         for s in sessions),
        sessions=tuple(sessions), prunes=prunes, failures=failed_nodes(storage, run.id),
        tolerance=tolerance_text(run.config.task_name, run.config.task_path))


def path_ids(report: RunReport) -> list[int]:
    """Node ids from the virtual root to the reported node (empty without one)."""
    if report.node is None:
        return []
    return best_path(report.graph, report.node.id)


def timing_summary(t: Timing) -> dict[str, Any]:
    """min / p10 / median / p90 / max / mean / relative spread of a Timing's samples."""
    xs = sorted(t.samples_us)
    out: dict[str, Any] = {"n": t.n, "median": t.median_us, "p10": t.p10_us, "p90": t.p90_us,
                           "spread": t.spread, "method": t.method}
    if xs:
        out.update(min=xs[0], max=xs[-1], mean=sum(xs) / len(xs))
    return out

