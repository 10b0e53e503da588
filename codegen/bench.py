"""The benchmark suite: suites of tasks with fixed budgets, and one result record per task.

A **suite** is a TOML file (bundled ones in ``benchmarks/suites/``: ``tierA``, ``fp32``,
``gemm``, ``all``; or any path), or a KernelBench level (:func:`kernelbench_suite`)::

    name = "tierA"
    description = "..."
    tier = "A"            # groups tasks for the means (with the dtype)
    max_evals = 40        # budget per task (``--max-evals`` overrides)
    include = ["fp32"]    # other suites whose tasks are added
    [[tasks]]
    task = "softmax_bf16" # a bundled task name, or a path relative to the suite file
    dtype = "bf16"        # default: from the task name (bf16 / fp16 / else fp32)
    seed_candidates = ["my_seed.py"]   # optional, relative to the suite file

``cutegen bench`` runs one search per task (``cutegen.cli_bench``) and reads each run back
from the store with :func:`collect_task_result`. Means, tables and files are
:mod:`cutegen.codegen._bench_table`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutegen.codegen.roofline import Ceilings
from cutegen.errors import ConfigError, TaskError

if TYPE_CHECKING:
    from cutegen.search.storage import BaseStorage, FrozenRun


@dataclass(frozen=True, slots=True)
class SuiteTask:
    """One task of a suite.

    Attributes:
        task: a bundled task name or a task file path (absolute after loading).
        dtype: "bf16", "fp16" or "fp32": tasks of different dtypes never share a mean.
        tier: the group the task belongs to (PERFORMANCE.md tiers, or the suite's name).
        seed_candidates: candidate files to start the search from (absolute paths).
        kernelbench: ``(checkout, level, problem)`` for a KernelBench task, else None.
    """

    task: str
    dtype: str = "fp32"
    tier: str = ""
    seed_candidates: tuple[str, ...] = ()
    kernelbench: tuple[str, int, int] | None = None

    @property
    def label(self) -> str:
        if self.kernelbench is not None:
            return f"kb_L{self.kernelbench[1]}_P{self.kernelbench[2]}"
        return Path(self.task).stem if self.task.endswith(".py") else self.task


@dataclass(frozen=True, slots=True)
class Suite:
    """A named list of tasks with the budget each task's search gets."""

    name: str
    description: str
    tasks: tuple[SuiteTask, ...]
    max_evals: int = 40
    source: str = ""


def dtype_of(name: str) -> str:
    """The dtype tag of a task from its name ("softmax_bf16" -> "bf16"); fp32 otherwise."""
    for tag in ("bf16", "fp16", "fp64"):
        if re.search(rf"(^|_){tag}($|_)", name):
            return tag
    return "fp32"


def suites_dir() -> Path:
    return Path(str(resources.files("cutegen.benchmarks") / "suites"))


def bundled_suite_names() -> list[str]:
    return sorted(p.stem for p in suites_dir().glob("*.toml"))


def _toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError as e:
            raise ConfigError("suite files need Python >= 3.11 or the tomli package") from e
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read suite file {path}: {e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e


def load_suite(spec: str, *, _seen: tuple[str, ...] = ()) -> Suite:
    """Load a suite by bundled name (see :func:`bundled_suite_names`) or TOML path.

    Raises:
        ConfigError: unknown suite, bad TOML, a task entry without ``task``, an include cycle.
    """
    p = Path(spec).expanduser()
    if p.suffix != ".toml" and not p.exists():
        p = suites_dir() / f"{spec}.toml"
        if not p.is_file():
            raise ConfigError(f"no suite named {spec!r}; bundled suites: "
                              f"{', '.join(bundled_suite_names())} (or give a .toml path)")
    if not p.is_file():
        raise ConfigError(f"suite file not found: {spec}")
    key = str(p.resolve())
    if key in _seen:
        raise ConfigError(f"suite {p} includes itself (through {' -> '.join(_seen)})")
    d = _toml(p)
    name = str(d.get("name") or p.stem)
    tier = str(d.get("tier") or name)
    tasks: list[SuiteTask] = []
    for inc in d.get("include", []):
        tasks += load_suite(str(inc), _seen=(*_seen, key)).tasks
    for i, t in enumerate(d.get("tasks", [])):
        if not isinstance(t, Mapping) or not t.get("task"):
            raise ConfigError(f"{p}: tasks[{i}] needs a 'task' (a bundled name or a file)")
        spec_t = str(t["task"])
        if spec_t.endswith(".py"):
            spec_t = str((p.parent / spec_t).resolve())
        seeds = tuple(str((p.parent / s).resolve()) for s in t.get("seed_candidates", []))
        tasks.append(SuiteTask(spec_t, str(t.get("dtype") or dtype_of(Path(spec_t).stem)),
                               str(t.get("tier") or tier), seeds))
    if not tasks:
        raise ConfigError(f"suite {p} has no tasks")
    try:
        max_evals = int(d.get("max_evals", 40))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{p}: max_evals must be an integer") from e
    return Suite(name, str(d.get("description", "")), tuple(tasks), max_evals, str(p))


def kernelbench_suite(root: str | Path, level: int, problems: Sequence[int] | None = None, *,
                      max_evals: int = 40) -> Suite:
    """A KernelBench level (all its problems, or those listed) as a suite of fp32 tasks.

    Raises:
        TaskError: the checkout, level or a problem is missing.
    """
    from cutegen.codegen.tasks import find_kernelbench_task

    r = Path(root).expanduser()
    if problems is None:
        base = next((b for b in (r / "KernelBench" / f"level{level}", r / f"level{level}")
                     if b.is_dir()), None)
        if base is None:
            raise TaskError(f"{root} does not look like a KernelBench checkout "
                            f"(no level{level}/ folder)")
        problems = sorted(int(m.group(1)) for f in base.glob("*.py")
                          if (m := re.match(r"(\d+)_", f.name)))
    tasks = []
    for prob in problems:
        path = find_kernelbench_task(r, level, prob)
        tasks.append(SuiteTask(str(path), "fp32", f"KernelBench L{level}",
                               kernelbench=(str(r), level, prob)))
    return Suite(f"kernelbench-L{level}", f"KernelBench level {level} at upstream sizes, fp32",
                 tuple(tasks), max_evals, str(r))


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
    retimed_us: float | None = None

    @property
    def correct(self) -> bool:
        return self.status == "ok" and self.speedup_eager is not None


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
            out.append(f"{who} at {100 * f:.0f}% of the bound (> 100%: timing or caching?)")
    if r.speedup_eager is not None and r.speedup_eager > 10:
        out.append(f"{r.speedup_eager:.1f}x vs eager (> 10x, KernelBench's threshold)")
    if (r.speedup_compile is not None and r.speedup_compile > 2 and r.frac_compile is not None
            and r.frac_compile >= 0.85):
        out.append(f"{r.speedup_compile:.2f}x vs torch.compile, which is already at "
                   f"{100 * r.frac_compile:.0f}% of the bound")
    out += [f"evaluation flag: {f}" for f in eval_flags]
    if suspicious:
        out.append(f"{suspicious} candidate(s) judged suspicious (kept out of the best)")
    return tuple(out)


def collect_task_result(storage: BaseStorage, run: FrozenRun, entry: SuiteTask,
                        ceilings: Ceilings) -> TaskResult:
    """Read one task's search back from the store into a :class:`TaskResult`."""
    from dataclasses import replace

    from cutegen.codegen.stats import bootstrap_ratio_ci
    from cutegen.search._report_data import progress_points

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
        return replace(base, status=status,
                       flags=sanity_flags(base, suspicious=verdicts.get("suspicious", 0)))
    assert best is not None
    first = next(p for p in points if p.best_node == best.id)
    rl = ev.roofline
    bound = bound_us(rl.bytes_moved, rl.flops, ceilings) if rl is not None else None

    def frac(t: float | None) -> float | None:
        return bound / t if bound and t else None

    def ci(b: Any) -> tuple[float, float] | None:
        if b is None or not b.samples_us or not ev.timing.samples_us:
            return None
        return bootstrap_ratio_ci(b.samples_us, ev.timing.samples_us)

    eager_us = ev.eager.median_us if ev.eager else None
    compile_us = ev.compiled.median_us if ev.compiled else None
    r = replace(base, status="ok", best_node=best.id, best_us=ev.timing.median_us,
                eager_us=eager_us, compile_us=compile_us, speedup_eager=ev.speedup_eager,
                speedup_compile=ev.speedup_compile, ci_eager=ci(ev.eager),
                ci_compile=ci(ev.compiled), bound_kind=rl.kind if rl else "",
                bytes_moved=rl.bytes_moved if rl else 0, flops=rl.flops if rl else 0,
                frac_kernel=frac(ev.timing.median_us), frac_eager=frac(eager_us),
                frac_compile=frac(compile_us), evals_to_best=first.index,
                gpu_min_to_best=first.gpu_minutes,
                retimed_us=latest_retime_us(storage.get_best_history(run.id), best.id))
    return replace(r, flags=sanity_flags(r, eval_flags=ev.flags,
                                         suspicious=verdicts.get("suspicious", 0)))


def error_result(entry: SuiteTask, message: str, *, run: str = "") -> TaskResult:
    """A task whose search could not run (no seed candidate, a bad task file, ...)."""
    return TaskResult(task=entry.label, dtype=entry.dtype, tier=entry.tier, status="error",
                      run=run, error=" ".join(message.split())[:300])
