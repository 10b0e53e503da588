"""Render a :class:`~cutegen.codegen.families.plan.Plan` into one standalone candidate file.

The file is ``head`` (imports, TUNABLES, TUNABLE_CHOICES, FAMILY, host helpers), a copy of
the task's ``Model`` constructor (``_TaskModule``), the fused pointwise functions, the
family body (``row``, ``scan`` or ``pointwise`` template) and ``ModelNew``, whose forward
builds the operand lists and launches the kernels. ``fused=False`` renders the same work
unfused: the prologue and epilogue run as pointwise kernels of their own (a baseline for
the "fuse" move, and an option when a heavy prologue slows a row kernel down). A ``gemm``
plan is rendered (and its knobs listed) by :mod:`~cutegen.codegen.families.gemm`.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import replace

from cutegen.codegen.families.conv import conv_knobs, conv_parts, render_conv
from cutegen.codegen.families.gemm import gemm_knobs, gemm_parts, render_gemm
from cutegen.codegen.families.matcher import leaf_kind, padded
from cutegen.codegen.families.operands import Operands, source, wrapped
from cutegen.codegen.families.plan import Chain, Plan
from cutegen.codegen.families.pointwise import VPOW, chain_function, fast_math_applies
from cutegen.codegen.families.pw_view import PW_KNOBS
from cutegen.codegen.families.reductions import SPLITTABLE
from cutegen.codegen.families.render_chain import chain_knobs, chain_parts
from cutegen.codegen.families.render_maps import leaf_in_frame, reduce_map_parts
from cutegen.codegen.families.render_norms import batchnorm_knobs, batchnorm_parts
from cutegen.codegen.families.render_pool import POOL_KNOBS, pool_parts
from cutegen.codegen.families.render_strided import strided_knobs, strided_parts
from cutegen.codegen.families.rowops import WRITES_ROW, row_op
from cutegen.codegen.families.taskmodule import extract
from cutegen.codegen.families.template import model_class, render_template
from cutegen.codegen.inputs import itemsize

_ROW_KNOBS = ({"strategy": "auto", "vals_per_thread": 32, "cta_threads": 128,
               "max_cta_threads": 512, "cluster_max": 8, "vec_bits": 128, "unroll": 1,
               "preload": False},
              {"strategy": ["auto", "registers", "cluster", "looped"],
               "vals_per_thread": [8, 16, 32, 64], "cta_threads": [64, 128, 256],
               "max_cta_threads": [256, 512, 1024], "cluster_max": [1, 2, 4, 8],
               "vec_bits": [32, 64, 128], "unroll": [1, 2, 4], "preload": [True, False]})
_SCAN_KNOBS = ({"strategy": "auto", "vals_per_thread": 16, "cta_threads": 128,
                "max_cta_threads": 512, "vec_bits": 128, "unroll": 1},
               {"strategy": ["auto", "looped"], "vals_per_thread": [4, 8, 16, 32],
                "cta_threads": [64, 128, 256], "max_cta_threads": [256, 512, 1024],
                "vec_bits": [32, 64, 128], "unroll": [1, 2, 4]})
#: Family -> (default TUNABLES, TUNABLE_CHOICES).
KNOBS = {"row": _ROW_KNOBS, "scan": _SCAN_KNOBS, "pointwise": PW_KNOBS}
_TITLES = {"cumsum": "Inclusive cumulative sum", "cumprod": "Inclusive cumulative product"}
_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16", "int64": "torch.int64"}


def knobs(plan: Plan, *, fused: bool = True) -> tuple[dict, dict]:
    """Default TUNABLES and TUNABLE_CHOICES of the file a plan renders to."""
    if plan.family == "gemm":
        return gemm_knobs(plan)
    if plan.family == "conv":
        return conv_knobs(plan)
    if plan.family == "chain":
        return chain_knobs(plan, knobs)
    if plan.family == "pool":
        values, choices = (dict(d) for d in POOL_KNOBS)
        if fast_math_applies(plan.out_dtype, plan.prologue, plan.epilogue):
            values["fast_math"], choices["fast_math"] = False, [False, True]
        return values, choices
    if plan.family in ("strided", "batchnorm", "reduce_map"):
        values, choices = (strided_knobs(plan) if plan.family == "strided"
                           else batchnorm_knobs(plan, _ROW_KNOBS, PW_KNOBS))
        if plan.family == "reduce_map" and plan.param("layout") == "two_stage":
            sv, sc = strided_knobs(replace(plan, params=(("map", False),)))
            values.update({k: v for k, v in sv.items() if k.startswith("s_")})
            choices.update({k: v for k, v in sc.items() if k.startswith("s_")})
        if fast_math_applies(plan.out_dtype, plan.prologue, plan.epilogue):
            values["fast_math"], choices["fast_math"] = False, [False, True]
        return values, choices
    values, choices = (dict(d) for d in KNOBS[plan.family])
    if plan.family == "row" and not _has_late_operands(plan):
        del values["preload"], choices["preload"]  # nothing to load early or late
    if plan.family == "row" and long_row(plan):
        # GroupNorm's long groups (KernelBench L1 35: 8 MiB each, 66 % of the copy bandwidth
        # read twice on the H200) get the long rows' knobs as moves only: its defaults stay
        # as they were until a GPU has timed them
        moves_only = plan.op == "group_norm"
        if smem_row_fits(plan):  # else the kernel would drop it: no knob, no move
            # on by default: a row walked in chunks is read once, not twice (the kernel drops
            # it where a CTA holds its slice in registers: one chunk); softmax_393k_fp32 on
            # the H200 (2026-12-05): 4,297 us with two reads, 3,877 staged, 3,478 staged
            # with cp.async (async_stage)
            values["smem_row"], choices["smem_row"] = not moves_only, [True, False]
        choices["strategy"] = [*choices["strategy"], "split", "resident"]
        # l2_hints off (that softmax 4,297 -> 3,949 us read twice, 3,877 -> 3,936 staged;
        # layernorm_4m_fp32 split 241 -> 251 us); async_stage on where a slice is staged
        # (resident with hints: 377 -> 405 us, a move turns it off)
        values["l2_hints"], choices["l2_hints"] = False, [False, True]
        values["async_stage"], choices["async_stage"] = True, [True, False]
        if few_unheld_rows(plan) and not moves_only:
            values["strategy"] = "split"
            # the split's two launches a few rows (32 MiB) at a time, so that the output
            # launch re-reads x from L2 (row template ``_l2_batch_rows``); off until measured
            values["l2_batch"], choices["l2_batch"] = False, [False, True]
    if not fused and plan.family != "pointwise":
        values.update({f"pw_{k}": v for k, v in PW_KNOBS[0].items()})
        choices.update({f"pw_{k}": v for k, v in PW_KNOBS[1].items()})
    if fast_math_applies(plan.out_dtype, plan.prologue, plan.epilogue):
        values["fast_math"], choices["fast_math"] = False, [False, True]
    return values, choices


#: Row length (elements) from which a row kernel may walk its slice in chunks (two passes):
#: 512 threads of 32 values in a cluster of 8 hold 131072; with two more operands 65536.
LONG_ROW_COLS = 65536


def row_cols(plan: Plan) -> int | None:
    """The row length of a row plan's (rows, N) view on the task's main inputs (None when
    its shape is unknown); GroupNorm's rows are (sample, group): C / groups * spatial."""
    shape = plan.leaf(plan.main).shape
    k = int(plan.param("k", 1))
    if plan.family == "row" and plan.op == "group_norm":
        groups = int(plan.param("groups") or 0)
        if not shape or len(shape) < 2 or groups < 1:
            return None
        return math.prod(int(d) for d in shape[1:]) // groups
    if plan.family != "row" or not shape or k > len(shape):
        return None
    n = 1
    for d in shape[len(shape) - k:]:
        n *= int(d)
    return n


def long_row(plan: Plan) -> bool:
    """Whether a row plan writes rows long enough to be walked in chunks, where keeping the
    CTA's slice in shared memory (``TUNABLES["smem_row"]``) spares the output pass its second
    read of x, and where the ``split`` strategy (each row over independent CTAs, two
    launches) can fill the GPU with few rows."""
    n = row_cols(plan)
    return plan.op in WRITES_ROW and n is not None and n >= LONG_ROW_COLS


#: Shared memory a row kernel's CTA may keep its slice in (the row template's
#: ``_SMEM_ROW_BYTES``; a test keeps the two equal).
SMEM_ROW_BYTES = 226 * 1024
#: SMs of an H100 / H200, for defaults chosen at the task's main shape.
_SMS = 132


def smem_row_fits(plan: Plan) -> bool:
    """Whether a long row plan's row may be held in shared memory by a cluster of
    ``cluster_max`` CTAs (the row kernel drops ``smem_row`` silently where it does not fit:
    the candidate with it would be the one without)."""
    n = row_cols(plan)
    size = itemsize(plan.leaf(plan.main).dtype or "")
    return n is not None and n * size <= _ROW_KNOBS[0]["cluster_max"] * SMEM_ROW_BYTES


def few_unheld_rows(plan: Plan) -> bool:
    """Few very long rows that no cluster can hold in shared memory (16 rows of 4M fp32: a
    LayerNorm over (64, 256, 256)): clusters of ``cluster_max`` CTAs a row leave SMs idle,
    and the split strategy (each row over independent CTAs, two launches) fills them. On the
    H200 (2026-12-04, BENCHMARKS.md "Long rows held resident") that task's kernels took
    225.3 us split against 258.0 us with auto; KernelBench's level 1 problem 40 found split
    at its third evaluation (229.6 us)."""
    n = row_cols(plan)
    if not n or plan.op not in WRITES_ROW:
        return False
    rows = math.prod(int(d) for d in plan.leaf(plan.main).shape) // n
    return not smem_row_fits(plan) and rows * _ROW_KNOBS[0]["cluster_max"] <= _SMS


def _has_late_operands(plan: Plan) -> bool:
    """Whether the row kernel's output pass reads vector operands besides x (weights, bias,
    epilogue tensors): only then does TUNABLES["preload"] change anything."""
    if plan.op not in WRITES_ROW and not plan.param("map"):
        return False
    names = [plan.param("weight"), plan.param("bias"), *plan.epilogue.leaves()]
    return any(n and plan.leaf(n).kind in ("full", "col") for n in names)


def uses_row_reduce(plan: Plan) -> bool:
    """Whether a row plan is a reduction that may run in two passes (few long rows, or all
    elements): its partial statistic is one value the same op merges."""
    return (plan.family == "row" and plan.out_shape == "rows" and plan.op in SPLITTABLE
            and plan.param("layout") in ("inner", "all"))


def can_split(plan: Plan) -> bool:
    """Whether the plan has pointwise work that can run as kernels of its own (the row and
    scan families' prologues and epilogues; the other families always fuse theirs)."""
    if plan.family not in ("row", "scan") or plan.op == "group_norm":
        return False
    if not plan.has_pointwise or plan.out_shape != "same" or plan.param("map"):
        return False
    return not any("%in" in n.args for n in plan.epilogue.nodes) and plan.epilogue.result != "%in"


def _operands(plan: Plan, names: list[str], first: tuple[str, str] | None = None) -> Operands:
    ops = Operands()
    if first is not None:  # (leaf name, expression) of the kernel's main operand
        ops.add(plan.leaf(first[0]), first[1])
    for n in names:
        lf = plan.leaf(n)
        ops.add(lf, wrapped(lf))
    return ops


def _doc(plan: Plan, fused: bool) -> str:
    how = "fused into one kernel" if fused or not plan.has_pointwise else (
        "unfused: pointwise kernels before / after the family kernel")
    body = (f"Generated by cutegen's built-in '{plan.family}' kernel family: {plan.description}; "
            f"{how}. TUNABLES['strategy'] picks the variant (see the kernel class); every "
            "element is read once and written once with 128-bit accesses where the row length "
            "and the pointers allow, statistics and arithmetic in fp32.")
    return "\n".join(textwrap.wrap(body.replace('"', "'"), 92))


def render(plan: Plan, task_source: str, *, tunables: dict | None = None,
           fused: bool = True) -> str:
    """The candidate file for ``plan`` (see the module docstring).

    A ``gemm`` plan is rendered by :func:`cutegen.codegen.families.gemm.render_gemm` (its
    epilogue is always fused; ``fused`` does not apply), a ``conv`` plan by
    :func:`cutegen.codegen.families.conv.render_conv`.

    Raises:
        TaskModuleError: Model's constructor cannot be copied into the candidate.
    """
    if plan.family == "gemm":
        return render_gemm(plan, task_source, tunables=tunables)
    if plan.family == "conv":
        return render_conv(plan, task_source, tunables=tunables)
    fused = fused or not can_split(plan)
    values, choices = knobs(plan, fused=fused)
    values.update(tunables or {})
    tm = extract(task_source)
    family = {"family": plan.family, "op": plan.op, "fused": fused}
    head = render_template("head", {
        "DOC": _doc(plan, fused), "TASK_IMPORTS": tm.imports + "\n",
        "TUNABLES": repr(values), "TUNABLE_CHOICES": repr(choices), "FAMILY": repr(family),
    }, {})
    parts = [head, "\n" + (tm.constants + "\n\n" if tm.constants else "\n") + tm.class_source,
             VPOW]
    if plan.family == "chain":
        funcs, body, fwd = chain_parts(plan, values, family_parts)
    else:
        funcs, body, fwd = family_parts(plan, fused)
    parts += funcs + body
    args = ", ".join(plan.forward_args)
    parts.append(model_class(args, fwd))
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def family_parts(plan: Plan, fused: bool = True) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body ending in ``return out``) of a
    one-family plan (``gemm`` included, at its default precision)."""
    if plan.family == "gemm":
        return gemm_parts(plan, gemm_knobs(plan)[0]["precision"])
    if plan.family == "conv":  # a chain's first kernel (chains.conv_then): TUNABLES at run time
        return conv_parts(plan, conv_knobs(plan)[0])
    if plan.family == "pointwise":
        return _pointwise_parts(plan)
    if plan.family == "strided":
        return strided_parts(plan)
    if plan.family == "batchnorm":
        return batchnorm_parts(plan)
    if plan.family == "reduce_map":
        return reduce_map_parts(plan)
    if plan.family == "pool":
        return pool_parts(plan)
    if fused or not can_split(plan):
        return _fused_parts(plan)
    return _split_parts(plan)


def _family_body(plan: Plan) -> list[str]:
    """The kernel source parts of a row / scan plan, one per template (so a file with several
    kernels includes each template once)."""
    op = plan.op
    if plan.family == "scan":
        variant = ", ".join(k for k in ("reverse", "exclusive") if plan.param(k))
        return [render_template("scan", {"OP_TITLE": _TITLES[op],
                                         "SCAN_VARIANT": f" ({variant})" if variant else ""},
                                {"OP": op})]
    spec = row_op(op)
    parts = ["row", *spec.parts]
    if op == "cross_entropy" and plan.param("reduction", "mean") != "none":
        parts.append("row_loss")
    if uses_row_reduce(plan):
        parts.append("row_reduce")
    return [render_template(name, {}, {}).strip("\n") for name in parts]


class _Src(str):
    """Source text that prints as itself in a launch line (``{x!r}`` gives the text)."""

    def __repr__(self) -> str:
        return str(self)


def _frame_lines(plan: Plan, expand_main: bool = True) -> list[str]:
    """Forward lines: the main operand, its shape and the (n_rows, n_cols) view, the output.
    An outer-broadcast plan's frame is the operands' broadcast shape; its main operand is
    materialised at that shape only with ``expand_main`` (no operand can be read as it is)."""
    k = plan.param("k", 1)
    alloc, _ = _out_view(plan)
    rows = ["n_rows = main.numel() // max(n_cols, 1)"]
    if plan.op == "group_norm":  # rows are (n, group): (N * G, C / G * spatial)
        rows = [f"n_rows = shape[0] * {plan.param('groups')}",
                "n_cols = main.numel() // max(n_rows, 1)"]
    head = [f"main = {source(plan.leaf(plan.main))}.contiguous()", "shape = main.shape"]
    if plan.param("pad"):  # the exclusive scan of rows cut and padded: its own result shape
        stop, pad = plan.param("rows_stop"), plan.param("pad")
        kept = (f"max(main.shape[0] - {-stop}, 0)" if stop < 0
                else f"min({stop}, main.shape[0])")
        head[1] = f"shape = ({kept}, *main.shape[1:-1], main.shape[-1] + {pad})"
        rows = ["n_rows = math.prod(shape) // max(n_cols, 1)"]
    if plan.param("bcast"):  # the result's shape: what the full / broadcast operands make
        fulls = [source(lf) for lf in plan.leaves
                 if lf.kind in ("full", "col", "row", "rowmap", "scalar")]
        head = [f"shape = torch.broadcast_shapes({', '.join(f + '.shape' for f in fulls)})",
                f"main = {source(plan.leaf(plan.main))}"
                + (".expand(shape).contiguous()" if expand_main else "")]
        rows = ["n_rows = math.prod(shape) // max(n_cols, 1)"]
    return [*head, f"n_cols = math.prod(shape[len(shape) - {k}:])", *rows, alloc,
            "if out.numel() == 0:", "    return out"]


def _out_view(plan: Plan) -> tuple[str, str]:
    """(allocation line, the 2-D / 1-D view of the output the kernel writes)."""
    k = plan.param("k", 1)
    dt = _DTYPES[plan.out_dtype]
    if plan.out_shape in ("same", "broadcast"):
        shape, view = "shape", "out.view(n_rows, n_cols)"
    elif plan.out_shape == "rows" and plan.param("dims") is not None:
        shape = f"_reduced(shape, {tuple(plan.param('dims'))!r}, {bool(plan.param('keepdim'))})"
        view = "out.view(-1)"
    elif plan.out_shape == "rows":
        keep = f" + (1,) * {k}" if plan.param("keepdim") else ""
        shape, view = f"tuple(shape[:len(shape) - {k}]){keep}", "out.view(n_rows)"
    else:
        shape, view = "()", "out"
    return f"out = _empty({shape}, dtype={dt}, device=main.device)", view


def _family_launch(plan: Plan, first: str, view: str) -> tuple[list[str], list[str]]:
    """(chain functions, forward lines) launching the family kernel of ``plan`` with its main
    operand read from ``first`` and its result written to ``view``."""
    extra = [plan.param(n) for n in ("weight", "bias") if plan.param(n)]
    if plan.op == "group_norm":
        extra = []  # read by the op itself, through the row operands (tables)
    ops = Operands()
    if plan.param("target"):
        t = plan.leaf(plan.param("target"))
        ops.access[t.name] = "r[0]"
        ops.rows.append(f"_as_rows({source(t)}, n_rows)")
        ops.row_kinds.append("True")
    ops.add(plan.leaf(plan.main), first)
    tables = [plan.param(n) for n in ("weight", "bias")
              if plan.op == "group_norm" and plan.param(n)]
    for n in list(plan.prologue.leaves()) + extra + tables + list(plan.epilogue.leaves()):
        ops.add(plan.leaf(n), wrapped(plan.leaf(n)))
    funcs = [chain_function("_prologue", plan.prologue, ops.access,
                            doc="The fused prologue: the value the kernel's op consumes."),
             chain_function("_epilogue", plan.epilogue, ops.access, epilogue=True,
                            doc="The fused epilogue, applied to the op's result y.")]
    vec_of = lambda names: {ops.access[n] for n in names if ops.access[n].startswith("v")}  # noqa: E731
    pro_vec = vec_of(plan.prologue.leaves())
    out_vec = pro_vec | vec_of(list(plan.epilogue.leaves()) + extra)
    need_stats = tuple(i == 0 or f"v[{i}]" in pro_vec for i in range(len(ops.vec)))
    need_out = tuple(i == 0 or f"v[{i}]" in out_vec for i in range(len(ops.vec)))
    if plan.family == "scan":
        pad = f", pad={plan.param('pad')}" if plan.param("pad") else ""
        return funcs, [f"_scan_launch(_prologue, _epilogue, {ops.args()}, {view}, "
                       f"{bool(plan.param('reverse'))}, {bool(plan.param('exclusive'))}{pad})"]
    spec = row_op(plan.op)
    opts: object = spec.opts(plan)
    if plan.op == "group_norm":  # shape-dependent options, read at run time
        groups = plan.param("groups")
        rp = {n: int(ops.access[plan.param(n)][2:-1]) if plan.param(n) else -1
              for n in ("weight", "bias")}
        opts = _Src(f"(('eps', {plan.param('eps')!r}), ('groups', {groups}), "
                    f"('channels', shape[1]), ('spatial', n_cols * {groups} // shape[1]), "
                    f"('w_rp', {rp['weight']}), ('b_rp', {rp['bias']}))")
    if plan.op == "cross_entropy" and plan.param("reduction") != "none":
        return funcs, [
            "loss = _empty(n_rows, dtype=torch.float32, device=main.device)",
            f"_row_launch({spec.cls}, _prologue, _epilogue, {ops.args()}, loss, "
            f"{need_stats!r}, {need_out!r}, opts={opts!r})",
            f"_loss_reduce(loss, {ops.rows[0]}, {view}, {plan.param('reduction') == 'mean'}, "
            f"{plan.param('ignore_index', -100)!r})"]
    if uses_row_reduce(plan):
        if plan.param("count_dims"):  # a mean over the product of these dims' sizes
            opts = _Src(f"{opts!r} + (('count', math.prod(shape[d] for d in "
                        f"{tuple(plan.param('count_dims'))!r})),)")
        return funcs, [f"_row_reduce({spec.cls}, _prologue, _epilogue, {ops.args()}, {view}, "
                       f"{need_stats!r}, opts={opts!r})"]
    idx = {n: int(ops.access[plan.param(n)][2:-1]) if plan.param(n) and plan.op != "group_norm"
           else None for n in ("weight", "bias")}
    return funcs, [f"_row_launch({spec.cls}, _prologue, _epilogue, {ops.args()}, {view}, "
                   f"{need_stats!r}, {need_out!r}, {idx['weight']!r}, {idx['bias']!r}, "
                   f"opts={opts!r})"]


def _fused_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    _, view = _out_view(plan)
    first = "main.view(-1, main.shape[-1])" if plan.param("pad") else "main.view(n_rows, n_cols)"
    funcs, launch = _family_launch(plan, first, view)
    return funcs, _family_body(plan), "\n".join(_frame_lines(plan) + launch + ["return out"])


def _bcast_operands(plan: Plan) -> tuple[Operands, bool]:
    """The operands of an outer-broadcast pointwise plan and whether its main operand must be
    materialised at the result's shape. Each operand the recognizer read as full (one that
    broadcasts to the result) is read as what it is against the result's frame, a per-column,
    per-row, per-channel or single value, where it is one; only an operand that is none of
    them ((B, 1, 1, W) against (B, C, 1, W)) is materialised by torch at the result's shape
    (``_as_bcast``, the main one by ``_frame_lines``); when no operand is a vector the kernel
    walks (full or per column), an unread placeholder of one row's length is."""
    tensors = [lf for lf in plan.leaves if lf.kind in ("full", "col", "row", "rowmap", "scalar")]
    frame = _broadcast_shape([lf.shape for lf in tensors])
    k = plan.param("k", 1)  # rows of the last k dims (recognition's view_dims)
    kinds = {}
    for n in plan.prologue.leaves():
        lf = plan.leaf(n)
        if lf.kind == "full":
            lf = leaf_in_frame(lf, frame, k) if leaf_kind(lf.shape, frame, k) else None
        kinds[n] = lf
    expand_main = kinds.get(plan.main) is None
    walked = any(lf is not None and lf.kind in ("full", "col") for lf in kinds.values())
    ops = Operands()
    if expand_main:
        ops.add(plan.leaf(plan.main), "main.view(n_rows, n_cols)")
    elif not walked:  # every operand one value per row / channel ((B, 1) + (1, C, 1, 1)):
        # the kernel walks the columns of a placeholder it never reads (torch expanding one
        # to the result's shape was a copy kernel judged a library call on the H200)
        ops.vec.append("_empty(n_cols, dtype=torch.float32, device=out.device)")
        ops.full.append(False)
    for n in plan.prologue.leaves():
        lf = kinds[n]
        if lf is None:
            ops.add(plan.leaf(n), f"_as_bcast({source(plan.leaf(n))}, shape, n_rows, n_cols)")
        else:
            ops.add(lf, wrapped(lf))
    return ops, expand_main


def _broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape torch broadcasts ``shapes`` to (they are known to broadcast)."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for d, size in enumerate(padded(tuple(s), nd)):
            if size != 1:
                out[d] = size
    return tuple(out)


def _pointwise_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    ops = _operands(plan, list(plan.prologue.leaves()), (plan.main, "main.view(n_rows, n_cols)"))
    expand_main = True
    if plan.param("bcast"):  # operands broadcast to the result
        ops, expand_main = _bcast_operands(plan)
    funcs = [chain_function("_pointwise", plan.prologue, ops.access,
                            doc="The fused pointwise computation of one row's vector.")]
    body = [render_template("pointwise", {"PW": ""}, {})]
    _, view = _out_view(plan)
    lines = _frame_lines(plan, expand_main) + [f"_pw_launch(_pointwise, {ops.args()}, {view})",
                                               "return out"]
    return funcs, body, "\n".join(lines)


def _split_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """Prologue and epilogue as pointwise kernels around an unfused family kernel."""
    lines = _frame_lines(plan)
    _, view = _out_view(plan)
    funcs: list[str] = []
    src = "main.view(n_rows, n_cols)"
    if not plan.prologue.empty:
        pre = _operands(plan, list(plan.prologue.leaves()), (plan.main, src))
        funcs.append(chain_function("_pre", plan.prologue, pre.access,
                                    doc="The prologue, as a kernel of its own."))
        lines += ["pre = _empty(shape, dtype=main.dtype, device=main.device)",
                  f"_pw_launch(_pre, {pre.args()}, pre.view(n_rows, n_cols))"]
        src = "pre.view(n_rows, n_cols)"
    bare = Plan(plan.family, plan.op, plan.leaves, plan.main, Chain((), f"@{plan.main}"),
                Chain((), "%y"), plan.params, plan.out_dtype, plan.out_shape, plan.forward_args,
                plan.description)
    mid = view
    if not plan.epilogue.empty:
        lines.append(f"mid = _empty(shape, dtype={_DTYPES[plan.out_dtype]}, "
                     "device=main.device)")
        mid = "mid.view(n_rows, n_cols)"
    f2, launch = _family_launch(bare, src, mid)
    funcs += f2
    lines += launch
    if not plan.epilogue.empty:
        post = Operands()
        post.vec.append(mid)
        post.full.append(True)
        for n in plan.epilogue.leaves():
            post.add(plan.leaf(n), wrapped(plan.leaf(n)))
        funcs.append(chain_function("_post", plan.epilogue, post.access, y="v[0]",
                                    doc="The epilogue, as a kernel of its own."))
        lines.append(f"_pw_launch(_post, {post.args()}, {view})")
    lines.append("return out")
    body = [render_template("pointwise", {"PW": "pw_"}, {}), *_family_body(plan)]
    return funcs, body, "\n".join(lines)
