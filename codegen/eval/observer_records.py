"""Decoding the native observer's frames, on the parent's side: pure, no I/O.

The observer library (``native/observer.c``) writes what CUPTI saw in the candidate's worker
as frames authenticated with HMAC-SHA256 under a key that only the parent and the
library's native memory hold. This module turns those bytes back into records and refuses
anything that is not exactly what the library wrote: a wrong magic, an oversized frame, a
gap or repeat in the sequence numbers, a bad MAC or a malformed record makes
:class:`FrameReader` raise :class:`FrameError`, and the stream stays dead after that. The
sequence check matters as much as the MAC: a candidate that can open its own copy of the
pipe could otherwise drop or reorder authentic frames, for instance the kernels of a timed
call.

Wire format (little-endian; the C file's header comment is the other copy of this):

* frame: ``b"CGOB" | u32 payload_len | u64 seq | payload | HMAC-SHA256(key, magic..payload)``
* payload: records ``u8 type | u32 body_len | body``; strings are ``u16 len | UTF-8``.
* bodies: see the ``_*_FIXED`` struct formats next to each decoder below.

Times are nanoseconds of CUPTI's clock; :class:`ClockMap` maps them onto the parent's
``time.monotonic_ns()`` through the clock pairs that HELLO and FLUSHED carry.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Union

MAGIC = b"CGOB"
FORMAT_VERSION = 1
MAX_PAYLOAD = 1 << 20
KEY_LEN = 32
MAC_LEN = 32
NONCE_LEN = 16
_HEADER = struct.Struct("<4sIQ")


class RecordType(IntEnum):
    HELLO = 1
    KERNEL = 2
    MEMCPY = 3
    MEMSET = 4
    API = 5
    MODULE = 6
    FLUSHED = 7
    NOTE = 8


class HelloFlag(IntFlag):
    SELFTEST = 1
    NO_API = 2


class ModuleFlag(IntFlag):
    NOT_ELF = 1
    ELF_ERROR = 2
    NAMES_TRUNCATED = 4
    NO_IMAGE = 8
    NO_MAPS = 16  # /proc/self/maps unreadable: origin "<unresolved>"


class Health(IntFlag):
    """Sticky trouble bits the observer reports in every FLUSHED record."""

    SUBSCRIBER_LOST = 1
    NO_SUBSCRIBER = 2
    FLUSH_FAILED = 4
    BUFFER_ERROR = 8
    BUFFER_DENIED = 16


class FrameError(Exception):
    """The observer's stream is not what the observer wrote; nothing after it is trusted."""


@dataclass(frozen=True, slots=True)
class ClockPair:
    """CUPTI's clock and CLOCK_MONOTONIC read together; ``bracket_ns`` is the uncertainty."""

    cupti_ns: int
    mono_ns: int
    bracket_ns: int


@dataclass(frozen=True, slots=True)
class HelloRec:
    format_version: int
    flags: HelloFlag
    pid: int
    cupti_version: int
    clock: ClockPair


@dataclass(frozen=True, slots=True)
class KernelRec:
    start: int
    end: int
    completed: int
    correlation_id: int
    stream_id: int
    device_id: int
    context_id: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    static_shared: int
    dynamic_shared: int
    graph_id: int
    graph_node_id: int
    name_truncated: bool
    name: str


@dataclass(frozen=True, slots=True)
class MemcpyRec:
    start: int
    end: int
    correlation_id: int
    stream_id: int
    bytes: int
    copy_kind: str
    src_kind: str
    dst_kind: str
    peer: bool
    device_id: int
    src_device_id: int
    dst_device_id: int
    graph_id: int


@dataclass(frozen=True, slots=True)
class MemsetRec:
    start: int
    end: int
    correlation_id: int
    stream_id: int
    bytes: int
    value: int
    device_id: int
    graph_id: int


@dataclass(frozen=True, slots=True)
class ApiRec:
    domain: str  # "driver" | "runtime"
    cbid: int
    start: int
    end: int
    correlation_id: int
    thread_id: int
    process_id: int
    return_value: int
    name: str


@dataclass(frozen=True, slots=True)
class ModuleRec:
    module_id: int
    cubin_size: int
    sha256: bytes
    t_ns: int
    mono_ns: int
    thread_id: int
    flags: ModuleFlag
    origin: str
    chain: tuple[str, ...]
    kernel_names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FlushedRec:
    nonce: bytes
    clock: ClockPair
    dropped_total: int
    records_total: int
    launch_calls: int
    health: Health


@dataclass(frozen=True, slots=True)
class NoteRec:
    level: int  # 0 info, 1 warning, 2 error
    text: str


Record = Union[HelloRec, KernelRec, MemcpyRec, MemsetRec, ApiRec, ModuleRec, FlushedRec, NoteRec]

COPY_KINDS = {0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
              7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
MEMORY_KINDS = {0: "unknown", 1: "pageable", 2: "pinned", 3: "device", 4: "array",
                5: "managed", 6: "device_static", 7: "managed_static"}


class _Body:
    """A cursor over one record's body; every read is bounds-checked."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise FrameError("record body shorter than its fields")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, st: struct.Struct) -> tuple[int, ...]:
        return st.unpack(self.take(st.size))

    def str16(self) -> str:
        (n,) = struct.unpack("<H", self.take(2))
        return self.take(n).decode("utf-8", "replace")

    def done(self) -> None:
        if self.pos != len(self.data):
            raise FrameError("record body longer than its fields")


_CLOCK = struct.Struct("<QQI")
_HELLO_FIXED = struct.Struct("<HHII")  # version, flags, pid, cupti_version; then clock pair
_KERNEL_FIXED = struct.Struct("<QQQIIIIiiiiiiHiiIQB")
_MEMCPY_FIXED = struct.Struct("<QQIIQBBBBIIII")
_MEMSET_FIXED = struct.Struct("<QQIIQIII")
_API_FIXED = struct.Struct("<BIQQIIII")
_MODULE_FIXED = struct.Struct("<IQ32sQQII")
_FLUSHED_FIXED = struct.Struct("<16s")  # nonce; then clock pair; then _FLUSHED_TAIL
_FLUSHED_TAIL = struct.Struct("<QQQI")
_NOTE_FIXED = struct.Struct("<B")


def _clock(b: _Body) -> ClockPair:
    c, m, w = b.fixed(_CLOCK)
    return ClockPair(cupti_ns=c, mono_ns=m, bracket_ns=w)


def _hello(b: _Body) -> HelloRec:
    version, flags, pid, cupti = b.fixed(_HELLO_FIXED)
    if version != FORMAT_VERSION:
        raise FrameError(f"observer format version {version}, expected {FORMAT_VERSION}")
    return HelloRec(version, HelloFlag(flags), pid, cupti, _clock(b))


def _kernel(b: _Body) -> KernelRec:
    (start, end, completed, corr, stream, dev, ctx, gx, gy, gz, bx, by, bz, regs, ssm, dsm,
     graph, node, flags) = b.fixed(_KERNEL_FIXED)
    return KernelRec(start, end, completed, corr, stream, dev, ctx, (gx, gy, gz), (bx, by, bz),
                     regs, ssm, dsm, graph, node, bool(flags & 1), b.str16())


def _memcpy(b: _Body) -> MemcpyRec:
    (start, end, corr, stream, nbytes, kind, src, dst, flags, dev, sdev, ddev,
     graph) = b.fixed(_MEMCPY_FIXED)
    return MemcpyRec(start, end, corr, stream, nbytes, COPY_KINDS.get(kind, f"kind{kind}"),
                     MEMORY_KINDS.get(src, f"kind{src}"), MEMORY_KINDS.get(dst, f"kind{dst}"),
                     bool(flags & 1), dev, sdev, ddev, graph)


def _memset(b: _Body) -> MemsetRec:
    return MemsetRec(*b.fixed(_MEMSET_FIXED))


def _api(b: _Body) -> ApiRec:
    dom, cbid, start, end, corr, tid, pid, ret = b.fixed(_API_FIXED)
    if dom not in (1, 2):
        raise FrameError(f"API record with domain {dom}")
    return ApiRec("driver" if dom == 1 else "runtime", cbid, start, end, corr, tid, pid, ret,
                  b.str16())


def _module(b: _Body) -> ModuleRec:
    mid, size, digest, t_ns, mono, tid, flags = b.fixed(_MODULE_FIXED)
    origin = b.str16()
    (n,) = struct.unpack("<H", b.take(2))
    chain = tuple(b.str16() for _ in range(n))
    (m,) = struct.unpack("<I", b.take(4))
    if m > len(b.data):  # each name takes at least two bytes: refuse absurd counts early
        raise FrameError("MODULE record claims more names than it holds")
    names = tuple(b.str16() for _ in range(m))
    return ModuleRec(mid, size, bytes(digest), t_ns, mono, tid, ModuleFlag(flags), origin, chain,
                     names)


def _flushed(b: _Body) -> FlushedRec:
    (nonce,) = b.fixed(_FLUSHED_FIXED)
    clock = _clock(b)
    dropped, total, launches, health = b.fixed(_FLUSHED_TAIL)
    return FlushedRec(bytes(nonce), clock, dropped, total, launches, Health(health))


def _note(b: _Body) -> NoteRec:
    (level,) = b.fixed(_NOTE_FIXED)
    return NoteRec(level, b.str16())


_DECODERS = {RecordType.HELLO: _hello, RecordType.KERNEL: _kernel, RecordType.MEMCPY: _memcpy,
             RecordType.MEMSET: _memset, RecordType.API: _api, RecordType.MODULE: _module,
             RecordType.FLUSHED: _flushed, RecordType.NOTE: _note}


def decode_payload(payload: bytes) -> list[Record]:
    """The records of one authenticated payload, in order.

    Raises:
        FrameError: an unknown record type, or a body that does not match its layout.
    """
    out: list[Record] = []
    pos = 0
    while pos < len(payload):
        if pos + 5 > len(payload):
            raise FrameError("truncated record header")
        rtype = payload[pos]
        (blen,) = struct.unpack_from("<I", payload, pos + 1)
        pos += 5
        if blen > len(payload) - pos:
            raise FrameError("record body runs past its frame")
        try:
            decoder = _DECODERS[RecordType(rtype)]
        except ValueError:
            raise FrameError(f"unknown record type {rtype}") from None
        body = _Body(payload[pos:pos + blen])
        out.append(decoder(body))  # type: ignore[arg-type]  # the table maps types to decoders
        body.done()
        pos += blen
    return out


def frame_mac(key: bytes, header: bytes, payload: bytes) -> bytes:
    """HMAC-SHA256 over a frame's header and payload, as the observer computes it."""
    return hmac.new(key, header + payload, hashlib.sha256).digest()


def encode_frame(key: bytes, seq: int, payload: bytes) -> bytes:
    """One frame as the observer writes it (tests use it to forge and to replay)."""
    header = _HEADER.pack(MAGIC, len(payload), seq)
    return header + payload + frame_mac(key, header, payload)


class FrameReader:
    """Incremental, authenticating reader of the observer's stream.

    ``feed`` accepts bytes split anywhere and returns the records of every frame it could
    complete. The first violation raises :class:`FrameError`; every later ``feed`` raises
    it again: a stream that has been tampered with once is never trusted again.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_LEN:
            raise ValueError(f"the observer key is {KEY_LEN} bytes")
        self._key = key
        self._buf = bytearray()
        self._seq = 0
        self._error: FrameError | None = None

    @property
    def frames(self) -> int:
        """How many frames were accepted so far."""
        return self._seq

    @property
    def pending(self) -> int:
        """Bytes held that do not make a whole frame yet."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[Record]:
        """Takes the next bytes of the stream, in any split.

        Returns:
            The records of every frame completed by these bytes, in stream order.

        Raises:
            FrameError: bad magic, a length over :data:`MAX_PAYLOAD` (or zero), a bad MAC,
                a sequence number out of turn, or a malformed record; also on every call
                after the first such error.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except FrameError as e:
            self._error = e
            self._buf.clear()
            raise

    def _feed(self, data: bytes) -> list[Record]:
        self._buf += data
        out: list[Record] = []
        while len(self._buf) >= _HEADER.size:
            magic, plen, seq = _HEADER.unpack_from(self._buf, 0)
            if magic != MAGIC:
                raise FrameError(f"bad magic {bytes(magic)!r} at frame {self._seq}")
            if plen > MAX_PAYLOAD or plen == 0:
                raise FrameError(f"frame {self._seq} claims {plen} payload bytes")
            total = _HEADER.size + plen + MAC_LEN
            if len(self._buf) < total:
                break
            header = bytes(self._buf[:_HEADER.size])
            payload = bytes(self._buf[_HEADER.size:_HEADER.size + plen])
            mac = bytes(self._buf[_HEADER.size + plen:total])
            if not hmac.compare_digest(mac, frame_mac(self._key, header, payload)):
                raise FrameError(f"bad MAC on frame {self._seq} (seq field {seq})")
            if seq != self._seq:
                raise FrameError(f"frame sequence {seq} where {self._seq} was due")
            del self._buf[:total]
            self._seq += 1
            out.extend(decode_payload(payload))
        return out


class ClockMap:
    """Maps CUPTI timestamps onto this host's ``time.monotonic_ns()``.

    Both clocks tick in nanoseconds and the observer reads them side by side (best of three
    brackets), so the map is an offset: the median of ``mono - cupti`` over the most recent
    ``window`` pairs. The median shrugs off one pair read across a preemption; using recent
    pairs only follows slow drift. Pairs with a zero CUPTI time (no GPU clock) are ignored.
    """

    def __init__(self, pairs: Iterable[ClockPair] = (), *, window: int = 8) -> None:
        self._window = window
        self._pairs: list[ClockPair] = []
        for p in pairs:
            self.add(p)

    def add(self, pair: ClockPair) -> None:
        """Adds a pair read by the observer (HELLO, FLUSHED, MODULE); the oldest beyond the
        window is forgotten."""
        if pair.cupti_ns == 0:
            return
        self._pairs.append(pair)
        del self._pairs[:-self._window]

    def __len__(self) -> int:
        return len(self._pairs)

    @property
    def offset_ns(self) -> int:
        """``mono - cupti`` as currently estimated.

        Raises:
            LookupError: no usable pair arrived yet.
        """
        if not self._pairs:
            raise LookupError("no clock pair from the observer yet")
        offs = sorted(p.mono_ns - p.cupti_ns for p in self._pairs)
        mid = len(offs) // 2
        return offs[mid] if len(offs) % 2 else (offs[mid - 1] + offs[mid]) // 2

    def to_mono_ns(self, cupti_ns: int) -> int:
        """A CUPTI time as this host's monotonic clock would have read it."""
        return cupti_ns + self.offset_ns
