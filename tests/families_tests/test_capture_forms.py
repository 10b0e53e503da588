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


def _task(tmp_path, name, init, forward, inputs):
    p = tmp_path / f"{name}.py"
    p.write_text(HEAD + "class Model(nn.Module):\n    def __init__(self):\n"
                 f"        super().__init__()\n        {init}\n\n    def forward(self, x):\n"
                 f"        {forward}\n\ndef get_inputs():\n    return [{inputs}]\n\n"
                 "def get_init_inputs():\n    return []\n")
    return recognize(capture_in_process(p))


def test_a_view_that_flattens_a_conv_result_follows_the_batch(tmp_path):
    conv, img = "self.conv = nn.Conv2d(8, 16, 3)", "torch.randn(4, 8, 32, 32)"
    by_view = _task(tmp_path, "v", conv, "x = self.conv(x)\n        return x.view(x.size(0), -1)",
                    img)
    by_reshape = _task(tmp_path, "r", conv,
                       "x = self.conv(x)\n        return x.reshape(x.shape[0], -1)", img)
    by_flatten = _task(tmp_path, "f", conv, "return torch.flatten(self.conv(x), 1)", img)
    assert by_view.covered, by_view.not_covered
    assert by_view.plans[0].description == by_flatten.plans[0].description
    assert by_reshape.plans[0].description == by_flatten.plans[0].description
    assert by_view.plans[0].description.endswith("then flatten")
    # a view that is not a flatten, squeeze or unsqueeze still is not taken
    other = _task(tmp_path, "o", conv, "x = self.conv(x)\n        return x.view(-1, 30 * 30)",
                  img)
    assert not other.covered


@pytest.mark.parametrize("spelling", ["torch.clamp_min(y, 0.0)", "y.clamp_min(0.0)",
                                      "torch.clamp_max(y, 0.5)", "y.clamp_max(0.5)"])
def test_one_sided_clamps_are_clamps(tmp_path, spelling):
    rec = _task(tmp_path, "c", "self.fc = nn.Linear(256, 512)",
                f"y = self.fc(x)\n        return {spelling}", "torch.randn(64, 256)")
    assert rec.covered, rec.not_covered
    assert rec.plans[0].description.endswith("epilogue: add, clamp")


@pytest.mark.parametrize(("call", "covered"), [
    ("nn.functional.dropout(y, p=0.0)", True),
    ("nn.functional.dropout(y, p=0.2, training=False)", True),
    ("nn.functional.dropout(y, p=0.2)", False),  # random in training mode
    ("nn.functional.dropout(y)", False)])
def test_functional_dropout_is_the_identity_only_when_it_drops_nothing(tmp_path, call, covered):
    rec = _task(tmp_path, "d", "self.fc = nn.Linear(256, 512)",
                f"y = self.fc(x)\n        return {call}", "torch.randn(64, 256)")
    assert rec.covered == covered
    if not covered:
        assert "dropout" in rec.not_covered.reason


@pytest.mark.parametrize(("alias", "canonical"), [
    ("torch.multiply(torch.sigmoid(x), 2.0)", "torch.mul(torch.sigmoid(x), 2.0)"),
    ("torch.subtract(x, 0.5).relu()", "torch.sub(x, 0.5).relu()"),
    ("torch.divide(x, 3.0) + 1.0", "torch.div(x, 3.0) + 1.0"),
    ("torch.absolute(torch.negative(x))", "torch.abs(torch.neg(x))"),
    ("torch.clip(x, -1.0, 1.0)", "torch.clamp(x, -1.0, 1.0)"),
    ("x.multiply(2.0).subtract(1.0).divide(4.0)", "x.mul(2.0).sub(1.0).div(4.0)"),
])
def test_torch_spellings_of_arithmetic_are_the_ops(tmp_path, alias, canonical):
    """``torch.multiply`` (level 2's conv + multiply chains) stopped recognition before:
    "torch.multiply is not supported"; it is ``torch.mul`` under another name."""
    rec = _plan(tmp_path, "alias", alias)
    ref = _plan(tmp_path, "canon", canonical)
    assert rec.covered, rec.not_covered
    assert [p.description for p in rec.plans] == [p.description for p in ref.plans]


def test_a_random_dropout_is_refused_with_the_reason(tmp_path):
    """nn.Dropout(p > 0) in training mode (KernelBench's Matmul_Dropout_Mean_Softmax): the
    refusal says why (a random mask each call) instead of "nn.Dropout is not supported"; with
    p = 0 (or F.dropout(training=False)) it is the identity and covered."""
    rec = _plan(tmp_path, "drop", "torch.sigmoid(self.drop(x))",
                init="        self.drop = nn.Dropout(0.2)")
    assert not rec.covered
    msg = rec.not_covered.message
    assert "nn.Dropout(p=0.2) in training mode" in msg and "random" in msg, msg
    # the way on is a deterministic task, not another rewriter (2026-12-05: it said "use
    # --rewriter llm ... or --seed-candidate", which no random reference can check)
    assert "--rewriter" not in msg and "make forward deterministic" in msg, msg
    assert "is not supported" not in msg, msg
    rec = _plan(tmp_path, "fdrop", "torch.sigmoid(torch.nn.functional.dropout(x, 0.3))")
    assert not rec.covered and "(p=0.3) in training mode" in rec.not_covered.message
    rec = _plan(tmp_path, "drop0", "torch.sigmoid(self.drop(x))",
                init="        self.drop = nn.Dropout(0.0)")
    assert rec.covered, rec.not_covered


def test_inputs_drawn_from_a_torch_distribution_are_captured(tmp_path):
    """KernelBench level 1 problems 94, 96 and 100 upstream draw their inputs from
    ``torch.distributions.Pareto``, whose argument check reads a value: on the meta device
    that failed ("Tensor.item() cannot be called on meta tensors") and the task was refused."""
    from torch.distributions import Distribution

    p = tmp_path / "mse.py"
    p.write_text(HEAD + "from torch.distributions import Pareto\n\n"
                 "class Model(nn.Module):\n    def forward(self, a, b):\n"
                 "        return torch.mean((a - b) ** 2)\n\n"
                 "def get_inputs():\n    return [Pareto(0.01, 1.5).sample((4096, 4096)),\n"
                 "            Pareto(0.01, 1.5).sample((4096, 4096))]\n\n"
                 "def get_init_inputs():\n    return []\n")
    before = Distribution._validate_args
    cap = capture_in_process(p)
    assert Distribution._validate_args == before  # put back as it was
    assert [n.shape for n in cap.nodes if n.kind == "input"] == [(4096, 4096)] * 2
    rec = recognize(cap)
    assert rec.covered, rec.not_covered


@pytest.mark.parametrize("where", ["self", "sub"])
def test_a_forward_that_keeps_state_is_refused_for_that_reason(tmp_path, where):
    """A recurrent cell that assigns its hidden state in forward (KernelBench level 3's vanilla
    RNN does ``self.hidden = self.tanh(...)``): tracing left a traced value in the attribute, and
    the refusal said "Model.forward does not return a single tensor", which it does. Now the
    reason names the attribute; a forward that only reads a kept tensor stays covered."""
    holder = "self" if where == "self" else "self.cell"
    init = ("self.cell = nn.Module()\n        " if where == "sub" else "") + \
        f"{holder}.h = torch.zeros(64, 1000)"
    rec = _task(tmp_path, f"state_{where}", init,
                f"{holder}.h = torch.tanh(x + {holder}.h)\n        return {holder}.h * 2.0",
                "torch.randn(64, 1000)")
    assert not rec.covered
    msg = rec.not_covered.message
    assert f"Model.forward assigns {holder}.h" in msg, msg
    assert "state kept from one call to the next" in msg, msg
    assert "single tensor" not in msg, msg
    rec = _task(tmp_path, f"reads_{where}", init, f"return torch.tanh(x + {holder}.h)",
                "torch.randn(64, 1000)")
    assert rec.covered, rec.not_covered


def test_a_size_used_as_a_python_number_is_named_in_the_refusal(tmp_path):
    """A causal mask sliced to the sequence length (``self.mask[:, :T, :T]`` with
    ``T = x.size(1)``, as attention blocks write it): the tracer cannot give Python a number
    there. The refusal said only "TypeError: slice indices must be integers or None or have an
    __index__ method"; it now says what in the forward caused it."""
    rec = _task(tmp_path, "causal", "self.register_buffer('mask', torch.ones(1, 64, 64).tril())",
                "t = x.size(1)\n        return x.masked_fill(self.mask[:, :t, :t] == 0, 0.0)",
                "torch.randn(8, 32, 32)")
    assert not rec.covered
    msg = rec.not_covered.message
    assert "torch.fx could not trace" in msg and "slice indices" in msg, msg
    assert "a size read from a tensor" in msg and "a slice bound" in msg, msg
