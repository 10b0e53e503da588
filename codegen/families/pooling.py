"""Recognition of the ``pool`` family: max / average pooling over the last 1, 2 or 3 dims of an
(N, C, *spatial) (or (C, *spatial)) tensor, as ``nn.MaxPoolNd`` / ``nn.AvgPoolNd`` /
``F.max_poolNd`` / ``F.avg_poolNd`` define them: kernel size, stride (default: the kernel
size), padding, dilation (max), ceil mode, count_include_pad and divisor_override (average).
Pointwise ops before the pool (on the input's elements) and after it (on each window's
result) are fused. Indices (``return_indices``) are not computed. Adaptive pooling to size 1
is lowered to a mean / amax (:mod:`.lower`).
"""

from __future__ import annotations

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError, padded
from cutegen.codegen.families.plan import Plan


def _tuple(v: object, n: int, what: str, op: str) -> tuple[int, ...]:
    vals = v if isinstance(v, list) else [v] * n
    if len(vals) == 1 and n > 1:
        vals = vals * n
    if len(vals) != n or not all(isinstance(x, int) and not isinstance(x, bool) for x in vals):
        raise NotCoveredError(f"{op} with {what}={v!r}", op)
    return tuple(int(x) for x in vals)


def _full_or_scalar(shape: tuple[int, ...], frame: tuple[int, ...]) -> str | None:
    s = padded(shape, len(frame))
    if s == tuple(frame):
        return "full"
    if all(d == 1 for d in s):
        return "scalar"
    return None


def pool_plan(m: Matcher, calls: set[int], out: Node, a: Node) -> Plan:
    """The plan of a pooling anchor (see the module docstring).

    Raises:
        NotCoveredError: a form the pool family does not compute.
    """
    op = a.op
    mode, sp = op.split("_")[0], int(op[-2])
    x = m.anchor_input(a)
    x_id = x.id
    frame, nd = tuple(x.shape), len(x.shape)
    if x.dtype not in FLOATS:
        raise NotCoveredError(f"{op} of a {x.dtype} tensor", x.dtype)
    if nd not in (sp + 1, sp + 2):
        raise NotCoveredError(f"{op} of a {nd}-d tensor", op)
    c = a.consts
    if c.get("return_indices"):
        raise NotCoveredError(f"{op} with return_indices=True (the indices)", op)
    kernel = _tuple(c.get("kernel_size"), sp, "kernel_size", op)
    stride = _tuple(c.get("stride") if c.get("stride") not in (None, []) else list(kernel), sp,
                    "stride", op)
    padding = _tuple(c.get("padding", 0), sp, "padding", op)
    dilation = _tuple(c.get("dilation", 1) if mode == "max" else 1, sp, "dilation", op)
    if any(p * 2 > k for p, k in zip(padding, kernel, strict=True)) or min(stride) < 1:
        raise NotCoveredError(f"{op} with padding {padding} for kernel {kernel}", op)
    divisor = c.get("divisor_override") if mode == "avg" else None
    if divisor is not None and (not isinstance(divisor, int) or divisor == 0):
        raise NotCoveredError(f"{op} with divisor_override={divisor!r}", op)
    params: dict[str, object] = {
        "mode": mode, "spatial": sp, "kernel": kernel, "stride": stride, "padding": padding,
        "dilation": dilation, "ceil_mode": bool(c.get("ceil_mode") or False),
        "count_include_pad": bool(c.get("count_include_pad", True)) if mode == "avg" else False,
        "divisor": int(divisor) if divisor is not None else 0,
    }
    m.classify = lambda shape, fr, k: _full_or_scalar(shape, frame)
    pro_ids = m.ancestors(x_id) & calls
    prologue = m.chain(pro_ids, x_id, frame, 1, {}, exact=mode == "max")
    m.classify = lambda shape, fr, k: _full_or_scalar(shape, tuple(out.shape)) if _full_or_scalar(
        shape, tuple(out.shape)) == "scalar" else None
    epilogue = m.chain(calls - pro_ids - {a.id}, out.id, tuple(out.shape), 1, {a.id: "%y"})
    main = m.main_leaf(prologue, x, op)
    if out.dtype not in FLOATS:
        raise NotCoveredError(f"a result of dtype {out.dtype}", out.dtype)
    desc = (f"{op} (kernel {kernel}, stride {stride}, padding {padding}"
            + (f", dilation {dilation}" if mode == "max" and max(dilation) > 1 else "")
            + (", ceil mode" if params["ceil_mode"] else "") + f") of "
            f"{'x'.join(map(str, frame))} {x.dtype}")
    if not prologue.empty:
        desc += f"; prologue: {prologue.describe()}"
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    return Plan("pool", f"{mode}_pool", tuple(m.leaves.values()), main, prologue, epilogue,
                tuple(sorted(params.items())), out.dtype, "pooled", m.cap.forward_args, desc)
