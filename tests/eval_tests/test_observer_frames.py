"""The C writer and the Python reader agree, and the reader refuses every tampered stream.

The selftest entry point writes a fixed, documented sequence through the library's real
framing and HMAC code; these tests decode it field by field, then break it in each way a
candidate holding the pipe could (flip, drop, reorder, truncate, forge, write garbage).
"""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import os
import struct
from pathlib import Path

import pytest

from cutegen.codegen.eval.observer_records import (
    MAX_PAYLOAD,
    ApiRec,
    ClockMap,
    ClockPair,
    FlushedRec,
    FrameError,
    FrameReader,
    Health,
    HelloFlag,
    HelloRec,
    KernelRec,
    MemcpyRec,
    MemsetRec,
    ModuleFlag,
    ModuleRec,
    NoteRec,
    decode_payload,
    encode_frame,
)

KEY = bytes(range(32))


def _selftest_bytes(lib: Path, key: bytes = KEY) -> bytes:
    dll = ctypes.CDLL(str(lib))
    kr, kw = os.pipe()
    r, w = os.pipe()
    try:
        os.write(kw, key)
        os.close(kw)
        rc = dll.cgobs_selftest(kr, w)  # closes kr
        assert rc == 0
    finally:
        os.close(w)
    chunks = []
    while chunk := os.read(r, 1 << 16):
        chunks.append(chunk)
    os.close(r)
    return b"".join(chunks)


def _split_frames(data: bytes) -> list[bytes]:
    frames, pos = [], 0
    while pos < len(data):
        (plen,) = struct.unpack_from("<I", data, pos + 4)
        end = pos + 16 + plen + 32
        frames.append(data[pos:end])
        pos = end
    return frames


@pytest.fixture(scope="module")
def selftest(observer_lib: Path) -> bytes:
    return _selftest_bytes(observer_lib)


# -- hashes --------------------------------------------------------------------------------

SHA_VECTORS = [
    (b"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
    (b"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    (b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    (b"a" * 1_000_000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
]
HMAC_VECTORS = [  # RFC 4231 test cases 1, 2, 6, 7
    (b"\x0b" * 20, b"Hi There",
     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
    (b"Jefe", b"what do ya want for nothing?",
     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
    (b"\xaa" * 131, b"Test Using Larger Than Block-Size Key - Hash Key First",
     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    (b"\xaa" * 131, b"This is a test using a larger than block-size key and a larger than "
     b"block-size data. The key needs to be hashed before being used by the HMAC algorithm.",
     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
]


def test_sha256_and_hmac_match_the_published_vectors(observer_lib):
    dll = ctypes.CDLL(str(observer_lib))
    out = ctypes.create_string_buffer(32)
    for msg, want in SHA_VECTORS:
        dll.cgobs_sha256(msg, ctypes.c_size_t(len(msg)), out)
        assert out.raw.hex() == want
    for key, msg, want in HMAC_VECTORS:
        dll.cgobs_hmac_sha256(key, ctypes.c_size_t(len(key)), msg, ctypes.c_size_t(len(msg)), out)
        assert out.raw.hex() == want
    rnd = os.urandom(4096)
    for n in (1, 55, 56, 63, 64, 65, 127, 128, 4095):  # every padding boundary
        dll.cgobs_sha256(rnd[:n], ctypes.c_size_t(n), out)
        assert out.raw == hashlib.sha256(rnd[:n]).digest()
        key = rnd[-(n % 200):] if n % 200 else b""
        dll.cgobs_hmac_sha256(key, ctypes.c_size_t(len(key)), rnd[:n], ctypes.c_size_t(n), out)
        assert out.raw == hmac.new(key, rnd[:n], "sha256").digest()


# -- the documented selftest sequence -----------------------------------------------------


def test_selftest_frames_decode_to_exactly_the_documented_records(selftest):
    frames = _split_frames(selftest)
    assert len(frames) == 4
    reader = FrameReader(KEY)
    per_frame = [reader.feed(f) for f in frames]
    assert [[type(r).__name__ for r in fr] for fr in per_frame] == [
        ["HelloRec"], ["KernelRec", "MemcpyRec", "MemsetRec", "ApiRec"],
        ["ModuleRec", "NoteRec"], ["FlushedRec"]]
    (hello,), (kern, cpy, mset, api), (mod, note), (flushed,) = per_frame
    assert hello == HelloRec(1, HelloFlag.SELFTEST, os.getpid(), 0,
                             ClockPair(1_000_000, 2_000_000, 7))
    assert kern == KernelRec(1000, 3000, 3000, 7, 13, 0, 1, (4, 2, 1), (128, 1, 1), 32, 1024,
                             2048, 0, 0, False, "cutegen_selftest_kernel")
    assert cpy == MemcpyRec(4000, 5000, 8, 13, 4096, "HtoD", "pageable", "device", False, 0, 0,
                            0, 0)
    assert mset == MemsetRec(6000, 6500, 9, 14, 268435456, 0, 0, 0)
    assert api == ApiRec("driver", 307, 900, 1100, 7, 4242, 4241, 0, "cuLaunchKernel")
    cubin = b"cutegen-selftest-cubin"
    assert mod == ModuleRec(5, len(cubin), hashlib.sha256(cubin).digest(), 7000, 7500, 4242,
                            ModuleFlag.NOT_ELF, "<anonymous>", ("libcuda.so.1", "<anonymous>"),
                            ())
    assert note == NoteRec(1, "selftest note: café")
    assert flushed == FlushedRec(bytes(range(16)), ClockPair(8000, 123456789, 5), 3, 7, 1,
                                 Health(0))
    assert reader.frames == 4 and reader.pending == 0


def test_the_reader_accepts_the_stream_split_anywhere(selftest):
    whole = FrameReader(KEY).feed(selftest)
    reader = FrameReader(KEY)
    got = []
    for i in range(len(selftest)):
        got += reader.feed(selftest[i:i + 1])
    assert got == whole
    reader = FrameReader(KEY)
    got = reader.feed(selftest[:100]) + reader.feed(selftest[100:101]) + reader.feed(selftest[101:])
    assert got == whole


# -- tampering ----------------------------------------------------------------------------


def _refused(data: bytes, key: bytes = KEY) -> FrameError:
    reader = FrameReader(key)
    with pytest.raises(FrameError) as ei:
        reader.feed(data)
    with pytest.raises(FrameError):  # dead for good
        reader.feed(b"")
    return ei.value


def test_a_flipped_byte_anywhere_is_refused(selftest):
    whole = FrameReader(KEY).feed(selftest)
    for pos in range(len(selftest)):
        bad = bytearray(selftest)
        bad[pos] ^= 0x01
        reader = FrameReader(KEY)
        try:
            got = reader.feed(bytes(bad))
        except FrameError:
            continue
        # A flip that raised a length field leaves that frame waiting for bytes that never
        # come: nothing from the tampered frame on is ever accepted (the parent times out).
        assert reader.pending > 0 and reader.frames < 4, pos
        assert got == whole[:len(got)] and len(got) < len(whole), pos


def test_dropped_reordered_replayed_and_truncated_frames_are_refused(selftest):
    f = _split_frames(selftest)
    assert "sequence" in str(_refused(f[0] + f[2] + f[3]))          # a frame dropped
    assert "sequence" in str(_refused(f[0] + f[2] + f[1] + f[3]))   # two swapped
    assert "sequence" in str(_refused(f[0] + f[1] + f[1]))          # one replayed
    reader = FrameReader(KEY)
    reader.feed(f[0] + f[1][:-1])                                    # truncated: never whole
    assert reader.frames == 1 and reader.pending == len(f[1]) - 1
    # a truncated frame followed by the next one: the bytes no longer line up
    _refused(f[0] + f[1][:-5] + f[2])


def test_frames_written_without_the_key_are_refused(selftest, observer_lib):
    f = _split_frames(selftest)
    other = _selftest_bytes(observer_lib, key=os.urandom(32))       # a real writer, wrong key
    assert "MAC" in str(_refused(other))
    forged_flush = bytes([7]) + struct.pack("<I", 64) + bytes(64)   # well-formed FLUSHED
    assert "MAC" in str(_refused(f[0] + encode_frame(os.urandom(32), 1, forged_flush)))
    # a candidate that learned nothing but the format cannot extend the stream either
    assert "magic" in str(_refused(f[0] + b"PASS\n" * 20))
    assert "magic" in str(_refused(b"\x00" * 64))
    assert "payload bytes" in str(_refused(b"CGOB" + struct.pack("<IQ", MAX_PAYLOAD + 1, 0)))


def test_payloads_that_do_not_match_their_layout_are_refused():
    good = bytes([8]) + struct.pack("<I", 4) + bytes([0]) + struct.pack("<H", 1) + b"x"
    assert decode_payload(good) == [NoteRec(0, "x")]
    for bad in (bytes([99]) + struct.pack("<I", 0),                     # unknown type
                bytes([8]) + struct.pack("<I", 40) + bytes(4),          # body past the frame
                bytes([8]) + struct.pack("<I", 5) + bytes([0, 1, 0]) + b"xy",  # body too long
                bytes([8]) + struct.pack("<I", 3) + bytes([0, 9, 0]),   # string past the body
                bytes([8, 1])):                                         # header cut
        with pytest.raises(FrameError):
            decode_payload(bad)
    # an authentic frame whose payload is malformed is still refused
    with pytest.raises(FrameError):
        FrameReader(KEY).feed(encode_frame(KEY, 0, bytes([99]) + struct.pack("<I", 0)))


# -- clocks ---------------------------------------------------------------------------------


def test_clock_map_uses_the_median_offset_of_recent_pairs():
    cm = ClockMap(window=3)
    with pytest.raises(LookupError):
        cm.to_mono_ns(5)
    cm.add(ClockPair(0, 999, 1))  # no GPU clock: ignored
    assert len(cm) == 0
    for off in (100, 100, 5000):  # one outlier read across a preemption
        cm.add(ClockPair(1_000, 1_000 + off, 10))
    assert cm.offset_ns == 100 and cm.to_mono_ns(7) == 107
    cm.add(ClockPair(2_000, 2_300, 10))
    cm.add(ClockPair(3_000, 3_300, 10))  # the old pairs fall out of the window
    assert cm.offset_ns == 300
    assert ClockMap([ClockPair(10, 30, 1), ClockPair(10, 40, 1)]).offset_ns == 25


# -- the cubin parser -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def elf_object(observer_lib: Path, tmp_path_factory) -> Path:
    import subprocess

    from cutegen.codegen.eval.observer_build import compiler

    d = tmp_path_factory.mktemp("elf")
    (d / "k.c").write_text(
        "int kern_a(int x) { return x + 1; }\n"
        "int kern_b(int x) { return x * 2; }\n"
        "static int helper(int x) { return x - 1; }\n"
        "int use_helper(int x) { return helper(x); }\n"
        "int not_a_function = 3;\n")
    subprocess.run([*compiler(), "-c", "-O0", "-ffunction-sections", "-o", str(d / "k.o"),
                    str(d / "k.c")], check=True, capture_output=True)
    return d / "k.o"


def _names(lib: Path, image: bytes) -> tuple[int, list[str], int]:
    dll = ctypes.CDLL(str(lib))
    fn = dll.cgobs_elf_kernel_names
    fn.restype = ctypes.c_long
    out = ctypes.create_string_buffer(4096)
    flags = ctypes.c_uint()
    n = fn(image, ctypes.c_size_t(len(image)), out, ctypes.c_size_t(4096), ctypes.byref(flags))
    names = [s.decode() for s in out.raw.split(b"\0")[:max(n, 0)]]
    return n, names, flags.value


def test_the_cubin_parser_lists_global_functions_in_their_own_text_sections(observer_lib,
                                                                          elf_object):
    n, names, flags = _names(observer_lib, elf_object.read_bytes())
    assert (n, sorted(names), flags) == (3, ["kern_a", "kern_b", "use_helper"], 0)
    assert _names(observer_lib, b"not an elf at all")[::2] == (0, int(ModuleFlag.NOT_ELF))
    assert _names(observer_lib, b"")[::2] == (0, int(ModuleFlag.NO_IMAGE))
    head = elf_object.read_bytes()[:64]  # a header whose section table is missing
    assert _names(observer_lib, head)[::2] == (0, int(ModuleFlag.ELF_ERROR))


def test_the_cubin_parser_survives_mangled_images(child_cmd, elf_object):
    import json
    import subprocess

    r = subprocess.run(child_cmd("elf_fuzz", elf_object, 3000), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"ran": 3000}
