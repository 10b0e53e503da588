"""Building the observer: cached by key, rebuilt when damaged, one build under concurrency,
and plain messages when the compiler or the headers are missing."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import pytest

from cutegen.codegen.eval import observer_build as ob
from cutegen.errors import InfrastructureError

EXPORTS = ("cgobs_start", "cgobs_lockdown", "cgobs_selftest", "cgobs_selftest_start",
           "cgobs_last_error", "cgobs_sha256", "cgobs_hmac_sha256", "cgobs_elf_kernel_names")


def _counting_compile(monkeypatch) -> list[Path]:
    calls: list[Path] = []
    real = ob._compile

    def counted(cc, incs, out):
        calls.append(out)
        real(cc, incs, out)

    monkeypatch.setattr(ob, "_compile", counted)
    return calls


def test_the_library_builds_exports_its_api_and_is_reused(observer_lib, monkeypatch):
    assert observer_lib.name.startswith("observer-") and observer_lib.suffix == ".so"
    dll = ctypes.CDLL(str(observer_lib))
    for name in EXPORTS:
        assert hasattr(dll, name), name
    assert not hasattr(dll, "sha256_compress")  # internals stay hidden
    calls = _counting_compile(monkeypatch)
    again = ob.observer_library(observer_lib.parent)
    assert again == observer_lib and calls == []
    leftovers = [p.name for p in observer_lib.parent.iterdir() if ".tmp" in p.name]
    assert leftovers == []


def test_a_damaged_cache_file_is_rebuilt(observer_lib, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cache.mkdir()
    for p in observer_lib.parent.glob("observer-*"):
        (cache / p.name).write_bytes(p.read_bytes())
    calls = _counting_compile(monkeypatch)
    lib = cache / observer_lib.name
    assert ob.observer_library(cache) == lib and calls == []
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF  # still an ELF file, still the right size: only the hash knows
    lib.write_bytes(bytes(data))
    assert ob.observer_library(cache) == lib and len(calls) == 1
    assert lib.read_bytes() == observer_lib.read_bytes()
    lib.with_name(lib.name + ".sha256").unlink()  # a build that died between its renames
    assert ob.observer_library(cache) == lib and len(calls) == 2


def test_two_builders_at_once_compile_once(observer_lib, tmp_path, monkeypatch):
    calls = _counting_compile(monkeypatch)
    results: list[Path] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            results.append(ob.observer_library(tmp_path))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(set(results)) == 1 and len(calls) == 1
    assert results[0].read_bytes() == observer_lib.read_bytes()


def test_a_missing_compiler_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(ob.ObserverUnavailable, match="CC=") as ei:
        ob.observer_library(tmp_path)
    assert isinstance(ei.value, InfrastructureError)
    monkeypatch.delenv("CC")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ob.ObserverUnavailable, match="no C compiler found"):
        ob.compiler()


def test_missing_headers_say_where_to_point(monkeypatch, tmp_path):
    monkeypatch.setattr(ob, "_header_candidates", lambda: [tmp_path])
    assert ob.find_cupti_include() is None
    with pytest.raises(ob.ObserverUnavailable, match="CUPTI_INCLUDE"):
        ob.include_dirs()
    (tmp_path / "cupti_activity.h").write_text("")
    with pytest.raises(ob.ObserverUnavailable, match=r"cuda\.h .*CUDA_HOME"):
        ob.include_dirs()


def test_cupti_include_honours_the_environment_and_adds_cuda_h(monkeypatch, tmp_path):
    real = ob.find_cupti_include()
    if real is None:
        pytest.skip("no CUPTI headers on this machine")
    (tmp_path / "cupti_activity.h").write_text("")
    (tmp_path / "cupti_version.h").write_text("#define CUPTI_API_VERSION 130002\n")
    monkeypatch.setenv("CUPTI_INCLUDE", str(tmp_path))
    assert ob.find_cupti_include() == tmp_path
    assert ob.cupti_header_version(tmp_path) == 130002
    dirs = ob.include_dirs()
    assert dirs[0] == tmp_path and len(dirs) >= 2 and (dirs[1] / "cuda.h").is_file()
    assert ob.cupti_header_version(real) >= 130000


def test_libcupti_is_found_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setattr(ob, "_mapped_libcupti", lambda: None)
    lib = tmp_path / "libcupti.so.13"
    lib.write_bytes(b"")
    monkeypatch.setenv("CUPTI_LIB", str(tmp_path))
    assert ob.find_libcupti() == lib
    monkeypatch.setenv("CUPTI_LIB", str(lib))
    assert ob.find_libcupti() == lib


def test_a_libcupti_mapped_into_the_process_comes_first(monkeypatch, tmp_path):
    fake_maps = tmp_path / "maps"
    lib = tmp_path / "lib" / "libcupti.so.13"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    fake_maps.write_text(
        "7f0000000000-7f0000001000 r-xp 00000000 00:00 0 /usr/lib/libc.so.6\n"
        f"7f0000002000-7f0000003000 r-xp 00000000 00:00 0 {lib}\n")
    real_path = ob.Path

    def fake_path(p="", *rest):
        return real_path(fake_maps) if p == "/proc/self/maps" else real_path(p, *rest)

    monkeypatch.setattr(ob, "Path", fake_path)
    monkeypatch.setenv("CUPTI_LIB", "/nowhere")
    assert ob.find_libcupti() == lib
