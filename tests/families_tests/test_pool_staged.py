"""The staged pool kernel's index arithmetic, checked on the CPU against torch (no DSL, no GPU).

``PoolStagedKernel.__init__`` (with ``PoolKernel.__init__``: the span offset ``off``, the
accesses per span ``chunks`` and per thread ``cpt``, the tiles of an output row, the CTAs of
a plane), the host's ``_pool_tile`` / ``_pool_staged`` and ``_pool_out`` are taken from
``templates/pool.py.tmpl`` (with head.py.tmpl's ``_vector_width``) and run here;
:func:`emulate` then walks the CTAs as the kernel does (each CTA: its tile's span read in
``vec``-element accesses, folded over the leading window positions into column results, which
its outputs fold along the last dim from "shared memory") in float64, and the result is
compared with ``F.max_poolNd`` / ``F.avg_poolNd``. On the way it asserts what the kernel's
accesses rest on: every access starts at a multiple of ``vec`` and lies wholly inside the row
or wholly outside it, the CTA's threads cover every access of the span, no output reads a
column past the span (shared memory) or one no thread wrote, and every output is written once.
"""

import ast
import itertools
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

TEMPLATES = Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
_FUNCS = ("_pool_out", "_pool_tile", "_pool_staged")
_CONSTS = ("_STAGE_PER_THREAD", "_STAGE_FLOATS", "_STAGE_LANE_BYTES")


def _namespace(tunables: dict) -> dict:
    """The pool kernels' constructors, the staged kernel's host helpers and constants, and
    ``_vector_width`` from head.py.tmpl, with TUNABLES = ``tunables``."""
    tree = ast.parse((TEMPLATES / "pool.py.tmpl").read_text())
    keep: list = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in ("PoolKernel", "PoolStagedKernel"):
            node.body = [n for n in node.body
                         if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
            node.decorator_list = []
            keep.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name in _FUNCS:
            node.decorator_list = []
            keep.append(node)
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in _CONSTS:
            keep.append(node)
    head = ast.parse((TEMPLATES / "head.py.tmpl").read_text())
    keep += [n for n in head.body if isinstance(n, ast.FunctionDef) and n.name == "_vector_width"]
    assert len(keep) == 2 + len(_FUNCS) + len(_CONSTS) + 1
    ns: dict = {"TUNABLES": tunables, "math": math, "torch": torch}
    exec(compile(ast.Module(keep, []), "pool.py.tmpl", "exec"), ns)  # noqa: S102
    return ns


class _Width:
    """A stand-in for a CuTe dtype: the constructors read only ``width``."""

    def __init__(self, bits: int):
        self.width = bits


def _divisor(starts_lead, o_last, sizes, kernel, stride, padding, include_pad, divisor) -> int:
    """torch's average divisor of the window at (starts_lead..., o_last)."""
    if divisor:
        return divisor
    n = 1
    for d in range(len(sizes)):
        lo = starts_lead[d] if d < len(sizes) - 1 else o_last * stride[d] - padding[d]
        hi = min(lo + kernel[d], sizes[d] + padding[d])
        if not include_pad:
            lo, hi = max(lo, 0), min(hi, sizes[d])
        n *= hi - lo
    return n


def emulate(x: torch.Tensor, sp: int, kernel, stride, padding, dilation, ceil_mode: bool,
            mode: str, include_pad: bool = True, divisor: int = 0,
            tunables: dict | None = None) -> torch.Tensor | None:
    """pool(x) over its last ``sp`` dims as PoolStagedKernel computes it (None where the
    host would not stage it)."""
    tun = {"threads": 256, "vec_bits": 128, "pool_stage": True, **(tunables or {})}
    ns = _namespace(tun)
    sizes = tuple(x.shape[-sp:])
    planes = x.numel() // math.prod(sizes)
    outs = ns["_pool_out"](sizes, kernel, stride, padding, dilation, ceil_mode)
    got = ns["_pool_staged"](x, [], sizes, kernel, stride, padding, dilation, outs,
                             tun["threads"], 1)
    if got is None:
        return None
    vec, tile = got
    kern = ns["PoolStagedKernel"](None, None, (_Width(8 * x.element_size()),), (), _Width(32),
                                  sizes, outs, kernel, stride, padding, dilation, mode,
                                  include_pad, divisor, tun["threads"], vec, tile)
    assert kern.cpt * kern.threads >= kern.chunks  # the threads cover the span
    assert kern.chunks * kern.vec <= ns["_STAGE_FLOATS"]  # shared memory
    ident = -math.inf if mode == "max" else 0.0
    last = sp - 1
    W, OW = sizes[last], outs[last]
    k, s, dl = kernel[last], stride[last], dilation[last]
    xs = x.double().reshape(planes, *sizes)
    out = torch.full((planes, math.prod(outs)), math.nan, dtype=torch.float64)
    written = [0] * math.prod(outs)  # writes of each output (every plane at once)
    for b in range(kern.ctas_per_plane):  # every plane at once
        t, rem = b % kern.tiles, b // kern.tiles
        o0 = t * kern.tile
        starts = [0] * sp
        row_out = 0
        for q in range(1, sp):
            d = sp - 1 - q
            o, rem = rem % outs[d], rem // outs[d]
            starts[d] = o * stride[d] - padding[d]
            row_out += o * math.prod(outs[d + 1:])
        a0 = o0 * s - padding[last] - kern.off
        assert a0 % vec == 0
        pos = a0 + torch.arange(kern.chunks * vec)
        inside = (pos >= 0) & (pos < W)
        whole = inside.view(kern.chunks, vec)  # an access is wholly in the row or out of it
        assert bool((whole.all(1) | ~whole.any(1)).all())
        cols = torch.full((planes, kern.chunks * vec), ident, dtype=torch.float64)
        for kk in itertools.product(*(range(kernel[d]) for d in range(last))):
            at = [starts[d] + kk[d] * dilation[d] for d in range(last)]
            if not all(0 <= a < sizes[d] for d, a in enumerate(at)):
                continue  # a window row outside the input: nothing read
            row = xs[(slice(None), *at)]
            vals = torch.full_like(cols, ident)
            vals[:, inside] = row[:, pos[inside]]
            cols = torch.maximum(cols, vals) if mode == "max" else cols + vals
        for o in range(kern.tile):
            og = o0 + o
            if og >= OW:
                continue
            idx = [kern.off + o * s + j * dl for j in range(k)]
            assert max(idx) < kern.chunks * vec  # within the staged span
            win = cols[:, idx]
            y = win.amax(1) if mode == "max" else win.sum(1)
            if mode == "avg":
                y = y / _divisor(starts, og, sizes, kernel, stride, padding, include_pad,
                                 divisor)
            out[:, row_out + og] = y
            written[row_out + og] += 1
    assert set(written) == {1}, "an output written twice, or by no CTA"
    return out.view(*x.shape[:-sp], *outs)


def _torch(x, sp, kernel, stride, padding, dilation, ceil_mode, mode, include_pad=True,
           divisor=0):
    xd = x.double()
    if mode == "max":
        f = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[sp - 1]
        return f(xd, kernel, stride, padding, dilation, ceil_mode=ceil_mode)
    f = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[sp - 1]
    if sp == 1:
        return f(xd, kernel, stride, padding, ceil_mode, include_pad)
    return f(xd, kernel, stride, padding, ceil_mode, include_pad, divisor or None)


# (shape, sp, kernel, stride, padding, dilation, ceil_mode, mode, include_pad, divisor, tunables)
CASES = [
    ((2, 3, 23, 64), 2, (11, 11), (11, 11), (0, 0), (1, 1), False, "avg", True, 0, {}),
    ((2, 3, 19, 104), 2, (7, 7), (7, 7), (2, 2), (1, 1), False, "avg", True, 0, {}),
    ((1, 2, 17, 108), 2, (7, 7), (7, 7), (3, 3), (1, 1), True, "avg", False, 0, {}),
    ((2, 2, 13, 96), 2, (3, 5), (2, 6), (1, 2), (1, 1), False, "avg", True, 7, {}),
    ((2, 3, 21, 84), 2, (3, 3), (5, 5), (1, 1), (2, 2), True, "max", False, 0, {}),
    ((1, 2, 9, 8), 2, (3, 3), (5, 5), (1, 1), (2, 2), True, "max", False, 0, {}),
    # several tiles a row: 32 threads, so at most 128 accesses of 4 (512 columns) a tile
    ((1, 2, 5, 4092), 2, (3, 3), (3, 7), (1, 1), (1, 1), False, "max", False, 0,
     {"threads": 32}),
    ((1, 2, 5, 4092), 2, (5, 9), (5, 9), (2, 4), (1, 1), True, "avg", False, 0,
     {"threads": 32}),
    ((3, 4, 1000), 1, (16,), (16,), (0,), (1,), False, "avg", True, 0, {}),
    ((2, 3, 1003), 1, (4,), (9,), (2,), (3,), True, "max", False, 0, {}),
    ((2, 2, 7, 9, 40), 3, (2, 3, 5), (2, 3, 5), (1, 1, 2), (1, 1, 1), False, "avg", True, 0,
     {}),
    ((1, 2, 7, 9, 40), 3, (3, 2, 3), (2, 2, 6), (1, 1, 1), (2, 1, 3), True, "max", False, 0,
     {}),
    # 64-bit accesses (vec_bits) and 32-bit ones (a row of odd length)
    ((2, 2, 11, 60), 2, (5, 5), (5, 5), (0, 0), (1, 1), False, "avg", True, 0,
     {"vec_bits": 64}),
    ((2, 2, 11, 61), 2, (5, 5), (5, 5), (2, 2), (1, 1), True, "avg", True, 0, {}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[7]}{c[1]}d-{'x'.join(map(str, c[0]))}-"
                                              f"k{c[2]}s{c[3]}p{c[4]}d{c[5]}"
                                              f"{'-ceil' if c[6] else ''}-{i}"
                                              for i, c in enumerate(CASES)])
def test_staged_pool_matches_torch(case):
    shape, sp, k, s, p, d, ceil, mode, inc, div, tun = case
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) + shape[-1]))
    got = emulate(x, sp, k, s, p, d, ceil, mode, inc, div, tun)
    assert got is not None
    want = _torch(x, sp, k, s, p, d, ceil, mode, inc, div)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_staged_pool_keeps_nans():
    """A NaN in a window makes its max NaN, as torch's max pooling does (the fold is
    emulated with torch.maximum, which propagates NaN like the kernel's _nanmax)."""
    x = torch.randn(1, 1, 7, 40, dtype=torch.float64)
    x[0, 0, 4, 15] = math.nan  # in the window of output (1, 3); windows leave gaps
    got = emulate(x, 2, (3, 3), (5, 5), (1, 1), (1, 1), False, "max")
    want = F.max_pool2d(x, 3, 5, 1)
    assert torch.equal(got.isnan(), want.isnan()) and bool(got.isnan().any())


def test_auto_stages_wide_strides_only():
    """'auto' stages where the thread-per-outputs kernel's lanes would read 64 bytes apart or
    more (KernelBench L1 45's 11 x 11 windows at stride 11 in fp32: 176 bytes), and leaves
    stride 1 and 2 windows (the bundled pools, at 97-104 % of the copy bandwidth) as they
    are; windows too wide for a CTA's shared memory are never staged."""
    ns = _namespace({"threads": 256, "vec_bits": 128, "pool_stage": "auto"})
    x = torch.empty(1, 1, 8, 2048)
    kw = dict(kernel=(11, 11), stride=(11, 11), padding=(0, 0), dilation=(1, 1))
    outs = ns["_pool_out"]((8, 2048), ceil_mode=False, **kw)
    assert ns["_pool_staged"](x, [], (8, 2048), outs=outs, threads=256, ow=4, **kw) == (4, 186)
    kw3 = dict(kernel=(3, 3), stride=(2, 2), padding=(1, 1), dilation=(1, 1))
    outs = ns["_pool_out"]((8, 2048), ceil_mode=False, **kw3)
    assert ns["_pool_staged"](x, [], (8, 2048), outs=outs, threads=256, ow=2, **kw3) is None
    assert ns["_pool_tile"](64, 5000, 1, 0, 1, 4, 256) == 0  # a 5000-wide window
    ns["TUNABLES"]["pool_stage"] = False
    assert ns["_pool_staged"](x, [], (8, 2048), outs=ns["_pool_out"](
        (8, 2048), ceil_mode=False, **kw), threads=256, ow=4, **kw) is None


def _proposals(name: str):
    import random

    from cutegen.codegen.rewriters.base import RewriteContext
    from cutegen.codegen.rewriters.builtin import BuiltinRewriter
    from cutegen.codegen.tasks import load_bundled_task

    task = load_bundled_task(name)
    props = [p for p in BuiltinRewriter().initial(RewriteContext(task=task), n=8,
                                                  rng=random.Random(0))
             if p.move.kind == "family"]
    return task, props


def test_root_offers_the_unstaged_kernel_second_where_the_default_stages():
    """Where "auto" stages at the task's shape (the bundled 6 GB wide-stride pool), the
    second root candidate is the thread-per-outputs kernel (the one a search falls back on);
    a parent gets the other settings of the knob as moves. Where it does not stage (stride
    2), the root offers no such variant."""
    from cutegen.codegen.candidate import parse_tunables
    from cutegen.codegen.families.moves import family_moves, recognition_for
    from cutegen.codegen.families.render_pool import staged_by_default
    from cutegen.codegen.rewriters.base import RewriteContext

    task, props = _proposals("avg_pool2d_wide_fp32")
    plan = recognition_for(task, in_process=True).plans[0]
    assert staged_by_default(plan)
    assert props[0].move.params.get("pool_stage") is None
    assert parse_tunables(props[0].candidate.code)["pool_stage"].value == "auto"
    assert props[1].move.params["pool_stage"] is False
    assert "not staged" in props[1].move.description
    assert parse_tunables(props[1].candidate.code)["pool_stage"].value is False
    flips = [p for p in family_moves(RewriteContext(task=task, parent=props[0].candidate))
             if p.move.params.get("name") == "pool_stage"]
    assert sorted(str(p.move.params["to"]) for p in flips) == ["False", "True"]
    task, props = _proposals("avg_pool2d_fp32")  # stride 2: lanes 16 bytes apart
    assert not staged_by_default(recognition_for(task, in_process=True).plans[0])
    assert not any("pool_stage" in p.move.params for p in props)


def test_the_root_and_the_candidate_agree_on_staging():
    """render_pool.staged_by_default (the root's choice of a second candidate) decides as the
    candidate's own ``_pool_staged`` does at the task's main shape, for every pool task."""
    import _cutegen_famdata as fd  # registered by conftest.py

    from cutegen.codegen.families.render_pool import staged_by_default

    ns = _namespace({"threads": 256, "vec_bits": 128, "pool_stage": "auto"})
    names = [n for n in fd.reduce_task_names() if fd.plan_of(n).family == "pool"]
    seen = set()
    for name in names:
        plan = fd.plan_of(name)
        lf = plan.leaf(plan.main)
        sp = plan.param("spatial")
        sizes = tuple(lf.shape[-sp:])
        x = torch.empty(lf.shape, dtype=getattr(torch, lf.dtype))
        kw = {k: tuple(plan.param(k)) for k in ("kernel", "stride", "padding", "dilation")}
        outs = ns["_pool_out"](sizes, ceil_mode=plan.param("ceil_mode"), **kw)
        vec = ns["_vector_width"](sizes[-1], 128, x, [])
        ow = vec // math.gcd(kw["stride"][-1], vec)
        staged = ns["_pool_staged"](x, [], sizes, outs=outs, threads=256, ow=ow, **kw)
        assert staged_by_default(plan) == (staged is not None), name
        seen.add(staged is not None)
    assert seen == {True, False}  # both ways among the tasks
