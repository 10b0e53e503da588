"""How a rendered candidate passes a plan's leaves to its kernels (shared by the renderers).

A kernel launch takes its operands in three lists: ``v`` (tensors per element or per column,
with a parallel tuple saying which are full), ``r`` (tensors with one value per row or one
value in all, with a tuple saying which are per row) and ``s`` (Python numbers read at run
time). :class:`Operands` collects them in first-use order and records, for each leaf, the
expression a chain function reads it by (``v[0]``, ``r[1]``, ``s[0]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cutegen.codegen.families.plan import Leaf


@dataclass
class Operands:
    """The operand lists of one kernel launch and how its chain functions read them."""

    vec: list[str] = field(default_factory=list)
    full: list[bool] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    row_kinds: list[str] = field(default_factory=list)  # source: True / False / (div, mod)
    scalars: list[str] = field(default_factory=list)
    access: dict[str, str] = field(default_factory=dict)

    def add(self, lf: Leaf, expr: str) -> None:
        """Pass leaf ``lf`` as the forward expression ``expr`` (once; later adds are no-ops)."""
        if lf.name in self.access:
            return
        if lf.kind in ("full", "col"):
            self.access[lf.name] = f"v[{len(self.vec)}]"
            self.vec.append(expr)
            self.full.append(lf.kind == "full")
        elif lf.kind in ("row", "scalar", "rowmap", "table"):
            self.access[lf.name] = f"r[{len(self.rows)}]"
            self.rows.append(expr)
            self.row_kinds.append(row_kind(lf))
        else:
            self.access[lf.name] = f"s[{len(self.scalars)}]"
            self.scalars.append(expr)

    def kinds(self) -> str:
        """The row operands' kinds as a tuple's source (see ``_row_at`` in the head)."""
        return "(" + ", ".join(self.row_kinds) + ("," if len(self.row_kinds) == 1 else "") + ")"

    def args(self) -> str:
        """The five launch arguments as source: vec, full, rows, row_kinds, scalars."""
        return (f"[{', '.join(self.vec)}], {tuple(self.full)!r}, [{', '.join(self.rows)}], "
                f"{self.kinds()}, [{', '.join(self.scalars)}]")


def row_kind(lf: Leaf) -> str:
    """How a row operand is indexed, as source: ``True`` (per row), ``False`` (one value),
    or ``_rowmap(...)`` (per channel / batch: computed from the frame's shape at run time)."""
    if lf.kind == "rowmap":
        first, last, lead = lf.rowmap
        return f"_rowmap(shape, {lead}, ({first}, {last - 1}))"
    return "True" if lf.kind == "row" else "False"


def attr_path(path: str) -> str:
    """``self.<path>`` as an expression, also for submodules whose names are not identifiers
    (``features.0.weight`` of an ``nn.Sequential`` -> ``getattr(self.features, '0').weight``;
    ``self.features.0.weight`` does not parse)."""
    expr = "self"
    for part in path.split("."):
        expr = f"{expr}.{part}" if part.isidentifier() else f"getattr({expr}, {part!r})"
    return expr


def source(lf: Leaf) -> str:
    """The forward expression reading leaf ``lf`` as the model holds it, through the view
    the forward reads it with (:attr:`Leaf.view`)."""
    if lf.source in ("input", "param"):
        held = lf.ref if lf.source == "input" else attr_path(lf.ref)
        expr = held if lf.source == "input" else f"{held}.detach()"
        if lf.view:
            dims = ", ".join("1" if i < 0 else f"{held}.shape[{i}]" for i in lf.view)
            expr += f".view({dims}{',' if len(lf.view) == 1 else ''})"
        return expr
    if lf.source == "const":
        return f"float({lf.ref})"
    if lf.source == "stage":  # a tensor an earlier kernel of the same forward wrote
        return lf.ref
    return f"float({attr_path(lf.ref)})"


def wrapped(lf: Leaf, shape: str = "shape") -> str:
    """The forward expression giving leaf ``lf`` in the kernel's (n_rows, n_cols) layout;
    ``shape`` names the forward variable holding the full operand's shape."""
    src = source(lf)
    if lf.kind == "rowmap":
        first, last, _ = lf.rowmap
        return f"_as_rows({src}, math.prod({shape}[{first}:{last}]))"
    if lf.kind == "table":  # a small tensor the kernel indexes itself (a norm's weight)
        return f"{src}.contiguous().view(-1)"
    return {"full": f"_as_full({src}, {shape}, n_rows, n_cols)",
            "col": f"_as_cols({src}, n_cols)", "row": f"_as_rows({src}, n_rows)",
            "scalar": f"_as_one({src})"}.get(lf.kind, src)
