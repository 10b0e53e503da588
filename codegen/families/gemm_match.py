"""Recognition of the ``gemm`` family: one matrix product, the layouts of its operands, the
pointwise epilogue over its (M, N) result and an optional reduction over N.

A forward is a GEMM task when it computes exactly one matrix product (``torch.matmul``,
``@``, ``torch.mm``, ``torch.bmm``, ``torch.addmm``, ``F.linear`` or ``nn.Linear``, with or
without bias) whose operands are forward arguments or parameters, each read as stored or
through transposes of its last two dims (``.t()``, ``.T``, ``.mT``, ``transpose(-1, -2)``):

* A is the product's left operand, logically [M, K]: ``a_major`` "k" when it is stored
  [M, K] (row-major), "m" when the reference transposes a stored [K, M] tensor;
* B is the right operand, logically [K, N]: ``b_major`` "n" when stored [K, N], "k" when
  stored [N, K] (an ``nn.Linear`` weight, or ``W.T``);
* ``batched``: both operands are 3-d or more with the same batch dims (``bmm``, or ``matmul``
  of two 3-d tensors, or of two [B, H, .., ..] tensors as attention has: the batch dims fold
  into one); a 3-d or higher K-major A times a 2-d B (a Linear over [batch, seq,
  features], KernelBench's 4-d tensor-matrix product) is a 2-d product with the leading
  dims folded into M (not batched); broadcast batch dims are not covered;
* the epilogue is the chain of pointwise ops after the product (``%y``), whose tensors
  broadcast against the (M, N) output as "full", "col" (per N), "row" (per M) or "scalar";
  a Linear / addmm bias is its first op (``%y + bias``);
* ``reduce``: optionally, the returned value is a ``sum`` / ``mean`` / ``amax`` (or
  ``max(dim)[0]``) / ``logsumexp`` of the epilogue's value over N (``reduce_keepdim``).

Anything else (an operand computed by pointwise ops, a softmax of the product, a second
product, mixed or non-float dtypes) raises :class:`NotCoveredError` naming the op.

**Precision.** ``precision_modes`` lists the arithmetic a kernel may use, most accurate
first, and ``precision_default`` is the fastest of them: bf16 / fp16 tasks use their own
dtype on the tensor cores (fp32 accumulation); fp32 tasks use "3xtf32" (split-precision
TF32, about fp32 accuracy), and plain "tf32" only when the task's ``TOLERANCE`` is at least
:data:`TF32_MIN_TOL` in both atol and rtol. Plain TF32 is the default only when the task
also leaves out the evaluator's scaled inputs ("large", randn x 1e3, see
``INPUT_DISTRIBUTIONS``): TF32's error scales with the inputs and not with the outputs, so
where outputs cancel no absolute tolerance written for randn inputs covers it (measured on
the H200: a conv_transpose3d at atol = rtol = 1e-2 failed only its "large" trial, max error
1.2e4 on outputs of 2e7). There "tf32" stays a mode a move may try, and "3xtf32" leads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from cutegen.codegen.families.capture import Node
from cutegen.codegen.families.matcher import FLOATS, Matcher, NotCoveredError, trailing_dims
from cutegen.codegen.families.ops import MATMUL_OPS, ROW_OPS, SCAN_OPS
from cutegen.codegen.families.plan import Chain, Plan, PwNode
from cutegen.codegen.numerics import tolerance_for

#: Reductions over N the gemm family fuses after its epilogue (``max`` with a dim: values).
GEMM_REDUCE_OPS = frozenset({"sum", "mean", "amax", "max", "logsumexp"})
#: The smallest task tolerance (atol and rtol) under which an fp32 GEMM may use plain TF32:
#: TF32 keeps 10 mantissa bits, so products carry ~5e-4 relative error before accumulation.
TF32_MIN_TOL = 5e-3
#: Ops a GEMM operand may pass through besides transposes (no data change).
_PASS_THROUGH = frozenset({"identity", "view", "cast"})


def precision_modes(dtype: str, tolerance: Mapping[str, float] | None = None) -> tuple[str, ...]:
    """The precision modes a GEMM over ``dtype`` operands may use, most accurate first.

    Args:
        dtype: torch dtype name of the operands ("bfloat16", "float16", "float32").
        tolerance: the task's ``TOLERANCE`` override (``{}`` or None: the dtype's table).
    """
    if dtype == "bfloat16":
        return ("bf16",)
    if dtype == "float16":
        return ("fp16",)
    atol, rtol = tolerance_for(dtype, tolerance)
    return ("3xtf32", "tf32") if min(atol, rtol) >= TF32_MIN_TOL else ("3xtf32",)


def default_precision(modes: tuple[str, ...], distributions: tuple[str, ...] = ()) -> str:
    """The mode a plan starts from: the fastest of ``modes`` (listed most accurate first),
    except that plain "tf32" is passed over while the task verifies scaled inputs ("large";
    ``distributions`` empty means every distribution, as for a task naming none)."""
    if modes[-1] == "tf32" and (not distributions or "large" in distributions):
        return modes[0]
    return modes[-1]


def gemm_ids(m: Matcher, calls: set[int]) -> list[int]:
    """The matrix products among ``calls``, in graph order."""
    return sorted(i for i in calls if m.node(i).op in MATMUL_OPS)


#: How a few callees read in messages (the captured target is the runtime function).
_PRETTY = {"_operator.matmul": "@ (matmul)", "torch._C._nn.linear": "F.linear"}


def _name(n: Node) -> str:
    name = n.target or n.op
    return _PRETTY.get(name, name)


def _operand(m: Matcher, i: int, g: Node, which: str, absorbed: set[int]) -> tuple[Node, int]:
    """(the leaf node an operand is read from, how many last-two-dim swaps are applied)."""
    flips = 0
    n = m.node(i)
    while n.kind == "call":
        src = m.node(n.tensors["input"]) if "input" in n.tensors else None
        if n.op == "transpose" and src is not None:
            nd, dims = len(src.shape), n.consts.get("dims")
            last_two = (dims == "T" and nd == 2) or (
                isinstance(dims, list) and nd >= 2 and len(dims) == 2
                and all(isinstance(d, int) for d in dims)
                and sorted(d % nd for d in dims) == [nd - 2, nd - 1])
            if not last_two:
                raise NotCoveredError(f"{_name(n)} with dims {dims} on the {nd}-d {which} operand "
                                      f"of {_name(g)}: only the last two dims may be swapped",
                                      "transpose")
            flips += 1
        elif not (n.op in _PASS_THROUGH and src is not None and src.shape == n.shape
                  and src.dtype == n.dtype):
            raise NotCoveredError(
                f"the {which} operand of {_name(g)} is computed by {_name(n)}: the gemm family "
                "reads its operands from forward arguments or parameters (pointwise ops are "
                "fused after the product, not before)", _name(g))
        absorbed.add(n.id)
        n = src
    return n, flips


def _operand_leaf(m: Matcher, n: Node, g: Node, frame: tuple[int, ...]) -> str:
    if n.dtype not in FLOATS:
        raise NotCoveredError(f"{_name(g)} of an operand of dtype {n.dtype or 'none'} ({n.op}): "
                              "floating-point operands only", n.dtype or _name(g))
    name = n.op if n.kind == "input" else "p_" + n.op.replace(".", "_")
    return m._add_leaf(name, "input" if n.kind == "input" else "param", n.op, n.shape, n.dtype,
                       frame, 1, "full")


def _module_weight(m: Matcher, spec: dict, frame: tuple[int, ...]) -> tuple[str, str]:
    """(leaf name, dtype) of an ``nn.Linear`` weight."""
    name = "p_" + spec["path"].replace(".", "_")
    return m._add_leaf(name, "param", spec["path"], tuple(spec["shape"]), spec["dtype"], frame,
                       1, "full"), spec["dtype"]


def _bias(m: Matcher, g: Node, key: str, frame: tuple[int, ...], absorbed: set[int]) -> str:
    """The bias leaf of a Linear / addmm ("" when there is none)."""
    if key in g.tensors:
        n, flips = _operand(m, g.tensors[key], g, "bias", absorbed)
        if flips or n.dtype not in FLOATS:
            raise NotCoveredError(f"{_name(g)} with a transposed or non-float bias", _name(g))
        return m.leaf(n, frame, 1)
    spec = g.consts.get(key)
    if isinstance(spec, dict) and "path" in spec:
        return m.module_leaf(spec, frame, 1)
    if spec not in (None, 0, 0.0):
        raise NotCoveredError(f"{_name(g)} with {key}={spec!r}", _name(g))
    return ""


def _check_shapes(g: Node, a: tuple[int, ...], b: tuple[int, ...], a_flips: int) -> bool:
    """Whether the product is batched; raises for shapes the family does not cover.

    ``a`` / ``b`` are the logical operand shapes ([.., M, K] and [.., K, N]). A 3-d A times a
    2-d B (a Linear over [batch, seq, features]) is one 2-d product with the leading dims
    folded into M, which needs A stored as it is read (K-major)."""
    if len(a) < 2 or len(b) < 2:
        raise NotCoveredError(f"{_name(g)} with a 1-d operand (a matrix-vector product)", _name(g))
    if len(a) >= 3 and len(b) == 2:  # [.., K] @ [K, N]: every leading dim folds into M
        if a_flips % 2:
            raise NotCoveredError(f"{_name(g)} of a transposed {len(a)}-d A and a 2-d B",
                                  _name(g))
        return False
    if len(a) != len(b):
        raise NotCoveredError(f"{_name(g)} of {len(a)}-d and {len(b)}-d operands (batch dims "
                              "broadcast)", _name(g))
    if len(a) >= 3 and tuple(a[:-2]) != tuple(b[:-2]):
        raise NotCoveredError(f"{_name(g)} with batch dims {tuple(a[:-2])} and {tuple(b[:-2])} "
                              "(batch dims broadcast)", _name(g))
    return len(a) >= 3  # batched; several batch dims (attention's [B, H, ..]) fold into one


def _reduction(m: Matcher, calls: set[int], out: Node, g: Node, absorbed: set[int],
               params: dict[str, object]) -> tuple[int, str]:
    """(the node the epilogue computes, the output's shape kind); fills the reduce params."""
    anchors = sorted(i for i in calls if (m.node(i).op in ROW_OPS | SCAN_OPS | {"logsumexp"})
                     and not (m.node(i).op in ("max", "min") and "other" in m.node(i).tensors))
    if not anchors:
        return out.id, "matrix"
    r = m.node(anchors[0])
    if len(anchors) > 1:
        names = ", ".join(_name(m.node(i)) for i in anchors)
        raise NotCoveredError(f"{len(anchors)} reductions or norms after a matrix product ({names}):"
                              " the gemm family fuses one reduction over N after its epilogue",
                              m.node(anchors[1]).op)
    if r.op not in GEMM_REDUCE_OPS:
        bad = r
        raise NotCoveredError(
            f"{_name(bad)} of a matrix product: the gemm family fuses pointwise ops and one sum / "
            "mean / amax / logsumexp over N after the product", bad.op)
    x_id = r.tensors.get("input")
    if x_id is None or g.id not in m.ancestors(x_id):
        raise NotCoveredError(f"{_name(r)} of a tensor that is not computed from the matrix "
                              "product", r.op)
    op, result = r.op, r.id
    if op == "max":
        uses = m.users(r.id, calls | {out.id})
        if (len(uses) != 1 or m.node(uses[0]).op != "getitem"
                or m.node(uses[0]).consts.get("index") != 0):
            raise NotCoveredError(f"{_name(r)} of a matrix product with its indices: only the "
                                  "values (amax) are covered", "argmax")
        op, result = "amax", uses[0]
        absorbed.add(result)
    if result != out.id:  # pointwise ops after the reduction: on each row's value
        post_ids: set[int] = set()
        todo = [out.id]
        while todo:
            i = todo.pop()
            if i in post_ids or i == result or m.node(i).kind != "call":
                continue
            post_ids.add(i)
            todo.extend(m.node(i).tensors.values())
        nd = len(g.shape)
        post = m.chain(post_ids, out.id, (1,) * nd, 1, {result: "%y"})
        bad = [m.leaves[n] for n in post.leaves() if m.leaves[n].kind != "value"]
        if bad:
            raise NotCoveredError(f"{bad[0].ref} is applied to the {op} of a matrix product: only "
                                  "numbers can follow the reduction", "broadcast")
        params["post"] = post
        absorbed |= post_ids
    if r.consts.get("dtype") is not None:
        raise NotCoveredError(f"{_name(r)} with dtype={r.consts['dtype']!r}", op)
    nd = len(g.shape)
    if trailing_dims(r.consts.get("dim"), nd, op) != 1:
        raise NotCoveredError(f"{_name(r)} over several dims of a matrix product: the gemm family "
                              "reduces over N (the last dim) only", op)
    params["reduce"] = op
    params["reduce_keepdim"] = bool(r.consts.get("keepdim") or False)
    absorbed.add(r.id)
    return x_id, "rows"


def gemm_plan(m: Matcher, calls: set[int], out: Node) -> Plan:
    """The gemm plan of a forward with a matrix product (see the module docstring).

    Raises:
        NotCoveredError: the forward is outside what the gemm family computes.
    """
    gemms = gemm_ids(m, calls)
    if len(gemms) > 1:
        second = m.node(gemms[1])
        names = ", ".join(_name(m.node(i)) for i in gemms)
        raise NotCoveredError(f"more than one matrix product ({names}): the gemm family "
                              "computes one", _name(second))
    g = m.node(gemms[0])
    frame = tuple(g.shape)
    absorbed: set[int] = {g.id}
    if g.op == "addmm":
        for k in ("beta", "alpha"):
            if g.consts.get(k) not in (None, 1, 1.0):
                raise NotCoveredError(f"{_name(g)} with {k}={g.consts.get(k)!r}", _name(g))
    a_key = "mat1" if g.op == "addmm" else "input"
    if a_key not in g.tensors:
        raise NotCoveredError(f"{_name(g)} of a non-tensor operand", _name(g))
    a_node, a_flips = _operand(m, g.tensors[a_key], g, "A", absorbed)
    a_shape = m.node(g.tensors[a_key]).shape
    a_leaf = _operand_leaf(m, a_node, g, frame)
    # B: the logical [K, N] operand; a Linear weight is stored [N, K] (one swap already)
    if g.op == "linear":
        if "weight" in g.tensors:
            b_node, b_flips = _operand(m, g.tensors["weight"], g, "weight", absorbed)
            b_leaf, b_dtype = _operand_leaf(m, b_node, g, frame), b_node.dtype
            w_shape = m.node(g.tensors["weight"]).shape
        elif isinstance(g.consts.get("weight"), dict):
            spec = g.consts["weight"]
            b_flips, w_shape = 0, tuple(spec["shape"])
            b_leaf, b_dtype = _module_weight(m, spec, frame)
        else:
            raise NotCoveredError(f"{_name(g)} without a weight tensor", _name(g))
        b_flips += 1
        b_shape = tuple(w_shape[:-2]) + tuple(w_shape[-2:][::-1])
    else:
        b_key = "mat2" if g.op == "addmm" else "other"
        if b_key not in g.tensors:
            raise NotCoveredError(f"{_name(g)} of a non-tensor operand", _name(g))
        b_node, b_flips = _operand(m, g.tensors[b_key], g, "B", absorbed)
        b_leaf, b_dtype = _operand_leaf(m, b_node, g, frame), b_node.dtype
        b_shape = m.node(g.tensors[b_key]).shape
    batched = _check_shapes(g, tuple(a_shape), tuple(b_shape), a_flips)
    if a_node.dtype != b_dtype:
        raise NotCoveredError(f"{_name(g)} of mixed dtypes ({a_node.dtype} and {b_dtype})",
                              "mixed dtypes")
    if g.dtype != a_node.dtype:
        raise NotCoveredError(f"{_name(g)} with a {g.dtype} result of {a_node.dtype} operands",
                              g.dtype)
    bias = _bias(m, g, "input" if g.op == "addmm" else "bias", frame, absorbed)
    params: dict[str, object] = {"a": a_leaf, "b": b_leaf,
                                 "a_major": "m" if a_flips % 2 else "k",
                                 "b_major": "k" if b_flips % 2 else "n", "batched": batched,
                                 "reduce": "", "reduce_keepdim": False}
    tri_ops = [i for i in calls if m.node(i).op in ("tril", "triu")]
    if tri_ops:
        t = m.node(tri_ops[0])
        diag = t.consts.get("diagonal", 0)
        if t.id != out.id or len(tri_ops) > 1 or not isinstance(diag, int):
            raise NotCoveredError(f"{_name(t)} inside the epilogue of a matrix product: the gemm "
                                  "family applies torch.tril / triu to its result", t.op)
        params["tri"] = ("lower" if t.op == "tril" else "upper", int(diag))
        absorbed.add(t.id)
        out = m.node(t.tensors["input"])
    result, out_shape = _reduction(m, calls, out, g, absorbed, params)
    epi_ids = calls - absorbed
    for i in sorted(epi_ids):
        used = set(m.node(i).tensors.values()) & (absorbed - {g.id})
        if used:
            raise NotCoveredError(f"{_name(m.node(min(used)))} is used both by {_name(g)} and "
                                  "after it", m.node(min(used)).op)
    y = f"%{g.id}" if bias else "%y"
    epilogue = m.chain(epi_ids, result, frame, 1, {g.id: y})
    if bias:
        epilogue = Chain((PwNode(g.id, "add", ("%y", "@" + bias)), *epilogue.nodes),
                         epilogue.result)
    if out.dtype not in FLOATS:
        raise NotCoveredError(f"a result of dtype {out.dtype}", out.dtype)
    mapped = [lf for lf in m.leaves.values() if lf.kind == "rowmap"]
    if mapped:
        raise NotCoveredError(f"{mapped[0].ref} of shape {mapped[0].shape} broadcasts over some of "
                              "the product's rows (the gemm epilogue reads per-row, per-column "
                              "and full operands)", "broadcast")
    modes = precision_modes(a_node.dtype, m.cap.tolerance)
    params["precision_default"] = default_precision(modes, m.cap.distributions)
    params["precision_modes"] = modes
    # [batch, seq, K] @ [K, N] (or more leading dims): M = their product
    mm = math.prod(frame[:-1]) if not batched else frame[-2]
    nn_, kk = frame[-1], a_shape[-1]
    batch = "x".join(map(str, frame[:-2]))
    desc = (f"gemm ({_name(g)}): {'batch ' + batch + ' x ' if batched else ''}"
            f"{mm}x{kk} ({params['a_major']}-major A) @ {kk}x{nn_} ({params['b_major']}-major B), "
            f"{a_node.dtype}, precision {params['precision_default']}")
    if not epilogue.empty:
        desc += f"; epilogue: {epilogue.describe()}"
    if params["reduce"]:
        desc += f"; then {params['reduce']} over N"
    if params.get("post") is not None:
        desc += f", then {params['post'].describe()}"
    if params.get("tri"):
        kind, diag = params["tri"]
        desc += (f"; torch.{'tril' if kind == 'lower' else 'triu'} of the result"
                 + (f" (diagonal {diag})" if diag else ""))
    return Plan("gemm", "matmul", tuple(m.leaves.values()), a_leaf, Chain((), "@" + a_leaf),
                epilogue, tuple(sorted(params.items())), out.dtype, out_shape, m.cap.forward_args,
                desc)
