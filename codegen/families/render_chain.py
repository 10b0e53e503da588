"""Rendering of a ``chain`` plan (:mod:`.chains`): one family kernel per stage, in one file.

Each stage renders as its family does alone (its chain functions, kernel classes and forward
body); the stage's chain functions are renamed ``_k{j}...`` so stages never share a name, the
kernel classes and host helpers of the families are included once, and every stage but the
last runs as a local function whose result (``out``) becomes the next stage's input
``_stage{j}``. TUNABLES are the union of the stages' knobs (the families name theirs apart;
``fast_math`` and ``vec_bits`` mean the same in every family). A pointwise kernel is defined
once: when stages render it under two knob prefixes (a pointwise stage's ``threads``, a
batch norm's ``pw_threads``), the last definition serves both.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

from cutegen.codegen.families.plan import Plan

_DEF = re.compile(r"^def (\w+)\(", re.MULTILINE)


def chain_knobs(plan: Plan, knobs: Callable[[Plan], tuple[dict, dict]]) -> tuple[dict, dict]:
    """The union of the stages' TUNABLES and TUNABLE_CHOICES (``knobs``: one stage's)."""
    values: dict = {}
    choices: dict = {}
    for st in plan.param("stages"):
        v, c = knobs(st)
        for k in v:
            values.setdefault(k, v[k])
            choices.setdefault(k, c[k])
    return values, choices


def chain_parts(plan: Plan, values: dict,
                family_parts: Callable[[Plan], tuple[list[str], list[str], str]]
                ) -> tuple[list[str], list[str], str]:
    """(chain functions, kernel source parts, forward body) of a chain plan
    (``family_parts``: one stage's, from :mod:`.render`, which calls this)."""
    stages = plan.param("stages")
    funcs: list[str] = []
    body: list[str] = []
    seen: set[str] = set()
    lines: list[str] = []
    together = _summed_together(stages)
    for j, st in enumerate(stages):
        f, b, fwd = family_parts(st)
        if j in together:
            fwd = fwd.replace("_row_reduce(SumRow, ", "_sums.reduce(SumRow, ")
            if j - 1 not in together:
                lines.append("_sums = _Sums()")
        names = [n for text in f for n in _DEF.findall(text)]
        for name in names:
            pat = re.compile(rf"\b{re.escape(name)}\b")
            f = [pat.sub(f"_k{j}{name}", text) for text in f]
            fwd = pat.sub(f"_k{j}{name}", fwd)
        funcs += f
        for part in b:
            text = part.strip("\n")
            if text not in seen:
                seen.add(text)
                body.append(text)
        if j + 1 < len(stages):
            # the forward's arguments as parameters: a stage may rebind their names
            args = ", ".join(plan.forward_args)
            lines += [f"def _run_stage{j}({args}):", textwrap.indent(fwd, "    "),
                      f"_stage{j} = _run_stage{j}({args})"]
            if j in together and j + 1 not in together:
                lines.append("_sums.flush()")
        else:
            lines.append(fwd)
    return funcs, body, "\n".join(lines)


def _summable(st: Plan) -> bool:
    """Whether a stage is a plain row sum of a pointwise function of the forward's own
    tensors (no earlier stage's result, no per-row operand, nothing after the sum)."""
    return (st.family == "row" and st.op == "sum" and st.param("layout") == "inner"
            and not st.param("map") and st.epilogue.empty and st.out_shape == "rows"
            and all(lf.kind == "full" and not lf.name.startswith("_stage")
                    for lf in st.leaves if lf.kind != "value"))


def _summed_together(stages: tuple[Plan, ...]) -> set[int]:
    """The stages (not the last) in runs of two or more consecutive summable ones: their sums
    are taken together (``_Sums`` in ``templates/row_reduce.py.tmpl``: one launch reads the
    rows once for all of them, where one pass can take them)."""
    runs: list[list[int]] = [[]]
    for j, st in enumerate(stages[:-1]):
        if _summable(st):
            runs[-1].append(j)
        elif runs[-1]:
            runs.append([])
    return {j for run in runs if len(run) > 1 for j in run}
