"""Regenerate the small SASS / cubin samples in this folder (CPU only, no GPU needed).

    CUTE_DSL_ARCH=sm_90a CUTE_DSL_KEEP=ptx,cubin,sass CUTE_DSL_DUMP_DIR=/tmp/sass_add4 \\
        PATH=$(python -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13", "bin"))'):$PATH \\
        python tests/data/sass/make_samples.py add 4
    ... add 1   -> add_scalar_sm90a.sass        ... mma -> mma_tf32_sm90a.{sass,cubin}

then copy ``<dump dir>/*.sass`` and ``*.sm_90a.cubin`` here under the names in README.md.
No ``from __future__ import annotations`` here: kernel modules keep real annotations.
"""

import sys

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, tv: cute.Layout):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tA = cute.composition(gA[(None, bidx)], tv)
    tB = cute.composition(gB[(None, bidx)], tv)
    tC = cute.composition(gC[(None, bidx)], tv)
    tC[(tidx, None)].store(tA[(tidx, None)].load() + tB[(tidx, None)].load())


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, vec: cutlass.Constexpr):
    threads = 128
    tv = cute.make_layout((threads, vec), stride=(vec, 1))
    tile = (threads * vec,)
    gA, gB, gC = (cute.zipped_divide(t, tile) for t in (mA, mB, mC))
    add_kernel(gA, gB, gC, tv).launch(grid=[cute.size(gC, mode=[1]), 1, 1], block=[threads, 1, 1])


@cute.kernel
def mma_kernel(A: cute.Tensor, B: cute.Tensor, C: cute.Tensor, tiled_mma: cute.TiledMma):
    tidx, _, _ = cute.arch.thread_idx()
    thr = tiled_mma.get_slice(tidx)
    tA, tB, tC = thr.partition_A(A), thr.partition_B(B), thr.partition_C(C)
    rA, rB = tiled_mma.make_fragment_A(tA), tiled_mma.make_fragment_B(tB)
    rC = tiled_mma.make_fragment_C(tC)
    rC.fill(0.0)
    cute.autovec_copy(tA, rA)
    cute.autovec_copy(tB, rB)
    cute.gemm(tiled_mma, rC, rA, rB, rC)
    cute.autovec_copy(rC, tC)


@cute.jit
def mma(A: cute.Tensor, B: cute.Tensor, C: cute.Tensor):
    tiled_mma = cute.make_tiled_mma(cute.nvgpu.warp.MmaTF32Op((16, 8, 8)))
    mma_kernel(A, B, C, tiled_mma).launch(grid=[1, 1, 1], block=[32, 1, 1])


def main(argv: list) -> None:
    if argv[0] == "add":
        ts = [make_fake_compact_tensor(cutlass.Float32, (1 << 20,), assumed_align=16) for _ in range(3)]
        cute.compile(add, *ts, int(argv[1]))
    else:
        def fake(dtype, shape):
            return make_fake_compact_tensor(dtype, shape, stride_order=(1, 0), assumed_align=16)

        cute.compile(mma, fake(cutlass.TFloat32, (16, 8)), fake(cutlass.TFloat32, (8, 8)),
                     fake(cutlass.Float32, (16, 8)))


if __name__ == "__main__":
    main(sys.argv[1:])
