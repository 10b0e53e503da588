"""Recognition of the channel norms of an (N, C, *spatial) tensor: ``nn.GroupNorm`` /
``F.group_norm``, ``nn.InstanceNormNd`` / ``F.instance_norm`` and ``nn.BatchNormNd`` /
``F.batch_norm`` with batch statistics (training mode). Batch norm with running statistics
(eval mode) is pointwise and lowered to pointwise ops (:mod:`.lower`).

* **instance norm**: layer-norm statistics over each (n, c) row of the spatial dims (the row
  family's ``LayerNormRow``); the affine weight and bias (one value per channel) become the
  first ops of the epilogue, read per row as (row // 1) % C;
* **group norm**: layer-norm statistics over each (n, group) row of C / G channels x the
  spatial dims (``GroupNormRow``), each element scaled by its channel's weight and bias
  inside the kernel;
* **batch norm** (family ``batchnorm``): Welford partials of each (n, c) row (the row
  kernel), merged per channel in n order (deterministic; the running statistics are updated
  with the module's momentum), then one pointwise pass normalising every element; the
  prologue is recomputed in that pass, the epilogue fused into it.
"""

from __future__ import annotations

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError, padded
from cutegen.codegen.families.plan import Chain, Plan, PwNode

#: Ids of the epilogue ops a norm adds (the affine weight and bias), above any graph id.
_SYNTH = 1_000_000


def _tensor_or_module(m: Matcher, a: Node, key: str, frame: tuple[int, ...], k: int,
                      kind: str | None) -> str | None:
    """The leaf of the norm's per-channel ``key`` argument (a forward argument, a parameter
    or the module's own tensor), of ``kind`` (None: classified as a (1, C, 1, ...) tensor);
    None when absent."""
    def shaped(shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape) + (1,) * (len(frame) - 2) if len(shape) == 1 else tuple(shape)

    if key in a.tensors:
        n = m.node(a.tensors[key])
        if n.kind not in ("input", "param") or n.dtype not in FLOATS:
            raise NotCoveredError(f"{a.target} with a computed or non-float {key}", a.op)
        name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
        return m._add_leaf(name, n.kind if n.kind == "input" else "param", n.op,
                           shaped(n.shape), n.dtype, frame, k, kind)
    spec = a.consts.get(key)
    if isinstance(spec, dict) and "path" in spec:
        if spec["dtype"] not in FLOATS:
            raise NotCoveredError(f"{a.target} with a {spec['dtype']} {key}", a.op)
        name = "p_" + spec["path"].replace(".", "_")
        return m._add_leaf(name, "param", spec["path"], shaped(tuple(spec["shape"])),
                           spec["dtype"], frame, k, kind)
    if spec not in (None, 0, 0.0, False) and not isinstance(spec, dict):
        raise NotCoveredError(f"{a.target} with {key}={spec!r}", a.op)
    return None


def _check_channel(m: Matcher, name: str | None, c: int, what: str) -> None:
    if name is not None and [d for d in m.leaves[name].shape if d != 1] != [c]:
        raise NotCoveredError(f"{what} of shape {m.leaves[name].shape} for {c} channels", what)


def norm_plan(m: Matcher, calls: set[int], out: Node, a: Node) -> Plan:
    """The plan of a group / instance / batch norm anchor (see the module docstring).

    Raises:
        NotCoveredError: a form the families do not compute.
    """
    op = a.op
    x = m.anchor_input(a)
    x_id = x.id
    frame, nd = tuple(x.shape), len(x.shape)
    if x.dtype not in FLOATS:
        raise NotCoveredError(f"{a.target} of a {x.dtype} tensor", x.dtype)
    if nd < 3 and op == "instance_norm" or nd < 2:
        raise NotCoveredError(f"{a.target} of a {nd}-d tensor (batched (N, C, ...) inputs)", op)
    c = a.consts
    eps = c.get("eps", 1e-5)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise NotCoveredError(f"{a.target} with eps={eps!r}", op)
    channels = frame[1]
    params: dict[str, object] = {"eps": float(eps)}
    pro_ids = m.ancestors(x_id) & calls
    epi_ids = calls - pro_ids - {a.id}
    if op == "group_norm":
        groups = c.get("num_groups")
        if not isinstance(groups, int) or groups < 1 or channels % groups:
            raise NotCoveredError(f"{a.target} with {groups!r} groups of {channels} channels", op)
        k = nd - 1  # the view (N * G, C / G * spatial): every operand must be full or one value
        m.classify = lambda shape, fr, kk: _full_or_scalar(shape, frame)
        w = _tensor_or_module(m, a, "weight", frame, k, "table")
        b = _tensor_or_module(m, a, "bias", frame, k, "table")
        _check_channel(m, w, channels, "group_norm weight")
        _check_channel(m, b, channels, "group_norm bias")
        params.update({"groups": groups, "weight": w, "bias": b, "k": k})
        prologue = m.chain(pro_ids, x_id, frame, k, {})
        epilogue = m.chain(epi_ids, out.id, frame, k, {a.id: "%y"})
        return _plan(m, "row", op, x, prologue, epilogue, params, out,
                     f"group_norm ({groups} groups)")
    if op == "instance_norm":
        if c.get("use_input_stats") is False:
            raise NotCoveredError("instance_norm with running statistics", op)
        k = nd - 2
        w = _tensor_or_module(m, a, "weight", frame, k, None) if _has(a, "weight") else None
        b = _tensor_or_module(m, a, "bias", frame, k, None) if _has(a, "bias") else None
        for name, what in ((w, "weight"), (b, "bias")):
            if name is not None and m.leaves[name].kind != "rowmap":
                raise NotCoveredError(f"instance_norm {what} of shape {m.leaves[name].shape}", op)
        params.update({"k": k, "norm": "instance"})
        prologue = m.chain(pro_ids, x_id, frame, k, {})
        epilogue = _affine_then(m, epi_ids, out, a, frame, k, w, b)
        return _plan(m, "row", "layer_norm", x, prologue, epilogue, params, out, "instance_norm")
    # batch_norm with batch statistics (eval mode was lowered to pointwise ops)
    k = nd - 2
    w = _tensor_or_module(m, a, "weight", frame, k, None) if _has(a, "weight") else None
    b = _tensor_or_module(m, a, "bias", frame, k, None) if _has(a, "bias") else None
    for name, what in ((w, "weight"), (b, "bias")):
        if name is not None and m.leaves[name].kind != "rowmap":
            raise NotCoveredError(f"batch_norm {what} of shape {m.leaves[name].shape}", op)
    rm = _tensor_or_module(m, a, "running_mean", frame, k, "table") if _has(
        a, "running_mean") else None
    rv = _tensor_or_module(m, a, "running_var", frame, k, "table") if _has(
        a, "running_var") else None
    momentum = c.get("momentum", 0.1)
    if (rm is None) != (rv is None) or (rm is not None and not isinstance(momentum, float)):
        raise NotCoveredError(f"batch_norm with momentum={momentum!r} and one running statistic"
                              if (rm is None) != (rv is None) else
                              f"batch_norm with momentum={momentum!r} (cumulative averages)", op)
    params.update({"k": k, "momentum": float(momentum or 0.0), "running_mean": rm,
                   "running_var": rv})
    prologue = m.chain(pro_ids, x_id, frame, k, {})
    epilogue = _affine_then(m, epi_ids, out, a, frame, k, w, b)
    return _plan(m, "batchnorm", op, x, prologue, epilogue, params, out,
                 "batch_norm (batch statistics)")


def _has(a: Node, key: str) -> bool:
    return key in a.tensors or isinstance(a.consts.get(key), dict)


def _full_or_scalar(shape: tuple[int, ...], frame: tuple[int, ...]) -> str | None:
    s = padded(shape, len(frame))
    if s == tuple(frame):
        return "full"
    if all(d == 1 for d in s):
        return "scalar"
    return None


def _affine_then(m: Matcher, epi_ids: set[int], out: Node, a: Node, frame: tuple[int, ...],
                 k: int, w: str | None, b: str | None) -> Chain:
    """The epilogue: ``y * weight + bias`` (per channel), then the ops after the norm."""
    nodes: list[PwNode] = []
    y = "%y"
    if w is not None:
        nodes.append(PwNode(_SYNTH, "mul", (y, "@" + w)))
        y = f"%{_SYNTH}"
    if b is not None:
        nodes.append(PwNode(_SYNTH + 1, "add", (y, "@" + b)))
        y = f"%{_SYNTH + 1}"
    rest = m.chain(epi_ids, out.id, frame, k, {a.id: y})
    return Chain((*nodes, *rest.nodes), rest.result)


def _plan(m: Matcher, family: str, op: str, x: Node, prologue: Chain, epilogue: Chain,
          params: dict[str, object], out: Node, what: str) -> Plan:
    main = m.main_leaf(prologue, x, what)
    if out.dtype not in FLOATS or tuple(out.shape) != tuple(x.shape):
        raise NotCoveredError(f"a {out.dtype} result of shape {tuple(out.shape)} after {what}",
                              "broadcast")
    desc = f"{what} of {'x'.join(map(str, x.shape))} {x.dtype}"
    if not prologue.empty:
        desc += f"; prologue: {prologue.describe()}"
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    return Plan(family, op, tuple(m.leaves.values()), main, prologue, epilogue,
                tuple(sorted((k, v) for k, v in params.items() if v is not None)),
                out.dtype, "same", m.cap.forward_args, desc)
