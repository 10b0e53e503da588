"""The direct conv kernel's index arithmetic, checked on the CPU against torch (no DSL, no GPU).

``DirectConvKernel.__init__`` (the span offset ``off``, the accesses per span ``chunks``, the
(output row, filter row) ``pairs`` each input row feeds, the span positions ``used`` with
``vec`` 1) and the host's ``_direct_shape`` (vec, ow, oh from the knobs) are taken from
``templates/conv_direct.py.tmpl`` (with head.py.tmpl's ``_span_shape``) and run here;
:func:`emulate` then walks the threads as the kernel does (per channel of the group, depth tap
and covered input row: one span read in ``vec``-element accesses, each wholly inside the row
or wholly outside it and then zeros) in float64, and the result is compared with ``F.conv1d/2d/3d``. The invariants the kernel's
vector accesses rest on are asserted on the way: every span starts at a multiple of ``vec``,
and an access that starts inside the row ends inside it.
"""

import ast
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

TEMPLATES = Path(__file__).resolve().parents[2] / "codegen" / "families" / "templates"


def _namespace(tunables: dict) -> dict:
    """``DirectConvKernel`` (its constructor alone), ``_direct_shape`` and ``_DIRECT_SPAN`` from
    the template, ``_vector_width`` and ``_span_shape`` from head.py.tmpl, with TUNABLES =
    ``tunables``."""
    tree = ast.parse((TEMPLATES / "conv_direct.py.tmpl").read_text())
    keep: list = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "DirectConvKernel":
            node.body = [n for n in node.body
                         if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
            keep.append(node)
        elif isinstance(node, ast.FunctionDef) and node.name in ("_direct_shape", "_direct_kc",
                                                                  "_direct_merged"):
            keep.append(node)
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in (
                "_DIRECT_SPAN", "_DIRECT_SUMS", "_DIRECT_SHORT_ROW"):
            keep.append(node)
    head = ast.parse((TEMPLATES / "head.py.tmpl").read_text())
    keep += [n for n in head.body if isinstance(n, ast.FunctionDef)
             and n.name in ("_vector_width", "_span_shape")]
    assert len(keep) == 9
    ns: dict = {"TUNABLES": tunables, "math": math, "torch": torch}
    exec(compile(ast.Module(keep, []), "conv_direct.py.tmpl", "exec"), ns)  # noqa: S102
    return ns


class _Width:
    """A stand-in for a CuTe dtype: the constructor reads only ``width``."""

    def __init__(self, bits: int):
        self.width = bits


def emulate(x: torch.Tensor, w: torch.Tensor, stride, padding, dilation, groups: int,
            tunables: dict) -> torch.Tensor:
    """conv(x, w) (no bias) as DirectConvKernel computes it, geometry as 3-d (D, H, W)."""
    ns = _namespace(tunables)
    dims = x.dim() - 2
    pad3 = lambda v, fill: (fill,) * (3 - dims) + tuple(v)  # noqa: E731
    ks, st, dl, lo = (pad3(w.shape[2:], 1), pad3(stride, 1), pad3(dilation, 1),
                      pad3(padding, 0))
    sizes = pad3(x.shape[2:], 1)
    outs = tuple((sizes[i] + 2 * lo[i] - dl[i] * (ks[i] - 1) - 1) // st[i] + 1
                 for i in range(3))
    n_img, c_in, k_out = x.shape[0], x.shape[1], w.shape[0]
    cg, kg = c_in // groups, k_out // groups
    shape = outs  # the output's, before the launch merges short rows (_direct_merged)
    ks, st, dl, lo, sizes, outs = ns["_direct_merged"](ks, st, dl, lo, sizes, outs)
    x = x.view(n_img, c_in, *sizes)
    vec, ow, oh = ns["_direct_shape"](x, ks, st, dl, lo, outs)
    assert (ow * st[2]) % vec == 0
    kc, oh = ns["_direct_kc"](kg, tunables.get("out_chans", 1), oh, ow)
    assert kg % kc == 0 and (kc == 1 or kc * oh * ow <= ns["_DIRECT_SUMS"])
    kern = ns["DirectConvKernel"](None, _Width(8 * x.element_size()), ks, st, dl, lo, sizes,
                                  outs, (c_in, k_out, cg, kg), vec, ow, oh, 256, None, (), (),
                                  0, kc=kc)
    D, H, W = sizes
    Z, P, Q = outs
    T, R, S = ks
    xf = x.double().reshape(n_img, c_in, D, H, W)
    wf = w.double().reshape(k_out, cg, T, R, S)  # (merged: the W tap dropped, D's and H's
    # taps moved to H and W: the same values in the same order)
    out = torch.full((n_img, k_out, Z, P, Q), float("nan"), dtype=torch.float64)
    for i in range(n_img * kern.per_image):
        gq = i % kern.groups_q
        rem = i // kern.groups_q
        gp = rem % kern.groups_p
        rem //= kern.groups_p
        z = rem % Z
        rem //= Z
        k, n = (rem % kern.kblocks) * kern.kc, rem // kern.kblocks
        q0, p0 = gq * ow, gp * oh
        acc = [[[0.0] * ow for _ in range(oh)] for _ in range(kern.kc)]
        for c in range(cg):
            ch = (k // kg) * cg + c
            for t in range(T):
                d = z * st[0] + t * dl[0] - lo[0]
                if not 0 <= d < D:
                    continue
                h0 = p0 * st[1] - lo[1]
                a0 = q0 * st[2] - lo[2] - kern.off
                assert a0 % vec == 0, (a0, vec)
                for u in range(kern.in_rows):
                    h = h0 + u
                    if not kern.pairs[u] or not 0 <= h < H:
                        continue
                    xs = [None] * (kern.chunks * vec)
                    if vec == 1:
                        for e in kern.used:
                            pos = a0 + e
                            xs[e] = float(xf[n, ch, d, h, pos]) if 0 <= pos < W else 0.0
                    else:
                        for ci in range(kern.chunks):
                            pos = a0 + ci * vec
                            inside = 0 <= pos < W
                            assert not inside or pos + vec <= W, "an access crosses the row end"
                            for e in range(vec):
                                xs[ci * vec + e] = (float(xf[n, ch, d, h, pos + e]) if inside
                                                    else 0.0)
                    for oi, r in kern.pairs[u]:
                        for kk in range(kern.kc):
                            for j in range(ow):
                                for s in range(S):
                                    acc[kk][oi][j] += (xs[kern.off + j * st[2] + s * dl[2]]
                                                       * float(wf[k + kk, c, t, r, s]))
        for kk in range(kern.kc):
            for oi in range(oh):
                for j in range(ow):
                    if p0 + oi < P and q0 + j < Q:
                        assert torch.isnan(out[n, k + kk, z, p0 + oi, q0 + j])  # written once
                        out[n, k + kk, z, p0 + oi, q0 + j] = acc[kk][oi][j]
    return out.reshape(n_img, k_out, *shape[3 - dims:])


_DEFAULT = {"outs": 0, "rows": 4, "vec_bits": 128, "threads": 256}
#: (dtype, x shape, (K, Cg, *kernel), stride, padding, dilation, groups, knob changes)
CASES = [
    (torch.bfloat16, (2, 4, 9, 16), (4, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4, {}),
    (torch.bfloat16, (1, 3, 7, 24), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 3, {"rows": 8}),
    (torch.float32, (2, 2, 11, 16), (4, 1, 5, 5), (2, 2), (2, 2), (1, 1), 2, {}),
    (torch.float32, (1, 2, 6, 12), (2, 1, 3, 3), (1, 3), (0, 2), (2, 1), 2, {"outs": 8}),
    (torch.bfloat16, (1, 4, 5, 32), (4, 2, 3, 5), (1, 1), (1, 2), (1, 1), 2,
     {"vec_bits": 64, "rows": 2}),
    (torch.bfloat16, (1, 2, 4, 23), (2, 1, 3, 3), (1, 1), (1, 1), (1, 1), 2, {}),  # vec 1
    (torch.float32, (2, 3, 40), (3, 1, 5), (1,), (6,), (3,), 3, {}),  # 1-d, dilated
    (torch.float32, (1, 2, 64), (2, 1, 9), (1,), (20,), (5,), 2, {"outs": 8}),  # span > 64
    (torch.bfloat16, (1, 2, 3, 6, 16), (2, 1, 3, 3, 3), (1, 2, 2), (1, 1, 1), (1, 1, 1), 2,
     {}),
    (torch.float32, (1, 2, 4, 5, 8), (4, 1, 2, 3, 3), (2, 1, 1), (0, 1, 1), (1, 2, 1), 2,
     {"rows": 2}),
    # several output channels a thread (out_chans): 3 -> 8 channels, one group; a grouped
    # conv whose 6 channels a group take 2 (4 does not divide 6); 3-D with W = 10 (KernelBench
    # L1 59's kind); 8 asked where 8 x oh x ow would pass 64 sums
    (torch.float32, (2, 3, 7, 12), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1, {"out_chans": 4}),
    (torch.float32, (1, 4, 6, 8), (12, 2, 3, 3), (1, 1), (0, 1), (1, 1), 2, {"out_chans": 4}),
    (torch.float32, (1, 3, 5, 6, 10), (8, 3, 3, 3, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1,
     {"out_chans": 4}),
    (torch.bfloat16, (1, 2, 5, 32), (16, 2, 3, 3), (1, 1), (1, 1), (1, 1), 1,
     {"out_chans": 8}),
    # short W rows under a one-tap W filter, merged into H (_direct_merged): L1 59's kind
    # with padding and a depth stride; a (k, 1) 2-D filter dilated along H; bf16 with
    # several channels a thread; H strided (not merged); W = 40, whose merged span would
    # not fit (not merged)
    (torch.float32, (2, 3, 7, 6, 10), (4, 3, 3, 3, 1), (2, 1, 1), (1, 1, 0), (1, 1, 1), 1, {}),
    (torch.float32, (1, 2, 9, 6), (4, 1, 3, 1), (1, 1), (2, 0), (2, 1), 2, {"rows": 2}),
    (torch.bfloat16, (1, 3, 4, 5, 12), (8, 3, 2, 3, 1), (1, 1, 1), (0, 1, 0), (1, 1, 1), 1,
     {"out_chans": 4}),
    (torch.float32, (1, 2, 3, 8, 10), (2, 2, 1, 3, 1), (1, 2, 1), (0, 1, 0), (1, 1, 1), 1, {}),
    (torch.float32, (1, 2, 6, 40), (2, 1, 3, 1), (1, 1), (1, 0), (1, 1), 2, {}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{len(c[1]) - 2}d-{i}" for i, c in
                                             enumerate(CASES)])
def test_direct_kernel_indexing_matches_torch(case):
    dtype, x_shape, w_shape, stride, padding, dilation, groups, knobs = case
    torch.manual_seed(0)
    x = torch.randn(x_shape).to(dtype)
    w = torch.randn(w_shape, dtype=torch.float64)
    got = emulate(x, w, stride, padding, dilation, groups, {**_DEFAULT, **knobs})
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x.dim()]
    ref = conv(x.double(), w, stride=stride, padding=padding, dilation=dilation, groups=groups)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)


def test_direct_shape_wide_and_narrow():
    """vec / ow / oh from the knobs: 128-bit reads where the row allows, ow * stride a multiple
    of vec, a span that would pass _DIRECT_SPAN values narrowed, rows capped at the output's."""
    ns = _namespace(dict(_DEFAULT))
    shape = ns["_direct_shape"]
    bf = torch.zeros(1, 1, 8, 112, dtype=torch.bfloat16)
    assert shape(bf, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (1, 8, 112)) == (8, 8, 4)
    assert shape(bf, (1, 3, 3), (1, 1, 2), (1, 1, 1), (0, 1, 1), (1, 8, 56)) == (8, 4, 4)
    assert shape(torch.zeros(1, 1, 2, 23), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1),
                 (1, 2, 23)) == (1, 1, 2)
    vec, ow, _ = shape(torch.zeros(1, 1, 1, 64), (1, 1, 9), (1, 1, 1), (1, 1, 9), (0, 0, 36),
                       (1, 1, 64))
    assert ((-36) % vec) + (ow - 1) + 9 * 8 + 1 <= 64 or vec == 1


def test_output_channels_a_thread_divide_the_group_and_bound_the_sums():
    kc = _namespace(dict(_DEFAULT))["_direct_kc"]
    assert kc(64, 4, 4, 2) == (4, 4) and kc(64, 1, 4, 4) == (1, 4)  # one channel: rows kept
    assert kc(6, 4, 4, 2) == (2, 4) and kc(3, 4, 4, 2) == (1, 4)  # a divisor of the group's
    assert kc(64, 4, 4, 4) == (4, 2)  # at most 32 sums a thread: fewer rows first
    assert kc(64, 8, 4, 8) == (4, 1)  # then fewer channels
    assert kc(64, 0, 4, 4) == (1, 4)


def test_short_rows_merge_only_under_a_one_tap_w_filter():
    """_direct_merged: (D, H, W) planes become (1, D, H * W) where W's filter is one tap at
    stride 1 without padding, H's stride is 1, W's rows are short and the merged span fits;
    anything else is returned as it came."""
    merged = _namespace(dict(_DEFAULT))["_direct_merged"]
    l1_59 = ((3, 3, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (256, 256, 10), (254, 254, 10))
    assert merged(*l1_59) == ((1, 3, 3), (1, 1, 1), (1, 1, 10), (0, 0, 0), (1, 256, 2560),
                              (1, 254, 2540))
    padded = ((3, 3, 1), (2, 1, 1), (1, 2, 1), (1, 2, 0), (9, 8, 6), (5, 8, 6))
    assert merged(*padded) == ((1, 3, 3), (1, 2, 1), (1, 1, 12), (0, 1, 12), (1, 9, 48),
                               (1, 5, 48))
    for geometry in (
            ((3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (8, 8, 10), (6, 6, 8)),  # W taps
            ((1, 3, 1), (1, 1, 1), (1, 1, 1), (0, 0, 1), (1, 8, 10), (1, 6, 12)),  # W padded
            ((1, 3, 1), (1, 2, 1), (1, 1, 1), (0, 0, 0), (1, 9, 10), (1, 4, 10)),  # H strided
            ((1, 3, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 9, 64), (1, 7, 64)),  # long rows
            ((1, 3, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 9, 30), (1, 7, 30))):  # no room
        assert merged(*geometry) == geometry
