"""The conv family's tails: the ops after a convolution that run as kernels of their own
(see :mod:`.conv_match`, which splits the forward at them, and ``templates/conv_tail.py.tmpl``).

:func:`is_tail` names them; :func:`tail_stage` turns one into its stage: sorted (key, value)
pairs with its ``op`` and parameters:

* ``max_pool`` / ``avg_pool``: ``window`` and ``stride`` over the last dims (windows inside
  the tensor: no padding, dilation or ceil_mode);
* ``plane``: ``reduce`` (sum / mean / amax) over every spatial dim, ``keepdim`` (also global
  average pooling, ``adaptive_avg_pool`` to 1);
* ``channel``: ``reduce`` (sum / mean / amax / amin / logsumexp / softmax / log_softmax) over
  dim 1, ``keepdim`` (``torch.max`` / ``min`` over dim 1: their values);
* ``group_norm``: ``groups`` (0: one channel per group, InstanceNorm), ``eps``, the affine
  ``weight`` / ``bias`` leaves ("" when absent);
* ``batch_norm``: batch statistics (a model in training mode), ``eps``, ``weight`` / ``bias``.
"""

from __future__ import annotations

import re

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError
from cutegen.codegen.families.ops import CONV_TAIL_OPS


def op_name(n: Node) -> str:
    """How a captured op reads in messages."""
    name = n.target or n.op
    return {"_operator.matmul": "@ (matmul)"}.get(name, name)


def per_dim(v: object, dims: int, what: str, g: Node) -> tuple[int, ...]:
    """An int-or-list argument of ``g`` as one int per dim (raises for anything else)."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * dims
    if isinstance(v, list) and len(v) in (1, dims) and all(isinstance(x, int) for x in v):
        return tuple(v) * (dims // len(v))
    raise NotCoveredError(f"{op_name(g)} with {what}={v!r}", op_name(g))


#: Reductions over every spatial dim a conv tail may be (besides CONV_TAIL_OPS).
_PLANE_REDUCE_OPS = frozenset({"sum", "mean", "amax"})
#: Ops over the channel dim (dim 1) a conv tail may be: reductions and (log-)softmax.
_CHANNEL_OPS = frozenset({"sum", "mean", "amax", "amin", "logsumexp", "softmax",
                          "log_softmax"})


_POOL_BASE = re.compile(r"^(max_pool|avg_pool|adaptive_avg_pool)[123]d$")


def tail_op(n: Node) -> Node:
    """``n`` with the conv tails' name for its op: the capture names pools by their rank
    (``max_pool2d``, ``adaptive_avg_pool3d``); the tails take any rank up to the conv's."""
    base = _POOL_BASE.match(n.op)
    if base is None:
        return n
    return Node(n.id, n.kind, base.group(1), n.target, n.tensors, n.consts, n.shape, n.dtype,
                n.value)


def is_tail(n: Node) -> bool:
    """Whether a node is a tail op (``torch.max`` / ``min`` with a dim: a reduction too)."""
    if n.kind != "call":
        return False
    n = tail_op(n)
    if n.op in ("max", "min"):
        return "other" not in n.tensors and n.consts.get("dim") is not None
    return n.op in CONV_TAIL_OPS or n.op in _PLANE_REDUCE_OPS or n.op in _CHANNEL_OPS


def _affine(m: Matcher, a: Node, frame: tuple[int, ...]) -> dict[str, str]:
    """The per-channel weight / bias leaves of a norm ("" when absent)."""
    affine: dict[str, str] = {}
    for key in ("weight", "bias"):
        if key in a.tensors:
            n = m.node(a.tensors[key])
            if n.kind == "call" or n.dtype not in FLOATS:
                raise NotCoveredError(f"{op_name(a)} with a computed {key}", a.op)
            name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
            affine[key] = m._add_leaf(name, "input" if n.kind == "input" else "param", n.op,
                                      (frame[1],), n.dtype, frame, 1, "col")
        elif isinstance(a.consts.get(key), dict):
            spec = a.consts[key]
            affine[key] = m._add_leaf("p_" + spec["path"].replace(".", "_"), "param",
                                      spec["path"], tuple(spec["shape"]), spec["dtype"], frame,
                                      1, "col")
        else:
            affine[key] = ""
    return affine


def tail_stage(m: Matcher, a: Node) -> tuple:
    """The tail stage of op ``a`` as sorted (key, value) pairs: ``op`` ("max_pool",
    "avg_pool", "plane" for a reduction over every spatial dim, "group_norm") and its
    parameters; raises for what the tail kernels do not compute."""
    a = tail_op(a)
    x = m.node(a.tensors["input"])
    c, nd = a.consts, len(x.shape)
    spatial = nd - 2
    if spatial < 1:
        raise NotCoveredError(f"{op_name(a)} of a {nd}-d tensor after a convolution", a.op)
    if a.op in ("max_pool", "avg_pool"):
        ks = c.get("kernel_size")
        pooled = len(ks) if isinstance(ks, list) else spatial
        window = per_dim(ks, pooled, "kernel_size", a)
        stride = window if c.get("stride") in (None, []) else per_dim(
            c.get("stride"), pooled, "stride", a)
        bad = [k for k, ok in (("padding", c.get("padding", 0) in (0, [0] * pooled)),
                               ("dilation", c.get("dilation", 1) in (1, [1] * pooled)),
                               ("ceil_mode", not c.get("ceil_mode")),
                               ("return_indices", not c.get("return_indices")),
                               ("divisor_override", c.get("divisor_override") is None)) if not ok]
        if bad:
            raise NotCoveredError(f"{op_name(a)} with {bad[0]}={c.get(bad[0])!r} (the pooling tail "
                                  "takes windows inside the tensor)", a.op)
        want = tuple(x.shape[:nd - pooled]) + tuple(
            (x.shape[nd - pooled + i] - window[i]) // stride[i] + 1 for i in range(pooled))
        if pooled > spatial or tuple(a.shape) != want:
            raise NotCoveredError(f"{op_name(a)} of {tuple(x.shape)} to {tuple(a.shape)}", a.op)
        return (("op", a.op), ("stride", stride), ("window", window))
    if a.op == "adaptive_avg_pool":
        if int(_prod(a.shape)) != x.shape[0] * x.shape[1] or len(a.shape) != nd:
            raise NotCoveredError(f"{op_name(a)} to output size {c.get('output_size')!r} (only "
                                  "global average pooling, output size 1, is a tail)", a.op)
        return (("keepdim", True), ("op", "plane"), ("reduce", "mean"))
    if a.op in ("max", "min"):  # with a dim: its values are amax / amin
        a = Node(a.id, a.kind, "amax" if a.op == "max" else "amin", a.target, a.tensors,
                 a.consts, a.shape, a.dtype, a.value)
    if a.op in _PLANE_REDUCE_OPS | _CHANNEL_OPS:
        dims = c.get("dim")
        ds = sorted({int(d) % nd for d in (dims if isinstance(dims, list) else [dims])
                     if isinstance(d, int)}) if dims is not None else []
        if ds == [1] and a.op in _CHANNEL_OPS and c.get("dtype") is None:
            keep = a.op in ("softmax", "log_softmax") or bool(c.get("keepdim"))
            return (("keepdim", keep), ("op", "channel"), ("reduce", a.op))
        if ds != list(range(2, nd)) or a.op not in _PLANE_REDUCE_OPS or c.get(
                "dtype") is not None:
            raise NotCoveredError(f"{op_name(a)} over dim {dims!r} of the convolution's "
                                  f"{nd}-d output: the conv tails reduce over the channels "
                                  f"(dim 1) or over every spatial dim (sum / mean / amax, dim "
                                  f"{list(range(2, nd))})", a.op)
        return (("keepdim", bool(c.get("keepdim"))), ("op", "plane"), ("reduce", a.op))
    frame = tuple(x.shape)
    eps = float(c["eps"]) if c.get("eps") is not None else 1e-5
    if a.op == "batch_norm":
        if not c.get("training"):
            raise NotCoveredError(f"{op_name(a)} in eval mode (normalising with running "
                                  "statistics): only batch statistics are a conv tail", a.op)
        affine = _affine(m, a, frame)
        return (("bias", affine["bias"]), ("eps", eps), ("op", "batch_norm"),
                ("weight", affine["weight"]))
    if a.op == "instance_norm":  # GroupNorm with one channel per group
        if c.get("use_input_stats") is False:
            raise NotCoveredError(f"{op_name(a)} with running statistics", a.op)
        affine = _affine(m, a, frame)
        return (("bias", affine["bias"]), ("eps", eps), ("groups", 0), ("op", "group_norm"),
                ("weight", affine["weight"]))
    # group_norm
    groups = c.get("num_groups")
    if not isinstance(groups, int) or groups < 1 or x.shape[1] % groups:
        raise NotCoveredError(f"{op_name(a)} with num_groups={groups!r}", a.op)
    affine = _affine(m, a, frame)
    return (("bias", affine["bias"]), ("eps", eps), ("groups", groups), ("op", "group_norm"),
            ("weight", affine["weight"]))


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out
