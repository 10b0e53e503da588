"""Spellings of one computation that KernelBench's level-2 files use, captured as the forms the
families already know: ``torch.max(x, dim).values`` / ``.indices`` (the named tuple's fields,
read through ``getattr``) and ``torch.tensor(number, device=x.device)`` (a number). Before,
both stopped recognition ("builtins.getattr / torch.tensor is not supported")."""

from __future__ import annotations

import pytest

from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize

HEAD = "import torch\nimport torch.nn as nn\n\n"
TAIL = ("\n\ndef get_inputs():\n    return [torch.randn(64, 1000)]\n\n"
        "def get_init_inputs():\n    return []\n")


def _plan(tmp_path, name, forward, init=""):
    p = tmp_path / f"{name}.py"
    p.write_text(HEAD + "class Model(nn.Module):\n    def __init__(self):\n"
                 f"        super().__init__()\n{init}\n    def forward(self, x):\n"
                 f"        return {forward}" + TAIL)
    rec = recognize(capture_in_process(p))
    return rec


@pytest.mark.parametrize(("field", "index"), [("values", "[0]"), ("indices", "[1]")])
def test_named_tuple_fields_read_as_getitem(tmp_path, field, index):
    by_attr = _plan(tmp_path, "attr", f"torch.max(x, dim=1).{field}")
    by_item = _plan(tmp_path, "item", f"torch.max(x, dim=1){index}")
    assert by_attr.covered, by_attr.not_covered
    assert [p.description for p in by_attr.plans] == [p.description for p in by_item.plans]
    assert ("argmax" if field == "indices" else "amax") in by_attr.plans[0].description


def test_a_number_made_a_tensor_in_forward_is_a_number(tmp_path):
    rec = _plan(tmp_path, "num", "torch.min(torch.sigmoid(x), torch.tensor(0.25, "
                                 "device=x.device))")
    same = _plan(tmp_path, "num2", "torch.clamp(torch.sigmoid(x), max=0.25)")
    assert rec.covered, rec.not_covered
    assert same.covered
    assert rec.plans[0].family == "pointwise"
    cap = capture_in_process(tmp_path / "num.py")
    consts = [n for n in cap.nodes if n.kind == "param" and n.op.startswith("_tensor_constant")]
    assert [c.value for c in consts] == [0.25]


def test_an_integer_dtype_is_not_taken_for_a_number(tmp_path):
    cap = capture_in_process(_write(tmp_path, "torch.tensor(3, device=x.device, dtype=torch.int64)"))
    assert not any(n.kind == "param" and n.op.startswith("_tensor_constant") for n in cap.nodes)


def _write(tmp_path, const):
    p = tmp_path / "int.py"
    p.write_text(HEAD + "class Model(nn.Module):\n    def forward(self, x):\n"
                 f"        return x * {const}" + TAIL)
    return p
