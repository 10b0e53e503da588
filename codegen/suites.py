"""Benchmark suites: named lists of tasks, each searched with a fixed budget.

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

``cutegen bench`` runs one search per task (``cutegen.cli.bench``) and reads each run back
from the store into a :class:`~cutegen.search.report.bench.TaskResult`; means, tables and
files are :mod:`cutegen.search.report.bench_table`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cutegen.errors import ConfigError, TaskError


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


#: Spellings in ``get_inputs`` of each dtype tag (a torch attribute or a tensor method).
_DTYPE_NAMES = {"bf16": ("bfloat16",), "fp16": ("float16", "half"), "fp64": ("float64", "double")}


def dtype_of_file(path: str | Path) -> str:
    """The dtype tag of a task file, read (not run) from its ``get_inputs``: "bf16" where it
    names ``torch.bfloat16`` or calls ``.bfloat16()``, else "fp16" / "fp64" likewise, else
    "fp32" (also for a file that does not parse or has no ``get_inputs``). Where the file
    defines it more than once, the last definition counts; a variant written by
    :func:`cutegen.codegen.variants.make_variant` has its variant's dtype. KernelBench level 1
    problem 97 builds fp16 inputs; its times must not join the fp32 means."""
    import ast

    from cutegen.codegen.variants import variant_dtype

    try:
        text = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return "fp32"
    cast = variant_dtype(text)  # a variant's get_inputs casts through a helper of its own
    if cast is not None:
        return next((tag for tag, spell in _DTYPE_NAMES.items() if cast in spell), "fp32")
    # the last definition is the one the module's import leaves bound (a file may define
    # get_inputs twice, a later one wrapping an earlier one)
    fn = next((n for n in reversed(tree.body) if isinstance(n, ast.FunctionDef)
               and n.name == "get_inputs"), None)
    names = {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)} if fn else set()
    return next((tag for tag, spell in _DTYPE_NAMES.items() if names & set(spell)), "fp32")


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


def with_precision(suite: Suite, precision: str, folder: str | Path, *,
                   atol: float | None = None, rtol: float | None = None) -> Suite:
    """``suite`` with every task in ``precision`` (:data:`cutegen.codegen.variants.PRECISIONS`)
    and held to ``atol`` / ``rtol`` where given: itself for "native" with neither; else each
    task not already as asked replaced by its variant
    (:func:`cutegen.codegen.variants.make_variant`, files under ``folder``), of that dtype, in
    the same tier, with the original's seed candidates (a seed written for one dtype only
    fails its evaluation, and the search goes on). A KernelBench task's variant is searched
    from its file, named after the task.

    Raises:
        TaskError: a task cannot be loaded, or its variant written.
    """
    held = [f"{k}={v:g}" for k, v in (("atol", atol), ("rtol", rtol)) if v is not None]
    if precision == "native" and not held:
        return suite
    from cutegen.codegen.tasks import load_kernelbench_task, resolve_task
    from cutegen.codegen.variants import make_variant

    tasks = []
    for t in suite.tasks:
        if t.dtype == precision and not held:
            tasks.append(t)
            continue
        kb = t.kernelbench
        orig = load_kernelbench_task(*kb) if kb is not None else resolve_task(t.task)
        cast = precision if t.dtype != precision else "native"
        v = make_variant(orig, cast, folder, atol=atol, rtol=rtol)
        tasks.append(SuiteTask(str(v.path), t.dtype if cast == "native" else precision,
                               t.tier, t.seed_candidates))
    name, words = suite.name, suite.description
    if precision != "native":
        name += f"-{precision}"
        words += (f", as {precision} variants (floating-point inputs and parameters cast; "
                  f"{precision}'s tolerance)")
    if held:
        name += "-" + "-".join(h.replace("=", "") for h in held)
        words += f", held to {', '.join(held)}"
    return Suite(name, words, tuple(tasks), suite.max_evals, suite.source)


def kernelbench_suite(root: str | Path, level: int, problems: Sequence[int] | None = None, *,
                      max_evals: int = 40) -> Suite:
    """A KernelBench level (all its problems, or those listed) as a suite; each task's dtype
    (which means it joins) is read from its file (:func:`dtype_of_file`).

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
        tasks.append(SuiteTask(str(path), dtype_of_file(path), f"KernelBench L{level}",
                               kernelbench=(str(r), level, prob)))
    return Suite(f"kernelbench-L{level}", f"KernelBench level {level} at upstream sizes",
                 tuple(tasks), max_evals, str(r))
