"""GPU-only tests must not rot where no GPU runs them (found on the H200, 2026-12-02: two
GPU suites imported a module the layer clean-up had moved, and one built ``EvalOptions``
the evaluator now refuses; each cost a device run to find).

Every ``cutegen`` import in the tests and tools, including those inside test functions, must
resolve, and every ``EvalOptions(...)`` written with literal arguments must be accepted."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*ROOT.glob("tests/**/*.py"), *ROOT.glob("tools/*.py")])


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == "cutegen" or node.module.startswith("cutegen.")):
            out.append((node.lineno, node.module, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, ()) for a in node.names
                    if a.name == "cutegen" or a.name.startswith("cutegen.")]
    return out


def test_the_scan_sees_the_gpu_suites():
    names = {p.name for p in FILES}
    assert {"test_gemm19.py", "test_conv_gpu.py", "test_evaluator_gpu.py"} <= names
    assert any(m == "cutegen.codegen.eval.evaluator"
               for p in FILES if p.name == "test_gemm19.py" for _, m, _ in _imports(p))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_cutegen_import_resolves(path):
    bad = []
    for line, module, names in _imports(path):
        try:
            mod = importlib.import_module(module)
        except ImportError as e:
            bad.append(f"{path.name}:{line}: {module}: {e}")
            continue
        for name in names:
            if name == "*" or hasattr(mod, name):
                continue
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                bad.append(f"{path.name}:{line}: {module} has no {name}")
    assert not bad, "\n".join(bad)


def _literal_eval_options(path: Path) -> list[tuple[int, dict]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "EvalOptions" and not node.args):
            try:
                kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            except ValueError:
                continue  # computed arguments: checked where they run
            if len(kw) == len(node.keywords):
                found.append((node.lineno, kw))
    return found


def test_literal_eval_options_are_accepted():
    from cutegen.codegen.backend import EvalOptions

    seen, bad = 0, []
    for path in FILES:
        for line, kw in _literal_eval_options(path):
            seen += 1
            try:
                EvalOptions(**kw)
            except (TypeError, ValueError) as e:
                bad.append(f"{path.relative_to(ROOT)}:{line}: EvalOptions({kw}): {e}")
    assert seen >= 4  # the family GPU suites build theirs this way
    assert not bad, "\n".join(bad)
