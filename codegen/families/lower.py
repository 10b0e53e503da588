"""Lowering: composite ops of a captured forward rewritten as the primitive ops recognition
matches (run between :mod:`~cutegen.codegen.families.capture` and matching).

* ``torch.norm`` / ``x.norm`` / ``torch.linalg.vector_norm`` over some dims (p = 2 or "fro":
  ``sqrt(sum(x * x))``; p = 1: ``sum(abs(x))``; p = inf / -inf: ``amax`` / ``amin`` of
  ``abs(x)``; another p > 0: ``sum(abs(x) ** p) ** (1 / p)``);
* ``F.normalize(x, p, dim, eps)``: ``x / clamp(norm(x, p, dim, keepdim=True), min=eps)``;
* ``nn.BatchNormNd`` / ``F.batch_norm`` with running statistics (eval mode):
  ``(x - mean) * rsqrt(var + eps) * weight + bias``, each statistic and parameter read per
  channel (viewed (1, C, 1, ...)): pointwise, so it fuses with whatever surrounds it;
* the regression losses ``F.mse_loss``, ``F.l1_loss``, ``F.smooth_l1_loss`` (beta),
  ``F.huber_loss`` (delta) and ``F.kl_div`` (log_target, reduction "batchmean" = the sum over
  the batch size, read at run time), and their modules: the elementwise loss as pointwise
  ops, then a mean / sum over every element (reduction "none": no reduction);
* adaptive average / max pooling to size 1 (a global pool): the mean / amax over the spatial
  dims, keepdim;
* an exclusive cumulative sum as KernelBench's level 1 (problem 92) has spelled it:
  the cumsum of the input shifted by one along d with a zero in front
  (``torch.cat((torch.zeros_like(x.select(d, 0).unsqueeze(d)), x), d).narrow(d, 0,
  x.size(d))``, the fix proposed in its pull request 63) and a zero put in front of the
  cumsum of all but x's last value (``torch.cat((zeros, torch.cumsum(x.narrow(d, 0, x.size(d)
  - 1), d)), d)``, its spelling since pull request 109, December 2025) are ``cumsum(x) - x``;
  the original ``torch.cumsum(torch.cat((zeros, x), d)[:-1], d)``, whose slice drops the last
  row (the result is one row shorter and one column wider than x), is the exclusive scan of
  x's first rows padded with a zero column (a scan node with ``pad`` and ``rows_stop``);
* a matrix times a vector (``A @ b``, b of shape (K, 1) or (K,)): ``sum(A * b, dim=1)``, a
  row reduction at memory speed instead of a GEMM with one output column;
* ``F.cosine_similarity`` / ``nn.CosineSimilarity``: three sums over the dim, then
  pointwise; ``F.triplet_margin_loss`` / ``nn.TripletMarginLoss`` (p = 2, no swap): two
  pairwise distances, the hinge, the reduction (recognition makes chains of them);
* ``F.scaled_dot_product_attention`` without mask, dropout or causal masking: ``softmax(q @
  k^T * scale, -1) @ v``, a chain of the two batched products and the row softmax;
* a softmax / log-softmax over a dim that is not the last: ``exp(x - logsumexp(x, dim,
  keepdim=True))`` / ``x - logsumexp(...)``, the strided family's logsumexp mapped back;
* ``torch.einsum`` of two operands that is a (batched) matrix product ("ij,jk->ik",
  "bij,bkj->bik", "ki,kj->ij" ...), or a tensor of any rank times a matrix over its last
  letter ("bijl,lk->bijk"): a ``matmul`` of the operands, each transposed as its letters
  say.

The rewritten graph keeps node ids in topological order (every node is renumbered), so a
chain built from it is in evaluation order. A composite op with arguments outside these
forms is left as it is, and recognition names it.
"""

from __future__ import annotations

import math
from dataclasses import replace

from cutegen.codegen.families.capture import Captured, Node

_INF = float("inf")


class _Builder:
    """The rewritten node list: new ids in order, and old id -> new id of each value."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.new_id: dict[int, int] = {}

    def add(self, node: Node, old: int | None = None) -> int:
        i = len(self.nodes)
        self.nodes.append(replace(node, id=i))
        if old is not None:
            self.new_id[old] = i
        return i

    def call(self, op: str, target: str, tensors: dict[str, int], consts: dict, like: Node,
             shape: tuple[int, ...] | None = None, dtype: str | None = None) -> int:
        return self.add(Node(0, "call", op, target, tensors, consts,
                             like.shape if shape is None else shape,
                             like.dtype if dtype is None else dtype))


def _p_of(n: Node) -> object:
    key = "ord" if n.op == "vector_norm" else "p"
    default = 2.0 if n.op in ("vector_norm", "normalize") else "fro"
    p = n.consts.get(key, default)
    return "fro" if p is None else p


def _norm(b: _Builder, n: Node, x: int, src: Node, dim: object, keepdim: bool,
          shape: tuple[int, ...]) -> int | None:
    """New nodes computing the p-norm of new node ``x`` over ``dim``; None: a form not lowered."""
    p = _p_of(n)
    if p == "fro" or p == 2 or p == 2.0:
        pre, stat, post = "square", "sum", "sqrt"
    elif p == 1 or p == 1.0:
        pre, stat, post = "abs", "sum", ""
    elif p in (_INF, "inf"):
        pre, stat, post = "abs", "amax", ""
    elif p in (-_INF, "-inf"):
        pre, stat, post = "abs", "amin", ""
    elif isinstance(p, (int, float)) and not isinstance(p, bool) and p > 0 and math.isfinite(p):
        pre, stat, post = "pow", "sum", "pow"
    else:
        return None
    target = f"{n.target} (p={p})"
    if pre == "pow":
        t = b.call("abs", target, {"input": x}, {}, src)
        t = b.call("pow", target, {"input": t}, {"exponent": float(p)}, src)
    else:
        t = b.call(pre, target, {"input": x}, {}, src)
    red = b.call(stat, target, {"input": t}, {"dim": dim, "keepdim": keepdim}, n, shape)
    if post == "sqrt":
        return b.call("sqrt", target, {"input": red}, {}, n, shape)
    if post == "pow":
        return b.call("pow", target, {"input": red}, {"exponent": 1.0 / float(p)}, n, shape)
    return red


def _lower_norm(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    if n.consts.get("dtype") is not None or "input" not in n.tensors or set(n.tensors) != {"input"}:
        return None
    x_old = n.tensors["input"]
    return _norm(b, n, b.new_id[x_old], nodes[x_old], n.consts.get("dim"),
                 bool(n.consts.get("keepdim") or False), n.shape)


def _lower_normalize(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    if set(n.tensors) != {"input"}:
        return None
    x_old = n.tensors["input"]
    src = nodes[x_old]
    dim = n.consts.get("dim", 1)
    if not isinstance(dim, int):
        return None
    nd = len(src.shape)
    kshape = tuple(1 if d == dim % max(nd, 1) else s for d, s in enumerate(src.shape))
    x = b.new_id[x_old]
    norm = _norm(b, n, x, src, dim, True, kshape)
    if norm is None:
        return None
    eps = float(n.consts.get("eps", 1e-12))
    den = b.call("clamp", n.target, {"input": norm}, {"min": eps}, n, kshape)
    return b.call("div", n.target, {"input": x, "other": den}, {}, n)


def _channel_operand(b: _Builder, n: Node, key: str, x: Node) -> int | None:
    """A new node reading the norm's per-channel ``key`` tensor viewed (1, C, 1, ...)."""
    nd = len(x.shape)
    view = (1, x.shape[1]) + (1,) * (nd - 2)
    if key in n.tensors:
        src = b.new_id[n.tensors[key]]
        like = b.nodes[src]
    else:
        spec = n.consts.get(key)
        if not isinstance(spec, dict) or "path" not in spec:
            return None
        like = Node(0, "param", spec["path"], shape=tuple(spec["shape"]), dtype=spec["dtype"])
        src = b.add(like)
    if [d for d in like.shape if d != 1] != [x.shape[1]]:
        return None
    return b.add(Node(0, "call", "view", f"{n.target} ({key})", {"input": src}, {}, view,
                      like.dtype))


def _lower_batch_norm(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """Batch norm with running statistics (see the module docstring); None in training mode."""
    if n.consts.get("training", False) or "input" not in n.tensors:
        return None
    x_old = n.tensors["input"]
    x = nodes[x_old]
    eps = n.consts.get("eps", 1e-5)
    if len(x.shape) < 2 or not isinstance(eps, (int, float)):
        return None
    ops = {k: _channel_operand(b, n, k, x) for k in ("running_mean", "running_var", "weight",
                                                     "bias")}
    if ops["running_mean"] is None or ops["running_var"] is None:
        return None
    cshape = b.nodes[ops["running_var"]].shape
    t = b.call("sub", n.target, {"input": b.new_id[x_old], "other": ops["running_mean"]}, {}, n)
    v = b.call("add", n.target, {"input": ops["running_var"]}, {"other": float(eps)}, n, cshape)
    v = b.call("rsqrt", n.target, {"input": v}, {}, n, cshape)
    t = b.call("mul", n.target, {"input": t, "other": v}, {}, n)
    if ops["weight"] is not None:
        t = b.call("mul", n.target, {"input": t, "other": ops["weight"]}, {}, n)
    if ops["bias"] is not None:
        t = b.call("add", n.target, {"input": t, "other": ops["bias"]}, {}, n)
    return t


def _lower_loss(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """A regression loss (see the module docstring); None for a form not lowered."""
    import torch

    if "input" not in n.tensors or "target" not in n.tensors:
        return None
    if any(n.consts.get(k) is not None for k in ("size_average", "reduce")):
        return None
    x_old, t_old = n.tensors["input"], n.tensors["target"]
    x, t = b.new_id[x_old], b.new_id[t_old]
    shape = tuple(torch.broadcast_shapes(nodes[x_old].shape, nodes[t_old].shape))
    like = nodes[x_old]
    tgt = n.target

    def call(op: str, tensors: dict[str, int], consts: dict | None = None) -> int:
        return b.call(op, tgt, tensors, consts or {}, like, shape)

    op = n.op
    if op == "kl_div":
        if n.consts.get("log_target"):
            loss = call("mul", {"input": call("exp", {"input": t}),
                                "other": call("sub", {"input": t, "other": x})})
        else:  # target * (log(target) - input), 0 where target is 0 (torch's xlogy)
            raw = call("mul", {"input": t, "other": call("sub", {"input": call("log", {"input": t}),
                                                                 "other": x})})
            loss = call("where", {"condition": call("eq", {"input": t}, {"other": 0.0}),
                                  "other": raw}, {"input": 0.0})
    else:
        d = call("sub", {"input": x, "other": t})
        if op == "mse_loss":
            loss = call("square", {"input": d})
        elif op == "l1_loss":
            loss = call("abs", {"input": d})
        else:
            key = "beta" if op == "smooth_l1_loss" else "delta"
            w = n.consts.get(key, 1.0)
            if not isinstance(w, (int, float)) or isinstance(w, bool) or w < 0:
                return None
            ad = call("abs", {"input": d})
            if w == 0:
                loss = ad
            else:
                sq = call("mul", {"input": call("square", {"input": d})},
                          {"other": 0.5 / w if op == "smooth_l1_loss" else 0.5})
                lin = call("sub", {"input": ad}, {"other": 0.5 * w})
                if op == "huber_loss":
                    lin = call("mul", {"input": lin}, {"other": float(w)})
                small = call("lt", {"input": ad}, {"other": float(w)})
                loss = call("where", {"condition": small, "input": sq, "other": lin})
    reduction = n.consts.get("reduction", "mean")
    if reduction == "none":
        return loss
    if reduction not in ("mean", "sum", "batchmean") or (reduction == "batchmean"
                                                          and op != "kl_div"):
        return None
    consts: dict = {"dim": None, "keepdim": False}
    if reduction == "batchmean":  # the sum over the batch size, whatever the shape
        consts["count_dims"] = [0]
    return b.call("sum" if reduction == "sum" else "mean", tgt, {"input": loss}, consts, n, ())


def _lower_adaptive(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """Adaptive pooling to an output of size 1 in every spatial dim: a global mean / max."""
    if "input" not in n.tensors or n.consts.get("return_indices"):
        return None
    x = nodes[n.tensors["input"]]
    spatial = int(n.op[-2])
    size = n.consts.get("output_size")
    sizes = size if isinstance(size, list) else [size] * spatial
    if len(sizes) != spatial or any(s != 1 for s in sizes) or len(x.shape) < spatial + 1:
        return None
    nd = len(x.shape)
    dims = list(range(nd - spatial, nd))
    op = "mean" if "avg" in n.op else "amax"
    return b.call(op, n.target, {"input": b.new_id[n.tensors["input"]]},
                  {"dim": dims, "keepdim": True}, n)


def _lower_einsum(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """A two-operand einsum that is a (batched) matrix product (see the module docstring)."""
    eq = n.consts.get("equation")
    if not isinstance(eq, str) or set(n.tensors) != {"a", "b"} or "->" not in eq:
        return None
    lhs, out = eq.replace(" ", "").split("->")
    if lhs.count(",") != 1 or "." in eq:
        return None
    s1, s2 = lhs.split(",")
    if len(s1) > 3 and len(s2) == 2 and len(out) == len(s1):
        return _lower_tensor_matrix(b, n, eq, s1, s2, out)
    if not (len(s1) == len(s2) == len(out) and len(out) in (2, 3)):
        return None
    if len(out) == 3 and not (s1[0] == s2[0] == out[0]):
        return None  # one leading batch dim, the same in all three
    a2, b2, (i, j) = s1[-2:], s2[-2:], out[-2:]
    ks = set(a2) & set(b2)
    if len(ks) != 1 or len(set(a2)) != 2 or len(set(b2)) != 2:
        return None
    k = ks.pop()
    if sorted(a2) != sorted(i + k) or sorted(b2) != sorted(k + j) or k in out:
        return None
    x, y = b.new_id[n.tensors["a"]], b.new_id[n.tensors["b"]]

    def transposed(t: int) -> int:
        src = b.nodes[t]
        shape = (*src.shape[:-2], src.shape[-1], src.shape[-2])
        return b.call("transpose", f"{n.target} ({eq})", {"input": t}, {"dims": [-2, -1]},
                      src, shape)

    if a2 != i + k:
        x = transposed(x)
    if b2 != k + j:
        y = transposed(y)
    return b.call("matmul", f"{n.target} ({eq})", {"input": x, "other": y}, {}, n)


def _lower_tensor_matrix(b: _Builder, n: Node, eq: str, s1: str, s2: str,
                         out: str) -> int | None:
    """"bijl,lk->bijk": an operand of any rank times a matrix over its last letter, the other
    letters kept in order: a ``matmul`` (leading dims fold into M; B transposed for
    "bijl,kl->bijk")."""
    k = s1[-1]
    if out[:-1] != s1[:-1] or k in out or len(set(s1)) != len(s1) or len(set(s2)) != 2:
        return None
    if s2 == k + out[-1]:
        y = b.new_id[n.tensors["b"]]
    elif s2 == out[-1] + k:
        src = b.nodes[b.new_id[n.tensors["b"]]]
        y = b.call("transpose", f"{n.target} ({eq})", {"input": b.new_id[n.tensors["b"]]},
                   {"dims": [-2, -1]}, src, (src.shape[-1], src.shape[-2]))
    else:
        return None
    return b.call("matmul", f"{n.target} ({eq})", {"input": b.new_id[n.tensors["a"]],
                                                    "other": y}, {}, n)


def _lower_diag_product(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """``torch.diag(d) @ B`` = ``d[:, None] * B`` and ``A @ torch.diag(d)`` = ``A * d`` for a
    1-d ``d`` (KernelBench's "matmul with diagonal matrices"): a pointwise scaling of rows or
    columns, with no n x n matrix built."""
    a, o = n.tensors.get("input"), n.tensors.get("other")
    if a is None or o is None:
        return None
    da, do = nodes[a], nodes[o]

    def vector(d: Node) -> int | None:
        src = d.tensors.get("input")
        if d.kind != "call" or d.op != "diag" or src is None or d.consts.get("diagonal", 0):
            return None
        return src if len(nodes[src].shape) == 1 else None

    va, vo = vector(da), vector(do)
    if va is not None and vo is None and len(do.shape) == 2:
        col = b.call("view", "Tensor.unsqueeze", {"input": b.new_id[va]}, {}, nodes[va],
                     (nodes[va].shape[0], 1))
        return b.call("mul", f"{n.target} (diag(d) @ B)", {"input": col,
                                                          "other": b.new_id[o]}, {}, n)
    if vo is not None and va is None and len(da.shape) == 2:
        return b.call("mul", f"{n.target} (A @ diag(d))", {"input": b.new_id[a],
                                                          "other": b.new_id[vo]}, {}, n)
    return None


def _lower_matvec(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """A matrix times a vector (``A @ b`` with b of shape (K, 1) or (K,); A an input or a
    parameter of shape (M, K)): ``sum(A * b, dim=1)``, keepdim for the (K, 1) form. A row
    reduction reads A once at memory speed; as a GEMM, one output column would fill 1 / tile_n
    of each tile (and 3xTF32 would read A three times)."""
    a, o = n.tensors.get("input"), n.tensors.get("other", n.tensors.get("mat2"))
    if a is None or o is None:
        return None
    da, do = nodes[a], nodes[o]
    if da.kind not in ("input", "param") or do.kind not in ("input", "param") or len(
            da.shape) != 2:
        return None  # a transposed or computed operand stays with the GEMM family
    k = da.shape[1]
    if tuple(do.shape) == (k, 1):
        vec = b.call("view", "Tensor.view", {"input": b.new_id[o]}, {}, do, (k,))
        keep = True
    elif tuple(do.shape) == (k,):
        vec, keep = b.new_id[o], False
    else:
        return None
    if da.dtype != do.dtype:
        return None
    prod = b.call("mul", f"{n.target} (A @ b)", {"input": b.new_id[a], "other": vec}, {}, da)
    return b.call("sum", f"{n.target} (A @ b)", {"input": prod}, {"dim": 1, "keepdim": keep},
                  n)


def _lower_product(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """A matmul that is a scaling by a diagonal matrix or a matrix-vector product; None for
    the others (they stay GEMMs)."""
    got = _lower_diag_product(b, n, nodes)
    return got if got is not None else _lower_matvec(b, n, nodes)


def _row_sum(b: _Builder, n: Node, x: int, dim: int, like: Node) -> int:
    """sum(x, dim) of a lowered value x shaped like ``like``."""
    shape = tuple(s for i, s in enumerate(like.shape) if i != dim % len(like.shape))
    return b.call("sum", f"{n.target} (lowered)", {"input": x},
                  {"dim": dim % len(like.shape), "keepdim": False}, like, shape)


def _lower_cosine_similarity(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """``F.cosine_similarity(x1, x2, dim, eps)`` / ``nn.CosineSimilarity`` of two tensors of
    one shape: ``sum(x1 * x2) / (max(sqrt(sum(x1 * x1)), eps) * max(sqrt(sum(x2 * x2)),
    eps))`` over ``dim``: three row sums, then pointwise (a chain of kernels, the sums each
    writing its result)."""
    a, c = n.tensors.get("x1"), n.tensors.get("x2")
    if a is None or c is None or nodes[a].shape != nodes[c].shape or not nodes[a].shape:
        return None
    like = nodes[a]
    dim, eps = n.consts.get("dim", 1), n.consts.get("eps", 1e-8)
    if not isinstance(dim, int) or not -len(like.shape) <= dim < len(like.shape) or \
            not isinstance(eps, (int, float)):
        return None
    x1, x2 = b.new_id[a], b.new_id[c]
    t = f"{n.target} (lowered)"
    sums = [_row_sum(b, n, b.call("mul", t, {"input": u, "other": v}, {}, like), dim, like)
            for u, v in ((x1, x2), (x1, x1), (x2, x2))]
    norms = [b.call("clamp", t, {"input": b.call("sqrt", t, {"input": s}, {}, n)},
                    {"min": float(eps)}, n) for s in sums[1:]]
    den = b.call("mul", t, {"input": norms[0], "other": norms[1]}, {}, n)
    return b.call("div", t, {"input": sums[0], "other": den}, {}, n)


def _lower_triplet_margin_loss(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """``F.triplet_margin_loss`` / ``nn.TripletMarginLoss`` with p = 2 and no swap, of three
    tensors of one shape: ``d(a, x) = sqrt(sum((a - x + eps) ** 2, -1))`` (pairwise_distance),
    ``max(d(a, pos) - d(a, neg) + margin, 0)``, then the reduction: two row sums, then the
    mean (a chain of kernels)."""
    ids = [n.tensors.get(k) for k in ("anchor", "positive", "negative")]
    if None in ids or len({tuple(nodes[i].shape) for i in ids}) != 1:
        return None
    like = nodes[ids[0]]
    c = n.consts
    margin, p, eps = c.get("margin", 1.0), c.get("p", 2.0), c.get("eps", 1e-6)
    reduction = c.get("reduction", "mean")
    if p != 2 or c.get("swap", False) or reduction not in ("mean", "sum", "none") or \
            not like.shape or not all(isinstance(v, (int, float)) for v in (margin, eps)):
        return None
    t = f"{n.target} (lowered)"
    a = b.new_id[ids[0]]
    dists = []
    for other in ids[1:]:
        diff = b.call("sub", t, {"input": a, "other": b.new_id[other]}, {}, like)
        shifted = b.call("add", t, {"input": diff}, {"other": float(eps)}, like)
        sq = b.call("mul", t, {"input": shifted, "other": shifted}, {}, like)
        s = _row_sum(b, n, sq, -1, like)
        dists.append(b.call("sqrt", t, {"input": s}, {}, b.nodes[s]))
    row = b.nodes[dists[0]]
    gap = b.call("sub", t, {"input": dists[0], "other": dists[1]}, {}, row)
    loss = b.call("clamp", t, {"input": b.call("add", t, {"input": gap},
                                              {"other": float(margin)}, row)}, {"min": 0.0}, row)
    if reduction == "none":
        return loss
    return b.call(reduction, t, {"input": loss}, {}, n)


_ZEROS = ("torch.zeros_like", "torch.zeros", "Tensor.new_zeros")
_CATS = ("torch.cat", "torch.concat", "torch.concatenate")
_NARROWS = ("Tensor.narrow", "torch.narrow")


def _cat_parts(cat: Node | None, nodes: dict[int, Node]) -> tuple[Node, Node, int] | None:
    """(first, second, dim) of a ``torch.cat`` of exactly two tensors; None otherwise."""
    if cat is None or cat.target not in _CATS:
        return None
    parts = [cat.tensors.get(f"tensors.{i}", cat.tensors.get(f"input.{i}")) for i in range(3)]
    if parts[2] is not None or parts[0] is None or parts[1] is None:
        return None
    return nodes[parts[0]], nodes[parts[1]], cat.consts.get("dim", cat.consts.get("axis", 0))


def _narrow_args(nar: Node | None) -> list | None:
    """[dim, start, length] of a ``narrow`` (positional or keyword); None for another op."""
    if nar is None or nar.target not in _NARROWS:
        return None
    args = nar.consts.get("_extra") or [nar.consts.get(k) for k in ("dim", "start", "length")]
    return args if len(args) == 3 else None


def _zero_column(zeros: Node, x: Node, dims: list, length: int) -> int | None:
    """The dim d when ``zeros`` is a zero tensor of x's shape with size 1 along d, every one
    of ``dims`` names d and the narrow's ``length`` (of x along d) is what it checks
    against; None otherwise."""
    nd = len(x.shape)
    if not nd or zeros.target not in _ZEROS or zeros.dtype != x.dtype != "":
        return None
    if not all(isinstance(d, int) and not isinstance(d, bool) and -nd <= d < nd for d in dims):
        return None
    d = dims[0] % nd
    if {dd % nd for dd in dims} != {d} or length != x.shape[d]:
        return None
    if tuple(zeros.shape) != tuple(1 if i == d else s for i, s in enumerate(x.shape)):
        return None
    return d


def _exclusive(b: _Builder, n: Node, x: Node, d: int) -> int:
    """New nodes computing the exclusive cumsum of x over d, ``cumsum(x) - x`` (the scan
    family reads that as its exclusive scan, which never adds x[j] to y[j])."""
    xid = b.new_id[x.id]
    cs = b.call("cumsum", n.target, {"input": xid}, {"dim": d}, n, x.shape)
    return b.call("sub", f"{n.target} (exclusive)", {"input": cs, "other": xid}, {}, n, x.shape)


def _lower_exclusive_cumsum(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """cumsum over d of narrow(cat((zeros, x), d), d, 0, x.size(d)), where zeros is x's shape
    with size 1 along d: the exclusive cumsum of x, ``cumsum(x) - x`` (see the module
    docstring); None for any other cumsum."""
    if n.consts.get("dtype") is not None:
        return None
    nar = nodes.get(n.tensors.get("input", -1))
    if nar is not None and nar.op == "getitem":
        return _lower_cut_exclusive_cumsum(b, n, nar, nodes)
    args = _narrow_args(nar)
    cat = _cat_parts(nodes.get(nar.tensors.get("input", -1)) if nar else None, nodes)
    if args is None or cat is None or args[1] != 0:
        return None
    zeros, x, cat_dim = cat
    d = _zero_column(zeros, x, [n.consts.get("dim"), args[0], cat_dim],
                     args[2] if isinstance(args[2], int) else -1)
    return None if d is None else _exclusive(b, n, x, d)


def _lower_cut_exclusive_cumsum(b: _Builder, n: Node, cut: Node,
                                 nodes: dict[int, Node]) -> int | None:
    """cumsum over the last dim d of cat((zeros, x), d)[:stop], where zeros is x's shape with
    size 1 along d and the slice takes leading rows (KernelBench's original spelling, whose
    ``[:-1]`` drops the last row rather than the last column): the
    exclusive cumsum along d of x's first rows with one zero column put at their end, a
    result one column wider than x. One scan node (``exclusive``, ``pad`` 1, ``rows_stop``)
    the scan family reads with nothing fused around it; None for any other cut."""
    spec = cut.consts.get("slices")
    cat = _cat_parts(nodes.get(cut.tensors.get("input", -1)), nodes)
    if cat is None or not isinstance(spec, list) or len(spec) != 1:
        return None
    if not isinstance(spec[0], list) or spec[0][0] not in (None, 0) or spec[0][2] not in (
            None, 1) or not isinstance(spec[0][1], int):
        return None
    zeros, x, cat_dim = cat
    nd = len(x.shape)
    d = _zero_column(zeros, x, [n.consts.get("dim"), cat_dim], x.shape[-1] if nd else -1)
    if d is None or nd < 2 or d != nd - 1:
        return None
    return b.call("cumsum", f"{n.target} (exclusive, of rows cut and padded)",
                  {"input": b.new_id[x.id]},
                  {"dim": d, "exclusive": True, "pad": 1, "rows_stop": spec[0][1]}, n)


def _lower_exclusive_cat(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """cat((zeros, cumsum(narrow(x, d, 0, x.size(d) - 1), d)), d), where zeros is x's shape
    with size 1 along d (KernelBench's spelling since its pull request 109, December 2025): the
    exclusive cumsum of x, as :func:`_lower_exclusive_cumsum`; None for any other cat."""
    cat = _cat_parts(n, nodes)
    if cat is None or cat[1].op != "cumsum" or cat[1].consts.get("dtype") is not None:
        return None
    zeros, cs, cat_dim = cat
    nar = nodes.get(cs.tensors.get("input", -1))
    args = _narrow_args(nar)
    if args is None or nar is None or args[1] != 0 or not isinstance(args[2], int):
        return None
    x = nodes[nar.tensors["input"]]
    d = _zero_column(zeros, x, [cs.consts.get("dim"), args[0], cat_dim], args[2] + 1)
    if d is None or tuple(n.shape) != tuple(x.shape):
        return None
    return _exclusive(b, n, x, d)


def _lower_softmax(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """A softmax / log-softmax over a dim that is not the last (over the channels of an
    NCHW tensor, say): ``exp(x - logsumexp(x, dim, keepdim=True))`` / ``x - logsumexp(...)``,
    the logsumexp a strided reduction mapped back over the values it reduces (two reads of
    x; statistics and arithmetic in fp32). Over the last dim the row family computes it."""
    x_id = n.tensors.get("input")
    dim = n.consts.get("dim")
    if x_id is None or n.consts.get("dtype") is not None or not isinstance(dim, int):
        return None
    nd = len(nodes[x_id].shape)
    if nd < 2 or not -nd <= dim < nd or dim % nd == nd - 1:
        return None
    t = f"{n.target} (lowered)"
    x = b.new_id[x_id]
    d = dim % nd
    shape = tuple(1 if i == d else s for i, s in enumerate(nodes[x_id].shape))
    lse = b.call("logsumexp", t, {"input": x}, {"dim": [d], "keepdim": True}, n, shape)
    diff = b.call("sub", t, {"input": x, "other": lse}, {}, n)
    return diff if n.op == "log_softmax" else b.call("exp", t, {"input": diff}, {}, n)


def _lower_sdpa(b: _Builder, n: Node, nodes: dict[int, Node]) -> int | None:
    """``F.scaled_dot_product_attention(q, k, v)`` without a mask, dropout, causal masking or
    grouped heads: ``softmax(q @ k^T * scale, -1) @ v`` (a chain: the batched product with the
    scale fused, the row softmax, the second product). ``scale`` defaults to 1 / sqrt(E), E the
    query's last dim at capture (hidden shapes vary the batch, not E)."""
    q, k, v = (n.tensors.get(key) for key in ("query", "key", "value"))
    c = n.consts
    if q is None or k is None or v is None or "attn_mask" in n.tensors or c.get("attn_mask") \
            is not None or c.get("dropout_p", 0.0) not in (0, 0.0) or c.get("is_causal") \
            or c.get("enable_gqa"):
        return None
    qs, ks, vs = nodes[q].shape, nodes[k].shape, nodes[v].shape
    if len(qs) < 2 or len(qs) != len(ks) or len(ks) != len(vs) or qs[:-2] != ks[:-2] \
            or ks[:-2] != vs[:-2] or qs[-1] != ks[-1] or ks[-2] != vs[-2]:
        return None
    scale = c.get("scale")
    scale = 1.0 / math.sqrt(qs[-1]) if scale is None else scale
    if not isinstance(scale, (int, float)):
        return None
    t = f"{n.target} (lowered)"
    kt_shape = (*ks[:-2], ks[-1], ks[-2])
    kt = b.call("transpose", t, {"input": b.new_id[k]}, {"dims": [-2, -1]}, nodes[k], kt_shape)
    s_shape = (*qs[:-1], ks[-2])
    s = b.call("matmul", t, {"input": b.new_id[q], "other": kt}, {}, n, s_shape)
    # The scores stay fp32 (the fused kernels PyTorch runs keep them in fp32 registers): in
    # fp16 the product of inputs of a few thousand overflows, and a rounded score moves its
    # probability by a part in a few hundred. The probabilities are rounded to the inputs'
    # dtype for the second product, as those kernels do.
    s = b.call("mul", t, {"input": s}, {"other": float(scale)}, n, s_shape, "float32")
    p = b.call("softmax", t, {"input": s}, {"dim": -1}, n, s_shape)
    return b.call("matmul", t, {"input": p, "other": b.new_id[v]}, {}, n)


_LOWER = {"norm": _lower_norm, "vector_norm": _lower_norm, "normalize": _lower_normalize,
          "sdpa": _lower_sdpa, "softmax": _lower_softmax, "log_softmax": _lower_softmax,
          "batch_norm": _lower_batch_norm, "smooth_l1_loss": _lower_loss,
          "huber_loss": _lower_loss, "mse_loss": _lower_loss, "l1_loss": _lower_loss,
          "kl_div": _lower_loss,
          **{f"adaptive_{k}_pool{d}d": _lower_adaptive for k in ("avg", "max") for d in (1, 2, 3)},
          "einsum": _lower_einsum, "matmul": _lower_product, "mm": _lower_product,
          "cumsum": _lower_exclusive_cumsum, "cosine_similarity": _lower_cosine_similarity,
          "triplet_margin_loss": _lower_triplet_margin_loss}
_LOWER_BY_TARGET = {t: _lower_exclusive_cat for t in _CATS}


def _lowering(n: Node):
    """The lowering of call node n (by its op, else by its target), or None."""
    if n.kind != "call":
        return None
    return _LOWER.get(n.op) or _LOWER_BY_TARGET.get(n.target)


def lower(cap: Captured) -> Captured:
    """The captured forward with its composite ops rewritten (see the module docstring)."""
    if cap.error or not any(_lowering(n) for n in cap.nodes):
        return cap
    nodes = {n.id: n for n in cap.nodes}
    b = _Builder()
    for n in cap.nodes:
        tensors = {k: b.new_id[v] for k, v in n.tensors.items()}
        fn = _lowering(n)
        if fn is not None:
            new = fn(b, n, nodes)
            if new is not None:
                b.new_id[n.id] = new
                continue
        b.add(replace(n, tensors=tensors), n.id)
    output = b.new_id.get(cap.output, -1) if cap.output >= 0 else -1
    return replace(cap, nodes=tuple(b.nodes), output=output)
