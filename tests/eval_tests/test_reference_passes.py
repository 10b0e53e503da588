"""The reference worker's two passes over one call's inputs (``Reference.references``): the
native one (the task's own dtype) and the float64 one candidates are judged against.

- The float64 inputs are taken before the native call. A forward that changes its input in
  place (``x.mul_(2)``) gave the float64 pass the changed input before, so its reference was
  4x where the task computes 2x and a correct candidate was ``wrong``.
- The native inputs are let go before the float64 pass: one copy fewer in GPU memory (6.4 GB
  of KernelBench L1 23's 4096 x 393216 fp32 softmax, which ran an 80 GB H100 out of memory).

Run on the CPU here: the same code runs on the GPU with ``device="cuda"``.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import torch

from cutegen.codegen.eval import refworker
from cutegen.codegen.eval.refworker import Reference
from cutegen.codegen.inputs import ArgSpec, generate

TASK = '''import torch
import torch.nn as nn

CHECK = None


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(n))

    def forward(self, x):
        if CHECK is not None:
            CHECK(x)
        BODY
        return x * self.scale


def get_inputs():
    return [torch.randn(6, 5)]


def get_init_inputs():
    return [5]
'''


def _reference(tmp_path: Path, body: str = "pass") -> Reference:
    task = tmp_path / "task.py"
    task.write_text(TASK.replace("BODY", body))
    ref = Reference(str(task), gpu=False, scratch=tmp_path)
    ref.load(hidden=False, seed_init=0)
    ref.models[0] = ref.mod.Model(*ref.shapes[0]["init_args"])  # on the CPU, not the meta device
    return ref


def _inputs(ref: Reference, seed: int) -> list:
    specs = [ArgSpec.from_dict(s) for s in ref.shapes[0]["specs"]]
    return generate(specs, seed=seed, distribution="randn", device="cpu")


def test_a_forward_changing_its_input_in_place_has_the_right_float64_reference(tmp_path):
    ref = _reference(tmp_path, "x.mul_(2)")
    ref64, native = ref.references(0, seed=7, dist="randn")
    (x,) = _inputs(ref, 7)
    assert torch.equal(native[0], 2 * x)
    assert ref64[0].dtype == torch.float64
    assert torch.allclose(ref64[0], 2 * x.double())


def test_the_native_inputs_are_let_go_before_the_float64_pass(tmp_path, monkeypatch):
    ref = _reference(tmp_path)
    made: list = []
    real = refworker.generate

    def spy(*a, **kw):
        out = real(*a, **kw)
        made.extend(weakref.ref(t) for t in out if isinstance(t, torch.Tensor))
        return out

    monkeypatch.setattr(refworker, "generate", spy)
    alive_at_float64: list[bool] = []
    ref.mod.CHECK = lambda x: alive_at_float64.append(
        any(r() is not None for r in made)) if x.dtype == torch.float64 else None
    ref64, native = ref.references(0, seed=3, dist="randn")
    assert alive_at_float64 == [False]
    assert torch.allclose(ref64[0], native[0].double())


def test_an_op_without_float64_falls_back_to_fresh_float32_inputs(tmp_path):
    ref = _reference(tmp_path, "x.mul_(2)\n        if x.dtype == torch.float64:\n"
                               "            raise RuntimeError('no float64 kernel')")
    ref64, native = ref.references(0, seed=11, dist="randn")
    (x,) = _inputs(ref, 11)
    assert ref64[0].dtype == torch.float32
    assert torch.equal(native[0], 2 * x) and torch.equal(ref64[0], 2 * x)
