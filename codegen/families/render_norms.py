"""Rendering of the ``batchnorm`` family: batch norm with batch statistics in three kernels.

1. the row kernel (``VarRow`` with ``opts["partials"]``) writes the Welford statistics of
   each (n, c) row of x viewed (N * C, spatial), the prologue fused;
2. ``BatchStats`` (``templates/batchnorm.py.tmpl``) merges each channel's N partials in n
   order into its mean and 1 / sqrt(var + eps), and updates the running statistics;
3. the pointwise kernel normalises every element (the prologue recomputed, the affine weight
   and bias and the epilogue fused), reading each channel's statistics as per-row operands
   ((row // 1) % C).

x is read twice and the output written once: the least a norm over the batch can do when x
does not fit in L2 (statistics first, output after).

A 2-D input (``nn.BatchNorm1d`` on (N, C), as after a Linear) has no spatial dims: its rows
of one element would make step 1 a kernel of N * C one-element rows writing four words each.
There step 1 is the strided family's Welford kernel over the columns of (N, C) (coalesced
loads, N cut into slices so that the GPU fills), leaving each (slice, c)'s statistics for
``BatchStats`` to merge in slice order, and step 3 is a pointwise pass over (N, C) reading the
channel statistics as per-column operands.
"""

from __future__ import annotations

from cutegen.codegen.families.operands import Operands, source, wrapped
from cutegen.codegen.families.plan import Chain, Leaf, Plan, PwNode
from cutegen.codegen.families.pointwise import chain_function
from cutegen.codegen.families.render_maps import leaf_in_frame
from cutegen.codegen.families.render_strided import _strided_wrapped, strided_knobs
from cutegen.codegen.families.template import render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16"}
#: Ids of the normalisation ops in the pointwise pass (above any graph id).
_NORM = 2_000_000


def _map_chain(plan: Plan) -> Chain:
    """prologue, then (x - mean) * rstd, then the epilogue (affine weight / bias first)."""
    pro = plan.prologue
    y = f"%{_NORM + 1}"
    nodes = [*pro.nodes, PwNode(_NORM, "sub", (pro.result, "@_bn_mean")),
             PwNode(_NORM + 1, "mul", (f"%{_NORM}", "@_bn_rstd"))]

    def sub(a: str) -> str:
        return y if a == "%y" else a

    nodes += [PwNode(n.id, n.op, tuple(sub(a) for a in n.args), n.params)
              for n in plan.epilogue.nodes]
    return Chain(tuple(nodes), sub(plan.epilogue.result))


def _running(plan: Plan) -> str:
    """The running statistics' arguments of ``_bn_stats`` as source ("" without them)."""
    rm, rv = plan.param("running_mean"), plan.param("running_var")
    if rm and rv:
        return f", {source(plan.leaf(rm))}, {source(plan.leaf(rv))}"
    return ""


def _normalise_pass(plan: Plan, leaves: dict[str, Leaf], stats: Operands, main: str,
                    out: str) -> tuple[list[str], str]:
    """(the prologue and normalising chain functions, the pointwise launch) of step 3:
    ``leaves`` holds the plan's leaves as the pass reads them, the statistics among them;
    ``stats``: the statistics pass's operands (how its prologue reads them)."""
    chain = _map_chain(plan)
    ops = Operands()
    ops.add(leaves[plan.main], main)
    for n in chain.leaves():
        ops.add(leaves[n], wrapped(leaves[n]))
    funcs = [chain_function("_prologue", plan.prologue, stats.access,
                            doc="The fused prologue, in the statistics pass."),
             chain_function("_normalise", chain, ops.access,
                            doc="The prologue again, the normalisation with the channel's "
                                "statistics, and the fused epilogue.")]
    return funcs, f"_pw_launch(_normalise, {ops.args()}, {out})"


def _columns_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a batch norm of an (N, C)
    tensor: the strided Welford kernel's per-slice statistics of each column, their merge,
    then the pointwise pass over (N, C)."""
    main = plan.leaf(plan.main)
    frame = tuple(main.shape)
    dt = _DTYPES[plan.out_dtype]
    leaves = {lf.name: leaf_in_frame(lf, frame) for lf in plan.leaves}
    lines = [f"main = {source(main)}.contiguous()", "shape = main.shape",
             "B, R, C = 1, shape[0], shape[1]", "n_rows, n_cols = R, C",
             f"out = _empty(shape, dtype={dt}, device=main.device)",
             "if main.numel() == 0:", "    return out"]
    stats = Operands()
    stats.add(leaves[plan.main], "main.view(B, R, C)")
    for n in plan.prologue.leaves():
        stats.add(leaves[n], _strided_wrapped(leaves[n]))
    need = tuple(True for _ in stats.vec)
    kinds = tuple("full" if f else "col" for f in stats.full)
    lines += [f"ws, n_ws = _strided_launch(VarStrided, _prologue, _ident_epi, "
              f"[{', '.join(stats.vec)}], {kinds!r}, [{', '.join(stats.rows)}], "
              f"{stats.kinds()}, [{', '.join(stats.scalars)}], main, {need!r}, {need!r}, "
              "opts=(('correction', 0.0), ('partials', True), ('count', R)))",
              "stats = _empty(2, C, dtype=torch.float32, device=main.device)",
              f"_bn_stats(ws, stats, n_ws, C, {plan.param('eps')!r}, "
              f"{plan.param('momentum', 0.0)!r}{_running(plan)}, words=3)"]
    leaves["_bn_mean"] = Leaf("_bn_mean", "stage", "stats[0]", "col", "float32", (1, frame[1]))
    leaves["_bn_rstd"] = Leaf("_bn_rstd", "stage", "stats[1]", "col", "float32", (1, frame[1]))
    funcs, launch = _normalise_pass(plan, leaves, stats, "main", "out")
    lines += [launch, "return out"]
    body = [render_template(name, {}, {}) for name in
            ("row", "row_welford", "row_reduce", "strided", "strided_var", "batchnorm")]
    body.append(render_template("pointwise", {"PW": "pw_"}, {}))
    return funcs, body, "\n".join(lines)


def batchnorm_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a batchnorm plan."""
    k = plan.param("k")
    if k == 0:
        return _columns_parts(plan)
    dt = _DTYPES[plan.out_dtype]
    lines = [f"main = {source(plan.leaf(plan.main))}.contiguous()", "shape = main.shape",
             f"n_cols = math.prod(shape[len(shape) - {k}:])",
             "n_rows = main.numel() // max(n_cols, 1)",
             f"out = _empty(shape, dtype={dt}, device=main.device)",
             "if main.numel() == 0:", "    return out"]
    stats = Operands()
    stats.add(plan.leaf(plan.main), "main.view(n_rows, n_cols)")
    for n in plan.prologue.leaves():
        stats.add(plan.leaf(n), wrapped(plan.leaf(n)))
    need = tuple(True for _ in stats.vec)
    lines += ["part = _empty(n_rows * 4, dtype=torch.float32, device=main.device)",
              f"_row_launch(VarRow, _prologue, _ident_epi, {stats.args()}, part, {need!r}, "
              f"{need!r}, opts=(('correction', 0.0), ('std', False), ('partials', True)))",
              "stats = _empty(2, shape[1], dtype=torch.float32, device=main.device)"]
    lines.append(f"_bn_stats(part, stats, shape[0], shape[1], {plan.param('eps')!r}, "
                 f"{plan.param('momentum', 0.0)!r}{_running(plan)})")
    chan = (1, 2, 2)  # per channel: dim 1 of the two row dims (N, C)
    leaves = {lf.name: lf for lf in plan.leaves}
    leaves["_bn_mean"] = Leaf("_bn_mean", "stage", "stats[0]", "rowmap", "float32",
                              (1, 0), chan)
    leaves["_bn_rstd"] = Leaf("_bn_rstd", "stage", "stats[1]", "rowmap", "float32",
                              (1, 0), chan)
    funcs, launch = _normalise_pass(plan, leaves, stats, "main.view(n_rows, n_cols)",
                                    "out.view(n_rows, n_cols)")
    lines += [launch, "return out"]
    body = [render_template(name, {}, {}) for name in
            ("row", "row_welford", "row_var", "row_reduce", "batchnorm")]
    body.append(render_template("pointwise", {"PW": "pw_"}, {}))
    return funcs, body, "\n".join(lines)


def batchnorm_knobs(plan: Plan, row_knobs: tuple[dict, dict],
                    pw_knobs: tuple[dict, dict]) -> tuple[dict, dict]:
    """The statistics pass's knobs (the row kernel's; the strided kernel's for an (N, C)
    input) and the normalising pass's pointwise knobs (pw_)."""
    if plan.param("k") == 0:
        values, choices = strided_knobs(plan)  # a reduction's (no map, one stage)
    else:
        values, choices = dict(row_knobs[0]), dict(row_knobs[1])
    values.pop("preload", None)
    choices.pop("preload", None)
    values.update({f"pw_{k}": v for k, v in pw_knobs[0].items()})
    choices.update({f"pw_{k}": v for k, v in pw_knobs[1].items()})
    return values, choices
