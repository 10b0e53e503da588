"""Deliberately bad candidates (RELIABILITY.md fixtures), built from one known-good kernel.

Every fixture is the positive control for ``tests/data/tasks/scale_shift.py`` (y = 2x + 1)
with one twist: a hang, an escape attempt, a cheat. Writing them as twists of one template
keeps each fixture's point visible in a line or two. ``make_candidate(**twist)`` returns a
CandidateSource; the test decides how to evaluate it.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"

TEMPLATE = '''\
import torch
import torch.nn as nn
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack
{imports}

_CACHE = {{}}


@cute.kernel
def scale_shift_kernel(gX: cute.Tensor, gO: cute.Tensor, cX: cute.Tensor, shape: cute.Shape,
                       tv: cute.Layout):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    blk = ((None, None), bidx)
    tX = cute.composition(gX[blk], tv)[(tidx, None)]
    tO = cute.composition(gO[blk], tv)[(tidx, None)]
    tC = cute.composition(cX[blk], tv)[(tidx, None)]
    for i in range(cute.size(tX)):
        if cute.elem_less(tC[i], shape):
{kernel_store}
{kernel_extra}


@cute.jit
def scale_shift(mX: cute.Tensor, mO: cute.Tensor, stream: cuda.CUstream):
    thr = cute.make_ordered_layout((4, 32), order=(1, 0))
    val = cute.make_ordered_layout((1, 4), order=(1, 0))
    tiler, tv = cute.make_layout_tv(thr, val)
    gX = cute.zipped_divide(mX, tiler)
    gO = cute.zipped_divide(mO, tiler)
    cX = cute.zipped_divide(cute.make_identity_tensor(mX.shape), tiler=tiler)
    scale_shift_kernel(gX, gO, cX, mX.shape, tv).launch(
        grid=[cute.size(gO, mode=[1]), 1, 1], block=[cute.size(tv, mode=[0]), 1, 1],
        stream=stream)


def run_kernel(x, out):
    args = [from_dlpack(t).mark_layout_dynamic() for t in (x, out)]
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    if x.dtype not in _CACHE:
        _CACHE[x.dtype] = cute.compile(scale_shift, *args, stream)
    _CACHE[x.dtype](*args, stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
{init_extra}

    def forward(self, x):
{forward}

{module_extra}
'''

DEFAULTS = {
    "imports": "",
    "kernel_store": "tO[i] = tX[i] * 2.0 + 1.0",
    "kernel_extra": "",
    "init_extra": "",
    "forward": "out = torch.empty_like(x)\nrun_kernel(x, out)\nreturn out",
    "module_extra": "",
}
_INDENT = {"kernel_store": 12, "kernel_extra": 4, "init_extra": 8, "forward": 8,
           "module_extra": 0, "imports": 0}


def render(**twist: str) -> str:
    parts = {}
    for k, v in {**DEFAULTS, **twist}.items():
        parts[k] = textwrap.indent(textwrap.dedent(v).strip("\n"), " " * _INDENT[k])
    return TEMPLATE.format(**parts)


@pytest.fixture
def make_candidate():
    from cutegen.codegen.candidate import CandidateSource

    def make(name: str = "good", **twist: str) -> CandidateSource:
        return CandidateSource(render(**twist), origin=f"fixture:{name}")

    return make


@pytest.fixture
def scale_shift_task():
    from cutegen.codegen.tasks import load_task_file

    return load_task_file(DATA / "tasks" / "scale_shift.py")


def _register(name: str, filename: str) -> None:
    """Load a shared test-data module of this folder under a fixed name (the tests run with
    ``--import-mode=importlib``, so the folder is not on ``sys.path``)."""
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_register("_cutegen_attacks", "attacks.py")


@pytest.fixture
def eval_sees(monkeypatch):
    """The tasks ``cutegen eval`` hands its evaluator, which this replaces with a
    compile-only FakeEvaluator (what the command resolved is then checked)."""
    import cutegen.codegen.eval.evaluator as evaluator_mod
    from cutegen.testing import FakeEvaluator

    seen: list = []

    def fake(task, opts, run_dir):
        seen.append(task)
        return FakeEvaluator(seed=1, compile_only=True)

    monkeypatch.setattr(evaluator_mod, "local_evaluator", fake)
    return seen


@pytest.fixture
def kb_two(tmp_path):
    """A KernelBench folder under tmp_path holding level 1's ``3_Toy.py`` (the task text
    given) and ``6_Bf16.py`` (the same with its ``torch.randn(SIZES)`` input in bf16); the
    fixture is the function that writes them, given the text and SIZES."""
    def write(text: str, sizes: str):
        lvl = tmp_path / "KernelBench" / "level1"
        lvl.mkdir(parents=True, exist_ok=True)
        (lvl / "3_Toy.py").write_text(text)
        (lvl / "6_Bf16.py").write_text(text.replace(
            f"torch.randn({sizes})", f"torch.randn({sizes}, dtype=torch.bfloat16)"))
        return tmp_path
    return write
