"""Seed for softmax_*: row softmax over the last dim, fp32 statistics, any row length.

One kernel, ``RowSoftmax``, with three shapes chosen on the host from the row length N:

* **rows in registers** (N up to ``max_cta_threads * vals_per_thread``): ``tpr`` threads
  share a row and hold it in registers (``vals_per_thread`` fp32 values each); short rows
  pack ``cta_threads // tpr`` rows into one CTA. One read and one write of the data.
* **row spread over a cluster** (up to ``cluster_max`` times longer): a thread-block cluster
  of CTAs along grid y shares a row, each CTA holding its slice in registers; the row
  statistics are combined through distributed shared memory (each warp ``st.async``-s its
  (max, sum) pair into every peer's buffer, completion counted by an mbarrier), as QuACK
  does on Hopper. Still one read and one write.
* **looped** (longer still): each CTA of the cluster walks its slice in register-sized
  chunks twice, an online (max, sum) pass and then a normalising pass that visits the chunks
  in reverse order so the most recently read ones are still in L2.

Layout: thread (row r, lane l) reads vectors l, l + tpr, l + 2 tpr ... of its row in each
chunk, ``vec`` elements each (128-bit when N and the pointers allow, narrower otherwise), so
a warp covers 512 contiguous bytes per access. Masked elements read as -inf.

Statistics: every warp computes its max m_w with a butterfly shuffle, exponentiates against
it, sums; the (m_w, s_w) pairs of all warps (and CTAs) of the row are then merged in one
exchange as M = max m_w, S = sum s_w * exp(m_w - M), and each value is rescaled by
exp(m_w - M) / S. Exponentials are exp2((x - m) * log2(e)) with the subtraction done first,
so large inputs keep full relative accuracy.
"""

import math
import operator

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass import Float32, Int32, Int64, const_expr
from cutlass.cute.runtime import make_ptr
from cutlass.memory import SmemAllocator

TUNABLES = {
    "vals_per_thread": 32,
    "cta_threads": 128,
    "max_cta_threads": 512,
    "cluster_max": 8,
    "vec_bits": 128,
}
TUNABLE_CHOICES = {
    "vals_per_thread": [16, 32, 64],
    "cta_threads": [64, 128, 256],
    "max_cta_threads": [256, 512, 1024],
    "cluster_max": [1, 2, 4, 8],
    "vec_bits": [32, 64, 128],
}

_TORCH_TO_CUTE = {
    torch.float32: cutlass.Float32,
    torch.bfloat16: cutlass.BFloat16,
    torch.float16: cutlass.Float16,
}
_LOG2E = math.log2(math.e)
_NEG_INF = float("-inf")


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def _vector_width(n_cols: int, max_bits: int, *tensors: torch.Tensor) -> int:
    esize = tensors[0].element_size()
    vec = max(1, max_bits // (8 * esize))
    while vec > 1 and (n_cols % vec or any(t.data_ptr() % (vec * esize) for t in tensors)):
        vec //= 2
    return vec


@cute.jit
def _exp2(x):
    return cute.math.exp2(x, fastmath=True)


class RowSoftmax:
    """Softmax over the last dim of a (rows, N) row-major tensor; see the module docstring."""

    def __init__(self, dtype, n_cols: int, vec: int, vals_per_thread: int, cta_threads: int,
                 max_cta_threads: int, cluster_max: int):
        self.dtype = dtype
        self.N = n_cols
        self.vec = vec
        n_vecs = -(-n_cols // vec)
        nvec = max(1, vals_per_thread // vec)  # vectors per thread per chunk
        # Register budget: ~2 registers per held value plus ~32 of overhead, 64K per SM.
        cap = _pow2_at_most(65536 // (2 * max(vals_per_thread, vec) + 32))
        cta_threads, max_cta_threads = min(cta_threads, cap), min(max_cta_threads, cap)
        tpr = _pow2_at_least(-(-n_vecs // nvec))  # threads to hold a row in registers
        cluster, chunks = 1, 1
        if tpr <= cta_threads:  # several rows per CTA
            rows, threads = cta_threads // tpr, cta_threads
        elif tpr <= max_cta_threads:  # one row per CTA
            rows, threads = 1, tpr
        else:  # one row per cluster of CTAs, looping over chunks if still too long
            rows, threads = 1, max_cta_threads
            tpr = max_cta_threads
            cluster = min(cluster_max, _pow2_at_least(-(-n_vecs // (nvec * tpr))))
            chunks = -(-n_vecs // (nvec * tpr * cluster))
        if chunks == 1:  # trim the per-thread vector count to what the row needs
            nvec = -(-n_vecs // (tpr * cluster))
        self.tpr, self.rows, self.threads = tpr, rows, threads
        self.cluster_n, self.chunks, self.nvec = cluster, chunks, nvec
        self.chunk_cols = tpr * vec * nvec
        self.slice_cols = self.chunk_cols * chunks  # columns per CTA
        self.even = self.slice_cols * cluster == n_cols
        self.warps_per_row = max(1, tpr // 32)
        self.n_slots = self.warps_per_row * cluster  # (max, sum) pairs per row to merge

    @cute.jit
    def __call__(self, x_ptr: cute.Pointer, o_ptr: cute.Pointer, n_rows: Int32,
                 stream: cuda.CUstream):
        self.kernel(x_ptr, o_ptr, n_rows).launch(
            grid=[cute.ceil_div(n_rows, self.rows), self.cluster_n, 1],
            block=[self.threads, 1, 1],
            cluster=[1, self.cluster_n, 1] if const_expr(self.cluster_n > 1) else None,
            stream=stream,
        )

    @cute.kernel
    def kernel(self, x_ptr: cute.Pointer, o_ptr: cute.Pointer, n_rows: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, rank, _ = cute.arch.block_idx()  # rank: this CTA's index in the row's cluster
        if const_expr(self.cluster_n == 1):
            rank = 0
        smem = SmemAllocator()
        pairs = None
        mbar = None
        if const_expr(self.n_slots > 1):
            # pairs[row, w + warps_per_row * cta, {max, sum}]
            pairs = smem.allocate_tensor(
                Float32,
                cute.make_layout((self.rows, self.n_slots, 2), stride=(2 * self.n_slots, 2, 1)),
                byte_alignment=16,
            )
        if const_expr(self.cluster_n > 1):
            mbar = smem.allocate_array(Int64, 1, byte_alignment=8)
            if tidx == 0:
                cute.arch.mbarrier_init(mbar, 1)
            cute.arch.mbarrier_init_fence()
            # Peers may st.async into our buffer only after our mbarrier is initialised:
            # arrive now, wait right before the exchange, so the loads hide the handshake.
            cute.arch.cluster_arrive_relaxed()

        row = bidx * self.rows + tidx // self.tpr
        row_ok = row < n_rows
        offset = cute.assume(
            Int64(bidx * self.rows) * self.N + rank * self.slice_cols, divby=self.vec
        )
        layout = cute.make_layout((self.rows, self.slice_cols), stride=(self.N, 1))
        gX = cute.make_tensor(x_ptr + offset, layout)
        gO = cute.make_tensor(o_ptr + offset, layout)
        atom = cute.make_copy_atom(
            cute.nvgpu.CopyUniversalOp(), self.dtype, num_bits_per_copy=self.vec * self.dtype.width
        )
        # Thread (row r, lane l) <- vector l of row r in each tpr*vec column block.
        thr = cute.make_tiled_copy_tv(
            atom,
            cute.make_layout((self.rows, self.tpr), stride=(self.tpr, 1)),
            cute.make_layout((1, self.vec), stride=(self.vec, 1)),
        ).get_slice(tidx)
        tile = (self.rows, self.chunk_cols)
        frag = cute.make_fragment_like(thr.partition_S(cute.local_tile(gX, tile, (0, 0))))
        lane_col = (tidx % self.tpr) * self.vec
        limit = self.N - rank * self.slice_cols  # columns of this CTA's slice inside the row
        group = min(self.tpr, 32)

        if const_expr(self.chunks == 1):
            self._load(atom, thr.partition_S(cute.local_tile(gX, tile, (0, 0))), frag,
                       0, lane_col, limit, row_ok)
            x = frag.load().to(Float32)
            m_w = cute.arch.warp_reduction(
                x.reduce(cute.ReductionOp.MAX, init_val=_NEG_INF, reduction_profile=0),
                cute.arch.fmax, threads_in_group=group,
            )
            m_w_safe = m_w if m_w != _NEG_INF else Float32(0.0)  # fully masked group
            e = _exp2((x - m_w_safe) * _LOG2E)
            s_w = cute.arch.warp_reduction(
                e.reduce(cute.ReductionOp.ADD, init_val=0.0, reduction_profile=0),
                operator.add, threads_in_group=group,
            )
            scale = 1.0 / s_w
            if const_expr(self.n_slots > 1):
                m_row, s_row = self._merge(m_w, s_w, pairs, mbar, rank)
                scale = _exp2((m_w_safe - m_row) * _LOG2E) / s_row
            frag.store((e * scale).to(self.dtype))
            self._store(atom, frag, thr.partition_D(cute.local_tile(gO, tile, (0, 0))),
                        0, lane_col, limit, row_ok)
        else:
            # Pass 1: per-thread online (max, sum) over the chunks of this CTA's slice.
            m_t = Float32(_NEG_INF)
            s_t = Float32(0.0)
            for c in cutlass.range(self.chunks, unroll=1):
                self._load(atom, thr.partition_S(cute.local_tile(gX, tile, (0, c))), frag,
                           c, lane_col, limit, row_ok)
                x = frag.load().to(Float32)
                m_new = cute.arch.fmax(
                    m_t, x.reduce(cute.ReductionOp.MAX, init_val=_NEG_INF, reduction_profile=0)
                )
                m_safe = m_new if m_new != _NEG_INF else Float32(0.0)
                s_chunk = _exp2((x - m_safe) * _LOG2E).reduce(
                    cute.ReductionOp.ADD, init_val=0.0, reduction_profile=0
                )
                s_t = s_t * _exp2((m_t - m_safe) * _LOG2E) + s_chunk
                m_t = m_new
            m_w = cute.arch.warp_reduction(m_t, cute.arch.fmax, threads_in_group=group)
            m_w_safe = m_w if m_w != _NEG_INF else Float32(0.0)
            s_w = cute.arch.warp_reduction(
                s_t * _exp2((m_t - m_w_safe) * _LOG2E), operator.add, threads_in_group=group
            )
            m_row, s_row = m_w_safe, s_w
            if const_expr(self.n_slots > 1):
                m_row, s_row = self._merge(m_w, s_w, pairs, mbar, rank)
            inv = 1.0 / s_row
            # Pass 2: normalise, newest chunk first (it is the likeliest to be in L2).
            for i in cutlass.range(self.chunks, unroll=1):
                c = self.chunks - 1 - i
                self._load(atom, thr.partition_S(cute.local_tile(gX, tile, (0, c))), frag,
                           c, lane_col, limit, row_ok)
                y = _exp2((frag.load().to(Float32) - m_row) * _LOG2E) * inv
                frag.store(y.to(self.dtype))
                self._store(atom, frag, thr.partition_D(cute.local_tile(gO, tile, (0, c))),
                            c, lane_col, limit, row_ok)

    @cute.jit
    def _load(self, atom, src, frag, chunk, lane_col, limit, row_ok):
        """Chunk -> registers; columns past the row end (and rows past the last) read -inf."""
        if const_expr(self.even and self.rows == 1):
            cute.copy(atom, src, frag)
        else:
            frag.fill(_NEG_INF)
            for v in cutlass.range_constexpr(self.nvec):
                col = chunk * self.chunk_cols + v * self.tpr * self.vec + lane_col
                if row_ok and col < limit:
                    cute.copy(atom, src[None, None, v], frag[None, None, v])

    @cute.jit
    def _store(self, atom, frag, dst, chunk, lane_col, limit, row_ok):
        if const_expr(self.even and self.rows == 1):
            cute.copy(atom, frag, dst)
        else:
            for v in cutlass.range_constexpr(self.nvec):
                col = chunk * self.chunk_cols + v * self.tpr * self.vec + lane_col
                if row_ok and col < limit:
                    cute.copy(atom, frag[None, None, v], dst[None, None, v])

    @cute.jit
    def _merge(self, m_w: Float32, s_w: Float32, pairs: cute.Tensor, mbar, rank):
        """Merge the (max, sum) pairs of all warps (and CTAs) of each row; every warp of the
        row gets (M, S) with S = sum_w s_w * exp(m_w - M)."""
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        row_w = warp // self.warps_per_row
        slot = warp % self.warps_per_row + rank * self.warps_per_row
        if const_expr(self.cluster_n == 1):
            if lane == 0:
                pairs[row_w, slot, 0] = m_w
                pairs[row_w, slot, 1] = s_w
            cute.arch.barrier()
        else:
            cute.arch.cluster_wait()
            if warp == 0:
                with cute.arch.elect_one():
                    cute.arch.mbarrier_arrive_and_expect_tx(mbar, self.rows * self.n_slots * 8)
            if lane < self.cluster_n:
                # Lane p writes this warp's pair into CTA p's buffer (one 8-byte st.async).
                dst = pairs.iterator + cute.assume((row_w * self.n_slots + slot) * 2, divby=2)
                cute.arch.store_async_dsmem(
                    dst, (m_w.bitcast(Int32), s_w.bitcast(Int32)), mbar, lane
                )
            cute.arch.mbarrier_wait(mbar, 0)
        n_iter = -(-self.n_slots // 32)
        ms = cute.make_rmem_tensor(n_iter, Float32)
        ss = cute.make_rmem_tensor(n_iter, Float32)
        m_row = Float32(_NEG_INF)
        for i in cutlass.range_constexpr(n_iter):
            idx = lane + 32 * i
            ms[i] = Float32(_NEG_INF)
            ss[i] = Float32(0.0)
            if idx < self.n_slots:
                ms[i] = pairs[row_w, idx, 0]
                ss[i] = pairs[row_w, idx, 1]
            m_row = cute.arch.fmax(m_row, ms[i])
        m_row = cute.arch.warp_reduction(m_row, cute.arch.fmax)
        s_row = Float32(0.0)
        for i in cutlass.range_constexpr(n_iter):
            s_row = s_row + ss[i] * _exp2((ms[i] - m_row) * _LOG2E)
        s_row = cute.arch.warp_reduction(s_row, operator.add)
        return m_row, s_row


_compiled: dict = {}


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    out = torch.empty_like(x2)
    n_rows = x2.shape[0]
    if x2.numel() == 0:
        return out.view(x.shape)
    vec = _vector_width(n_cols, TUNABLES["vec_bits"], x2, out)
    dtype = _TORCH_TO_CUTE[x.dtype]
    align = vec * x2.element_size()
    x_ptr = make_ptr(dtype, x2.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)
    o_ptr = make_ptr(dtype, out.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)
    key = (dtype, n_cols, vec)
    fn = _compiled.get(key)
    if fn is None:
        op = RowSoftmax(dtype, n_cols, vec, TUNABLES["vals_per_thread"], TUNABLES["cta_threads"],
                        TUNABLES["max_cta_threads"], TUNABLES["cluster_max"])
        fn = cute.compile(op, x_ptr, o_ptr, Int32(n_rows), cuda.CUstream(0))
        _compiled[key] = fn
    # The stream is a runtime argument: compiled above with a placeholder, launched on torch's.
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    fn(x_ptr, o_ptr, Int32(n_rows), stream)
    return out.view(x.shape)


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x.contiguous())
