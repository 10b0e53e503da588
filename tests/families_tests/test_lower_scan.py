"""An exclusive cumulative sum as KernelBench's level 1 (problem 92) has spelled it: the cumsum
of the input shifted by one with a zero in front (``torch.cat`` and ``narrow``, its pull
request 63; 2026-12-02: it was refused with "torch.cat is not supported") and the cumsum of all
but the last value with a zero put in front (since its pull request 109, December 2025;
2026-12-05: refused with "Tensor.narrow is not supported") are read as ``cumsum(x) - x``; the
original spelling, whose ``[:-1]`` cuts the last row (2026-12-05: refused with "Tensor.select
is not supported"), as the exclusive scan of the first rows padded with a zero column."""

from __future__ import annotations

import pytest

from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.lower import lower
from cutegen.codegen.families.recognize import recognize

KB = ("torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), x), "
      "dim=self.dim).narrow(self.dim, 0, x.size(self.dim))")


# KernelBench's spelling since its pull request 109 (December 2025): the result is the cat
KB_2025 = ("torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), "
           "torch.cumsum(x.narrow(dim=self.dim, start=0, length=x.size(self.dim) - 1), "
           "dim=self.dim)), dim=self.dim)")


def _task(tmp_path, shifted: str, dim: int, shape=(64, 300), *, result: str = ""):
    """A task whose forward is ``cumsum(shifted, dim)``, or ``result`` when given."""
    p = tmp_path / "t.py"
    ret = result or "torch.cumsum(s, dim=self.dim)"
    body = f"        return {ret}\n" if result else f"        s = {shifted}\n        return {ret}\n"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                 "    def __init__(self, dim):\n        super().__init__()\n"
                 "        self.dim = dim\n\n"
                 f"    def forward(self, x):\n{body}\n"
                 f"def get_inputs():\n    return [torch.rand{shape}]\n\n"
                 f"def get_init_inputs():\n    return [{dim}]\n")
    return capture_in_process(p)


def _is_exclusive_cumsum(cap, d: int) -> None:
    low = lower(cap)
    out = low.nodes[low.output]
    assert out.op == "sub"
    cs, x = low.nodes[out.tensors["input"]], low.nodes[out.tensors["other"]]
    assert cs.op == "cumsum" and cs.consts["dim"] == d and x.kind == "input"
    assert low.nodes[cs.tensors["input"]].kind == "input"
    assert tuple(out.shape) == tuple(x.shape)


@pytest.mark.parametrize("dim", [1, -1])
def test_kernelbench_exclusive_cumsum_is_cumsum_minus_x(tmp_path, dim):
    cap = _task(tmp_path, KB, dim)
    _is_exclusive_cumsum(cap, 1)
    rec = recognize(cap)
    assert rec.covered, rec.not_covered
    assert rec.plans[0].family == "scan"


def test_the_rewrite_is_the_exclusive_cumsum():
    import torch

    x = torch.rand(5, 37, dtype=torch.float64)
    shifted = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), dim=1).narrow(
        1, 0, x.size(1))
    assert torch.allclose(torch.cumsum(shifted, 1), torch.cumsum(x, 1) - x)


@pytest.mark.parametrize("shifted", [
    # two zeros in front: a shift by two, not the exclusive sum
    "torch.cat((torch.zeros_like(x.narrow(1, 0, 2)), x), dim=1).narrow(1, 0, x.size(1))",
    # the zero behind: the inclusive sum of x's tail
    "torch.cat((x, torch.zeros_like(x.select(1, 0).unsqueeze(1))), dim=1).narrow(1, 1, "
    "x.size(1))",
    # ones in front
    "torch.cat((torch.ones_like(x.select(1, 0).unsqueeze(1)), x), dim=1).narrow(1, 0, "
    "x.size(1))",
])
def test_other_shifts_are_still_refused_by_name(tmp_path, shifted):
    rec = recognize(_task(tmp_path, shifted, 1))
    assert not rec.covered
    # named by the first op no family has (torch.zeros / Tensor.select / torch.cat ...)
    assert "is not supported by the built-in families" in rec.not_covered.reason


@pytest.mark.parametrize("dim,shape", [(1, (64, 300)), (-1, (64, 300)), (2, (4, 8, 33))])
def test_kernelbench_2025_exclusive_cumsum_is_cumsum_minus_x(tmp_path, dim, shape):
    cap = _task(tmp_path, "", dim, shape, result=KB_2025)
    _is_exclusive_cumsum(cap, len(shape) - 1)
    rec = recognize(cap)
    assert rec.covered, rec.not_covered
    old = recognize(_task(tmp_path, KB, dim, shape))
    assert [(p.family, p.op, p.params) for p in rec.plans] == \
        [(p.family, p.op, p.params) for p in old.plans]  # one kernel for both spellings
    assert rec.plans[0].param("exclusive") is True


def test_the_2025_spelling_is_the_exclusive_cumsum():
    import torch

    x = torch.rand(5, 37, dtype=torch.float64)
    spelled = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)),
                         torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1)), 1)
    assert torch.allclose(spelled, torch.cumsum(x, 1) - x)


@pytest.mark.parametrize("result", [
    # the zero behind: the inclusive sum of all but the last value, then a zero
    "torch.cat((torch.cumsum(x.narrow(1, 0, x.size(1) - 1), 1), "
    "torch.zeros_like(x.select(1, 0).unsqueeze(1))), 1)",
    # the cumsum of the tail (start 1): not a prefix of x
    "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
    "torch.cumsum(x.narrow(1, 1, x.size(1) - 1), 1)), 1)",
    # two zeros in front of all but the last two values
    "torch.cat((torch.zeros_like(x.narrow(1, 0, 2)), "
    "torch.cumsum(x.narrow(1, 0, x.size(1) - 2), 1)), 1)",
    # a cumprod behind the zero
    "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
    "torch.cumprod(x.narrow(1, 0, x.size(1) - 1), 1)), 1)",
    # the zero along one dim, the sum along another
    "torch.cat((torch.zeros_like(x.select(2, 0).unsqueeze(2)), "
    "torch.cumsum(x.narrow(2, 0, x.size(2) - 1), 1)), 2)",
])
def test_other_2025_shapes_are_still_refused_by_name(tmp_path, result):
    rec = recognize(_task(tmp_path, "", 1, (4, 6, 9), result=result))
    assert not rec.covered
    assert "is not supported by the built-in families" in rec.not_covered.reason


# KernelBench's original spelling: the slice cuts the last row, not the last column
KB_ORIGINAL = ("torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), x), "
               "dim=self.dim)[:-1]")


@pytest.mark.parametrize("shape", [(64, 300), (4, 8, 33)])
def test_kernelbench_original_spelling_is_a_padded_exclusive_scan(tmp_path, shape):
    cap = _task(tmp_path, KB_ORIGINAL, len(shape) - 1, shape)
    low = lower(cap)
    out = low.nodes[low.output]
    assert out.op == "cumsum" and low.nodes[out.tensors["input"]].kind == "input"
    assert out.consts == {"dim": len(shape) - 1, "exclusive": True, "pad": 1, "rows_stop": -1}
    assert tuple(out.shape) == (shape[0] - 1, *shape[1:-1], shape[-1] + 1)
    rec = recognize(cap)
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert (plan.family, plan.op) == ("scan", "cumsum")
    assert (plan.param("exclusive"), plan.param("pad"), plan.param("rows_stop")) == (True, 1, -1)
    assert plan.prologue.empty and plan.epilogue.empty
    assert "rows [:-1] padded" in plan.description


@pytest.mark.parametrize("shifted,dim,why", [
    # the first row cut instead: not a prefix of x's rows
    (KB_ORIGINAL.replace("[:-1]", "[1:]"), 1, "is not supported"),
    # the last column cut (a 2-D index): not this form
    (KB_ORIGINAL.replace("[:-1]", "[:, :-1]"), 1, "is not supported"),
    # the zero row along dim 0, cut along dim 0: the cut would take the scan's own dim
    (KB_ORIGINAL, 0, "is not supported"),
])
def test_other_cuts_are_refused_by_name(tmp_path, shifted, dim, why):
    rec = recognize(_task(tmp_path, shifted, dim))
    assert not rec.covered
    assert why in rec.not_covered.reason


def test_ops_after_the_padded_scan_are_refused_with_the_reason(tmp_path):
    cap = _task(tmp_path, KB_ORIGINAL, 1, result="torch.cumsum(torch.cat((torch.zeros_like("
                "x.select(1, 0).unsqueeze(1)), x), dim=1)[:-1], dim=1) * 2.0")
    rec = recognize(cap)
    assert not rec.covered
    assert "rows cut and padded" in rec.not_covered.reason


@pytest.mark.parametrize("index,spec", [
    ("[:-1]", [[None, -1, None]]),
    ("[:, 0]", [[None, None, None], 0]),
    ("[..., None]", ["...", None]),
    ("[1:x.size(0):2]", [[1, 64, 2]]),  # a size computed in the forward: its value here
])
def test_capture_keeps_what_an_index_takes(tmp_path, index, spec):
    cap = _task(tmp_path, "", 1, result=f"x{index} * 2.0")
    got = [n.consts.get("slices") for n in cap.nodes if n.op == "getitem"]
    assert got == [spec]


def test_a_tensor_index_keeps_no_slices(tmp_path):
    cap = _task(tmp_path, "", 1, result="x[x > 0.5]")
    assert [n for n in cap.nodes if n.op == "getitem" and "slices" in n.consts] == []
