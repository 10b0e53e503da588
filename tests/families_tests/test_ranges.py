"""Value ranges of a captured forward, and training-mode dropouts of zeros (``ranges.py``).

KernelBench level 2's ``83_Conv3d_GroupNorm_Min_Clamp_Dropout`` was refused as random: its
``nn.Dropout(p=0.2)`` runs in training mode. But ``min(x, 0)`` then ``clamp(0, 1)`` leaves it
only zeros (and NaN where x is NaN), which dropout keeps as they are: the task is
deterministic and its dropout the identity. The tasks here are our own of that kind.
"""

from __future__ import annotations

import math

import pytest

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.ops import RANDOM_MARK
from cutegen.codegen.families.ranges import settle_dropouts, value_range
from cutegen.codegen.families.recognize import recognize_task
from cutegen.codegen.tasks import Task

INF = math.inf


def _nodes(*calls: tuple[str, dict, dict]) -> list[Node]:
    """An input x (node 0), a constant 0.5 (node 1), then the calls, each on the one before."""
    out = [Node(0, "input", "x", shape=(4,), dtype="float32"),
           Node(1, "param", "_tensor_constant_call1", value=0.5)]
    for k, (op, tensors, consts) in enumerate(calls):
        out.append(Node(2 + k, "call", op, op, {"input": 1 + k if k else 0, **tensors}, consts,
                        (4,), "float32"))
    return out


@pytest.mark.parametrize("calls, want", [
    ((), (-INF, INF)),
    ((("relu", {}, {}),), (0.0, INF)),
    ((("minimum", {"other": 1}, {}),), (-INF, 0.5)),  # a constant tensor of forward
    ((("min", {}, {"other": 0.0}), ("clamp", {}, {"min": 0.0, "max": 1.0})), (0.0, 0.0)),
    ((("min", {}, {"other": 0.0, "dim": 1}),), (-INF, INF)),  # a reduction, not a bound
    ((("maximum", {}, {"other": 2.0}), ("relu6", {}, {})), (2.0, 6.0)),
    ((("hardtanh", {}, {}),), (-1.0, 1.0)),
    ((("clamp", {}, {"min": -1.0}), ("exp", {}, {})), (-INF, INF)),  # unknown ops: anything
    ((("clamp", {}, {"max": 3.0}), ("identity", {}, {})), (-INF, 3.0)),
])
def test_value_range(calls, want):
    nodes = _nodes(*calls)
    assert value_range(nodes, nodes[-1].id if calls else 0) == want


def test_only_a_dropout_of_zeros_becomes_the_identity():
    zeros = _nodes(("min", {}, {"other": 0.0}), ("clamp", {}, {"min": 0.0, "max": 1.0}))
    zeros.append(Node(4, "call", "?", f"nn.Dropout(p=0.2) in training mode, {RANDOM_MARK}",
                      {"input": 3}, {}, (4,), "float32"))
    got = settle_dropouts(zeros)
    assert got[-1].op == "identity" and got[-1].tensors == {"input": zeros[-2].id}
    assert "0 wherever it is a number" in got[-1].target
    some = list(zeros)
    some[-2] = Node(some[-2].id, "call", "clamp", "clamp", {"input": some[-3].id},
                    {"min": -1.0, "max": 1.0}, (4,), "float32")
    assert settle_dropouts(some)[-1].op == "?"  # values in [-1, 0]: random
    unknown = list(zeros)
    unknown[-1] = Node(unknown[-1].id, "call", "?", "torch.special.something",
                       {"input": zeros[-2].id}, {}, (4,), "float32")
    assert settle_dropouts(unknown)[-1].op == "?"  # only dropouts are settled


TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 512)
        self.norm = nn.GroupNorm(8, 512)
        self.drop = nn.Dropout(0.3)

    def forward(self, x):
        x = self.norm(self.fc(x))
        x = BODY
        return self.drop(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("body, covered", [
    ("torch.clamp(torch.min(x, torch.tensor(0.0, device=x.device)), min=0.0, max=1.0)", True),
    ("torch.relu(torch.clamp(x, max=0.0))", True),
    ("torch.clamp(torch.min(x, torch.tensor(0.0, device=x.device)), min=-1.0, max=1.0)", False),
    ("torch.relu(x)", False),
])
def test_a_task_whose_dropout_sees_only_zeros_is_covered(tmp_path, body, covered):
    p = tmp_path / "task.py"
    p.write_text(TASK.replace("BODY", body))
    rec = recognize_task(Task("t", p, p.read_text()), in_process=True)
    assert rec.covered == covered, rec.not_covered
    if not covered:
        assert RANDOM_MARK in rec.not_covered.message
