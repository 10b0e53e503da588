"""The conv family's host geometry, checked on the CPU against torch (no DSL, no GPU).

The conv templates' ``_conv_geometry`` and ``_conv_shapes`` (plain Python over shapes) are
taken from ``templates/conv_common.py.tmpl`` and run here; :func:`emulate` then computes what the
kernels compute from them, with the kernels' own index formulas in torch (float64):

* ``ConvPackKernel``: dst[g, n, zp, yp, xp, c] = x[n, g * Cg + c, (zp - lo) / s, ...] where
  every coordinate is a whole multiple of the input dilation inside the source, else 0;
* ``WeightPackKernel``: (K, taps, Cg), a transposed conv's filter transposed per group and
  mirrored;
* ``ConvKernel`` with its im2col loads: out[n, k, z, p, q] = sum over taps (t, r, s) and
  channels of packed[n, z * st + t * dl, p * st + r * dl, q * st + s * dl, c] * w[k, tap, c]
  (the TMA unit's traversal: output extent (padded - dl * (k - 1) - 1) // st + 1, as CuTe's
  ``make_im2col_tma_copy_desc`` computes it with a zero lower corner and an upper corner of
  -(k - 1) * dl).

Each case compares with ``F.conv{1,2,3}d`` / ``F.conv_transpose{1,2,3}d`` of the same
module or functional arguments: stride, padding (symmetric, "same" with even kernels,
"valid", large transposed paddings that crop), dilation, groups, output_padding, 1-D to 3-D;
strided transposed convs also through :func:`emulate_phases` (``_conv_phases``: one forward
conv per output phase, as the phased kernels run them), forward ones also through
:func:`emulate_folded` (``_conv_folded``: the W taps folded into the channels).
"""

import ast
import math
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

TEMPLATE = (Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"
            / "conv_common.py.tmpl")


def _functions(conv: dict) -> dict:
    """``_conv_geometry`` and ``_conv_shapes`` from the template, ``_conv_geometry`` bound
    to the conv spec ``conv``."""
    tree = ast.parse(TEMPLATE.read_text())
    keep = [n for n in tree.body if isinstance(n, ast.FunctionDef)
            and n.name in ("_conv_geometry", "_conv_shapes", "_conv_phases", "_conv_folded")]
    assert len(keep) == 4
    ns: dict = {"math": math}
    exec(compile(ast.Module(keep, []), str(TEMPLATE), "exec"), ns)  # noqa: S102 - our file
    ns["_conv_geometry"] = partial(ns["_conv_geometry"], conv=conv)
    return ns


def emulate_phases(x: torch.Tensor, w: torch.Tensor, mod, conv: dict):
    """A strided transposed conv as the phased kernels compute it (None when ``_conv_phases``
    declines): the input packed with the phases' shared padding, per phase the filter taps
    r_last - t * step (mirrored runs) and a forward conv of dilation ``dil`` from corner
    ``lc``, its outputs stored at s * j + phi."""
    ns = _functions(conv)
    g = ns["_conv_geometry"](mod, tuple(x.shape), tuple(w.shape))
    sh = ns["_conv_shapes"](g, tuple(x.shape), tuple(w.shape), True)
    ph = ns["_conv_phases"](g, sh)
    if ph is None:
        return None
    n_img, groups, cg, kg, k_out = x.shape[0], g["groups"], sh["cg"], sh["kg"], sh["k_out"]
    x5 = x.double().reshape(n_img, x.shape[1], *g["spatial"])
    lo, hi = ph["lo"], ph["hi"]
    packed = F.pad(x5, (lo[2], hi[2], lo[1], hi[1], lo[0], hi[0]))  # (N, C, Dp, Hp, Wp)
    assert tuple(packed.shape[2:]) == ph["padded"]
    ks = g["ks"]
    w5 = w.double().reshape(*w.shape[:2], *ks)  # (G * Cg, Kg, T, R, S)
    outs, st, dil = sh["outs"], g["stride"], ph["dil"]
    out = torch.zeros(n_img, k_out, *outs, dtype=torch.float64)
    for p in ph["phases"]:
        J, lc, taps, r_last, step, phi = (p[k] for k in ("J", "lc", "taps", "r_last", "step",
                                                        "phi"))
        acc = torch.zeros(n_img, k_out, *J, dtype=torch.float64)
        for td in range(taps[0]):
            for tr in range(taps[1]):
                for ts in range(taps[2]):
                    t3 = (td, tr, ts)
                    o = [lc[i] + t3[i] * dil[i] for i in range(3)]
                    a = packed[:, :, o[0]:o[0] + J[0], o[1]:o[1] + J[1], o[2]:o[2] + J[2]]
                    assert tuple(a.shape[2:]) == tuple(J)
                    r = [r_last[i] - t3[i] * step[i] for i in range(3)]
                    for grp in range(groups):
                        b = w5[grp * cg:(grp + 1) * cg, :, r[0], r[1], r[2]]  # (Cg, Kg)
                        acc[:, grp * kg:(grp + 1) * kg] += torch.einsum(
                            "nczpq,ck->nkzpq", a[:, grp * cg:(grp + 1) * cg], b)
        out[:, :, phi[0]::st[0], phi[1]::st[1], phi[2]::st[2]] = acc
    return out.reshape(n_img, k_out, *outs[3 - conv["dims"]:])


def emulate_folded(x: torch.Tensor, w: torch.Tensor, mod, conv: dict) -> torch.Tensor:
    """A forward conv as the folded kernels compute it: ConvPackKernel's ``_read_folded``
    (packed[g, n, zp, yp, q, s * Cg + c] = padded x[n, g * Cg + c, zp, yp, q * st_w + s *
    dl_w], zero past S * Cg), WeightPackKernel's fold (channel s * Cg + c of tap (t, r) =
    w[k, c, t, r, s]) and the implicit GEMM over ``_conv_folded``'s taps, strides and
    dilations on its packed extent."""
    ns = _functions(conv)
    g = ns["_conv_geometry"](mod, tuple(x.shape), tuple(w.shape))
    sh = ns["_conv_shapes"](g, tuple(x.shape), tuple(w.shape), False)
    fd = ns["_conv_folded"](g, sh)
    n_img, groups, cg, kg, k_out = x.shape[0], g["groups"], sh["cg"], sh["kg"], sh["k_out"]
    x5 = x.double().reshape(n_img, x.shape[1], *g["spatial"])
    lo, padded = sh["lo"], sh["padded"]
    hi = [padded[i] - g["spatial"][i] - lo[i] for i in range(3)]
    xpad = F.pad(x5, (lo[2], hi[2], lo[1], hi[1], lo[0], hi[0]))  # pads or crops
    S, dl_w, st_w = fd["fold_w"]
    q_ext = fd["padded"][2]
    cols = torch.arange(q_ext)[:, None] * st_w + torch.arange(S)[None, :] * dl_w  # (Q, S)
    assert int(cols.max()) < padded[2]
    folded = xpad[..., cols]  # (N, C, Dp, Hp, Q, S)
    packed = (folded.reshape(n_img, groups, cg, *fd["padded"], S)
              .permute(1, 0, 3, 4, 5, 6, 2)  # (G, N, Dp, Hp, Q, S, Cg)
              .reshape(groups, n_img, *fd["padded"], S * cg))
    ks = g["ks"]
    w5 = w.double().reshape(*w.shape[:2], *ks)  # (K, Cg, T, R, S)
    wpk = w5.permute(0, 2, 3, 4, 1).reshape(k_out, ks[0], ks[1], S * cg)
    taps, st, dl, outs = fd["taps"], fd["st"], fd["dil"], sh["outs"]
    assert taps[2] == 1 and st[2] == 1
    out = torch.zeros(n_img, k_out, *outs, dtype=torch.float64)
    for t in range(taps[0]):
        for r in range(taps[1]):
            a = packed[:, :,
                       t * dl[0]: t * dl[0] + st[0] * (outs[0] - 1) + 1: st[0],
                       r * dl[1]: r * dl[1] + st[1] * (outs[1] - 1) + 1: st[1],
                       : outs[2], :]
            for grp in range(groups):
                b = wpk[grp * kg:(grp + 1) * kg, t, r, :]
                out[:, grp * kg:(grp + 1) * kg] += torch.einsum("nzpqc,kc->nkzpq", a[grp], b)
    return out.reshape(n_img, k_out, *outs[3 - conv["dims"]:])


def emulate(x: torch.Tensor, w: torch.Tensor, mod, conv: dict) -> torch.Tensor:
    """The kernels' result (see the module docstring), float64."""
    ns = _functions(conv)
    transposed = conv["transposed"]
    g = ns["_conv_geometry"](mod, tuple(x.shape), tuple(w.shape))
    sh = ns["_conv_shapes"](g, tuple(x.shape), tuple(w.shape), transposed)
    n_img, groups, cg, kg, k_out = x.shape[0], g["groups"], sh["cg"], sh["kg"], sh["k_out"]
    x5 = x.double().reshape(n_img, x.shape[1], *g["spatial"])
    padded, lo, s_in = sh["padded"], sh["lo"], sh["in_dil"]
    # ConvPackKernel: per dim, the source index of each dst coordinate (-1: zero)
    src = []
    for i in range(3):
        u = torch.arange(padded[i]) - lo[i]
        ok = (u >= 0) & (u % s_in[i] == 0) & (u // s_in[i] < g["spatial"][i])
        src.append(torch.where(ok, u // s_in[i], torch.full_like(u, -1)))
    zz, yy, xx = torch.meshgrid(*src, indexing="ij")
    valid = (zz >= 0) & (yy >= 0) & (xx >= 0)
    gathered = x5[:, :, zz.clamp(min=0), yy.clamp(min=0), xx.clamp(min=0)] * valid
    packed = gathered.reshape(n_img, groups, cg, *padded).permute(1, 0, 3, 4, 5, 2)
    # WeightPackKernel: (K, T, R, S, Cg)
    ks = g["ks"]
    w5 = w.double().reshape(*w.shape[:2], *ks)
    if transposed:  # w (G * Cg, Kg, T, R, S) -> forward filter (K, Cg, T, R, S), mirrored
        wf = w5.reshape(groups, cg, kg, *ks).transpose(1, 2).reshape(k_out, cg, *ks)
        wf = wf.flip(2, 3, 4)
    else:
        wf = w5
    wpk = wf.permute(0, 2, 3, 4, 1)
    # ConvKernel: the implicit GEMM over taps and channels
    outs, st, dl = sh["outs"], sh["conv_st"], g["dilation"]
    out = torch.zeros(n_img, k_out, *outs, dtype=torch.float64)
    for t in range(ks[0]):
        for r in range(ks[1]):
            for s in range(ks[2]):
                a = packed[:, :,
                           t * dl[0]: t * dl[0] + st[0] * (outs[0] - 1) + 1: st[0],
                           r * dl[1]: r * dl[1] + st[1] * (outs[1] - 1) + 1: st[1],
                           s * dl[2]: s * dl[2] + st[2] * (outs[2] - 1) + 1: st[2], :]
                for grp in range(groups):
                    b = wpk[grp * kg:(grp + 1) * kg, t, r, s, :]  # (Kg, Cg)
                    out[:, grp * kg:(grp + 1) * kg] += torch.einsum("nzpqc,kc->nkzpq",
                                                                    a[grp], b)
    return out.reshape(n_img, k_out, *outs[3 - conv["dims"]:])


_MODULES = {(d, tr): getattr(nn, f"Conv{'Transpose' if tr else ''}{d}d")
            for d in (1, 2, 3) for tr in (False, True)}

#: (dims, transposed, spatial, in, out, kernel, module kwargs)
CASES = [
    (2, False, (17, 23), 8, 16, 3, {"padding": 1}),
    (2, False, (17, 23), 8, 16, 3, {"stride": 2, "padding": 1}),
    (2, False, (20, 21), 4, 8, (3, 5), {"stride": (2, 3), "padding": (1, 2), "dilation": (2, 1)}),
    (2, False, (16, 16), 6, 12, 4, {"padding": "same"}),  # even kernel: asymmetric
    (2, False, (16, 15), 6, 12, (2, 3), {"padding": "same", "dilation": 3}),
    (2, False, (9, 11), 4, 8, 3, {"padding": "valid", "bias": False}),
    (2, False, (13, 13), 8, 12, 3, {"padding": 2, "groups": 4, "stride": 2}),
    (1, False, (37,), 5, 7, 5, {"padding": 3, "stride": 3, "dilation": 2}),
    (3, False, (7, 9, 8), 3, 6, 3, {"padding": 1, "stride": (1, 2, 2)}),
    (3, False, (6, 7, 8), 4, 4, (2, 3, 1), {"padding": (0, 1, 0), "dilation": (2, 1, 1)}),
    (2, True, (7, 9), 8, 6, 3, {}),
    (2, True, (7, 9), 8, 6, 3, {"stride": 2, "padding": 1, "output_padding": 1}),
    (2, True, (6, 5), 4, 10, 4, {"stride": 3, "padding": 2, "dilation": 2}),
    (2, True, (5, 6), 8, 12, 3, {"stride": 2, "padding": 3, "groups": 2}),  # crops
    (1, True, (11,), 6, 4, 5, {"stride": 4, "padding": 1, "output_padding": 2}),
    (3, True, (4, 5, 3), 4, 6, 3, {"stride": (2, 1, 2), "padding": (1, 0, 1),
                                   "output_padding": (1, 0, 0)}),
    (2, True, (6, 7), 4, 6, 5, {"stride": 2, "padding": 2, "dilation": 2}),  # gcd(dl, s) = 2
    (2, True, (5, 6), 4, 6, (2, 4), {"stride": (2, 4), "padding": (0, 1)}),
    (1, True, (9,), 4, 6, 4, {"stride": 3, "padding": 5, "dilation": 3}),  # gcd 3
    (1, True, (9,), 4, 6, 1, {"stride": 2}),  # phases without taps: the zero-inserting path
]


def _conv_dict(dims: int, transposed: bool, m) -> dict:
    return {"dims": dims, "transposed": transposed, "stride": tuple(m.stride),
            "padding": m.padding if isinstance(m.padding, str) else tuple(m.padding),
            "dilation": tuple(m.dilation), "groups": m.groups,
            "output_padding": tuple(getattr(m, "output_padding", (0,) * dims))}


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}d{'T' if c[1] else ''}-{c[6]}" for c in CASES])
@pytest.mark.parametrize("via", ["module", "functional"])
def test_kernel_geometry_matches_torch(case, via):
    dims, transposed, spatial, cin, cout, k, kw = case
    torch.manual_seed(0)
    m = _MODULES[(dims, transposed)](cin, cout, k, **kw).double()
    x = torch.randn(2, cin, *spatial, dtype=torch.float64)
    ref = m(x)
    if m.bias is not None:
        ref = ref - m.bias.view(1, -1, *([1] * dims))  # the bias is the epilogue's first op
    conv = _conv_dict(dims, transposed, m)
    got = emulate(x, m.weight.detach(), m if via == "module" else None, conv)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref.detach(), rtol=1e-10, atol=1e-10)
    if transposed:
        phased = emulate_phases(x, m.weight.detach(), m if via == "module" else None, conv)
        if phased is not None:
            torch.testing.assert_close(phased, ref.detach(), rtol=1e-10, atol=1e-10)
    else:
        folded = emulate_folded(x, m.weight.detach(), m if via == "module" else None, conv)
        torch.testing.assert_close(folded, ref.detach(), rtol=1e-10, atol=1e-10)


def test_functional_padding_same_string():
    torch.manual_seed(1)
    x = torch.randn(1, 3, 10, 12, dtype=torch.float64)
    w = torch.randn(5, 3, 4, 2, dtype=torch.float64)
    conv = {"dims": 2, "transposed": False, "stride": (1, 1), "padding": "same",
            "dilation": (2, 1), "groups": 1, "output_padding": (0, 0)}
    ref = F.conv2d(x, w, padding="same", dilation=(2, 1))
    torch.testing.assert_close(emulate(x, w, None, conv), ref, rtol=1e-10, atol=1e-10)
