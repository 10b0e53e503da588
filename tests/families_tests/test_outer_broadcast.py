"""Pointwise results larger than every operand (an outer broadcast), as level-2 chains end:
``torch.min(x, dim=1, keepdim=True)[0] + bias`` with ``bias`` of shape ``(1, C, 1, 1)`` after
a Linear ((B, 1) + (1, C, 1, 1) -> (1, C, B, 1)), or a conv's reduced map ``(B, 1, 1, W)`` plus
a per-channel ``(C, 1, 1)`` bias -> ``(B, C, 1, W)``. Before, recognition refused both: "no
operand has the output's full shape (an outer-product broadcast)", or the anchor's epilogue
could not broadcast the bias and a chain of one anchor was never cut after it; and a
``torch.min`` over a dim (a (values, indices) pair) was never a place to cut.

Now the result's shape is what the operands broadcast to, computed at run time; an operand
that does not match it is read expanded (``_as_bcast``), and a reduction whose epilogue cannot
broadcast an operand ends its kernel there, the rest a pointwise kernel. Two such tasks in
``reduce_tasks/`` (``outer_sum_tanh_fp32``, ``gemm_gn_min_bias_bf16``) are compiled for sm_90a
by ``test_reduce_compile.py`` and run on the GPU with issue 19's cases."""

from __future__ import annotations

from cutegen.codegen.eval.static import check_source
from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize
from cutegen.codegen.families.render import render

HEAD = "import torch\nimport torch.nn as nn\n\n\n"


def _task(tmp_path, name: str, init: str, forward: str, inputs: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD + "class Model(nn.Module):\n    def __init__(self):\n"
                    f"        super().__init__()\n{init or '        pass'}\n\n"
                    f"    def forward(self, {forward}\n\n\n"
                    f"def get_inputs():\n    return [{inputs}]\n\n\n"
                    "def get_init_inputs():\n    return []\n")
    return str(path)


def _outer_sum(tmp_path) -> str:
    return _task(tmp_path, "outer_sum", "", "x, y):\n        return torch.tanh(x + y)",
                 "torch.randn(96, 1), torch.randn(1, 200)")


def _gemm_gn_min_bias(tmp_path) -> str:
    return _task(tmp_path, "gemm_gn_min_bias",
                 "        self.gemm = nn.Linear(64, 48)\n        self.gn = nn.GroupNorm(4, 48)\n"
                 "        self.bias = nn.Parameter(torch.randn(1, 48, 1, 1))",
                 "x):\n        x = self.gn(self.gemm(x))\n"
                 "        x = torch.min(x, dim=1, keepdim=True)[0]\n        return x + self.bias",
                 "torch.randn(32, 64)")


def test_an_outer_sum_is_one_pointwise_kernel(tmp_path):
    path = _outer_sum(tmp_path)
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert plan.family == "pointwise" and plan.param("bcast")
    assert "broadcast to the result, 96x200" in plan.description
    code = render(plan, open(path).read())
    assert check_source(code).ok
    body = code[code.index("class ModelNew"):]
    assert "shape = torch.broadcast_shapes(x.shape, y.shape)" in body, body
    # x (96, 1) is read per row, y (1, 200) per column: nothing is materialised by torch (a
    # torch copy kernel at the result's shape was judged a library call on the H200)
    assert "expand" not in body and "_as_bcast" not in body, body
    assert "[_as_cols(y, n_cols)], (False,), [_as_rows(x, n_rows)], (True,)" in body, body


def test_an_operand_of_no_kernel_kind_is_materialised(tmp_path):
    """(B, 1, 1, W) against (B, C, 1, W) is none of full / per column / per row / per channel:
    torch expands it to the result's shape (a copy the evaluator counts outside the kernels;
    what the kernel cannot read as it is)."""
    path = _task(tmp_path, "bcast_map", "        self.bias = nn.Parameter(torch.randn(6, 1, 1))",
                 "x):\n        return torch.tanh(x) + self.bias",
                 "torch.randn(4, 1, 1, 40)")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    code = render(rec.plans[0], open(path).read())
    body = code[code.index("class ModelNew"):]
    assert "main = x.expand(shape).contiguous()" in body, body


def test_a_chain_ends_in_an_outer_broadcast_after_a_min_over_a_dim(tmp_path):
    """Linear -> GroupNorm -> min over dim 1 (keepdim) -> + bias (1, C, 1, 1): the bias
    makes the result (1, C, B, 1); the min's kernel writes (B, 1), a pointwise kernel adds."""
    path = _gemm_gn_min_bias(tmp_path)
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    stages = rec.plans[0].param("stages")
    assert [st.family for st in stages] == ["gemm", "row", "row", "pointwise"]
    assert stages[2].op == "amin" and stages[2].epilogue.empty
    assert stages[3].param("bcast") and "1x48x32x1" in stages[3].description
    code = render(rec.plans[0], open(path).read())
    assert check_source(code).ok


def test_a_conv_chain_ends_in_an_outer_broadcast(tmp_path):
    """ConvTranspose2d -> min over channels (keepdim) -> sum over dim 2 (keepdim) -> GELU ->
    + bias (C, 1, 1): (B, 1, 1, W) + (C, 1, 1) -> (B, C, 1, W)."""
    path = _task(tmp_path, "conv_min_sum_bias",
                 "        self.conv = nn.ConvTranspose2d(8, 16, 3, 2, 1, 1)\n"
                 "        self.bias = nn.Parameter(torch.randn(16, 1, 1))",
                 "x):\n        x = torch.min(self.conv(x), dim=1, keepdim=True)[0]\n"
                 "        x = torch.sum(x, dim=2, keepdim=True)\n"
                 "        return torch.nn.functional.gelu(x) + self.bias",
                 "torch.randn(4, 8, 16, 16)")
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    stages = rec.plans[0].param("stages")
    assert [st.family for st in stages] == ["conv", "strided", "pointwise"]
    assert stages[2].param("bcast") and "4x16x1x32" in stages[2].description


def test_broadcasts_both_ways_are_covered(tmp_path):
    path = _task(tmp_path, "no_bcast", "", "x, y):\n        return x + y.view(1, 1, 7)",
                 "torch.randn(3, 5, 1), torch.randn(7)")
    rec = recognize(capture_in_process(path))
    assert rec.covered  # (3, 5, 1) + (1, 1, 7) -> (3, 5, 7): a broadcast both ways
    path = _task(tmp_path, "bad", "", "x, y):\n        return x + y",
                 "torch.randn(3, 5), torch.randn(4, 1, 5)")
    rec = recognize(capture_in_process(path))
    assert rec.covered  # (3, 5) + (4, 1, 5) -> (4, 3, 5)
    assert "4x3x5" in rec.plans[0].description


def test_an_outer_broadcast_ending_in_a_dim_of_one_walks_rows_of_several_dims(tmp_path):
    """(B, 1) + (1, C, 1, 1) -> (1, C, B, 1): rows of the last dim alone are one value long (a
    warp with one busy lane: KernelBench L2 75's last kernel wrote its 33 MB at 26 GB/s on an
    H100, 1,263 of the call's 2,854 us). The kernel walks rows of the last two dims instead,
    (C, B): the min per column, the bias per row, nothing materialised."""
    path = _gemm_gn_min_bias(tmp_path)
    rec = recognize(capture_in_process(path))
    last = rec.plans[0].param("stages")[3]
    assert last.param("bcast") and last.param("k") == 2, last.params
    kinds = {lf.source: lf.kind for lf in last.leaves if lf.kind != "value"}
    assert sorted(kinds.values()) == ["col", "row"], kinds
    code = render(rec.plans[0], open(path).read())
    assert check_source(code).ok
    body = code[code.index("class ModelNew"):]
    assert "n_cols = math.prod(shape[len(shape) - 2:])" in body, body
    assert "[_as_cols(_stage2, n_cols)], (False,), [_as_rows(self.bias.detach(), n_rows)]" \
        in body, body
    # an outer sum whose last dim is long keeps rows of the last dim
    rec = recognize(capture_in_process(_outer_sum(tmp_path)))
    assert rec.plans[0].param("k") is None, rec.plans[0].params
