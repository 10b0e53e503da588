"""The conv family compiles for sm_90a on the CPU with the SASS we design for.

Implicit GEMM candidates: one ``ConvKernel`` whose product runs on the tensor cores
(``HGMMA.64xNxK`` of the plan's precision, no ``HMMA``), whose activation tiles arrive by TMA
in im2col mode (``UTMALDG.5D.IM2COL``) and filter tiles by tiled TMA (``UTMALDG``), plus the
two pack kernels. Direct candidates (depthwise): one ``DirectConvKernel`` summing on the CUDA
cores (``FFMA``, no HGMMA). Every kernel: no local memory (no LDL / STL, zero stack frame).

Tail kernels (GroupNorm, BatchNorm, pooling, plane and channel reductions) must be there and
free of local memory too. Cases (about 30 compiles, run by ``family_compile_driver.py`` in two child
processes at once; nothing of the DSL is imported here; every bundled conv task compiled
clean once, see the issue-20 report). The kernels take every size at run time, so one shape
per variant is enough: fp32 through 3xTF32 and TF32 (a tolerance that admits it), bf16,
fp16, 1-D / 2-D / 3-D, a narrow k tile (16 input channels), transposed (one GEMM per output
phase; the zero-inserting pack where a phase has no tap), full / per-channel / scalar
epilogue operands, tails (GroupNorm then max pooling; max pooling then a spatial mean after a
transposed conv; a softmax over channels then 3-D max pooling; a log-softmax over 48
fp32 channels; BatchNorm), 64-row tiles with
a 2-CTA cluster multicasting the im2col tiles, a 32-channel k tile and explicit stages, and
the direct kernel: fp32 with a channel multiplier, stride 2 and a 5x5 kernel; bf16 with an
epilogue and other knobs at a hidden verification shape; a dilated depthwise 1-D conv, a
strided depthwise 3-D one on an odd width, a grouped one with 4 channels a group and a
residual (128-bit span reads asserted where the row allows them); W taps folded into the
channels (a 3-D conv of 32 channels, a 3-channel 7x7 stem at an odd verification shape);
1x1 convs as one batched GEMM over NCHW (``PointwiseConvKernel``: tiled TMA loads and
stores, no pack), with a full / per-channel epilogue; a strided transposed 3-D conv as one
GEMM over the zero-inserted input (``phased`` off); channel reductions taken in the conv
kernel's epilogue (``fuse_channel``: a mean over 96 channels after a per-channel scale, a
maximum over the channels of a strided transposed conv times a full operand): no
ChannelKernel then; a dilated window wider than the im2col descriptor encodes on the direct
kernel; a transposed conv of thin groups (8 input channels) as one implicit GEMM a group.
Split-K (the default of convs with few output tiles and a long K, forced on a grouped
conv): the conv kernel stores fp32 partial outputs and ``ConvSplitReduceKernel`` sums the
slices with 128-bit loads and applies the chain. Forward implicit GEMMs stage their tile
through shared memory for the stores (128-bit
stores asserted where the output plane allows them; a fused channel reduction reads the
staged tile one value a pixel and channel and stores one value a pixel).
"""

import re
from functools import cache, partial
from importlib.util import find_spec
from pathlib import Path

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

pytestmark = [pytest.mark.skipif(find_spec("cutlass") is None, reason="nvidia-cutlass-dsl missing"),
              pytest.mark.slow]

#: SASS type suffix of the HGMMA per precision (fp16 inputs carry none).
_MMA_TYPE = {"bf16": ".BF16", "fp16": "", "tf32": ".TF32", "3xtf32": ".TF32"}
#: (task, knob changes, shape index: 0 the main shape (batch capped), 1 the first
#: VERIFY_SHAPE)
#: 3xTF32 stages holding one K' slot, the operands stored as (hi, lo) pairs
_ONE_SLOT_PAIRS = {"paired": True, "block_stages": False}

CASES = [
    ("conv2d_fp32", {}, 0), ("rec_transposed_functional_fp32", {}, 0), ("conv1d_bf16", {}, 0),
    ("conv3d_softmax_maxpool_bf16", {}, 1), ("conv2d_batchnorm_scale_bf16", {}, 0),
    ("rec_transposed_zero_insert_bf16", {}, 0),
    ("conv2d_groupnorm_scale_maxpool_clamp_bf16", {}, 0),
    ("conv2d_groupnorm_scale_maxpool_clamp_bf16", {"fuse_norm": False}, 0),
    ("rec_batchnorm_tanh_maxpool_fp32", {}, 0),
    ("rec_batchnorm_tanh_maxpool_fp32", {"fuse_norm": False}, 0),
    ("rec_groupnorm_hardswish_mean_fp32", {}, 0),
    ("rec_groupnorm_hardswish_mean_fp32", {"fuse_norm": False}, 0),
    ("rec_groupnorm_clamp_channel_max_fp32", {}, 0),
    ("conv2d_instancenorm_div_fp32", {}, 0),  # the fp32 GroupNorm tail (KernelBench L2 17)
    ("conv_transpose2d_maxpool_hardtanh_mean_tanh_bf16", {}, 1),
    ("rec_functional_same_fp16", {}, 0),
    ("conv2d_bf16", {"tile_m": 64, "cluster_n": 2, "tile_k": 32, "stages": 3}, 0),
    ("conv2d_depthwise_fp32", {}, 0),
    ("conv2d_depthwise_relu6_bf16", {"vec_bits": 64, "rows": 2}, 1),
    ("rec_depthwise_1d_dilated_fp32", {}, 0), ("rec_depthwise_3d_bf16", {}, 0),
    ("rec_grouped_thin_asym_bf16", {}, 0),
    ("conv3d_bf16", {}, 0), ("conv2d_stem_bf16", {}, 1),
    ("conv2d_1x1_bf16", {}, 0), ("rec_pointwise_chain_bf16", {}, 0),
    ("conv_transpose3d_bf16", {"phased": False}, 0),
    ("rec_channel_mean_bf16", {}, 0), ("rec_transposed_channel_amax_fp32", {}, 0),
    ("rec_channel_log_softmax_fp32", {}, 0), ("rec_channel_softmax_wide_fp32", {}, 0),
    ("rec_wide_dilated_fp32", {}, 0), ("rec_transposed_grouped_thin_fp32", {}, 0),
    *((name, {}, 0) for name in sorted(fd.CONV_TASK_BEFORE)),
    ("rec_pre_depthwise_pointwise_bf16", {}, 1),
    # split-K (few output tiles, a long K: the default of these two; a grouped conv forced)
    ("conv2d_deep_small_fp32", {}, 1), ("conv2d_deep_scale_relu_residual_bf16", {}, 0),
    ("conv2d_grouped_bf16", {"split_k": 2}, 0),
    ("rec_pointwise_short_k_fp32", {}, 0),  # 3xTF32, promoted after every k tile
    # 3xTF32 one K' slot a stage (blocked stages are the fp32 default: a block's hi and lo
    # tiles a stage, each loaded once), the packed input and filter as (hi, lo) pairs:
    # forward, transposed, split-K; and as the three slots, promoted after every K' tile
    ("conv2d_fp32", _ONE_SLOT_PAIRS, 0), ("rec_transposed_functional_fp32", _ONE_SLOT_PAIRS, 0),
    ("conv2d_deep_small_fp32", _ONE_SLOT_PAIRS, 1),
    ("rec_pointwise_short_k_fp32", {"block_stages": False}, 0),
    # split A: the input stored once in fp32, its lo parts made in shared memory by the
    # consumers (forward and stride-1 transposed)
    ("conv2d_fp32", {"split_a": True}, 0), ("rec_transposed_functional_fp32", {"split_a": True}, 0),
    # blocked stages in 2-CTA clusters (each operand's two tiles a stage multicast)
    ("conv2d_fp32", {"cluster_m": 2}, 0), ("conv2d_fp32", {"cluster_n": 2, "tile_m": 64}, 0),
    # the direct kernel with several output channels a thread (out_chans): 8 -> 64 channels
    # with a chain, and a depthwise conv whose channel multiplier 2 caps it at 2
    ("conv2d_avgpool_sigmoid_sum_fp32", {"out_chans": 4}, 0),
    ("conv2d_depthwise_fp32", {"out_chans": 4}, 0),
    # short rows under a (3, 3, 1) filter merged into long ones (128-bit reads and stores)
    ("rec_conv3d_short_rows_fp32", {}, 0),
]
#: Implicit GEMM cases whose output planes (ZPQ) are multiples of 8 pixels: the staged
#: epilogue stores 8 pixels of a channel in 128-bit accesses (16 bytes or, fp32, 2 x 16).
_WIDE_STORES = {"conv3d_bf16", "conv2d_fp32"}


#: Direct cases whose rows allow 128-bit span reads (W a multiple of 16 bytes' elements).
_WIDE_DIRECT = {"conv2d_depthwise_fp32", "rec_depthwise_1d_dilated_fp32",
                "rec_grouped_thin_asym_bf16", "rec_conv3d_short_rows_fp32"}


def _case_id(c) -> str:
    name, knobs, shape = c
    return name + "".join(f"-{k}={v}" for k, v in knobs.items()) + ("-verify" if shape else "")


def _shape(name: str, index: int) -> dict:
    s = fd.shapes(name, max_rows=2)[index]
    return s


@cache
def _results(root: str) -> list[dict]:
    return fd.compile_rendered(Path(root), CASES, [
        ((name, tuple(sorted(knobs.items()))),
         partial(fd.rendered, name, extra=tuple(sorted(knobs.items()))), _shape(name, shape))
        for name, knobs, shape in CASES])

@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    return _results(str(tmp_path_factory.mktemp("conv_compile")))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[_case_id(c) for c in CASES])
def test_conv_compiles_to_the_sass_we_design_for(index, compiled):
    from cutegen.codegen.families.render import knobs as knobs_of

    name, changes, _ = CASES[index]
    res = compiled[index]
    assert res["error"] is None, res["error"]
    kernels = {n: k for comp in res["compiles"] for n, k in comp["kernels"].items()}
    for kname, k in kernels.items():
        local = [op for op in k["ops"] if op.startswith(("LDL", "STL"))]
        assert not local and k.get("frame", 0) == 0, f"local memory in {kname}: {k}"
    plan = fd.plan_of(name)
    if plan.family == "chain":  # kernels before the conv (chains.before_conv): one kernel
        # class a stage (the pointwise, pool, direct or implicit GEMM conv kernel), and an
        # implicit GEMM's tensor-core and im2col TMA instructions
        names = " ".join(kernels)
        for st in plan.param("stages"):
            want = {"pointwise": "Pointwise", "pool": "PoolKernel", "row": "Row"}.get(
                st.family) or (
                "DirectConvKernel" if st.param("algo") == "direct" else "ConvKernel")
            assert want in names, (st.description, list(kernels))
        gemm = [k for n, k in kernels.items() if "ConvKernel" in n and "Direct" not in n
                and "Pack" not in n]
        assert all(any(op.startswith("HGMMA") for op in k["mma"]) for k in gemm), gemm
        return
    values, _ = knobs_of(plan)
    values.update(changes)
    tails = {"max_pool": "PoolKernel", "avg_pool": "PoolKernel", "plane": "PlaneReduceKernel",
             "group_norm": "GroupNormKernel", "channel": "ChannelKernel",
             "batch_norm": "BatchNormKernel"}
    fused = bool(values.get("fuse_channel")) and values["cluster_n"] == 1 and int(
        plan.param("out_channels")) <= values["tile_n"]
    for i, st in enumerate(plan.param("stages")):
        if i == 0 and fused:  # reduced in the conv kernel's epilogue
            assert not any("ChannelKernel" in n for n in kernels), list(kernels)
            continue
        assert any(tails[dict(st)["op"]] in n for n in kernels), (dict(st)["op"], list(kernels))
    if "fuse_norm" in values:  # fused: the norm's kernels store a scale and an offset
        # a channel (and partial sums), one value at a time; unfused they store the
        # normalised tensor in vectors
        norm = [k for n, k in kernels.items() if "NormKernel" in n]
        wide = sum(v for k in norm for op, v in k["ops"].items() if op.startswith("STG.E.")
                   and op.split(".")[-1] in ("64", "128"))
        assert norm and (wide == 0) == bool(values["fuse_norm"]), (changes, norm)
    if plan.param("algo") == "direct":
        direct = [k for n, k in kernels.items() if "DirectConvKernel" in n]
        tails_seen = [n for n in kernels if any(t in n for t in tails.values())]
        assert len(direct) == 1 and len(kernels) == 1 + len(tails_seen), list(kernels)
        mma = direct[0]["mma"]
        assert mma.get("FFMA", 0) > 0 and not any(op.startswith(("HGMMA", "HMMA")) for op in mma)
        if name in _WIDE_DIRECT and "vec_bits" not in changes:
            assert direct[0]["ops"].get("LDG.E.128", 0) > 0, direct[0]["ops"]
        if name == "rec_conv3d_short_rows_fp32":  # rows of 10 merged: whole-vector stores
            assert direct[0]["ops"].get("STG.E.128", 0) > 0, direct[0]["ops"]
        return
    precision = values.get("precision")
    if values.get("gemm_1x1"):  # 16-byte rows: the batched GEMM alone, no pack, no gather
        assert len(kernels) == 1 and "PointwiseConvKernel" in next(iter(kernels)), list(kernels)
        mma = next(iter(kernels.values()))["mma"]
        want = f"HGMMA.64x{values['tile_n']}x16.F32{_MMA_TYPE[precision]}"
        assert mma.get(want, 0) > 0 and mma.get("UTMALDG", 0) > 0, (want, mma)
        assert mma.get("UTMASTG", 0) > 0 and "UTMALDG.5D.IM2COL" not in mma, mma
        return
    conv = [k for n, k in kernels.items() if "ConvKernel" in n and "Pack" not in n]
    assert len(conv) == 1, list(kernels)
    assert any("ConvPackKernel" in n for n in kernels) and any(
        "WeightPackKernel" in n for n in kernels), list(kernels)
    mma = conv[0]["mma"]
    kdim = 8 if precision in ("tf32", "3xtf32") else 16
    want = f"HGMMA.64x{values['tile_n']}x{kdim}.F32{_MMA_TYPE[precision]}"
    # (ptxas's empty HGMMA closing a wgmma group on a branch: a blocked stage's promotion
    # inside its block)
    hgmma = {op for op in mma if op.startswith("HGMMA") and not (
        values.get("block_stages") and op == "HGMMA.64x8x16.F16")}
    assert hgmma and all(op == want or op.startswith(want + ".") for op in hgmma), (want, mma)
    assert not any(op.startswith("HMMA") for op in mma), mma
    if precision == "fp16":
        assert not any(t in op for op in hgmma for t in (".BF16", ".TF32")), hgmma
    ops = conv[0]["ops"]
    if fused:  # the tile staged through shared memory, read a value a pixel and channel
        assert ops.get("LDS", 0) > 0 and ops.get("STS", 0) > 0, ops
    elif not plan.param("transposed"):  # the tile staged through shared memory for the stores
        assert ops.get("LDS.128", 0) > 0 and ops.get("STS", 0) > 0, ops
    if name in _WIDE_STORES:
        assert ops.get("STG.E.128", 0) > 0 and not any(
            op in ops for op in ("STG.E", "STG.E.U16", "STG.E.64")), ops
    # split-K: the conv kernel's fp32 partial outputs, then one kernel summing the slices
    # (128-bit loads of each: these outputs' sizes are multiples of 4) with the chain
    split = values.get("split_k", 1) > 1 and not fused and not values.get("phased")
    summed = [k for n, k in kernels.items() if "ConvSplitReduceKernel" in n]
    assert len(summed) == int(split), list(kernels)
    if split:
        assert summed[0]["ops"].get("LDG.E.128", 0) > 0, summed[0]["ops"]
    pack = [k for n, k in kernels.items() if "ConvPackKernel" in n][0]["ops"]
    if not values.get("split_a"):  # split A: the input stored once, no pairs
        assert pack.get("LDS.64", 0) > 0, pack  # channel pairs, one 64-bit shared read
    assert mma.get("UTMALDG.5D.IM2COL", 0) > 0, f"no im2col TMA loads: {mma}"
    assert mma.get("UTMALDG", 0) > 0, f"no tiled TMA loads of the filter: {mma}"
    shape = CASES[index][2]
    one_slot = [c for c in ((name, _ONE_SLOT_PAIRS, shape), (name, {"block_stages": False},
                                                             shape)) if c in CASES]
    if values.get("block_stages") and one_slot and not values.get("split_a"):
        # the block's hi and lo tiles, once each
        one = compiled[CASES.index(one_slot[0])]
        one_mma = next(k for comp in one["compiles"] for n, k in comp["kernels"].items()
                       if "ConvKernel" in n and "Pack" not in n)["mma"]
        tf32 = [sum(n for op, n in m.items() if op.startswith(want)) for m in (one_mma, mma)]
        assert tf32[1] == 3 * tf32[0], tf32
        loads = [m["UTMALDG.5D.IM2COL"] + m["UTMALDG"] for m in (one_mma, mma)]
        assert loads[1] == 2 * loads[0], (one_mma, mma)
    if values.get("split_a"):  # against the blocked default: the same three products, the
        # input's tile loaded once a block instead of its hi and lo tiles, the filter's both;
        # the consumers read the fp32 tile and write its hi and lo parts in shared memory
        blocked = compiled[CASES.index((name, {}, shape))]
        b_mma = next(k for comp in blocked["compiles"] for n, k in comp["kernels"].items()
                     if "ConvKernel" in n and "Pack" not in n)["mma"]
        tf32 = [sum(n for op, n in m.items() if op.startswith(want)) for m in (b_mma, mma)]
        assert tf32[0] == tf32[1], tf32
        assert 2 * mma["UTMALDG.5D.IM2COL"] == b_mma["UTMALDG.5D.IM2COL"], (b_mma, mma)
        assert mma["UTMALDG"] == b_mma["UTMALDG"], (b_mma, mma)
        assert ops.get("LDS", 0) >= 2 * 64 * values["tile_k"] // 128, ops
        # ... and writes each word it read twice, its hi part back and its lo part: the
        # tensor cores do not simply drop a word's low 13 bits (the raw words read as A_hi
        # gave tf32-sized errors on an H100)
        b_ops = next(k for comp in blocked["compiles"] for n, k in comp["kernels"].items()
                     if "ConvKernel" in n and "Pack" not in n)["ops"]
        sts = [sum(n for op, n in o.items() if op.startswith("STS")) for o in (b_ops, ops)]
        assert sts[1] - sts[0] >= 2 * (ops.get("LDS", 0) - b_ops.get("LDS", 0)), (sts, ops)
        assert values["block_stages"] and conv[0].get("frame", 0) == 0, conv[0]  # no spills
        # the input's tensor map is an fp32 one: through a tf32 map every lo part came out
        # zero on an H100 (1xTF32 errors, 2026-12-07; most likely TMA rounding what it
        # loads to tf32). The kernel's name spells its first copy atom's (the input's TMA
        # load's) value type.
        name = next(n for n in kernels if "ConvKernel" in n and "Pack" not in n)
        assert re.findall(r"Valuetype([a-z0-9]+)", name)[:1] == ["f32"], name


def test_group_norm_statistics_keep_four_loads_in_flight(compiled):
    """The GroupNorm tail's statistics pass issues each step's four loads before it folds
    any (written as one unrolled loop, ptxas put the math between them: one load in flight
    a thread in the fp32 tail, found by tools/sass_audit.py on KernelBench level 2's 17)."""
    seen = 0
    for index in range(len(CASES)):
        res = compiled[index]
        for n, k in ((n, k) for comp in res["compiles"] for n, k in comp["kernels"].items()):
            if "GroupNormKernel" in n:
                seen += 1
                assert k["in_flight"] >= 4, (CASES[index][0], k)
    assert seen


def test_channel_softmax_reads_each_channel_once(compiled):
    """A softmax over 64 channels or fewer holds a pixel's channels in registers
    (``ChannelKernel.cached``; a softmax of 32 bf16 channels, a log-softmax of 48 fp32 ones):
    one load a channel, all issued before the max needs them, instead of a max, a sum and a
    write pass each reading every channel (KernelBench L2 49 on an H100: the input read
    three times, 757 us of the task's 2,232)."""
    for name in ("conv3d_softmax_maxpool_bf16", "rec_channel_log_softmax_fp32"):
        index = next(i for i, c in enumerate(CASES) if c[:2] == (name, {}))
        res = compiled[index]
        channel = [k for comp in res["compiles"] for n, k in comp["kernels"].items()
                   if "ChannelKernel" in n]
        assert channel, (name, res)
        channels = int(fd.plan_of(name).param("out_channels"))
        for k in channel:
            loads = sum(v for op, v in k["ops"].items() if op.startswith("LDG"))
            assert loads == channels and k["in_flight"] >= channels, (name, channels, k)
