"""Recognition of reductions over any dims (sum, mean, prod, amax, amin, argmax, argmin, var, std,
and the norms lowered to them), alone or mapped back over the values they reduce.

**Layout.** The reduced dims of x (shape S, nd dims) split its dims into runs of kept (K)
and reduced (R) dims, and the run pattern picks the kernels (chosen once, from the dims; the
sizes are read at run time, so hidden shapes reuse the plan):

* ``[K, R]`` (trailing dims): the **row** family, one row per kept index (``k`` dims);
* ``[R]`` (every dim): the **row** family in two deterministic passes: per-row partials of
  a (rows, N) view (the flat tensor cut into rows when every operand is full), then one row
  of partials;
* ``[R, K]`` / ``[K, R, K]``: the **strided** family over x viewed (B, R, C);
* ``[R, K, R]`` / ``[K, R, K, R]``: the row family over the trailing R (per-row partials in
  fp32), then the strided family over the rest;
* mapped back (below) over all elements or two runs (``x / torch.norm(x)``, ``x - x.mean((0,
  2, 3), keepdim=True)``): family ``reduce_map``, the statistic first (as above, into an fp32
  tensor of the keepdim shape), then one pointwise pass over x reading it;
* anything else (three reduced runs) is not covered.

**Map mode.** When the reduction's result is used by pointwise ops together with values of
x's full shape (``x / x.norm(dim=1, keepdim=True)``, ``x - x.mean(-1, keepdim=True)``), the
plan writes x's shape: the statistic of each kept index is broadcast back over its reduced
dims inside the same kernel (the row family's output pass, the strided family's second walk
over R). Every value in the epilogue is checked against torch's broadcasting: the statistic
must meet x's values through a shape with 1 on every reduced dim (keepdim, ``unsqueeze``,
``view``), never through a broadcast that would line it up with other dims.
"""

from __future__ import annotations

import math

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError, leaf_kind, padded
from cutegen.codegen.families.ops import VIEW_OPS
from cutegen.codegen.families.plan import Plan

#: The reductions this module plans (after max / min with a dim become amax / argmax ...).
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "argmax", "argmin", "var", "std", "prod",
                        "logsumexp"})
#: Reductions computed in two passes when a row is cut into pieces (their partial statistic
#: is one fp32 value, merged by the same op: the logsumexp of the pieces' logsumexps is the
#: row's).
SPLITTABLE = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp"})


def reduced_dims(dim: object, nd: int) -> tuple[int, ...]:
    """The reduced dims, non-negative and sorted (``None``: every dim).

    Raises:
        NotCoveredError: a dim argument that is not an int or a list of ints.
    """
    if dim is None:
        return tuple(range(nd))
    ds = dim if isinstance(dim, list) else [dim]
    if not ds or not all(isinstance(d, int) and not isinstance(d, bool) for d in ds):
        raise NotCoveredError(f"a reduction over dim={dim!r}", "dim")
    if nd == 0:
        return ()
    return tuple(sorted({d % nd for d in ds}))


def runs(nd: int, dims: tuple[int, ...]) -> list[tuple[bool, tuple[int, ...]]]:
    """Maximal runs of consecutive dims that are all reduced or all kept, in order."""
    out: list[tuple[bool, tuple[int, ...]]] = []
    for d in range(nd):
        red = d in dims
        if out and out[-1][0] == red:
            out[-1] = (red, out[-1][1] + (d,))
        else:
            out.append((red, (d,)))
    return out


def layout(nd: int, dims: tuple[int, ...]) -> str:
    """"inner", "all", "strided" or "two_stage" (see the module docstring).

    Raises:
        NotCoveredError: the reduced dims form three or more separate runs.
    """
    pattern = "".join("R" if red else "K" for red, _ in runs(nd, dims))
    if pattern in ("", "R"):
        return "all"
    if pattern == "KR":
        return "inner"
    if pattern in ("RK", "KRK"):
        return "strided"
    if pattern in ("RKR", "KRKR"):
        return "two_stage"
    raise NotCoveredError(f"a reduction over dims {list(dims)} of a {nd}-d tensor (reduced dims "
                          "in three or more separate runs)", "dims")


def strided_groups(nd: int, dims: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...],
                                                            tuple[int, ...]]:
    """(B dims, R dims, C dims) of a strided layout (of its last three runs for two_stage,
    whose trailing reduced run is folded first)."""
    rs = runs(nd, dims)
    if rs and rs[-1][0] and len(rs) > 1:
        rs = rs[:-1]  # two_stage: the trailing reduced run is the row family's
    if not rs[0][0]:
        b, r, c = rs[0][1], rs[1][1], rs[2][1] if len(rs) > 2 else ()
    else:
        b, r, c = (), rs[0][1], rs[1][1]
    return b, r, c


def strided_kind(shape: tuple[int, ...], frame: tuple[int, ...],
                 groups: tuple[tuple[int, ...], ...]) -> str | None:
    """How an operand broadcasts against a (B, R, C) frame: "full", "col" (over C only),
    "row" (one value per index of R), "scalar", or None."""
    nd = len(frame)
    if len(shape) > nd:
        return None
    s = padded(shape, nd)
    present = []
    for g in groups:
        if all(s[d] == frame[d] for d in g):
            present.append(True)
        elif all(s[d] == 1 for d in g):
            present.append(False)
        else:
            return None
    b, r, c = present
    return {(True, True, True): "full", (False, False, True): "col",
            (False, True, False): "row", (False, False, False): "scalar"}.get((b, r, c))


def _aligned(shape: tuple[int, ...], frame: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether a value of this shape lines up with a statistic: 1 on every reduced dim, the
    frame's size (or 1) on the others, once right-aligned with the frame."""
    nd = len(frame)
    if len(shape) > nd:
        return False
    s = padded(shape, nd)
    return all(s[d] == 1 if d in dims else s[d] in (1, frame[d]) for d in range(nd))


def _flat(shape: tuple[int, ...], frame: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether the shape is the reduction's own result without keepdim (kept dims, in order)."""
    return tuple(shape) == tuple(frame[d] for d in range(len(frame)) if d not in dims)


def _broadcasts(shape: tuple[int, ...], frame: tuple[int, ...]) -> bool:
    nd = len(frame)
    if len(shape) > nd:
        return False
    s = padded(shape, nd)
    return all(a in (1, f) for a, f in zip(s, frame, strict=True))


def epilogue_roles(m: Matcher, out: Node, result: int, x_id: int, frame: tuple[int, ...],
                   dims: tuple[int, ...]) -> tuple[set[int], frozenset[int], str]:
    """(epilogue members, view nodes to pass through, role of the output: "elem" (map mode)
    or "stat"): the call nodes from the output back to the statistic (``result``) or the
    reduction's input (``x_id``), each checked for a broadcast that means what the kernel
    computes (see the module docstring).

    Raises:
        NotCoveredError: a value meets the statistic through another broadcast.
    """
    members: set[int] = set()
    todo = [out.id]
    while todo:
        i = todo.pop()
        if i in members or i in (result, x_id):
            continue
        n = m.node(i)
        if n.kind != "call":
            continue
        members.add(i)
        todo.extend(n.tensors.values())
    role: dict[int, str] = {result: "stat", x_id: "elem"}
    res_shape = tuple(m.node(result).shape)
    aligned: dict[int, bool] = {result: _aligned(res_shape, frame, dims), x_id: True}
    if not aligned[result] and not _flat(res_shape, frame, dims):
        raise NotCoveredError(f"the reduction's result of shape {res_shape}", "broadcast")
    passthrough: set[int] = set()

    def role_of(i: int) -> str:
        if i in role:
            return role[i]
        n = m.node(i)
        if n.kind == "call" and m.viewed_leaf(i) is None:
            raise NotCoveredError(f"{n.target or n.op} is used before it is computed", n.op)
        shape = tuple(n.shape)
        if not n.dtype or math.prod(shape) == 1:
            return "scalar"
        if _aligned(shape, frame, dims):
            aligned[i] = True
            return "stat"
        if _broadcasts(shape, frame):
            return "elem"
        raise NotCoveredError(f"{n.op} of shape {shape} does not broadcast against {frame}",
                              "broadcast")

    for i in sorted(members):
        n = m.node(i)
        shape = tuple(n.shape)
        if m.viewed_leaf(i) is not None:  # a leaf read through a view: a leaf of that shape
            role[i] = role_of(i)
            continue
        ins = list(n.tensors.values())
        roles = [role_of(u) for u in ins]
        if n.op in VIEW_OPS:
            src = ins[0] if ins else -1
            r = roles[0] if roles else "scalar"
            if r == "stat":
                if _aligned(shape, frame, dims) or (aligned.get(src) and shape == frame):
                    aligned[i] = True
                elif _flat(shape, frame, dims):
                    aligned[i] = False
                else:
                    raise NotCoveredError(f"a reshape of the reduction's result to {shape}",
                                          "reshape")
                passthrough.add(i)
            elif r == "elem" and shape != tuple(m.node(src).shape):
                raise NotCoveredError(f"{n.target}: a reshape to another shape", "reshape")
            role[i] = r
            continue
        if "elem" in roles:
            for u, r in zip(ins, roles, strict=True):
                if r == "stat" and not aligned.get(u, False):
                    raise NotCoveredError(
                        "the reduction's result meets the values it reduces through a shape that "
                        "lines it up with other dims (keep the reduced dims: keepdim=True, or "
                        "unsqueeze)", "broadcast")
            role[i] = "elem"
        elif "stat" in roles:
            flags = {aligned.get(u, False) for u, r in zip(ins, roles, strict=True) if r == "stat"}
            if len(flags) > 1:
                raise NotCoveredError("the reduction's result is used with two different shapes",
                                      "broadcast")
            aligned[i] = flags.pop()
            role[i] = "stat"
        else:
            role[i] = "scalar"
    return members, frozenset(passthrough), role.get(out.id, "stat")


def classify_for(lay: str, frame: tuple[int, ...], dims: tuple[int, ...]):
    """The leaf classifier of a layout's prologue frame: (shape, frame, k) -> kind."""
    if lay in ("strided",):
        groups = strided_groups(len(frame), dims)
        return lambda shape, fr, k: strided_kind(shape, frame, groups)
    return leaf_kind


def reduction_params(a: Node, op: str, x: Node, params: dict[str, object]) -> tuple[str, int]:
    """(layout, k) of a reduction node; fills dims / keepdim / correction / layout params.

    Raises:
        NotCoveredError: a form the families do not compute.
    """
    c, nd = a.consts, len(x.shape)
    if c.get("dtype") is not None:
        raise NotCoveredError(f"{a.target} with dtype={c['dtype']!r}", op)
    dims = reduced_dims(c.get("dim"), nd)
    lay = layout(nd, dims)
    if op in ("argmax", "argmin") and c.get("dim") is not None and len(dims) > 1:
        raise NotCoveredError(f"{op} over several dims", op)
    if op == "logsumexp" and lay not in ("inner", "all", "strided"):
        raise NotCoveredError(f"logsumexp over dims {list(dims)} of a {nd}-d tensor (the row "
                              "family takes it over the trailing dims or every element, the "
                              "strided family over one middle run of dims)", op)
    if op in ("var", "std"):
        correction = c.get("correction")
        if correction is None:
            unbiased = c.get("unbiased", True)
            correction = 1 if unbiased in (True, None) else 0
        if not isinstance(correction, (int, float)) or isinstance(correction, bool):
            raise NotCoveredError(f"{a.target} with correction={correction!r}", op)
        params["correction"] = float(correction)
        if lay in ("all", "two_stage"):
            raise NotCoveredError(f"{op} over dims {list(dims)} of a {nd}-d tensor (the variance "
                                  "is computed in one pass: over trailing dims or one middle run "
                                  "of dims)", op)
    if op in ("argmax", "argmin") and lay in ("two_stage",):
        raise NotCoveredError(f"{op} over dims {list(dims)}", op)
    params["dims"] = dims
    params["keepdim"] = bool(c.get("keepdim") or False)
    if c.get("count_dims") is not None:  # a mean over another count (kl_div's batchmean)
        if op != "mean":
            raise NotCoveredError(f"{a.target} with count_dims", op)
        params["count_dims"] = tuple(c["count_dims"])
    params["layout"] = lay
    if lay == "inner":
        return lay, nd - runs(nd, dims)[-1][1][0]
    if lay == "all":  # two passes for one-value statistics, else one row of every element
        return lay, (1 if op in SPLITTABLE else nd)
    if lay == "two_stage":
        return lay, len(runs(nd, dims)[-1][1])
    return lay, 0


def reduction_plan(m: Matcher, calls: set[int], out: Node, a: Node, op: str, result: int,
                   absorbed: set[int]) -> Plan:
    """The plan of a reduction anchor (see the module docstring).

    Raises:
        NotCoveredError: the forward is outside what the families compute.
    """
    x_id = a.tensors["input"]
    x = m.node(x_id)
    if x.dtype not in FLOATS:
        raise NotCoveredError(f"{a.target} of a {x.dtype} tensor", x.dtype)
    frame, nd = tuple(x.shape), len(x.shape)
    params: dict[str, object] = {}
    lay, k = reduction_params(a, op, x, params)
    dims = params["dims"]
    assert isinstance(dims, tuple)
    family = "strided" if lay in ("strided", "two_stage") else "row"
    params["k"] = k
    m.classify = classify_for(lay, frame, dims)
    pro_ids = (m.ancestors(x_id) & calls) - absorbed
    members, passthrough, out_role = epilogue_roles(m, out, result, x_id, frame, dims)
    members -= absorbed | {a.id}
    exact = op in ("argmax", "argmin")
    prologue = m.chain(pro_ids, x_id, frame, k, {}, exact=exact)
    mapped = out_role == "elem"
    if mapped:
        if op in ("argmax", "argmin"):
            raise NotCoveredError(f"the indices of {op} used with the values they index", op)
        if lay not in ("inner", "strided") and op not in SPLITTABLE:
            raise NotCoveredError(f"{op} over dims {list(dims)} mapped back over the values it "
                                  "reduces (trailing dims or one middle run of dims only)", op)
        if lay not in ("inner", "strided"):
            family = "reduce_map"  # the statistic first, then a pointwise pass
        if tuple(out.shape) != frame:
            raise NotCoveredError(f"a result of shape {tuple(out.shape)} from a reduction of a "
                                  f"{frame} tensor", "broadcast")
        epilogue = m.chain(members, out.id, frame, k, {result: "%y", x_id: "%in"},
                           passthrough=passthrough)
        bad = [m.leaves[n] for n in epilogue.leaves()
               if family == "strided" and m.leaves[n].kind not in ("full", "col", "row",
                                                                   "scalar", "value")]
        if family == "reduce_map":  # the pointwise pass reads every leaf in its own frame
            for n in epilogue.leaves():
                lf = m.leaves[n]
                if lf.kind not in ("value",) and leaf_kind(lf.shape, frame, 1) is None:
                    bad.append(lf)
        if bad:
            raise NotCoveredError(f"{bad[0].ref} of shape {bad[0].shape} in a norm over the "
                                  "middle dims", "broadcast")
        out_shape = "same"
    else:
        epilogue = m.chain(members, out.id, (1,) * nd, k, {result: "%y", x_id: "%in"},
                           passthrough=passthrough)
        bad = [m.leaves[n] for n in epilogue.leaves()
               if m.leaves[n].kind not in ("scalar", "value")]
        if bad:
            raise NotCoveredError(f"{bad[0].ref} is applied to the per-row result of {op}: only "
                                  "single values can follow a reduction", "broadcast")
        if any(n.args.count("%in") for n in epilogue.nodes) or epilogue.result == "%in":
            raise NotCoveredError(f"the input of {op} is used after it", op)
        out_shape = "rows"
    params["map"] = mapped
    main = m.main_leaf(prologue, x, op)
    if out.dtype not in (*FLOATS, "int64"):
        raise NotCoveredError(f"a result of dtype {out.dtype}", out.dtype)
    where = {"inner": f"the last {k} dim(s)", "all": "all elements"}.get(lay, f"dims {list(dims)}")
    desc = (f"{op} over {where} of {'x'.join(map(str, frame))} {x.dtype} ({lay}"
            f"{', mapped back' if mapped else ''})")
    if not prologue.empty:
        desc += f"; prologue: {prologue.describe()}"
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    return Plan(family, op, tuple(m.leaves.values()), main, prologue, epilogue,
                tuple(sorted(params.items())), out.dtype, out_shape, m.cap.forward_args, desc)

