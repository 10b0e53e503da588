"""A convolution that reads a computed value (a ReLU, a pooling or another convolution before
it) is a chain: the kernels computing that value first, then the conv kernel reading what they
wrote as ``_stage{k}`` (:func:`cutegen.codegen.families.chains.before_conv`). Before, each was
refused ("the input of nn.Conv2d is computed by ...", "more than one convolution"), and with
them KernelBench level 1's depthwise-separable convolution (problem 86) and level 2's
AvgPool3d before a ConvTranspose3d (problem 38, whose spatial softmax after the conv is still
refused: a reshape back to 5-D after the row op)."""

from __future__ import annotations

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.eval.static import check_source
from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize


@pytest.mark.parametrize("name", sorted(fd.CONV_TASK_BEFORE))
def test_the_kernels_before_the_conv_then_the_conv(name):
    plan = fd.plan_of(name)
    assert plan.family == "chain", plan.description
    stages = plan.param("stages")
    want = fd.CONV_TASK_BEFORE[name]
    assert len(stages) == len(want), [s.description for s in stages]
    for j, (st, (family, algo, words)) in enumerate(zip(stages, want, strict=True)):
        assert st.family == family, st.description
        if algo is not None:
            assert st.param("algo") == algo, st.description
        assert words in st.description, st.description
        if j:  # each kernel reads what the one before it wrote
            assert any(lf.name == f"_stage{j - 1}" for lf in st.leaves), st.leaves
    dtype = "bfloat16" if name.endswith("bf16") else "float32"
    assert stages[-1].out_dtype == dtype


@pytest.mark.parametrize("name", sorted(fd.CONV_TASK_BEFORE))
def test_it_renders_one_file_launching_in_order(name):
    code = fd.rendered(name)
    assert check_source(code).ok, check_source(code)
    body = code[code.index("class ModelNew"):]
    assert "_stage0 = _run_stage0(" in body
    assert body.index("_stage0 = _run_stage0(") < body.rindex("_conv_launch(")


def test_the_epilogue_after_the_last_conv_is_fused():
    """The clamp and the per-channel scale after the transposed conv run in its epilogue."""
    stages = fd.plan_of("rec_pre_avgpool_transposed_fp32").param("stages")
    assert "clamp" in stages[-1].description and "mul" in stages[-1].description


def test_what_stays_refused_says_which_part(tmp_path):
    """A convolution reading a value no family computes names that part."""
    path = tmp_path / "t.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(4, 4, 3)\n\n"
        "    def forward(self, x):\n        return self.conv(torch.flip(x, [3]))\n\n\n"
        "def get_inputs():\n    return [torch.randn(2, 4, 9, 9)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    rec = recognize(capture_in_process(path))
    assert not rec.covered
    assert "computed by" in rec.not_covered.message and "what nn.Conv2d reads" in (
        rec.not_covered.message), rec.not_covered.message


def test_a_task_building_its_inputs_on_cuda_is_captured_without_a_gpu(tmp_path):
    """get_inputs naming device="cuda" (KernelBench level 1 problem 97), .cuda() and
    .to("cuda") in the constructor: captured on the meta device (before: "Torch not compiled
    with CUDA enabled" on a CPU-only machine, so the task was refused there)."""
    path = tmp_path / "t.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.ones(64).cuda())\n"
        "        self.b = nn.Parameter(torch.zeros(64).to('cuda', torch.float16).to(torch.float32))\n\n"
        "    def forward(self, x):\n        return torch.softmax(x * self.w + self.b, dim=-1)\n\n\n"
        "def get_inputs():\n    return [torch.rand(8, 64, device='cuda', dtype=torch.float16)"
        ".to(torch.float32)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    cap = capture_in_process(path)
    assert not cap.error
    rec = recognize(cap)
    assert rec.covered, rec.not_covered
    assert rec.plans[0].op == "softmax"


def test_two_functional_convs_keep_their_own_geometry(tmp_path):
    """Each conv stage passes its own spec to its launch (``_k{j}_conv_spec``): the file's
    one CONV constant of before held the last stage's geometry, so a chain of two functional
    convs (no module to read stride and padding from) would have run both with the second's."""
    from cutegen.codegen.families.render import render

    path = tmp_path / "t.py"
    src = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
           "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.w1 = nn.Parameter(torch.randn(8, 8, 3, 3))\n"
           "        self.w2 = nn.Parameter(torch.randn(8, 8, 3, 3))\n\n"
           "    def forward(self, x):\n"
           "        return F.conv2d(F.conv2d(x, self.w1, padding=1), self.w2, stride=2)\n\n\n"
           "def get_inputs():\n    return [torch.randn(2, 8, 16, 16)]\n\n\n"
           "def get_init_inputs():\n    return []\n")
    path.write_text(src)
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    code = render(rec.plans[0], src)
    assert check_source(code).ok
    specs = {line.split("(")[0].split()[-1]: line for line in code.splitlines()
             if line.startswith("def _k") and "_conv_spec(_spec=" in line}
    assert sorted(specs) == ["_k0_conv_spec", "_k1_conv_spec"], specs
    assert "'stride': (1, 1)" in specs["_k0_conv_spec"] and "'padding': (1, 1)" in specs[
        "_k0_conv_spec"]
    assert "'stride': (2, 2)" in specs["_k1_conv_spec"] and "'padding': (0, 0)" in specs[
        "_k1_conv_spec"]
    body = code[code.index("class ModelNew"):]
    assert "_k0_conv_spec())" in body and "_k1_conv_spec())" in body
    assert "\nCONV = " not in code
