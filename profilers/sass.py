"""The built-in ``sass`` profiler: instruction mix and resources, without a GPU.

Reads the SASS the CuTe DSL kept (``CUTE_DSL_KEEP=...,sass``), or disassembles the cubin
with ``nvdisasm -c`` (on PATH or from the ``nvidia-cuda-nvdisasm`` wheel), and reads
registers, shared memory and block size straight from the cubin's ELF attributes. It
reports global access widths, TMA, tensor-core instructions and their precision, spills,
barriers and an sm_90 occupancy estimate, plus ``hint.*`` findings for the rewriters.
Registered through the ``cutegen`` entry point ``sass``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import time
from pathlib import Path

from cutegen import hookimpl
from cutegen.profilers._base import Bottleneck, Finding, ProfileReport, ProfileTarget, Status
from cutegen.profilers._cubin import CubinFormatError, KernelResources, parse_cubin
from cutegen.profilers._occupancy import estimate_occupancy
from cutegen.profilers._run import find_tool, run_tool
from cutegen.profilers._sass_text import (
    SassKernel,
    SassSummary,
    access_bits,
    parse_sass,
    summarize,
)

#: Occupancy below this becomes a hint.
LOW_OCCUPANCY = 0.25


class SassProfiler:
    """Instruction mix and resources of a candidate's kernels (CPU only)."""

    name = "sass"

    def __init__(self, *, nvdisasm: str | None = None) -> None:
        self._nvdisasm = nvdisasm

    def is_available(self) -> bool:
        return True  # pure Python; nvdisasm is only needed when a cubin comes without SASS

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        return True  # cheap, and meaningful for every class

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        t0 = time.monotonic()
        notes: list[str] = []
        texts: list[str] = []
        artifact: Path | None = None
        sass_files = [p for p in (target.sass_paths or (target.sass_path,))
                      if p is not None and p.is_file()]
        cubins = [p for p in (target.cubin_paths or (target.cubin_path,))
                  if p is not None and p.is_file()]
        if sass_files:
            texts = [_read_text(p) for p in sass_files]
            artifact = sass_files[0]
        elif cubins:
            tool = self._nvdisasm or find_nvdisasm(target.search_path)
            if tool is None:
                notes.append("no SASS given and nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
            for cubin in cubins if tool is not None else ():
                assert tool is not None
                left = timeout_s - (time.monotonic() - t0)
                run = run_tool([tool, "-c", str(cubin)], timeout_s=max(1.0, left),
                               env=target.child_env())
                if run.timed_out:
                    return ProfileReport(self.name, Status.TIMEOUT, error=run.describe(),
                                         seconds=time.monotonic() - t0)
                if run.ok and run.stdout.strip():
                    texts.append(run.stdout)
                    out = target.workdir / (cubin.stem + ".sass")
                    out.write_text(run.stdout)
                    artifact = artifact or out
                else:
                    notes.append(run.describe())

        resources: tuple[KernelResources, ...] = ()
        for cubin in cubins:
            try:
                resources += parse_cubin(cubin.read_bytes())
            except (CubinFormatError, OSError) as e:
                notes.append(f"cubin unreadable: {e}")

        if not texts and not resources:
            status = Status.FAILED if notes else Status.UNAVAILABLE
            return ProfileReport(self.name, status,
                                 error="; ".join(notes) or "no SASS and no cubin for this candidate",
                                 seconds=time.monotonic() - t0)
        kernels = tuple(k for text in texts for k in parse_sass(text))
        if texts and not kernels:
            notes.append("the SASS listing holds no instructions")
        summary = summarize(kernels) if kernels else None
        findings = sass_findings(summary, resources, target, kernels=kernels)
        (target.workdir / "sass.json").write_text(json.dumps({
            "kernels": [{"name": k.name, "instructions": k.n_instructions,
                         "max_register": k.max_register, "ldg_in_flight": k.ldg_in_flight,
                         "opcodes": dict(k.opcodes)}
                        for k in kernels],
            "resources": [dataclasses.asdict(r) for r in resources],
        }, indent=1, sort_keys=True))
        return ProfileReport(self.name, Status.OK, findings=findings, artifact=artifact,
                             error="; ".join(notes) or None, seconds=time.monotonic() - t0)


def global_bytes(kernel: SassKernel) -> tuple[int, int]:
    """(bytes moved per pass by narrow (< 128-bit) global loads/stores, by all of them), counting
    each static LDG/STG once at its width: a proxy for where a kernel's traffic goes (its bulk
    accesses are unrolled many times; per-row scalars appear once or twice)."""
    narrow = total = 0
    for op, n in kernel.opcodes.items():
        if op.split(".", 1)[0] in ("LDG", "STG"):
            b = access_bits(op) // 8 * n
            total += b
            narrow += b if access_bits(op) < 128 else 0
    return narrow, total


#: A kernel whose narrow global accesses move at least this share of its bytes gets the
#: vector-width hint.
NARROW_SHARE = 0.25
#: A main kernel with at least this many global loads in its listing, none issued before the
#: one before it is used, gets the loads-in-flight hint.
SERIAL_LOADS = 4


def serial_loads(kernel: SassKernel) -> bool:
    """Whether ``kernel`` issues its global loads (``SERIAL_LOADS`` or more in the listing)
    one at a time: none before the value of the one before it is read."""
    return kernel.count("LDG") >= SERIAL_LOADS and kernel.ldg_in_flight == 1


def sass_findings(
    summary: SassSummary | None,
    resources: tuple[KernelResources, ...],
    target: ProfileTarget | None = None,
    *,
    kernels: tuple[SassKernel, ...] = (),
) -> tuple[Finding, ...]:
    """Findings (facts, then hints) from an instruction mix and cubin resources (pure).

    Args:
        summary: the instruction mix of all kernels, if SASS was available.
        resources: per-kernel resources from the cubin, if it was available.
        target: gives the task's roofline kind and declared precision, when known.
        kernels: the kernels ``summary`` spans. The vector-width hint looks at the one that
            moves the most global bytes (the bulk of the traffic) and fires only when narrow
            accesses carry at least :data:`NARROW_SHARE` of them, so a 128-bit row kernel
            that also reads one index per row, or a tiny second kernel, draws no hint.

    Returns:
        The findings.
    """
    facts: list[Finding] = []
    tips: list[Finding] = []
    ev = target.evaluation if target is not None else None
    if summary is not None:
        s = summary
        facts += [
            Finding("sass.instructions", s.n_instructions, f"{s.n_instructions} SASS instructions"),
            Finding("sass.ldg_count", s.ldg_count),
            Finding("sass.ldg_min_bits", s.ldg_min_bits),
            Finding("sass.ldg_max_bits", s.ldg_max_bits),
            Finding("sass.stg_count", s.stg_count),
            Finding("sass.stg_min_bits", s.stg_min_bits),
            Finding("sass.stg_max_bits", s.stg_max_bits),
            Finding("sass.tma_ops", s.tma_ops),
            Finding("sass.hgmma", s.hgmma),
            Finding("sass.hmma", s.hmma),
            Finding("sass.ffma", s.ffma),
            Finding("sass.local_loads", s.local_loads),
            Finding("sass.local_stores", s.local_stores),
            Finding("sass.barriers", s.barriers),
            Finding("sass.ldg_in_flight", s.ldg_in_flight,
                    f"at most {s.ldg_in_flight} global loads issued before one is used"),
        ]
        if s.mma_precisions:
            facts.append(Finding("sass.mma_precision", ",".join(s.mma_precisions),
                                 f"tensor-core MMAs compute in {', '.join(s.mma_precisions)}"))
        main_k = max(kernels, key=lambda k: global_bytes(k)[1]) if kernels else None
        ms = summarize((main_k,)) if main_k is not None else s
        narrow_b, total_b = global_bytes(main_k) if main_k is not None else (1, 1)
        narrow = [(kind, bits) for kind, count, bits in
                  (("loads", ms.ldg_count, ms.ldg_min_bits),
                   ("stores", ms.stg_count, ms.stg_min_bits))
                  if count and bits < 128]
        if narrow and total_b and narrow_b / total_b >= NARROW_SHARE:
            what = " and ".join(f"{kind} as narrow as {bits}-bit" for kind, bits in narrow)
            share = (f" ({narrow_b / total_b:.0%} of the main kernel's global bytes)"
                     if main_k is not None else "")
            tips.append(Finding("hint.vector_width", 128,
                                f"global {what}{share}: use 128-bit vectorized copies"
                                " (LDG.E.128/STG.E.128), e.g. a wider copy atom or more"
                                " contiguous elements per thread"))
        local = s.local_loads + s.local_stores
        if local:
            why = "register spills" if s.spill_annotated else "local memory"
            tips.append(Finding("hint.spills", local,
                                f"{local} local-memory loads/stores ({why}): cut registers per thread"
                                " (smaller per-thread tiles, less unrolling, fewer live values)"))
        compute_task = ev is not None and ev.roofline is not None and ev.roofline.kind == "compute"
        if main_k is not None and not compute_task and serial_loads(main_k):
            tips.append(Finding("hint.loads_in_flight", 1,
                                "the main kernel issues each global load only once the one"
                                " before it has arrived (one load in flight a thread): load an"
                                " unrolled walk's rows into registers before using any, and"
                                " give a predicated-off load a value (zeros) rather than the"
                                " earlier row's, which chains each load to the one before"))
        if compute_task and s.hgmma == 0:
            used = "HMMA (mma.sync)" if s.hmma else "no tensor cores (FFMA)" if s.ffma else "no MMA"
            tips.append(Finding("hint.tensor_cores", "wgmma",
                                f"matmul uses {used}: on sm_90a use WGMMA (HGMMA) fed by TMA"))
        declared = (ev.precision if ev is not None else "").lower()
        low = [p for p in s.mma_precisions if p.split("->")[0] in ("tf32", "bf16", "f16", "e4m3", "e5m2")]
        if low and ev is not None and not declared:
            tips.append(Finding("hint.precision", low[0].split("->")[0],
                                f"MMAs compute in {low[0]} but the candidate declares no PRECISION:"
                                " declare it, or use a split-precision scheme (3xTF32) for fp32"))
    tips += _resource_findings(resources, summary, facts)
    return tuple(facts + tips)


def _resource_findings(
    resources: tuple[KernelResources, ...], summary: SassSummary | None, facts: list[Finding]
) -> list[Finding]:
    tips: list[Finding] = []
    if not resources:
        if summary is not None and summary.max_register >= 0:
            est = summary.max_register + 1
            facts.append(Finding("sass.registers_min", est,
                                 f">= {est} registers per thread (highest register in the SASS)"))
        return tips
    main = max(resources, key=lambda r: r.registers or 0)
    regs = main.registers
    facts += [
        Finding("sass.registers", regs if regs is not None else "unknown",
                f"{regs} registers per thread" if regs is not None else ""),
        Finding("sass.static_smem_bytes", main.static_smem_bytes),
        Finding("sass.frame_bytes", main.frame_bytes),
    ]
    if main.threads_per_block:
        facts.append(Finding("sass.threads_per_block", main.threads_per_block))
    if regs is not None and main.threads_per_block:
        occ = estimate_occupancy(regs_per_thread=regs, threads_per_block=main.threads_per_block,
                                 smem_per_block=main.static_smem_bytes)
        facts += [
            Finding("sass.occupancy", round(occ.fraction, 4),
                    f"theoretical occupancy {occ.fraction:.0%} ({occ.blocks_per_sm} blocks/SM,"
                    f" limited by {occ.limiter.replace('_', ' ')}; static smem only)"),
            Finding("sass.occupancy_limiter", occ.limiter),
        ]
        if occ.fraction < LOW_OCCUPANCY and occ.limiter in ("registers", "shared_memory"):
            # the value is what limits it (the fraction is sass.occupancy)
            tips.append(Finding("hint.occupancy", occ.limiter,
                                f"occupancy {occ.fraction:.0%} limited by {occ.limiter.replace('_', ' ')}"
                                f" ({regs} regs x {main.threads_per_block} threads): fewer registers"
                                " or smaller tiles hide latency better"))
    return tips


def find_nvdisasm(path: str | None = None) -> str | None:
    """nvdisasm on ``path`` (default PATH), else the one shipped in ``nvidia-cuda-nvdisasm``."""
    found = find_tool("nvdisasm", path=path)
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for hit in sorted(Path(root).glob("*/bin/nvdisasm")):
            return str(hit)
    return None


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@hookimpl
def register_profilers() -> list[SassProfiler]:
    """The ``sass`` profiler."""
    return [SassProfiler()]
