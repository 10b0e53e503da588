"""Tensors a forward reads through a view that only adds or drops size-1 dims
(``x.unsqueeze(1).unsqueeze(1)``, ``squeeze``): the kernel must see them in the shape the
forward gives them, since a row op's columns are counted on that shape. KernelBench level 2's
BMM_InstanceNorm task normalised its (1024, 8192) product as one row of 8M values on an H100
(2026-12-07): the row kernel counted its two normalised dims on the product's own (B, F)
shape, not on the (B, 1, 1, F) the norm reads.

The chain is checked on the CPU with its kernel launches replaced by torch (the GEMM, the
instance norm over each launch row, the task's own pointwise tail): what is checked is what
the host decides, the views and (rows, columns) handed to each kernel, against the task's
reference at its main and hidden shapes."""

import _cutegen_famdata as fd  # registered by conftest.py
import pytest
import torch

from cutegen.codegen.families.plan import unit_view

TASK = "chain_linear_instnorm_view_fp32"


@pytest.mark.parametrize("held, read, view", [
    ((4, 8), (4, 8), ()),
    ((4, 8), (4, 1, 1, 8), (0, -1, -1, 1)),
    ((4, 1, 1, 8), (4, 8), (0, 3)),
    ((1, 8), (8, 1), (1, -1)),
    ((8,), (1, 8, 1, 1), (-1, 0, -1, -1)),
    ((1, 8), (1, 1, 8), (0, -1, 1)),  # a size-1 dim on both sides stays the tensor's own
    ((4, 8), (8, 4), None),
    ((4, 8), (32,), None),
    ((4, 8, 2), (4, 8), None),
])
def test_unit_view(held, read, view):
    assert unit_view(held, read) == view


def test_the_norm_reads_the_product_through_the_forwards_view():
    plan = fd.plan_of(TASK)
    gemm, norm, tail = plan.param("stages")
    assert (gemm.family, norm.family, norm.op, tail.family) == (
        "gemm", "row", "layer_norm", "pointwise")
    assert norm.leaf(norm.main).view == (0, -1, -1, 1)
    assert tail.leaf("_stage1").view == (0, 3)
    code = fd.rendered(TASK)
    assert "main = _stage0.view(_stage0.shape[0], 1, 1, _stage0.shape[1])" in code
    assert "main = _stage1.view(_stage1.shape[0], _stage1.shape[3])" in code


def _emulated(tmp_path, monkeypatch, launches):
    cand = fd.rendered_module(tmp_path, TASK)
    monkeypatch.setattr(cand, "REPLAY", False, raising=False)

    def gemm(a, b, a_kind, b_kind, batched, out, precision, epilogue, vec_ops, *rest, **kw):
        assert (a_kind, b_kind, batched) == ("a_k", "b_k", False)
        out.copy_(a @ b.T + vec_ops[0])
        launches.append(("gemm", tuple(out.shape)))

    def row(op_cls, prologue, epilogue, vec_ops, full, row_ops, row_kinds, scalars, out, *rest,
            opts=(), **kw):
        x = vec_ops[0]
        launches.append(("row", tuple(x.shape)))
        mean = x.mean(1, keepdim=True)
        var = x.var(1, unbiased=False, keepdim=True)
        out.copy_((x - mean) / torch.sqrt(var + dict(opts)["eps"]))

    def pointwise(fn, vec_ops, full, row_ops, row_kinds, scalars, out):
        launches.append(("pointwise", tuple(out.shape)))
        x, y = vec_ops
        out.copy_((x + y) * y)

    monkeypatch.setattr(cand, "_gemm_launch", gemm)
    monkeypatch.setattr(cand, "_row_launch", row)
    monkeypatch.setattr(cand, "_pw_launch", pointwise)
    return cand


@pytest.mark.parametrize("batch", [96, 1, 37])
def test_chain_matches_the_reference_emulated(tmp_path, monkeypatch, batch):
    launches: list = []
    cand = _emulated(tmp_path, monkeypatch, launches)
    mod = fd.task_module(TASK)
    torch.manual_seed(0)
    ref = mod.Model(*mod.get_init_inputs())
    new = cand.ModelNew(*mod.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    x, y = torch.rand(batch, mod.in_features), torch.rand(batch, mod.out_features)
    want = ref(x, y)
    got = new(x, y)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    f = mod.out_features
    assert launches == [("gemm", (batch, f)), ("row", (batch, f)), ("pointwise", (batch, f))]
