"""Rendering of the ``pool`` family (``templates/pool.py.tmpl``, class ``PoolKernel``): the
forward views x as (planes, *spatial), computes the output sizes as torch does and launches
one thread per group of consecutive outputs (reading each window row's span once, in vector
accesses where the row length allows)."""

from __future__ import annotations

import math

from cutegen.codegen.families.operands import Operands, source
from cutegen.codegen.families.plan import Leaf, Plan
from cutegen.codegen.families.pointwise import chain_function
from cutegen.codegen.families.template import render_template

_DTYPES = {"float32": "torch.float32", "bfloat16": "torch.bfloat16",
           "float16": "torch.float16"}
#: The pool kernel's knobs: threads per CTA; ``pool_outs``: consecutive outputs a thread
#: computes (0: the fewest for aligned span reads); ``vec_bits``: the widest span access;
#: ``pool_stage``: the input staged column by column through shared memory (PoolStagedKernel:
#: coalesced loads whatever the stride; "auto": where the thread-per-outputs kernel's lanes
#: would read 64 bytes apart or more, e.g. windows at stride 11).
POOL_KNOBS = ({"threads": 256, "pool_outs": 0, "vec_bits": 128, "pool_stage": "auto"},
              {"threads": [128, 256, 512], "pool_outs": [0, 1, 2, 4, 8],
               "vec_bits": [32, 64, 128], "pool_stage": ["auto", True, False]})


def staged_by_default(plan: Plan) -> bool:
    """Whether a pool plan's candidate stages its input through shared memory at the task's
    main shape with the default knobs ("auto": the thread-per-outputs kernel's lanes would
    read 64 bytes apart or more), as the template's ``_pool_staged`` decides it, taking the
    widest access the row length allows (the host also needs aligned pointers)."""
    lf = plan.leaf(plan.main)
    if not lf.shape:
        return False
    esize = {"float32": 4, "bfloat16": 2, "float16": 2}.get(lf.dtype, 4)
    width, stride = int(lf.shape[-1]), int(tuple(plan.param("stride"))[-1])
    vec = max(1, 128 // (8 * esize))
    while vec > 1 and width % vec:
        vec //= 2
    ow = vec // math.gcd(stride, vec)
    k, d, pad = (int(tuple(plan.param(n))[-1]) for n in ("kernel", "dilation", "padding"))
    room = min(4 * int(POOL_KNOBS[0]["threads"]), 8192 // vec) * vec  # _pool_tile's
    return ow * stride * esize >= 64 and (-pad) % vec + d * (k - 1) + 1 <= room


def _wrapped(lf: Leaf) -> str:
    src = source(lf)
    if lf.kind == "full":
        return f"_as_full({src}, shape, 1, main.numel()).view(-1)"
    if lf.kind == "scalar":
        return f"_as_one({src})"
    return src


def pool_parts(plan: Plan) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a pool plan."""
    sp = plan.param("spatial")
    p = {k: tuple(plan.param(k)) for k in ("kernel", "stride", "padding", "dilation")}
    dt = _DTYPES[plan.out_dtype]
    ops = Operands()
    ops.add(plan.leaf(plan.main), "main.view(-1)")
    for n in list(plan.prologue.leaves()) + list(plan.epilogue.leaves()):
        ops.add(plan.leaf(n), _wrapped(plan.leaf(n)))
    funcs = [chain_function("_prologue", plan.prologue, ops.access,
                            doc="The fused prologue: each input element's value."),
             chain_function("_epilogue", plan.epilogue, ops.access, epilogue=True,
                            doc="The fused epilogue, applied to each window's result y.")]
    lines = [f"main = {source(plan.leaf(plan.main))}.contiguous()", "shape = main.shape",
             f"sizes = tuple(shape[-{sp}:])",
             f"outs = _pool_out(sizes, {p['kernel']!r}, {p['stride']!r}, {p['padding']!r}, "
             f"{p['dilation']!r}, {plan.param('ceil_mode')!r})",
             f"out = _empty(tuple(shape[:-{sp}]) + outs, dtype={dt}, device=main.device)",
             "if out.numel() == 0:", "    return out",
             f"_pool_launch(_prologue, _epilogue, [{', '.join(ops.vec)}], "
             f"[{', '.join(ops.rows)}], {ops.kinds()}, [{', '.join(ops.scalars)}], out, sizes, "
             f"{p['kernel']!r}, {p['stride']!r}, {p['padding']!r}, {p['dilation']!r}, "
             f"{plan.param('ceil_mode')!r}, {plan.param('mode')!r}, "
             f"{plan.param('count_include_pad')!r}, {plan.param('divisor')!r})",
             "return out"]
    return funcs, [render_template("pool", {}, {})], "\n".join(lines)
