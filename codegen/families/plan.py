"""What recognition produces: a :class:`Plan` (one fused kernel family instance) or a
:class:`NotCovered` explanation. Plain frozen data; the renderers turn a Plan into source.

Vocabulary:

* a **leaf** is a value a kernel reads: a forward argument, a parameter or buffer, a module
  attribute (a Python number read at run time) or a constant. A tensor leaf has a *kind*
  relative to the kernel's 2-D view (rows, N): ``full`` (same shape as the view), ``col``
  (one value per column, broadcast over the rows, like a bias), ``row`` (one value per row)
  or ``scalar`` (one value);
* a **chain** is a DAG of pointwise ops in SSA form over leaves (and, in an epilogue, over
  ``%y``, the value the family's op produced, and ``%in``, the value it consumed);
* a **plan** is a family (pointwise, row, scan), its op and parameters, the prologue chain
  that feeds the op and the epilogue chain applied to its result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Leaf kinds (tensor leaves) and "value" (a Python number: constant or module attribute).
LEAF_KINDS = ("full", "col", "row", "rowmap", "table", "scalar", "value")


@dataclass(frozen=True, slots=True)
class Leaf:
    """A value a kernel reads.

    Attributes:
        name: the reference chains use ("x", "weight", "attr_scale", "c0").
        source: "input" (forward argument), "param" (parameter or buffer, by attribute
            path), "attr" (a number attribute of the model, read at run time), "const", or
            "stage" (a tensor an earlier kernel of the same forward wrote; ``ref`` is the
            forward expression).
        ref: the argument name, attribute path ("ln.weight", "scale") or the constant's repr.
        kind: one of :data:`LEAF_KINDS`.
        dtype: torch dtype name of a tensor leaf ("bfloat16"); "" for values.
        shape: the tensor's shape on the task's main inputs.
        rowmap: for kind "rowmap" (one value per index of some of the row dims: a per-channel
            or per-batch operand), (first, last, lead): it spans dims first .. last - 1 of
            the frame's ``lead`` row dims.
        view: how ``shape`` is read from the tensor the model holds, where the forward reads
            it through a view that only adds or drops size-1 dims (``x.unsqueeze(1)``, a
            squeeze): per dim of ``shape``, the index of the tensor's dim it is, or -1 for a
            size-1 dim the view adds (:func:`unit_view`); empty: the tensor as it is.
    """

    name: str
    source: str
    ref: str
    kind: str
    dtype: str = ""
    shape: tuple[int, ...] = ()
    rowmap: tuple[int, ...] = ()
    view: tuple[int, ...] = ()


def unit_view(held: tuple[int, ...], read: tuple[int, ...]) -> tuple[int, ...] | None:
    """How a view that only adds or drops size-1 dims reads shape ``read`` from a tensor of
    shape ``held`` (see :attr:`Leaf.view`): () where the shapes are the same, None where the
    view does more than add or drop size-1 dims. Dims of equal size are matched in order, so
    a dim of size 1 on both sides stays the tensor's own (it may be larger on other inputs)."""
    if tuple(held) == tuple(read):
        return ()
    out: list[int] = []
    i = 0
    for d in read:
        while i < len(held) and held[i] != d and held[i] == 1:
            i += 1  # a size-1 dim the view drops
        if i < len(held) and held[i] == d:
            out.append(i)
            i += 1
        elif d == 1:
            out.append(-1)  # a size-1 dim the view adds
        else:
            return None
    if any(h != 1 for h in held[i:]):
        return None
    return tuple(out)


@dataclass(frozen=True, slots=True)
class PwNode:
    """One pointwise op: ``%<id> = op(args..., **params)``.

    ``args`` are references: ``%<id>`` (an earlier node), ``@<leaf name>``, ``%y`` / ``%in``
    (epilogues: the family op's result / input), or a number literal.
    """

    id: int
    op: str
    args: tuple[str, ...]
    params: tuple[tuple[str, Any], ...] = ()

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)


@dataclass(frozen=True, slots=True)
class Chain:
    """Pointwise ops in topological order and the reference of the chain's value."""

    nodes: tuple[PwNode, ...]
    result: str

    @property
    def empty(self) -> bool:
        return not self.nodes

    def leaves(self) -> tuple[str, ...]:
        """Leaf names the chain reads, in first-use order."""
        out: list[str] = []
        for n in self.nodes:
            for a in n.args:
                if a.startswith("@") and a[1:] not in out:
                    out.append(a[1:])
        if self.result.startswith("@") and self.result[1:] not in out:
            out.append(self.result[1:])
        return tuple(out)

    def describe(self) -> str:
        return ", ".join(n.op for n in self.nodes) or "-"


@dataclass(frozen=True, slots=True)
class Plan:
    """One fused kernel: a family instance with its prologue and epilogue.

    Attributes:
        family: "pointwise", "row" or "scan".
        op: the family's op ("softmax", "cumsum", ... "pointwise").
        leaves: every leaf any part reads.
        main: the leaf giving the kernel's (rows, N) view (the op's input tensor).
        prologue: the chain computing the op's input (pointwise: the whole computation).
        epilogue: the chain applied to the op's result (``%y``).
        params: op parameters: eps, weight / bias / target (leaf names), ignore_index,
            reduction, keepdim, reverse, exclusive, approximate ...
        out_dtype: torch dtype name of the output.
        out_shape: "same" (the main input's shape), "rows" (one value per row; ``keepdim``
            in params), "scalar" (a 0-d tensor) or "broadcast" (pointwise: the broadcast
            shape of the full leaves).
        forward_args: the forward's argument names, in order.
        description: one line for people ("softmax(x * c + @bias) -> relu").
    """

    family: str
    op: str
    leaves: tuple[Leaf, ...]
    main: str
    prologue: Chain
    epilogue: Chain
    params: tuple[tuple[str, Any], ...] = ()
    out_dtype: str = "float32"
    out_shape: str = "same"
    forward_args: tuple[str, ...] = ()
    description: str = ""

    def param(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    def leaf(self, name: str) -> Leaf:
        for lf in self.leaves:
            if lf.name == name:
                return lf
        raise KeyError(name)

    @property
    def has_pointwise(self) -> bool:
        """True when a prologue or epilogue op is fused into the family's kernel."""
        return self.family != "pointwise" and not (self.prologue.empty and self.epilogue.empty)


@dataclass(frozen=True, slots=True)
class NotCovered:
    """Why no family covers a task, for the user: the op that is missing and what to do."""

    reason: str
    op: str = ""
    suggestion: str = ("use --rewriter llm or --rewriter mixed (an LLM writes the kernel), or "
                       "pass --seed-candidate FILE")

    @property
    def message(self) -> str:
        return f"no built-in kernel family covers this task: {self.reason}; {self.suggestion}"


@dataclass(frozen=True, slots=True)
class Recognition:
    """The result of recognising a task: plans (best first) or why there are none."""

    plans: tuple[Plan, ...] = ()
    not_covered: NotCovered | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def covered(self) -> bool:
        return bool(self.plans)


def params_dict(p: Plan | PwNode) -> Mapping[str, Any]:
    return dict(p.params)
