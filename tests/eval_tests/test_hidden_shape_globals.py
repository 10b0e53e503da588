"""Hidden shapes and parameters sized by a module global (found on the H200, 2026-12-02).

``fro_scale_bf16`` sizes ``self.gain`` by the global ``cols`` that its VERIFY_SHAPES changes.
The reference worker built ``Model`` with the hidden shape's ``cols``, the candidate worker
built ``ModelNew`` with the main one, and every candidate was ``wrong`` (parameter shapes
differ). The reference now hands each shape's overrides on; the candidate's module has them
while ``ModelNew`` is built."""

from __future__ import annotations

import types

import torch

from cutegen.codegen.eval.refworker import Reference
from cutegen.codegen.eval.worker import _size_globals

TASK = '''import torch
import torch.nn as nn

rows = 64
cols = 700
VERIFY_SHAPES = [{"rows": 1, "cols": 1}, {"rows": 127, "cols": 33}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return x * self.gain


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''


def test_each_hidden_shape_carries_its_overrides(tmp_path):
    path = tmp_path / "task.py"
    path.write_text(TASK)
    ref = Reference(str(path), gpu=False, scratch=tmp_path)
    info = ref.load(hidden=True, seed_init=1)
    assert [s["overrides"] for s in info["shapes"]] == [
        {}, {"rows": 1, "cols": 1}, {"rows": 127, "cols": 33}]
    assert ref.mod.cols == 700  # the reference's own module is back at the main shape


def test_the_candidate_module_has_the_shape_globals_while_modelnew_is_built(tmp_path):
    mod = types.ModuleType("cand")
    exec(TASK.replace("class Model(", "class ModelNew("), mod.__dict__)
    with _size_globals(mod, {"rows": 1, "cols": 33, "absent": 5}):
        m = mod.ModelNew()
    assert tuple(m.gain.shape) == (33,)
    assert (mod.rows, mod.cols) == (64, 700)  # restored
    assert not hasattr(mod, "absent")  # only names the candidate defines
    with _size_globals(mod, {}):
        assert tuple(mod.ModelNew().gain.shape) == (700,)
    assert isinstance(m.gain, torch.nn.Parameter)
