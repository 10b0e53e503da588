"""The row family's ops: which kernel class computes each, from which template parts, with
which options.

The row kernel (``templates/row.py.tmpl``, class ``RowKernel``) is one shared body: loads,
masking, the per-thread / warp / CTA / cluster merge of statistics, the chunk loop and the
stores. Each op is a subclass in a template of its own (``templates/row_<name>.py.tmpl``) that
supplies its statistics' identity and merge, a chunk's partial statistics, and what is
written (a normalised row, or one value per row), as quack shapes its reductions
(``ReductionBase`` and one class per op). Adding an op is one template and one entry of
:data:`ROW_OPS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cutegen.codegen.families.plan import Plan


@dataclass(frozen=True, slots=True)
class RowOp:
    """How the row family computes one op.

    Attributes:
        cls: the kernel class the candidate defines and launches ("SoftmaxRow").
        parts: the templates defining it, in order, after ``row`` (shared helpers first).
        writes_row: the op always writes a row (softmax, norms); otherwise it is a reduction,
            writing one value per row unless the plan maps it back over its row.
        opts: the kernel's options from the plan, as (name, value) pairs (compile-time).
    """

    cls: str
    parts: tuple[str, ...]
    writes_row: bool = False
    opts: Callable[[Plan], tuple[tuple[str, object], ...]] = lambda plan: ()


def _eps(plan: Plan) -> tuple[tuple[str, object], ...]:
    return (("eps", float(plan.param("eps", 0.0))),)


def _var(std: bool) -> Callable[[Plan], tuple[tuple[str, object], ...]]:
    return lambda p: (("correction", float(p.param("correction", 1.0))), ("std", std))


#: Canonical row op -> how it is computed.
ROW_OPS: dict[str, RowOp] = {
    "softmax": RowOp("SoftmaxRow", ("row_lse", "row_softmax"), writes_row=True),
    "log_softmax": RowOp("LogSoftmaxRow", ("row_lse", "row_log_softmax"), writes_row=True),
    "cross_entropy": RowOp("CrossEntropyRow", ("row_lse", "row_cross_entropy"),
                           opts=lambda p: (("ignore_index", int(p.param("ignore_index", -100))),)),
    "layer_norm": RowOp("LayerNormRow", ("row_welford", "row_layer_norm"), writes_row=True,
                        opts=_eps),
    "rms_norm": RowOp("RMSNormRow", ("row_rms_norm",), writes_row=True, opts=_eps),
    "sum": RowOp("SumRow", ("row_sum",)),
    "mean": RowOp("SumRow", ("row_sum",), opts=lambda p: (("mean", True),)),
    "amax": RowOp("ExtremeRow", ("row_extreme",), opts=lambda p: (("largest", True),)),
    "amin": RowOp("ExtremeRow", ("row_extreme",), opts=lambda p: (("largest", False),)),
    "argmax": RowOp("ArgRow", ("row_arg",), opts=lambda p: (("largest", True),)),
    "argmin": RowOp("ArgRow", ("row_arg",), opts=lambda p: (("largest", False),)),
    "prod": RowOp("ProdRow", ("row_prod",)),
    "logsumexp": RowOp("LogSumExpRow", ("row_lse", "row_logsumexp")),
    "group_norm": RowOp("GroupNormRow", ("row_welford", "row_group_norm"), writes_row=True),
    "var": RowOp("VarRow", ("row_welford", "row_var"), opts=_var(False)),
    "std": RowOp("VarRow", ("row_welford", "row_var"), opts=_var(True)),
}
#: The strided family's ops (reductions over the middle dim of (B, R, C)): op -> (kernel
#: class, template parts after ``strided``, options). Its mean's ``count`` is added at run
#: time (the elements each output value reduces).
STRIDED_OPS: dict[str, RowOp] = {
    "sum": RowOp("SumStrided", ("strided_sum",)),
    "mean": RowOp("SumStrided", ("strided_sum",), opts=lambda p: (("mean", True),)),
    "amax": RowOp("ExtremeStrided", ("strided_extreme",), opts=lambda p: (("largest", True),)),
    "amin": RowOp("ExtremeStrided", ("strided_extreme",), opts=lambda p: (("largest", False),)),
    "argmax": RowOp("ArgStrided", ("strided_arg",), opts=lambda p: (("largest", True),)),
    "argmin": RowOp("ArgStrided", ("strided_arg",), opts=lambda p: (("largest", False),)),
    "prod": RowOp("ProdStrided", ("strided_prod",)),
    "var": RowOp("VarStrided", ("strided_var",), opts=_var(False)),
    "std": RowOp("VarStrided", ("strided_var",), opts=_var(True)),
    "logsumexp": RowOp("LogSumExpStrided", ("row_lse", "strided_lse")),
}
#: Row ops that write a full row (the others write one value per row).
WRITES_ROW = frozenset(op for op, spec in ROW_OPS.items() if spec.writes_row)


def row_op(op: str) -> RowOp:
    """The row family's spec of ``op``.

    Raises:
        KeyError: the row family has no such op (a recognition bug).
    """
    try:
        return ROW_OPS[op]
    except KeyError:
        raise KeyError(f"the row family has no op {op!r}") from None
