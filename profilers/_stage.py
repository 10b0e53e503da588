"""Delayed, two-stage profiling.

Stage 1 (:func:`classify`) is pure: it reads the evaluator's own numbers (median time,
roofline bound) and names what limits a node. Stage 2 (:func:`run_stage2`) runs only the
profilers whose ``applies_to`` accepts that class, and returns the time it took so the
search can charge it to its budget. :func:`should_profile` decides when a node is worth
it at all (correct, and deep enough for its structure to have settled), and
:func:`guidance` / :func:`hints` turn reports into what rewriters consume.
"""

from __future__ import annotations

import dataclasses
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from cutegen.errors import ConfigError, PluginError
from cutegen.profilers._base import (
    Bottleneck,
    BottleneckKind,
    FindingValue,
    Profiler,
    ProfileReport,
    ProfileTarget,
    Status,
)

if TYPE_CHECKING:
    from cutegen.codegen.evaluation import Evaluation

ProfileMode = Literal["auto", "force", "off"]
PROFILE_MODES: tuple[str, ...] = ("auto", "force", "off")


def classify(
    evaluation: Evaluation | None,
    *,
    short_kernel_us: float = 10.0,
    latency_fraction: float = 0.15,
) -> Bottleneck:
    """Stage 1: classify a node from its Evaluation alone (pure, no GPU).

    Rules, in order: not timed -> ``unknown``; shorter than ``short_kernel_us`` and below
    half of its roofline -> ``latency`` (launch and dependency latency dominate); no
    roofline -> ``unknown``; below ``latency_fraction`` of the roofline -> ``latency``
    (neither bandwidth nor compute is saturated: occupancy, stalls, serialization);
    otherwise the task's roofline kind (``memory`` or ``compute``).

    Args:
        evaluation: the node's Evaluation (``None`` for a node without one).
        short_kernel_us: times below this count as very short kernels.
        latency_fraction: roofline fractions below this count as latency-bound.

    Returns:
        The :class:`Bottleneck`.
    """
    if evaluation is None or evaluation.time_us is None:
        return Bottleneck(BottleneckKind.UNKNOWN, reason="not timed on a GPU")
    t = float(evaluation.time_us)
    n_kernels = len(evaluation.kernels)
    rl = evaluation.roofline
    frac = evaluation.roofline_fraction
    common: dict[str, Any] = {"roofline": rl.kind if rl else None, "fraction": frac, "time_us": t,
              "n_kernels": n_kernels}
    if t < short_kernel_us and (frac is None or frac < 0.5):
        return Bottleneck(
            BottleneckKind.LATENCY,
            reason=f"runs {t:.1f} us, under {short_kernel_us:g} us: launch- and latency-bound",
            **common,
        )
    if rl is None or frac is None:
        return Bottleneck(BottleneckKind.UNKNOWN, reason="no roofline for this task", **common)
    if frac < latency_fraction:
        return Bottleneck(
            BottleneckKind.LATENCY,
            reason=(f"at {frac:.0%} of its {rl.kind} roofline: neither bandwidth nor compute "
                    "is saturated (latency, occupancy or serialization)"),
            **common,
        )
    kind = BottleneckKind.COMPUTE if rl.kind == "compute" else BottleneckKind.MEMORY
    return Bottleneck(kind, reason=f"{rl.kind}-bound at {frac:.0%} of its roofline", **common)


def should_profile(
    depth: int,
    evaluation: Evaluation | None,
    *,
    profile_depth: int,
    mode: ProfileMode = "auto",
) -> bool:
    """Whether a node gets stage-2 profiling.

    ``off``: never. ``force``: every successful node. ``auto``: successful nodes at depth
    ``>= profile_depth`` (delayed profiling: a branch's structure settles before its
    details are worth measuring). Successful means verdict ``correct`` (or ``compiled`` in
    compile-only mode, where only GPU-free profilers such as ``sass`` will apply).

    Raises:
        ConfigError: for an unknown mode or a negative ``profile_depth``.
    """
    if mode not in PROFILE_MODES:
        raise ConfigError(f"profile mode must be one of {', '.join(PROFILE_MODES)}, got {mode!r}")
    if profile_depth < 0:
        raise ConfigError(f"profile_depth must be >= 0, got {profile_depth}")
    if mode == "off" or evaluation is None or not evaluation.ok:
        return False
    return mode == "force" or depth >= profile_depth


def run_stage2(
    profilers: Iterable[Profiler] | Mapping[str, Profiler],
    target: ProfileTarget,
    bottleneck: Bottleneck,
    *,
    timeout_s: float,
    budget_s: float | None = None,
    strict: bool = False,
) -> tuple[tuple[ProfileReport, ...], float]:
    """Stage 2: run the profilers that apply to this bottleneck, one after another.

    Each profiler gets ``target`` with ``bottleneck`` filled in and its own sub-folder
    ``target.workdir / <name>`` (created here). A profiler that is not available yields an
    ``unavailable`` report without being called. A report's ``seconds`` is set to the
    wall time its call took.

    Args:
        profilers: the profilers, e.g. ``available_profilers(pm)``.
        target: the candidate.
        bottleneck: the stage-1 class (:func:`classify`).
        timeout_s: limit for one profiler.
        budget_s: limit for all of them together; profilers left when it is spent get a
            ``timeout`` report without being called.
        strict: re-raise a profiler's exception as :class:`PluginError` (tests, contract
            checks) instead of turning it into a ``failed`` report (searches, so that one
            broken plugin cannot end a run).

    Returns:
        ``(reports, seconds)``: reports in profiler order, and the total wall time.

    Raises:
        PluginError: only when ``strict`` and a profiler broke the contract.
    """
    items = list(profilers.values()) if isinstance(profilers, Mapping) else list(profilers)
    target = dataclasses.replace(target, bottleneck=bottleneck)
    t_start = time.monotonic()
    reports: list[ProfileReport] = []
    for prof in items:
        if not prof.applies_to(bottleneck):
            continue
        left = None if budget_s is None else budget_s - (time.monotonic() - t_start)
        if left is not None and left <= 0:
            reports.append(ProfileReport(prof.name, Status.TIMEOUT,
                                         error="the profiling budget was spent before this ran"))
            continue
        reports.append(_run_one(prof, target, timeout_s if left is None else min(timeout_s, left),
                                strict=strict))
    return tuple(reports), time.monotonic() - t_start


def _run_one(prof: Profiler, target: ProfileTarget, timeout_s: float, *, strict: bool) -> ProfileReport:
    t0 = time.monotonic()
    try:
        if not prof.is_available():
            return ProfileReport(prof.name, Status.UNAVAILABLE,
                                 error=f"{prof.name} is not available here",
                                 seconds=time.monotonic() - t0)
        workdir = target.workdir / prof.name
        workdir.mkdir(parents=True, exist_ok=True)
        report = prof.profile(dataclasses.replace(target, workdir=workdir), timeout_s=timeout_s)
        if not isinstance(report, ProfileReport):
            raise PluginError(f"profiler {prof.name!r} returned {type(report).__name__}, "
                              "not a ProfileReport")
        if report.profiler != prof.name:
            raise PluginError(f"profiler {prof.name!r} returned a report named {report.profiler!r}")
    except Exception as e:
        if strict:
            if isinstance(e, PluginError):
                raise
            raise PluginError(f"profiler {prof.name!r} raised {type(e).__name__}: {e}") from e
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {where.filename}:{where.lineno}" if where else ""
        return ProfileReport(prof.name, Status.FAILED,
                             error=f"profiler bug: {type(e).__name__}: {e}{at}",
                             seconds=time.monotonic() - t0)
    return dataclasses.replace(report, seconds=time.monotonic() - t0)


def guidance(reports: Sequence[ProfileReport], *, limit: int = 8) -> tuple[str, ...]:
    """One-line guidance for rewriters: the summaries of ``hint.*`` findings.

    Only ``ok`` reports count; lines keep report order and are de-duplicated.

    Args:
        reports: the node's reports.
        limit: at most this many lines.

    Returns:
        The lines, ready to quote in a prompt.
    """
    out: list[str] = []
    for r in reports:
        if not r.ok:
            continue
        for f in r.findings:
            if f.is_hint and f.summary and f.summary not in out:
                out.append(f.summary)
    return tuple(out[:limit])


def hints(reports: Sequence[ProfileReport]) -> dict[str, FindingValue]:
    """Machine-readable hints for the built-in rewriter: ``hint.*`` key -> value.

    The first report that sets a key wins. Keys the built-ins set (value in brackets):
    ``hint.vector_width`` (target bits of global accesses), ``hint.spills`` (local loads +
    stores), ``hint.tensor_cores`` (``"wgmma"``), ``hint.precision`` (what the MMAs compute
    in, when undeclared), ``hint.occupancy`` (what limits it: "registers",
    "shared_memory", "warps", "blocks" or "unknown"), ``hint.coalescing`` (% of fetched
    bytes used), ``hint.dram`` (% of DRAM peak), ``hint.stall`` (top stall reason),
    ``hint.tensor_pipe`` (% busy), ``hint.fuse_kernels`` (kernels per call),
    ``hint.launch_overhead`` (host us per call), ``hint.memcpy`` (copies per call),
    ``hint.loads_in_flight`` (1: each global load waits for the one before it).
    """
    out: dict[str, FindingValue] = {}
    for r in reports:
        if not r.ok:
            continue
        for f in r.findings:
            if f.is_hint and f.key not in out:
                out[f.key] = f.value
    return out
