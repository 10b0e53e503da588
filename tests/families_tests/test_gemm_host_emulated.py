"""The GEMM's host path emulated on the CPU: 3xTF32 operands stored as (hi, lo) pairs and
read as three K' slots (``_stored_k``), and products whose ragged last wave is run as two
launches (``_wave_split_launch``).

The 3xTF32 path is one TF32 GEMM over K' = 3 Kp: A's tile_k block j read as the slots (hi,
lo, hi), B's as (hi, hi, lo). Packing the slots themselves stores (and reads from memory) each
operand three times over; a skinny fp32 Linear (M = 128, a 32768 x 32768 weight: four of
KernelBench level 2's tasks) is bound by reading its packed weight. Stored as pairs, the
producer maps each K' tile to the tile of the pair it reads, so the packs hold two thirds of
the bytes.

No GPU here: ``_gemm_launch`` runs on the CPU with its pack kernels replaced by a torch
emulation of the documented layout and its kernel launches by an emulation, tile by tile, of
what the kernel's TMA loads read: the operands as the host laid them out (slices of a buffer
included), the K' extent, strides and batch (slice) offsets the host passed, and the stored k
tile the candidate's own ``_stored_k`` names for each K' tile (the function the kernel's
producer calls); SplitReduceKernel sums the slices."""

from importlib.util import find_spec

import pytest
import torch

pytestmark = pytest.mark.skipif(find_spec("cutlass") is None,
                                reason="nvidia-cutlass-dsl missing")


@pytest.fixture(scope="module")
def cand(tmp_path_factory):
    """gemm_fp32's rendered candidate, imported (its host functions run here; no GPU)."""
    import _cutegen_famdata as fd  # registered by conftest.py

    return fd.rendered_module(tmp_path_factory.mktemp("gemm_pairs"), "gemm_fp32")


def _int(v) -> int:
    """A launch argument's integer (``_i32`` marshals a DSL Int32)."""
    v = getattr(v, "vals", v)
    return int(getattr(v, "value", v))


def _tf32_hi(x: torch.Tensor) -> torch.Tensor:
    return ((x.view(torch.int32) + 0x1000) & -8192).view(torch.float32)


class _Emulator:
    """Stands in for the candidate's pack kernels, allocations and launches."""

    def __init__(self, cand):
        self.cand = cand
        self.at: dict[int, torch.Tensor] = {}  # address -> the buffer starting there
        self.kernels: list = []
        self.packed: list[int] = []  # the rows R of each operand packed

    def keep(self, t: torch.Tensor) -> torch.Tensor:
        self.at[t.data_ptr()] = t
        return t

    def empty(self, *size, **kw):
        return self.keep(torch.zeros(*size, **kw))

    def pack(self, src, R, K, L, strides, parts, dst_dtype, r_fast, block=32, k_align=0):
        """The documented layout: dst[l, r, (k // block) * n * block + p * block + k % block]
        = part_p(src[l, r, k]), zero past K (see PackKernel)."""
        self.packed.append(R)
        Kp = -(-max(K, 1) // (k_align or 4)) * (k_align or 4)
        s_r, s_k, s_l = strides
        v = torch.as_strided(src, (L, R, K), (s_l, s_r, s_k), src.storage_offset())
        x = torch.zeros(L, R, Kp)
        x[:, :, :K] = v.float()
        hi = _tf32_hi(x.contiguous())
        vals = {"hi": hi, "lo": x - hi, "x": x}
        n = len(parts)
        dst = torch.zeros(L, R, Kp // block, n, block)
        for p, name in enumerate(parts):
            dst[:, :, :, p, :] = vals[name].view(L, R, Kp // block, block)
        return self.keep(dst.view(L, R, n * Kp).to(dst_dtype)), n * Kp

    def compile(self, op, *args, **kw):
        return ("emulated", op)

    def flat(self, ptr) -> torch.Tensor:
        """The elements from the pointer's address to the end of the buffer holding it (a
        launch may be given a slice of one: a wave split's rows)."""
        addr = self.cand._PTR_INFO[id(ptr)][2]
        for start, t in self.at.items():
            size = t.numel() * t.element_size()
            if start <= addr < start + size:
                assert (addr - start) % t.element_size() == 0
                return t.view(-1)[(addr - start) // t.element_size():]
        raise AssertionError(f"no buffer holds address {addr:#x}")

    def go(self, fn, *args):
        op = fn[1]
        self.kernels.append(op)
        if type(op).__name__ == "GemmKernel":
            return self._gemm(op, *args)
        assert type(op).__name__ == "SplitReduceKernel" and op.epilogue is None
        numel = _int(args[2]) * _int(args[3])
        part, out = self.flat(args[0]), self.flat(args[1])
        out[:numel] = part[:op.splits * numel].view(op.splits, numel).sum(0).to(out.dtype)

    def _gemm(self, op, a_ptr, b_ptr, c_ptr, M, N, K, L, lda, ldb, a_bs, b_bs, *rest):
        """C[l] = sum over K' tiles of A's and B's stored tiles (``_stored_k``), each load
        zero past the operand's stored K (TMA's fill), for each batch / slice l."""
        assert op.a_kmajor and op.b_kmajor and op.epilogue is None
        M, N, K, L, lda, ldb, a_bs, b_bs = map(_int, (M, N, K, L, lda, ldb, a_bs, b_bs))
        a = self.flat(a_ptr).double()
        b = self.flat(b_ptr).double()
        c = self.flat(c_ptr)
        tk = op.tile_k
        ka_ext = K // 3 * 2 if op.pairs[0] else K
        kb_ext = K // 3 * 2 if op.pairs[1] else K
        k_tiles = -(-ka_ext // tk)
        if op.pairs[0]:
            k_tiles = k_tiles // 2 * 3
        if op.blocked:  # a stage per block: its stored (hi, lo) tiles, the candidate's slots
            slots = [(2 * (kt // 3) + self.cand.BLOCK_SLOTS[kt % 3][0],
                      2 * (kt // 3) + self.cand.BLOCK_SLOTS[kt % 3][1])
                     for kt in range(k_tiles)]
        else:
            slots = [(self.cand._stored_k(kt, op.pairs[0], 0),
                      self.cand._stored_k(kt, op.pairs[1], 1)) for kt in range(k_tiles)]

        def tile(flat, rows, ld, bs, ext, batch, kt):
            k = kt * tk + torch.arange(tk)
            idx = batch * bs + torch.arange(rows)[:, None] * ld + k[None, :]
            ok = (k < ext)[None, :].expand(rows, tk)
            return torch.where(ok, flat[idx.clamp(max=flat.numel() - 1)], 0.0)

        for batch in range(L):
            acc = torch.zeros(M, N, dtype=torch.float64)
            for ka, kb in slots:
                a_t = tile(a, M, lda, a_bs, ka_ext, batch, ka)
                acc += a_t @ tile(b, N, ldb, b_bs, kb_ext, batch, kb).T
            c[batch * M * N:(batch + 1) * M * N] = acc.reshape(-1).to(c.dtype)


def _launch(cand, monkeypatch, a, b, batched, split_k, paired, wave_split=False, sms=None,
            a_kind="a_k", b_kind="b_n", kept=None, held=(), blocked=False):
    """``_gemm_launch`` on the emulator (b_kind "b_k": b stored (N, K), a Linear's weight;
    kept: the call's ``kept`` pair; held: tensors of earlier calls the kernels may read)."""
    emu = _Emulator(cand)
    monkeypatch.setitem(cand.TUNABLES, "wave_split", wave_split)
    if sms is not None:
        monkeypatch.setattr(cand, "_sm_count", lambda t: sms)
    monkeypatch.setattr(cand, "_pack", emu.pack)
    monkeypatch.setattr(cand, "_empty", emu.empty)
    monkeypatch.setattr(cand, "_compile", emu.compile)
    monkeypatch.setattr(cand, "_go", emu.go)
    monkeypatch.setattr(cand, "_stream", lambda: None)
    monkeypatch.setattr(cand, "_gemm_compiled", {})
    monkeypatch.setattr(cand, "PAIRED_PARTS", paired)
    monkeypatch.setitem(cand.TUNABLES, "split_k", split_k)
    monkeypatch.setitem(cand.TUNABLES, "block_stages", blocked)
    for t in held:
        emu.keep(t)
    M, N = a.shape[-2], (b.shape[-2] if b_kind == "b_k" else b.shape[-1])
    out = emu.keep(torch.zeros((a.shape[0], M, N) if batched else (M, N)))
    if a_kind == "a_m":  # A stored transposed, (K, M)
        a = a.transpose(-1, -2).contiguous()
    extra = {} if kept is None else {"kept": kept}
    cand._gemm_launch(a, b, a_kind, b_kind, batched, out, "3xtf32", None, (), (), (), (), (),
                      **extra)
    return out, emu


_CASES = [  # (A shape, B shape, batched, split_k): ragged M, N and K against the tiles
    ((130, 200), (200, 70), False, 1),
    ((1, 1000), (1000, 300), False, 0),   # one row: 2 output tiles, 3 K slices chosen
    ((67, 640), (640, 129), False, 2),
    ((2, 33, 96), (2, 96, 40), True, 1),  # batched
]


@pytest.mark.parametrize("paired, blocked", [(True, False), (False, False), (True, True),
                                             (False, True)])
@pytest.mark.parametrize("a_shape, b_shape, batched, split_k", _CASES)
def test_three_slots_of_either_storage_give_the_fp32_product(cand, monkeypatch, paired,
                                                            blocked, a_shape, b_shape,
                                                            batched, split_k):
    """... read a slot at a time or (blocked stages, pairs only) a block at a time."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(a_shape, generator=g)
    b = torch.randn(b_shape, generator=g)
    out, emu = _launch(cand, monkeypatch, a, b, batched, split_k, paired, blocked=blocked)
    gemm = emu.kernels[0]
    assert gemm.pairs == (paired, paired)
    assert gemm.blocked == (blocked and paired)  # slots stored: a slot a stage
    if split_k == 0:
        assert [type(k).__name__ for k in emu.kernels] == ["GemmKernel", "SplitReduceKernel"]
    want = a.double() @ b.double()
    err = (out.double() - want).abs().max().item()
    assert err <= 2e-5 * max(1.0, want.abs().max().item()), err


def test_pairs_store_two_thirds_of_the_slots(cand, monkeypatch):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(64, 512, generator=g), torch.randn(512, 96, generator=g)
    sizes = {}
    for paired in (True, False):
        _, emu = _launch(cand, monkeypatch, a, b, False, 1, paired)
        sizes[paired] = sorted(t.numel() for t in emu.at.values() if t.dim() == 3)
    assert [3 * n for n in sizes[True]] == [2 * n for n in sizes[False]]


def test_slot_map_reads_each_product_once(cand):
    """Per block, the three K' tiles read A's (hi, lo, hi) against B's (hi, hi, lo) from the
    pair (tiles 2j, 2j + 1), and the same tiles where the slots are stored."""
    for j in (0, 1, 7):
        got = [(cand._stored_k(3 * j + s, True, 0), cand._stored_k(3 * j + s, True, 1))
               for s in range(3)]
        assert got == [(2 * j, 2 * j), (2 * j + 1, 2 * j), (2 * j, 2 * j + 1)]
        assert [cand._stored_k(3 * j + s, False, o) for s in range(3) for o in (0, 1)] == \
            [3 * j + s for s in range(3) for _ in (0, 1)]


def test_blocked_slots_are_the_slot_maps_products(cand):
    """A blocked stage's three products (BLOCK_SLOTS, its hi / lo tiles of A and of B) are
    the three K' tiles' of the slot map: the same sum whichever way the stages hold it."""
    for j in (0, 1, 7):
        assert [(2 * j + pa, 2 * j + pb) for pa, pb in cand.BLOCK_SLOTS] == [
            (cand._stored_k(3 * j + s, True, 0), cand._stored_k(3 * j + s, True, 1))
            for s in range(3)]


def test_wrong_block_slots_are_caught(cand, monkeypatch):
    """The emulation of blocked stages can fail: A_lo B_lo in place of A_hi B_lo."""
    monkeypatch.setattr(cand, "BLOCK_SLOTS", ((0, 0), (1, 0), (1, 1)))
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(40, 256, generator=g), torch.randn(256, 50, generator=g)
    out, _ = _launch(cand, monkeypatch, a, b, False, 1, True, blocked=True)
    want = a.double() @ b.double()
    # ~2e-4 of the largest output here: 10x the right products' bound above
    assert (out.double() - want).abs().max().item() > 5e-5 * want.abs().max().item()


def test_a_wrong_slot_map_is_caught(cand, monkeypatch):
    """The emulation can fail: reading B's pair in A's slot order sums A_hi B_hi twice and
    A_lo B_lo, never A_hi B_lo: about twice the product."""
    real = cand._stored_k
    monkeypatch.setattr(cand, "_stored_k", lambda k, paired, operand: real(k, paired, 0))
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(40, 256, generator=g), torch.randn(256, 50, generator=g)
    out, _ = _launch(cand, monkeypatch, a, b, False, 1, True)
    want = a.double() @ b.double()
    assert (out.double() - want).abs().max().item() > 1e-3 * want.abs().max().item()


@pytest.mark.parametrize("paired, a_kind", [(True, "a_k"), (False, "a_k"), (True, "a_m")])
def test_a_wave_split_gives_the_product(cand, monkeypatch, paired, a_kind):
    """A ragged last wave (6 tiles on 4 SMs, the tile-time floor lifted for these small
    sizes): two launches over the output's rows, the second in K slices summed by
    SplitReduceKernel, with one K padding for both (A's rows packed per launch, B once)."""
    monkeypatch.setattr(cand, "_WAVE_MIN_SAVED", 0.0)
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(364, 600, generator=g), torch.randn(600, 300, generator=g)
    assert cand._wave_plan(364, 300, 600, (128, 192, 32), 4, "3xtf32") == (256, 2, 64)
    out, emu = _launch(cand, monkeypatch, a, b, False, 0, paired, wave_split=True, sms=4,
                       a_kind=a_kind)
    assert [type(k).__name__ for k in emu.kernels] == ["GemmKernel", "GemmKernel",
                                                      "SplitReduceKernel"]
    want = a.double() @ b.double()
    err = (out.double() - want).abs().max().item()
    assert err <= 2e-5 * want.abs().max().item(), err
    # off: one launch
    out, emu = _launch(cand, monkeypatch, a, b, False, 0, paired, wave_split=False, sms=4)
    assert [type(k).__name__ for k in emu.kernels] == ["GemmKernel"]


def test_a_wave_split_packs_a_kept_weight_once(cand, monkeypatch):
    """Both launches of a wave split pack B with the same K padding, so a Linear's kept
    weight packing serves both, call after call (a different padding would replace it in
    each launch: two packs of the weight a call)."""
    import torch.nn as nn

    monkeypatch.setattr(cand, "_WAVE_MIN_SAVED", 0.0)
    lin = nn.Linear(600, 300)
    x = torch.randn(364, 600, generator=torch.Generator().manual_seed(4))
    packed = []
    for _ in range(3):
        w = lin.weight
        held = [buf[2] for buf in lin.__dict__.get("_cutegen_packed", {}).values()]
        out, emu = _launch(cand, monkeypatch, x, w.detach(), False, 0, True, wave_split=True,
                           sms=4, b_kind="b_k", kept=(None, (lin, w)), held=held)
        assert len(emu.kernels) == 3  # a wave split
        packed.append(emu.packed.count(300))
        want = x.double() @ w.detach().double().T
        assert (out.double() - want).abs().max().item() <= 2e-5 * want.abs().max().item()
    assert packed == [1, 0, 0]


def test_a_wave_of_one_row_of_tiles_goes_to_k_slices(cand, monkeypatch):
    """One row of tiles whose one wave leaves SMs idle (3 tiles on 4 SMs; the tile-time
    floor and the partial sums' cost lifted for these small sizes): the whole product in 4 K
    slices, one GEMM launch and the reduction."""
    monkeypatch.setattr(cand, "_WAVE_MIN_SAVED", 0.0)
    monkeypatch.setattr(cand, "_WORKSPACE_BW", 1e30)
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(100, 1100, generator=g), torch.randn(1100, 500, generator=g)
    assert cand._wave_plan(100, 500, 1100, (128, 192, 32), 4, "3xtf32") == (0, 4, 128)
    out, emu = _launch(cand, monkeypatch, a, b, False, 0, True, wave_split=True, sms=4)
    assert [type(k).__name__ for k in emu.kernels] == ["GemmKernel", "SplitReduceKernel"]
    assert emu.kernels[1].splits == 4
    want = a.double() @ b.double()
    assert (out.double() - want).abs().max().item() <= 2e-5 * want.abs().max().item()


def test_blocked_stages_without_pairs_are_refused(cand):
    """The hosts ask for blocked stages only over operands stored as pairs; a kernel asked
    otherwise says so instead of running one slot a stage in silence."""
    with pytest.raises(ValueError, match="pairs"):
        cand.GemmKernel(None, None, True, True, (128, 64, 32), (1, 1), 0, True, 1, "tma", 132,
                        None, (), (), 0, pairs=(True, False), blocked=True)
