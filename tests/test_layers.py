"""The import layers of the package, declared once and checked from the source with ``ast``.

Every module of the import package ``cutegen`` (the folders mapped by pyproject's
``package-dir``) belongs to one component below; components are listed bottom to top. A
module may import its own component and any component listed before it, never one after
it, so the components cannot form an import cycle. Every import counts: at module level,
inside a function (a cycle hidden by a function-local import is still a cycle) and under
``if TYPE_CHECKING`` (a type is a dependency too). A second rule: nothing imports another
package's private module (a module whose name starts with ``_``, such as
``cutegen.search._node``) from outside the package that owns it.

A new module lands in the component of its longest matching prefix; a module no prefix
covers fails the test, so a new top-level module gets a place on purpose.

``import a.b.c`` counts as a dependency on ``a.b.c`` only, not on the ``__init__`` of ``a``
and ``a.b`` that Python runs first (import-linter's convention): ``cutegen.search.storage``
sits below the search although it lives in the search's folder.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]

#: Components, bottom to top: (name, module prefixes). A prefix matches the module itself
#: and its submodules; "=cutegen" matches only the module ``cutegen`` (its __init__).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # frozen records and the pure readers of tasks, suites and numbers
    ("records", ("=cutegen", "cutegen.errors", "=cutegen.codegen", "cutegen.codegen.evaluation",
                 "cutegen.codegen.candidate", "cutegen.codegen.tasks", "cutegen.codegen.suites",
                 "cutegen.codegen.variants", "cutegen.codegen.atomic",
                 "cutegen.codegen.stats", "cutegen.codegen.numerics", "cutegen.codegen.roofline",
                 "cutegen.codegen.toolchain", "cutegen.codegen.inputs",
                 "=cutegen.benchmarks")),
    # the profiler contract, two-stage profiling and the built-in profilers
    ("profilers", ("cutegen.profilers",)),
    # plugin discovery: hookspecs, the plugin manager, the contract suite
    ("plugins", ("cutegen.plugins",)),
    # the evaluator and the backends that run it (pool, compile-ahead, Ray, launcher)
    ("evaluator", ("cutegen.codegen.eval", "cutegen.codegen.backend",
                   "cutegen.codegen.compile_cache", "cutegen.codegen.compile_ahead",
                   "cutegen.codegen.pool", "cutegen.codegen.ray_backend",
                   "cutegen.codegen.launch", "cutegen.codegen.ceilings",
                   "cutegen.codegen.scratch", "cutegen.codegen._timing")),
    # the rewriter seam's records (Move, Proposal, RewriteContext) and the LLM client
    ("rewriter contract", ("cutegen.codegen.rewriters.base", "cutegen.codegen.llm")),
    # the rewriters themselves: kernel families, prompts, the built-in / llm / mixed rewriters
    ("rewriters", ("cutegen.codegen.rewriters", "cutegen.codegen.families",
                   "cutegen.codegen.prompting")),
    # the search's own records, which the store keeps: a node's frozen snapshot, its state
    ("search records", ("cutegen.search._node", "cutegen.search._state")),
    # the storage contract and its two implementations
    ("storage", ("cutegen.search.storage",)),
    # the search: policy, tree, the gated best, Lessons, the facade and its parallel driver
    ("search", ("cutegen.search",)),
    # run reports, exports and benchmark tables, read back from the store
    ("report", ("cutegen.search.report",)),
    # the library entry point and the fakes shipped for tests
    ("library", ("cutegen.settings", "cutegen.api", "cutegen.testing",
                 "cutegen._loopback_llm")),
    # the command line
    ("cli", ("cutegen.cli", "=cutegen.__main__")),
]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the import package: name -> (file, is a package __init__)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found: dict[str, tuple[Path, bool]] = {}
    for name, folder in cfg["package-dir"].items():
        base = ROOT / folder
        for f in base.rglob("*.py"):
            parts = list(f.relative_to(base).with_suffix("").parts)
            if ".".join([name, *parts[:-1]]) not in cfg["packages"]:
                continue  # data files: tasks, seeds, the example plugin
            ispkg = parts[-1] == "__init__"
            found[".".join([name, *(parts[:-1] if ispkg else parts)])] = (f, ispkg)
    return found


def _imports(mod: str, path: Path, ispkg: bool,
             known: set[str]) -> Iterator[tuple[str, int, bool]]:
    """(imported cutegen module, line, only under TYPE_CHECKING) for every import in the
    file, wherever it stands. ``from a.b import c`` names the module ``a.b.c`` when there
    is one, else ``a.b``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(n for stmt in node.body for n in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if ispkg else mod.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names]
            names = [n for n in subs if n in known]
            if len(names) < len(subs):
                names.append(target)
        else:
            continue
        for n in names:
            if n in known and n != mod:
                yield n, node.lineno, node in typing_only


def _component(mod: str) -> int:
    best, best_len = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            exact = p.startswith("=")
            p = p.lstrip("=")
            hit = mod == p if exact else (mod == p or mod.startswith(p + "."))
            if hit and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def _private_owner(mod: str) -> str | None:
    """The package that owns the first private module on ``mod``'s path, if any."""
    parts = mod.split(".")
    for i, p in enumerate(parts):
        if p.startswith("_") and not p.startswith("__"):
            return ".".join(parts[:i])
    return None


def test_every_module_has_a_layer():
    mods = _modules()
    assert "cutegen.cli" in mods and "cutegen.search.storage._sqlite" in mods
    assert [m for m in mods if _component(m) < 0] == []


def test_imports_go_down_the_layers_only():
    mods = _modules()
    known = set(mods)
    bad = []
    for mod, (path, ispkg) in sorted(mods.items()):
        here = _component(mod)
        for target, line, _ in _imports(mod, path, ispkg, known):
            there = _component(target)
            if there > here:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mod} ({LAYERS[here][0]}) "
                           f"imports {target} ({LAYERS[there][0]}), a layer above it")
    assert bad == []


def test_no_import_of_another_packages_private_module():
    mods = _modules()
    known = set(mods)
    bad = []
    for mod, (path, ispkg) in sorted(mods.items()):
        for target, line, _ in _imports(mod, path, ispkg, known):
            owner = _private_owner(target)
            if owner is not None and not (mod == owner or mod.startswith(owner + ".")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {mod} imports {target}, "
                           f"private to {owner}")
    assert bad == []


#: Import cycles between modules of one component that are known and owned elsewhere: two
#: kernel-family modules (the families' owner). The list may only shrink.
KNOWN_CYCLES = [
    {"cutegen.codegen.families.capture", "cutegen.codegen.families.ops"},
]


def _cycles() -> list[set[str]]:
    """Groups of modules that import each other at run time (strongly connected)."""
    mods = _modules()
    known = set(mods)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, ispkg) in mods.items():
        for target, _, typing_only in _imports(mod, path, ispkg, known):
            # a package's own __init__ importing its modules is how packages work
            if not typing_only and not mod.startswith(target + "."):
                edges[mod].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_new_import_cycle_between_modules():
    """Run-time import cycles, function-local imports included (TYPE_CHECKING ones are
    not run), other than the known ones."""
    assert [sorted(c) for c in _cycles() if c not in KNOWN_CYCLES] == []


def test_the_check_sees_a_cycle(tmp_path):
    """The rule catches a function-local import from a low layer into a high one."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from cutegen.search import Search\n")
    found = list(_imports("cutegen.codegen.evaluation", f, False, {"cutegen.search"}))
    assert found == [("cutegen.search", 2, False)]
    assert _component("cutegen.codegen.evaluation") < _component("cutegen.search")
    assert _component("cutegen.search.report.html") > _component("cutegen.search._search")
    g = tmp_path / "n.py"
    g.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cutegen.api\n")
    assert list(_imports("cutegen.cli", g, True, {"cutegen.api"})) == [("cutegen.api", 3, True)]
