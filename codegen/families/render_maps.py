"""Rendering of the ``reduce_map`` family: a sum / mean / amax / amin over all elements or over
two runs of dims, mapped back over the values it reduces (``x / torch.norm(x)``), in two
steps: the statistic (the row family's two passes, or the row then strided pass) into an
fp32 tensor of the reduction's keepdim shape, then one pointwise pass over x (the prologue
recomputed, the epilogue fused) reading it as a single value, per-row, per-column or
per-channel operand. x is read twice: the statistic must be complete before any output.
"""

from __future__ import annotations

from dataclasses import replace

from cutegen.codegen.families.matcher import leaf_kind, rowmap_run
from cutegen.codegen.families.operands import Operands, source, wrapped
from cutegen.codegen.families.plan import Chain, Leaf, Plan, PwNode
from cutegen.codegen.families.pointwise import chain_function
from cutegen.codegen.families.reductions import runs, strided_groups
from cutegen.codegen.families.rowops import ROW_OPS, STRIDED_OPS
from cutegen.codegen.families.template import render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16"}


def _prod(dims: tuple[int, ...]) -> str:
    return "math.prod(shape[d] for d in " + repr(tuple(dims)) + ")" if dims else "1"


def _map_chain(plan: Plan) -> Chain:
    """The prologue (when the epilogue reads the reduction's input), then the epilogue with
    the statistic read as ``@_stat``."""
    pro, epi = plan.prologue, plan.epilogue
    uses_in = any("%in" in n.args for n in epi.nodes) or epi.result == "%in"

    def sub(a: str) -> str:
        return "@_stat" if a == "%y" else pro.result if a == "%in" else a

    nodes = list(pro.nodes) if uses_in else []
    have = {n.id for n in nodes}
    nodes += [PwNode(n.id, n.op, tuple(sub(a) for a in n.args), n.params) for n in epi.nodes
              if n.id not in have]
    return Chain(tuple(nodes), sub(epi.result))


def leaf_in_frame(lf: Leaf, frame: tuple[int, ...], k: int = 1) -> Leaf:
    """``lf`` classified against the pointwise pass's (rows, last ``k`` dims) view of
    ``frame``."""
    if lf.kind == "value":
        return lf
    kind = leaf_kind(lf.shape, frame, k)
    rowmap: tuple[int, ...] = ()
    if kind == "rowmap":
        rowmap = (*rowmap_run(lf.shape, frame, k), len(frame) - k)
    return replace(lf, kind=kind or "full", rowmap=rowmap)


def reduce_map_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a reduce_map plan."""
    dims = tuple(plan.param("dims"))
    main = plan.leaf(plan.main)
    frame = tuple(main.shape)
    nd = len(frame)
    two = plan.param("layout") == "two_stage"
    row = ROW_OPS[plan.op]
    raw = tuple(kv for kv in row.opts(plan) if kv[0] not in ("mean", "count"))
    dt = _DTYPES[plan.out_dtype]
    lines = [f"main = {source(main)}.contiguous()", "shape = main.shape",
             f"stat = _empty(_reduced(shape, {dims!r}, True), dtype=torch.float32, "
             "device=main.device)",
             f"out = _empty(shape, dtype={dt}, device=main.device)",
             "if main.numel() == 0:", "    return out"]
    k = len(runs(nd, dims)[-1][1]) if two else 1
    lines += [f"n_cols = math.prod(shape[len(shape) - {k}:])",
              "n_rows = main.numel() // max(n_cols, 1)"]
    stats = Operands()
    stats.add(main, "main.view(n_rows, n_cols)")
    for n in plan.prologue.leaves():
        stats.add(plan.leaf(n), wrapped(plan.leaf(n)))
    need = tuple(True for _ in stats.vec)
    funcs = [chain_function("_prologue", plan.prologue, stats.access,
                            doc="The fused prologue, in the statistic's first pass.")]
    body = [render_template("row", {}, {})] + [render_template(p, {}, {}) for p in row.parts] \
        + [render_template("row_reduce", {}, {})]
    if two:
        b_dims, r_dims, c_dims = strided_groups(nd, dims)
        spec = STRIDED_OPS[plan.op]
        count = f"R * {_prod(runs(nd, dims)[-1][1])}"
        lines += [f"B, R, C = {_prod(b_dims)}, {_prod(r_dims)}, {_prod(c_dims)}",
                  "part = _empty(n_rows, dtype=torch.float32, device=main.device)",
                  f"_row_reduce({row.cls}, _prologue, _ident_epi, {stats.args()}, part, "
                  f"{need!r}, opts={raw!r})",
                  f"_strided_launch({spec.cls}, _ident_pro, _ident_epi, [part.view(B, R, C)], "
                  f"('full',), [], (), [], stat.view(B, C), (True,), (True,), "
                  f"opts={spec.opts(plan)!r} + ((\"count\", {count}),))"]
        body += [render_template("strided", {}, {})] + [render_template(p, {}, {})
                                                        for p in spec.parts]
    else:
        lines.append(f"_row_reduce({row.cls}, _prologue, _ident_epi, {stats.args()}, "
                     f"stat.view(-1), {need!r}, opts={row.opts(plan)!r})")
    chain = _map_chain(plan)
    kshape = tuple(1 if d in dims else s for d, s in enumerate(frame))
    leaves = {lf.name: leaf_in_frame(lf, frame) for lf in plan.leaves}
    leaves["_stat"] = leaf_in_frame(Leaf("_stat", "stage", "stat", "full", "float32", kshape), frame)
    pw = Operands()
    pw.add(leaves[plan.main], "main.view(n_rows, n_cols)")
    lines += ["n_cols = shape[-1] if len(shape) else 1", "n_rows = main.numel() // max(n_cols, 1)"]
    for n in chain.leaves():
        pw.add(leaves[n], wrapped(leaves[n]))
    funcs.append(chain_function("_map", chain, pw.access,
                                doc="The prologue again where needed, and the epilogue with "
                                    "the statistic."))
    lines += [f"_pw_launch(_map, {pw.args()}, out.view(n_rows, n_cols))", "return out"]
    body.append(render_template("pointwise", {"PW": "pw_"}, {}))
    return funcs, body, "\n".join(lines)
