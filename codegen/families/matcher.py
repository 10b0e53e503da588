"""The graph walker behind recognition: leaves (with their broadcast kind) and pointwise
chains built from a captured forward (see :mod:`~cutegen.codegen.families.recognize`).

Raises :class:`NotCoveredError` with a :class:`~cutegen.codegen.families.plan.NotCovered`
when something is outside what the families do (an op, a broadcast, a dtype).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cutegen.codegen.families.capture import Captured, Node
from cutegen.codegen.families.ops import COMPARE_OPS, POINTWISE_OPS, RANDOM_MARK
from cutegen.codegen.families.plan import Chain, Leaf, NotCovered, PwNode, unit_view

FLOATS = ("float32", "bfloat16", "float16")
#: RMSNorm's default eps: the epsilon of its compute type (fp32 for fp32, bf16 and fp16).
OPMATH_EPS = 1.1920928955078125e-07
_OP_PARAMS = ("approximate", "negative_slope", "alpha", "beta", "threshold", "min_val",
              "max_val", "min", "max", "lambd")
#: Dtypes a leaf may have: floats, and bool masks (read as 1.0 / 0.0).
LEAF_DTYPES = (*FLOATS, "bool")


#: What a user can do about a random op: no kernel, whoever writes it, can be checked.
RANDOM_SUGGESTION = ("no kernel, built-in, an LLM's or your own, can be checked against a "
                     "random reference; with p = 0 or the model in eval mode dropout is the "
                     "identity, which the built-in families cover: make forward deterministic "
                     "and run again")


class NotCoveredError(Exception):
    """Raised inside recognition; carries the :class:`NotCovered` for the user."""

    def __init__(self, reason: str, op: str = "") -> None:
        super().__init__(reason)
        self.nc = NotCovered(reason, op)

    @classmethod
    def unsupported(cls, name: str, op: str) -> NotCoveredError:
        """An op no family has, by ``name``. A random op (``ops.RANDOM_MARK``: dropout in
        training mode) is named as it is, with a way on that is a deterministic task rather
        than another rewriter."""
        if RANDOM_MARK not in name:
            return cls(f"{name} is not supported by the built-in families", op)
        err = cls(name, op)
        err.nc = NotCovered(name, op, RANDOM_SUGGESTION)
        return err


def padded(shape: tuple[int, ...], nd: int) -> tuple[int, ...]:
    """``shape`` with size-1 dims in front up to ``nd`` dims, as broadcasting lines it up."""
    return (1,) * (nd - len(shape)) + tuple(shape)


def leaf_kind(shape: tuple[int, ...], frame: tuple[int, ...], k: int) -> str | None:
    """full / col / row / scalar of a tensor against a frame whose last k dims are the row."""
    nd = len(frame)
    if len(shape) > nd:
        return None
    s = padded(shape, nd)
    # full at the frame's own rank; the dims broadcasting adds in front of a lower-rank
    # operand stay 1 whatever the frame's size there, so where the frame has 1 on them the
    # other kinds are tried first (a Linear's (N,) bias against a one-row (1, N) output is per
    # column: read as a full operand, the call at any other batch raised)
    if s == tuple(frame) and len(shape) == nd:
        return "full"
    if all(d == 1 for d in s):
        return "scalar"
    lead, trail = s[: nd - k], s[nd - k:]
    if all(d == 1 for d in lead) and trail == tuple(frame[nd - k:]):
        return "col"
    if lead == tuple(frame[: nd - k]) and all(d == 1 for d in trail):
        return "row"
    if all(d == 1 for d in trail) and rowmap_run(shape, frame, k):
        return "rowmap"
    if s == tuple(frame):  # a lower-rank operand no other kind describes
        return "full"
    return None


def rowmap_run(shape: tuple[int, ...], frame: tuple[int, ...], k: int) -> tuple[int, int]:
    """(first, last) of the run of row dims a per-channel / per-batch operand spans (it has
    the frame's size on dims first .. last - 1 of the row dims and 1 on the others); (0, 0)
    when it is not such an operand."""
    nd = len(frame)
    s = padded(shape, nd)
    lead = nd - k
    present = [d for d in range(lead) if s[d] == frame[d] and frame[d] != 1]
    if not present or any(s[d] not in (1, frame[d]) for d in range(lead)):
        return (0, 0)
    first, last = min(present), max(present) + 1
    if any(frame[d] != 1 and d not in present for d in range(first, last)):
        return (0, 0)
    return (first, last)


def trailing_dims(dims: object, nd: int, what: str) -> int:
    """How many trailing dims ``dims`` names; raises unless they are exactly the last k."""
    if dims is None:
        raise NotCoveredError(f"{what} over all elements (dim=None)", what)
    ds = dims if isinstance(dims, list) else [dims]
    norm = sorted({int(d) % max(nd, 1) for d in ds})
    if not norm or norm != list(range(nd - len(norm), nd)):
        raise NotCoveredError(f"{what} over dim {dims} of a {nd}-d tensor: {what} is computed "
                              "along the last dimension(s) only", what)
    return len(norm)


class Matcher:
    """One recognition attempt over a captured graph (see the module docstring)."""

    def __init__(self, cap: Captured) -> None:
        self.cap = cap
        self.nodes = {n.id: n for n in cap.nodes}
        self.leaves: dict[str, Leaf] = {}
        self.leaf_of: dict[int, str] = {}
        #: How a tensor leaf broadcasts against a frame: (shape, frame, k) -> kind or None
        #: (families whose frame is not rows x trailing dims set their own).
        self.classify: Callable[[tuple[int, ...], tuple[int, ...], int], str | None] = leaf_kind

    # -- graph walking -------------------------------------------------------------------
    def node(self, i: int) -> Node:
        return self.nodes[i]

    def anchor_input(self, a: Node) -> Node:
        """The tensor an anchor op (a reduction, norm, pool) reads.

        Raises:
            NotCoveredError: its input is not a tensor.
        """
        x_id = a.tensors.get("input")
        if x_id is None:
            raise NotCoveredError(f"{a.target}: its input is not a tensor", a.op)
        return self.node(x_id)

    def main_leaf(self, prologue: Chain, x: Node, what: str) -> str:
        """The name of the full-shape leaf an anchor's prologue is computed from (a task
        input before a parameter; the anchor's own input first).

        Raises:
            NotCoveredError: no leaf of the anchor input's shape feeds the prologue.
        """
        used = prologue.leaves()
        mains = [lf for lf in self.leaves.values() if lf.kind == "full" and lf.name in used]
        if not mains:
            raise NotCoveredError(
                f"the input of {what} is not computed from a tensor of its shape", "broadcast")
        return sorted(mains, key=lambda lf: (lf.source != "input", lf.name != x.op))[0].name

    def ancestors(self, start: int, stop: set[int] | frozenset[int] = frozenset()) -> set[int]:
        """``start`` and every node it depends on; the walk does not go past a node in
        ``stop`` (which is included when reached)."""
        seen, todo = set(), [start]
        while todo:
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            if i not in stop:
                todo.extend(self.nodes[i].tensors.values())
        return seen

    def users(self, i: int, within: set[int]) -> list[int]:
        return [n.id for n in self.cap.nodes if n.id in within and i in n.tensors.values()]

    # -- leaves --------------------------------------------------------------------------
    def leaf(self, n: Node, frame: tuple[int, ...], k: int) -> str:
        name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
        return self._add_leaf(name, "input" if n.kind == "input" else "param", n.op,
                              n.shape, n.dtype, frame, k)

    def module_leaf(self, spec: dict, frame: tuple[int, ...], k: int) -> str:
        name = "p_" + spec["path"].replace(".", "_")
        return self._add_leaf(name, "param", spec["path"], tuple(spec["shape"]), spec["dtype"],
                              frame, k)

    def _add_leaf(self, name: str, source: str, ref: str, shape: tuple[int, ...], dtype: str,
                  frame: tuple[int, ...], k: int, kind: str | None = None,
                  view: tuple[int, ...] = ()) -> str:
        kind = kind or self.classify(tuple(shape), frame, k)
        if kind is None:
            raise NotCoveredError(f"{ref} of shape {tuple(shape)} does not broadcast against "
                              f"{tuple(frame)} as a full tensor, a per-column, a per-row vector "
                              "or a single value", "broadcast")
        if name in self.leaves and self.leaves[name].kind != kind:
            raise NotCoveredError(f"{ref} is used with two different broadcasts", "broadcast")
        rowmap: tuple[int, ...] = ()
        if kind == "rowmap":
            rowmap = (*rowmap_run(tuple(shape), frame, k), len(frame) - k)
        self.leaves[name] = Leaf(name, source, ref, kind, dtype, tuple(shape), rowmap, view)
        return name

    def viewed_leaf(self, i: int) -> tuple[Node, tuple[int, ...], tuple[int, ...]] | None:
        """(the leaf, the shape it is read with, how: :func:`unit_view`) when node i is a
        view of a forward argument or parameter that only adds or drops size-1 dims
        (``w.view(1, -1, 1, 1)``, ``b.unsqueeze(0)``): the same values in the same order,
        broadcast by that shape."""
        n = self.nodes[i]
        if n.kind != "call" or n.op != "view" or "input" not in n.tensors:
            return None
        src = self.nodes[n.tensors["input"]]
        while src.kind == "call" and src.op == "view" and "input" in src.tensors:
            src = self.nodes[src.tensors["input"]]
        if src.kind not in ("input", "param") or src.dtype not in FLOATS:
            return None
        view = unit_view(tuple(src.shape), tuple(n.shape))
        if view is None:
            return None
        return src, tuple(n.shape), view

    def input_value(self, name: str) -> str:
        """The reference of a number passed to ``forward`` (read at run time)."""
        self.leaves[name] = Leaf(name, "input", name, "value")
        return "@" + name

    def value_leaf(self, value: float) -> str:
        for attr, v in self.cap.scalar_attrs.items():
            if v == value and not float(value).is_integer():
                name = f"a_{attr}"
                self.leaves[name] = Leaf(name, "attr", attr, "value")
                return "@" + name
        return repr(float(value))

    # -- chains --------------------------------------------------------------------------
    def chain(self, members: set[int], result: int, frame: tuple[int, ...], k: int,
              special: dict[int, str], *, exact: bool = False,
              passthrough: frozenset[int] = frozenset()) -> Chain:
        """The pointwise nodes ``members`` as a Chain whose value is node ``result``.

        ``exact``: round every op's result to its reference dtype (bf16 / fp16), as eager
        does, for consumers that compare exactly (argmax / argmin pick an index).
        ``passthrough``: view nodes checked by the caller (a reshape of a statistic that
        broadcasts back over its row), emitted as identities whatever their shapes."""
        out: list[PwNode] = []

        def ref(i: int) -> str:
            if i in special:
                return special[i]
            n = self.nodes[i]
            viewed = self.viewed_leaf(i)
            if viewed is not None and i not in passthrough:
                src, shape, view = viewed
                name = src.op if src.kind == "input" else "p_" + src.op.replace(".", "_")
                return "@" + self._add_leaf(name, "input" if src.kind == "input" else "param",
                                            src.op, shape, src.dtype, frame, k, view=view)
            if n.kind == "param" and n.op.startswith("_tensor_constant") and isinstance(
                    n.value, float):
                return self.value_leaf(n.value)  # torch.tensor(self.c): the number itself
            if n.kind in ("input", "param"):
                if n.dtype not in LEAF_DTYPES:
                    raise NotCoveredError(f"{n.op} is a {n.dtype or 'non-tensor'} operand of a "
                                      "pointwise op (floating-point tensors only)", n.dtype)
                return "@" + self.leaf(n, frame, k)
            if i not in members:
                raise NotCoveredError(f"the result of {n.target or n.op} is used both before and "
                                  "after the row operation", n.op)
            return f"%{i}"

        for i in sorted(members):
            if i not in passthrough and self.viewed_leaf(i) is not None:
                continue  # read as the leaf, with the view's shape (see ref)
            if i in passthrough:
                out.append(PwNode(i, "identity", (ref(self.nodes[i].tensors["input"]),)))
                continue
            node = self.pointwise(self.nodes[i], ref)
            dt = self.nodes[i].dtype
            if exact and dt in ("bfloat16", "float16") and node.op != "cast":
                # compute as %-i, then round into %i
                out.append(replace(node, id=-i))
                node = PwNode(i, "cast", (f"%{-i}",), (("dtype", dt),))
            out.append(node)
        return Chain(tuple(out), ref(result))

    def pointwise(self, n: Node, ref) -> PwNode:
        op, c, t = n.op, n.consts, n.tensors

        def arg(name: str) -> str:
            if name in t:
                return ref(t[name])
            v = c.get(name)
            if isinstance(v, dict) and "input" in v:  # a number passed to forward
                return self.input_value(v["input"])
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise NotCoveredError(f"{n.target or op}: argument {name}={v!r} is not supported", op)
            return self.value_leaf(v)

        params: dict[str, object] = {k: c[k] for k in _OP_PARAMS if k in c and c[k] is not None}
        if any(isinstance(v, dict) for v in params.values()):
            raise NotCoveredError(f"{n.target or op}: a parameter passed to forward "
                                  f"({', '.join(k for k, v in params.items() if isinstance(v, dict))})",
                                  op)
        if op in ("max", "min"):
            op = "maximum" if op == "max" else "minimum"
        if op == "view":
            op = "identity"
            if tuple(self.nodes[t["input"]].shape) != tuple(n.shape):
                raise NotCoveredError(f"{n.target}: a reshape to another shape", "reshape")
        if op in ("where", "masked_fill"):  # where(c, a, b); x.masked_fill(mask, v) = where(mask, v, x)
            names = ("condition", "input", "other") if op == "where" else ("mask", "value", "input")
            return PwNode(n.id, "where", tuple(arg(k) for k in names))
        if op in COMPARE_OPS:
            return PwNode(n.id, op, (arg("input"), arg("other")))
        if op == "threshold":  # x if x > threshold else value
            return PwNode(n.id, op, (arg("input"), arg("threshold"), arg("value")))
        if op in ("add", "sub", "mul", "div", "maximum", "minimum"):
            if op == "div" and c.get("rounding_mode") is not None:
                raise NotCoveredError(f"{n.target}: division with rounding_mode", "div")
            if "alpha" in c and c["alpha"] not in (None, 1):
                params["alpha"] = c["alpha"]
            return PwNode(n.id, op, (arg("input"), arg("other")), tuple(params.items()))
        if op == "pow":
            if "exponent" not in t and not isinstance(c.get("exponent"), dict):
                params["exponent_value"] = c.get("exponent")
            if "input" not in t and not isinstance(c.get("input"), dict):
                params["base_value"] = c.get("input")
            return PwNode(n.id, op, (arg("input"), arg("exponent")), tuple(params.items()))
        if op == "clamp" and any(x in t for x in ("min", "max")):
            raise NotCoveredError(f"{n.target}: clamp with tensor bounds", "clamp")
        if op == "cast":
            dt = c.get("dtype")
            if dt not in (None, *FLOATS):
                raise NotCoveredError(f"{n.target}: a cast to {dt}", "cast")
            params = {"dtype": dt} if dt in ("bfloat16", "float16") else {}
        if op not in POINTWISE_OPS:
            raise NotCoveredError.unsupported(n.target or op, op)
        return PwNode(n.id, op, (arg("input"),), tuple(params.items()))
