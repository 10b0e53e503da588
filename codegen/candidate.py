"""The candidate contract, written down once, and pure helpers over candidate source.

A candidate is one Python source file that

* defines ``class ModelNew(torch.nn.Module)`` whose constructor takes the same arguments as
  the task's ``Model`` and whose ``state_dict()`` has the same keys and shapes (the harness
  loads the reference model's parameters into it);
* launches CuTe DSL kernels (``@cute.kernel`` launched from a ``@cute.jit`` function compiled
  with ``cute.compile``) from ``forward``; allocating outputs with ``torch.empty`` and taking
  views is fine, doing the work with torch ops is not;
* may expose ``TUNABLES = {"name": literal, ...}``: named constants the built-in rewriter may
  change, each within ``TUNABLE_CHOICES = {"name": [allowed literals]}`` when given (a
  tunable without choices is fixed);
* may declare ``PRECISION = "tf32" | "bf16" | "3xtf32" | ...`` when it computes in a
  precision other than the task's dtype (verified against the tolerance either way);
* imports nothing from cutegen, so an exported candidate runs where cutegen is not installed.

The search process never imports a candidate: everything here reads source with ``ast``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cutegen.errors import CandidateError

#: Literal types a tunable may take.
TunableValue = int | float | bool | str


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class CandidateSource:
    """A candidate's source text and where it came from.

    Attributes:
        code: the full source of the candidate file.
        origin: how it was made ("seed:softmax_fp32", "builtin:vec 4->8", "llm:gpt-x", "file").
    """

    code: str
    origin: str = "file"

    @property
    def sha256(self) -> str:
        return sha256_text(self.code)

    @property
    def short(self) -> str:
        return self.sha256[:12]

    @staticmethod
    def from_path(path: str | Path, *, origin: str | None = None) -> CandidateSource:
        p = Path(path)
        if not p.is_file():
            raise CandidateError(f"candidate file not found: {p}")
        try:
            code = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise CandidateError(f"candidate {p} is not UTF-8 text: {e}") from e
        return CandidateSource(code=code, origin=origin or f"file:{p.name}")


@dataclass(frozen=True, slots=True)
class Tunable:
    """One entry of a candidate's TUNABLES, with its allowed values (empty = fixed)."""

    name: str
    value: TunableValue
    choices: tuple[TunableValue, ...] = ()

    @property
    def movable(self) -> bool:
        return len([c for c in self.choices if c != self.value]) > 0


def _module_assign(tree: ast.Module, name: str) -> ast.Assign | ast.AnnAssign | None:
    for node in tree.body:
        if isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return node
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.target, ast.Name) and node.target.id == name and node.value:
                return node
    return None


#: ``ast.parse`` from two threads at once can fail spuriously on CPython < 3.12 ("AST
#: constructor recursion depth mismatch": the converter's depth counter is per interpreter
#: and a GC finalizer can switch threads mid-conversion; reproduced on 3.11.7, not on 3.12).
#: A parallel search parses in its search thread and in the pool's threads, so every parse
#: of candidate or task source goes through :func:`parse_python`.
_AST_LOCK = threading.RLock()


def parse_python(code: str) -> ast.Module:
    """``ast.parse(code)``, safe to call from several threads at once.

    Raises:
        SyntaxError: as ``ast.parse``.
    """
    with _AST_LOCK:
        return ast.parse(code)


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError) as e:
        raise CandidateError(f"not a literal: {ast.unparse(node)}") from e


def parse_tunables(code: str) -> dict[str, Tunable]:
    """Read ``TUNABLES`` and ``TUNABLE_CHOICES`` from candidate source without importing it.

    Returns an empty dict when the candidate declares no tunables.

    Raises:
        CandidateError: the source does not parse, or TUNABLES is not a dict of literals.
    """
    try:
        tree = parse_python(code)
    except SyntaxError as e:
        raise CandidateError(f"candidate does not parse: {e}") from e
    node = _module_assign(tree, "TUNABLES")
    if node is None:
        return {}
    if not isinstance(node.value, ast.Dict):
        raise CandidateError("TUNABLES must be a dict literal")
    values = _literal(node.value)
    if not isinstance(values, dict) or not all(isinstance(k, str) for k in values):
        raise CandidateError("TUNABLES must map names to literals")
    choices: Mapping[str, Any] = {}
    cnode = _module_assign(tree, "TUNABLE_CHOICES")
    if cnode is not None and cnode.value is not None:
        choices = _literal(cnode.value)
        if not isinstance(choices, dict):
            raise CandidateError("TUNABLE_CHOICES must be a dict literal")
    out: dict[str, Tunable] = {}
    for k, v in values.items():
        if not isinstance(v, (int, float, bool, str)):
            raise CandidateError(f"TUNABLES[{k!r}] must be an int, float, bool or str")
        ch = choices.get(k, ())
        if not isinstance(ch, (list, tuple)):
            raise CandidateError(f"TUNABLE_CHOICES[{k!r}] must be a list")
        out[k] = Tunable(k, v, tuple(ch))
    return out


def set_tunable(code: str, name: str, value: TunableValue) -> str:
    """Return ``code`` with ``TUNABLES[name]`` replaced by ``value`` (a pure text edit).

    Raises:
        CandidateError: no such tunable, or the value is outside TUNABLE_CHOICES.
    """
    tunables = parse_tunables(code)
    if name not in tunables:
        raise CandidateError(f"candidate has no tunable {name!r}")
    t = tunables[name]
    if t.choices and value not in t.choices:
        raise CandidateError(f"{name}={value!r} is outside TUNABLE_CHOICES {list(t.choices)}")
    tree = parse_python(code)
    node = _module_assign(tree, "TUNABLES")
    assert node is not None and isinstance(node.value, ast.Dict)
    for k, v in zip(node.value.keys, node.value.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == name:
            return _replace_span(code, v, repr(value))
    raise CandidateError(f"candidate has no tunable {name!r}")  # pragma: no cover


def _replace_span(code: str, node: ast.AST, text: str) -> str:
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln.encode("utf-8")))
    raw = code.encode("utf-8")
    start = offsets[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
    end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
    return (raw[:start] + text.encode("utf-8") + raw[end:]).decode("utf-8")


@functools.lru_cache(maxsize=1024)
def declared_precision(code: str) -> str:
    """The candidate's ``PRECISION`` declaration, or "" when it declares none (cached by
    source text, like :func:`cutegen.codegen.eval.static.check_source`)."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return ""
    node = _module_assign(tree, "PRECISION")
    if node is None or node.value is None:
        return ""
    try:
        v = ast.literal_eval(node.value)
    except (ValueError, SyntaxError):
        return ""
    return v if isinstance(v, str) else ""
