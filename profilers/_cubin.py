"""Pure reading of per-kernel resources from a cubin (CUDA ELF), without any CUDA tool.

A cubin keeps its resource usage in ELF sections that ``cuobjdump --dump-resource-usage``
also reads: the global ``.nv.info`` section holds per-function attributes (register
count, frame and stack sizes) keyed by symbol index; ``.nv.info.<kernel>`` holds
per-kernel ones (required block size, max registers, parameter size); the size of
``.nv.shared.<kernel>`` is the kernel's static shared memory. Attribute records are
``(format: u8, attribute: u8, value)`` where the format says the value is absent
(``0x01``), one byte (``0x02``), two bytes (``0x03``) or a u16 length and that many
bytes (``0x04``). Attribute codes used here (``EIATTR_*``) were checked against a cubin
that the CuTe DSL 4.8.1 built for sm_90a (22 registers, ``.reqntid 128``).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

_EIATTR_MAX_THREADS = 0x05
_EIATTR_REQNTID = 0x10
_EIATTR_FRAME_SIZE = 0x11
_EIATTR_MIN_STACK_SIZE = 0x12
_EIATTR_MAXREG_COUNT = 0x1B
_EIATTR_MAX_STACK_SIZE = 0x23
_EIATTR_CBANK_PARAM_SIZE = 0x19
_EIATTR_REGCOUNT = 0x2F

_FMT_NVAL, _FMT_BVAL, _FMT_HVAL, _FMT_SVAL = 0x01, 0x02, 0x03, 0x04


class CubinFormatError(ValueError):
    """The bytes are not a readable 64-bit little-endian CUDA ELF."""


@dataclass(frozen=True, slots=True)
class KernelResources:
    """Resources of one kernel, as the cubin records them.

    Attributes:
        name: the kernel's symbol.
        registers: registers per thread (``None`` if the cubin does not say).
        static_smem_bytes: static shared memory per block (dynamic smem is a launch
            parameter and is not in the cubin).
        frame_bytes: per-thread local memory frame (spills and local arrays).
        stack_bytes: per-thread stack (max of the min/max stack attributes).
        threads_per_block: from ``.reqntid`` or ``.maxntid``, when the kernel declares it.
        max_registers: the register cap the kernel was compiled with, when recorded.
        param_bytes: kernel parameter bytes in constant bank 0.
        barriers: named barriers used (from the text section's flags).
    """

    name: str
    registers: int | None = None
    static_smem_bytes: int = 0
    frame_bytes: int = 0
    stack_bytes: int = 0
    threads_per_block: int | None = None
    max_registers: int | None = None
    param_bytes: int | None = None
    barriers: int = 0


@dataclass(frozen=True, slots=True)
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int


def parse_cubin(data: bytes) -> tuple[KernelResources, ...]:
    """Read every kernel's resources from a cubin.

    Args:
        data: the cubin's bytes.

    Returns:
        One entry per kernel (``.text.<name>`` section), in section order.

    Raises:
        CubinFormatError: when ``data`` is not a 64-bit little-endian ELF or is truncated.
    """
    sections = _sections(data)
    symbols = _symbols(data, sections)
    by_name = {s.name: s for s in sections}

    global_attrs: dict[str, dict[int, int]] = {}
    info = by_name.get(".nv.info")
    if info is not None:
        for attr, value in _records(data, info):
            if len(value) >= 8:
                sym, v = struct.unpack_from("<II", value)
                if sym < len(symbols):
                    global_attrs.setdefault(symbols[sym], {})[attr] = v

    out: list[KernelResources] = []
    for sec in sections:
        if not sec.name.startswith(".text."):
            continue
        name = sec.name[len(".text."):]
        g = global_attrs.get(name, {})
        threads = maxreg = params = None
        local = by_name.get(f".nv.info.{name}")
        if local is not None:
            for attr, value in _records(data, local):
                if attr in (_EIATTR_REQNTID, _EIATTR_MAX_THREADS) and len(value) >= 12:
                    x, y, z = struct.unpack_from("<III", value)
                    if attr == _EIATTR_REQNTID or threads is None:
                        threads = x * y * z
                elif attr == _EIATTR_MAXREG_COUNT and len(value) >= 2:
                    maxreg = struct.unpack_from("<H", value)[0]
                elif attr == _EIATTR_CBANK_PARAM_SIZE and len(value) >= 2:
                    params = struct.unpack_from("<H", value)[0]
        smem = by_name.get(f".nv.shared.{name}")
        out.append(KernelResources(
            name=name,
            registers=g.get(_EIATTR_REGCOUNT),
            static_smem_bytes=smem.size if smem is not None else 0,
            frame_bytes=g.get(_EIATTR_FRAME_SIZE, 0),
            stack_bytes=max(g.get(_EIATTR_MIN_STACK_SIZE, 0), g.get(_EIATTR_MAX_STACK_SIZE, 0)),
            threads_per_block=threads,
            max_registers=maxreg,
            param_bytes=params,
            barriers=(sec.flags >> 20) & 0x1F,
        ))
    return tuple(out)


def _sections(data: bytes) -> list[_Section]:
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise CubinFormatError("not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise CubinFormatError("not a 64-bit little-endian ELF")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        raise CubinFormatError("section table out of range")
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    if not raw or shstrndx >= len(raw):
        raise CubinFormatError("no section name table")
    strtab_off = raw[shstrndx][4]
    out = []
    for name_off, typ, flags, _addr, offset, size, link, info, _align, _entsize in raw:
        out.append(_Section(_cstr(data, strtab_off + name_off), typ, flags, offset, size, link, info))
    return out


def _symbols(data: bytes, sections: list[_Section]) -> list[str]:
    symtab = next((s for s in sections if s.type == 2), None)  # SHT_SYMTAB
    if symtab is None or symtab.link >= len(sections):
        return []
    strtab = sections[symtab.link]
    names = []
    for off in range(symtab.offset, symtab.offset + symtab.size, 24):
        if off + 24 > len(data):
            raise CubinFormatError("truncated symbol table")
        name_off = struct.unpack_from("<I", data, off)[0]
        names.append(_cstr(data, strtab.offset + name_off))
    return names


def _records(data: bytes, sec: _Section) -> Iterator[tuple[int, bytes]]:
    """Yield ``(attribute, value bytes)`` of an ``.nv.info`` section; stops at bad data."""
    blob = data[sec.offset:sec.offset + sec.size]
    i = 0
    while i + 2 <= len(blob):
        fmt, attr = blob[i], blob[i + 1]
        i += 2
        if fmt == _FMT_NVAL:
            yield attr, b""
        elif fmt == _FMT_BVAL:
            yield attr, blob[i:i + 1]
            i += 1
        elif fmt == _FMT_HVAL:
            yield attr, blob[i:i + 2]
            i += 2
        elif fmt == _FMT_SVAL:
            if i + 2 > len(blob):
                return
            (n,) = struct.unpack_from("<H", blob, i)
            i += 2
            yield attr, blob[i:i + n]
            i += n
        else:
            return


def _cstr(data: bytes, off: int) -> str:
    end = data.find(b"\0", off)
    if off >= len(data) or end < 0:
        raise CubinFormatError("string table out of range")
    return data[off:end].decode("utf-8", errors="replace")
