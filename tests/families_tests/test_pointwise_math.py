"""The arithmetic the fused pointwise chains emit, run on the CPU: an expression of
``pointwise.EXPRESSIONS`` and the head template's helpers it calls, with torch's fp32 ops in
place of ``cute.math``, against torch's own op in float64 (the evaluator's reference)."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

HEAD = (Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
        / "head.py.tmpl")


def _helper(name: str):
    """A ``@cute.jit`` helper of the head template, run as plain Python on torch tensors."""
    tree = ast.parse(HEAD.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.decorator_list = []
    ns: dict = {}
    exec(compile(ast.Module([fn], []), str(HEAD), "exec"), ns)
    return ns[name]


def _emitted(op: str, x):
    from cutegen.codegen.families.plan import PwNode
    from cutegen.codegen.families.pointwise import EXPRESSIONS

    expr = EXPRESSIONS[op](["x"], PwNode(op, ("x",), ()))
    math = types.SimpleNamespace(exp=lambda v, fastmath=False: torch.exp(v),
                                 abs=torch.abs, tanh=lambda v, fastmath=False: torch.tanh(v))
    ns = {"x": x, "cute": types.SimpleNamespace(math=math), "_FAST_MATH": False,
          "_vmin": lambda a, b: torch.clamp(a, max=b), "_vmax": lambda a, b: torch.clamp(a, min=b),
          "_mish_ratio": _helper("_mish_ratio")}
    return eval(expr, ns)  # noqa: S307 - our own generated expression


def test_mish_is_fp32_accurate_everywhere():
    """Mish as one exp and one division (p / (p + 2), p = e (e + 2)): within 4 fp32 steps
    (relative) of the float64 mish over [-100, 100], no overflow past the clamp at 20, and
    exactly x where tanh(softplus(x)) rounds to 1."""
    x = torch.cat([torch.linspace(-100, 100, 400_001), torch.randn(200_000) * 5,
                   torch.tensor([0.0, -0.0, 20.0, 20.5, 44.0, 89.0, 1e30, -1e30, -87.0])])
    got = _emitted("mish", x)
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    want = torch.nn.functional.mish(x.double())
    err = (got.double() - want).abs()
    assert (err <= 4 * torch.finfo(torch.float32).eps * want.abs() + 1e-37).all(), (
        x[err.argmax()].item(), got[err.argmax()].item(), want[err.argmax()].item())
    big = x > 20
    assert torch.equal(got[big], x[big])
