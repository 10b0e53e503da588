"""Probe: can a tf32 WGMMA read its A operand as a window of a shared-memory buffer that
starts at any row, not only at a multiple of 8? And can one TMA load fill such a buffer with a
halo tile of an image? (the two questions a halo-tile conv turns on).

    CUTE_DSL_ARCH=sm_90a python tools/wgmma_window_probe.py --compile-only   (CPU: SASS check)
    python tools/wgmma_window_probe.py [--limit 40]                          (GPU: values too)

A halo-tile implicit-GEMM conv would load a block of input pixels (with the filter's reach
around it) into shared memory once and let each filter tap's WGMMAs read that block shifted
by ``r * w_box + s`` pixel rows, instead of gathering one im2col tile per tap (KernelBench's
3xTF32 convs are bound by those gathers: 2.4-3.3 TB/s, BENCHMARKS.md). With the swizzled
layouts the GEMMs use, a shifted view is no descriptor (the swizzle pattern repeats every 8
rows). Here A is laid out without a swizzle (the ``K_INTER`` atom) tiled rows-first, so
element (r, c) sits at ``(c // 4) * ROWS * 4 + 4 r + c % 4`` (words): every run of 8 rows of 4
words is one contiguous 128-byte core matrix wherever it starts, and a window at row ``s``
is the same layout 16 * s bytes further on.

* ``WindowProbe``: one warp group sums, over the shifts in SHIFTS, ``A[s:s + 64] @ B.T``
  (tf32 in, fp32 out) with WGMMAs reading those windows (A and B copied in by the threads).
* ``HaloProbe``: an image stored chunk-planar, (KC, H, W, 4): 4 channels (16 bytes) innermost,
  as a halo-tile conv's input pack would store it. One TMA box (4, WB, HB, KC) lands in shared
  memory as words (4, WB, HB, KC), which is that rows-first buffer with row = w + WB h; each
  of a 3x3 filter's nine taps then reads the window at row r WB + s (a 3x3 conv of 32
  channels at the box's first positions).

Found on the CPU (nvidia-cutlass-dsl 4.8.1, 2026-12-07): both compile. The PTX descriptors
carry no swizzle, LBO = ROWS x 16 bytes (the next 4-column chunk), SBO = 128 bytes, and each
window's start is the buffer's + 16 s bytes; the SASS has the 20 (5 shifts x 4 k steps) and
36 (9 taps x 4) HGMMA.64x64x8 and the halo's one TMA load (UTMALDG.3D: the DSL merges the
contiguous (4, W) modes). On a GPU both outputs are compared with float64 products of the
same inputs, tf32 values all (exit status 1 on a mismatch: a window read at the wrong rows
is off by the values' own size), each probe in a child process with a time limit.

Found on an H100 (2026-12-07): the windows are read as laid out (max error 3.2e-5 of values
up to 45.7); the halo probe hung (no result in 100 s). ``HaloThreadsProbe`` (the same box
copied in by the threads) was added after that run, to tell a TMA load that never completes
its barrier from a wrong window. Run again on an H100 (2026-12-07, forty-third session): the
windows as laid out again (3.2e-5 of 45.7), the threads' halo too (max error 5.1e-5 of values
up to 65.5), the TMA halo hung again (no result in 40 s): the windows of a halo tile serve,
and the one TMA box load (4, WB, HB, KC) is what never completes its barrier (not yet
understood then). The PTX says why: the copy sat under ``if tidx == 0`` and the DSL's TMA
copy elects its issuing lane with ``elect.sync`` over the full warp, which one lane alone
never completes; the whole warp issues it now (not yet run on a GPU).

A development probe, not part of the evaluator or of any candidate.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path

# the DSL reads where to keep its SASS when it is imported
DUMP = None
if __name__ == "__main__" and "--compile-only" in sys.argv[1:]:
    DUMP = tempfile.mkdtemp(prefix="wgmma_window_probe_")
    os.environ.update(CUTE_DSL_KEEP="ptx,cubin,sass", CUTE_DSL_DUMP_DIR=DUMP)

import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
from cutlass import Float32, Int64, TFloat32  # noqa: E402
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, warpgroup  # noqa: E402
from cutlass.cute.nvgpu.warpgroup import mma as _wg_mma  # noqa: E402
from cutlass.cute.runtime import make_ptr  # noqa: E402
from cutlass.memory import SmemAllocator  # noqa: E402

ROWS = 80  # the buffer's rows: 64 + room for the largest shift
TK = 32  # columns (the k extent): 8 chunks of 4 tf32 words
TN = 64  # B's rows (the product's columns)
SHIFTS = (0, 1, 2, 9, 13)  # window starts, most not multiples of 8
# the halo probe: a 3x3 conv's tile of one image, 32 channels, 64 output positions
KC = 8  # 4-channel chunks
WB, HB = 34, 4  # the halo box: 32 + 2 columns, 2 + 2 rows, of positions
BOX_ROWS = WB * HB
IMG_W, IMG_H = 40, 6  # the image, chunk-planar: (KC, IMG_H, IMG_W, 4)
TAPS = tuple((r, s) for r in range(3) for s in range(3))


@dataclasses.dataclass(frozen=True)
class MmaTF32Op(warpgroup.MmaOp):
    """wgmma .f32.tf32.tf32 (the DSL has no wrapper; as the gemm template builds it)."""

    def _make_trait(self, *, loc=None, ip=None, **kwargs):
        shape = _wg_mma._pack_shape(self.shape_mnk, loc=loc, ip=ip)
        ty = _wg_mma._cute_nvgpu_ir.MmaAtomSM90Type.get(
            shape.type.attribute, self.a_major_mode._to_ir(), self.b_major_mode._to_ir(),
            TFloat32.mlir_type, TFloat32.mlir_type, Float32.mlir_type, self.a_src._to_ir())
        return _wg_mma.MmaF16BF16Trait(_wg_mma.make_atom(
            ty, [cutlass.Boolean(False).ir_value(loc=loc, ip=ip)], loc=loc, ip=ip))


class _WindowProducts:
    """What both probes do once their buffers are filled: one warp group sums, over the
    window starts ``offsets`` (in rows), the products of the ``rows``-row buffer at ``base``
    (rows-first, unswizzled: ``chunks`` chunks of 4 words) read as a 64-row window, with
    B's slice ``j`` (``per_offset``: one slice per window; else slice 0 for all), and stores
    the (64, TN) fp32 sums row-major at ``c_ptr``."""

    @cute.jit
    def __call__(self, a_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer):
        """One CTA of one warp group runs ``kernel`` (HaloProbe makes its TMA atom first)."""
        self.kernel(a_ptr, b_ptr, c_ptr).launch(grid=[1, 1, 1], block=[128, 1, 1])

    @cute.jit
    def _products(self, tidx, base, rows: cutlass.Constexpr, chunks: cutlass.Constexpr,
                  offsets: cutlass.Constexpr, s_b, per_offset: cutlass.Constexpr,
                  c_ptr: cute.Pointer):
        op = MmaTF32Op(TFloat32, TFloat32, Float32, (64, TN, 8),
                       warpgroup.OperandSource.SMEM, OperandMajorMode.K, OperandMajorMode.K)
        mma = cute.make_tiled_mma(cute.make_mma_atom(op), (1, 1, 1))
        mma.set(warpgroup.Field.ACCUMULATE, True)
        thr = mma.get_slice(tidx)
        acc = cute.make_rmem_tensor(thr.partition_shape_C((64, TN)), Float32)
        acc.fill(0.0)
        frag_b = mma.make_fragment_B(thr.partition_B(s_b))
        # rows [o, o + 64) of the buffer: its strides, 16 o bytes further on
        window = cute.make_layout(((8, 8), (4, chunks)), stride=((4, 32), (1, rows * 4)))
        for j in cutlass.range_constexpr(len(offsets)):
            view = cute.make_tensor(base + offsets[j] * 4, window)
            frag_a = mma.make_fragment_A(thr.partition_A(view))
            warpgroup.fence()
            for kb in cutlass.range_constexpr(cute.size(frag_a, mode=[2])):
                cute.gemm(mma, acc, frag_a[(None, None, kb)],
                          frag_b[(None, None, kb, j if per_offset else 0)], acc)
            warpgroup.commit_group()
            warpgroup.wait_group(0)
        g_c = cute.make_tensor(c_ptr, cute.make_layout((64, TN), stride=(TN, 1)))
        out = thr.partition_C(g_c)
        for i in cutlass.range_constexpr(cute.size(acc)):
            out[i] = acc[i]


class _HaloBuffers(_WindowProducts):
    """The halo probes' shared memory: the box's (4, WB, HB, KC) words, and the nine taps'
    (TN x 4 KC) filter slices, copied in by the threads (row-major slices at ``b_ptr``)."""

    @cute.jit
    def _buffers(self, smem, tidx, b_ptr: cute.Pointer):
        inter = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_INTER,
                                                TFloat32)
        tk = 4 * KC
        s_x = smem.allocate_tensor(TFloat32, cute.make_layout((4, WB, HB, KC)),
                                   byte_alignment=1024)
        s_b = smem.allocate_tensor(
            TFloat32, cute.tile_to_shape(inter, (TN, tk, len(TAPS)), (0, 1, 2)),
            byte_alignment=1024)
        g_b = cute.make_tensor(b_ptr, cute.make_layout((TN, tk, len(TAPS)),
                                                       stride=(tk, 1, TN * tk)))
        for i in range(tidx, TN * tk * len(TAPS), 128):
            e = i % (TN * tk)
            s_b[(e // tk, e % tk, i // (TN * tk))] = g_b[(e // tk, e % tk, i // (TN * tk))]
        return s_x, s_b


class WindowProbe(_WindowProducts):
    @cute.kernel
    def kernel(self, a_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer):
        tidx, _, _ = cute.arch.thread_idx()
        inter = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_INTER,
                                                TFloat32)
        smem = SmemAllocator()
        s_a = smem.allocate_tensor(TFloat32, cute.tile_to_shape(inter, (ROWS, TK), (0, 1)),
                                   byte_alignment=1024)
        s_b = smem.allocate_tensor(TFloat32, cute.tile_to_shape(inter, (TN, TK, 1), (0, 1, 2)),
                                   byte_alignment=1024)
        g_a = cute.make_tensor(a_ptr, cute.make_layout((ROWS, TK), stride=(TK, 1)))
        g_b = cute.make_tensor(b_ptr, cute.make_layout((TN, TK), stride=(TK, 1)))
        for i in range(tidx, ROWS * TK, 128):
            s_a[(i // TK, i % TK)] = g_a[(i // TK, i % TK)]
        for i in range(tidx, TN * TK, 128):
            s_b[(i // TK, i % TK, 0)] = g_b[(i // TK, i % TK)]
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        self._products(tidx, s_a.iterator, ROWS, TK // 4, SHIFTS, s_b, False, c_ptr)


class HaloThreadsProbe(_HaloBuffers):
    """HaloProbe's products with the box copied in by the threads instead of a TMA load (the
    same (4, WB, HB, KC) words): where HaloProbe hangs and this one is right, the TMA load is
    what fails, not the windows."""

    @cute.kernel
    def kernel(self, x_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer):
        tidx, _, _ = cute.arch.thread_idx()
        s_x, s_b = self._buffers(SmemAllocator(), tidx, b_ptr)
        g_x = cute.make_tensor(x_ptr, cute.make_layout(
            (4, IMG_W, IMG_H, KC), stride=(1, 4, 4 * IMG_W, 4 * IMG_W * IMG_H)))
        for i in range(tidx, 4 * WB * HB * KC, 128):
            at = (i % 4, (i // 4) % WB, (i // (4 * WB)) % HB, i // (4 * WB * HB))
            s_x[at] = g_x[at]
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        self._products(tidx, s_x.iterator, BOX_ROWS, KC, tuple(r * WB + s for r, s in TAPS),
                       s_b, True, c_ptr)


class HaloProbe(_HaloBuffers):
    """A halo tile: one TMA load brings a (KC chunks x HB rows x WB columns x 4 channels)
    box of a chunk-planar image into shared memory, laid out as (4, WB, HB, KC) words, i.e.
    as the rows-first unswizzled (BOX_ROWS x 4 KC) buffer of WindowProbe, row = w + WB h;
    then the nine taps (r, s) of a 3x3 filter each read the window at row r WB + s (B: the
    tap's (TN x 4 KC) filter slice). Output row p is position (p // WB, p % WB) of the
    box's first rows: a 3x3 conv's output there where p % WB < WB - 2 (the other rows read
    across a row end: a halo-tile kernel computes them and stores nothing)."""

    @cute.jit
    def __call__(self, x_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer):
        m_x = cute.make_tensor(x_ptr, cute.make_layout(
            (4, IMG_W, IMG_H, KC), stride=(1, 4, 4 * IMG_W, 4 * IMG_W * IMG_H)))
        tma, t_x = cpasync.make_tiled_tma_atom(cpasync.CopyBulkTensorTileG2SOp(), m_x,
                                               cute.make_layout((4, WB, HB, KC)),
                                               (4, WB, HB, KC))
        self.kernel(tma, t_x, b_ptr, c_ptr).launch(grid=[1, 1, 1], block=[128, 1, 1])

    @cute.kernel
    def kernel(self, tma: cute.CopyAtom, t_x: cute.Tensor, b_ptr: cute.Pointer,
               c_ptr: cute.Pointer):
        tidx, _, _ = cute.arch.thread_idx()
        smem = SmemAllocator()
        s_x, s_b = self._buffers(smem, tidx, b_ptr)
        bar = smem.allocate_array(Int64, 1)
        if tidx == 0:
            cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()
        g_tile = cute.local_tile(t_x, (4, WB, HB, KC), (0, 0, 0, 0))
        t_s, t_g = cpasync.tma_partition(tma, 0, cute.make_layout(1),
                                         cute.group_modes(s_x, 0, 4),
                                         cute.group_modes(g_tile, 0, 4))
        if tidx == 0:
            cute.arch.mbarrier_arrive_and_expect_tx(bar, 4 * 4 * WB * HB * KC)
        # the whole warp issues the copy: the DSL's TMA copy elects one lane with an
        # elect.sync over all 32, which a copy under ``tidx == 0`` reached with one lane
        # alone (the hang on an H100, twice)
        if tidx // 32 == 0:
            cute.copy(tma, t_g, t_s, tma_bar_ptr=bar)
        cute.arch.mbarrier_wait(bar, 0)
        cute.arch.fence_proxy("async.shared", space="cta")
        cute.arch.sync_threads()
        self._products(tidx, s_x.iterator, BOX_ROWS, KC, tuple(r * WB + s for r, s in TAPS),
                       s_b, True, c_ptr)


def tf32_values(t):
    """t with each fp32 word's low 13 bits cleared: values tf32 holds exactly, so the
    tensor cores' reading of them (truncating or rounding) cannot be what a check sees."""
    import torch

    return (t.view(torch.int32) & -8192).view(torch.float32)


def expected(a, b):
    """sum over SHIFTS of A[s:s+64] @ B.T in float64."""
    a64, b64 = a.double(), b.double()
    return sum(a64[s:s + 64] @ b64.T for s in SHIFTS)


def expected_halo(x, b):
    """HaloProbe's output in float64: x chunk-planar (KC, IMG_H, IMG_W, 4), b (taps, TN,
    4 KC). The box as (BOX_ROWS, 4 KC) rows (row = w + WB h), then per tap the rows from
    r WB + s on."""
    box = x[:, :HB, :WB, :].double().permute(1, 2, 0, 3).reshape(BOX_ROWS, 4 * KC)
    return sum(box[r * WB + s:r * WB + s + 64] @ b[j].double().T
               for j, (r, s) in enumerate(TAPS))


def _compile_check() -> int:
    if DUMP is None:  # the DSL's SASS folder is set only when this file runs as a script
        print("--compile-only: run this file as a script", file=sys.stderr)
        return 2
    ptrs = [make_ptr(t, 1 << s, cute.AddressSpace.gmem, assumed_align=16)
            for t, s in ((TFloat32, 20), (TFloat32, 24), (Float32, 28))]
    failed = 0
    for name, probe, want in (("windows", WindowProbe(), len(SHIFTS) * TK // 8),
                              ("halo-threads", HaloThreadsProbe(), len(TAPS) * KC // 2),
                              ("halo", HaloProbe(), len(TAPS) * KC // 2)):
        for f in Path(DUMP).glob("*.sass"):
            f.unlink()
        cute.compile(probe, *ptrs)
        sass = "".join(p.read_text() for p in Path(DUMP).glob("*.sass"))
        n = sass.count("HGMMA.64x64x8.F32.TF32")
        tma = sass.count("UTMALDG")
        print(f"{name}: compiled; {n} HGMMA.64x64x8.F32.TF32 (want {want}), {tma} TMA loads")
        failed += n != want or (name == "halo" and tma < 1)
    shutil.rmtree(DUMP, ignore_errors=True)
    return 1 if failed else 0


PROBES = ("windows", "halo-threads", "halo")


def _gpu_check(name: str) -> int:
    """One probe on the GPU: its output against float64 (exit status 1 on a mismatch)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)

    def rand(*shape):
        return tf32_values(torch.randn(*shape, device="cuda", generator=g))

    def ptr(kind, t):
        return make_ptr(kind, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)

    if name == "windows":
        probe, ins = WindowProbe(), (rand(ROWS, TK), rand(TN, TK))
        want = expected(*ins)
    else:
        probe = HaloProbe() if name == "halo" else HaloThreadsProbe()
        ins = (rand(KC, IMG_H, IMG_W, 4), rand(len(TAPS), TN, 4 * KC))
        want = expected_halo(*ins)
    out = torch.full((64, TN), float("nan"), device="cuda")
    ptrs = [ptr(TFloat32, ins[0]), ptr(TFloat32, ins[1]), ptr(Float32, out)]
    cute.compile(probe, *ptrs)(*ptrs)
    torch.cuda.synchronize()
    err = (out.double() - want).abs().max().item()
    scale = want.abs().max().item()
    ok = err <= 1e-5 * scale
    print(f"{name} on {torch.cuda.get_device_name()}: max |error| {err:.3g} of max |value| "
          f"{scale:.3g}: {'read as laid out' if ok else 'MISMATCH'}", flush=True)
    return 0 if ok else 1


def _gpu_checks(limit_s: float) -> int:
    """Each probe in a child process of its own, ``limit_s`` seconds each: a probe that hangs
    (a TMA load that never completes its barrier) is reported as such and the others still
    run."""
    import subprocess

    failed = 0
    for name in PROBES:
        try:
            done = subprocess.run([sys.executable, __file__, "--only", name], timeout=limit_s)
            failed += done.returncode != 0
        except subprocess.TimeoutExpired:
            print(f"{name}: no result within {limit_s:.0f} s (a hang)", flush=True)
            failed += 1
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compile-only", action="store_true",
                    help="compile for CUTE_DSL_ARCH (sm_90a) and count the HGMMAs; no GPU")
    ap.add_argument("--only", choices=PROBES, help="run this probe alone, here")
    ap.add_argument("--limit", type=float, default=40.0,
                    help="seconds each probe may take on the GPU (default 40)")
    args = ap.parse_args(argv)
    if args.compile_only:
        return _compile_check()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: run with --compile-only", file=sys.stderr)
        return 2
    return _gpu_check(args.only) if args.only else _gpu_checks(args.limit)


if __name__ == "__main__":
    sys.exit(main())
