"""Recognition of the gemm family: every bundled GEMM task and the small ``gemm_tasks/rec_*``
tasks give the expected operand layouts, epilogue and reduction; ``rec_neg_*`` tasks (and a
softmax / transpose outside a GEMM) are not covered, with a message naming the op."""

import json

import _cutegen_famdata as fd  # registered by conftest.py
import _cutegen_gemm_plans as gp  # registered by conftest.py
import pytest

_MM = {"a_major": "k", "b_major": "n", "batched": False, "reduce": "", "reduce_keepdim": False}
_LIN = dict(_MM, b_major="k")
_BF = {"precision_default": "bf16", "precision_modes": ("bf16",)}
_F32 = {"precision_default": "3xtf32", "precision_modes": ("3xtf32",)}

#: name -> (params that must hold, epilogue ops, out_shape, {leaf: kind} that must hold).
BUNDLED = {
    "gemm_bf16": ({**_MM, **_BF, "a": "A", "b": "B"}, "-", "matrix", {}),
    "gemm_4096_bf16": ({**_MM, **_BF, "a": "A", "b": "B"}, "-", "matrix", {}),
    "gemm_8192x8192x1024_bf16": ({**_MM, **_BF, "a": "A", "b": "B"}, "-", "matrix", {}),
    "gemm_16384x1024x4096_bf16": ({**_MM, **_BF, "a": "A", "b": "B"}, "-", "matrix", {}),
    "gemm_fp32": ({**_MM, **_F32, "a": "A", "b": "B"}, "-", "matrix", {}),
    "gemm_bias_relu_bf16": ({**_LIN, **_BF, "a": "x", "b": "p_linear_weight"}, "add, relu",
                            "matrix", {"p_linear_bias": "col"}),
    "gemm_bias_relu_fp32": ({**_LIN, **_F32}, "add, relu", "matrix", {"p_linear_bias": "col"}),
    "gemm_bias_gelu_bf16": ({**_LIN, **_BF}, "add, gelu", "matrix", {"p_linear_bias": "col"}),
    "gemm_scale_residual_bf16": ({**_LIN, **_BF, "b": "p_weight"}, "mul, add", "matrix",
                                 {"residual": "full", "a_scale": "value"}),
    "gemm_swish_bf16": ({**_LIN, **_BF}, "add, sigmoid, mul, mul", "matrix",
                        {"p_matmul_bias": "col"}),  # 2.0: a constant, inlined
    "bmm_bf16": ({**_MM, **_BF, "batched": True}, "-", "matrix", {}),
    "gemm_at_b_bf16": ({**_MM, **_BF, "a_major": "m"}, "-", "matrix", {}),
    # issue 17's sizes (the long suite)
    "gemm_skinny_bf16": ({**_MM, **_BF, "a": "A", "b": "B"}, "-", "matrix", {}),
    "linear_scale_leakyrelu_fp32": ({**_LIN, **_F32, "b": "p_gemm_weight"},
                                    "add, mul, leaky_relu", "matrix", {"p_gemm_bias": "col"}),
    "linear_mish_mish_fp32": ({**_LIN, **_F32, "b": "p_linear_weight"}, "add, mish, mish",
                              "matrix", {"p_linear_bias": "col"}),
    "linear_skinny_gelu_fp32": ({**_LIN, **_F32, "b": "p_fc_weight"}, "add, gelu, mul",
                                "matrix", {"p_fc_bias": "col"}),
}
#: Our small tasks (gemm_tasks/rec_*.py), same layout as BUNDLED.
EXTRA = {
    "rec_at_b_fp32": ({**_MM, **_F32, "a_major": "m"}, "-", "matrix", {}),
    "rec_at_bt_fp32": ({**_MM, **_F32, "a_major": "m", "b_major": "k"}, "-", "matrix", {}),
    "rec_linear_nobias_gelu_bf16": ({**_LIN, **_BF, "b": "p_fc_weight"}, "gelu", "matrix", {}),
    "rec_flinear_bias_silu_fp16": ({**_LIN, "precision_default": "fp16", "b": "p_weight"},
                                   "add, silu", "matrix", {"p_bias": "col"}),
    "rec_bmm_scale_bf16": ({**_MM, **_BF, "b_major": "k", "batched": True, "a": "q", "b": "k"},
                           "mul", "matrix", {"a_scale": "value"}),
    "rec_mm_residual_bf16": ({**_LIN, **_BF, "b": "p_w"}, "mul, add", "matrix",
                             {"residual": "full"}),
    "rec_linear_sum_keepdim_bf16": ({**_LIN, **_BF, "reduce": "sum", "reduce_keepdim": True},
                                    "add", "rows", {"p_linear_bias": "col"}),
    "rec_linear_logsumexp_fp32": ({**_LIN, "reduce": "logsumexp", "precision_default": "3xtf32",
                                   "precision_modes": ("3xtf32", "tf32")}, "add, relu", "rows",
                                  {}),
    "rec_matmul_max_values_bf16": ({**_MM, **_BF, "reduce": "amax"}, "-", "rows", {}),
    "rec_addmm_bf16": ({**_MM, **_BF}, "add", "matrix", {"p_bias": "col"}),
    "rec_linear_epilogue_mix_bf16": (
        {**_LIN, **_BF}, "add, mul, clamp, leaky_relu, hardswish, mish, tanh, sigmoid", "matrix",
        {"s": "row", "p_linear_bias": "col"}),
    "rec_matmul_3d_bf16": ({**_MM, **_BF, "batched": True}, "add", "matrix", {}),
    "rec_linear_3d_bf16": ({**_LIN, **_BF}, "add, relu, mul", "matrix", {"gate": "row"}),
    "rec_methods_fp16": ({**_LIN, "precision_default": "fp16", "a": "x", "b": "w"}, "elu",
                         "matrix", {}),  # three swaps of w: read as stored [N, K]
    "rec_permute_bt_bf16": ({**_LIN, **_BF, "a": "a", "b": "b"}, "add", "matrix",
                            {"bias": "col"}),
    "rec_mean_then_scale_fp32": ({**_MM, **_F32, "a": "a", "b": "b", "reduce": "mean"}, "-",
                                 "rows", {}),
    "rec_matmul_4d_fp32": ({**_MM, **_F32, "a": "a", "b": "b", "batched": True}, "-", "matrix",
                           {}),
}
#: Not covered: name -> (NotCovered.op, words the message must contain).
NEGATIVE = {
    "rec_neg_computed_operand": ("torch.matmul", ["A operand", "computed by", "mul"]),
    "rec_neg_broadcast_batch": ("torch.matmul", ["batch dims broadcast"]),
    "rec_neg_transposed_3d": ("torch.matmul", ["transposed 3-d A"]),
    "rec_neg_int": ("int64", ["torch.mm", "int64"]),
    "rec_neg_mixed": ("mixed dtypes", ["mixed dtypes (bfloat16 and float32)"]),
    "rec_neg_batch_transpose": ("transpose", ["dims [0, 1]", "last two dims"]),
    "rec_neg_operand_reused": ("transpose", ["Tensor.t", "used both"]),
}


def test_every_gemm_task_is_listed():
    assert sorted(BUNDLED) == sorted(fd.BUNDLED_GEMM)
    ours = sorted(p.stem for p in fd.GEMM_TASKS.glob("rec_*.py"))
    assert ours == sorted([*EXTRA, *NEGATIVE])


def _check(name, expected):
    params, epi, out_shape, kinds = expected
    plan = fd.plan_of(name)
    assert (plan.family, plan.op) == ("gemm", "matmul")
    for k, v in params.items():
        assert plan.param(k) == v, (k, plan.params)
    assert plan.epilogue.describe() == epi
    assert plan.out_shape == out_shape
    leaves = {lf.name: lf for lf in plan.leaves}
    for leaf, kind in kinds.items():
        assert leaves[leaf].kind == kind, (leaf, plan.leaves)
    a, b = plan.leaf(plan.param("a")), plan.leaf(plan.param("b"))
    assert plan.main == a.name and plan.prologue.empty and plan.prologue.result == f"@{a.name}"
    assert a.kind == b.kind == "full" and a.dtype == b.dtype
    assert plan.param("precision_default") in plan.param("precision_modes")
    return plan


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_gemm_task_is_recognised(name):
    plan = _check(name, BUNDLED[name])
    assert plan.out_dtype == ("bfloat16" if name.endswith("bf16") else "float32")
    assert "gemm" in plan.description


@pytest.mark.parametrize("name", sorted(EXTRA))
def test_gemm_task_is_recognised(name):
    _check(name, EXTRA[name])


@pytest.mark.parametrize("name", ["gemm_bias_relu_bf16", "rec_flinear_bias_silu_fp16",
                                  "rec_addmm_bf16"])
def test_bias_is_the_first_epilogue_op(name):
    plan = fd.plan_of(name)
    first = plan.epilogue.nodes[0]
    bias = next(lf for lf in plan.leaves if lf.kind == "col")
    assert (first.op, first.args) == ("add", ("%y", f"@{bias.name}"))
    assert all("%y" not in n.args for n in plan.epilogue.nodes[1:])  # later ops see y + bias


def test_linear_weight_and_scale_are_read_at_run_time():
    plan = fd.plan_of("gemm_scale_residual_bf16")
    w = plan.leaf("p_weight")
    assert (w.source, w.ref, w.shape) == ("param", "weight", (8192, 8192))
    s = plan.leaf("a_scale")
    assert (s.source, s.ref) == ("attr", "scale")
    swish = fd.plan_of("gemm_swish_bf16")
    assert swish.leaf("p_matmul_weight").ref == "matmul.weight"


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_gemm_not_covered_names_the_op(name):
    op, words = NEGATIVE[name]
    rec = fd.recognition(name)
    assert not rec.covered and not rec.plans
    assert rec.not_covered.op == op
    msg = rec.not_covered.message
    assert msg.startswith("no built-in kernel family covers this task")
    for w in words:
        assert w in msg, msg
    assert "--rewriter llm" in msg


def test_precision_modes():
    from cutegen.codegen.families.gemm_match import TF32_MIN_TOL, precision_modes

    assert precision_modes("bfloat16") == ("bf16",)
    assert precision_modes("bfloat16", {"atol": 1.0, "rtol": 1.0}) == ("bf16",)
    assert precision_modes("float16") == ("fp16",)
    assert precision_modes("float32") == ("3xtf32",)  # the 1e-4 table: no plain TF32
    assert precision_modes("float32", {}) == ("3xtf32",)
    assert precision_modes("float32", {"atol": 1e-2, "rtol": 1e-2}) == ("3xtf32", "tf32")
    assert precision_modes("float32", {"atol": 1e-2}) == ("3xtf32",)  # rtol stays 1e-4
    assert precision_modes("float32", {"atol": TF32_MIN_TOL, "rtol": TF32_MIN_TOL})[-1] == "tf32"


def test_plain_tf32_leads_only_where_no_scaled_inputs_are_verified():
    from cutegen.codegen.families.gemm_match import default_precision

    both = ("3xtf32", "tf32")
    assert default_precision(both) == "3xtf32"  # a task naming no distributions: all of them
    assert default_precision(both, ("randn", "large")) == "3xtf32"
    assert default_precision(both, ("randn", "uniform", "small")) == "tf32"
    assert default_precision(("3xtf32",), ("randn",)) == "3xtf32"
    assert default_precision(("bf16",)) == "bf16"


def test_the_task_input_distributions_choose_the_fp32_default(tmp_path):
    from cutegen.codegen.families.capture import Captured, capture_in_process
    from cutegen.codegen.families.recognize import recognize

    body = ("import torch\nimport torch.nn as nn\n\nTOLERANCE = {'atol': 1e-2, 'rtol': 1e-2}\n"
            "{dists}class Model(nn.Module):\n    def forward(self, a, b):\n"
            "        return torch.relu(a @ b)\n\ndef get_inputs():\n"
            "    return [torch.randn(256, 512), torch.randn(512, 256)]\n\n"
            "def get_init_inputs():\n    return []\n")
    loose = tmp_path / "loose.py"
    loose.write_text(body.replace("{dists}", ""))
    narrow = tmp_path / "narrow.py"
    narrow.write_text(body.replace("{dists}", "INPUT_DISTRIBUTIONS = ['randn', 'uniform']\n"))
    assert capture_in_process(loose).distributions == ()
    cap = capture_in_process(narrow)
    assert cap.distributions == ("randn", "uniform")
    assert Captured.from_json(cap.to_json()) == cap
    plans = {p: recognize(capture_in_process(p)).plans[0] for p in (loose, narrow)}
    assert plans[loose].param("precision_modes") == ("3xtf32", "tf32")
    assert plans[loose].param("precision_default") == "3xtf32"
    assert plans[narrow].param("precision_default") == "tf32"


def test_the_tolerance_is_captured_in_a_child_process_too():
    from cutegen.codegen.families.capture import Captured, capture_in_process, capture_task

    path = fd.task_path("rec_linear_logsumexp_fp32")
    cap = capture_in_process(path)
    assert cap.tolerance == {"atol": 1e-2, "rtol": 1e-2}
    assert capture_task(path) == cap
    assert capture_in_process(fd.task_path("gemm_fp32")).tolerance == {}
    old = json.loads(cap.to_json())
    del old["tolerance"]  # a capture from before the field existed
    assert Captured.from_json(json.dumps(old)).tolerance == {}


def _tmp_task(tmp_path, body, inputs):
    p = tmp_path / "t.py"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                 f"    def forward(self, x):\n        return {body}\n\n"
                 f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n"
                 "    return []\n")
    return p


def test_logsumexp_outside_a_gemm_is_the_row_familys(tmp_path):
    """Until 2026-12-02 (fifth session) only the GEMM family took logsumexp (over N, after
    the product); alone it was refused."""
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize

    rec = recognize(capture_in_process(_tmp_task(tmp_path, "torch.logsumexp(x, dim=-1)",
                                                 "[torch.randn(8, 16)]")))
    assert rec.covered and (rec.plans[0].family, rec.plans[0].op) == ("row", "logsumexp")


@pytest.mark.parametrize(("body", "word"), [
    ("x.t() + 1.0", "Tensor.t"),
    ("x.T * 2.0", "Tensor.T"),
])
def test_gemm_ops_outside_a_gemm_are_not_covered(tmp_path, body, word):
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize

    rec = recognize(capture_in_process(_tmp_task(tmp_path, body, "[torch.randn(8, 16)]")))
    assert not rec.covered and word in rec.not_covered.message


_SHARED = ("a_major", "b_major", "batched", "reduce", "reduce_keepdim", "precision_default")


@pytest.mark.parametrize("name", sorted(gp.PLANS))
def test_recognition_agrees_with_the_kernels_hand_built_plans(name):
    """The GEMM kernel's tests build their plans by hand for their task files: recognising
    those files must give the same layout, batching, reduction, precision and epilogue ops."""
    from cutegen.codegen.families.capture import capture_in_process
    from cutegen.codegen.families.recognize import recognize

    hand, path = gp.PLANS[name]
    rec = recognize(capture_in_process(path))
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert {k: plan.param(k) for k in _SHARED} == {k: hand.param(k) for k in _SHARED}
    assert plan.epilogue.describe() == hand.epilogue.describe()
    assert (plan.out_dtype, plan.out_shape) == (hand.out_dtype, hand.out_shape)


@pytest.mark.parametrize("name", sorted(BUNDLED) + sorted(EXTRA))
def test_render_dispatches_to_the_gemm_family(name):
    import ast

    pytest.importorskip("cutegen.codegen.families.gemm")
    from cutegen.codegen.candidate import parse_tunables
    from cutegen.codegen.families.moves import read_family
    from cutegen.codegen.families.render import knobs, render

    plan = fd.plan_of(name)
    values, choices = knobs(plan)
    code = render(plan, fd.task_path(name).read_text())
    ast.parse(code)
    assert read_family(code)["family"] == "gemm"
    t = parse_tunables(code)
    assert {k: v.value for k, v in t.items()} == values
    assert set(t["precision"].choices) <= set(plan.param("precision_modes"))
    assert t["precision"].value == plan.param("precision_default")
