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


@pytest.mark.parametrize("shape, tiles, precision, want", [
    # fp32 Linear of KernelBench level 2 (1024 x 8192 x 8192): 344 tiles, 3 waves, the last
    # 61% busy -> 6 rows of tiles (258: 2 waves), then 86 tiles in 3 K slices (2/3 of a wave)
    ((1024, 8192, 8192, 1), (128, 192, 32), "3xtf32", (768, 3, 96)),
    ((4096, 4096, 4096, 1), (128, 192, 32), "3xtf32", (3840, 3, 96)),  # 704 tiles: 5.33 waves
    # waves that end full enough: one launch
    ((1024, 8192, 8192, 1), (128, 256, 64), "bf16", None),     # 256 tiles: 1.94 waves
    ((16384, 4096, 4096, 1), (128, 192, 32), "3xtf32", None),  # 21.3 waves: < 5% to gain
    ((8192, 8192, 1024, 1), (128, 256, 64), "bf16", None),
    ((256, 256, 524288, 1), (128, 192, 32), "3xtf32", None),   # one wave or less: split-K
    ((1024, 8192, 256, 1), (128, 192, 32), "3xtf32", None),    # K too short to slice
    # 160 bf16 tiles (2 waves, the second 21% busy): 4 rows of tiles, then 32 in 4 slices
    ((640, 8192, 8192, 1), (128, 256, 64), "bf16", (512, 4, 0)),
    # the same at K = 2048: the slices' partial sums cost about what the split saves
    ((640, 8192, 2048, 1), (128, 256, 64), "bf16", None),
    # skinny fp32 (one row of tiles): 86 / 171 tiles, all in 3 K slices, one launch
    ((128, 16384, 16384, 1), (128, 192, 32), "3xtf32", (0, 3, 96)),
    ((128, 32768, 32768, 1), (128, 192, 32), "3xtf32", (0, 3, 96)),
])
def test_wave_plan(cand, shape, tiles, precision, want):
    M, N, K, _ = shape
    assert cand._wave_plan(M, N, K, tiles, 132, precision) == want


def test_wave_split_is_a_knob_on_by_default():
    values, choices = gp.gemm_knobs_of("gemm_fp32")
    assert values["wave_split"] is True and choices["wave_split"] == [True, False]


def test_wave_split_hands_each_launch_its_rows(cand, monkeypatch):
    """Each launch gets its rows of A (both storage orders), of the output, of full epilogue
    operands and per-row ones; per-column and single-value operands whole; the first launch
    no K slices, the second the plan's, both the same K padding."""
    import torch

    calls = []
    monkeypatch.setattr(cand, "_gemm_launch", lambda *a, **k: calls.append((a, k)))
    M, N, K = 300, 40, 64
    a_k, a_m = torch.randn(M, K), torch.randn(K, M)
    out = torch.empty(M, N)
    full, col = torch.randn(M, N), torch.randn(N)
    per_row, one = torch.randn(M), torch.randn(1)
    for a, kind in ((a_k, "a_k"), (a_m, "a_m")):
        calls.clear()
        cand._wave_split_launch((128, 3, 96), a, torch.randn(K, N), kind, "b_n", out, "3xtf32",
                                None, [full, col], (True, False), [per_row, one], (True, False),
                                [], (None, "w"))
        assert [k["part"] for _, k in calls] == [(1, 96), (3, 96)]
        for (args, kw), (lo, hi) in zip(calls, ((0, 128), (128, M)), strict=True):
            a_part, out_part, vecs, rows = args[0], args[5], args[8], args[10]
            want = a[lo:hi] if kind == "a_k" else a[:, lo:hi]
            assert a_part.data_ptr() == want.data_ptr() and a_part.shape == want.shape
            assert out_part.data_ptr() == out[lo].data_ptr() and out_part.shape == (hi - lo, N)
            assert vecs[0].data_ptr() == full[lo].data_ptr() and vecs[0].shape[0] == hi - lo
            assert vecs[1] is col and rows[1] is one
            assert rows[0].data_ptr() == per_row[lo:].data_ptr() and rows[0].numel() == hi - lo
            assert kw["kept"] == (None, "w") and args[4] is False  # not batched
