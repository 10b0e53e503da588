"""The ChannelKernel's arithmetic, run on the CPU against torch (no DSL, no GPU).

``ChannelKernel`` is taken from ``templates/conv_tail.py.tmpl`` as written (its ``@cute``
decorators dropped) and its ``kernel`` body is run once a thread over stand-ins for the few
CuTe calls it makes: pointers are (array, offset) pairs, ``make_tensor(ptr, layout)[0]`` reads
or writes one element, values are numpy fp32 scalars (fp32 rounding as on the GPU, exp in
fp32), ``fmax`` / ``fmin`` are IEEE's (a NaN operand loses). So the kernel text that runs on
the GPU is the text checked here: the online max-and-sum pass of the softmax, log-softmax and
logsumexp over more channels than registers hold, the three passes in registers for 64
channels or fewer, and what -inf, +inf and NaN channels do in both, against torch's own
results.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

TEMPLATES = Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
F32 = np.float32


class _Ptr:
    def __init__(self, buf: np.ndarray, off: int = 0):
        self.buf, self.off = buf, off

    def __add__(self, k: int) -> _Ptr:
        return _Ptr(self.buf, self.off + int(k))


class _Elem:
    """What ``make_tensor(ptr, make_layout(n))`` gives: element i reads as an fp32 value
    (with ``.to(dtype)``), and takes a store."""

    def __init__(self, ptr: _Ptr, n: int = 1):
        self.ptr, self.n = ptr, n

    def _at(self, i) -> int:
        if isinstance(i, tuple):  # CuTe's default layout of a shape: column-major
            off, stride = 0, 1
            for k, extent in zip(i, self.n, strict=True):
                off, stride = off + k * stride, stride * extent
            return self.ptr.off + off
        return self.ptr.off + i

    def __getitem__(self, i) -> _V:
        return _V(self.ptr.buf[self._at(i)])

    def __setitem__(self, i, v) -> None:
        self.ptr.buf[self._at(i)] = _V(v).v


class _V:
    """An fp32 value as the kernel's arithmetic sees it: every operation rounded to fp32."""

    __slots__ = ("v",)
    width = 32  # bits, as a CuTe dtype tells its copy atoms

    def __init__(self, v=0.0):
        self.v = F32(v.v if isinstance(v, _V) else v)

    def to(self, dtype):
        return dtype(self.v)

    def _op(self, other, f):
        with np.errstate(all="ignore"):
            return _V(f(self.v, F32(other.v if isinstance(other, _V) else other)))

    def __add__(self, o):
        return self._op(o, lambda a, b: a + b)

    def __radd__(self, o):
        return self._op(o, lambda a, b: b + a)

    def __sub__(self, o):
        return self._op(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._op(o, lambda a, b: b - a)

    def __mul__(self, o):
        return self._op(o, lambda a, b: a * b)

    def __rmul__(self, o):
        return self._op(o, lambda a, b: b * a)

    def __truediv__(self, o):
        return self._op(o, lambda a, b: a / b)

    def __rtruediv__(self, o):
        return self._op(o, lambda a, b: b / a)

    def __neg__(self):
        return _V(-self.v)


def _fmax(a, b):
    return _V(np.fmax(_V(a).v, _V(b).v))


def _fmin(a, b):
    return _V(np.fmin(_V(a).v, _V(b).v))


def _exp(x):
    with np.errstate(all="ignore"):
        return _V(np.exp(_V(x).v))


def _log(x):
    with np.errstate(all="ignore"):
        return _V(np.log(_V(x).v))


class _Smem:
    def allocate_tensor(self, dtype, layout, byte_alignment=0):
        return [dtype(0.0)] * 32


def _copy(atom, src, dst):
    """cute.copy of ``len`` elements between a memory view and a register list."""
    n = dst.n if isinstance(dst, _Elem) else len(dst)
    for e in range(n):
        dst[e] = src[e]


def _block_reduce(v, part, is_max, threads):
    assert threads == 1, "emulated CTAs are one thread: its own value is the CTA's"
    return v


def _tail_namespace():
    """The tail kernels and their norm helpers from conv_tail.py.tmpl (decorators dropped)
    and _conv_leaf_values / _FLT_MAX from conv_common.py.tmpl, over stand-ins for
    the CuTe calls they make; ``thread`` sets the (thread, block) index the next kernel body
    run sees."""
    tree = ast.parse((TEMPLATES / "conv_tail.py.tmpl").read_text())
    keep = [n for n in tree.body if (isinstance(n, ast.ClassDef) and n.name in (
        "ChannelKernel", "GroupNormKernel", "BatchNormKernel", "PoolKernel", "PlaneReduceKernel"))
        or (isinstance(n, ast.FunctionDef) and n.name in ("_norm_prologue", "_normed", "_norm_affine"))]
    assert len(keep) == 8
    for cls in keep:
        for f in cls.body:
            if isinstance(f, ast.FunctionDef):
                f.decorator_list = []
    common = ast.parse((TEMPLATES / "conv_common.py.tmpl").read_text())
    keep += [n for n in common.body if (isinstance(n, ast.Assign)
                                        and ast.unparse(n.targets[0]) == "_FLT_MAX")
             or (isinstance(n, ast.FunctionDef) and n.name == "_conv_leaf_values")]
    assert len(keep) == 10
    thread = SimpleNamespace(tidx=0, bidx=0, bidy=0)
    cute = SimpleNamespace(
        Pointer=object, make_layout=lambda n, **kw: n,
        make_tensor=lambda ptr, layout: _Elem(ptr, layout),
        make_rmem_tensor=lambda n, dtype: [dtype(0.0)] * n,
        make_copy_atom=lambda *a, **kw: None, copy=_copy, assume=lambda x, divby=1: x,
        nvgpu=SimpleNamespace(CopyUniversalOp=lambda: None),
        arch=SimpleNamespace(fmax=_fmax, fmin=_fmin,
                             thread_idx=lambda: (thread.tidx, 0, 0),
                             block_idx=lambda: (thread.bidx, thread.bidy, 0)),
        math=SimpleNamespace(exp=_exp, log=_log,
                             rsqrt=lambda x: _V(F32(1.0) / np.sqrt(_V(x).v))))
    cutlass = SimpleNamespace(range=lambda *a, unroll=1: range(*a), range_constexpr=range,
                              max=max, min=min, Constexpr=object)
    ns = {"cute": cute, "cutlass": cutlass, "cuda": SimpleNamespace(CUstream=object),
          "Float32": _V, "Int64": int, "Int32": int, "const_expr": lambda v: v,
          "_INF": math.inf, "SmemAllocator": _Smem, "_block_reduce": _block_reduce}
    exec(compile(ast.Module(keep, []), "conv_tail.py.tmpl", "exec"), ns)  # noqa: S102
    return ns, thread


def _run(kern, thread, blocks: int, threads: int, *args, blocks_y: int = 1) -> None:
    for by in range(blocks_y):
        for b in range(blocks):
            for t in range(threads):
                thread.tidx, thread.bidx, thread.bidy = t, b, by
                kern.kernel(*args)


def emulate(op: str, y: torch.Tensor, cached: int = 0) -> torch.Tensor:
    """``op`` over dim 1 of ``y`` (N, C, pixels) as the ChannelKernel computes it (fp32)."""
    ns, thread = _tail_namespace()
    n, c, size = y.shape
    threads = 4
    kern = ns["ChannelKernel"](op, _V, _V, None, (), (), 0, threads=threads, cached=cached)
    src = y.float().contiguous().view(-1).numpy().copy()
    reduce = op not in ("softmax", "log_softmax")
    out = np.full(n * size if reduce else n * c * size, np.nan, dtype=np.float32)
    place = _Ptr(out)
    _run(kern, thread, -(-n * size // threads), threads, _Ptr(src), place, place,
         (n, c, size), size, (place,), (place,), [0.0], (place,), (place,), [0.0])
    return torch.from_numpy(out).view(n, 1 if reduce else c, size)


def _torch(op: str, y: torch.Tensor) -> torch.Tensor:
    y64 = y.double()
    if op == "softmax":
        return torch.softmax(y64, 1)
    if op == "log_softmax":
        return torch.log_softmax(y64, 1)
    if op == "logsumexp":
        return torch.logsumexp(y64, 1, keepdim=True)
    return {"sum": y64.sum, "mean": y64.mean, "amax": y64.amax, "amin": y64.amin}[op](
        1, keepdim=True)


def _special(c: int) -> torch.Tensor:
    """(5, c, 3) fp32 values with, per image: finite values of a wide range; leading -inf
    channels; a pixel all -inf; a NaN; a +inf."""
    g = torch.Generator().manual_seed(c)
    y = torch.randn(5, c, 3, generator=g) * 30
    y[1, : c // 2, 0] = -math.inf
    y[1, ::3, 1] = -math.inf
    y[2, :, 0] = -math.inf
    y[3, c // 3, 1] = math.nan
    y[4, c - 1, 2] = math.inf
    y[0, :, 2] += 1e4  # exp overflows unless the max is taken off
    return y


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_the_channel_softmax_and_logsumexp_match_torch(op, cached):
    c = 40
    if cached and op == "logsumexp":
        pytest.skip("the register-held path is the (log-)softmax's only")
    y = _special(c)
    got = emulate(op, y, cached=c if cached else 0)
    want = _torch(op, y)
    if op == "logsumexp":
        # torch's logsumexp takes an infinite max as 0 (a +inf channel gives +inf); the kernel's
        # sum meets exp(inf - inf) there and gives NaN, as its two passes did: that pixel
        # is left out of the comparison
        want[4, 0, 2] = math.nan
    assert torch.equal(got.isnan(), want.isnan()), (got, want)
    fin = ~want.isnan()
    assert torch.equal(got[fin].isinf(), want[fin].isinf())
    both = fin & ~want.isinf()
    assert torch.allclose(got[both].double(), want[both], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp", "sum", "mean", "amax",
                                "amin"])
def test_many_channels_of_ordinary_values(op):
    """An online pass over 300 channels (the rescaled sum's error stays within fp32's)."""
    y = torch.randn(2, 300, 5, generator=torch.Generator().manual_seed(3)) * 4
    got = emulate(op, y)
    assert torch.allclose(got.double(), _torch(op, y), rtol=2e-5, atol=1e-6)


def emulate_norm_then(y: torch.Tensor, norm: str, groups: int, eps: float, weight, bias,
                      scale, op: str, window: int, stride: int, lo: float,
                      hi: float, vec: int) -> torch.Tensor:
    """clamp(reduce(norm(y) * scale), lo, hi) as ``_pool_launch`` / ``_plane_reduce_launch`` /
    ``_channel_launch`` with ``norm`` compute it (``op`` "max" / "avg": a pool of ``window``,
    ``stride``; "mean", "sum", "amax": over each plane; "channel_<op>": over the channels,
    held in registers where ``window``; KernelBench L2 85's tail with a GroupNorm, L2 11's, 72's
    and 77's kinds with a BatchNorm): the norm's statistics pass, one thread a CTA (its
    block reduction then its own sums), writes the scales and offsets (GroupNormKernel
    ``stats_only``; BatchNormKernel "stats" over three ranges a channel, then "affine"); the
    PoolKernel or PlaneReduceKernel with ``norm`` applies them and ``pre`` (the scale) to
    every value it reads, then ``post`` (the clamp)."""
    ns, thread = _tail_namespace()
    n, c, h, w = y.shape
    plane = h * w
    src = y.float().contiguous().view(-1).numpy().copy()
    wb = [_Ptr(t.float().numpy().copy()) if t is not None else _Ptr(src)
          for t in (weight, bias)]
    aff = np.full(2 * n * c, np.nan, dtype=np.float32)
    if norm == "group_norm":
        cg = c // groups
        gn = ns["GroupNormKernel"](_V, _V, eps, weight is not None, bias is not None, None, (),
                                   (), 0, vec, threads=1, stats_only=True)
        _run(gn, thread, n * groups, 1, _Ptr(src), _Ptr(aff), *wb,
             (n * groups, groups, cg, plane, plane // vec), plane // vec, (), (), [0.0])
    else:
        splits = 3
        total = n * (plane // vec)
        geo = (n, c, plane, plane // vec, splits, -(-total // splits))
        part = np.full(2 * c * splits, np.nan, dtype=np.float32)
        for stage in ("stats", "affine"):
            bn = ns["BatchNormKernel"](stage, _V, _V, eps, weight is not None,
                                       bias is not None, None, (), (), 0, vec, threads=1)
            _run(bn, thread, c, 1, _Ptr(src), _Ptr(aff), *wb, _Ptr(part), geo, plane // vec,
                 (), (), [0.0], blocks_y=splits)
    assert not np.isnan(aff).any(), "a scale or an offset left unwritten"

    def pre(y_, x_, v, r, s):
        return y_ * v[0]

    def post(y_, x_, v, r, s):
        return _fmin(_fmax(y_, s[0]), s[1])

    fused = {"norm": True, "pre": pre, "pre_full": (False,), "pre_row_kinds": (),
             "n_pre_scalars": 0}
    if op in ("max", "avg"):
        p, q = (h - window) // stride + 1, (w - window) // stride + 1
        kern = ns["PoolKernel"](op, _V, _V, (1, window, window), (1, stride, stride), post, (),
                                (), 2, threads=8, **fused)
        blocks, threads = -(-n * c * p * q // 8), 8
        geo, lead = (n * c, c, 1, h, w, 1, p, q), ((q, p, 1, c),)
        shape = (n, c, p, q)
    elif op.startswith("channel_"):  # over the channels: window > 0 holds them in registers
        red = op.removeprefix("channel_")
        kern = ns["ChannelKernel"](red, _V, _V, post, (), (), 2, threads=8,
                                   cached=c if window else 0, **fused)
        blocks, threads = -(-n * plane // 8), 8
        geo, lead = (n, c, plane), (plane,)
        shape = (n, c, h, w) if red.endswith("softmax") else (n, h, w)
    else:
        kern = ns["PlaneReduceKernel"](op, _V, _V, post, (), (), 2, threads=1, **fused)
        blocks, threads = n * c, 1
        geo, lead, shape = (n * c, c, plane), (), (n, c)
    out = np.full(math.prod(shape), np.nan, dtype=np.float32)
    place = _Ptr(out)
    _run(kern, thread, blocks, threads, _Ptr(src), _Ptr(out), _Ptr(aff), geo, *lead,
         (place,), (place,), [0.0, lo, hi], (place, _Ptr(scale.float().numpy().copy())),
         (place,), [0.0])
    return torch.from_numpy(out).view(shape)


@pytest.mark.parametrize(("norm", "groups", "affine", "op", "window", "stride", "vec"), [
    ("group_norm", 3, True, "max", 2, 2, 4),   # L2 85's kind: GroupNorm, scale, max pool, clamp
    ("group_norm", 3, False, "avg", 3, 2, 2),  # no affine, windows that leave a remainder
    ("group_norm", 6, True, "max", 3, 3, 1),   # InstanceNorm (a group a channel), vec 1
    ("group_norm", 2, True, "mean", 0, 0, 4),  # L2 27's kind: then a mean over each plane
    ("batch_norm", 0, True, "max", 2, 2, 4),   # L2 11's kind: BatchNorm before a max pool
    ("batch_norm", 0, False, "avg", 3, 2, 1),  # L2 72's kind: before an avg pool
    ("batch_norm", 0, True, "mean", 0, 0, 2),  # L2 77's kind: before a global average
    ("batch_norm", 0, True, "amax", 0, 0, 4),
    ("group_norm", 3, True, "channel_amax", 0, 0, 4),  # L2 79's kind: a max over channels
    ("batch_norm", 0, True, "channel_logsumexp", 0, 0, 2),
    ("group_norm", 2, False, "channel_softmax", 0, 0, 4),
    ("batch_norm", 0, True, "channel_log_softmax", 1, 0, 1),  # channels in registers
])
def test_a_norm_applied_by_the_next_tail_matches_torch(norm, groups, affine, op, window,
                                                       stride, vec):
    g = torch.Generator().manual_seed(groups + window + vec)
    y = torch.randn(2, 6, 8, 8, generator=g) * 3 + 1.5
    weight = torch.randn(6, generator=g) if affine else None
    bias = torch.randn(6, generator=g) if affine else None
    scale = torch.randn(6, generator=g)
    got = emulate_norm_then(y, norm, groups, 1e-5, weight, bias, scale, op, window, stride,
                            -0.8, 0.9, vec)
    f = torch.nn.functional
    w64, b64 = (None if t is None else t.double() for t in (weight, bias))
    x = (f.group_norm(y.double(), groups, w64, b64, 1e-5) if norm == "group_norm" else
         f.batch_norm(y.double(), None, None, w64, b64, training=True, eps=1e-5))
    x = x * scale.double().view(1, 6, 1, 1)
    if op in ("max", "avg"):
        x = (f.max_pool2d if op == "max" else f.avg_pool2d)(x, window, stride)
    elif op.startswith("channel_"):
        red = op.removeprefix("channel_")
        x = (getattr(torch, red)(x, 1) if red.endswith("softmax") else
             torch.logsumexp(x, 1) if red == "logsumexp" else x.amax(1))
    else:
        x = getattr(x, op)(dim=(2, 3))
    want = x.clamp(-0.8, 0.9)
    assert got.shape == want.shape
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=2e-5), (got - want).abs().max()
