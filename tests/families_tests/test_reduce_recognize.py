"""Recognition of reductions over any dims, the norms built on them, and the two recognition
bugs of issue 19 (a number passed to forward baked in as a constant; ``torch.min(x, c)``
read as a reduction over dim c)."""

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

#: Our small tasks: name -> (family, op, prologue ops, epilogue ops, params that must hold).
REDUCE_EXTRA = {
    "sum_dim0_keepdim_bf16": ("strided", "sum", "-", "-", {"dims": (0,), "keepdim": True,
                                                            "layout": "strided"}),
    "max_values_dim1_fp32": ("strided", "amax", "-", "-", {"dims": (1,)}),
    "sum_dims01_bf16": ("strided", "sum", "-", "-", {"dims": (0, 1), "layout": "strided"}),
    "amin_dims02_fp32": ("strided", "amin", "-", "-", {"layout": "two_stage", "k": 1}),
    "sum_all_fp32": ("row", "sum", "-", "-", {"layout": "all", "k": 1}),
    "max_all_bf16": ("row", "amax", "-", "mul", {"layout": "all"}),
    "argmax_all_fp32": ("row", "argmax", "-", "-", {"layout": "all", "k": 2}),
    "var_rows_biased_bf16": ("row", "var", "-", "-", {"correction": 0.0, "layout": "inner"}),
    "std_dim0_fp32": ("strided", "std", "-", "-", {"correction": 1.0}),
    "l2norm_dim1_3d_fp32": ("strided", "sum", "square", "sqrt, div", {"map": True}),
    "mean_center_rows_bf16": ("row", "mean", "-", "sub", {"map": True, "layout": "inner"}),
    "normalize_rows_unsqueeze_fp32": ("row", "sum", "abs", "mul, identity, div", {"map": True}),
    "group_norm_plain_fp32": ("row", "group_norm", "-", "-", {"groups": 4, "eps": 1e-5}),
    "instance_norm_affine_bf16": ("row", "layer_norm", "-", "mul, add, gelu",
                                  {"norm": "instance", "k": 1}),
    "batch_norm_1d_fp32": ("batchnorm", "batch_norm", "-", "mul, add, mul",
                           {"momentum": 0.1, "k": 1}),
    # (N, C) features: the strided kernel's column statistics (2026-12-03, eighth session)
    "batch_norm_features_bf16": ("batchnorm", "batch_norm", "add", "mul, add, relu",
                                 {"momentum": 0.1, "k": 0}),
    "batch_norm_eval_2d_fp32": ("pointwise", "pointwise", "sub, add, rsqrt, mul, mul, add", "-",
                                {}),
    "scalar_mul_fp32": ("pointwise", "pointwise", "mul", "-", {}),
    # (batch,) labels read along the columns (batch == dim), one value at batch 1
    "hinge_batch_labels_fp32": ("row", "mean", "mul, sub, clamp", "-", {"layout": "all"}),
    "min_constant_fp32": ("pointwise", "pointwise", "minimum, sub", "-", {}),
    "batch_center_small_fp32": ("reduce_map", "mean", "-", "sub", {"layout": "two_stage"}),
    "fro_scale_bf16": ("reduce_map", "sum", "square", "sqrt, div, mul", {"layout": "all"}),
    "activations_mask_fp32": ("pointwise", "pointwise",
                              "selu, celu, add, softsign, add, logsigmoid, add, tanhshrink, add, "
                              "hardshrink, add, softshrink, add, threshold, add, gt, mul, where, "
                              "mul, lt, where", "-", {}),
    "huber_module_fp32": ("row", "mean", "sub, abs, square, mul, sub, mul, lt, where", "-",
                          {"layout": "all"}),
    "mse_l1_sum_fp32": ("row", "sum", "sub, abs, sub, square", "-", {"layout": "all"}),
    "prod_dim1_fp32": ("strided", "prod", "mul, add", "-", {"dims": (1,)}),
    "prod_rows_bf16": ("row", "prod", "mul, add", "-", {"layout": "inner"}),
    "max_pool2d_fused_fp32": ("pool", "max_pool", "mul", "relu",
                              {"kernel": (3, 3), "stride": (2, 2), "padding": (1, 1),
                               "dilation": (2, 2), "ceil_mode": True}),
    "avg_pool3d_ceil_bf16": ("pool", "avg_pool", "-", "-",
                             {"count_include_pad": False, "ceil_mode": True, "spatial": 3}),
    "avg_pool1d_pad_fp32": ("pool", "avg_pool", "-", "-",
                            {"count_include_pad": True, "stride": (1,), "padding": (2,)}),
    "avg_pool2d_stride7_fp32": ("pool", "avg_pool", "-", "mul",
                                {"kernel": (7, 7), "stride": (7, 7), "padding": (2, 2)}),
    "max_pool2d_stride5_bf16": ("pool", "max_pool", "sub, cast", "-",
                                {"kernel": (3, 3), "stride": (5, 5), "padding": (1, 1),
                                 "dilation": (2, 2), "ceil_mode": True}),
    # one value per row: the three sums, then a pointwise kernel combining them (before
    # 2026-12-02's fifth session refused: the last sum's kernel cannot read the others)
    "cosine_rows_bf16": ("chain", "sum+sum+sum+pointwise", "-", "-", {}),
    "triplet_sum_bf16": ("chain", "sum+sum+sum", "-", "-", {}),
    "logsumexp_rows_bf16": ("row", "logsumexp", "-", "sub, relu", {"layout": "inner",
                                                                    "keepdim": True}),
    "logsumexp_all_fp32": ("row", "logsumexp", "-", "-", {"layout": "all", "k": 1}),
    # results larger than every operand (refused before 2026-12-03's seventh session)
    "outer_sum_tanh_fp32": ("pointwise", "pointwise", "add, tanh", "-", {"bcast": True}),
    "gemm_gn_min_bias_bf16": ("chain", "matmul+group_norm+amin+pointwise", "-", "-", {}),
    "logsumexp_dim1_fp32": ("strided", "logsumexp", "-", "-", {"dims": (1,),
                                                                "layout": "strided"}),
    "rowsum_times_colmax_fp32": ("chain", "sum+amax+pointwise", "-", "-", {}),
    "div_by_unkept_sums_fp32": ("chain", "sum+pointwise", "-", "-", {}),
    "softmax_channels_bf16": ("strided", "logsumexp", "-", "sub, exp", {"dims": (1,),
                                                                          "map": True}),
    "log_softmax_dim0_fp32": ("strided", "logsumexp", "-", "sub", {"dims": (0,),
                                                                    "map": True}),
    # compensated fp32 sums past an inf (2026-12-03, ninth session)
    "sum_rows_inf_fp32": ("row", "sum", "gt, where", "-", {}),
    "sum_dim1_inf_fp32": ("strided", "sum", "gt, where", "-", {"dims": (1,)}),
    # odd columns, folded rows (2026-12-06, twenty-ninth session)
    "sum_dim1_oddcols_fp32": ("strided", "sum", "-", "-", {"dims": (1,), "keepdim": True}),
    "mean_dim1_oddcols_bf16": ("chain", "mean+pointwise", "-", "-", {}),
    "argmin_dim1_oddcols_fp32": ("strided", "argmin", "-", "-", {"dims": (1,)}),
}


def test_every_reduce_task_is_listed():
    assert sorted(REDUCE_EXTRA) == sorted(p.stem for p in fd.REDUCE_TASKS.glob("*.py"))


@pytest.mark.parametrize("name", sorted(fd.BUNDLED_REDUCE))
def test_bundled_reduction_is_recognised(name):
    family, op, pro, epi = fd.BUNDLED_REDUCE[name]
    plan = fd.plan_of(name)
    assert (plan.family, plan.op) == (family, op), plan.description
    assert (plan.prologue.describe(), plan.epilogue.describe()) == (pro, epi), plan.description
    x = plan.leaf(plan.main)
    assert x.kind == "full" and x.source == "input"
    assert plan.out_dtype == ("int64" if op.startswith("arg") else
                              "bfloat16" if name.endswith("bf16") else "float32")


@pytest.mark.parametrize("name", sorted(REDUCE_EXTRA))
def test_reduce_task_plan(name):
    family, op, pro, epi, params = REDUCE_EXTRA[name]
    plan = fd.plan_of(name)
    assert (plan.family, plan.op) == (family, op), plan.description
    assert (plan.prologue.describe(), plan.epilogue.describe()) == (pro, epi), plan.description
    for k, v in params.items():
        assert plan.param(k) == v, (k, plan.params)


def test_norm_weights_are_per_channel():
    gn = fd.plan_of("group_norm_bf16")
    assert {gn.leaf(gn.param("weight")).kind, gn.leaf(gn.param("bias")).kind} == {"table"}
    inorm = fd.plan_of("instance_norm_affine_bf16")
    w = [lf for lf in inorm.leaves if lf.ref.endswith("weight")][0]
    assert (w.kind, w.rowmap) == ("rowmap", (1, 2, 2))  # index (row // 1) % C of (N, C) rows
    rms = fd.plan_of("rmsnorm_channels_bf16")
    assert rms.leaf("p_weight").kind == "row"  # one value per index of the reduced dim


def test_a_number_passed_to_forward_stays_an_argument():
    """Bug: ``A * s`` with s a forward argument was baked in as the value seen at capture."""
    plan = fd.plan_of("scalar_mul_fp32")
    s = plan.leaf("s")
    assert (s.source, s.kind, s.ref) == ("input", "value", "s")
    code = fd.rendered("scalar_mul_fp32")
    assert "3.14" not in code
    assert "(), [s], out" in code  # the launch passes s as a run-time scalar


def test_min_with_a_constant_is_elementwise():
    """Bug: ``torch.min(x, torch.tensor(self.constant))`` was read as a reduction over dim c."""
    plan = fd.plan_of("min_constant_fp32")
    assert [n.op for n in plan.prologue.nodes] == ["minimum", "sub"]
    kinds = {lf.name: (lf.source, lf.kind) for lf in plan.leaves}
    assert kinds["a_constant"] == ("attr", "value")  # self.constant, read at run time


def test_keepdim_through_a_view_is_a_per_row_broadcast():
    plan = fd.plan_of("normalize_rows_unsqueeze_fp32")
    assert plan.out_shape == "same"
    assert any(n.op == "identity" and n.args == ("%y",) for n in plan.epilogue.nodes)
