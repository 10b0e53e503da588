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
"""

from __future__ import annotations

from cutegen.codegen.families.operands import Operands, source, wrapped
from cutegen.codegen.families.plan import Chain, Leaf, Plan, PwNode
from cutegen.codegen.families.pointwise import chain_function
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


def batchnorm_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a batchnorm plan."""
    k = plan.param("k")
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
    rm, rv = plan.param("running_mean"), plan.param("running_var")
    running = ""
    if rm and rv:
        running = f", {source(plan.leaf(rm))}, {source(plan.leaf(rv))}"
    lines.append(f"_bn_stats(part, stats, shape[0], shape[1], {plan.param('eps')!r}, "
                 f"{plan.param('momentum', 0.0)!r}{running})")
    chan = (1, 2, 2)  # per channel: dim 1 of the two row dims (N, C)
    leaves = {lf.name: lf for lf in plan.leaves}
    leaves["_bn_mean"] = Leaf("_bn_mean", "stage", "stats[0]", "rowmap", "float32",
                              (1, 0), chan)
    leaves["_bn_rstd"] = Leaf("_bn_rstd", "stage", "stats[1]", "rowmap", "float32",
                              (1, 0), chan)
    chain = _map_chain(plan)
    ops = Operands()
    ops.add(plan.leaf(plan.main), "main.view(n_rows, n_cols)")
    for n in chain.leaves():
        ops.add(leaves[n], wrapped(leaves[n]))
    funcs = [chain_function("_prologue", plan.prologue, stats.access,
                            doc="The fused prologue, in the statistics pass."),
             chain_function("_normalise", chain, ops.access,
                            doc="The prologue again, the normalisation with the channel's "
                                "statistics, and the fused epilogue.")]
    lines += [f"_pw_launch(_normalise, {ops.args()}, out.view(n_rows, n_cols))", "return out"]
    body = [render_template(name, {}, {}) for name in
            ("row", "row_welford", "row_var", "row_reduce", "batchnorm")]
    body.append(render_template("pointwise", {"PW": "pw_"}, {}))
    return funcs, body, "\n".join(lines)


def batchnorm_knobs(row_knobs: tuple[dict, dict], pw_knobs: tuple[dict, dict]) -> tuple[dict, dict]:
    """The statistics pass's row knobs and the normalising pass's pointwise knobs (pw_)."""
    values, choices = dict(row_knobs[0]), dict(row_knobs[1])
    values.pop("preload", None)
    choices.pop("preload", None)
    values.update({f"pw_{k}": v for k, v in pw_knobs[0].items()})
    choices.update({f"pw_{k}": v for k, v in pw_knobs[1].items()})
    return values, choices
