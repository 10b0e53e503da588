"""No device function of a kernel template overwrites a parameter it never read.

In a ``@cute.jit`` / ``@cute.kernel`` function a local bound to a parameter's name before the
parameter is read hides the argument for the rest of the body, and the DSL traces whatever
the name holds without complaint: the folded conv pack (2026-12-03) bound a global source
offset to ``row``, its shared-memory row argument, and then stored the tile at that offset
(every folded candidate crashed on the H200 with an illegal address). Rebinding a parameter
after reading it (``lda = cute.assume(lda, ...)``, ``st = combine(st, ...)``) is fine.
Plain Python over the template text: no DSL, no GPU.
"""

import ast
import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
_DEVICE = ("cute.jit", "cute.kernel")


def _events(fn: ast.FunctionDef, names: set[str]) -> list[tuple[tuple[int, int], str, str]]:
    """(position in evaluation order, name, "load" | "store") of every use of ``names`` in
    the body; an assignment's targets count at the end of the statement (its value is
    evaluated first)."""
    out = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
            if isinstance(node, ast.For):  # the loop variable is bound before the body runs
                end = (node.iter.end_lineno or node.lineno, node.iter.end_col_offset or 0)
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and n.id in names:
                        kind = "load" if isinstance(node, ast.AugAssign) else "store"
                        out.append((end, n.id, kind))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names:
            out.append(((node.lineno, node.col_offset), node.id, "load"))
    return sorted(out)


def shadowed_parameters(source: str) -> list[tuple[str, str, int]]:
    """(function, parameter, line) for each parameter of a device function whose first use in
    the body is a store."""
    tree = ast.parse(re.sub(r"\{\{\s*\w+\s*\}\}", "None", source))  # template placeholders
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or not any(
                ast.unparse(d) in _DEVICE for d in fn.decorator_list):
            continue
        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs} - {"self"}
        first: dict[str, tuple] = {}
        for pos, name, kind in _events(fn, params):
            first.setdefault(name, (pos, kind))
        found += [(fn.name, name, pos[0]) for name, (pos, kind) in first.items()
                  if kind == "store"]
    return found


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.tmpl")), ids=lambda p: p.name)
def test_no_device_function_hides_a_parameter(path):
    assert shadowed_parameters(path.read_text()) == []


def test_the_check_sees_the_folded_pack_bug():
    """The shape of the 2026-12-03 bug is caught; reading a parameter before rebinding it,
    and augmented assignments, are not."""
    bug = '''
@cute.jit
def _read(self, tile, row, n, plane):
    row = Int64(n) * plane
    tile[row, 0] = 1.0
'''
    fine = '''
@cute.jit
def _f(self, lda, st, k):
    lda = cute.assume(lda, divby=8)
    st = combine(st, st)
    k += 1
    for i in range(k):
        pass
'''
    assert shadowed_parameters(bug) == [("_read", "row", 4)]
    assert shadowed_parameters(fine) == []
