"""GPU check: the conv family's candidates are correct through the real evaluator.

    pytest -m gpu tests/families_tests/test_conv_gpu.py -q -s            # everything (~15 min)
    pytest -m gpu tests/families_tests/test_conv_gpu.py -q -s -k smoke   # 8 cases (~3 min)

Each case renders the conv plan recognised from a bundled task (``benchmarks/tasks/conv*``)
or a ``conv_tasks/rec_*`` task into a candidate and evaluates it with
:class:`LocalEvaluator` (main shape with the task's input distributions, every VERIFY_SHAPE
— batch 1 and odd spatial sizes —, poisoned outputs, a determinism re-run, 20 timed calls;
no baselines) and asserts the verdict is ``correct``. Cases: the default candidate of every
conv task (the chains of a conv kernel and other families' kernels among them), then a few knob values on ``conv2d_bf16`` / ``conv2d_fp32`` (64-row tiles,
clusters with multicast, narrow k tiles, stages, promotion off and on) and on the direct
kernel (tile width, rows per thread), the W-tap fold on and off (``-k fold``) and split-K
(``-k split_k``).
``smoke`` selects one case per kernel path: bf16 and
3xTF32 implicit GEMM, a strided transposed conv (one GEMM per output phase) and one on the
zero-inserted input, grouped, 3-D with tails (softmax over channels, max pooling), GroupNorm
+ max pooling, and the direct kernel.

Every case is its own test, keeps its candidate in ``runs/conv_gpu/`` (reproduce with
``cutegen eval TASK FILE``) and appends one JSON line to ``runs/conv_gpu/summary*.jsonl`` (one
per xdist worker): verdict, errors, median time, kernels.
"""

import _cutegen_famdata as fd  # registered by conftest.py
import _cutegen_gpu_cases as gc  # registered by conftest.py
import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.tasks import load_task_file

OUT = fd.ROOT / "runs" / "conv_gpu"
pytestmark = pytest.mark.gpu

SMOKE = ("conv2d_bf16", "conv2d_fp32", "conv_transpose2d_bf16", "conv2d_grouped_bf16",
         "conv3d_softmax_maxpool_bf16", "conv2d_depthwise_relu6_bf16",
         "rec_transposed_zero_insert_bf16", "conv2d_groupnorm_scale_maxpool_clamp_bf16")
TASKS = list(fd.BUNDLED_CONV) + ["rec_functional_same_fp16", "rec_transposed_functional_fp32",
                                 "rec_transposed_zero_insert_bf16", "rec_sequential_fp32",
                                 "rec_min_tanh_bf16", "rec_gelu_globalavg_squeeze_bf16",
                                 "rec_depthwise_1d_dilated_fp32", "rec_depthwise_3d_bf16",
                                 "rec_grouped_thin_asym_bf16", "rec_pointwise_chain_bf16",
                                 "rec_channel_mean_bf16", "rec_transposed_channel_amax_fp32",
                                 "rec_channel_log_softmax_fp32",
                                 "rec_channel_softmax_wide_fp32",
                                 "rec_batchnorm_tanh_maxpool_fp32",
                                 "rec_groupnorm_hardswish_mean_fp32",
                                 "rec_groupnorm_clamp_channel_max_fp32",
                                 "rec_conv1d_channel_sum_fp32", "rec_wide_dilated_fp32",
                                 "rec_transposed_grouped_thin_fp32", "rec_pointwise_short_k_fp32",
                                 "rec_conv3d_short_rows_fp32",
                                 *sorted(fd.CONV_TASK_CHAINS), *sorted(fd.CONV_TASK_BEFORE)]
CASES: list[tuple[str, tuple]] = [(name, ()) for name in TASKS]
CASES += [("conv2d_bf16", (("tile_m", 64),)), ("conv2d_bf16", (("cluster_m", 2),)),
          ("conv2d_bf16", (("cluster_n", 2),)), ("conv2d_bf16", (("tile_k", 16),)),
          ("conv2d_bf16", (("tile_n", 128), ("stages", 3))),
          ("conv2d_fp32", (("promote", 0),)), ("conv2d_fp32", (("tile_k", 8),)),
          ("conv2d_stem_bf16", (("tile_k", 32),)),
          ("conv2d_depthwise_bf16", (("outs", 4), ("rows", 1))),
          ("conv2d_depthwise_bf16", (("vec_bits", 32), ("rows", 8), ("threads", 128))),
          ("conv2d_depthwise_fp32", (("outs", 2), ("rows", 2))),
          # W taps folded into the channels (conv3d_bf16 and conv2d_stem_bf16 fold by
          # default): many channels, 1-D, dilated, grouped, strided, 3xTF32, and unfolded
          ("conv2d_bf16", (("fold", True),)), ("conv1d_bf16", (("fold", True),)),
          ("conv2d_dilated_bf16", (("fold", True),)), ("conv2d_grouped_bf16", (("fold", True),)),
          ("conv2d_strided_bf16", (("fold", True),)), ("conv2d_fp32", (("fold", True),)),
          ("conv1d_strided_fp32", (("fold", True),)), ("conv3d_bf16", (("fold", False),)),
          ("conv2d_sub_tanh_sub_fp32", (("fold", True),)),
          # 1x1 convs: the batched GEMM by default, the implicit GEMM beside it
          ("conv2d_1x1_bf16", (("gemm_1x1", False),)),
          ("rec_pointwise_chain_bf16", (("gemm_1x1", False),)),
          # strided transposed convs as one GEMM over the zero-inserted input
          ("conv_transpose3d_bf16", (("phased", False),)),
          ("conv_transpose2d_bf16", (("phased", False),)),
          ("conv_transpose1d_bf16", (("phased", False),)),
          # channel reductions in the conv's epilogue (the default) and as a kernel of their own
          ("rec_min_tanh_bf16", (("fuse_channel", False),)),
          ("conv_transpose2d_min_sum_gelu_bias_bf16", (("fuse_channel", False),)),
          ("conv_transpose3d_logsumexp_hardswish_fp32", (("fuse_channel", False),)),
          ("rec_channel_mean_bf16", (("fuse_channel", False),)),
          ("rec_transposed_channel_amax_fp32", (("phased", False),)),
          ("rec_min_tanh_bf16", (("tile_m", 64),)),
          # a GroupNorm applied by the pool after it (the default), and as two kernels
          ("conv2d_groupnorm_scale_maxpool_clamp_bf16", (("fuse_norm", False),)),
          ("rec_batchnorm_tanh_maxpool_fp32", (("fuse_norm", False),)),
          ("rec_groupnorm_hardswish_mean_fp32", (("fuse_norm", False),)),
          ("rec_groupnorm_clamp_channel_max_fp32", (("fuse_norm", False),)),
          # split-K (fp32 partial outputs, then ConvSplitReduceKernel with the chain): 3xTF32,
          # bf16, groups (a workspace slice a group), a full residual and per-channel scale in
          # the reduce kernel's chain, a stride-1 transposed conv, 1-D with more slices than
          # some hidden shapes have k tiles (empty slices add zeros), big tiles on few pixels
          ("conv2d_fp32", (("split_k", 4),)), ("conv2d_bf16", (("split_k", 2),)),
          ("conv2d_grouped_bf16", (("split_k", 2),)), ("conv2d_residual_bf16", (("split_k", 4),)),
          ("conv_transpose2d_s1_fp32", (("split_k", 2),)), ("conv1d_bf16", (("split_k", 8),)),
          ("conv2d_deep_small_fp32", (("split_k", 4),)),
          ("conv2d_deep_small_fp32", (("split_k", 8), ("tile_m", 128), ("tile_n", 128))),
          ("conv3d_deep_small_bf16", (("split_k", 4), ("tile_m", 128), ("tile_n", 128))),
          ("conv2d_deep_scale_relu_residual_bf16", (("split_k", 4),)),
          # 3xTF32's packed input (and filter) as (hi, lo) pairs read as three k slots: a
          # forward conv, the W-tap fold, split-K, a strided and a stride-1 transposed
          # conv, a 1-D strided one, channels fused into the epilogue
          ("conv2d_fp32", (("paired", True), ("block_stages", False),)),
          ("conv2d_fp32", (("paired", True), ("block_stages", False), ("fold", True))),
          ("conv2d_fp32", (("paired", True), ("block_stages", False), ("split_k", 4))),
          ("conv1d_strided_fp32", (("paired", True), ("block_stages", False),)),
          ("conv_transpose2d_s1_fp32", (("paired", True), ("block_stages", False),)),
          ("rec_transposed_functional_fp32", (("paired", True), ("block_stages", False),)),
          ("conv_transpose3d_logsumexp_hardswish_fp32", (("paired", True), ("block_stages", False),)),
          ("conv2d_deep_small_fp32", (("paired", True), ("block_stages", False),)),
          # blocked stages (a block's hi and lo tiles a stage) are the fp32 default: the
          # default cases above run them; one K' slot a stage, the slots stored, here
          ("conv2d_fp32", (("block_stages", False),)),
          ("conv_transpose2d_s1_fp32", (("block_stages", False),)),
          ("rec_pointwise_short_k_fp32", (("block_stages", False),)),
          # blocked stages multicast in 2-CTA clusters, and with one consumer warp group
          ("conv2d_fp32", (("cluster_m", 2),)), ("conv2d_fp32", (("cluster_n", 2),)),
          ("conv_transpose2d_s1_fp32", (("tile_m", 64),)),
          # split A (the input stored once in fp32, its lo parts made in shared memory by
          # the consumers; thirty-eighth session, not yet run on a GPU): forward, the W-tap
          # fold, split-K, 1-D strided, stride-1 and strided transposed, channels fused into
          # the epilogue, a short K promoted after every K' tile, 2-CTA clusters, one
          # consumer warp group
          ("conv2d_fp32", (("split_a", True),)),
          ("conv2d_fp32", (("split_a", True), ("fold", True))),
          ("conv2d_fp32", (("split_a", True), ("split_k", 4))),
          ("conv1d_strided_fp32", (("split_a", True),)),
          ("conv_transpose2d_s1_fp32", (("split_a", True),)),
          ("rec_transposed_functional_fp32", (("split_a", True),)),
          ("conv_transpose3d_logsumexp_hardswish_fp32", (("split_a", True),)),
          ("rec_pointwise_short_k_fp32", (("split_a", True),)),
          ("conv2d_fp32", (("split_a", True), ("cluster_m", 2))),
          ("conv2d_fp32", (("split_a", True), ("cluster_n", 2))),
          ("conv_transpose2d_s1_fp32", (("split_a", True), ("tile_m", 64))),
          # the direct kernel with several output channels a thread (out_chans; 2 where the
          # channel multiplier is 2)
          ("conv2d_avgpool_sigmoid_sum_fp32", (("out_chans", 4),)),
          ("conv2d_depthwise_fp32", (("out_chans", 4),)),
          ("conv2d_depthwise_bf16", (("out_chans", 2),)),
          ("conv3d_scale_globalavg_bias_fp32", (("plan", 1), ("out_chans", 4))),
          ("conv2d_stem_bf16", (("plan", 1), ("out_chans", 8))),
          ("rec_conv3d_short_rows_fp32", (("out_chans", 4),)),  # merged rows, 4 channels
          # few input channels: the direct kernel beside the implicit GEMM (plans[1] here;
          # conv2d_avgpool_sigmoid_sum_fp32 takes it first)
          ("conv3d_scale_globalavg_bias_fp32", (("plan", 1),)),
          ("conv2d_stem_bf16", (("plan", 1),)),
          ("conv2d_avgpool_sigmoid_sum_fp32", (("plan", 1),))]


def _id(case) -> str:
    name, knobs = case
    smoke = "-smoke" if not knobs and name in SMOKE else ""
    return name + "".join(f"-{k}={v}" for k, v in knobs) + smoke


@pytest.fixture(scope="session")
def evaluators():
    """One LocalEvaluator per task (its reference worker is reused across that task's cases)."""
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    def make(name: str):
        task = load_task_file(fd.task_path(name), name=name)
        return LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=False),
                              run_dir=OUT / "run")

    yield from gc.evaluator_pool(OUT, make)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_conv_candidate_is_correct(case, evaluators):
    name, knobs = case
    code = fd.rendered(name, extra=tuple(sorted(knobs)))
    gc.judge(evaluators(name), code, _id(case), OUT, fd.task_path(name))
