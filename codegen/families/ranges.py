"""What a captured forward's values can be, where the ops say (pure).

:func:`value_range` bounds the numbers a node can hold from the ops that bound them (a
minimum or maximum with a constant, a clamp, ReLU-like activations) and is (-inf, inf) for
everything else. NaN is outside the question: every op here passes a NaN through, as the
identity does.

Its one use so far, :func:`settle_dropouts`: a training-mode dropout is random, so a task with
one is refused, except where its input is 0 wherever it is a number. Dropout scales what it
keeps by 1 / (1 - p) and zeroes the rest, so a zero stays a zero and a NaN stays a NaN (NaN
times 0 is NaN): there it is the identity, and the task is deterministic. KernelBench's
``83_Conv3d_GroupNorm_Min_Clamp_Dropout`` is such a task: ``min(x, 0)`` then
``clamp(0, 1)`` leaves only zeros for its dropout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.ops import RANDOM_MARK

Range = tuple[float, float]
ANY: Range = (-math.inf, math.inf)


def _number(nodes: dict[int, Node], tensors: dict[str, int], consts: dict[str, Any],
            key: str) -> float | None:
    """The constant argument ``key`` of a call: a number, or a one-number constant tensor
    (``torch.tensor(0.0, device=x.device)`` in forward); None otherwise."""
    v = consts.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    src = nodes.get(tensors.get(key, -1))
    if src is not None and src.kind == "param" and isinstance(src.value, (int, float)) \
            and not isinstance(src.value, bool):
        return float(src.value)
    return None


def _clamp(r: Range, lo: float | None, hi: float | None) -> Range:
    a, b = r
    if lo is not None:
        a, b = max(a, lo), max(b, lo)
    if hi is not None:
        a, b = min(a, hi), min(b, hi)
    return a, b


def value_range(nodes: Sequence[Node], idx: int) -> Range:
    """(lo, hi) bounding every number node ``idx`` can hold; (-inf, inf) where unknown."""
    by_id = {n.id: n for n in nodes}
    memo: dict[int, Range] = {}

    def rng(i: int) -> Range:
        if i in memo:
            return memo[i]
        n = by_id.get(i)
        out = ANY
        if n is not None and n.kind == "param" and isinstance(n.value, (int, float)) \
                and not isinstance(n.value, bool):
            out = (float(n.value), float(n.value))
        elif n is not None and n.kind == "call" and "input" in n.tensors:
            x = rng(n.tensors["input"])
            op, t, c = n.op, n.tensors, n.consts
            if op in ("minimum", "min", "maximum", "max") and "dim" not in c and (
                    other := _number(by_id, t, c, "other")) is not None:
                low = op in ("minimum", "min")
                out = _clamp(x, None if low else other, other if low else None)
            elif op == "clamp":
                out = _clamp(x, _number(by_id, t, c, "min"), _number(by_id, t, c, "max"))
            elif op == "relu":
                out = _clamp(x, 0.0, None)
            elif op == "relu6":
                out = _clamp(x, 0.0, 6.0)
            elif op == "hardtanh":
                lo, hi = _number(by_id, t, c, "min_val"), _number(by_id, t, c, "max_val")
                out = _clamp(x, -1.0 if lo is None else lo, 1.0 if hi is None else hi)
            elif op == "identity":
                out = x
        memo[i] = out
        return out

    return rng(idx)


def settle_dropouts(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """The nodes with every training-mode dropout whose input is 0 wherever it is a number
    made the identity (see the module docstring); the others are left as they are (refused
    by recognition as random)."""
    out: list[Node] = []
    for n in nodes:
        if n.kind == "call" and n.op == "?" and RANDOM_MARK in n.target \
                and "input" in n.tensors and value_range(out, n.tensors["input"]) == (0.0, 0.0):
            n = replace(n, op="identity", tensors={"input": n.tensors["input"]}, consts={},
                        target=n.target.split(" in training mode")[0]
                        + " of an input that is 0 wherever it is a number: the identity")
        out.append(n)
    return tuple(out)
