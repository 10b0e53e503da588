"""Building the native observer library and finding the CUPTI it needs: pure Python.

The observer (``native/observer.c``) is compiled on the machine that runs it, against that
machine's CUPTI headers, because the activity record layouts it reads are those of one
CUPTI major version. The result is cached under ``$XDG_CACHE_HOME/cutegen/observer/`` (or
``~/.cache/...``) by a key made of the source, the compiler's version line and the CUPTI
header version, so a changed source or toolchain never reuses a stale library. Each library
has a ``.sha256`` sidecar: a file whose contents no longer match it (a torn copy, a disk
error) is rebuilt instead of loaded.

Nothing here imports torch or CUDA; a missing compiler or missing headers raise
:class:`ObserverUnavailable` saying what to install or which variable to set.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from cutegen.errors import InfrastructureError

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=c99", "-D_GNU_SOURCE", "-Wall", "-fvisibility=hidden")
LIBS = ("-lpthread", "-ldl")
COMPILE_TIMEOUT_S = 180.0
_NEEDED_WITH_CUDA_H = ("cuda.h", "builtin_types.h", "cuda_stdint.h")


class ObserverUnavailable(InfrastructureError):
    """The native observer cannot be built or started on this machine (no compiler, no CUPTI
    headers or library, no GPU or driver). The machine's fault, never the candidate's."""


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cutegen" / "observer"


def _version_key(name: str) -> tuple[int, ...]:
    m = re.search(r"(\d+(?:\.\d+)*)$", name)
    return tuple(int(x) for x in m.group(1).split(".")) if m else ()


def _toolkit_roots() -> list[Path]:
    """CUDA toolkit roots: $CUDA_HOME, $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-* newest
    first."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    out = [Path(r) for r in roots if r]
    versioned = sorted(glob.glob("/usr/local/cuda-*"), key=lambda p: _version_key(p),
                       reverse=True)
    out += [Path(p) for p in versioned]
    return out


def _site_dirs() -> list[Path]:
    """Folders on sys.path that may hold pip's ``nvidia/*`` packages."""
    seen: list[Path] = []
    for entry in sys.path:
        p = Path(entry or ".")
        if (p / "nvidia").is_dir() and p not in seen:
            seen.append(p)
    return seen


def _header_candidates() -> list[Path]:
    out: list[Path] = []
    env = os.environ.get("CUPTI_INCLUDE")
    if env:
        out.append(Path(env))
    for root in _toolkit_roots():
        out += [root / "include", root / "extras" / "CUPTI" / "include"]
    for site in _site_dirs():
        out += sorted(Path(p) for p in glob.glob(str(site / "nvidia" / "*" / "include")))
    uniq: list[Path] = []
    for p in out:
        if p not in uniq:
            uniq.append(p)
    return uniq


def find_cupti_include() -> Path | None:
    """The first folder holding ``cupti_activity.h`` (see the module docstring for the order:
    $CUPTI_INCLUDE, $CUDA_HOME, /usr/local/cuda, /usr/local/cuda-* newest first, pip's
    ``nvidia/*/include``)."""
    for d in _header_candidates():
        if (d / "cupti_activity.h").is_file():
            return d
    return None


def include_dirs() -> list[Path]:
    """The ``-I`` folders the observer compiles with: CUPTI's, then ``cuda.h``'s if apart.

    Raises:
        ObserverUnavailable: the CUPTI headers or ``cuda.h`` are nowhere to be found.
    """
    cands = _header_candidates()
    cupti = find_cupti_include()
    if cupti is None:
        looked = ", ".join(str(c) for c in cands) or "(no candidate folder exists)"
        raise ObserverUnavailable(
            "the CUPTI headers (cupti_activity.h) were not found; looked in " + looked + ". "
            "Install the CUDA toolkit or `pip install nvidia-cuda-cupti`, or set CUPTI_INCLUDE "
            "to the folder that holds cupti_activity.h.")
    dirs = [cupti]
    for name in _NEEDED_WITH_CUDA_H:
        if any((d / name).is_file() for d in dirs):
            continue
        extra = next((d for d in cands if (d / name).is_file()), None)
        if extra is None:
            raise ObserverUnavailable(
                f"{name} (needed by the CUPTI headers in {cupti}) was not found; set CUDA_HOME "
                "to a CUDA toolkit, or install the `nvidia-cuda-runtime` wheel next to "
                "`nvidia-cuda-cupti`.")
        dirs.append(extra)
    return dirs


def cupti_header_version(include: Path) -> int:
    """``CUPTI_API_VERSION`` from ``cupti_version.h`` in that folder (0 when absent)."""
    try:
        text = (include / "cupti_version.h").read_text(errors="replace")
    except OSError:
        return 0
    m = re.search(r"#define\s+CUPTI_API_VERSION\s+(\d+)", text)
    return int(m.group(1)) if m else 0


def _libcupti_in(folder: Path) -> Path | None:
    names = sorted(glob.glob(str(folder / "libcupti.so*")))
    return Path(names[0]) if names else None


def _mapped_libcupti() -> Path | None:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "/libcupti.so" in parts[5]:
            path = Path(parts[5].strip())
            if path.is_file():
                return path
    return None


def find_libcupti() -> Path | None:
    """The libcupti to dlopen: one already mapped into this process (torch's, usually),
    else $CUPTI_LIB (a file or a folder), pip's ``nvidia/*/lib``, then a CUDA toolkit's
    ``lib64``, ``lib`` or ``extras/CUPTI/lib64``."""
    mapped = _mapped_libcupti()
    if mapped:
        return mapped
    env = os.environ.get("CUPTI_LIB")
    if env:
        p = Path(env)
        if p.is_file():
            return p
        if p.is_dir() and (hit := _libcupti_in(p)):
            return hit
    for site in _site_dirs():
        for lib in sorted(glob.glob(str(site / "nvidia" / "*" / "lib"))):
            if hit := _libcupti_in(Path(lib)):
                return hit
    for root in _toolkit_roots():
        for sub in ("lib64", "lib", "extras/CUPTI/lib64"):
            if hit := _libcupti_in(root / sub):
                return hit
    return None


def compiler() -> list[str]:
    """The C compiler command: ``$CC`` (split like a shell would), else ``cc``, else ``gcc``.

    Raises:
        ObserverUnavailable: none of them is there.
    """
    env = os.environ.get("CC")
    if env:
        cmd = shlex.split(env)
        if cmd and shutil.which(cmd[0]):
            return cmd
        raise ObserverUnavailable(f"CC={env!r} is not an executable compiler; fix or unset CC.")
    for name in ("cc", "gcc"):
        path = shutil.which(name)
        if path:
            return [path]
    raise ObserverUnavailable(
        "no C compiler found (looked for $CC, cc and gcc on PATH); install one, for example "
        "`apt-get install gcc`, or set CC.")


def _compiler_id(cc: list[str]) -> str:
    try:
        r = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ObserverUnavailable(f"{cc[0]} --version failed: {e}") from e
    lines = (r.stdout or r.stderr).splitlines()
    return lines[0].strip() if lines else cc[0]


def _source() -> bytes:
    return (resources.files("cutegen.codegen.eval") / "native" / "observer.c").read_bytes()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _intact(lib: Path) -> bool:
    side = lib.with_name(lib.name + ".sha256")
    try:
        want = side.read_text().strip()
        return bool(want) and _sha256_file(lib) == want
    except OSError:
        return False


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _compile(cc: list[str], incs: list[Path], out: Path) -> None:
    with resources.as_file(resources.files("cutegen.codegen.eval") / "native" / "observer.c") \
            as src:
        cmd = [*cc, *CFLAGS, *(f"-I{d}" for d in incs), "-o", str(out), str(src), *LIBS]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ObserverUnavailable(f"compiling the observer failed: {e}") from e
    if r.returncode != 0:
        tail = (r.stderr or r.stdout)[-3000:]
        raise ObserverUnavailable(
            f"compiling the observer failed (exit {r.returncode}): {shlex.join(cmd)}\n{tail}\n"
            "If a header is missing, set CUPTI_INCLUDE (cupti_activity.h) or CUDA_HOME (cuda.h).")


def observer_library(cache_dir: Path | None = None) -> Path:
    """The compiled observer for this machine, built on first use and cached.

    Safe to call from several processes at once (a lock file per key); the library is
    written to a temporary name and renamed, then its ``.sha256`` sidecar likewise.

    Raises:
        ObserverUnavailable: no compiler, no CUPTI headers, or the compile failed.
    """
    cc = compiler()
    incs = include_dirs()
    src = _source()
    key_blob = b"\0".join([src, _compiler_id(cc).encode(),
                           str(cupti_header_version(incs[0])).encode(),
                           " ".join(CFLAGS + LIBS).encode()])
    key = hashlib.sha256(key_blob).hexdigest()[:16]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    lib = folder / f"observer-{key}.so"
    if _intact(lib):
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / f"observer-{key}.lock"):
        if _intact(lib):  # built by another process while we waited
            return lib
        tmp = folder / f".observer-{key}.{os.getpid()}.tmp.so"
        side_tmp = folder / f".observer-{key}.{os.getpid()}.tmp.sha256"
        try:
            _compile(cc, incs, tmp)
            side_tmp.write_text(_sha256_file(tmp) + "\n")
            os.replace(tmp, lib)
            os.replace(side_tmp, lib.with_name(lib.name + ".sha256"))
        finally:
            for p in (tmp, side_tmp):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
    return lib
