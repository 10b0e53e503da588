"""split_k 0 (the GEMM default): K slices chosen per call from the shape (issue 17: skinny and
one-row GEMMs leave most SMs idle, and at M = 1 a single-slice 3xTF32 chain of fp32 additions
is held against cuBLAS's GEMV). Checked on the rendered candidate's own function."""

import importlib.util
import sys
from importlib.util import find_spec

import _cutegen_gemm_plans as gp  # registered by conftest.py
import pytest

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")


@pytest.fixture(scope="module")
def cand(tmp_path_factory):
    path = tmp_path_factory.mktemp("splits") / "cand_gemm_fp32.py"
    path.write_text(gp.rendered("gemm_fp32"))
    spec = importlib.util.spec_from_file_location("cand_gemm_fp32_splits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("cand_gemm_fp32_splits", None)


def test_default_is_chosen_per_call():
    values, choices = gp.gemm_knobs_of("gemm_fp32")
    assert values["split_k"] == 0 and choices["split_k"][0] == 0
    assert {1, 2, 4} <= set(choices["split_k"])


@pytest.mark.parametrize("shape, tiles, precision, want", [
    ((1, 8192, 8192, 1), (128, 192, 32), "3xtf32", 3),      # one row of a Linear: 43 tiles
    ((1024, 8192, 8192, 1), (128, 192, 32), "3xtf32", 1),   # 344 tiles fill the GPU
    ((128, 8192, 8192, 1), (128, 256, 64), "bf16", 4),      # skinny: 32 tiles
    ((2048, 1, 1 << 20, 1), (128, 256, 64), "bf16", 8),     # matrix-vector: 16 tiles, at most 8
    ((1, 8192, 8192, 4), (128, 256, 64), "bf16", 1),        # batched: never
    ((1, 8192, 256, 1), (128, 192, 32), "3xtf32", 1),       # K too short to cut (8 k tiles each)
    ((1, 8192, 4100, 1), (128, 256, 64), "bf16", 1),        # no 2 or 3 slices 16-byte aligned
    ((64, 4096, 3000, 1), (128, 256, 64), "bf16", 5),       # 16 tiles; 5 slices of 600
    # a small output of a long K (KernelBench L1 6: 256 x 256, K = 524288): 4 tiles, 32
    # slices (33 would fill the SMs); not only 8, which left 100 of the 132 SMs idle
    ((256, 256, 524288, 1), (128, 192, 32), "3xtf32", 32),
    ((256, 256, 524288, 1), (128, 256, 64), "bf16", 32),
    ((1, 1024, 8192, 1), (128, 192, 32), "3xtf32", 22),     # one row, 6 tiles
    ((1, 128, 1 << 20, 1), (128, 256, 64), "bf16", 32),     # one tile: at most 32
])
def test_auto_splits(cand, shape, tiles, precision, want):
    M, N, K, L = shape
    assert cand._auto_splits(M, N, K, L, tiles, 132, precision) == want
