"""The sass profiler: SASS text and cubin parsing on real CuTe DSL output, occupancy, hints."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from cutegen.codegen.evaluation import Evaluation, Roofline, Stage, Timing, Verdict
from cutegen.plugins.testing import ProfilerContract
from cutegen.profilers import ProfileTarget, Status
from cutegen.profilers._cubin import CubinFormatError, parse_cubin
from cutegen.profilers._occupancy import SM90, estimate_occupancy
from cutegen.profilers._sass_text import access_bits, mma_precision, parse_sass, summarize
from cutegen.profilers.sass import SassProfiler, find_nvdisasm, sass_findings

DATA = Path(__file__).resolve().parents[1] / "data" / "sass"


def sass(name: str) -> str:
    return (DATA / name).read_text()


class TestSassContract(ProfilerContract):
    @pytest.fixture
    def profiler(self) -> SassProfiler:
        return SassProfiler()


# -- SASS text --------------------------------------------------------------------------
def test_vectorized_add_uses_128_bit_global_accesses():
    (k,) = parse_sass(sass("add_vec4_sm90a.sass"))
    assert k.name.startswith("kernel_cutlass_add_kernel_")
    assert k.opcodes["LDG.E.128"] == 2 and k.opcodes["STG.E.128"] == 1
    s = summarize([k])
    assert (s.ldg_min_bits, s.ldg_max_bits, s.stg_min_bits) == (128, 128, 128)
    assert s.local_loads == s.local_stores == s.tensor_core_ops == 0


def test_scalar_add_uses_32_bit_accesses():
    s = summarize(parse_sass(sass("add_scalar_sm90a.sass")))
    assert (s.ldg_count, s.ldg_min_bits, s.stg_min_bits) == (2, 32, 32)


def test_wgmma_excerpt_shows_hgmma_bf16_spills_barriers_and_narrow_loads():
    s = summarize(parse_sass(sass("wgmma_bf16_spills_sm90a_excerpt.sass")))
    assert s.hgmma == 4 and s.hmma == 0
    assert s.mma_precisions == ("bf16->f32",)
    assert s.local_loads > 0 and s.local_stores > 0 and s.spill_annotated > 0
    assert s.barriers == 2
    assert s.ldg_min_bits == 16
    assert s.max_register >= 200


def test_warp_mma_tf32_is_hmma_with_tf32_precision():
    s = summarize(parse_sass(sass("mma_tf32_sm90a.sass")))
    assert s.hmma == 1 and s.hgmma == 0
    assert s.mma_precisions == ("tf32->f32",)


@pytest.mark.parametrize("op, bits", [
    ("LDG.E", 32), ("LDG.E.64", 64), ("LDG.E.128", 128), ("LDG.E.U16", 16), ("LDG.E.S8", 8),
    ("LDG.E.128.CONSTANT", 128), ("STG.E.STRONG.GPU", 32), ("LDG.E.ENL2.256", 256),
])
def test_access_bits(op, bits):
    assert access_bits(op) == bits


@pytest.mark.parametrize("op, precision", [
    ("HGMMA.64x128x16.F32.BF16", "bf16->f32"),
    ("HGMMA.64x256x8.F32.TF32", "tf32->f32"),
    ("HGMMA.64x128x16.F16", "f16->f16"),
    ("HMMA.1688.F32.TF32", "tf32->f32"),
    ("HMMA.16816.F32", "f16->f32"),
    ("HMMA.16816.F32.BF16", "bf16->f32"),
    ("QGMMA.64x128x32.F32.E4M3.E4M3", "e4m3->f32"),
    ("FFMA", None),
])
def test_mma_precision(op, precision):
    assert mma_precision(op) == precision


def test_cuobjdump_style_listing_with_predicates_and_encodings():
    text = """
        Function : kernel_cutlass_x_0
        .headerflags    @"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                  /* 0x00000a00ff017b82 */
                                                                           /* 0x000fe40000000800 */
        /*0010*/              @!P0 LDG.E.64 R2, desc[UR4][R4.64] ;          /* 0x0000000404027981 */
        /*0020*/               @P1 STL [R1+0x8], R2 ;                       /* 0x0000080201007387 */
        /*0030*/                   EXIT ;                                   /* 0x000000000000794d */
    """
    (k,) = parse_sass(text)
    assert k.name == "kernel_cutlass_x_0"
    assert k.opcodes == {"LDC": 1, "LDG.E.64": 1, "STL": 1, "EXIT": 1}
    assert k.max_register == 4  # R4.64 names R4 (its pair R5 is not counted: a lower bound)


def test_listing_without_instructions_gives_no_kernel():
    assert parse_sass("//--- nothing here\n.section .text.k,\"ax\"\n") == ()


# -- cubin ------------------------------------------------------------------------------
def test_cubin_resources_of_the_vectorized_add():
    (r,) = parse_cubin((DATA / "add_vec4_sm90a.cubin").read_bytes())
    assert r.name.startswith("kernel_cutlass_add_kernel_")
    assert (r.registers, r.threads_per_block, r.static_smem_bytes, r.frame_bytes) == (22, 128, 0, 0)
    assert r.max_registers == 255 and r.barriers == 0


def test_cubin_resources_of_the_warp_mma():
    (r,) = parse_cubin((DATA / "mma_tf32_sm90a.cubin").read_bytes())
    assert (r.registers, r.threads_per_block) == (18, 32)


def _elf(sections: list[tuple[str, int, int, bytes]], symbols: list[str]) -> bytes:
    """A minimal 64-bit ELF: (name, type, flags, data) sections plus .shstrtab/.strtab/.symtab."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, *_ in sections) + b".shstrtab\0.strtab\0.symtab\0"
    strtab = b"\0" + b"".join(s.encode() + b"\0" for s in symbols)
    sym_off, syms = [], b""
    pos = 1
    for s in symbols:
        sym_off.append(pos)
        pos += len(s) + 1
    syms = b"\0" * 24 + b"".join(struct.pack("<IBBHQQ", o, 0x12, 0, 0, 0, 0) for o in sym_off)
    blobs = [d for *_, d in sections] + [names, strtab, syms]
    off, layout = 64, []
    for b in blobs:
        layout.append(off)
        off += len(b)
    shoff = off
    name_pos, headers = 1, [b"\0" * 64]
    for i, (n, typ, flags, d) in enumerate(sections):
        headers.append(struct.pack("<IIQQQQIIQQ", name_pos, typ, flags, 0, layout[i], len(d), 0, 0, 1, 0))
        name_pos += len(n) + 1
    n = len(sections)
    strtab_idx = n + 2
    for j, (typ, link) in enumerate(((3, 0), (3, 0), (2, strtab_idx))):
        label = (".shstrtab", ".strtab", ".symtab")[j]
        headers.append(struct.pack("<IIQQQQIIQQ", name_pos, typ, 0, 0, layout[n + j], len(blobs[n + j]),
                                   link, 0, 1, 24 if typ == 2 else 0))
        name_pos += len(label) + 1
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, 7]) + b"\0" * 7
    ehdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                               len(headers), n + 1)
    return ehdr + b"".join(blobs) + b"".join(headers)


def test_cubin_frame_size_and_static_smem_from_a_synthetic_elf():
    sval = lambda attr, payload: bytes([4, attr]) + struct.pack("<H", len(payload)) + payload  # noqa: E731
    info = sval(0x2F, struct.pack("<II", 1, 168)) + sval(0x11, struct.pack("<II", 1, 256))
    local = sval(0x10, struct.pack("<III", 256, 1, 1)) + bytes([3, 0x1B]) + struct.pack("<H", 168)
    data = _elf([(".nv.info", 0x70000000, 0, info), (".nv.info.k0", 0x70000000, 0, local),
                 (".text.k0", 1, 0x6 | (1 << 20), b"\0" * 16), (".nv.shared.k0", 8, 3, b"\0" * 4096)],
                ["k0"])
    (r,) = parse_cubin(data)
    assert (r.name, r.registers, r.frame_bytes, r.threads_per_block) == ("k0", 168, 256, 256)
    assert (r.static_smem_bytes, r.max_registers, r.barriers) == (4096, 168, 1)


@pytest.mark.parametrize("data", [b"", b"not an elf at all" * 8, b"\x7fELF" + bytes([1, 1]) + b"\0" * 60,
                                  b"\x7fELF" + bytes([2, 1]) + b"\xff" * 60])
def test_bad_cubins_raise_cubin_format_error(data):
    with pytest.raises(CubinFormatError):
        parse_cubin(data)


# -- occupancy --------------------------------------------------------------------------
@pytest.mark.parametrize("regs, threads, smem, blocks, limiter", [
    (22, 128, 0, 16, "threads"),          # the vectorized add: full occupancy
    (32, 32, 0, 32, "blocks"),            # tiny blocks: 32 blocks x 1 warp = 50%
    (128, 256, 0, 2, "registers"),        # 128 regs x 256 threads = 32K regs per block
    (255, 128, 0, 2, "registers"),
    (64, 128, 100 * 1024, 2, "shared_memory"),
    (96, 128, 0, 5, "registers"),
])
def test_occupancy_limits(regs, threads, smem, blocks, limiter):
    occ = estimate_occupancy(regs_per_thread=regs, threads_per_block=threads, smem_per_block=smem)
    assert (occ.blocks_per_sm, occ.limiter) == (blocks, limiter)
    assert occ.fraction == occ.warps_per_sm / SM90.max_warps_per_sm


def test_configuration_that_cannot_launch():
    assert estimate_occupancy(regs_per_thread=32, threads_per_block=2048).limiter == "launch"
    assert estimate_occupancy(regs_per_thread=32, threads_per_block=128,
                              smem_per_block=300 * 1024).blocks_per_sm == 0


# -- findings and the profiler ------------------------------------------------------------
def _evaluation(kind: str, precision: str = "") -> Evaluation:
    return Evaluation("a" * 64, "b" * 64, Stage.BENCHMARK, Verdict.CORRECT,
                      timing=Timing.from_samples([100.0] * 30), precision=precision,
                      roofline=Roofline(1, 1, 50.0, kind, 4300.0, 790.0))


def test_scalar_kernel_gets_a_vector_width_hint():
    hints = {f.key: f for f in sass_findings(summarize(parse_sass(sass("add_scalar_sm90a.sass"))), ())
             if f.is_hint}
    assert hints["hint.vector_width"].value == 128
    assert "128-bit" in hints["hint.vector_width"].summary


def test_vector_width_hint_looks_at_the_kernel_carrying_the_traffic():
    # found on the H200 run: cross-entropy's row kernel reads logits with LDG.E.128 and one
    # 32-bit target per row, and a small second kernel sums the losses with narrow loads;
    # the profiler used to read one SASS file and to hint "use 128-bit" on any narrow access
    from cutegen.profilers._sass_text import SassKernel

    row = SassKernel("row", {"LDG.E.128": 8, "LDG.E": 1, "STG.E": 1, "FADD": 40})
    loss = SassKernel("loss", {"LDG.E": 5, "LDG.E.64": 5, "STG.E": 1})
    fs = sass_findings(summarize([row, loss]), (), kernels=(row, loss))
    assert not [f for f in fs if f.key == "hint.vector_width"]
    facts = {f.key: f.value for f in fs}
    assert (facts["sass.ldg_min_bits"], facts["sass.ldg_max_bits"]) == (32, 128)  # facts span all
    scalar = SassKernel("pw", {"LDG.E": 4, "STG.E": 4})
    (hint,) = [f for f in sass_findings(summarize([scalar, loss]), (), kernels=(scalar, loss))
               if f.key == "hint.vector_width"]
    assert "100% of the main kernel's global bytes" in hint.summary
    assert "use 128-bit vectorized copies" in hint.summary  # the phrase moves.HINT_RULES match


_CHAINED = """
        .section .text.walk,"ax",@progbits
.L_x_1:
        /*0220*/               @P0 LDG.E R10, desc[UR6][R6.64+-0x3ffc0] ;
        /*0230*/                   IMAD.MOV.U32 R9, RZ, RZ, R10 ;
        /*0240*/               @P0 LDG.E R9, desc[UR6][R6.64+-0x1ffe0] ;
        /*0250*/                   FMNMX R10, R10, R11, !PT ;
        /*0260*/                   IMAD.MOV.U32 R12, RZ, RZ, R9 ;
        /*0270*/               @P0 LDG.E R12, desc[UR6][R6.64] ;
        /*0280*/                   FMNMX R14, R9, R10, !PT ;
        /*0290*/                   IMAD.MOV.U32 R13, RZ, RZ, R12 ;
        /*02a0*/               @P0 LDG.E R13, desc[UR6][R6.64+0x1ffe0] ;
        /*02b0*/                   FMNMX R11, R13, R14, !PT ;
        /*02c0*/              @!P3 BRA `(.L_x_1) ;
"""
_BATCHED = """
        .section .text.walk,"ax",@progbits
.L_x_1:
        /*0220*/                   IMAD.MOV.U32 R10, RZ, RZ, RZ ;
        /*0250*/               @P0 LDG.E R10, desc[UR6][R6.64+-0x3ffc0] ;
        /*0270*/                   IMAD.MOV.U32 R9, RZ, RZ, RZ ;
        /*0290*/               @P0 LDG.E R9, desc[UR6][R6.64+-0x1ffe0] ;
        /*02a0*/               @P0 LDG.E.64 R12, desc[UR6][R6.64] ;
        /*02d0*/                   VIADD R8, R8, 0x20 ;
        /*02e0*/                   FMNMX R10, R10, R11, !PT ;
        /*02f0*/                   FMNMX R11, R10, R13, !PT ;
        /*0300*/               @P0 LDG.E R9, desc[UR6][R6.64+0x40] ;
        /*0340*/              @!P3 BRA `(.L_x_1) ;
"""


def test_loads_in_flight_counts_the_loads_issued_before_one_is_used():
    # an unrolled walk over rows found on the CPU (KernelBench L1 49's max over dim 1, odd C):
    # each predicated load kept the earlier row's value, a copy that waits for that load
    (chained,) = parse_sass(_CHAINED)
    assert chained.count("LDG") == 4 and chained.ldg_in_flight == 1
    (batched,) = parse_sass(_BATCHED)
    assert batched.ldg_in_flight == 3  # the first FMNMX reads R10 and ends the run
    assert summarize([chained, batched]).ldg_in_flight == 3


def test_a_label_or_a_store_of_a_loaded_value_ends_a_run_of_loads():
    split = """
        /*0010*/                   LDG.E R2, desc[UR4][R4.64] ;
.L_x_3:
        /*0020*/                   LDG.E R3, desc[UR4][R4.64+0x4] ;
        /*0030*/                   LDG.E R6, desc[UR4][R4.64+0x8] ;
        /*0040*/                   STG.E desc[UR4][R8.64], R3 ;
        /*0050*/                   LDG.E R7, desc[UR4][R4.64+0xc] ;
        /*0060*/                   EXIT ;
    """
    (k,) = parse_sass(split)
    assert k.ldg_in_flight == 2


def test_serial_loads_of_the_main_kernel_get_a_hint():
    (chained,) = parse_sass(_CHAINED)
    fs = sass_findings(summarize([chained]), (), kernels=(chained,))
    (hint,) = [f for f in fs if f.key == "hint.loads_in_flight"]
    assert hint.value == 1 and "one load in flight" in hint.summary
    assert {f.key: f.value for f in fs}["sass.ldg_in_flight"] == 1
    (batched,) = parse_sass(_BATCHED)
    assert not [f for f in sass_findings(summarize([batched]), (), kernels=(batched,))
                if f.key == "hint.loads_in_flight"]


def test_profile_reads_every_kernels_sass(tmp_path):
    target = ProfileTarget("c", tmp_path, sass_path=DATA / "add_vec4_sm90a.sass",
                           sass_paths=(DATA / "add_vec4_sm90a.sass", DATA / "add_scalar_sm90a.sass"))
    rep = SassProfiler().profile(target, timeout_s=30)
    assert rep.ok
    import json

    kernels = json.loads((tmp_path / "sass.json").read_text())["kernels"]
    names = [k["name"] for k in kernels]
    assert len(names) == 2
    assert sorted(k["ldg_in_flight"] for k in kernels) == [2, 2]  # a + b loaded, then added
    assert rep.get("sass.ldg_min_bits") == 32 and rep.get("sass.ldg_max_bits") == 128


def test_vectorized_kernel_gets_no_hint():
    fs = sass_findings(summarize(parse_sass(sass("add_vec4_sm90a.sass"))),
                       parse_cubin((DATA / "add_vec4_sm90a.cubin").read_bytes()))
    assert not [f for f in fs if f.is_hint]
    assert {f.key: f.value for f in fs}["sass.occupancy"] == 1.0


def test_matmul_without_wgmma_and_undeclared_tf32_get_hints(tmp_path):
    target = ProfileTarget("c", tmp_path, evaluation=_evaluation("compute"))
    fs = {f.key: f.value for f in sass_findings(summarize(parse_sass(sass("mma_tf32_sm90a.sass"))), (),
                                                target)}
    assert fs["hint.tensor_cores"] == "wgmma"
    assert fs["hint.precision"] == "tf32"


def test_declared_precision_is_not_flagged(tmp_path):
    target = ProfileTarget("c", tmp_path, evaluation=_evaluation("compute", precision="tf32"))
    fs = {f.key for f in sass_findings(summarize(parse_sass(sass("mma_tf32_sm90a.sass"))), (), target)}
    assert "hint.precision" not in fs


def test_spills_hint_from_the_wgmma_excerpt():
    fs = {f.key: f for f in sass_findings(summarize(parse_sass(sass("wgmma_bf16_spills_sm90a_excerpt.sass"))), ())}
    assert fs["hint.spills"].value == 18 and "register spills" in fs["hint.spills"].summary


def test_profile_from_sass_and_cubin(tmp_path):
    target = ProfileTarget("c", tmp_path, sass_path=DATA / "add_vec4_sm90a.sass",
                           cubin_path=DATA / "add_vec4_sm90a.cubin")
    r = SassProfiler().profile(target, timeout_s=30)
    assert r.status is Status.OK and r.get("sass.registers") == 22 and r.get("sass.ldg_max_bits") == 128
    assert (tmp_path / "sass.json").is_file()


def test_profile_without_inputs_is_unavailable(tmp_path):
    r = SassProfiler().profile(ProfileTarget("c", tmp_path), timeout_s=30)
    assert r.status is Status.UNAVAILABLE and r.error


def test_profile_with_a_garbage_cubin_and_no_nvdisasm_fails_cleanly(tmp_path):
    bad = tmp_path / "x.cubin"
    bad.write_bytes(b"garbage")
    r = SassProfiler(nvdisasm=str(tmp_path / "missing-nvdisasm")).profile(
        ProfileTarget("c", tmp_path, cubin_path=bad), timeout_s=30)
    assert r.status is Status.FAILED and "cubin unreadable" in (r.error or "")


@pytest.mark.skipif(find_nvdisasm() is None, reason="nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
def test_profile_from_a_cubin_alone_disassembles_it(tmp_path):
    r = SassProfiler().profile(ProfileTarget("c", tmp_path, cubin_path=DATA / "add_vec4_sm90a.cubin"),
                               timeout_s=60)
    assert r.status is Status.OK
    assert r.get("sass.ldg_max_bits") == 128 and r.get("sass.registers") == 22
    assert r.artifact is not None and r.artifact.is_file()
