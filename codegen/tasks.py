"""Tasks: KernelBench-format reference modules, found by path, by bundled name or in a checkout.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``,
with its sizes as module-level globals. Optional extras that cutegen reads:

* ``VERIFY_SHAPES = [{"batch_size": 1}, {"batch_size": 127, "dim": 1000}]``: overrides of
  the size globals for hidden verification shapes (the main shape is always verified);
* ``INPUT_DISTRIBUTIONS = ["randn", "uniform", ...]``: the input distributions that are
  valid for this task (default: all of :data:`cutegen.codegen.inputs.DISTRIBUTIONS`);
* ``TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}``: overrides the per-dtype table.

This module only reads the file; it never imports it. The reference is imported and run by
the trusted reference worker (``cutegen.codegen.eval.refworker``), which reports a reference that
raises or inputs that cannot be used as a :class:`~cutegen.errors.TaskError`.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cutegen.codegen.candidate import parse_python, sha256_text
from cutegen.errors import TaskError

REQUIRED = ("Model", "get_inputs", "get_init_inputs")


@dataclass(frozen=True, slots=True)
class Task:
    """A reference problem.

    Attributes:
        name: short name ("softmax_bf16", "kb_L1_P23_Softmax", or the file stem).
        path: the file the reference lives in (read by the reference worker).
        source: the file's text when loaded (its hash identifies the task).
        origin: "bundled", "file" or "kernelbench".
    """

    name: str
    path: Path
    source: str
    origin: str = "file"

    @property
    def sha256(self) -> str:
        return sha256_text(self.source)

    def changed_on_disk(self) -> bool:
        """True if the file no longer holds the text this task was loaded with."""
        try:
            return self.path.read_text(encoding="utf-8") != self.source
        except OSError:
            return True


def check_task_source(source: str, *, where: str = "task") -> None:
    """Static checks on a task file: it parses and defines the three required names.

    Raises:
        TaskError: naming the problem (syntax error with its line, or the missing names).
    """
    try:
        tree = parse_python(source)
    except SyntaxError as e:
        raise TaskError(f"{where}: syntax error at line {e.lineno}: {e.msg}") from e
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [n for n in REQUIRED if n not in defined]
    if missing:
        raise TaskError(
            f"{where}: not a KernelBench-format task: missing {', '.join(missing)} "
            "(a task defines class Model, get_inputs() and get_init_inputs())"
        )


def declared_tolerance(source: str) -> dict[str, float] | None:
    """The task's own ``TOLERANCE`` (``{"atol": .., "rtol": ..}``, either key may be missing),
    read from its text without running it: the last top-level assignment wins, as it does
    when the file runs (a tolerance variant appends one, :mod:`cutegen.codegen.variants`).
    None where the task sets none, or sets one that is not a literal dict of numbers."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    found: dict[str, float] | None = None
    for n in tree.body:
        if (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TOLERANCE"
                                              for t in n.targets)):
            try:
                v = ast.literal_eval(n.value)
                found = ({str(k): float(x) for k, x in v.items() if k in ("atol", "rtol")}
                         if isinstance(v, dict) else None)
            except (ValueError, TypeError, SyntaxError):
                found = None
    return found


def load_task_file(path: str | Path, *, name: str | None = None, origin: str = "file") -> Task:
    """Load a task from a file path.

    Raises:
        TaskError: the file is missing, unreadable, or fails :func:`check_task_source`.
    """
    p = Path(path).expanduser().resolve()
    if not p.is_file():
        raise TaskError(f"task file not found: {path}")
    try:
        source = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read task file {p}: {e}") from e
    check_task_source(source, where=str(p))
    return Task(name=name or p.stem, path=p, source=source, origin=origin)


def bundled_dir() -> Path:
    return Path(str(resources.files("cutegen.benchmarks") / "tasks"))


def seeds_dir() -> Path:
    return Path(str(resources.files("cutegen.benchmarks") / "seeds"))


def bundled_task_names() -> list[str]:
    return sorted(p.stem for p in bundled_dir().glob("*.py") if not p.name.startswith("_"))


def load_bundled_task(name: str) -> Task:
    """Load a task of the bundled suite by name (see ``cutegen tasks``).

    Raises:
        TaskError: no bundled task has that name (the message lists close matches).
    """
    p = bundled_dir() / f"{name}.py"
    if not p.is_file():
        names = bundled_task_names()
        close = [n for n in names if name.split("_")[0] in n] or names
        raise TaskError(f"no bundled task named {name!r}; try one of: {', '.join(close)}")
    return load_task_file(p, name=name, origin="bundled")


def find_kernelbench_task(root: str | Path, level: int, problem: int) -> Path:
    """Locate ``level{L}/{problem}_*.py`` in a KernelBench checkout (repo root or its
    ``KernelBench/`` folder).

    Raises:
        TaskError: the checkout or the problem is not there.
    """
    r = Path(root).expanduser()
    for base in (r / "KernelBench" / f"level{level}", r / f"level{level}"):
        if base.is_dir():
            hits = sorted(p for p in base.glob(f"{problem}_*.py"))
            if not hits:
                raise TaskError(f"KernelBench level {level} has no problem {problem} in {base}")
            return hits[0]
    raise TaskError(f"{root} does not look like a KernelBench checkout (no level{level}/ folder)")


def load_kernelbench_task(root: str | Path, level: int, problem: int) -> Task:
    p = find_kernelbench_task(root, level, problem)
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", p.stem)
    return load_task_file(p, name=f"kb_L{level}_P{stem}", origin="kernelbench")


def resolve_task(spec: str | None, *, kernelbench: str | None = None, level: int | None = None,
                 problem: int | None = None) -> Task:
    """Resolve a command-line task spec: a path, a bundled name, or a KernelBench triple.

    Raises:
        TaskError: nothing matches, with what was tried.
    """
    if kernelbench is not None:
        if level is None or problem is None:
            raise TaskError("--kernelbench needs --level and --problem")
        return load_kernelbench_task(kernelbench, level, problem)
    if not spec:
        raise TaskError("no task given: pass a task file, a bundled name (see `cutegen tasks`), "
                        "or --kernelbench DIR --level L --problem P")
    p = Path(spec).expanduser()
    if p.suffix == ".py" or p.exists():
        return load_task_file(p)
    return load_bundled_task(spec)
