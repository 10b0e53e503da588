"""A reference whose output is random can check no candidate (KernelBench level 2's
``nn.Dropout(p=0.2)`` in training mode after a Linear; the one after a GroupNorm, min and
clamp sees only zeros and is the identity there, ``families/ranges.py``). The reference
worker calls it twice on the same inputs when it loads the task and stops with a task error
that says so (before 2026-12-05 it loaded such a task, and every candidate an LLM wrote for it
could only have been compared with another random draw and called wrong)."""

from __future__ import annotations

import pytest

from cutegen.codegen.eval.refworker import RandomReference, Reference, TaskFault

TASK = '''import torch
import torch.nn as nn

rows = 64
cols = 96
VERIFY_SHAPES = [{{"rows": 3, "cols": 5}}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout({p})

    def forward(self, x):
        return torch.softmax({body}, dim=1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''


def _load(tmp_path, p: float = 0.0, body: str = "self.drop(x)"):
    path = tmp_path / "task.py"
    path.write_text(TASK.format(p=p, body=body))
    ref = Reference(str(path), gpu=False, scratch=tmp_path)
    return ref.load(hidden=True, seed_init=1)


@pytest.mark.parametrize("p,body", [
    (0.2, "self.drop(x)"),                     # dropout in training mode
    (0.0, "x + 0.1 * torch.rand_like(x)"),     # noise drawn in forward
])
def test_a_random_reference_stops_the_task_with_the_reason(tmp_path, p, body):
    with pytest.raises(RandomReference) as e:
        _load(tmp_path, p, body)
    assert isinstance(e.value, TaskFault)  # reported to the user as a task error
    msg = str(e.value)
    assert "output is random" in msg and "called twice on the same inputs" in msg
    assert "rows=3,cols=5" in msg  # the smallest shape, a hidden one: still a fault, not a skip
    assert "eval mode" in msg


@pytest.mark.parametrize("p,body", [
    (0.0, "self.drop(x)"),     # p = 0: the identity
    (0.2, "x * 2.0"),          # a dropout module that forward never calls
    (0.0, "x.mul_(2.0)"),      # changes its input in place: the second call gets fresh inputs
])
def test_a_deterministic_reference_loads(tmp_path, p, body):
    info = _load(tmp_path, p, body)
    assert [s["label"] for s in info["shapes"]] == ["main", "rows=3,cols=5"]


def test_differences_within_the_tolerance_are_not_randomness(tmp_path):
    """A reference whose last bits vary (atomics) is not random: differences far inside the
    dtype's tolerance pass."""
    info = _load(tmp_path, 0.0, "x + 1e-9 * torch.rand_like(x)")
    assert len(info["shapes"]) == 2


def test_an_op_the_cpu_build_lacks_for_the_dtype_is_left_to_the_gpu(tmp_path):
    """torch's CPU build has no bf16 avg_pool3d: a CPU-only load (``--compile-only``) called the
    bundled avg_pool3d_bf16 task broken (2026-12-05); the GPU worker checks the reference."""
    import torch

    body = TASK.replace("self.drop = nn.Dropout({p})", "self.pool = nn.AvgPool3d(2)").replace(
        "return torch.softmax({body}, dim=1)", "return self.pool(x)").replace(
        "torch.randn(rows, cols)", "torch.randn(2, 3, 4, rows, cols, dtype=torch.bfloat16)")
    path = tmp_path / "task.py"
    path.write_text(body.replace("{{", "{").replace("}}", "}"))
    try:  # the premise: this torch lacks the op on the CPU
        torch.nn.AvgPool3d(2)(torch.randn(1, 1, 2, 2, 2, dtype=torch.bfloat16))
        pytest.skip("this torch has bf16 avg_pool3d on the CPU")
    except NotImplementedError:
        pass
    info = Reference(str(path), gpu=False, scratch=tmp_path).load(hidden=True, seed_init=1)
    assert len(info["shapes"]) == 2


MATMUL = '''import torch
import torch.nn as nn

M = {m}
K = 8
CPU_CALLS = []


class Model(nn.Module):
    def forward(self, A, B):
        if A.device.type == "cpu":
            CPU_CALLS.append(tuple(A.shape))
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, M)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("m,runs", [(4096, False), (512, True)])
def test_the_cpu_check_skips_a_reference_whose_output_is_large(tmp_path, monkeypatch, m, runs):
    """Before: only the inputs' size was bounded, so KernelBench level 1 problem 7 (16 MB of
    inputs, a 4.3 GB output, 137 GFLOP a call) ran twice on the CPU of a compile-only run
    (12.7 GB). The output's size and the FLOPs are now counted on the meta device first."""
    from cutegen.codegen.eval import refworker

    monkeypatch.setattr(refworker, "_CPU_CHECK_BYTES", 2**24, raising=False)  # 4096² fp32: 64 MB
    path = tmp_path / "task.py"
    path.write_text(MATMUL.format(m=m))
    ref = Reference(str(path), gpu=False, scratch=tmp_path)
    ref.load(hidden=False, seed_init=1)  # the main shape alone
    assert bool(ref.mod.CPU_CALLS) is runs, ref.mod.CPU_CALLS
    # with hidden shapes (M takes 1 and a prime) the check runs at the smallest, 1 x 8
    ref = Reference(str(path), gpu=False, scratch=tmp_path)
    ref.mod.CPU_CALLS.clear()
    ref.load(hidden=True, seed_init=1)
    assert ref.mod.CPU_CALLS and set(ref.mod.CPU_CALLS) == {(1, 8)}, ref.mod.CPU_CALLS


STATEFUL = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = torch.zeros(1)

    def forward(self, x):
        self.h = torch.tanh(self.h + x.mean())  # a running state, read on the next call
        return x * self.h
"""


def test_a_reference_that_keeps_state_between_calls_is_named_as_such(tmp_path):
    """A forward that keeps state on self for its next call (a recurrent cell without its
    hidden state as an input) gives another result on the same inputs, as a random one does;
    the task error says that state is a cause too (it named only dropout and torch.rand)."""
    path = tmp_path / "task.py"
    path.write_text(STATEFUL + "\n\ndef get_inputs():\n    return [torch.randn(64, 96)]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    with pytest.raises(RandomReference) as e:
        Reference(str(path), gpu=False, scratch=tmp_path).load(hidden=True, seed_init=1)
    msg = str(e.value)
    assert "depends on earlier calls" in msg and "state that forward keeps on self" in msg, msg
