"""Rendering of the ``strided`` family: reductions over a middle run of dims (and the norms
mapped back over them), in :class:`StridedKernel` (``templates/strided.py.tmpl``, one
subclass per op in ``strided_<op>.py.tmpl``).

The forward views x as (B, R, C) from the plan's dim groups (sizes read at run time, so
hidden shapes reuse the file) and launches ``_strided_launch``. A ``two_stage`` plan (a
trailing reduced run as well, e.g. dims (0, 2, 3) of (N, C, H, W)) first reduces each row of
the trailing run with the row family into fp32 partials (the prologue runs there), then
runs the strided kernel over those (the epilogue runs there).
"""

from __future__ import annotations

from cutegen.codegen.families.operands import Operands, source
from cutegen.codegen.families.plan import Leaf, Plan
from cutegen.codegen.families.pointwise import chain_function
from cutegen.codegen.families.reductions import runs, strided_groups
from cutegen.codegen.families.rowops import ROW_OPS, STRIDED_OPS
from cutegen.codegen.families.template import render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16", "int64": "torch.int64"}
#: The strided kernel's knobs (TUNABLES, TUNABLE_CHOICES); ``strategy``: "auto" (cut R into
#: slices when the columns leave the GPU short of CTAs; a map keeps a thread's rows in
#: registers when they fit), "no_split" (never cut R), "reload" (a map reads x twice). A plan
#: that may fold (:func:`foldable`) adds ``s_fold``: "auto" (fold rows of R where C is too
#: narrow for full-width accesses) or "off".
STRIDED_KNOBS = ({"strategy": "auto", "s_cols": 32, "s_threads": 256, "s_unroll": 4,
                  "keep_vals": 64, "vec_bits": 128},
                 {"strategy": ["auto", "no_split", "reload"], "s_cols": [8, 16, 32, 64],
                  "s_threads": [128, 256, 512], "s_unroll": [1, 2, 4, 8],
                  "keep_vals": [32, 64, 128], "vec_bits": [32, 64, 128]})
#: A strided map's threads a CTA (its default ``s_threads``).
MAP_THREADS = 128
#: The row kernel's knobs a two_stage plan adds (its first pass over the trailing run).
ROW_STAGE_KNOBS = ({"vals_per_thread": 32, "cta_threads": 128, "max_cta_threads": 512,
                    "cluster_max": 8, "unroll": 1},
                   {"vals_per_thread": [8, 16, 32, 64], "cta_threads": [64, 128, 256],
                    "max_cta_threads": [256, 512, 1024], "cluster_max": [1, 2, 4, 8],
                    "unroll": [1, 2, 4]})


#: Reductions whose results over parts of R merge into the whole: op -> the op of the
#: second pass of a folded plan (a mean's parts are its sums divided by the whole count).
FOLDS = {"sum": "sum", "mean": "sum", "amax": "amax", "amin": "amin"}
#: Reductions whose statistics hold an index along R: a folded plan reads x as the first
#: pass of FOLDS does, and StridedFinish merges each column's statistics, each index r' of
#: the folded rows made fold * r' + q first (one launch and the finish). Knob ``s_fold`` off
#: by default: not yet run on a GPU (KernelBench L1 51, 52).
ARG_FOLDS = frozenset({"argmax", "argmin"})


def foldable(plan: Plan) -> bool:
    """Whether a strided plan may fold rows of R into one row of a first pass (``_fold_rows``
    in ``strided_fold.py.tmpl``): a one-stage reduction in :data:`FOLDS` whose prologue
    reads x and values alone and whose epilogue reads per-column operands and values (the
    first pass sees a (B, R / f, f * C) view, the second one the (B, f, C) partials)."""
    if (plan.family != "strided" or plan.op not in FOLDS.keys() | ARG_FOLDS
            or plan.param("map") or plan.param("layout") == "two_stage"):
        return False
    pro = [plan.leaf(n) for n in plan.prologue.leaves() if n != plan.main]
    epi = [plan.leaf(n) for n in plan.epilogue.leaves() if n != plan.main]
    # (StridedFinish, which merges an index's statistics, passes its epilogue no columns)
    cols = ("scalar", "value") if plan.op in ARG_FOLDS else ("col", "scalar", "value")
    return (all(lf.kind in ("scalar", "value") for lf in pro)
            and all(lf.kind in cols for lf in epi))


def strided_knobs(plan: Plan) -> tuple[dict, dict]:
    """Default TUNABLES and TUNABLE_CHOICES of a strided plan's file."""
    values, choices = (dict(d) for d in STRIDED_KNOBS)
    if foldable(plan):
        values["s_fold"] = "off" if plan.op in ARG_FOLDS else "auto"
        choices["s_fold"] = ["auto", "off"]
    if not plan.param("map"):
        del values["keep_vals"], choices["keep_vals"]
        choices["strategy"] = ["auto", "no_split"]
    else:  # a map keeps a thread's rows in registers (~90 of them): 128-thread CTAs fit
        # more to an SM; rmsnorm_channels_bf16 took 372 us at 128, 410 at 256 and 685 at 1024
        # threads on an H100 (96 % of its copy bandwidth at 128), the fp32 maps the same at
        # 128 and 256 (2026-12-05)
        values["s_threads"] = MAP_THREADS
    if plan.param("layout") == "two_stage":
        values.update(ROW_STAGE_KNOBS[0])
        choices.update(ROW_STAGE_KNOBS[1])
    return values, choices


def _prod(dims: tuple[int, ...]) -> str:
    return "math.prod(shape[d] for d in " + repr(tuple(dims)) + ")" if dims else "1"


def _strided_wrapped(lf: Leaf) -> str:
    """The forward expression giving leaf ``lf`` in the strided kernel's (B, R, C) frame."""
    src = source(lf)
    return {"full": f"_as_full({src}, shape, B * R, C).view(B, R, C)",
            "col": f"_as_cols({src}, C)", "row": f"_as_rows({src}, R)",
            "scalar": f"_as_one({src})"}.get(lf.kind, src)


def _inner_wrapped(lf: Leaf) -> str:
    """The forward expression giving leaf ``lf`` in the first (row) pass's (rows, N) frame."""
    src = source(lf)
    return {"full": f"_as_full({src}, shape, n_rows, n_cols)",
            "col": f"_as_cols({src}, n_cols)", "row": f"_as_rows({src}, n_rows)",
            "scalar": f"_as_one({src})"}.get(lf.kind, src)


def _needs(ops: Operands, first: list[str], second: list[str]) -> tuple[tuple, tuple]:
    vec_of = lambda names: {ops.access[n] for n in names if ops.access[n].startswith("v")}  # noqa: E731
    a = vec_of(first)
    b = a | vec_of(second)
    return (tuple(i == 0 or f"v[{i}]" in a for i in range(len(ops.vec))),
            tuple(i == 0 or f"v[{i}]" in b for i in range(len(ops.vec))))


def _kinds(ops: Operands) -> tuple[str, ...]:
    return tuple("full" if f else "col" for f in ops.full)


def strided_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a strided plan."""
    dims = tuple(plan.param("dims"))
    nd = len(plan.leaf(plan.main).shape)
    two = plan.param("layout") == "two_stage"
    b_dims, r_dims, c_dims = strided_groups(nd, dims)
    spec = STRIDED_OPS[plan.op]
    keep = bool(plan.param("keepdim"))
    dt = _DTYPES[plan.out_dtype]
    lines = [f"main = {source(plan.leaf(plan.main))}.contiguous()", "shape = main.shape",
             f"B, R, C = {_prod(b_dims)}, {_prod(r_dims)}, {_prod(c_dims)}"]
    if plan.param("map"):
        lines += [f"out = _empty(shape, dtype={dt}, device=main.device)"]
        view = "out.view(B, R, C)"
    else:
        lines += [f"out = _empty(_reduced(shape, {dims!r}, {keep}), dtype={dt}, "
                  "device=main.device)"]
        view = "out.view(B, C)"
    lines += ["if out.numel() == 0:", "    return out"]
    opts = spec.opts(plan)
    count = "R"
    body = [render_template("strided", {}, {})] + [render_template(p, {}, {}) for p in spec.parts]
    funcs: list[str] = []
    if two:
        r2 = runs(nd, dims)[-1][1]
        count = f"R * {_prod(r2)}"
        lines += [f"n_cols = {_prod(r2)}", "n_rows = main.numel() // max(n_cols, 1)"]
        inner = Operands()
        inner.add(plan.leaf(plan.main), "main.view(n_rows, n_cols)")
        for n in plan.prologue.leaves():
            inner.add(plan.leaf(n), _inner_wrapped(plan.leaf(n)))
        need, _ = _needs(inner, list(plan.prologue.leaves()), [])
        outer = Operands()
        outer.vec.append("part.view(B, R, C)")
        outer.full.append(True)
        for n in plan.epilogue.leaves():
            outer.add(plan.leaf(n), _strided_wrapped(plan.leaf(n)))
        row = ROW_OPS[plan.op]
        raw = tuple(kv for kv in row.opts(plan) if kv[0] not in ("mean", "count"))
        funcs += [chain_function("_prologue", plan.prologue, inner.access,
                                 doc="The fused prologue, in the first (row) pass."),
                  chain_function("_epilogue", plan.epilogue, outer.access, epilogue=True,
                                 doc="The fused epilogue, in the strided pass.")]
        lines += ["part = _empty(n_rows, dtype=torch.float32, device=main.device)",
                  f"_row_reduce({row.cls}, _prologue, _ident_epi, {inner.args()}, part, "
                  f"{need!r}, opts={raw!r})",
                  f"_strided_launch({spec.cls}, _ident_pro, _epilogue, [{', '.join(outer.vec)}], "
                  f"{_kinds(outer)!r}, [{', '.join(outer.rows)}], {outer.kinds()}, "
                  f"[{', '.join(outer.scalars)}], {view}, (True,), (True,), "
                  f"opts={opts!r} + ((\"count\", {count}),))", "return out"]
        body = [render_template("row", {}, {})] + [render_template(p, {}, {}) for p in row.parts] \
            + [render_template("row_reduce", {}, {})] + body
        return funcs, body, "\n".join(lines)
    ops = Operands()
    ops.add(plan.leaf(plan.main), "main.view(B, R, C)")
    for n in list(plan.prologue.leaves()) + list(plan.epilogue.leaves()):
        ops.add(plan.leaf(n), _strided_wrapped(plan.leaf(n)))
    need_stats, need_out = _needs(ops, list(plan.prologue.leaves()), list(plan.epilogue.leaves()))
    funcs += [chain_function("_prologue", plan.prologue, ops.access,
                             doc="The fused prologue: the value the kernel's op consumes."),
              chain_function("_epilogue", plan.epilogue, ops.access, epilogue=True,
                             doc="The fused epilogue, applied to the op's result y.")]
    rows = f"[{', '.join(ops.rows)}], {ops.kinds()}, [{', '.join(ops.scalars)}]"
    launch = (f"_strided_launch({spec.cls}, _prologue, _epilogue, [{', '.join(ops.vec)}], "
              f"{_kinds(ops)!r}, {rows}, {view}, {need_stats!r}, {need_out!r}, "
              f"opts={opts!r} + ((\"count\", {count}),))")
    if not foldable(plan):
        lines += [launch, "return out"]
        return funcs, body, "\n".join(lines)
    # rows of R folded into the first pass's rows where C is too narrow for wide accesses
    body.append(render_template("strided_fold", {}, {}))
    lines += ["f = _fold_rows(B, R, C, main)", "if f == 1:", f"    {launch}", "    return out"]
    if plan.op in ARG_FOLDS:
        lines += [f"_strided_launch({spec.cls}, _prologue, _epilogue, "
                  f"[main.view(B, R // f, f * C)], ('full',), {rows}, {view}, (True,), (True,), "
                  f"opts={opts!r} + ((\"count\", R), (\"fold\", f)))", "return out"]
        return funcs, body, "\n".join(lines)
    second = STRIDED_OPS[FOLDS[plan.op]]
    lines += ["part = _empty((B, f * C), dtype=torch.float32, device=main.device)",
              f"_strided_launch({spec.cls}, _prologue, _ident_epi, [main.view(B, R // f, f * C)], "
              f"('full',), {rows}, part, (True,), (True,), opts={opts!r} + ((\"count\", R),))",
              f"_strided_launch({second.cls}, _ident_pro, _epilogue, "
              f"[{', '.join(['part.view(B, f, C)'] + ops.vec[1:])}], {_kinds(ops)!r}, {rows}, "
              f"{view}, {need_stats!r}, {need_out!r}, "
              f"opts={second.opts(plan)!r} + ((\"count\", f),))",
              "return out"]
    return funcs, body, "\n".join(lines)
