"""Recognition of the ``conv`` family: one convolution (``nn.Conv1d / 2d / 3d``,
``F.conv1d / 2d / 3d``, ``nn.ConvTranspose1d / 2d / 3d``, ``F.conv_transpose*``), its
geometry, and the pointwise epilogue over its NC(D)HW output.

A forward is a conv task when it computes exactly one convolution whose input is a forward
argument and whose weight is a parameter or a forward argument (as stored), followed by
pointwise ops over the output. Tensors those ops read broadcast against the output
``(N, K, *spatial)`` as

* ``full``: the output's shape (a residual);
* ``col``: one value per output channel, ``(K, 1, 1)`` / ``(1, K, 1, 1)`` (a level-2 bias,
  scale or multiplier), fused into the GEMM epilogue as a per-column operand;
* ``scalar``: one value.

The conv's own bias is the epilogue's first op (``%y + bias``). The plan's params: ``x`` /
``weight`` (leaf names), ``module`` (the ``nn`` module's attribute path, "" for a functional
call; the candidate reads the geometry from the module at run time), ``dims`` (1, 2, 3),
``transposed``, ``stride`` / ``padding`` / ``dilation`` / ``output_padding`` (per spatial
dim; ``padding`` may be "same" / "valid"), ``groups``, ``in_channels`` / ``out_channels`` /
``kernel``, ``conv_shape`` (the convolution's output shape on the main inputs), ``algo``
(``implicit_gemm``: the Hopper GEMM with im2col TMA loads;
``direct``: forward grouped convs with fewer than 16 channels per group on either side,
depthwise ones first; a forward conv with few input channels gets a second plan on the
direct kernel beside its implicit GEMM, :func:`direct_variant`) and the precision modes (as the gemm family: bf16 / fp16 native, fp32 through 3xTF32, TF32 only
where the task's tolerance admits it).

**Tails.** After the epilogue, a chain of "tail" ops may follow, each a kernel of its own
reading what the one before wrote, with the pointwise ops after it fused into it: max / avg
pooling (windows inside the tensor), global average pooling or a sum / mean / amax over every
spatial dim ("plane"), a sum / mean / amax / amin / logsumexp / softmax / log-softmax over the
channels ("channel"), GroupNorm and InstanceNorm (``group_norm``; groups 0: one channel per
group), BatchNorm with batch statistics (training mode), each with its affine. The result may
end with ``squeeze`` / ``unsqueeze`` / ``flatten`` (``reshapes``: views the forward applies
as written). ``stages`` holds them in order, each as
sorted (key, value) pairs with its ``op``, parameters and ``post`` chain (leaves classified
against that op's output).

Not covered, each with a reason: ``padding_mode`` other than zeros, an input computed by
other ops (a prologue), an unbatched input, a computed weight, mixed dtypes, a second
convolution or a matrix product, transposed convolutions with thin groups, geometry past
what a TMA im2col descriptor encodes (``(kernel - 1) * dilation > 16`` or ``stride > 8``
along a dim) or, for the direct kernel, a filter of more than 512 taps, ops
after the convolution that are neither pointwise nor a tail (a softmax over channels, say),
tails that branch, and pooling with padding, dilation or ceil_mode.
"""

from __future__ import annotations

import math
from dataclasses import replace

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.conv_tails import is_tail, op_name, per_dim, tail_stage
from cutegen.codegen.families.gemm_match import default_precision, precision_modes
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError, padded
from cutegen.codegen.families.ops import CONV_OPS, MATMUL_OPS, POINTWISE_OPS, RESHAPE_OPS
from cutegen.codegen.families.plan import Chain, Plan, PwNode

#: Largest ``(kernel - 1) * dilation`` per spatial dim: the im2col TMA descriptor (always
#: 5-d here) holds the pixel box's corners in signed 5-bit fields, and the packed input's
#: halo makes the upper corner ``-(kernel - 1) * dilation``.
MAX_FILTER_EXTENT = 16
#: Largest conv stride per dim: the im2col traversal stride field holds 1..8.
MAX_STRIDE = 8
#: Fewest channels per group (input and output) for which a grouped conv runs as one
#: implicit GEMM per group; thinner groups (depthwise) run on the direct kernel
#: (``algo`` "direct", ``templates/conv_direct.py.tmpl``).
MIN_GROUP_CHANNELS = 16
#: Most groups of a thin-group transposed conv (one implicit GEMM launch a group, each
#: group's channels padded to the k tile): the direct kernel computes forward convs only.
MAX_THIN_TRANSPOSED_GROUPS = 16
#: The direct kernel unrolls every filter tap of a (channel, depth tap) in registers: at
#: most this many per channel.
MAX_DIRECT_TAPS = 512


class ConvMatcher(Matcher):
    """A Matcher whose tensor leaves are classified against the NC(D)HW output frame."""

    def _add_leaf(self, name: str, source: str, ref: str, shape: tuple[int, ...], dtype: str,
                  frame: tuple[int, ...], k: int, kind: str | None = None,
                  view: tuple[int, ...] = ()) -> str:
        return super()._add_leaf(name, source, ref, shape, dtype, frame, k,
                                 kind or conv_leaf_kind(tuple(shape), frame, ref), view)


def conv_leaf_kind(shape: tuple[int, ...], frame: tuple[int, ...], ref: str) -> str:
    """full / col (per output channel) / scalar of a tensor against the output frame."""
    nd = len(frame)
    s = padded(shape, nd) if len(shape) <= nd else None
    if s == tuple(frame):
        return "full"
    if s is not None and all(d == 1 for d in s):
        return "scalar"
    if s is not None and s[1] == frame[1] and all(d == 1 for i, d in enumerate(s) if i != 1):
        return "col"
    raise NotCoveredError(f"{ref} of shape {tuple(shape)} does not broadcast against the "
                          f"convolution's output {tuple(frame)} as a full tensor, one value per "
                          "channel or a single value", "broadcast")


def conv_ids(m: Matcher, calls: set[int]) -> list[int]:
    """The convolutions among ``calls``, in graph order."""
    return sorted(i for i in calls if m.node(i).op in CONV_OPS)


def _operand(m: ConvMatcher, g: Node, key: str, frame: tuple[int, ...]) -> tuple[str, str]:
    """(leaf name, dtype) of the conv's input / weight: a forward argument or a parameter."""
    if key in g.tensors:
        n = m.node(g.tensors[key])
        if n.kind == "call":
            what = "input" if key == "input" else key
            raise NotCoveredError(
                f"the {what} of {op_name(g)} is computed by {op_name(n)}: the conv family reads "
                "its input and weight from forward arguments or parameters (pointwise ops are "
                "fused after the convolution, not before)", op_name(g))
        name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
        leaf = m._add_leaf(name, "input" if n.kind == "input" else "param", n.op, n.shape,
                           n.dtype, frame, 1, "full")
        return leaf, n.dtype
    spec = g.consts.get(key)
    if isinstance(spec, dict) and "path" in spec:
        name = "p_" + spec["path"].replace(".", "_")
        return m._add_leaf(name, "param", spec["path"], tuple(spec["shape"]), spec["dtype"],
                           frame, 1, "full"), spec["dtype"]
    raise NotCoveredError(f"{op_name(g)} without a {key} tensor", op_name(g))


def _bias(m: ConvMatcher, g: Node, frame: tuple[int, ...]) -> str:
    """The conv's bias leaf ("" when there is none), one value per output channel."""
    k = frame[1]
    if "bias" in g.tensors:
        n = m.node(g.tensors["bias"])
        if n.kind == "call" or n.dtype not in FLOATS:
            raise NotCoveredError(f"{op_name(g)} with a computed or non-float bias", op_name(g))
        name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
        return m._add_leaf(name, "input" if n.kind == "input" else "param", n.op,
                           (k,), n.dtype, frame, 1, "col")
    spec = g.consts.get("bias")
    if isinstance(spec, dict) and "path" in spec:
        name = "p_" + spec["path"].replace(".", "_")
        return m._add_leaf(name, "param", spec["path"], tuple(spec["shape"]), spec["dtype"],
                           frame, 1, "col")
    if spec not in (None, False):
        raise NotCoveredError(f"{op_name(g)} with bias={spec!r}", op_name(g))
    return ""


def _geometry(g: Node, x: Node, w_shape: tuple[int, ...]) -> dict[str, object]:
    """The conv's geometry params (see the module docstring); raises past what the kernels
    encode."""
    c = g.consts
    dims = len(w_shape) - 2
    transposed = g.op == "conv_transpose"
    if c.get("padding_mode", "zeros") != "zeros":
        raise NotCoveredError(f"{op_name(g)} with padding_mode={c['padding_mode']!r} (zeros only)",
                              op_name(g))
    if dims not in (1, 2, 3):
        raise NotCoveredError(f"{op_name(g)} with a {dims}-d kernel", op_name(g))
    if len(x.shape) != dims + 2:
        raise NotCoveredError(f"{op_name(g)} of an unbatched {len(x.shape)}-d input (the conv "
                              "family takes (N, C, *spatial))", op_name(g))
    stride = per_dim(c.get("stride", 1), dims, "stride", g)
    dilation = per_dim(c.get("dilation", 1), dims, "dilation", g)
    pad = c.get("padding", 0)
    padding: object = pad if isinstance(pad, str) else per_dim(pad, dims, "padding", g)
    if isinstance(pad, str) and pad not in ("same", "valid"):
        raise NotCoveredError(f"{op_name(g)} with padding={pad!r}", op_name(g))
    out_pad = per_dim(c.get("output_padding", 0), dims, "output_padding", g)
    groups = c.get("groups", 1)
    if not isinstance(groups, int) or groups < 1:
        raise NotCoveredError(f"{op_name(g)} with groups={groups!r}", op_name(g))
    kernel = tuple(w_shape[2:])
    in_ch = x.shape[1]
    out_ch = w_shape[1] * groups if transposed else w_shape[0]
    cg, kg = in_ch // groups, out_ch // groups
    geo = {"dims": dims, "transposed": transposed, "stride": stride, "dilation": dilation,
           "padding": padding, "output_padding": out_pad, "groups": groups,
           "in_channels": in_ch, "out_channels": out_ch, "kernel": kernel,
           "algo": "implicit_gemm"}
    thin = groups > 1 and min(cg, kg) < MIN_GROUP_CHANNELS
    if thin and transposed and groups > MAX_THIN_TRANSPOSED_GROUPS:
        kind = "depthwise" if cg == 1 else "grouped"
        raise NotCoveredError(
            f"{op_name(g)}: a transposed {kind} convolution ({groups} groups of {cg} input "
            f"and {kg} output channels): the direct kernel computes forward convs only, and "
            f"the implicit GEMM launches once a group (at most {MAX_THIN_TRANSPOSED_GROUPS})",
            op_name(g))
    if thin and not transposed:  # (transposed: one implicit GEMM a group, channels padded)
        kind = "depthwise" if cg == 1 else "grouped"
        taps = math.prod(kernel)
        if taps > MAX_DIRECT_TAPS:
            raise NotCoveredError(
                f"{op_name(g)}: a {kind} convolution with a {'x'.join(map(str, kernel))} "
                f"filter ({taps} taps; the direct kernel unrolls at most {MAX_DIRECT_TAPS} "
                "a channel)", op_name(g))
        geo["algo"] = "direct"
        return geo
    for i in range(dims):
        extent = (kernel[i] - 1) * dilation[i]
        beyond = extent > MAX_FILTER_EXTENT or (not transposed and stride[i] > MAX_STRIDE)
        if beyond and not transposed and math.prod(kernel) <= MAX_DIRECT_TAPS:
            # past what the im2col descriptor encodes: the direct kernel takes any window
            geo["algo"] = "direct"
            return geo
        if extent > MAX_FILTER_EXTENT:
            raise NotCoveredError(
                f"{op_name(g)} with kernel {kernel[i]} and dilation {dilation[i]} along spatial "
                f"dim {i}: (kernel - 1) * dilation = {extent} > {MAX_FILTER_EXTENT}, more than "
                "the TMA im2col descriptor's pixel-box corner encodes", op_name(g))
        if not transposed and stride[i] > MAX_STRIDE:
            raise NotCoveredError(
                f"{op_name(g)} with stride {stride[i]} > {MAX_STRIDE} (the TMA im2col traversal "
                "stride)", op_name(g))
    return geo


#: Input channels (per group) up to which a forward fp32 conv's implicit GEMM also gets the
#: direct kernel as a root candidate of its own (:func:`direct_variant`): with few channels a
#: pixel the GEMM's im2col gather moves little per k step and 3xTF32 triples the steps (on the
#: H200, KernelBench level 2's 3-channel 3-D convs at their upstream sizes: 20.9 ms of
#: ConvKernel for Conv3d_HardSwish_GroupNorm_Mean, 2.7 ms for Conv3d_GroupNorm_Mean), while
#: the direct kernel sums in fp32 on the CUDA cores with no pack. bf16 / fp16 keep the tensor
#: cores unless the channels are as few as a stem's.
DIRECT_ALT_CHANNELS = {"float32": 32, "bfloat16": 4, "float16": 4}
#: ... and up to which the direct kernel is the first of the two.
DIRECT_FIRST_CHANNELS = {"float32": 8, "bfloat16": 0, "float16": 0}


def direct_variant(plan: Plan) -> tuple[Plan, bool] | None:
    """The same forward conv on the direct kernel (``algo`` "direct") beside an implicit GEMM
    ``plan`` (a conv plan, or a chain whose first stage is one), and whether it goes first;
    None where the direct kernel does not apply (transposed, many channels per group, a
    filter of more than MAX_DIRECT_TAPS taps, a 1x1 conv: a plain GEMM)."""
    conv = plan
    if plan.family == "chain":
        conv = plan.param("stages")[0]
    if conv.family != "conv" or conv.param("algo") != "implicit_gemm" or conv.param(
            "transposed"):
        return None
    kernel = tuple(conv.param("kernel"))
    cg = int(conv.param("in_channels")) // int(conv.param("groups"))
    dtype = conv.leaf(conv.param("x")).dtype
    if (cg > DIRECT_ALT_CHANNELS.get(dtype, 0) or math.prod(kernel) > MAX_DIRECT_TAPS
            or math.prod(kernel) == 1):
        return None
    was = f"{dtype}, precision {conv.param('precision_default')}"
    now = f"{dtype}, direct (fp32 sums)"
    direct = replace(conv, params=tuple(sorted({**dict(conv.params), "algo": "direct"}.items())),
                     description=conv.description.replace(was, now, 1))
    if plan.family == "chain":
        stages = (direct, *plan.param("stages")[1:])
        direct = replace(plan, params=tuple(sorted({**dict(plan.params),
                                                    "stages": stages}.items())),
                         description=plan.description.replace(was, now, 1))
    return direct, cg <= DIRECT_FIRST_CHANNELS.get(dtype, 0)


def conv_plan(m0: Matcher, calls: set[int], out: Node) -> Plan:
    """The conv plan of a forward with a convolution (see the module docstring).

    Raises:
        NotCoveredError: the forward is outside what the conv family computes.
    """
    m = ConvMatcher(m0.cap)
    convs = conv_ids(m, calls)
    if len(convs) > 1:
        names = ", ".join(op_name(m.node(i)) for i in convs)
        raise NotCoveredError(f"more than one convolution ({names}): the conv family computes "
                              "one", op_name(m.node(convs[1])))
    mms = sorted(i for i in calls if m.node(i).op in MATMUL_OPS)
    if mms:
        raise NotCoveredError(f"{op_name(m.node(mms[0]))} besides a convolution: a family kernel "
                              "computes one of them", op_name(m.node(mms[0])))
    g = m.node(convs[0])
    # trailing squeeze / unsqueeze / flatten: views of the result, applied by the forward
    reshapes: list[tuple] = []
    while out.kind == "call" and "input" in out.tensors:
        src = m.node(out.tensors["input"])
        step = _reshape_step(out, src)
        if step is None:
            break
        if len(m.users(src.id, calls | {out.id})) != 1:
            raise NotCoveredError(f"{op_name(out)} of a tensor used elsewhere", out.op)
        reshapes.insert(0, step)
        calls = calls - {out.id}
        out = src
    for i in sorted(calls - {g.id}):
        n = m.node(i)
        picks = n.op == "getitem" and is_tail(m.node(n.tensors.get("input", -1))) and \
            n.consts.get("index") == 0  # the values of torch.max / min over a dim
        if not (is_tail(n) or picks or n.op in POINTWISE_OPS or n.op in ("max", "min", "view")):
            x_in = g.tensors.get("input")
            if x_in is not None and n.id in m.ancestors(x_in):  # what the conv reads
                raise NotCoveredError(
                    f"the input of {op_name(g)} is computed by {op_name(n)}: the conv family "
                    "reads its input and weight from forward arguments or parameters", n.op)
            where = "after" if g.id in m.ancestors(n.id) else "beside"
            raise NotCoveredError(
                f"{op_name(n)} {where} a convolution: the conv family fuses pointwise ops and "
                "runs pooling, GroupNorm and reductions over the spatial dims as tail kernels",
                n.op)
    frame = tuple(g.shape)
    x_id = g.tensors.get("input")
    if x_id is None:
        raise NotCoveredError(f"{op_name(g)} of a non-tensor input", op_name(g))
    x = m.node(x_id)
    x_leaf, x_dtype = _operand(m, g, "input", frame)
    w_leaf, w_dtype = _operand(m, g, "weight", frame)
    w_shape = m.leaves[w_leaf].shape
    if x_dtype not in FLOATS:
        raise NotCoveredError(f"{op_name(g)} of a {x_dtype} input", x_dtype)
    if x_dtype != w_dtype:
        raise NotCoveredError(f"{op_name(g)} of mixed dtypes ({x_dtype} and {w_dtype})",
                              "mixed dtypes")
    params: dict[str, object] = _geometry(g, x, tuple(w_shape))
    bias = _bias(m, g, frame)
    # the stages: the conv's epilogue up to the first tail op, then each tail op with the
    # pointwise ops after it up to the next one (or the result)
    anchors = sorted(i for i in calls if is_tail(m.node(i)))
    bounds = [(g, x) for x in [*(m.node(i).tensors.get("input", -1) for i in anchors), out.id]]
    prev: Node = g
    chains: list[Chain] = []
    stages: list[tuple] = []
    for k, (_, end) in enumerate(bounds):
        if end < 0 or prev.id not in m.ancestors(end):
            a = m.node(anchors[k])
            raise NotCoveredError(f"{op_name(a)} of a tensor that is not computed from the "
                                  "convolution through the ops before it (the pooling / "
                                  "norm / reduction tails after a convolution form one chain)",
                                  a.op)
        seg = (m.ancestors(end) & calls) - m.ancestors(prev.id)
        y = f"%{g.id}" if (prev is g and bias) else "%y"
        chain = m.chain(seg, end, tuple(prev.shape), 1, {prev.id: y})
        if prev is g and bias:
            chain = Chain((PwNode(g.id, "add", ("%y", "@" + bias)), *chain.nodes), chain.result)
        chains.append(chain)
        if k < len(anchors):
            prev = m.node(anchors[k])
            stages.append(tail_stage(m, prev))
            if prev.op in ("max", "min"):  # (values, indices): the values, through getitem
                uses = m.users(prev.id, calls | {out.id})
                if len(uses) != 1 or m.node(uses[0]).op != "getitem" or m.node(
                        uses[0]).consts.get("index") != 0:
                    raise NotCoveredError(f"{op_name(prev)} over the channels with its indices "
                                          "used: only the values are a conv tail", "argmax")
                prev = m.node(uses[0])
    epilogue = chains[0]
    params["stages"] = tuple(tuple(sorted({**dict(st), "post": chains[i + 1]}.items()))
                             for i, st in enumerate(stages))
    if out.dtype not in FLOATS:
        raise NotCoveredError(f"a result of dtype {out.dtype}", out.dtype)
    if tuple(out.shape) != tuple(prev.shape):
        raise NotCoveredError("the result does not have the shape of the convolution's (or "
                              f"its last tail op's) output {tuple(prev.shape)} (a broadcast to "
                              f"{tuple(out.shape)})", "broadcast")
    weight = m.leaves[w_leaf]
    module = weight.ref.rsplit(".", 1)[0] if (weight.source == "param" and "weight" not in
                                              g.tensors and "." in weight.ref) else ""
    modes = precision_modes(x_dtype, m.cap.tolerance)
    params["reshapes"] = tuple(reshapes)
    params.update({"x": x_leaf, "weight": w_leaf, "module": module, "conv_shape": frame,
                   "precision_default": default_precision(modes, m.cap.distributions),
                   "precision_modes": modes})
    kind = "transposed " if params["transposed"] else ""
    spatial = "x".join(map(str, x.shape[2:]))
    kern = "x".join(map(str, params["kernel"]))  # type: ignore[arg-type]
    desc = (f"{kind}conv{params['dims']}d ({op_name(g)}): {x.shape[0]} x {x.shape[1]} x {spatial} "
            f"-> {frame[1]} channels, kernel {kern}, stride {params['stride']}, padding "
            f"{params['padding']}, dilation {params['dilation']}, groups {params['groups']}, "
            f"{x_dtype}, " + ("direct (fp32 sums)" if params["algo"] == "direct"
                              else f"precision {params['precision_default']}"))
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    for st in stages:
        d = dict(st)
        desc += "; then " + (f"{d['reduce']} over the spatial dims" if d["op"] == "plane"
                             else f"{d['reduce']} over the channels" if d["op"] == "channel"
                             else d["op"] + (f" {d['window']}" if "window" in d else ""))
    for i, ch in enumerate(chains[1:]):
        if not ch.empty:
            desc += f"; after tail {i + 1}: {ch.describe()}"
    if reshapes:
        desc += "; then " + ", ".join(op for op, _ in reshapes)
    leaves = tuple(m.leaves.values())
    return Plan("conv", g.op, leaves, x_leaf, Chain((), "@" + x_leaf), epilogue,
                tuple(sorted(params.items())), out.dtype, "conv", m.cap.forward_args, desc)


def _reshape_step(n: Node, src: Node) -> tuple[str, tuple] | None:
    """A trailing ``squeeze`` / ``unsqueeze`` / ``flatten`` as (op, args), read from the
    captured shapes (the capture records such views as ``view`` nodes without their
    arguments); None for any other node. A ``view`` / ``reshape`` (``x.view(x.size(0), -1)``,
    KernelBench's usual flatten) is read as whichever of the three gives its shape, so that
    it follows the batch at every verified shape."""
    if n.op in RESHAPE_OPS:  # a capture that kept the op and its arguments
        return (n.op, tuple((k, n.consts.get(k)) for k in (
            ("dim",) if n.op != "flatten" else ("start_dim", "end_dim"))))
    if n.op != "view":
        return None
    kind = (n.target or "").rsplit(".", 1)[-1]
    a, b = tuple(src.shape), tuple(n.shape)
    general = kind in ("view", "reshape")
    if (kind == "flatten" or general) and 1 <= len(b) <= len(a):
        s = len(b) - 1
        rest = 1
        for v in a[s:]:
            rest *= v
        if b == a[:s] + (rest,):
            return ("flatten", (("start_dim", s), ("end_dim", -1)))
    if (kind == "squeeze" or general) and len(b) == len(a) - 1:
        for d in range(len(a) - 1, -1, -1):
            if a[d] == 1 and a[:d] + a[d + 1:] == b:
                return ("squeeze", (("dim", d - len(a)),))
    if (kind == "unsqueeze" or general) and len(b) == len(a) + 1:
        for d in range(len(b) - 1, -1, -1):
            if b[d] == 1 and b[:d] + b[d + 1:] == a:
                return ("unsqueeze", (("dim", d - len(b)),))
    return None
