"""One task's benchmark result, read back from the store: :class:`TaskResult`.

``cutegen bench`` runs one search per task of a suite (:mod:`cutegen.codegen.suites`);
:func:`collect_task_result` turns the run into a :class:`TaskResult` (its gated best, times
and speedups with bootstrap intervals, the fraction of the roofline under the measured
ceilings, and the flags a person must look at before publishing a number);
:mod:`.bench_table` makes the means, tables and files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cutegen.codegen.evaluation import (
    COMPILE_FAILED,
    EAGER_FAILED,
    HOST_BOUND,
    baseline_failure,
    host_wait,
    one_line,
)
from cutegen.codegen.roofline import Ceilings
from cutegen.codegen.stats import bootstrap_ratio_ci
from cutegen.codegen.suites import SuiteTask
from cutegen.search.report.data import progress_points
from cutegen.search.storage import BaseStorage, FrozenRun


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What one task's search achieved, read back from the store.

    ``status``: "ok" (a verified, timed best), "compiled" (compile-only run: something
    compiled, nothing timed), "no_best" (the search ran, nothing was correct) or "error"
    (the search could not run: ``error`` says why). Fractions are of the roofline bound
    with the ceilings measured in this benchmark run; times are medians in µs.
    """

    task: str
    dtype: str
    tier: str
    status: str
    run: str = ""
    error: str = ""
    evaluations: int = 0
    verdicts: Mapping[str, int] = field(default_factory=dict)
    best_node: int | None = None
    best_us: float | None = None
    eager_us: float | None = None
    compile_us: float | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    ci_eager: tuple[float, float] | None = None
    ci_compile: tuple[float, float] | None = None
    bound_kind: str = ""
    bytes_moved: int = 0
    flops: int = 0
    frac_kernel: float | None = None
    frac_eager: float | None = None
    frac_compile: float | None = None
    evals_to_best: int | None = None
    gpu_min_to_best: float | None = None
    gpu_min_total: float = 0.0
    llm_usd: float = 0.0
    flags: tuple[str, ...] = ()
    #: for a search without a correct kernel: the verdict and message of its first failure
    failure: str = ""
    retimed_us: float | None = None
    busy_us: float | None = None
    #: why the eager / torch.compile baseline of the best kernel's evaluation was not timed
    #: (e.g. no room on the GPU for the eager forward beside the inputs): no speed-up then
    eager_error: str = ""
    compile_error: str = ""
    #: eager with cuDNN in TF32 (torch's default) where the task runs cuDNN convolutions or
    #: recurrent layers (Evaluation.eager_tf32): shown beside eager, never the speed-ups' base
    eager_tf32_us: float | None = None
    speedup_eager_tf32: float | None = None

    @property
    def correct(self) -> bool:
        """A verified, timed kernel (its speed-ups may still be missing: ``eager_error``)."""
        return self.status == "ok"


def bound_us(bytes_moved: int, flops: int, c: Ceilings) -> float:
    """max(bytes / B_copy, flops / F_gemm) in µs (PERFORMANCE.md §5)."""
    return max(bytes_moved / (c.bandwidth_gbs * 1e9), flops / (c.peak_tflops * 1e12)) * 1e6


#: A best whose re-timing differs from its own evaluation by more than this is flagged.
RETIME_DISAGREES = 0.03


def latest_retime_us(history: Sequence[Any], best_id: int) -> float | None:
    """The best node's median from the last gate re-timing that measured it (in fresh
    workers, interleaved with a challenger), or None if the gate never re-timed it."""
    got = None
    for d in history:  # oldest first
        if d.node_id == best_id and d.accepted and d.n_new and d.median_new_us:
            got = d.median_new_us
        elif d.previous_best_id == best_id and d.n_old and d.median_old_us:
            got = d.median_old_us
    return got


def sanity_flags(r: TaskResult, *, eval_flags: Sequence[str] = (),
                 suspicious: int = 0) -> tuple[str, ...]:
    """PERFORMANCE.md §6: what a person must look at before a number is published."""
    out: list[str] = []
    if r.retimed_us and r.best_us and abs(r.retimed_us / r.best_us - 1) > RETIME_DISAGREES:
        change = 100 * (r.retimed_us / r.best_us - 1)
        out.append(f"re-timed at {r.retimed_us:,.1f} us by the gate ({change:+.1f}% vs its "
                   f"evaluation's {r.best_us:,.1f} us, which the table keeps)")
    for who, f in (("kernel", r.frac_kernel), ("eager", r.frac_eager),
                   ("torch.compile", r.frac_compile)):
        if f is not None and f > 1.0:
            why = "timing or caching?"
            if who == "kernel" and r.bound_kind == "compute":
                # the FLOPs are the reference's operations: a kernel may do less arithmetic
                # (torch.diag(A) @ B as a row scaling); ncu re-timed it before it was kept
                why = ("fewer FLOPs than the reference's operations count, or timing? an "
                       "external profiler confirmed the time")
            out.append(f"{who} at {100 * f:.0f}% of the bound (> 100%: {why})")
    if r.eager_error:
        out.append(f"no eager baseline, so no speed-up: {r.eager_error}")
    if r.compile_error and not r.eager_error:  # after a failed eager forward it is not tried
        out.append(f"no torch.compile baseline: {r.compile_error}")
    if r.speedup_eager is not None and r.speedup_eager > 10:
        out.append(f"{r.speedup_eager:.1f}x vs eager (> 10x, KernelBench's threshold)")
    if (r.speedup_compile is not None and r.speedup_compile > 2 and r.frac_compile is not None
            and r.frac_compile >= 0.85):
        out.append(f"{r.speedup_compile:.2f}x vs torch.compile, which is already at "
                   f"{100 * r.frac_compile:.0f}% of the bound")
    wait = host_wait(r.busy_us, r.best_us)
    if wait is not None and wait >= HOST_BOUND:
        out.append(f"host-bound: the GPU worked {r.busy_us:,.1f} of the {r.best_us:,.1f} us "
                   "and waited on the host between launches for the rest")
    out += [f"evaluation flag: {f}" for f in eval_flags]
    if suspicious:
        out.append(f"{suspicious} candidate(s) judged suspicious (kept out of the best)")
    return tuple(out)


#: Characters of a failure's message kept in the bench's table of failures.
FAILURE_CHARS = 300


def first_failure(storage: BaseStorage, points: Sequence[Any]) -> str:
    """``verdict: message`` of the first evaluation of a run that was not correct (what a
    search without a correct kernel ran into), shortened to :data:`FAILURE_CHARS`."""
    for p in points:
        ev = storage.get_evaluation(p.node_id)
        if ev is None or ev.ok:
            continue
        return one_line(f"{p.verdict}: {ev.message}" if ev.message else p.verdict,
                        FAILURE_CHARS)
    return ""


def collect_task_result(storage: BaseStorage, run: FrozenRun, entry: SuiteTask,
                        ceilings: Ceilings) -> TaskResult:
    """Read one task's search back from the store into a :class:`TaskResult`."""
    points = progress_points(storage, run.id)
    verdicts: dict[str, int] = {}
    for p in points:
        verdicts[p.verdict] = verdicts.get(p.verdict, 0) + 1
    base = TaskResult(task=run.config.task_name or entry.label, dtype=entry.dtype,
                      tier=entry.tier, status="no_best", run=run.name,
                      evaluations=len(points), verdicts=verdicts,
                      gpu_min_total=points[-1].gpu_minutes if points else 0.0,
                      llm_usd=storage.llm_spent_usd(run.id))
    best = storage.get_best_node(run.id)
    ev = storage.get_evaluation(best.id) if best is not None else None
    if ev is None or ev.timing is None:
        status = "compiled" if verdicts.get("compiled") else "no_best"
        return replace(base, status=status, failure=first_failure(storage, points)
                       if status == "no_best" else "",
                       flags=sanity_flags(base, suspicious=verdicts.get("suspicious", 0)))
    assert best is not None
    timing = ev.timing
    first = next(p for p in points if p.best_node == best.id)
    rl = ev.roofline
    bound = bound_us(rl.bytes_moved, rl.flops, ceilings) if rl is not None else None

    def frac(t: float | None) -> float | None:
        return bound / t if bound and t else None

    def ci(b: Any) -> tuple[float, float] | None:
        if b is None or not b.samples_us or not timing.samples_us:
            return None
        return bootstrap_ratio_ci(b.samples_us, timing.samples_us)

    eager_us = ev.eager.median_us if ev.eager else None
    compile_us = ev.compiled.median_us if ev.compiled else None
    r = replace(base, status="ok",
                eager_error=one_line(baseline_failure(ev.details, EAGER_FAILED), FAILURE_CHARS),
                compile_error=one_line(baseline_failure(ev.details, COMPILE_FAILED),
                                       FAILURE_CHARS), best_node=best.id, best_us=ev.timing.median_us,
                eager_us=eager_us, compile_us=compile_us, speedup_eager=ev.speedup_eager,
                speedup_compile=ev.speedup_compile, ci_eager=ci(ev.eager),
                ci_compile=ci(ev.compiled), bound_kind=rl.kind if rl else "",
                bytes_moved=rl.bytes_moved if rl else 0, flops=rl.flops if rl else 0,
                frac_kernel=frac(ev.timing.median_us), frac_eager=frac(eager_us),
                frac_compile=frac(compile_us), evals_to_best=first.index,
                gpu_min_to_best=first.gpu_minutes, busy_us=ev.busy_us,
                eager_tf32_us=ev.eager_tf32.median_us if ev.eager_tf32 else None,
                speedup_eager_tf32=ev.speedup_eager_tf32,
                retimed_us=latest_retime_us(storage.get_best_history(run.id), best.id))
    return replace(r, flags=sanity_flags(r, eval_flags=ev.flags,
                                         suspicious=verdicts.get("suspicious", 0)))


def error_result(entry: SuiteTask, message: str, *, run: str = "") -> TaskResult:
    """A task whose search could not run (no seed candidate, a bad task file, ...)."""
    return TaskResult(task=entry.label, dtype=entry.dtype, tier=entry.tier, status="error",
                      run=run, error=" ".join(message.split())[:300])
