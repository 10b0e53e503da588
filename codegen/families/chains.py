"""Chains of family kernels: a forward with several anchors in a row (a matrix product, then a
norm, a pooling or a reduction of what it wrote, then more) becomes one plan per kernel.

The forward is cut at the input of every anchor after the first (the value the next family
kernel reads): stage j computes everything after cut j - 1 up to cut j, with cut j - 1 read
as a new input ``_stage{j-1}`` (the tensor the previous kernel wrote, in the dtype the
reference has there). Each stage is matched as a forward of its own, so it fuses the
pointwise ops around its anchor as any plan does: a level-2 GEMM chain (Gemm -> BatchNorm ->
GELU -> GroupNorm -> mean -> ReLU) is the GEMM with its bias, batch norm with GELU fused
into its normalising pass, group norm, and the mean with the ReLU.

A chain is covered when every stage is, and no value computed before a cut is used after it
except through the cut (that value would need a kernel output of its own).

Where that line fails (several reductions of the inputs feeding one later op, as in a cosine
similarity or a triplet-margin loss: three row sums, then a mean of a pointwise combination
of them), the forward is cut at every anchor's *output* instead (:func:`dag_plan`): stage j
is anchor j with the pointwise ops feeding it (recomputed from the inputs where two stages
share them), writing ``_stage{j}``; the last stage reads any earlier ``_stage{i}`` it needs
(where the last anchor cannot read them, as in a per-row cosine similarity, every anchor
writes its result and the ops after the last are a pointwise stage). Consecutive stages that
are plain row sums of the inputs run as one kernel (``render_chain``: ``_Sums``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cutegen.codegen.families.capture import Captured, Node
from cutegen.codegen.families.matcher import Matcher, NotCoveredError
from cutegen.codegen.families.ops import CONV_OPS, MATMUL_OPS, POOL_OPS, ROW_OPS, SCAN_OPS
from cutegen.codegen.families.plan import Chain, Plan

#: Ops that start a family kernel of their own.
ANCHOR_OPS = MATMUL_OPS | ROW_OPS | SCAN_OPS | POOL_OPS


def is_anchor(n: Node) -> bool:
    """Whether a captured node starts a family kernel (max / min of two tensors do not)."""
    return n.kind == "call" and n.op in ANCHOR_OPS and not (
        n.op in ("max", "min") and "other" in n.tensors)


def anchors_of(m: Matcher, out: int) -> list[int]:
    """The anchors the output depends on, in graph order."""
    return sorted(i for i in m.ancestors(out) if is_anchor(m.node(i)))


def _stage(cap: Captured, m: Matcher, start: int | None, end: int, j: int,
           base: int = 0) -> Captured:
    """The forward of stage j: the nodes after ``start`` up to ``end``, ``start`` read as the
    input ``_stage{base+j-1}`` (``base``: the kernels before this chain's first)."""
    before = m.ancestors(start) if start is not None else set()
    needed = m.ancestors(end)
    nodes: list[Node] = []
    for n in cap.nodes:
        if n.id == start:
            nodes.append(Node(n.id, "input", f"_stage{base + j - 1}", shape=n.shape,
                              dtype=n.dtype))
        elif n.kind in ("input", "param", "output"):
            nodes.append(n)
        elif n.id in needed and n.id not in before:
            for t in n.tensors.values():
                if t in before and t != start and m.node(t).kind == "call":
                    raise NotCoveredError(
                        f"the result of {m.node(t).target or m.node(t).op} is used by two kernels "
                        "of a chain (only the value one kernel writes reaches the next)",
                        m.node(t).op)
            nodes.append(n)
    args = cap.forward_args + ((f"_stage{base + j - 1}",) if start is not None else ())
    return replace(cap, nodes=tuple(nodes), output=end, forward_args=args)


def _dag_stage(cap: Captured, m: Matcher, cuts: list[int], end: int, j: int,
               base: int = 0) -> Captured:
    """The forward of stage j of a DAG chain: what ``end`` needs, read from the inputs and from
    the earlier stages' outputs (``cuts[i]`` as the input ``_stage{i}``), nothing else of an
    earlier stage."""
    index = {c: base + i for i, c in enumerate(cuts[:j])}
    needed = m.ancestors(end, stop=set(index))
    nodes: list[Node] = []
    for n in cap.nodes:
        if n.id in index and n.id in needed:
            nodes.append(Node(n.id, "input", f"_stage{index[n.id]}", shape=n.shape,
                              dtype=n.dtype))
        elif n.kind in ("input", "param", "output") or n.id in needed:
            nodes.append(n)
    used = tuple(f"_stage{index[c]}" for c in sorted(index, key=index.get) if c in needed)
    return replace(cap, nodes=tuple(nodes), output=end, forward_args=cap.forward_args + used)


def _valued(m: Matcher, a: int, end: int) -> int | None:
    """The node holding anchor ``a``'s tensor: ``a`` itself, or the ``[0]`` (values) of a
    ``torch.min`` / ``max`` over a dim, whose result is a (values, indices) pair."""
    if m.node(a).dtype:
        return a
    uses = m.users(a, m.ancestors(end))
    if len(uses) == 1 and m.node(uses[0]).op == "getitem" and m.node(uses[0]).dtype:
        return uses[0]
    return None


def dag_plan(cap: Captured, match: Callable[[Captured], Plan], base: int = 0) -> Plan:
    """A chain cut at every anchor's output but the last (see the module docstring); where
    the last anchor's kernel cannot read the earlier results, cut at every anchor's output,
    the ops after the last one a pointwise kernel of their own. ``base``: the kernels before
    this chain's first (a convolution's, :func:`conv_then`), so its results are numbered on.

    Raises:
        NotCoveredError: a stage is not covered, or an earlier stage would write a loss.
    """
    m = Matcher(cap)
    anchors = anchors_of(m, cap.output)
    names = ", ".join(m.node(a).op for a in anchors)
    # The last anchor with the ops after it as the last kernel; where that kernel cannot read
    # the earlier results (a per-row cosine similarity: its last sum's row values combined
    # with the others'), every anchor writes its result and a pointwise kernel combines them.
    tries = [anchors[:-1]] + ([anchors] if anchors and anchors[-1] != cap.output else [])
    first = NotCoveredError("not a chain of kernels", "chain")
    for k, cuts in enumerate(tries):
        if not cuts or any(not m.node(c).dtype for c in cuts):
            raise NotCoveredError("not a chain of kernels", "chain")
        ends = cuts + [cap.output]
        plans: list[Plan] = []
        try:
            for j, end in enumerate(ends):
                try:
                    plan = match(_dag_stage(cap, m, cuts, end, j, base))
                except NotCoveredError as e:
                    raise NotCoveredError(f"{e.nc.reason} (kernel {j + 1} of {len(ends)}, each "
                                          f"reading the inputs and earlier results: {names})",
                                          e.nc.op) from e
                if j + 1 < len(ends) and plan.out_shape in ("scalar",):
                    raise NotCoveredError(f"kernel {j + 1} of a chain writes a loss", plan.op)
                plans.append(plan)
        except NotCoveredError as e:
            first = first if k else e
            continue
        return _chain_of(plans, cap)
    raise first  # the reason of the first way (the second only tries where it failed)


def _chain_of(plans: list[Plan], cap: Captured) -> Plan:
    leaves = {lf.name: lf for p in plans for lf in p.leaves if not lf.name.startswith("_stage")}
    desc = " -> ".join(f"[{p.family}] {p.description}" for p in plans)
    last = plans[-1]
    return Plan("chain", "+".join(p.op for p in plans), tuple(leaves.values()), plans[0].main,
                Chain((), f"@{plans[0].main}"), Chain((), "%y"), (("stages", tuple(plans)),),
                last.out_dtype, last.out_shape, cap.forward_args,
                f"chain of {len(plans)} kernels: {desc}")


def chain_plan(cap: Captured, match: Callable[[Captured], Plan], base: int = 0) -> Plan:
    """The chain of one plan per anchor (see the module docstring); ``match`` recognises one
    stage (a forward with one anchor). A stage whose pointwise tail does not fuse into its
    kernel (an operand the family cannot broadcast there, e.g. a per-channel scale after a
    group norm) is cut after its anchor: the tail runs as a pointwise kernel of its own.
    ``base``: as for :func:`dag_plan`.

    Raises:
        NotCoveredError: a stage is not covered (its reason, with its place in the chain), or
            a value crosses a cut.
    """
    m = Matcher(cap)
    anchors = anchors_of(m, cap.output)
    cuts: list[int] = []
    for a in anchors[1:]:
        n = m.node(a)
        x = n.tensors.get("mat1" if n.op == "addmm" else "input")
        if x is None or m.node(x).kind != "call" or (cuts and x <= cuts[-1]):
            raise NotCoveredError(f"{n.target or n.op} does not read the previous kernel's result",
                                  n.op)
        cuts.append(x)
    names = ", ".join(m.node(a).op for a in anchors)
    for _ in range(len(anchors) + 1):
        plans: list[Plan] = []
        ends = cuts + [cap.output]
        retry = None
        for j, end in enumerate(ends):
            start = cuts[j - 1] if j else None
            stage = _stage(cap, m, start, end, j, base)
            try:
                plan = match(stage)
            except NotCoveredError as e:
                inside = [a for a in anchors if a in m.ancestors(end) and (
                    start is None or a not in m.ancestors(start))]
                last = _valued(m, inside[-1], end) if inside else None
                if e.nc.op == "broadcast" and last is not None and last not in cuts \
                        and last != end:
                    retry = last  # cut after the anchor: its tail as a kernel of its own
                    break
                raise NotCoveredError(f"{e.nc.reason} (kernel {j + 1} of a chain of {len(ends)}:"
                                      f" {names})", e.nc.op) from e
            if j + 1 < len(ends) and plan.out_shape in ("scalar",):
                raise NotCoveredError(f"kernel {j + 1} of a chain writes a loss", plan.op)
            plans.append(plan)
        if retry is None:
            break
        cuts = sorted(set(cuts) | {retry})
    return _chain_of(plans, cap)


def conv_then(cap: Captured, first: Callable[[Captured], Plan],
              rest: Callable[[Captured, int], Plan], base: int = 0) -> Plan:
    """A convolution whose forward goes on past what the conv family computes (a sum over
    [1, 2, 3], a min over one spatial dim then a softmax, a LayerNorm over the last dim): cut
    at the latest value after the convolution up to which ``first`` (the conv family) covers
    the forward and from which ``rest(stage, 1)`` (the other families, a chain of their own
    numbered on from kernel 1) covers the remainder. The conv kernel (with its fused
    epilogue and tails) writes ``_stage0``; the rest reads it. ``base``: the kernels before
    the convolution's (:func:`before_conv`), so its results are numbered on.

    Raises:
        NotCoveredError: no cut works (the caller reports the conv family's own reason).
    """
    m = Matcher(cap)
    out = cap.output
    live = m.ancestors(out)
    convs = [i for i in live if m.node(i).kind == "call" and m.node(i).op in CONV_OPS]
    if len(convs) != 1:
        raise NotCoveredError("not one convolution", "conv")
    cuts = sorted((i for i in live if i != out and m.node(i).kind == "call"
                   and m.node(i).dtype and convs[0] in m.ancestors(i)), reverse=True)
    why = ""
    for x in cuts:
        try:
            head = first(_stage(cap, m, None, x, 0))
        except NotCoveredError:
            continue
        try:
            tail = rest(_stage(cap, m, x, out, 1, base), base + 1)
        except NotCoveredError as e:
            why = why or f"; cut after {m.node(x).target or m.node(x).op}, the rest: {e.nc.reason}"
            continue
        plans = [head, *(tail.param("stages") if tail.family == "chain" else (tail,))]
        if any(p.out_shape == "scalar" for p in plans[:-1]):
            continue
        return _chain_of(plans, cap)
    raise NotCoveredError("no cut after the convolution leaves a remainder the other families "
                          f"cover{why}", "conv")


def before_conv(cap: Captured, head: Callable[[Captured], Plan],
                tail: Callable[[Captured, int], Plan]) -> Plan:
    """A forward whose last convolution reads a computed value (a pooling before a transposed
    convolution, a depthwise convolution before a pointwise one): the forward up to that value
    runs as kernels of their own (``head``: any forward's plan, a chain included), and the rest,
    from the convolution on, reads their result as ``_stage{k-1}`` (``tail(stage, k)``: the
    convolution's plan, its own results numbered on from kernel k).

    Raises:
        NotCoveredError: no convolution reads a computed value, or a part is not covered
            (its reason, naming the part).
    """
    m = Matcher(cap)
    live = m.ancestors(cap.output)
    convs = sorted(i for i in live if m.node(i).kind == "call" and m.node(i).op in CONV_OPS)
    if not convs:
        raise NotCoveredError("no convolution", "conv")
    g = m.node(convs[-1])
    x = g.tensors.get("input")
    if x is None or m.node(x).kind != "call" or not m.node(x).dtype:
        raise NotCoveredError("the last convolution reads no computed value", "conv")
    name = g.target or g.op
    try:
        pre = head(_stage(cap, m, None, x, 0))
    except NotCoveredError as e:
        raise NotCoveredError(f"what {name} reads: {e.nc.reason}", e.nc.op) from e
    plans = list(pre.param("stages")) if pre.family == "chain" else [pre]
    if any(p.out_shape == "scalar" for p in plans):
        raise NotCoveredError(f"what {name} reads is a single value", "conv")
    k = len(plans)
    try:
        post = tail(_stage(cap, m, x, cap.output, 1, k - 1), k)
    except NotCoveredError as e:
        raise NotCoveredError(f"{name} on what the kernels before it wrote: {e.nc.reason}",
                              e.nc.op) from e
    plans += list(post.param("stages")) if post.family == "chain" else [post]
    return _chain_of(plans, cap)
