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
    """What ``make_tensor(ptr, make_layout(1))`` gives: element 0 reads as a value with
    ``.to(dtype)``, and takes a store."""

    def __init__(self, ptr: _Ptr):
        self.ptr = ptr

    def __getitem__(self, i: int) -> _Val:
        return _Val(self.ptr.buf[self.ptr.off + i])

    def __setitem__(self, i: int, v) -> None:
        self.ptr.buf[self.ptr.off + i] = _V(v).v


class _V:
    """An fp32 value as the kernel's arithmetic sees it: every operation rounded to fp32."""

    __slots__ = ("v",)

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


class _Val:
    """A loaded element: ``.to(dtype)`` converts it."""

    def __init__(self, v):
        self.v = v

    def to(self, dtype):
        return dtype(self.v)


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


def _kernel_class():
    tree = ast.parse((TEMPLATES / "conv_tail.py.tmpl").read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ChannelKernel"]
    for f in cls.body:
        if isinstance(f, ast.FunctionDef):
            f.decorator_list = []
    thread = SimpleNamespace(tidx=0, bidx=0)
    cute = SimpleNamespace(
        Pointer=object, make_layout=lambda n: n,
        make_tensor=lambda ptr, layout: _Elem(ptr),
        make_rmem_tensor=lambda n, dtype: [dtype(0.0)] * n,
        arch=SimpleNamespace(fmax=_fmax, fmin=_fmin,
                             thread_idx=lambda: (thread.tidx, 0, 0),
                             block_idx=lambda: (thread.bidx, 0, 0)),
        math=SimpleNamespace(exp=_exp, log=_log))
    ns = {"cute": cute, "cuda": SimpleNamespace(CUstream=object), "Float32": _V,
          "Int64": int, "const_expr": lambda v: v, "_INF": math.inf,
          "_conv_leaf_values": None}
    # _FLT_MAX comes from conv_common.py.tmpl in a candidate: read it there, not assumed
    common = ast.parse((TEMPLATES / "conv_common.py.tmpl").read_text())
    (flt,) = [n for n in common.body if isinstance(n, ast.Assign)
              and ast.unparse(n.targets[0]) == "_FLT_MAX"]
    ns["_FLT_MAX"] = ast.literal_eval(flt.value)
    exec(compile(ast.Module([cls], []), "conv_tail.py.tmpl", "exec"), ns)  # noqa: S102
    return ns["ChannelKernel"], thread


def emulate(op: str, y: torch.Tensor, cached: int = 0) -> torch.Tensor:
    """``op`` over dim 1 of ``y`` (N, C, pixels) as the ChannelKernel computes it (fp32)."""
    cls, thread = _kernel_class()
    n, c, size = y.shape
    threads = 4
    kern = cls(op, _V, _V, None, (), (), 0, threads=threads, cached=cached)
    src = y.float().contiguous().view(-1).numpy().copy()
    reduce = op not in ("softmax", "log_softmax")
    out = np.full(n * size if reduce else n * c * size, np.nan, dtype=np.float32)
    for b in range(-(-n * size // threads)):
        for t in range(threads):
            thread.tidx, thread.bidx = t, b
            kern.kernel(_Ptr(src), _Ptr(out), (n, c, size), size, (), (), [0.0])
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
