"""An exclusive cumulative sum as KernelBench's level 1 spells it (the cumsum of the input
shifted by one with a zero in front, built with ``torch.cat`` and ``narrow``) is read as
``cumsum(x) - x`` (2026-12-02: it was refused with "torch.cat is not supported")."""

from __future__ import annotations

import pytest

from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.lower import lower
from cutegen.codegen.families.recognize import recognize

KB = ("torch.cat((torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim)), x), "
      "dim=self.dim).narrow(self.dim, 0, x.size(self.dim))")


def _task(tmp_path, shifted: str, dim: int, shape=(64, 300)):
    p = tmp_path / "t.py"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                 "    def __init__(self, dim):\n        super().__init__()\n"
                 "        self.dim = dim\n\n"
                 f"    def forward(self, x):\n        s = {shifted}\n"
                 "        return torch.cumsum(s, dim=self.dim)\n\n"
                 f"def get_inputs():\n    return [torch.rand{shape}]\n\n"
                 f"def get_init_inputs():\n    return [{dim}]\n")
    return capture_in_process(p)


@pytest.mark.parametrize("dim", [1, -1])
def test_kernelbench_exclusive_cumsum_is_cumsum_minus_x(tmp_path, dim):
    cap = _task(tmp_path, KB, dim)
    low = lower(cap)
    out = low.nodes[low.output]
    assert out.op == "sub"
    cs, x = low.nodes[out.tensors["input"]], low.nodes[out.tensors["other"]]
    assert cs.op == "cumsum" and cs.consts["dim"] == 1 and x.kind == "input"
    assert low.nodes[cs.tensors["input"]].kind == "input"
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
