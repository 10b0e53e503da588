"""A tiny line-based template language for the family templates (package data).

Templates live in ``codegen/families/templates/*.py.tmpl``. They are Python files with

* ``{{NAME}}`` placeholders, replaced by ``values[NAME]`` (text);
* directive lines ``#% if EXPR``, ``#% elif EXPR``, ``#% else``, ``#% endif`` that keep or
  drop the lines up to the next directive; ``EXPR`` is a Python expression over ``flags``
  (trusted: the templates ship with cutegen).

Placeholders are substituted after the directives are applied, and every placeholder left
in the kept text must have a value (:class:`TemplateError` otherwise), so a template and its
renderer cannot drift apart silently.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from functools import cache
from importlib import resources

from cutegen.errors import CuteGenError

_PLACEHOLDER = re.compile(r"\{\{([A-Z0-9_]+)\}\}")
_DIRECTIVE = re.compile(r"^\s*#%\s*(if|elif|else|endif)\b(.*)$")


class TemplateError(CuteGenError):
    """A family template is malformed or a placeholder has no value (a cutegen bug)."""


@cache
def load(name: str) -> str:
    """The text of ``templates/<name>.py.tmpl`` (package data)."""
    path = resources.files("cutegen.codegen.families") / "templates" / f"{name}.py.tmpl"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise TemplateError(f"family template {name!r} is missing: {e}") from e


def _evaluate(expr: str, flags: Mapping[str, object], where: str) -> bool:
    try:
        return bool(eval(expr, {"__builtins__": {}}, dict(flags)))  # noqa: S307 - trusted
    except Exception as e:  # noqa: BLE001 - reported with its place
        raise TemplateError(f"{where}: cannot evaluate {expr.strip()!r}: {e}") from e


def apply_directives(text: str, flags: Mapping[str, object], *, name: str = "template") -> str:
    """Keep the lines whose enclosing ``#% if`` chain selects them; drop directive lines."""
    out: list[str] = []
    # stack of (this branch is kept, some branch of the chain was already taken, parent kept)
    stack: list[tuple[bool, bool, bool]] = []
    keeping = True
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        m = _DIRECTIVE.match(line)
        if m is None:
            if keeping:
                out.append(line)
            continue
        kind, expr = m.group(1), m.group(2)
        where = f"{name}:{lineno}"
        if kind == "if":
            taken = keeping and _evaluate(expr, flags, where)
            stack.append((taken, taken, keeping))
        elif not stack:
            raise TemplateError(f"{where}: '#% {kind}' without '#% if'")
        elif kind == "elif":
            _, done, parent = stack[-1]
            taken = parent and not done and _evaluate(expr, flags, where)
            stack[-1] = (taken, done or taken, parent)
        elif kind == "else":
            _, done, parent = stack[-1]
            stack[-1] = (parent and not done, True, parent)
        else:
            stack.pop()
        keeping = stack[-1][0] if stack else True
    if stack:
        raise TemplateError(f"{name}: unclosed '#% if'")
    return "".join(out)


def substitute(text: str, values: Mapping[str, str], *, name: str = "template") -> str:
    """Replace every ``{{NAME}}``; an unknown name is an error."""
    missing = sorted({m.group(1) for m in _PLACEHOLDER.finditer(text)} - set(values))
    if missing:
        raise TemplateError(f"{name}: no value for {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def render_template(name: str, values: Mapping[str, str], flags: Mapping[str, object]) -> str:
    """Directives, then placeholders, of the named template."""
    return substitute(apply_directives(load(name), flags, name=name), values, name=name)


def model_class(args: str, body: str) -> str:
    """The candidate's ``ModelNew``: Model's constructor (the file's ``_TaskModule``), and a
    ``forward(args)`` that runs ``body`` (ending in ``return``) through the head template's
    ``_replayed``, which replays a recorded call with the same signature where it may."""
    packed = f"({args},)" if args else "()"
    return (f"\n\nclass ModelNew(_TaskModule):\n    def forward(self, {args}):\n"
            f"        return _replayed(self, ModelNew._cutegen_forward, {packed})\n\n"
            f"    def _cutegen_forward(self, {args}):\n" + textwrap.indent(body, " " * 8))
