"""Pure parsing of SASS text (nvdisasm or ``cuobjdump -sass`` output) into instruction mixes.

Nothing here runs a tool. :func:`parse_sass` splits a listing into kernels and counts
opcodes (with their modifiers); :func:`summarize` reduces a kernel to the facts the
``sass`` profiler reports: global access widths, TMA, tensor-core instructions and their
precision, local-memory spills, barriers and the highest register used.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# "/*00b0*/  @!P0 LDG.E.128 R12, desc[UR4][R2.64] ;" (cuobjdump adds "/* 0x... */" after ";")
_INSTR = re.compile(
    r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:\{\s*)?(?:@!?U?P(?:[0-6]|T)\s+)?"
    r"(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?P<rest>[^;]*);"
)
_SECTION = re.compile(r"^\s*\.section\s+\.text\.(?P<name>[^,\s]+)")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)")
_REG = re.compile(r"\bR(\d{1,3})\b")
_LABEL = re.compile(r"^\s*\.?L[\w.]*:")
_CONTROL_OPS = frozenset(("BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "CALL", "BSSY", "BSYNC",
                          "WARPSYNC", "BAR", "BPT"))

_WIDTH_TOKENS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128, "256": 256}
_PRECISION_TOKENS = ("F64", "F32", "TF32", "BF16", "F16", "E4M3", "E5M2", "S8", "U8", "S4", "U4")
_MMA_OPS = ("HGMMA", "QGMMA", "IGMMA", "BGMMA", "HMMA", "IMMA", "DMMA", "BMMA")
_TMA_OPS = ("UTMALDG", "UTMASTG", "UTMAREDG", "UBLKCP", "UTMAPF")


@dataclass(frozen=True, slots=True)
class SassKernel:
    """One kernel's instruction counts.

    Attributes:
        name: the kernel's symbol ("" when the listing names none).
        opcodes: full opcode with modifiers (``LDG.E.128``) -> count.
        max_register: the highest general register named (a lower bound: the second
            register of a pair is not counted), -1 when none.
        spill_annotated: instructions nvdisasm marked ``(*"SpillRefill"*)``.
        ldg_in_flight: the most global loads a thread issues back to back before it uses
            the value of any of them (:func:`loads_in_flight`): one for a walk whose every
            load waits for the one before it, however far it is unrolled.
    """

    name: str
    opcodes: Mapping[str, int] = field(default_factory=dict)
    max_register: int = -1
    spill_annotated: int = 0
    ldg_in_flight: int = 0

    @property
    def n_instructions(self) -> int:
        return sum(self.opcodes.values())

    def count(self, base: str) -> int:
        """Instructions whose opcode is ``base`` (any modifiers)."""
        return sum(n for op, n in self.opcodes.items() if op.split(".", 1)[0] == base)


@dataclass(frozen=True, slots=True)
class SassSummary:
    """What the ``sass`` profiler reports about one or more kernels.

    Widths are in bits; ``0`` when there is no such access. ``mma_precisions`` are like
    ``"bf16->f32"`` (inputs -> accumulator).
    """

    n_instructions: int
    ldg_count: int
    ldg_min_bits: int
    ldg_max_bits: int
    stg_count: int
    stg_min_bits: int
    stg_max_bits: int
    tma_ops: int
    cp_async: int
    hgmma: int
    hmma: int
    other_mma: int
    ffma: int
    mma_precisions: tuple[str, ...]
    local_loads: int
    local_stores: int
    spill_annotated: int
    barriers: int
    mbarrier_ops: int
    max_register: int
    ldg_in_flight: int = 0

    @property
    def tensor_core_ops(self) -> int:
        return self.hgmma + self.hmma + self.other_mma


def parse_sass(text: str) -> tuple[SassKernel, ...]:
    """Split a SASS listing into kernels and count their instructions.

    Understands nvdisasm output (``.section .text.<name>``) and ``cuobjdump -sass``
    output (``Function : <name>``). Lines that are not instructions are ignored.

    Args:
        text: the listing.

    Returns:
        One :class:`SassKernel` per kernel, in listing order (an unnamed one when the
        listing has instructions but no kernel header). Empty when no instruction is found.
    """
    kernels: list[SassKernel] = []
    name: str | None = None
    ops: Counter[str] = Counter()
    max_reg = -1
    spills = 0

    lines: list[str] = []

    def flush() -> None:
        if ops:
            kernels.append(SassKernel(name or "", dict(ops), max_reg, spills,
                                      loads_in_flight(lines)))

    for line in text.splitlines():
        header = _SECTION.match(line) or _FUNCTION.match(line)
        if header:
            if header.group("name") != name:
                flush()
                name, ops, max_reg, spills = header.group("name"), Counter(), -1, 0
                lines = []
            continue
        lines.append(line)
        m = _INSTR.match(line)
        if not m:
            continue
        ops[m.group("op")] += 1
        if "SpillRefill" in line:
            spills += 1
        for r in _REG.findall(m.group("rest")):
            max_reg = max(max_reg, int(r))
    flush()
    return tuple(kernels)


def _registers(operands: str, width: int = 32) -> list[int]:
    """General registers an operand text names (``R12`` of a 128-bit access: R12..R15)."""
    out: list[int] = []
    for r in _REG.findall(operands):
        out.extend(range(int(r), int(r) + max(1, width // 32)))
    return out


def loads_in_flight(lines: Iterable[str]) -> int:
    """The most global loads (LDG) issued back to back before the value of any of them is
    read, over one kernel's listing lines in order (pure; static: a bound on what a thread
    keeps in flight that no scheduler can raise).

    A run of loads ends at the first instruction that reads a register one of them writes,
    or at a label or branch (across them the listing's order is not the execution order).
    A longest run of 1 in an unrolled walk means each load waits for the one before it: a
    predicated load that must keep the earlier row's value copies it first, or one row's
    math sits between the loads."""
    best, run = 0, 0
    pending: set[int] = set()
    for line in lines:
        m = _INSTR.match(line)
        if m is None:
            if _LABEL.match(line):
                best, run = max(best, run), 0
                pending.clear()
            continue
        op, rest = m.group("op"), m.group("rest")
        base = op.split(".", 1)[0]
        if base in _CONTROL_OPS:
            best, run = max(best, run), 0
            pending.clear()
            continue
        dest, _, srcs = rest.partition(",")
        if base.startswith(("ST", "RED")) or not srcs:  # every register named is read
            dest, srcs = "", rest
        if pending.intersection(_registers(srcs)):
            best, run = max(best, run), 0
            pending.clear()
        if base == "LDG":
            run += 1
            pending.update(_registers(dest, access_bits(op)))
        else:
            pending.difference_update(_registers(dest))
    return max(best, run)


def access_bits(opcode: str) -> int:
    """The width in bits of a load/store opcode (``LDG.E.128`` -> 128, ``LDG.E`` -> 32)."""
    for tok in opcode.split(".")[1:]:
        if tok in _WIDTH_TOKENS:
            return _WIDTH_TOKENS[tok]
    return 32


def mma_precision(opcode: str) -> str | None:
    """The arithmetic of an MMA opcode as ``"inputs->accumulator"``, or None.

    ``HGMMA.64x128x16.F32.BF16`` -> ``"bf16->f32"``; ``HMMA.1688.F32.TF32`` ->
    ``"tf32->f32"``; ``HMMA.16816.F32`` -> ``"f16->f32"`` (HMMA's default input is fp16);
    ``QGMMA.64x128x32.F32.E4M3.E4M3`` -> ``"e4m3->f32"``.
    """
    parts = opcode.split(".")
    if parts[0] not in _MMA_OPS:
        return None
    toks = [t for t in parts[1:] if t in _PRECISION_TOKENS]
    if not toks:
        return None
    acc, inputs = toks[0], toks[1:]
    if not inputs:
        default = {"HMMA": "F16", "HGMMA": "F16", "IMMA": "S8", "IGMMA": "S8", "DMMA": "F64"}
        inputs = [default.get(parts[0], acc)]
    ins = "x".join(dict.fromkeys(t.lower() for t in inputs))
    return f"{ins}->{acc.lower()}"


def summarize(kernels: Iterable[SassKernel]) -> SassSummary:
    """Reduce kernels to one :class:`SassSummary` (counts add up, widths span all kernels)."""
    ops: Counter[str] = Counter()
    max_reg = -1
    spills = 0
    for k in kernels:
        ops.update(k.opcodes)
        max_reg = max(max_reg, k.max_register)
        spills += k.spill_annotated

    def base(op: str) -> str:
        return op.split(".", 1)[0]

    def widths(name: str) -> tuple[int, int, int]:
        ws = [(access_bits(op), n) for op, n in ops.items() if base(op) == name]
        count = sum(n for _, n in ws)
        if not count:
            return 0, 0, 0
        return count, min(w for w, _ in ws), max(w for w, _ in ws)

    def total(*names: str) -> int:
        return sum(n for op, n in ops.items() if base(op) in names)

    ldg = widths("LDG")
    stg = widths("STG")
    precisions = sorted({p for op in ops if (p := mma_precision(op))})
    return SassSummary(
        n_instructions=sum(ops.values()),
        ldg_count=ldg[0], ldg_min_bits=ldg[1], ldg_max_bits=ldg[2],
        stg_count=stg[0], stg_min_bits=stg[1], stg_max_bits=stg[2],
        tma_ops=total(*_TMA_OPS),
        cp_async=total("LDGSTS"),
        hgmma=total("HGMMA"),
        hmma=total("HMMA"),
        other_mma=total(*(m for m in _MMA_OPS if m not in ("HGMMA", "HMMA"))),
        ffma=total("FFMA"),
        mma_precisions=tuple(precisions),
        local_loads=total("LDL"),
        local_stores=total("STL"),
        spill_annotated=spills,
        barriers=total("BAR"),
        mbarrier_ops=total("SYNCS"),
        max_register=max_reg,
        ldg_in_flight=max((k.ldg_in_flight for k in kernels), default=0),
    )
