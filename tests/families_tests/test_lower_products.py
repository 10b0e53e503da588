"""Products KernelBench's level 1 writes that the families now read (2026-12-02): a tensor of
any rank times a matrix ("bijl,lk->bijk", ``torch.matmul`` of a 4-d and a 2-d operand) folds
its leading dims into M, a product with ``torch.diag(d)`` is a pointwise scaling, and a
matrix times a vector is a row reduction."""

from __future__ import annotations

import pytest

from cutegen.codegen.families.capture import capture_in_process
from cutegen.codegen.families.recognize import recognize


def _rec(tmp_path, forward, inputs, name="t"):
    p = tmp_path / f"{name}.py"
    p.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                 f"    def forward(self, A, B):\n        return {forward}\n\n"
                 f"def get_inputs():\n    return [{inputs}]\n\ndef get_init_inputs():\n"
                 "    return []\n")
    return recognize(capture_in_process(p))


FOUR_D = "torch.randn(4, 8, 16, 64), torch.randn(64, 32)"


@pytest.mark.parametrize("forward", ["torch.einsum('bijl,lk->bijk', A, B)",
                                     "torch.matmul(A, B)", "A @ B"])
def test_a_4d_tensor_times_a_matrix_is_one_gemm(tmp_path, forward):
    rec = _rec(tmp_path, forward, FOUR_D)
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert plan.family == "gemm" and not plan.param("batched")
    assert "512x64 (k-major A) @ 64x32 (n-major B)" in plan.description  # M = 4 * 8 * 16


def test_the_einsum_may_read_the_matrix_transposed(tmp_path):
    rec = _rec(tmp_path, "torch.einsum('bijl,kl->bijk', A, B)",
               "torch.randn(4, 8, 16, 64), torch.randn(32, 64)")
    assert rec.covered, rec.not_covered
    assert "@ 64x32 (k-major B)" in rec.plans[0].description


@pytest.mark.parametrize("forward", ["torch.einsum('bijl,lk->bjik', A, B)",  # reordered
                                     "torch.einsum('bijl,lk->bij', A, B)"])    # summed
def test_other_einsums_are_not_taken_for_products(tmp_path, forward):
    assert not _rec(tmp_path, forward, FOUR_D).covered


def test_a_transposed_4d_operand_is_not_folded(tmp_path):
    rec = _rec(tmp_path, "torch.matmul(A.transpose(-1, -2), B)",
               "torch.randn(4, 8, 64, 16), torch.randn(64, 32)")
    assert not rec.covered


@pytest.mark.parametrize(("forward", "inputs"), [
    ("torch.diag(A) @ B", "torch.randn(512), torch.randn(512, 256)"),
    ("torch.matmul(torch.diag(A), B)", "torch.randn(512), torch.randn(512, 256)"),
    ("B @ torch.diag(A)", "torch.randn(256), torch.randn(512, 256)")])
def test_a_product_with_a_diagonal_matrix_is_a_scaling(tmp_path, forward, inputs):
    rec = _rec(tmp_path, forward, inputs)
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert plan.family == "pointwise" and plan.description.startswith("pointwise: mul")
    kinds = sorted(lf.kind for lf in plan.leaves if lf.name != plan.main)
    assert kinds == (["row"] if forward.startswith("torch") else ["col"]), plan.leaves


def test_the_diagonal_of_a_matrix_is_not_taken_for_a_diagonal_matrix(tmp_path):
    rec = _rec(tmp_path, "torch.diag(A) @ B", "torch.randn(512, 512), torch.randn(512, 256)")
    assert not rec.covered  # diag of a matrix is its diagonal (a vector): no product here
    assert "torch.diag" in rec.not_covered.reason


@pytest.mark.parametrize(("forward", "inputs", "out"), [
    ("torch.matmul(A, B)", "torch.randn(512, 4096), torch.randn(4096, 1)", "512x1"),
    ("A @ B", "torch.randn(512, 4096), torch.randn(4096)", "512"),
    ("torch.mm(A, B)", "torch.randn(512, 4096), torch.randn(4096, 1)", "512x1")])
def test_a_matrix_times_a_vector_is_a_row_reduction(tmp_path, forward, inputs, out):
    """KernelBench's matrix-vector product (2048 x 1M fp32 at its size): a GEMM with one
    output column fills 1 / tile_n of each tile and 3xTF32 reads A three times; a row sum of
    A * b reads A once."""
    rec = _rec(tmp_path, forward, inputs)
    assert rec.covered, rec.not_covered
    plan = rec.plans[0]
    assert plan.family == "row" and plan.op == "sum", plan.description
    assert "prologue: mul" in plan.description


@pytest.mark.parametrize(("forward", "inputs"), [
    ("A @ B", "torch.randn(512, 4096), torch.randn(4096, 2)"),       # two columns
    ("A @ B.t()", "torch.randn(512, 4096), torch.randn(1, 4096)"),   # a transposed operand
    ("torch.matmul(A, B)", "torch.randn(4, 512, 4096), torch.randn(4096, 1)")])  # batched
def test_other_thin_products_stay_gemms(tmp_path, forward, inputs):
    rec = _rec(tmp_path, forward, inputs)
    assert rec.covered, rec.not_covered
    assert rec.plans[0].family == "gemm"
