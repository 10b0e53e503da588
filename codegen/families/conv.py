"""The ``conv`` kernel family: convolutions as implicit GEMMs on the Hopper GEMM kernel, with
the fused pointwise epilogue, rendered from a :class:`~cutegen.codegen.families.plan.Plan`
(recognised by :mod:`.conv_match`).

A candidate is ``head`` + the gemm template (``GemmKernel`` and its helpers) + the conv
template (``templates/conv.py.tmpl``), whose ``ConvKernel`` subclasses ``GemmKernel``:

* **Layout.** The task's tensors are NC(D)HW. One CuTe kernel (``ConvPackKernel``) writes the
  input once as the GEMM reads it: (groups, N, D', H', W', C') with channels innermost, the
  padding written as a zero halo, a transposed conv's inserted zeros written in, channels
  zero-padded to a multiple of ``tile_k`` (and split into tf32 hi / lo parts for 3xTF32).
  That costs one read and one write of the input (plus the halo; a CTA moves a 32-pixel x
  64-channel tile, reads along pixels and writes channel pairs); the filter is packed the
  same way (``WeightPackKernel``, (K, T, R, S, C'), mirrored and transposed for a transposed
  conv). The output is written in NC(D)HW directly by the GEMM's epilogue: no conversion.
* **Main loop.** GEMM-M = N * Z * P * Q output pixels, GEMM-N = output channels of a group,
  GEMM-K = (C', S, R, T). The producer warp's A loads are TMA loads in **im2col mode**: the
  TMA unit gathers a (tile_m pixels x tile_k channels) tile of one filter tap from the packed
  input, with the conv's stride as its traversal stride and the dilation as the tap stride;
  B is a plain TMA tile of the packed filter. Consumers (WGMMA), clusters with multicast,
  persistent scheduling and 3xTF32 promotion are the GEMM family's.
* **Epilogue.** Element (m, n) of the GEMM is output element ``img * K * ZPQ + n * ZPQ +
  pixel`` of NC(D)HW, so a channel's pixels are contiguous while a thread's WGMMA fragment
  holds pixels 8 apart: the tile goes through shared memory 32 channels at a time, and each
  thread then takes 8 consecutive pixels of a channel, runs the plan's chain (conv bias,
  per-channel (C, 1, 1) operands, scalars, module attributes, full residuals, activations) on
  the fp32 values and stores them in 128-bit (or, when ZPQ is not a multiple of 8, 64-, 32-
  or 16-bit) accesses. (Stored element by element from registers before: conv3d_bf16's
  GEMM and conv2d_large_bf16's spent a large part of their time there.)
* **Groups**: one GEMM launch per group (the packed input is group-major). Groups with fewer
  than 16 channels on either side (depthwise), and, as a second recognised plan (first for
  fp32 with at most 8), forward convs with few input channels
  (:func:`~cutegen.codegen.families.conv_match.direct_variant`), take ``algo`` "direct":
  ``templates/conv_direct.py.tmpl``'s ``DirectConvKernel`` reads NC(D)HW, a thread's
  outputs' input rows once each in vector accesses, and sums in fp32 on the CUDA cores
  (memory-bound work); its knobs are ``outs``, ``rows``, ``vec_bits`` and ``threads``
  (:data:`DIRECT_KNOBS`).
* **Transposed convs** with stride 1 are the forward conv of the re-padded input with the
  flipped filter. Strided ones run as one implicit GEMM per output phase (``_conv_phases``):
  the outputs ``stride * j + phi`` take only the filter taps that meet input pixels, a run
  of mirrored taps over the input itself (no inserted zeros, no wasted MMA work), stored with
  a strided output offset. Where a phase has no tap at all (the stride divides the dilation,
  or the kernel is shorter than the stride) the conv runs on the zero-inserted input
  instead (stride^d more MMA work); knob ``phased`` False takes that path for any strided
  transposed conv (one GEMM launch instead of stride^d: small convs whose phase GEMMs
  underfill the GPU and wait on the host between launches; the root's second candidate).

**1x1 convolutions** (``gemm_1x1``: stride 1, no padding, one group, bf16 / fp16) need no
pack and no gather: for each image the output (K x pixels) is the filter (K x C) times the
input's (C x pixels) plane, both NC(D)HW as they are, so one launch of the GEMM kernel with
the filter shared by every batch (``PointwiseConvKernel``) computes it, and its epilogue
stores NC(D)HW rows (TMA where a row of pixels is a 16-byte multiple). Shapes whose rows
are not 16-byte multiples take the implicit GEMM.

**Folded W taps** (``fold``, forward convs): with few channels a pixel, each filter tap is
a k step of mostly padding, and the im2col gather's rate is per pixel; the pack then writes,
per output column q, the S input pixels its window reads (``q * stride + s * dilation``) as
S * C channels, and the GEMM runs a (T, R, 1) filter over them with stride 1 along W
(:func:`fold_pays` decides the default).

**Split-K** (``split_k``, the default from :func:`split_k_for` at the main shape): where the
output has tiles for fewer than half the SMs and K (filter taps x channels) is long, e.g.
512 channels over a 7 x 7 map, the GEMM's k tiles are cut into up to 8 slices, each a tile of
its own for the persistent scheduler, writing an fp32 partial output; a second kernel
(``ConvSplitReduceKernel``) sums the slices in a fixed order and applies the chain. Not for
phased launches or a channel reduction fused into the epilogue (ignored there).

**Channel reductions in the epilogue** (``fuse_channel``, :func:`channel_fusable`): when the
first tail is a sum / mean / amax / amin / logsumexp over the channels (``torch.min(x, dim=1)``
and the like) with a post chain of single values, one group and at most 256 output channels,
the default tile holds every output channel and the conv kernel reduces each pixel's
channels from the staged tile (``ConvKernel._reduce_staged``: the epilogue on each element,
then the fold into fp32 registers, the post chain, one store a pixel), also for the phased
launches. The full conv output is never written: conv_transpose2d_min_sum_gelu_bias_bf16's
kernels took 377.5 us with the ChannelKernel tail (its conv storing 134 MB element by
element) and 132.2 us fused (H200). Off, or where the call's tile / cluster does not hold the
channels, the conv writes its output and the ChannelKernel tail reduces it.

**A norm applied by the tail after it** (``fuse_norm``, :func:`norm_fusable`): where a
GroupNorm (InstanceNorm) or BatchNorm tail, its post chain reading no full tensor, is
followed by a max / avg pool or a reduction over each plane or the channels (softmax
included), the norm's kernels write only a scale and an offset per (image, channel) and the
PoolKernel / PlaneReduceKernel / ChannelKernel normalises each value it reads: the
normalised tensor is never written nor read back (KernelBench L2 85 on an H100: 534 us in
GroupNormKernel for its 520 MB, then 184 us in the pool reading it again; not yet measured
fused).

Knobs (TUNABLES / TUNABLE_CHOICES, :func:`conv_knobs`): ``tile_m``, ``tile_n``, ``tile_k``
(channels per k tile, one filter tap at a time: small for few channels), ``fold``, ``gemm_1x1``,
``phased``, ``fuse_channel``, ``fuse_norm``, ``split_k``, ``cluster_m`` /
``cluster_n``, ``stages``, ``raster``, ``swizzle``, ``promote`` (fp32), ``precision`` (as
the gemm family), ``paired`` (3xTF32: the packed input and filter as (hi, lo) pairs, 8 bytes
a value instead of the three slots' 12, read as the three k slots through the GEMM's
``_stored_k``: the pack's memory, no time on an H100), ``block_stages`` (3xTF32, pairs: each
pipeline stage holds a tile_k block's hi and lo tiles of both operands, loaded once, and runs
the block's three WGMMA groups; stored as slots or read a slot at a time, A's hi tile is loaded
twice from L2. From the H100 sweeps' kernel times, the 3xTF32 conv kernels of KernelBench L1
55-71 and L2 4, 10, 17 all read their im2col A tiles at 2.4-3.3 TB/s whatever their FLOP rate
(27-198 TF/s): bound by those loads, which this cuts by a third; 1.33-1.48x on four of them.
The default where three blocked stages fit, :func:`blocked_pays`; the other side is the
second initial candidate), ``split_a`` (blocked; off and the third initial candidate: the
packed input stored once, in fp32, loaded once a block, the consumer warp groups splitting
their rows in shared memory, A_hi written back in place and the lo parts into the stage's
second A buffer: half the A bytes of the blocked stages again, and the input's pack writes 4
bytes a value instead of 8; GemmKernel's ``split_a``. As first written, the tensor cores read
the raw words as A_hi; with that fixed, still 1xTF32-accurate on an H100 (2026-12-07, every
split-A case ~1.3e-4 rmse, as if every lo part were zero): the input's tensor map was a
tf32 one, and TMA most likely rounds each value to tf32 as it loads through such a map (the
PTX shows nothing else that would drop the lo parts); it is now an fp32 map (not yet run
on a GPU, so the cause is not confirmed) and
``fast_math`` where a bf16 / fp16 epilogue has transcendentals.
"""

from __future__ import annotations

import math
import textwrap

from cutegen.codegen.families.gemm import FP32_TILE_N, PROMOTE_CHOICES, promote_for
from cutegen.codegen.families.operands import Operands, attr_path, source
from cutegen.codegen.families.plan import Leaf, Plan
from cutegen.codegen.families.pointwise import VPOW, chain_function, fast_math_applies
from cutegen.codegen.families.taskmodule import extract
from cutegen.codegen.families.template import model_class, render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16"}
#: Initial conv candidates besides the default: (label, knob values), each used when its
#: values are allowed choices that differ from the defaults (so the implicit GEMM's and the
#: direct kernel's variants never mix). First the other side of the W-tap fold (whichever
#: the default did not choose: :func:`fold_pays` is a model, this measures it). The rest
#: not yet measured on convs: the order follows the gemm
#: suite's bench (a 2x1 cluster first), then a narrower tile for the small output-channel
#: counts of level-2 convs, then half-height tiles (more tiles for small N * P * Q); for the
#: direct kernel wider and then shorter tiles.
CONV_VARIANTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("1x1 as implicit GEMM", {"gemm_1x1": False}),
    ("zero-inserted", {"phased": False}),
    ("fold W taps", {"fold": True}),
    ("unfolded", {"fold": False}),
    ("blocked 3xTF32 stages", {"block_stages": True}),
    ("one K' slot a stage", {"block_stages": False}),
    ("split A: its lo parts made in shared memory", {"split_a": True}),
    ("cluster 2x1", {"cluster_m": 2}),
    ("fast math", {"fast_math": True}),
    ("tile_n 128", {"tile_n": 128}),
    ("tile_m 64", {"tile_m": 64}),
    ("4 output channels a thread", {"out_chans": 4}),
    ("rows 2", {"rows": 2}),
    ("rows 8", {"rows": 8}),
)


def _precision(plan: Plan) -> str:
    return str(plan.param("precision_default") or "bf16")


#: Relative time of one k step (one filter tap's ``tile_k`` channels of a tile) by the bytes
#: it gathers per pixel (bf16 / fp16: 2 bytes a channel; fp32: each of its 3xTF32 / TF32
#: parts, 4 bytes a channel, is a step of its own). A step's TMA im2col load gathers tile_m
#: pixels of tile_k channels each, and the gather runs at a roughly fixed rate of pixels, not
#: of bytes: on the H200 conv3d_bf16 (32 channels) took 307 us with 64-byte steps and 339 us
#: with 128-byte ones (half of them zeros), 27 steps either way (tools/conv_sweep.py,
#: 2026-12-03). So the count of steps matters most, their width a little.
_STEP_COST = {32: 0.9, 64: 1.0, 128: 1.1}


def _k_cost(channels: int, tile_k: int, fp32: bool) -> float:
    """Relative main-loop time of one filter tap's ``channels`` in k steps of ``tile_k``."""
    steps = -(-channels // tile_k)
    return steps * _STEP_COST.get(tile_k * (4 if fp32 else 2), 1.0)


def tile_k_for(channels: int, choices: list[int], fp32: bool) -> int:
    """The k tile costing least for a group of ``channels`` input channels (:func:`_k_cost`;
    ties go to the wider tile)."""
    return min(choices, key=lambda t: (_k_cost(channels, t, fp32), -t))


def fold_pays(channels: int, taps_w: int, choices: list[int], fp32: bool) -> bool:
    """Whether folding the ``taps_w`` filter taps along W into the channels (the packed input
    holds, per output column, the ``taps_w`` input pixels its window reads: ``taps_w *
    channels`` channels a pixel) makes the main loop at least 20% cheaper: few channels per
    tap make many narrow k steps (a 3-channel 7x7 stem: 49 steps of 16 channels, 13 of them
    padding; folded, 7 steps of 32). The pack writes ``taps_w / stride`` times the input."""
    if taps_w <= 1:
        return False
    plain = taps_w * min(_k_cost(channels, t, fp32) for t in choices)
    folded = min(_k_cost(taps_w * channels, t, fp32) for t in choices)
    return folded <= 0.8 * plain


#: The direct kernel's knobs: outputs a thread computes along W (0: the fewest for aligned
#: vector reads), output rows it computes (at most the rows there are), the widest input
#: access in bits, threads per CTA, output channels a thread computes from each input span it
#: reads (``out_chans``: 1 reads the input again for every output channel; more, halved to a
#: divisor of the group's channels and to at most 32 sums a thread; not yet timed on a GPU,
#: offered as an initial variant).
DIRECT_KNOBS = ({"outs": 0, "rows": 4, "vec_bits": 128, "threads": 256, "out_chans": 1},
                {"outs": [0, 1, 2, 4, 8], "rows": [1, 2, 4, 8], "vec_bits": [32, 64, 128],
                 "threads": [128, 256], "out_chans": [1, 2, 4, 8]})


#: SMs of an H100 / H200: fewer output tiles than this leave SMs idle.
_SMS = 132


def _holding(tile_ns: list[int], kg: int) -> int:
    """The narrowest tile_n holding a group's ``kg`` output channels (else the widest)."""
    return next((n for n in tile_ns if n >= kg), tile_ns[-1])


def _pixels(plan: Plan) -> int:
    """GEMM-M at the main shape: images x output pixels (0 when the plan has no shape)."""
    shape = plan.param("conv_shape") or ()
    return math.prod(int(d) for d in shape[:1] + shape[2:]) if shape else 0


def _default_tiles(plan: Plan, kg: int, tile_ns: list[int],
                   keep_n: bool = False) -> tuple[int, int]:
    """(tile_m, tile_n) of the default candidate: the narrowest tile_n holding a group's
    output channels, then, while the main shape has fewer output tiles (over all groups)
    than the GPU has SMs, 64-row tiles and then (unless ``keep_n``: a channel reduction
    fused into the epilogue needs every channel in one tile) narrower columns (a conv over
    few pixels, e.g. 7 x 7 late-layer maps, would otherwise leave most SMs idle)."""
    tile_n = _holding(tile_ns, kg)
    pixels = _pixels(plan)
    groups = int(plan.param("groups", 1))

    def tiles(tm: int, tn: int) -> int:
        return -(-pixels // tm) * -(-kg // tn) * groups

    tile_m = 128
    if pixels and tiles(tile_m, tile_n) < _SMS:
        tile_m = 64
        while not keep_n and tiles(tile_m, tile_n) < _SMS and tile_n > min(tile_ns):
            tile_n = max(n for n in tile_ns if n < tile_n)
    return tile_m, tile_n


def gemm_k_tiles(plan: Plan, tile_k: int, precision: str, fold: bool) -> int:
    """The k tiles of the implicit GEMM's main loop (filter taps x channel tiles, x 3 for
    3xTF32's parts; W taps folded into the channels with ``fold``)."""
    groups = int(plan.param("groups", 1))
    cg = int(plan.param("in_channels", 1)) // groups
    kernel = [int(k) for k in (plan.param("kernel") or (1,))]
    channels, taps = (cg * kernel[-1], kernel[:-1]) if fold else (cg, kernel)
    k_tiles = -(-channels // tile_k) * (3 if precision == "3xtf32" else 1)
    for k in taps:
        k_tiles *= k
    return k_tiles


def split_k_for(plan: Plan, tiles: tuple[int, int, int], precision: str, fold: bool,
                sms: int = _SMS) -> int:
    """``split_k`` of the default candidate at the task's main shape with ``tiles``: where
    the output has tiles for fewer than half the SMs (many channels over a small map: a
    CNN's late layers, a 3-D conv over a few voxels), the largest power of two of K slices
    (at most 8) that keeps slices x tiles within the SMs and each slice at least 16 k tiles
    long; else 1. A fixed count: the compiled kernels serve every shape (a slice with no k
    tile adds zeros). Measured on the H200 (tools/host_overhead.py's CUDA-graph time, the
    kernels alone, 2026-12-04): 512 -> 512 channels over 16 x 7 x 7 in 3xTF32, 302 us with
    64 x 64 tiles, 406 / 193 / 115 / 137 us with 128 x 192 tiles and 1 / 2 / 4 / 8 slices; a
    3-D 256 -> 256 over 4 x 8^3 in bf16, 78 us against 85 / 52 / 36 / 29 us with 128 x 256."""
    pixels = _pixels(plan)
    if not pixels:
        return 1
    groups = int(plan.param("groups", 1))
    kg = int(plan.param("out_channels", 1)) // groups
    tm, tn, tk = tiles
    k_tiles = gemm_k_tiles(plan, tk, precision, fold)
    n_tiles = -(-pixels // tm) * -(-kg // tn) * groups
    if 2 * n_tiles > sms:
        return 1
    return next(s for s in (8, 4, 2, 1) if s * n_tiles <= sms and k_tiles >= 16 * s or s == 1)


def pointwise_gemm(plan: Plan) -> bool:
    """Whether the conv is 1x1 with stride 1, no padding and one group (forward): a batched
    GEMM over the NC(D)HW tensors as they are (``gemm_1x1``; bf16 / fp16 only, as tf32
    WGMMA reads both operands K-major and the pixels are B's contiguous dim)."""
    if plan.param("transposed") or int(plan.param("groups", 1)) != 1:
        return False
    padding = plan.param("padding")
    pad_ok = padding in ("valid", "same") or (not isinstance(padding, str)
                                    and all(int(p) == 0 for p in (padding or ())))
    return (pad_ok and all(int(k) == 1 for k in (plan.param("kernel") or ()))
            and all(int(s) == 1 for s in (plan.param("stride") or ())))


#: channel reductions a conv tail may fuse into the conv kernel's epilogue
#: (ConvKernel._reduce_staged; the forward calls _conv_channel_launch for these only)
FUSED_CHANNEL_OPS = ("sum", "mean", "amax", "amin", "logsumexp")


def channel_fusable(plan: Plan) -> bool:
    """Whether the plan's first tail is a channel reduction the implicit GEMM's epilogue can
    take (``fuse_channel``): one group, a reduction of FUSED_CHANNEL_OPS, a post chain
    reading single values only (scalars, one-element tensors), and at most 256 output channels (one tile holds them all; the
    kernel also checks ``tile_n`` and the cluster at each call and falls back to the
    ChannelKernel tail otherwise)."""
    stages = plan.param("stages", ())
    if plan.param("algo") == "direct" or not stages or int(plan.param("groups", 1)) != 1:
        return False
    first = dict(stages[0])
    if first["op"] != "channel" or first["reduce"] not in FUSED_CHANNEL_OPS:
        return False
    if any(plan.leaf(name).kind != "scalar" for name in first["post"].leaves()):
        return False
    return int(plan.param("out_channels", 0)) <= 256


#: fp32 words of one K' slot's A and B tiles, ``(tile_m + tile_n) * tile_k``, up to which a
#: 3xTF32 conv's stages are blocked by default (knob ``block_stages``): a blocked stage holds
#: twice that (64 KB at the bound), so three fit beside the epilogue's staging in shared
#: memory. Measured side by side on an H100 (tools/conv_sweep.py, 2026-12-07, one slot a
#: stage -> blocked): KernelBench L1 65 11.64 -> 7.85 ms, L1 69 8.92 -> 6.58, L1 55 10.82 ->
#: 8.13, L2 10 22.06 -> 15.48 (128 x 64 and 128 x 128 tiles: four and three stages); the
#: gemm family's fp32 default, 128 x 192 tiles (two blocked stages), went 10.09 -> 13.76 ms
#: on gemm_fp32 8192^3: the ring starves.
BLOCKED_MAX_SLOT_WORDS = 256 * 32


def blocked_pays(tile_m: int, tile_n: int, tile_k: int) -> bool:
    """Whether a 3xTF32 implicit GEMM with these tiles defaults to blocked stages (see
    :data:`BLOCKED_MAX_SLOT_WORDS`)."""
    return (tile_m + tile_n) * tile_k <= BLOCKED_MAX_SLOT_WORDS


def conv_knobs(plan: Plan) -> tuple[dict, dict]:
    """Default TUNABLES and TUNABLE_CHOICES of the file ``plan`` renders to (every value of
    every knob compiles with the others at their defaults)."""
    chains = [plan.epilogue, *(dict(st)["post"] for st in plan.param("stages", ()))]
    groups = int(plan.param("groups", 1))
    cg = int(plan.param("in_channels", 1)) // groups
    kg = int(plan.param("out_channels", 1)) // groups
    if plan.param("algo") == "direct":
        values, choices = (dict(d) for d in DIRECT_KNOBS)
        # several output channels a thread only where a group has them (not depthwise x1)
        choices["out_chans"] = [c for c in choices["out_chans"] if kg % c == 0]
        if fast_math_applies(plan.out_dtype, *chains):
            values["fast_math"], choices["fast_math"] = False, [False, True]
        if norm_fusable(plan):
            values["fuse_norm"], choices["fuse_norm"] = True, [True, False]
        return values, choices
    precision = _precision(plan)
    fp32 = precision in ("tf32", "3xtf32")
    tile_ks = [8, 16, 32] if fp32 else [16, 32, 64]
    tile_ns = FP32_TILE_N if fp32 else [64, 128, 192, 256]
    fuse = channel_fusable(plan) and kg <= max(tile_ns)
    tile_m, tile_n = _default_tiles(plan, kg, tile_ns, keep_n=fuse)
    taps_w = int((plan.param("kernel") or (1,))[-1])
    foldable = not plan.param("transposed") and taps_w > 1
    fold = foldable and fold_pays(cg, taps_w, tile_ks, fp32)
    pointwise = pointwise_gemm(plan) and not fp32
    tile_k = tile_k_for(taps_w * cg if fold else cg, tile_ks, fp32)
    phased = bool(plan.param("transposed")) and any(
        int(v) > 1 for v in (plan.param("stride") or ()))
    split = 1
    if not (phased or fuse or pointwise):
        # few output tiles and a long K: full-height tiles cut along K beat narrower tiles
        # (split_k_for's measurements)
        big = (128, _holding(tile_ns, kg))
        split = split_k_for(plan, (*big, tile_k), precision, fold)
        if split > 1:
            tile_m, tile_n = big
    values = {"tile_m": tile_m, "tile_n": tile_n, "tile_k": tile_k, "split_k": split,
              "fold": fold, "cluster_m": 1, "cluster_n": 1, "stages": 0,
              "raster": "m", "swizzle": 1,
              "promote": promote_for(precision, gemm_k_tiles(plan, tile_k, precision, fold)),
              "precision": precision}
    if pointwise:
        values["gemm_1x1"] = True
    if phased:
        values["phased"] = True
    if precision == "3xtf32":  # the packed input as (hi, lo) pairs: 8 bytes a value, not 12
        values["paired"] = False  # implied by block_stages; alone it saves no time (H100)
        # a stage holds a block's hi and lo tiles, each loaded once (two thirds of the im2col
        # loads, which bound these kernels), where three such stages fit
        values["block_stages"] = blocked_pays(tile_m, tile_n, tile_k)
        # blocked, the input stored once in fp32 and its lo parts made in shared memory by
        # the consumers: half the A bytes again (not yet measured on a GPU: off)
        values["split_a"] = False
    choices = {"tile_m": [64, 128], "tile_n": tile_ns, "tile_k": tile_ks,
               "cluster_m": [1, 2], "cluster_n": [1, 2], "stages": [0, 2, 3, 4, 6],
               "raster": ["m", "n"], "swizzle": [1, 2, 4, 8],
               "promote": PROMOTE_CHOICES if fp32 else [0],
               "fold": [False, True] if foldable else [False],
               "precision": [precision], "split_k": [1] if phased else [1, 2, 4, 8]}
    if pointwise:
        choices["gemm_1x1"] = [False, True]
    if phased:
        choices["phased"] = [False, True]
    if precision == "3xtf32":
        choices["paired"] = [False, True]
        choices["block_stages"] = [False, True]
        choices["split_a"] = [False, True]
    if fuse:
        values["fuse_channel"], choices["fuse_channel"] = True, [True, False]
    if norm_fusable(plan):
        values["fuse_norm"], choices["fuse_norm"] = True, [True, False]
    modes = plan.param("precision_modes")
    if modes:
        choices["precision"] = [m for m in modes if (m in ("tf32", "3xtf32")) == fp32] or [
            precision]
        if precision not in choices["precision"]:
            choices["precision"].append(precision)
    if fast_math_applies(plan.out_dtype, *chains):
        values["fast_math"], choices["fast_math"] = False, [False, True]
    return values, choices


def _doc(plan: Plan, precision: str) -> str:
    if plan.param("algo") == "direct":
        body = (f"Generated by cutegen's built-in 'conv' kernel family: {plan.description}; a "
                "direct kernel (few channels per group): each input row a thread's outputs "
                "need read once in vector accesses, fp32 sums, the fused epilogue, NC(D)HW in "
                "and out; see DirectConvKernel.")
    else:
        body = (f"Generated by cutegen's built-in 'conv' kernel family: {plan.description}; "
                f"precision {precision}. An implicit GEMM on the persistent, warp-specialized "
                "Hopper GEMM kernel: the input packed once to channels-innermost with its "
                "padding, TMA im2col loads of each filter tap, WGMMA consumers, the fused "
                "epilogue on the fp32 accumulators and stores straight to NC(D)HW; see the "
                "ConvKernel class.")
    return "\n".join(textwrap.wrap(body.replace('"', "'"), 92))


def _conv_literal(plan: Plan) -> str:
    """The conv spec (``_conv_spec()``): what the launch needs besides the module's
    attributes."""
    keys = ("dims", "transposed", "stride", "padding", "dilation", "groups", "output_padding")
    return repr({k: plan.param(k) for k in keys})




def _wrapped(lf: Leaf) -> str:
    """How the forward passes an epilogue leaf to ``_conv_launch``."""
    src = source(lf)
    return {"full": f"{src}.contiguous()", "col": f"{src}.contiguous().view(-1)",
            "scalar": f"_as_one({src})"}.get(lf.kind, src)


def _post_parts(plan: Plan, st: dict, i: int, parts: list[str]) -> tuple[str, str]:
    """(post, operands...) of tail stage ``i`` as source (its post chain, when it has one,
    appended to ``parts`` as ``_post<i>``)."""
    post = st["post"]
    ops = Operands()
    for name in post.leaves():
        ops.add(plan.leaf(name), _wrapped(plan.leaf(name)))
    fn = "None"
    if not (post.empty and post.result == "%y"):
        fn = f"_post{i}"
        parts.append(chain_function(fn, post, ops.access, epilogue=True,
                                    doc=f"The pointwise ops after tail op {i}, fused into it."))
    return fn, ops.args()


def _post_args(plan: Plan, st: dict, i: int, parts: list[str], dtype: str) -> str:
    """``dtype, post, operands...`` of tail stage ``i`` (see _post_parts)."""
    fn, args = _post_parts(plan, st, i, parts)
    return f"{dtype}, {fn}, {args}"


#: Tail ops that can apply a norm before them as they read (``fuse_norm``).
NORM_CONSUMERS = ("max_pool", "avg_pool", "plane", "channel")


def _norm_pair(plan: Plan, st: dict, nxt: dict | None) -> bool:
    """Whether tail stage ``st`` is a GroupNorm or BatchNorm that the stage ``nxt`` (a pool,
    a reduction over each plane or over the channels) can apply as it reads (``fuse_norm``):
    the norm's post chain reads no full tensor (per-channel operands and single values are
    read by the next kernel beside each value)."""
    return (st["op"] in ("group_norm", "batch_norm") and nxt is not None
            and nxt["op"] in NORM_CONSUMERS
            and all(plan.leaf(name).kind != "full" for name in st["post"].leaves()))


def norm_fusable(plan: Plan) -> bool:
    """Whether the plan's tail has a GroupNorm (InstanceNorm) or a BatchNorm followed by a
    pool or a reduction over each plane or the channels that can take it in
    (:func:`_norm_pair`; KernelBench L2 85: GroupNorm, a scale, a max pool: the normalised
    tensor, 520 MB in fp32, written and read back between the two; L2 11, 72 and 77 a
    BatchNorm before a pool or a global average, L2 27 a GroupNorm before one, L2 79 before
    a max over the channels)."""
    stages = [dict(st) for st in plan.param("stages", ())]
    return any(_norm_pair(plan, st, nxt)
               for st, nxt in zip(stages[:-1], stages[1:], strict=True))


def _norm_arg(plan: Plan, norm: dict, i: int, parts: list[str]) -> str:
    """The ``norm=`` argument of the launch after tail stage ``i`` (a GroupNorm or
    BatchNorm) that applies it (``_norm_stats`` on y, then its post chain as ``pre``)."""
    pre, pre_args = _post_parts(plan, norm, i, parts)
    affine = [source(plan.leaf(norm[k])) if norm[k] else "None" for k in ("weight", "bias")]
    return (f"norm=(_norm_stats(y, {norm['op']!r}, {norm.get('groups', 0)!r}, "
            f"{norm['eps']!r}, {affine[0]}, {affine[1]}), {pre}, {pre_args})")


def _stage_line(plan: Plan, st: dict, i: int, parts: list[str], dtype: str,
                norm: str = "") -> str:
    """The forward line launching tail stage ``i`` on ``y`` (see _post_args); ``norm``: the
    ``norm=`` argument of a pool, plane or channel reduction applying the stage before it."""
    rest = _post_args(plan, st, i, parts, dtype) + (f", {norm}" if norm else "")
    if st["op"] in ("max_pool", "avg_pool"):
        return (f"y = _pool_launch(y, {st['op'][:3]!r}, {tuple(st['window'])!r}, "
                f"{tuple(st['stride'])!r}, {rest})")
    if st["op"] == "plane":
        return f"y = _plane_reduce_launch(y, {st['reduce']!r}, {st['keepdim']!r}, {rest})"
    if st["op"] == "channel":
        return f"y = _channel_launch(y, {st['reduce']!r}, {st['keepdim']!r}, {rest})"
    affine = [source(plan.leaf(st[k])) if st[k] else "None" for k in ("weight", "bias")]
    if st["op"] == "batch_norm":
        return f"y = _batch_norm_launch(y, {st['eps']!r}, {affine[0]}, {affine[1]}, {rest})"
    return (f"y = _group_norm_launch(y, {st['groups']!r}, {st['eps']!r}, {affine[0]}, "
            f"{affine[1]}, {rest})")


def conv_parts(plan: Plan, values: dict) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body ending in ``return y``) of a
    ``conv`` plan with TUNABLES ``values``: the parts :func:`render_conv` puts in its file and
    a chain (:mod:`.render_chain`) puts beside its other stages'."""
    direct = plan.param("algo") == "direct"
    precision = "" if direct else values["precision"]
    ops = Operands()
    for name in plan.epilogue.leaves():
        ops.add(plan.leaf(name), _wrapped(plan.leaf(name)))
    has_epilogue = not (plan.epilogue.empty and plan.epilogue.result == "%y")
    stages = [dict(st) for st in plan.param("stages", ())]
    common = render_template("conv_common", {}, {})
    if direct:
        kernels = [common, render_template("conv_direct", {}, {})]
    else:
        kernels = [render_template("gemm", {"PRECISION": repr(precision)}, {}), common,
                   render_template("conv", {}, {})]
    if stages:
        kernels.append(render_template("conv_tail", {}, {}))
    # the convolution's spec, passed to its launch: a chain's stages may hold several
    # convolutions (chains.before_conv), each stage's function renamed apart
    funcs: list[str] = [f"def _conv_spec(_spec={_conv_literal(plan)}):\n"
                        '    """The convolution this stage computes (its geometry per call '
                        'comes from the module where the task has one)."""\n    return _spec\n']
    if has_epilogue:
        funcs.append(chain_function("_epilogue", plan.epilogue, ops.access, epilogue=True,
                                    doc="The fused epilogue, applied to each fp32 accumulator "
                                        "y (x is y too)."))
    module = plan.param("module")
    mod = attr_path(module) if module else "None"
    x_leaf = plan.leaf(plan.param("x"))
    x = source(x_leaf)
    w = source(plan.leaf(plan.param("weight")))
    epi = "_epilogue" if has_epilogue else "None"
    prec = "''" if direct else "TUNABLES['precision']"
    mid = _DTYPES[x_leaf.dtype] if stages else _DTYPES[plan.out_dtype]
    conv_args = f"{x}, {w}, {mod}, {mid}, {prec}, {epi}, {ops.args()}"
    launch = "_direct_conv_launch" if direct else "_conv_launch"
    lines = [f"y = {launch}({conv_args}, _conv_spec())"]
    first = 1
    if "fuse_channel" in values:  # the channel reduction in the conv's epilogue (or not)
        st = stages[0]
        rest = _post_args(plan, st, 1, funcs, _DTYPES[plan.out_dtype] if len(stages) == 1
                          else mid)
        lines = [f"y = _conv_channel_launch({conv_args}, {st['reduce']!r}, "
                 f"{st['keepdim']!r}, {rest}, conv=_conv_spec())"]
        first = 2
    i = first
    while i <= len(stages):
        st, nxt = stages[i - 1], (stages[i] if i < len(stages) else None)
        norm = ""
        if values.get("fuse_norm") and nxt is not None and _norm_pair(plan, st, nxt):
            norm, st, i = _norm_arg(plan, st, i, funcs), nxt, i + 1  # applied by the next
        lines.append(_stage_line(plan, st, i, funcs,
                                 _DTYPES[plan.out_dtype] if i == len(stages) else mid, norm))
        i += 1
    for op, args in plan.param("reshapes", ()):
        call = {"squeeze": "torch.squeeze", "unsqueeze": "torch.unsqueeze",
                "flatten": "torch.flatten"}[op]
        given = [repr(v) for _, v in args if v is not None]
        lines.append(f"y = {call}({', '.join(['y', *given])})")
    lines.append("return y")
    return funcs, kernels, "\n".join(lines)


def render_conv(plan: Plan, task_source: str, *, tunables: dict | None = None) -> str:
    """The candidate file for a ``conv`` plan (see the module docstring).

    Raises:
        TaskModuleError: Model's constructor cannot be copied into the candidate.
    """
    values, choices = conv_knobs(plan)
    values.update(tunables or {})
    direct = plan.param("algo") == "direct"
    precision = "" if direct else values["precision"]
    tm = extract(task_source)
    family = {"family": "conv", "op": plan.op, "fused": True}
    head = render_template("head", {
        "DOC": _doc(plan, precision), "TUNABLES": repr(values), "TASK_IMPORTS": tm.imports + "\n",
        "TUNABLE_CHOICES": repr(choices), "FAMILY": repr(family),
    }, {})
    funcs, kernels, body = conv_parts(plan, values)
    parts = [head, *kernels, "\n" + (tm.constants + "\n\n" if tm.constants else "\n")
             + tm.class_source, VPOW, *funcs]
    args = ", ".join(plan.forward_args)
    parts.append(model_class(args, body))
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"
