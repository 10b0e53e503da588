"""Recognition: match a captured forward to a kernel family, with its fused pointwise ops.

The forward (captured by :mod:`~cutegen.codegen.families.capture`) is covered when

* it returns one tensor, and every op it uses is pointwise (``ops.POINTWISE_OPS``) except
  at most one **anchor**: a row op (softmax, log-softmax, layer-norm, RMSNorm,
  cross-entropy, sum / mean / amax / amin / max / min / argmax / argmin) or a scan (cumsum,
  cumprod; ``flip`` around it makes it a reverse scan);
* the anchor works along the last dimension (or the last k, for reductions and layer-norm
  over trailing dims); pointwise ops before it form the **prologue** (they compute its
  input), the ones after it the **epilogue**;
* every tensor a chain reads broadcasts against the anchor's (rows, N) view as a full
  tensor, a per-column vector, a per-row vector or a single value.

A forward with a matrix product (``matmul``, ``@``, ``mm``, ``bmm``, ``addmm``, ``linear``)
is matched by :mod:`~cutegen.codegen.families.gemm_match` instead (the ``gemm`` family: the
product, its pointwise epilogue and an optional reduction over N), and one with a
convolution by :mod:`~cutegen.codegen.families.conv_match` (the ``conv`` family).

Anything else gives :class:`~cutegen.codegen.families.plan.NotCovered` naming the op or the
shape that is missing, never a plan that would compute something else.
"""

from __future__ import annotations

import math
from dataclasses import replace

from cutegen.codegen.families.capture import Captured, Node, capture_in_process, capture_task
from cutegen.codegen.families.chains import (
    anchors_of,
    before_conv,
    chain_plan,
    conv_then,
    dag_plan,
)
from cutegen.codegen.families.conv_match import conv_ids, conv_plan, direct_variant
from cutegen.codegen.families.gemm_match import gemm_ids, gemm_plan
from cutegen.codegen.families.lower import lower
from cutegen.codegen.families.matcher import (
    FLOATS,
    OPMATH_EPS,
    Matcher,
    NotCoveredError,
    leaf_kind,
    padded,
    rowmap_run,
    trailing_dims,
)
from cutegen.codegen.families.norms import norm_plan
from cutegen.codegen.families.ops import POINTWISE_OPS, POOL_OPS, ROW_OPS, SCAN_OPS
from cutegen.codegen.families.plan import Chain, NotCovered, Plan, Recognition
from cutegen.codegen.families.pooling import pool_plan
from cutegen.codegen.families.pw_view import view_dims
from cutegen.codegen.families.ranges import settle_dropouts
from cutegen.codegen.families.reductions import REDUCTIONS, reduction_plan
from cutegen.codegen.inputs import itemsize
from cutegen.codegen.tasks import Task
from cutegen.errors import TaskError


def _unknown(m: Matcher, ids: set[int]) -> None:
    for i in sorted(ids):
        n = m.node(i)
        if n.kind == "call" and n.op == "?":
            raise NotCoveredError.unsupported(n.target, n.target)


def _match(cap: Captured) -> Plan:
    if cap.error:
        raise NotCoveredError(cap.error)
    conv = _conv_match(cap)
    if conv is not None:
        return conv
    return _match_lowered(lower(cap))


def _match_lowered(cap: Captured, base: int = 0) -> Plan:
    """The plan of a forward without a convolution, after :func:`lower` (``base``: the
    kernels before it, when it is the rest of a convolution's chain)."""
    m = Matcher(cap)
    out = m.node(cap.output) if cap.output >= 0 else None
    if out is None or not out.dtype:
        raise NotCoveredError("Model.forward does not return a single tensor")
    live = m.ancestors(out.id)
    _unknown(m, live)
    n_anchors = len(anchors_of(m, out.id))
    try:
        return _match_one(m, out)
    except NotCoveredError as e:
        first = e  # one fused kernel cannot do it: one kernel per anchor, in a chain
    if n_anchors == 0 or (n_anchors == 1 and first.nc.op != "broadcast"):
        raise first
    if n_anchors == 1:  # an epilogue operand the anchor's kernel cannot broadcast: cut after it
        try:
            return chain_plan(cap, _match_stage, base)
        except NotCoveredError:
            raise first from None
    try:
        return chain_plan(cap, _match_stage, base)
    except NotCoveredError as e:
        try:  # several results feeding one op: one kernel per anchor, each writing its result
            return dag_plan(cap, _match_stage, base)
        except NotCoveredError:
            pass
        raise NotCoveredError(f"{e.nc.reason}; as one kernel: {first.nc.reason}", e.nc.op) from e


def _conv_match(cap: Captured, base: int = 0) -> Plan | None:
    """The conv family's plan when the forward has a convolution (matched on the graph as
    captured: the conv family's tails are the norms and pools themselves, not what
    :func:`.lower` makes of them); None otherwise. Where the forward goes on past what the
    conv family computes, a chain: the conv kernel up to a cut, the other families after it
    (:func:`.conv_then`); where the last convolution reads a computed value (a pooling or
    another convolution before it), the kernels computing it first (:func:`.before_conv`);
    the conv family's reason when neither works. ``base``: the kernels before this forward's
    (it is the rest of a chain), so its results are numbered on."""
    m = Matcher(cap)
    out = m.node(cap.output) if cap.output >= 0 else None
    if out is None or not out.dtype:
        return None
    if not conv_ids(m, {i for i in m.ancestors(out.id) if m.node(i).kind == "call"}):
        return None
    _unknown(m, m.ancestors(out.id))
    try:
        return _conv_alone(cap)
    except NotCoveredError as e:
        try:
            return conv_then(cap, _conv_alone, lambda st, b: _match_lowered(lower(st), b), base)
        except NotCoveredError as then:
            try:
                return before_conv(cap, _match, _conv_rest)
            except NotCoveredError as before:
                if "reads no computed value" not in before.nc.reason:
                    raise NotCoveredError(f"{e.nc.reason}; as a chain, {before.nc.reason}",
                                          e.nc.op) from None
            why = then.nc.reason.partition("; cut after ")[2]
            if not why:
                raise e from None
            raise NotCoveredError(f"{e.nc.reason}; as a chain, cut after {why}", e.nc.op) from None


def _conv_rest(cap: Captured, base: int) -> Plan:
    """The part of a chain from its last convolution on (:func:`.before_conv`)."""
    plan = _conv_match(cap, base)
    if plan is None:
        raise NotCoveredError("no convolution", "conv")
    return plan


def _conv_alone(cap: Captured) -> Plan:
    """The conv family's plan of a forward that is one conv kernel (a chain's first stage)."""
    m = Matcher(cap)
    out = m.node(cap.output)
    calls = {i for i in m.ancestors(out.id) if m.node(i).kind == "call"}
    if not conv_ids(m, calls):
        raise NotCoveredError("no convolution before the cut", "conv")
    return conv_plan(m, calls, out)


def _match_stage(cap: Captured) -> Plan:
    """One stage of a chain (a forward with one anchor, already lowered)."""
    m = Matcher(cap)
    out = m.node(cap.output)
    return _match_one(m, out)


def _match_one(m: Matcher, out: Node) -> Plan:
    """The plan of a forward computed by one family kernel."""
    calls = {i for i in m.ancestors(out.id) if m.node(i).kind == "call"}
    if gemm_ids(m, calls):
        return gemm_plan(m, calls, out)
    anchors = sorted(i for i in calls if m.node(i).op in ROW_OPS | SCAN_OPS | POOL_OPS
                     and not (m.node(i).op in ("max", "min") and "other" in m.node(i).tensors))
    if len(anchors) > 1:
        names = ", ".join(m.node(i).op for i in anchors)
        raise NotCoveredError(f"{len(anchors)} reductions or norms in one forward ({names}): a "
                              "family kernel fuses one, with the pointwise ops around it",
                              m.node(anchors[1]).op)
    if not anchors:
        return _pointwise_plan(m, calls, out)
    return _anchored_plan(m, calls, out, m.node(anchors[0]))


def _pointwise_plan(m: Matcher, calls: set[int], out: Node) -> Plan:
    if not calls:
        raise NotCoveredError("Model.forward does no computation", "identity")
    if out.dtype not in FLOATS:
        raise NotCoveredError(f"a pointwise result of dtype {out.dtype}", out.dtype)
    frame = tuple(out.shape)
    # an operand that is none of full / per-column / per-row / one value but broadcasts to
    # the result (an outer sum: (B, 1, 1, W) + (C, 1, 1) -> (B, C, 1, W)) is read expanded
    # to the result's shape, like a full one ("bcast")
    m.classify = lambda shape, fr, k: leaf_kind(shape, fr, k) or (
        "full" if _broadcasts(shape, fr) else None)
    chain = m.chain(calls, out.id, frame, 1, {})
    full = [lf for lf in m.leaves.values() if lf.kind == "full"]
    if not full:  # every operand smaller than the result ((B, 1) + (1, C, 1, 1)): one of
        # them, expanded to the result's shape, is the kernel's main operand
        vecs = sorted((lf for lf in m.leaves.values() if lf.kind in ("row", "col", "rowmap")),
                      key=lambda lf: lf.source != "input")
        if not vecs:
            raise NotCoveredError("no operand has the output's full shape or broadcasts to it",
                                  "broadcast")
        m.leaves[vecs[0].name] = replace(vecs[0], kind="full", rowmap=())
        full = [m.leaves[vecs[0].name]]
    main = sorted(full, key=lambda lf: (lf.dtype == "bool", lf.source != "input",
                                        padded(lf.shape, len(frame)) != frame))[0].name
    outer = any(padded(lf.shape, len(frame)) != frame for lf in full)
    how = (f"{len(full)} tensor(s) broadcast to the result" if outer
           else f"{len(full)} full tensor(s)")
    params: tuple = (("bcast", True),) if outer else ()
    # rows of several trailing dims where the last alone is short (pw_view): also for an
    # outer broadcast, whose result often ends in a dim of 1 ((B, 1) + (1, C, 1, 1) ->
    # (1, C, B, 1): rows of one value, a warp's lanes all but one idle, KernelBench L2 75's
    # 33 MB written at 26 GB/s on an H100)
    k = view_dims(frame, [lf.shape for lf in m.leaves.values() if lf.kind != "value"],
                  itemsize(out.dtype))
    if k > 1:
        _reclassify(m, frame, k)
        params = (*params, ("k", k))
    return Plan("pointwise", "pointwise", tuple(m.leaves.values()), main, chain, Chain((), "%y"),
                params, out.dtype, "broadcast", m.cap.forward_args,
                f"pointwise: {chain.describe()} over {how}, "
                f"{'x'.join(map(str, frame))} {out.dtype}")


def _reclassify(m: Matcher, frame: tuple[int, ...], k: int) -> None:
    """Each tensor leaf's kind against rows of ``frame``'s last ``k`` dims (view_dims chose a
    k against which every one has a kind)."""
    for name, lf in list(m.leaves.items()):
        if lf.kind == "value":
            continue
        kind = leaf_kind(lf.shape, frame, k)
        assert kind is not None, (lf.shape, frame, k)
        rowmap = (*rowmap_run(lf.shape, frame, k), len(frame) - k) if kind == "rowmap" else ()
        m.leaves[name] = replace(lf, kind=kind, rowmap=rowmap)


def _broadcasts(shape: tuple[int, ...], frame: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``frame`` (torch's rules)."""
    return len(shape) <= len(frame) and all(
        d in (1, f) for d, f in zip(padded(shape, len(frame)), frame, strict=True))


def _anchored_plan(m: Matcher, calls: set[int], out: Node, a: Node) -> Plan:
    op = a.op
    x = m.anchor_input(a)
    x_id = x.id
    frame, nd = tuple(x.shape), len(x.shape)
    absorbed: set[int] = set()
    result = a.id
    params: dict[str, object] = {}
    # torch.max / min without a dim: the max / min of all elements
    if op in ("max", "min") and a.dtype and a.consts.get("dim") is None:
        op = "amax" if op == "max" else "amin"
    # torch.max / min with a dim: (values, indices), used through one getitem
    if op in ("max", "min"):
        uses = m.users(a.id, calls | {out.id})
        picks = {m.node(u).consts.get("index") for u in uses}
        if len(uses) != 1 or m.node(uses[0]).op != "getitem" or picks - {0, 1}:
            raise NotCoveredError(f"{a.target} returns values and indices: only one may be used", op)
        result = uses[0]
        absorbed.add(result)
        op = {("max", 0): "amax", ("max", 1): "argmax", ("min", 0): "amin",
              ("min", 1): "argmin"}[(op, picks.pop())]
    if op in SCAN_OPS and x.op == "flip" and x.kind == "call":
        uses = m.users(a.id, calls | {out.id})
        if (_dims(x.consts.get("dims"), nd) == [nd - 1] and len(uses) == 1
                and m.node(uses[0]).op == "flip"
                and _dims(m.node(uses[0]).consts.get("dims"), nd) == [nd - 1]):
            params["reverse"] = True
            absorbed |= {x.id, uses[0]}
            result = uses[0]
            x_id = x.tensors["input"]
            x = m.node(x_id)
    if op in REDUCTIONS:
        return reduction_plan(m, calls, out, a, op, result, absorbed)
    if op in ("group_norm", "instance_norm", "batch_norm"):
        return norm_plan(m, calls, out, a)
    if op in POOL_OPS:
        return pool_plan(m, calls, out, a)
    if x.dtype not in FLOATS:
        raise NotCoveredError(f"{a.target} of a {x.dtype} tensor", x.dtype)
    family, out_shape, k = _anchor_params(m, a, op, x, frame, params)
    views: frozenset[int] = frozenset()
    backs: frozenset[int] = frozenset()
    merged = _merged_view(m, calls, out, a, x) if op in ("softmax", "log_softmax") else None
    if merged is not None:  # over trailing dims merged by a view, viewed back after it
        view, backs = merged
        views = frozenset({view.id})
        src_shape = tuple(m.node(view.tensors["input"]).shape)
        k += len(src_shape) - len(view.shape)
        frame, nd = src_shape, len(src_shape)
    params["k"] = k
    pro_ids = (m.ancestors(x_id) & calls) - absorbed
    epi_ids = calls - pro_ids - absorbed - {a.id}
    prologue = m.chain(pro_ids, x_id, frame, k, {}, exact=op in ("argmax", "argmin"),
                       passthrough=views)
    epi_frame = frame if out_shape == "same" else (1,) * nd
    epilogue = m.chain(epi_ids, out.id, epi_frame, k, {result: "%y", x_id: "%in"},
                       passthrough=backs)
    if params.get("pad") and not (prologue.empty and epilogue.empty):
        raise NotCoveredError(f"pointwise ops fused with the exclusive {op} of rows cut and "
                              "padded (its result is not x's shape)", op)
    if op in SCAN_OPS and not params.get("pad") and _exclusive(epilogue):
        params["exclusive"] = True
        epilogue = _drop_first(epilogue)
    if out_shape != "same":
        bad = [m.leaves[n] for n in epilogue.leaves() if m.leaves[n].kind not in ("scalar", "value")]
        if bad:
            raise NotCoveredError(f"{bad[0].ref} is applied to the per-row result of {op}: only "
                              "single values can follow a reduction", "broadcast")
        if out_shape == "scalar" and not epilogue.empty:
            raise NotCoveredError(f"pointwise ops after the {op} loss", epilogue.nodes[0].op)
    main = m.main_leaf(prologue, x, op)
    if out.dtype not in (*FLOATS, "int64"):
        raise NotCoveredError(f"a result of dtype {out.dtype}", out.dtype)
    variant = " (reverse)" if params.get("reverse") else ""
    if params.get("pad"):
        variant = (f" (exclusive, of rows [:{params['rows_stop']}] padded with "
                   f"{params['pad']} zero column(s))")
    desc = f"{op}{variant} over the last " + (
        f"{k} dims" if k > 1 else "dim") + f" of {'x'.join(map(str, frame))} {x.dtype}"
    if not prologue.empty:
        desc += f"; prologue: {prologue.describe()}"
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    return Plan(family, op, tuple(m.leaves.values()), main, prologue, epilogue,
                tuple(sorted(params.items())), out.dtype, out_shape, m.cap.forward_args, desc)


def _merged_view(m: Matcher, calls: set[int], out: Node, a: Node,
                 x: Node) -> tuple[Node, frozenset[int]] | None:
    """(the view, the view-back nodes) where a row op reads ``src.view(...)`` merging src's
    trailing dims into its last (``x.view(b, c, -1)``: a softmax over the spatial dims; pointwise
    ops with single values may stand between the view and the op) and the forward views the
    result back to src's shape (``.view(b, c, h, w)``): the op is then the same op over src's
    trailing dims, the views identities. Between the view and the view back every other
    operand must be a single value (any other would broadcast against the merged shape); after
    the view back, anything src's shape takes. None where the forward does not have that form
    (nothing merged, the result kept merged, a merged value used elsewhere)."""
    inside = set(m.ancestors(x.id)) & calls
    view = x
    while view.kind == "call" and view.op != "view":
        if view.op not in POINTWISE_OPS:
            return None
        ins = [m.node(t) for t in view.tensors.values()]
        path = [n for n in ins if n.kind == "call"]
        if len(path) != 1 or any(n.kind in ("input", "param") and math.prod(n.shape or (1,)) > 1
                                 for n in ins):
            return None
        view = path[0]
    if view.kind != "call" or "input" not in view.tensors:
        return None
    src = m.node(view.tensors["input"])
    s0, s1 = tuple(src.shape), tuple(view.shape)
    p = len(s1) - 1
    if (not src.dtype or len(s0) <= len(s1) or p < 1 or s0[:p] != s1[:p]
            or math.prod(s0[p:]) != s1[p] or tuple(out.shape) != s0):
        return None
    merged = {i for i in inside if view.id in m.ancestors(i)}  # the view .. the op's input
    if any(len(m.users(i, calls | {out.id})) != 1 for i in merged):
        return None
    after = {i for i in calls if a.id in m.ancestors(i) and i != a.id}
    backs = frozenset(i for i in after if m.node(i).op == "view"
                      and tuple(m.node(i).shape) == s0
                      and tuple(m.node(m.node(i).tensors.get("input", -1)).shape) == s1)
    if len(backs) != 1:
        return None
    back = next(iter(backs))
    for i in after - backs:
        if back in m.ancestors(i):
            continue  # after the view back: src's shape, classified as usual
        for t in m.node(i).tensors.values():
            tn = m.node(t)
            if tn.kind in ("input", "param") and math.prod(tn.shape or (1,)) > 1:
                return None
    return view, backs


def _dims(v: object, nd: int) -> list[int]:
    """A dims argument (an int or a list of ints) as sorted non-negative dims."""
    ds = v if isinstance(v, list) else [] if v is None else [v]
    return sorted(int(d) % max(nd, 1) for d in ds if isinstance(d, int))


def _exclusive(epi: Chain) -> bool:
    """``cumsum(x) - x`` (the first epilogue op subtracts the scan's input): exclusive.
    (For cumprod, ``cumprod(x) / x`` would divide by zero: not matched.)"""
    if epi.empty:
        return False
    first = epi.nodes[0]
    uses_in = any("%in" in n.args for n in epi.nodes[1:])
    return first.op == "sub" and first.args == ("%y", "%in") and not first.params and not uses_in


def _drop_first(epi: Chain) -> Chain:
    """The chain without its first node, whose uses now read ``%y``."""
    old = f"%{epi.nodes[0].id}"
    nodes = tuple(replace(n, args=tuple("%y" if a == old else a for a in n.args))
                  for n in epi.nodes[1:])
    return Chain(nodes, "%y" if epi.result == old else epi.result)


def _anchor_params(m: Matcher, a: Node, op: str, x: Node, frame: tuple[int, ...],
                   params: dict[str, object]) -> tuple[str, str, int]:
    """(family, out_shape, k) of the anchor; fills params (weight, eps, target ...)."""
    c, nd = a.consts, len(frame)
    if op in ("softmax", "log_softmax", "cumsum", "cumprod"):
        if trailing_dims(c.get("dim"), nd, op) != 1:
            raise NotCoveredError(f"{op} over several dims", op)
        if c.get("pad"):  # lowered: the exclusive scan of rows cut and padded (lower.py)
            params.update(exclusive=True, pad=int(c["pad"]), rows_stop=int(c["rows_stop"]))
        return ("scan" if op in SCAN_OPS else "row"), "same", 1
    if op in ("layer_norm", "rms_norm"):
        shape = list(c.get("normalized_shape") or [])
        k = len(shape)
        if k == 0 or list(frame[nd - k:]) != shape:
            raise NotCoveredError(f"{op} over {shape} of a tensor of shape {frame}", op)
        for key in ("weight", "bias") if op == "layer_norm" else ("weight",):
            if key in a.tensors:
                w = m.node(a.tensors[key])
                if w.kind not in ("input", "param"):
                    raise NotCoveredError(f"{op} with a computed {key}", op)
                name = m.leaf(w, frame, k)
            elif isinstance(c.get(key), dict):
                name = m.module_leaf(c[key], frame, k)
            else:
                continue
            if m.leaves[name].kind != "col" or m.leaves[name].dtype not in FLOATS:
                raise NotCoveredError(f"{op} {key} of shape {m.leaves[name].shape}", op)
            params[key] = name
        eps = c.get("eps")
        params["eps"] = float(eps) if eps is not None else OPMATH_EPS
        return "row", "same", k
    if op == "cross_entropy":
        if nd != 2:
            raise NotCoveredError(f"cross_entropy over logits of shape {frame} (2-d only)", op)
        for key in ("weight", "size_average", "reduce", "label_smoothing"):
            if c.get(key) not in (None, 0, 0.0):
                raise NotCoveredError(f"cross_entropy with {key}={c.get(key)!r}", op)
        if "weight" in a.tensors:
            raise NotCoveredError("cross_entropy with class weights", op)
        t = m.node(a.tensors.get("target", -1)) if "target" in a.tensors else None
        if t is None or t.kind != "input" or t.dtype not in ("int64", "int32") or tuple(
                t.shape) != frame[:1]:
            raise NotCoveredError("cross_entropy targets that are not class indices of a forward "
                              "argument", op)
        params["target"] = m._add_leaf(t.op, "input", t.op, t.shape, t.dtype, frame, 1, "row")
        params["ignore_index"] = int(c.get("ignore_index", -100))
        reduction = c.get("reduction", "mean")
        if reduction not in ("mean", "sum", "none"):
            raise NotCoveredError(f"cross_entropy reduction={reduction!r}", op)
        params["reduction"] = reduction
        return "row", ("rows" if reduction == "none" else "scalar"), 1
    raise NotCoveredError.unsupported(a.target, op)


def recognize(cap: Captured) -> Recognition:
    """Match a captured forward to a family (see the module docstring)."""
    cap = replace(cap, nodes=settle_dropouts(cap.nodes))  # a dropout of zeros: the identity
    try:
        plan = _match(cap)
    except NotCoveredError as e:
        return Recognition(not_covered=e.nc)
    alt = direct_variant(plan)  # a forward conv with few channels: the direct kernel too
    if alt is not None:
        return Recognition(plans=(alt[0], plan) if alt[1] else (plan, alt[0]))
    return Recognition(plans=(plan,))


def recognize_task(task: Task, *, in_process: bool = False) -> Recognition:
    """Capture the task's forward (in a child process unless ``in_process``) and match it.

    A task whose reference cannot be captured is reported as not covered, with the reason.
    """
    try:
        cap = capture_in_process(task.path) if in_process else capture_task(task.path)
    except TaskError as e:
        return Recognition(not_covered=NotCovered(f"the task could not be captured: {e}"))
    return recognize(cap)
