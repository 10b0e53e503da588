"""The conv family without the DSL: recognition of every bundled conv task and of the small
``conv_tasks/`` cases (``rec_neg_*``: not covered, with the reason), the rendered candidates
(static checks, knobs, declarations, the tail stages' launches) and the built-in rewriter's
conv moves."""

import ast
import math
from dataclasses import replace

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.candidate import declared_precision, parse_tunables
from cutegen.codegen.eval.static import check_source
from cutegen.codegen.families.conv import fold_pays, tile_k_for

_IG, _DIRECT = "implicit_gemm", "direct"
#: name -> (op, algo, epilogue ops, {leaf name: kind} that must hold, params that must hold).
BUNDLED = {
    "conv2d_bf16": ("conv", _IG, "add", {"p_conv_bias": "col"}, {"kernel": (3, 3)}),
    "conv2d_large_bf16": ("conv", _IG, "-", {}, {"in_channels": 256}),
    "conv2d_fp16": ("conv", _IG, "add", {}, {"precision_default": "fp16"}),
    "conv2d_fp32": ("conv", _IG, "add", {}, {"precision_modes": ("3xtf32",)}),
    "conv2d_stem_bf16": ("conv", _IG, "-", {}, {"stride": (2, 2), "padding": (3, 3)}),
    "conv2d_strided_bf16": ("conv", _IG, "add", {}, {"stride": (2, 2)}),
    "conv2d_dilated_bf16": ("conv", _IG, "add", {}, {"dilation": (2, 2)}),
    "conv2d_asymmetric_bf16": ("conv", _IG, "add", {}, {"kernel": (3, 5), "padding": (1, 2)}),
    "conv2d_1x1_bf16": ("conv", _IG, "-", {}, {"kernel": (1, 1)}),
    "conv2d_grouped_bf16": ("conv", _IG, "add", {}, {"groups": 4}),
    "conv1d_bf16": ("conv", _IG, "add", {}, {"dims": 1}),
    "conv1d_strided_fp32": ("conv", _IG, "add", {}, {"stride": (3,), "dilation": (2,)}),
    "conv3d_bf16": ("conv", _IG, "add", {}, {"dims": 3}),
    "conv3d_fp32": ("conv", _IG, "add", {}, {"kernel": (3, 5, 5), "stride": (1, 2, 2)}),
    "conv2d_depthwise_bf16": ("conv", _DIRECT, "add", {}, {"groups": 256}),
    "conv2d_depthwise_fp32": ("conv", _DIRECT, "add", {}, {"groups": 128, "out_channels": 256}),
    "conv_transpose2d_bf16": ("conv_transpose", _IG, "add", {}, {"stride": (2, 2)}),
    "conv_transpose2d_s1_fp32": ("conv_transpose", _IG, "add", {}, {"stride": (1, 1)}),
    "conv_transpose3d_bf16": ("conv_transpose", _IG, "add", {}, {"output_padding": (1, 1, 1)}),
    "conv_transpose1d_bf16": ("conv_transpose", _IG, "add", {},
                              {"groups": 2, "dilation": (2,), "output_padding": (1,)}),
    "conv2d_deep_small_fp32": ("conv", _IG, "add", {}, {"in_channels": 512,
                                                       "precision_modes": ("3xtf32",)}),
    "conv3d_deep_small_bf16": ("conv", _IG, "add", {}, {"dims": 3, "out_channels": 256}),
    "conv2d_relu_bias_bf16": ("conv", _IG, "add, relu, add", {"p_bias": "col"}, {}),
    "conv2d_deep_scale_relu_residual_bf16": ("conv", _IG, "mul, relu, add",
                                             {"p_scale": "col", "residual": "full"}, {}),
    "conv2d_mul_leakyrelu_gelu_bf16": ("conv", _IG, "add, mul, leaky_relu, gelu",
                                       {"p_multiplier": "col"}, {}),
    "conv2d_sub_tanh_sub_fp32": ("conv", _IG, "add, sub, tanh, sub",
                                 {"a_subtract1_value": "value"}, {}),
    "conv2d_hardswish_relu_bf16": ("conv", _IG, "add, hardswish, relu", {}, {}),
    "conv2d_residual_bf16": ("conv", _IG, "add, mul, add", {"residual": "full"}, {}),
    "conv3d_scale_tanh_sigmoid_bf16": ("conv", _IG, "add, mul, tanh, mul, sigmoid",
                                       {"p_scaling_factor": "col", "p_bias": "col"}, {}),
    "conv_transpose2d_clamp_scale_bf16": ("conv_transpose", _IG,
                                          "add, sub, clamp, mul, clamp, div",
                                          {"p_bias": "col"}, {}),  # 2.0: inlined
    "conv1d_mish_fp32": ("conv", _IG, "add, mish, mish", {}, {}),
    "conv2d_depthwise_relu6_bf16": ("conv", _DIRECT, "add, relu6", {}, {}),
    # tails: (stage op, its post chain) in order under the key "stages"
    "conv2d_groupnorm_scale_maxpool_clamp_bf16": (
        "conv", _IG, "add", {"p_scale": "col", "p_group_norm_weight": "col"},
        {"stages": [("group_norm", "mul"), ("max_pool", "clamp")]}),
    "conv2d_sub_tanh_avgpool_bf16": ("conv", _IG, "add, sub, tanh, sub", {},
                                     {"stages": [("avg_pool", "-")]}),
    "conv3d_scale_globalavg_bias_fp32": ("conv", _IG, "add, mul", {"p_bias": "col"},
                                         {"stages": [("plane", "add")]}),
    "conv_transpose2d_maxpool_hardtanh_mean_tanh_bf16": (
        "conv_transpose", _IG, "add", {}, {"stages": [("max_pool", "hardtanh"),
                                                      ("plane", "tanh")]}),
    "conv3d_softmax_maxpool_bf16": ("conv", _IG, "add", {},
                                    {"stages": [("channel", "-"), ("max_pool", "-")]}),
    "conv_transpose3d_logsumexp_hardswish_fp32": (
        "conv_transpose", _IG, "add", {"p_bias": "scalar"},
        {"stages": [("channel", "add, sigmoid, mul, div, sub, clamp")]}),
    "conv2d_batchnorm_scale_bf16": ("conv", _IG, "add", {"p_bn_weight": "col"},
                                    {"stages": [("batch_norm", "mul")]}),
    "conv2d_instancenorm_div_fp32": ("conv", _IG, "add", {},
                                     {"stages": [("group_norm", "div")]}),
    "conv2d_softplus_multiply_batchnorm_bf16": ("conv", _IG, "add, softplus, tanh, mul", {},
                                                {"stages": [("batch_norm", "-")]}),
}
CHAINED = fd.BUNDLED_CONV_CHAINS
#: Our small tasks (conv_tasks/rec_*.py): same layout.
EXTRA = {
    "rec_pointwise_chain_bf16": ("conv", _IG, "add, mul, add, relu",
                                 {"p_conv_bias": "col", "p_scale": "col", "res": "full"},
                                 {"kernel": (1, 1)}),
    "rec_functional_same_fp16": ("conv", _IG, "add, sigmoid, mul", {"s": "col", "p_bias": "col"},
                                 {"padding": "same", "module": "", "kernel": (4, 4)}),
    "rec_min_tanh_bf16": ("conv", _IG, "add", {}, {"stages": [("channel", "tanh, tanh")]}),
    "rec_wide_dilated_fp32": ("conv", _DIRECT, "add", {}, {"dilation": (3,), "kernel": (9,)}),
    "rec_transposed_grouped_thin_fp32": ("conv_transpose", _IG, "-", {},
                                         {"groups": 4, "stride": (2, 3),
                                          "dilation": (2, 1)}),
    "rec_channel_mean_bf16": ("conv", _IG, "add, mul", {"p_scale": "col"},
                              {"stages": [("channel", "relu")]}),
    "rec_channel_log_softmax_fp32": ("conv", _IG, "add", {"p_conv_bias": "col"},
                                     {"stages": [("channel", "mul")]}),
    "rec_channel_softmax_wide_fp32": ("conv", _IG, "add", {"p_conv_bias": "col"},
                                      {"stages": [("channel", "add")]}),
    "rec_batchnorm_tanh_maxpool_fp32": ("conv", _IG, "add", {"p_conv_bias": "col"},
                                        {"stages": [("batch_norm", "tanh"),
                                                    ("max_pool", "-")]}),
    "rec_groupnorm_hardswish_mean_fp32": ("conv", _DIRECT, "add", {"p_conv_bias": "col"},
                                          {"stages": [("group_norm", "hardswish"),
                                                      ("plane", "-")]}),
    "rec_groupnorm_clamp_channel_max_fp32": ("conv", _IG, "add", {"p_multiplier": "col"},
                                             {"stages": [("group_norm", "clamp, mul"),
                                                         ("channel", "-")]}),
    "rec_transposed_channel_amax_fp32": ("conv_transpose", _IG, "add, mul", {"y": "full"},
                                         {"stages": [("channel", "sub")],
                                          "stride": (2, 2)}),
    "rec_conv1d_channel_sum_fp32": ("conv", _IG, "add", {}, {"stages": [("channel", "sigmoid")],
                                                             "dims": 1}),
    "rec_gelu_globalavg_squeeze_bf16": (
        "conv", _IG, "add, gelu", {}, {"stages": [("plane", "-")],
                                       "reshapes": (("squeeze", (("dim", -1),)),
                                                    ("squeeze", (("dim", -1),)))}),
    "rec_sequential_fp32": ("conv", _IG, "add, relu", {"p_features_0_bias": "col"},
                            {"module": "features.0"}),
    "rec_pointwise_short_k_fp32": ("conv", _IG, "-", {}, {"kernel": (1, 1),
                                                         "precision_default": "3xtf32"}),
    "rec_transposed_zero_insert_bf16": ("conv_transpose", _IG, "add, relu, add", {"r": "full"},
                                        {"stride": (2, 2), "dilation": (2, 2)}),
    "rec_transposed_functional_fp32": ("conv_transpose", _IG, "add", {"s": "scalar", "w": "full"},
                                       # 3xTF32 leads: plain TF32 failed this task's "large"
                                       # trial on the H200 (max error 1.2e4 on 2e7 outputs)
                                       {"precision_default": "3xtf32",
                                        "precision_modes": ("3xtf32", "tf32"), "module": "",
                                        "output_padding": (1, 1, 1)}),
    "rec_depthwise_1d_dilated_fp32": ("conv", _DIRECT, "-", {}, {"dilation": (3,),
                                                                 "groups": 64}),
    "rec_depthwise_3d_bf16": ("conv", _DIRECT, "add, silu", {"p_conv_bias": "col"},
                              {"stride": (1, 2, 2), "kernel": (3, 3, 3)}),
    "rec_grouped_thin_asym_bf16": ("conv", _DIRECT, "add, add", {"res": "full"},
                                   {"kernel": (3, 5), "groups": 6}),
    "rec_conv3d_short_rows_fp32": ("conv", _DIRECT, "add, relu", {"p_conv_bias": "col"},
                                   {"kernel": (3, 3, 1), "padding": (1, 0, 0)}),
}
#: Not covered: name -> (NotCovered.op, words the message must contain).
NEGATIVE = {
    "rec_neg_transposed_depthwise": ("nn.ConvTranspose2d", ["transposed depthwise", "forward"]),
    "rec_neg_wide_transposed": ("nn.ConvTranspose1d", ["24 > 16", "im2col"]),
    "rec_neg_unbatched": ("nn.Conv1d", ["unbatched"]),
}


def test_every_conv_task_is_listed():
    assert sorted({**BUNDLED, **CHAINED}) == list(fd.BUNDLED_CONV)
    listed = [*EXTRA, *fd.CONV_TASK_CHAINS, *fd.CONV_TASK_BEFORE, *NEGATIVE]
    assert sorted(listed) == sorted(p.stem for p in fd.CONV_TASKS.glob("*.py"))
    assert len(set(listed)) == len(listed)


@pytest.mark.parametrize("name", sorted(BUNDLED) + sorted(EXTRA))
def test_conv_plan(name):
    op, algo, epi, kinds, params = {**BUNDLED, **EXTRA}[name]
    plan = fd.plan_of(name)
    assert (plan.family, plan.op, plan.param("algo")) == ("conv", op, algo)
    assert plan.epilogue.describe() == epi
    leaves = {lf.name: lf.kind for lf in plan.leaves}
    for leaf, kind in kinds.items():
        assert leaves.get(leaf) == kind, (leaf, leaves)
    for k, v in params.items():
        if k == "stages":
            got = [(dict(st)["op"], dict(st)["post"].describe()) for st in plan.param(k)]
            assert got == v, got
        else:
            assert plan.param(k) == v, (k, plan.params)
    if "stages" not in params:
        assert plan.param("stages") == ()
    assert plan.leaf(plan.param("x")).source == "input"
    dtype = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}[name.rsplit("_", 1)[1]]
    assert plan.out_dtype == dtype and plan.out_shape == "conv"


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_conv_not_covered(name):
    op, words = NEGATIVE[name]
    rec = fd.recognition(name)
    assert not rec.covered and rec.not_covered.op == op, rec.not_covered
    for w in words:
        assert w in rec.not_covered.message, rec.not_covered.message


@pytest.mark.parametrize("name", sorted(BUNDLED) + sorted(EXTRA))
def test_rendered_conv_candidate(name):
    """The file parses, passes the static checks, imports nothing from cutegen, and its
    TUNABLES / TUNABLE_CHOICES / FAMILY / PRECISION are what the search reads."""
    from cutegen.codegen.families.conv import NORM_CONSUMERS
    from cutegen.codegen.families.render import knobs

    plan = fd.plan_of(name)
    code = fd.rendered(name)
    ast.parse(code)
    assert check_source(code).ok, check_source(code)
    assert "from cutegen" not in code and "class ModelNew(_TaskModule):" in code
    values, choices = knobs(plan)
    tun = parse_tunables(code)
    assert {t.name: t.value for t in tun.values()} == values
    assert all(t.value in t.choices for t in tun.values())
    assert f"FAMILY = {{'family': 'conv', 'op': '{plan.op}', 'fused': True}}" in code
    launches = {"max_pool": "_pool_launch(y, 'max'", "avg_pool": "_pool_launch(y, 'avg'",
                "plane": "_plane_reduce_launch(y,", "group_norm": "_group_norm_launch(y,",
                "channel": "_channel_launch(y,", "batch_norm": "_batch_norm_launch(y,"}
    body = code[code.index("class ModelNew"):]
    stages = [dict(st) for st in plan.param("stages")]
    for i, st in enumerate(stages):
        if i == 0 and "fuse_channel" in values:  # with the conv (or after it, knob off)
            assert "y = _conv_channel_launch(x, " in body, body
            continue
        if values.get("fuse_norm") and i + 1 < len(stages) and st["op"].endswith(
                "_norm") and stages[i + 1]["op"] in NORM_CONSUMERS:  # applied by the next
            assert f"norm=(_norm_stats(y, {st['op']!r}, " in body, body
            continue
        assert launches[st["op"]] in body, body
    if not plan.param("stages"):
        assert "class PoolKernel" not in code
    if plan.param("module") == "features.0":
        assert "getattr(self.features, '0')" in body
    if plan.param("algo") == "direct":
        assert "class DirectConvKernel" in code and "class GemmKernel" not in code
        assert declared_precision(code) == "" and "precision" not in values
    else:
        assert "class ConvKernel(GemmKernel)" in code and "make_im2col_tma_atom" in code
        assert declared_precision(code) == values["precision"] == plan.param("precision_default")
        assert set(choices["precision"]) <= set(plan.param("precision_modes"))
        cg = plan.param("in_channels") // plan.param("groups")
        taps_w = plan.param("kernel")[-1]
        fp32 = values["precision"] in ("tf32", "3xtf32")
        assert values["fold"] == (not plan.param("transposed")
                                  and fold_pays(cg, taps_w, choices["tile_k"], fp32))
        channels = cg * taps_w if values["fold"] else cg
        assert values["tile_k"] == tile_k_for(channels, choices["tile_k"], fp32)


def test_tile_k_default_wastes_little():
    """The fewest k steps (a step's im2col gather costs per pixel, whatever its width: 48 or
    96 bf16 channels take 64-wide steps, 33 fp32 ones 32-wide), the narrower of two equal
    counts."""
    assert [tile_k_for(c, [16, 32, 64], False) for c in (3, 16, 32, 48, 64, 96, 256)] == [
        16, 16, 32, 64, 64, 64, 64]
    assert [tile_k_for(c, [8, 16, 32], True) for c in (3, 16, 33, 64)] == [8, 16, 32, 32]


def test_fold_pays_for_few_channels_only():
    """The W taps are folded into the channels where few channels a tap make narrow k steps
    (a 3-channel 7x7 stem, 32 or 16 channels of a 3x3 filter), not where a tap's channels
    already fill wide steps; and the default candidate of such tasks folds, its k tile
    chosen for the folded channels."""
    from cutegen.codegen.families.conv import conv_knobs

    bf16, fp32 = [16, 32, 64], [8, 16, 32]
    assert [fold_pays(c, s, bf16, False) for c, s in ((3, 7), (16, 3), (32, 3), (64, 3),
                                                      (128, 3), (32, 1))] == [
        True, True, True, False, False, False]
    assert [fold_pays(c, s, fp32, True) for c, s in ((3, 11), (16, 5), (32, 3), (64, 3))] == [
        True, True, False, False]
    want = {"conv2d_stem_bf16": (True, 32), "conv3d_bf16": (True, 64),
            "conv2d_large_bf16": (False, 64), "conv_transpose2d_bf16": (False, 64)}
    for name, (fold, tk) in want.items():
        values, choices = conv_knobs(fd.plan_of(name))
        assert (values["fold"], values["tile_k"]) == (fold, tk), name
        assert choices["fold"] == ([False] if "transpose" in name else [False, True])


def test_gemm_1x1_offered_where_the_conv_is_a_gemm():
    """``gemm_1x1`` (the conv as a batched GEMM over NCHW as it is, no pack) is a knob of
    1x1 convs with stride 1, no padding, one group and a 16-bit precision only, on by
    default; the root's second candidate is the implicit GEMM ("1x1 as implicit GEMM")."""
    from cutegen.codegen.families.conv import CONV_VARIANTS, conv_knobs, pointwise_gemm

    for name in ("conv2d_1x1_bf16", "rec_pointwise_chain_bf16"):
        plan = fd.plan_of(name)
        values, choices = conv_knobs(plan)
        assert pointwise_gemm(plan) and values["gemm_1x1"] is True, name
        assert choices["gemm_1x1"] == [False, True]
    for name in ("conv2d_bf16", "conv_transpose2d_bf16", "conv2d_grouped_bf16",
                 "rec_functional_same_fp16", "conv2d_fp32"):
        values, choices = conv_knobs(fd.plan_of(name))
        assert "gemm_1x1" not in values and "gemm_1x1" not in choices, name
    assert CONV_VARIANTS[0] == ("1x1 as implicit GEMM", {"gemm_1x1": False})


def test_phased_offered_for_strided_transposed_convs():
    """``phased`` (one GEMM per output phase, or one over the zero-inserted input) is a knob
    of transposed convs with a stride only, phases by default; the zero-inserted GEMM is the
    root's second candidate there."""
    from cutegen.codegen.families.conv import CONV_VARIANTS, conv_knobs

    for name in ("conv_transpose3d_bf16", "conv_transpose2d_bf16", "conv_transpose1d_bf16"):
        values, choices = conv_knobs(fd.plan_of(name))
        assert values["phased"] is True and choices["phased"] == [False, True], name
    for name in ("conv_transpose2d_s1_fp32", "conv2d_strided_bf16", "conv2d_1x1_bf16"):
        values, choices = conv_knobs(fd.plan_of(name))
        assert "phased" not in values and "phased" not in choices, name
    labels = [label for label, _ in CONV_VARIANTS]
    assert labels.index("zero-inserted") < labels.index("cluster 2x1")


#: conv tasks with few output tiles and a long K: (tile_n, split_k) of the default
_SPLIT_DEFAULTS = {"conv2d_deep_small_fp32": (192, 4), "conv3d_deep_small_bf16": (256, 4),
                   "conv2d_deep_scale_relu_residual_bf16": (256, 4)}


def test_split_k_where_few_tiles_hold_a_long_k():
    """``split_k``: the default cuts K into slices (full-height tiles) only where the main
    shape's output has tiles for fewer than half the SMs and each slice keeps at least 16 k
    tiles, slices x tiles within the SMs; 1 for every other conv task (most have thousands of
    tiles), for phased transposed convs (no choice) and under a fused channel reduction."""
    from cutegen.codegen.families.conv import conv_knobs, split_k_for

    for name, (tile_n, split) in _SPLIT_DEFAULTS.items():
        plan = fd.plan_of(name)
        values, choices = conv_knobs(plan)
        assert (values["tile_m"], values["tile_n"], values["split_k"]) == (128, tile_n, split)
        assert choices["split_k"] == [1, 2, 4, 8], name
        shape = plan.param("conv_shape")
        pixels = shape[0] * math.prod(shape[2:])
        tiles = -(-pixels // 128) * -(-shape[1] // tile_n)
        assert 2 * tiles <= 132 and split * tiles <= 132, (name, tiles)
        # on a GPU with no more SMs than the output has tiles: no split
        assert split_k_for(plan, (128, tile_n, values["tile_k"]), values["precision"],
                           values["fold"], sms=tiles) == 1
    for name in [*BUNDLED, *EXTRA, *CHAINED]:
        if name in _SPLIT_DEFAULTS:
            continue
        plan = fd.plan_of(name)
        if plan.family != "conv" or plan.param("algo") == "direct":
            continue
        values, choices = conv_knobs(plan)
        assert values["split_k"] == 1, name
        if values.get("phased"):
            assert choices["split_k"] == [1], name


def test_short_3xtf32_main_loops_promote_every_k_tile():
    """3xTF32 convs of at most SHORT_K_TILES k tiles promote the tensor cores' accumulator
    after every k tile (2.6x less error on the H200, for little time in a short loop); longer
    ones every PROMOTE_DEFAULT; bf16 not at all."""
    from cutegen.codegen.families.conv import conv_knobs, gemm_k_tiles
    from cutegen.codegen.families.gemm import PROMOTE_DEFAULT, SHORT_K_TILES

    plan = fd.plan_of("rec_pointwise_short_k_fp32")
    values, choices = conv_knobs(plan)
    assert gemm_k_tiles(plan, values["tile_k"], "3xtf32", values["fold"]) == 6 <= SHORT_K_TILES
    assert values["promote"] == 1 and 1 in choices["promote"]
    for name in ("conv2d_fp32", "conv3d_fp32", "conv2d_deep_small_fp32", "conv1d_strided_fp32"):
        values, _ = conv_knobs(fd.plan_of(name))
        assert values["promote"] == PROMOTE_DEFAULT, name
    assert conv_knobs(fd.plan_of("conv2d_bf16"))[0]["promote"] == 0


#: conv tasks whose first tail is a channel reduction the conv's epilogue takes:
#: name -> (reduce, keepdim)
_FUSED_CHANNEL = {
    "rec_min_tanh_bf16": ("amin", True), "rec_channel_mean_bf16": ("mean", False),
    "rec_transposed_channel_amax_fp32": ("amax", True),
    "rec_conv1d_channel_sum_fp32": ("sum", True),
    "conv_transpose3d_logsumexp_hardswish_fp32": ("logsumexp", True),
    "conv_transpose2d_min_sum_gelu_bias_bf16": ("amin", True),
}


@pytest.mark.parametrize("name", sorted(_FUSED_CHANNEL))
def test_channel_reduction_fused_into_the_conv(name):
    """A channel reduction right after the conv (sum / mean / amax / amin / logsumexp, a post
    chain of single values) is taken in the conv kernel's epilogue by default (knob
    ``fuse_channel``, the ChannelKernel tail its other value): the default tile holds every
    output channel, and the forward calls _conv_channel_launch with the reduction."""
    from cutegen.codegen.families.conv import channel_fusable, conv_knobs

    plan = fd.plan_of(name)
    if plan.family == "chain":
        plan = plan.param("stages")[0]
    assert channel_fusable(plan)
    values, choices = conv_knobs(plan)
    assert values["fuse_channel"] is True and choices["fuse_channel"] == [True, False]
    assert values["tile_n"] >= int(plan.param("out_channels"))
    reduce, keepdim = _FUSED_CHANNEL[name]
    code = fd.rendered(name)
    body = code[code.index("def _cutegen_forward"):]
    assert "y = _conv_channel_launch(x, " in body
    assert f", {reduce!r}, {keepdim!r}, " in body.split("y = _conv_channel_launch(x, ", 1)[1]
    assert "_conv_launch(" not in body  # the conv is launched through it only


def test_channel_fusion_is_offered_only_where_one_tile_holds_the_reduction():
    """Not fusable: a softmax over the channels (every element written), a grouped conv,
    a tail other than a channel reduction, more than 256 output channels, the direct kernel;
    no ``fuse_channel`` knob there."""
    from dataclasses import replace

    from cutegen.codegen.families.conv import channel_fusable, conv_knobs

    for name in ("conv3d_softmax_maxpool_bf16", "conv2d_bf16", "conv2d_batchnorm_scale_bf16",
                 "rec_gelu_globalavg_squeeze_bf16", "conv2d_depthwise_relu6_bf16"):
        plan = fd.plan_of(name)
        assert not channel_fusable(plan), name
        assert "fuse_channel" not in conv_knobs(plan)[0], name
    plan = fd.plan_of("rec_min_tanh_bf16")
    params = dict(plan.params)
    wide = replace(plan, params=tuple(sorted({**params, "out_channels": 512}.items())))
    grouped = replace(plan, params=tuple(sorted({**params, "groups": 2}.items())))
    assert channel_fusable(plan) and not channel_fusable(wide) and not channel_fusable(grouped)
    assert "fuse_channel" not in conv_knobs(wide)[0]


def _algos(name: str) -> tuple[str, ...]:
    out = []
    for plan in fd.recognition(name).plans:
        conv = plan.param("stages")[0] if plan.family == "chain" else plan
        out.append(conv.param("algo"))
    return tuple(out)


def test_few_channel_convs_also_get_the_direct_kernel():
    """A forward conv with few input channels a group is also offered on the direct kernel
    (fp32 sums on the CUDA cores, no pack): first for fp32 with at most 8 channels (the 3xTF32
    im2col gather moves little a step: KernelBench's 3-channel 3-D conv ran 23.2 ms as an
    implicit GEMM, 4.6 ms direct on the H200), second for fp32 up to 32 channels and for bf16 /
    fp16 stems (up to 4); never for transposed, 1x1 or many-channel convs. The direct plan
    says so in its description and renders the direct kernel (a chain's first stage too)."""
    from cutegen.codegen.families.render import knobs

    assert _algos("conv2d_avgpool_sigmoid_sum_fp32") == ("direct", "implicit_gemm")  # 8 ch
    for name in ("conv3d_scale_globalavg_bias_fp32", "conv3d_fp32", "conv2d_stem_bf16",
                 "rec_conv1d_channel_sum_fp32"):
        assert _algos(name) == ("implicit_gemm", "direct"), name
    for name in ("conv2d_bf16", "conv2d_fp32", "conv1d_mish_fp32", "conv_transpose2d_s1_fp32",
                 "conv2d_1x1_bf16", "conv2d_depthwise_fp32", "conv2d_large_bf16"):
        assert len(fd.recognition(name).plans) == 1, name
    rec = fd.recognition("conv3d_scale_globalavg_bias_fp32")
    gemm, direct = rec.plans
    assert "precision 3xtf32" in gemm.description and "direct (fp32 sums)" in direct.description
    assert "precision" not in knobs(direct)[0] and "rows" in knobs(direct)[0]
    code = fd.rendered("conv3d_scale_globalavg_bias_fp32", extra=(("plan", 1),))
    assert "class DirectConvKernel" in code and "class ConvKernel(GemmKernel)" not in code
    chain = fd.recognition("conv2d_avgpool_sigmoid_sum_fp32").plans[0]
    assert chain.family == "chain" and "direct (fp32 sums)" in chain.description


def test_the_search_starts_from_both_conv_kernels():
    """Both plans become root candidates, the direct kernel's first where it leads, each with
    its knob variants; the move descriptions say which kernel."""
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_task_file

    name = "conv3d_scale_globalavg_bias_fp32"
    props = family_proposals(load_task_file(fd.task_path(name), name=name))
    kinds = ["class DirectConvKernel" in p.candidate.code for p in props]
    assert kinds[0] is False and True in kinds
    first_direct = kinds.index(True)
    assert all(kinds[first_direct:]) and not any(kinds[:first_direct])
    assert "direct kernel, fp32 sums" in props[first_direct].move.description
    assert "precision 3xtf32" in props[0].move.description


def test_gemm_1x1_eligibility():
    """Stride, padding, groups or a transposed conv each take the 1x1 conv off the GEMM."""
    from cutegen.codegen.families.conv import pointwise_gemm
    from cutegen.codegen.families.plan import Plan

    base = fd.plan_of("conv2d_1x1_bf16")

    def with_(**changes) -> Plan:
        params = dict(base.params)
        params.update(changes)
        return replace(base, params=tuple(params.items()))

    assert pointwise_gemm(with_())
    assert pointwise_gemm(with_(padding="valid")) and pointwise_gemm(with_(padding="same"))
    assert not pointwise_gemm(with_(stride=(2, 2)))
    assert not pointwise_gemm(with_(padding=(1, 0)))
    assert not pointwise_gemm(with_(groups=2))
    assert not pointwise_gemm(with_(transposed=True))
    assert not pointwise_gemm(with_(kernel=(1, 3)))


def test_conv_proposals_and_moves():
    """The root offers the default conv candidate then CONV_VARIANTS; a conv parent gets
    one-knob moves (family "conv"), the precision only within the plan's modes."""
    from cutegen.codegen.families.moves import family_moves, family_proposals, recognition_for
    from cutegen.codegen.rewriters.base import RewriteContext
    from cutegen.codegen.tasks import load_task_file

    task = load_task_file(fd.task_path("conv2d_fp32"), name="conv2d_fp32")
    recognition_for(task, in_process=True)  # cached: no capture in a child process
    props = family_proposals(task)
    assert props and props[0].move.params["variant"] == "default"
    assert all(p.move.params["family"] == "conv" for p in props)
    labels = [p.move.params["variant"] for p in props]
    assert "cluster 2x1" in labels and "fast math" not in labels  # fp32: no fast math
    ctx = RewriteContext(task=task, parent=props[0].candidate)
    moves = list(family_moves(ctx))
    names = {p.move.params["name"] for p in moves}
    assert {"tile_m", "tile_n", "tile_k", "cluster_m", "stages", "promote"} <= names
    assert all(p.move.params["family"] == "conv" for p in moves)
    assert not any(p.move.params["name"] == "precision" for p in moves)  # 1e-4: 3xtf32 only


def test_direct_conv_proposals():
    """A depthwise task's root candidates are the direct kernel's default and its own
    variants (none of the implicit GEMM's knobs)."""
    from cutegen.codegen.families.moves import family_proposals, recognition_for
    from cutegen.codegen.tasks import load_task_file

    task = load_task_file(fd.task_path("conv2d_depthwise_bf16"), name="conv2d_depthwise_bf16")
    recognition_for(task, in_process=True)
    labels = [p.move.params["variant"] for p in family_proposals(task)]
    assert labels == ["default", "rows 2", "rows 8"]
