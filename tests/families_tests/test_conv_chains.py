"""A convolution whose forward goes on past what the conv family computes (a sum over every
non-batch dim, a LayerNorm over the last dim, a strided sum over one spatial dim, a value
centred on its own spatial mean) is a chain: the conv kernel with its fused epilogue and
tails up to a cut, then the other families' kernels on what it wrote
(:func:`cutegen.codegen.families.chains.conv_then`). Before, each of these forwards was
refused ("the conv tails reduce over the channels (dim 1) or over every spatial dim").

Also: every chain candidate defines each top-level name once (a GEMM stage's own row
reduction and the row family's shared the name ``_row_reduce``, so the later definition
replaced the earlier in a chain holding both)."""

from __future__ import annotations

import ast
from importlib.util import find_spec

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.candidate import declared_precision
from cutegen.codegen.eval.static import check_source
from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize
from cutegen.codegen.families.render import render

CHAINED = {**fd.BUNDLED_CONV_CHAINS, **fd.CONV_TASK_CHAINS}
HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def _task(tmp_path, name: str, init: str, forward: str, shape: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + "class Model(nn.Module):\n    def __init__(self):\n"
                    f"        super().__init__()\n{init}\n\n    def forward(self, x):\n{forward}\n\n\n"
                    f"def get_inputs():\n    return [torch.randn({shape})]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    return str(path)


@pytest.mark.parametrize("name", sorted(CHAINED))
def test_conv_chain_plan(name):
    tails, rest = CHAINED[name]
    plan = fd.plan_of(name)
    assert plan.family == "chain", plan.description
    stages = plan.param("stages")
    conv = stages[0]
    assert conv.family == "conv" and conv.op.startswith("conv")
    assert tuple(dict(st)["op"] for st in conv.param("stages")) == tails
    assert [st.family for st in stages[1:]] == [fam for fam, _ in rest]
    for st, (_, words) in zip(stages[1:], rest, strict=True):
        assert words in st.description, st.description
    dtype = "bfloat16" if name.endswith("bf16") else "float32"
    assert conv.out_dtype == dtype and stages[-1].out_dtype == dtype
    # the rest reads what the conv kernel wrote, nothing of the forward before it
    assert any(lf.name == "_stage0" for lf in stages[1].leaves)


@pytest.mark.parametrize("name", sorted(CHAINED))
def test_conv_chain_renders_one_file(name):
    plan = fd.plan_of(name)
    code = fd.rendered(name)
    assert check_source(code).ok, check_source(code)
    assert "from cutegen" not in code
    body = code[code.index("class ModelNew"):]
    assert "def _run_stage0(" in body and "_stage0 = _run_stage0(" in body
    conv = "_conv_channel_launch(" if "_conv_channel_launch(x" in body else "_conv_launch("
    assert body.index(conv) < body.index("_stage0 = _run_stage0(")
    if plan.param("stages")[0].param("algo") == "direct":  # few fp32 channels: direct first
        assert "class DirectConvKernel" in code and "class ConvKernel(GemmKernel)" not in code
        return
    assert "class ConvKernel(GemmKernel)" in code
    assert declared_precision(code) == plan.param("stages")[0].param("precision_default")
    assert "FAMILY = {'family': 'chain'" in code


def _duplicates(code: str) -> list[str]:
    """Top-level names defined twice with different text."""
    seen: dict[str, str] = {}
    out = []
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            text = ast.unparse(node)
            if node.name in seen and seen[node.name] != text:
                out.append(node.name)
            seen.setdefault(node.name, text)
    return out


@pytest.mark.parametrize("name", sorted(CHAINED) + ["gemm_bn_gelu_gn_mean_relu_fp32",
                                                    "gemm_gn_swish_bf16", "gemm_lse_mish_bf16",
                                                    "chain_mm_argmax_fp32"])
def test_a_chain_defines_each_name_once(name):
    assert _duplicates(fd.rendered(name)) == []


def test_a_gemm_row_reduction_beside_a_row_kernel_keeps_its_own_helper(tmp_path):
    """A GEMM whose epilogue ends in a row reduction (logsumexp over N) followed by a row
    family kernel: each calls its own helper. Both were ``_row_reduce`` before, and the row
    family's (defined later) replaced the GEMM's, which it cannot stand in for."""
    path = _task(tmp_path, "lse_then_softmax",
                 "        self.fc = nn.Linear(256, 512)",
                 "        y = torch.logsumexp(self.fc(x), dim=1, keepdim=True)\n"
                 "        return torch.softmax(y * x, dim=1)", "64, 256")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    code = render(rec.plans[0], open(path).read())
    assert _duplicates(code) == []
    if "_gemm_row_reduce(" in code:
        assert "def _gemm_row_reduce(" in code


def test_the_rest_may_be_a_chain_numbered_on(tmp_path):
    """conv -> LayerNorm over the last dim -> max pooling: the conv kernel writes _stage0, the
    LayerNorm kernel reads it and writes _stage1, the pooling kernel reads _stage1."""
    path = _task(tmp_path, "conv_ln_pool",
                 "        self.conv = nn.Conv2d(4, 8, 3)\n        self.ln = nn.LayerNorm(30)",
                 "        y = self.ln(self.conv(x))\n"
                 "        return F.max_pool2d(y, 2) * 2.0", "2, 4, 32, 32")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    stages = rec.plans[0].param("stages")
    assert [st.family for st in stages] == ["conv", "row", "pool"]
    assert any(lf.name == "_stage0" for lf in stages[1].leaves)
    assert any(lf.name == "_stage1" for lf in stages[2].leaves)
    code = render(rec.plans[0], open(path).read())
    body = code[code.index("class ModelNew"):]
    assert "_stage1 = _run_stage1(" in body and "def _run_stage2" not in body


def test_a_rest_no_family_covers_names_the_cut(tmp_path):
    path = _task(tmp_path, "conv_min_cumsum", "        self.conv = nn.Conv3d(3, 8, 3)",
                 "        return torch.cumsum(torch.min(self.conv(x), dim=2)[0], dim=1)",
                 "2, 3, 8, 8, 8")
    rec = recognize(capture_in_process(path))
    assert not rec.covered
    msg = rec.not_covered.message
    assert "torch.cumsum after a convolution" in msg, msg
    assert "as a chain, cut after nn.Conv3d" in msg and "cumsum over dim 1" in msg, msg
    assert "--seed-candidate" in msg, msg


def test_a_softmax_over_the_channels_after_a_min_over_a_spatial_dim(tmp_path):
    """KernelBench level 2's Conv3d -> min over depth -> softmax over channels: the conv
    kernel, the strided min, then the strided logsumexp mapped back (exp(x - lse))."""
    path = _task(tmp_path, "conv_min_softmax", "        self.conv = nn.Conv3d(3, 8, 3)",
                 "        return torch.softmax(torch.min(self.conv(x), dim=2)[0], dim=1)",
                 "2, 3, 8, 8, 8")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    stages = rec.plans[0].param("stages")
    assert [(st.family, st.op) for st in stages] == [
        ("conv", "conv"), ("strided", "amin"), ("strided", "logsumexp")]
    assert stages[2].param("map") and stages[2].epilogue.describe() == "sub, exp"


def test_the_conv_output_read_again_after_a_norm(tmp_path):
    """The conv's output both normalised and added back after the norm (a residual), then a
    logsumexp over the channels: the conv kernel writes its output, the GroupNorm kernel
    reads it twice (its input, and the residual in its epilogue), the strided family's
    logsumexp takes the channels (before: "used both before and after the row operation")."""
    path = _task(tmp_path, "conv_residual_lse", "        self.conv = nn.Conv2d(4, 8, 3)\n"
                 "        self.gn = nn.GroupNorm(2, 8)",
                 "        y = self.conv(x)\n        z = torch.tanh(self.gn(y)) + y\n"
                 "        return torch.logsumexp(z, dim=1, keepdim=True)", "2, 4, 16, 16")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    stages = rec.plans[0].param("stages")
    assert [(st.family, st.op) for st in stages] == [
        ("conv", "conv"), ("row", "group_norm"), ("strided", "logsumexp")]
    assert "add" in stages[1].epilogue.describe()


_COMPILE = pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    names = sorted(CHAINED)
    items = [((n,), lambda n=n: fd.rendered(n), fd.shapes(n, max_rows=2)[-1]) for n in names]
    return dict(zip(names, fd.compile_rendered(tmp_path_factory.mktemp("conv_chains"), names,
                                               items), strict=True))


@_COMPILE
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHAINED))
def test_conv_chain_compiles(name, compiled):
    """sm_90a on the CPU at a verification shape: the conv on the tensor cores, the later
    kernels beside it, no local memory anywhere."""
    res = compiled[name]
    assert res["error"] is None, res["error"]
    kernels = {n: k for comp in res["compiles"] for n, k in comp["kernels"].items()}
    for kname, k in kernels.items():
        local = [op for op in k["ops"] if op.startswith(("LDL", "STL"))]
        assert not local and k.get("frame", 0) == 0, f"local memory in {kname}: {k}"
    conv = [k for n, k in kernels.items() if "ConvKernel" in n and "Pack" not in n]
    if fd.plan_of(name).param("stages")[0].param("algo") == "direct":  # FFMA, fp32 sums
        assert len(conv) == 1 and conv[0]["mma"].get("FFMA", 0) > 0, kernels
    else:
        assert len(conv) == 1 and any(op.startswith("HGMMA") for op in conv[0]["mma"]), kernels
    others = [n for n in kernels if "Conv" not in n and "Pack" not in n]
    assert others, list(kernels)


def test_a_conv_chain_parent_gets_the_conv_knob_moves():
    """A chain whose first kernel is a conv: the search steps the conv's GEMM knobs (tiles,
    clusters, stages) and the later kernels' knobs, the precision within the conv plan's
    modes."""
    from cutegen.codegen.families.moves import family_moves, family_proposals, recognition_for
    from cutegen.codegen.rewriters.base import RewriteContext
    from cutegen.codegen.tasks import load_task_file

    name = "conv2d_avgpool_sigmoid_sum_fp32"
    task = load_task_file(fd.task_path(name), name=name)
    recognition_for(task, in_process=True)
    roots = family_proposals(task)
    assert roots and "FAMILY = {'family': 'chain', 'op': 'conv+sum'" in roots[0].candidate.code
    # 8 input channels in fp32: the direct kernel's root first, the implicit GEMM's after it
    assert "class DirectConvKernel" in roots[0].candidate.code
    parent = next(r.candidate for r in roots if "class ConvKernel(GemmKernel)" in r.candidate.code)
    moves = list(family_moves(RewriteContext(task=task, parent=parent)))
    names = {m.move.params["name"] for m in moves}
    assert {"tile_n", "cluster_m", "stages", "vals_per_thread"} <= names, names
    assert all(m.move.params.get("family") == "conv" for m in moves)
    modes = set(fd.recognition(name).plans[1].param("stages")[0].param("precision_modes"))
    assert {m.move.params["to"] for m in moves if m.move.params["name"] == "precision"} <= modes
