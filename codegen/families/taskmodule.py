"""The task's ``Model`` constructor, copied into a candidate as ``_TaskModule``.

A candidate's ``ModelNew`` must take ``Model``'s constructor arguments and have its
parameters (same names and shapes; the harness loads the reference's values into it). The
simplest faithful way is to copy ``Model``'s class body without ``forward``: the rendered
``ModelNew`` subclasses that copy and adds a kernel-launching ``forward``. The copy keeps
the task's imports and simple module-level constants (``DTYPE = torch.bfloat16``) the class
refers to; a class that needs anything else from the task file (a helper class or function)
is reported, so recognition can say so instead of rendering a file that fails to import.
The constructor of a precision variant (``cutegen.codegen.variants``) casts what it built,
and so does the copy.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cutegen.codegen.variants import init_cast, variant_dtype

#: Names a copied class may use without the task file defining them.
_BUILTINS = frozenset(dir(__builtins__) if isinstance(__builtins__, dict) else dir(__builtins__))
_SKIP_GLOBALS = frozenset({"VERIFY_SHAPES", "INPUT_DISTRIBUTIONS", "TOLERANCE"})


@dataclass(frozen=True, slots=True)
class TaskModule:
    """Source pieces for a candidate: import lines, constants, and the class copy."""

    imports: str
    constants: str
    class_source: str


class TaskModuleError(Exception):
    """Model's constructor cannot be copied on its own (it uses another definition)."""


def _names_used(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def extract(source: str, *, name: str = "_TaskModule") -> TaskModule:
    """Copy ``Model`` (minus ``forward``) from task source, renamed to ``name``.

    Raises:
        TaskModuleError: no class Model, or it uses a module-level definition that is not an
            import or a simple constant.
    """
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"),
                 None)
    if model is None:
        raise TaskModuleError("the task defines no class Model")
    imports: list[str] = []
    imported: set[str] = set()
    constants: dict[str, ast.stmt] = {}
    defined: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.module == "__future__":
                continue
            imports.append(ast.unparse(node))
            imported.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
        else:
            for target, value in _assigned(node):
                if target not in _SKIP_GLOBALS:
                    constants[target] = ast.Assign([ast.Name(target, ast.Store())], value,
                                                   lineno=node.lineno)
    body = [b for b in model.body if not (isinstance(b, ast.FunctionDef) and b.name == "forward")]
    if not body:
        body = [ast.Pass()]
    fields = {"name": name, "bases": model.bases, "keywords": model.keywords, "body": body,
              "decorator_list": []}
    if "type_params" in ast.ClassDef._fields:  # Python 3.12+
        fields["type_params"] = []
    copy = ast.ClassDef(**fields)
    args = {a.arg for f in ast.walk(copy) if isinstance(f, ast.FunctionDef)
            for a in f.args.args + f.args.kwonlyargs}
    used = _names_used(copy) - args
    needed: list[str] = []
    todo = sorted(used)
    while todo:
        n = todo.pop()
        if n in constants and n not in needed:
            needed.append(n)
            todo.extend(sorted(_names_used(constants[n].value) - set(needed)))
    missing = sorted(n for n in used & defined if n != "Model")
    if missing:
        raise TaskModuleError(f"Model's constructor uses {', '.join(missing)} from the task file")
    if "Model" in used:  # super(Model, self).__init__() and the like
        copy = ast.fix_missing_locations(_RenameModel(name).visit(copy))
    order = [n for n in constants if n in needed]
    consts = "\n".join(ast.unparse(constants[n]) for n in order)
    cls = ast.unparse(copy)
    cast = variant_dtype(source)
    if cast is not None:  # a precision variant's Model casts what its constructor built
        cls += init_cast(name, cast)
    return TaskModule("\n".join(dict.fromkeys(imports)), consts, cls)


def _assigned(node: ast.stmt) -> list[tuple[str, ast.expr]]:
    """(name, value) of each module-level name a statement binds to a plain expression:
    ``n = 4``, ``n: int = 4``, ``a, b = 4, 8`` (one pair a name); nothing for anything else."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
        return [(node.target.id, node.value)]
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return []
    target = node.targets[0]
    if isinstance(target, ast.Name):
        return [(target.id, node.value)]
    if (isinstance(target, ast.Tuple | ast.List) and isinstance(node.value, ast.Tuple | ast.List)
            and len(target.elts) == len(node.value.elts)
            and all(isinstance(t, ast.Name) for t in target.elts)):
        return [(t.id, v) for t, v in zip(target.elts, node.value.elts, strict=True)
                if isinstance(t, ast.Name)]
    return []


class _RenameModel(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.name, node.ctx) if node.id == "Model" else node
