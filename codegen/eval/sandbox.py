"""The candidate worker's last steps before it imports a candidate: seccomp, then an audit hook.

Once the candidate's module is imported it owns its process at the Python level (see
docs/threat-model.md). Nothing a verdict rests on lives in that process any more, so this
module is defence in depth, not the foundation: it makes the cheap attacks fail loudly and
reports every attempt on a pipe the parent reads.

1. **seccomp** (native, cannot be undone): no new processes or programs, no ptrace or
   process_vm_*, no network sockets, no signals to other processes (``cgobs_lockdown``).
2. **A PEP 578 audit hook** (cannot be removed from Python): it denies opening another
   process's memory, maps or environment (``/proc/*/mem`` and friends), writing files
   outside the worker's scratch folder, ``ctypes`` loading or reading native memory by
   address, importing JIT and kernel-launching libraries (cupy, numba, triton, NVRTC,
   cpp_extension, ...), walking the garbage collector's object graph (the only Python
   path to the hook's own state), and changing resource limits. Each denial raises ``PermissionError`` *and* writes one line to the audit
   pipe first, so a candidate that catches the exception is still reported. When that
   line cannot reach the parent (the candidate closed the pipe, or put another file on its
   descriptor: the hook compares it with the pipe it was given), the hook ends the process
   at once with :data:`AUDIT_LOST_EXIT`, which the parent reads as ``forbidden``.

The hook captures every function it calls when it is built (C builtins only, bound into
its closure), so monkeypatching ``os`` or ``posixpath`` afterwards changes nothing in it.
"""

from __future__ import annotations

import builtins
import os
import pathlib
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

#: The worker's exit status when a denial could not be reported (the audit pipe was closed
#: or replaced): the parent's verdict is ``forbidden``.
AUDIT_LOST_EXIT = 86

#: Modules a candidate may not import (when they are not already imported by torch or the
#: DSL): other ways to compile or launch GPU code, and native-memory access.
BANNED_IMPORTS = (
    "cupy", "cupyx", "numba", "llvmlite", "triton", "pycuda", "cffi", "_cffi_backend",
    "cuda.bindings.nvrtc", "cuda.bindings.nvjitlink", "cuda.core", "cuda.cooperative",
    "torch.utils.cpp_extension", "torch._inductor", "jax", "jaxlib", "tensorflow", "tvm",
    "tvm_ffi", "ctypes", "_ctypes", "mmap", "ptrace", "pty", "multiprocessing",
    "subprocess", "_posixsubprocess", "socket", "_socket",
)
#: Audit events denied outright once the candidate is being imported.
DENIED_EVENTS = frozenset({
    "ctypes.string_at",
    "ctypes.wstring_at", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.PyObj_FromPtr",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "os.system", "os.exec", "os.posix_spawn", "os.fork", "os.forkpty", "os.killpg",
    "subprocess.Popen", "signal.pthread_kill", "pty.spawn",
    "socket.__new__", "socket.bind", "socket.connect", "socket.sendto", "socket.sendmsg",
    "socket.getaddrinfo", "resource.setrlimit", "resource.prlimit", "fcntl.ioctl",
    "os.symlink", "os.link", "sys.remote_exec", "cpython.remote_debugger_script",
    "mmap.__new__", "marshal.load",
})
#: Libraries torch and the DSL load lazily through ctypes (NVML for device queries, the
#: driver, NVRTC/nvJitLink); any other ``ctypes`` load in a candidate worker is denied.
DLOPEN_ALLOWED = ("libnvidia-ml.so", "libcuda.so", "libnvrtc", "libnvJitLink", "libcudart")
#: /proc entries of a process that would give away its memory or environment.
_PROC_SECRETS = frozenset({"mem", "maps", "smaps", "smaps_rollup", "pagemap", "environ",
                           "fd", "fdinfo", "map_files", "root", "cwd", "exe", "task",
                           "auxv", "syscall", "stack", "numa_maps", "mountinfo"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def normalise(path: str, cwd: str) -> str:
    """``path`` made absolute and normalised with string operations only (no filesystem
    calls a candidate could patch); symlinks are not followed: creating them is denied."""
    if not path.startswith("/"):
        path = cwd.rstrip("/") + "/" + path
    parts: list[str] = []
    for p in path.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if parts:
                parts.pop()
            continue
        parts.append(p)
    return "/" + "/".join(parts)


def _under(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def open_denial(path: str, mode: Any, flags: Any, *, cwd: str, write_roots: tuple[str, ...],
                read_denied: tuple[str, ...]) -> str:
    """Why opening ``path`` is denied, or "" (pure; the audit hook's file policy)."""
    p = normalise(path, cwd)
    parts = p.split("/")
    if len(parts) >= 4 and parts[1] == "proc" and parts[3] in _PROC_SECRETS:
        return f"opening {p} (another view of process memory or state)"
    if len(parts) >= 3 and parts[1] == "proc" and parts[2] in ("kcore", "kallsyms", "kmem"):
        return f"opening {p}"
    if p in ("/dev/mem", "/dev/kmem", "/dev/port") or p.startswith("/dev/nvidia"):
        return f"opening {p} directly"
    writing = False
    if isinstance(mode, str) and any(c in mode for c in "wax+"):
        writing = True
    if isinstance(flags, int) and flags & _WRITE_FLAGS:
        writing = True
    if writing and p != "/dev/null" and not _under(p, write_roots):
        return f"writing {p} (outside the worker's scratch folder)"
    if _under(p, read_denied):
        return f"opening {p} (the harness's files)"
    return ""


def import_denial(name: str, already: Callable[[str], bool]) -> str:
    """Why importing module ``name`` is denied, or ""."""
    for b in BANNED_IMPORTS:
        if (name == b or name.startswith(b + ".")) and not already(name):
            return f"importing {name}"
    return ""


#: Process-creation events and modules, allowed in compile-only mode (the DSL runs
#: ``nvdisasm`` for SASS there; nothing is timed or verified in that mode).
_PROCESS_EVENTS = frozenset({"os.system", "os.exec", "os.posix_spawn", "os.fork",
                             "subprocess.Popen"})
_PROCESS_MODULES = ("subprocess", "_posixsubprocess", "multiprocessing")


def install_audit_hook(*, audit_fd: int, scratch: str, read_denied: Iterable[str],
                       allow_subprocess: bool = False) -> None:
    """Install the audit hook (once per process; it cannot be removed). It starts denying
    when this is called: call it right before importing the candidate.

    The hook and every function it calls run with a private copy of this module's globals
    and of the builtins, made here: a candidate that later replaces ``sandbox.open_denial``,
    ``os.getcwd`` or ``builtins.any`` changes nothing the hook uses.
    """
    private = dict(globals())
    private["__builtins__"] = dict(vars(builtins))
    for name in ("normalise", "_under", "open_denial", "import_denial", "_exact_path"):
        fn = globals()[name]
        private[name] = types.FunctionType(fn.__code__, private, fn.__name__, fn.__defaults__)
    factory = types.FunctionType(_make_hook.__code__, private, "_make_hook")
    try:  # the pipe the parent reads: a denial reported anywhere else ends the process
        st = os.fstat(audit_fd)
        ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:
        ident = None  # no audit pipe (a bare test run): denials are raised, not reported
    hook = factory(audit_fd, scratch, tuple(read_denied), allow_subprocess, os.write, os.getcwd,
                   sys.modules, os.getpid(), os.fstat, os._exit, ident)
    sys.addaudithook(hook)


def _exact_path(path: Any) -> str | None:
    """The path an ``open`` event names, read without running candidate code: exact
    ``str``/``bytes`` and the standard library's own path classes only."""
    t = type(path)
    if t is str:
        return path
    if t is bytes:
        return bytes.decode(path, "utf-8", "replace")
    if t in (pathlib.PosixPath, pathlib.PurePosixPath):
        return str.__str__(os.fspath(path))
    return None


def _make_hook(audit_fd: int, scratch: str, read_denied: tuple[str, ...], allow_subprocess: bool,
               write: Any, getcwd: Any, modules: Any, me: int, fstat: Any = None,
               exit_: Any = None, ident: tuple[int, int] | None = None) -> Any:
    """Build the hook (run with the private globals made by :func:`install_audit_hook`)."""
    write_roots = (normalise(scratch, "/"),)
    denied_reads = tuple(normalise(r, "/") for r in read_denied)
    events = DENIED_EVENTS - _PROCESS_EVENTS if allow_subprocess else DENIED_EVENTS
    exempt = _PROCESS_MODULES if allow_subprocess else ()
    dlopen_ok = DLOPEN_ALLOWED
    in_hook = [False]

    def already(name: str) -> bool:
        return name in modules or name.split(".")[0] in exempt

    def shown(x: Any) -> str:
        # never repr() a candidate's object inside the hook: its __repr__ would run here
        return repr(x) if type(x) in (int, str, bytes, float, bool) else type(x).__name__

    def report(reason: str) -> None:
        try:
            if ident is not None:
                st = fstat(audit_fd)
                if (st.st_dev, st.st_ino) != ident:
                    raise OSError("the audit descriptor is not the parent's pipe any more")
            write(audit_fd, str.encode(reason.replace("\n", " ")[:500] + "\n", "utf-8",
                                       "replace"))
        except OSError:
            if ident is not None:
                exit_(AUDIT_LOST_EXIT)  # the parent cannot be told: end the run here

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if in_hook[0]:
            return
        in_hook[0] = True
        try:
            reason = ""
            if event in events:
                reason = f"{event} {shown(args[0])}"[:200] if args else event
            elif event == "ctypes.dlopen" and args:
                name = args[0]
                if not (type(name) is str and "/" not in name
                        and any(a in name for a in dlopen_ok)):
                    reason = f"ctypes.dlopen {shown(name)}"[:200]
            elif event == "open" and args:
                if type(args[0]) is not int:
                    path = _exact_path(args[0])
                    if path is None:
                        reason = f"opening a {type(args[0]).__name__} path"
                    else:
                        reason = open_denial(path, args[1] if len(args) > 1 else None,
                                             args[2] if len(args) > 2 else None, cwd=getcwd(),
                                             write_roots=write_roots, read_denied=denied_reads)
            elif event == "import" and args and type(args[0]) is str:
                reason = import_denial(args[0], already)
            elif event == "os.kill" and args and args[0] != me:
                reason = f"signalling process {shown(args[0])}"
        finally:
            in_hook[0] = False
        if reason:
            report(reason)
            raise PermissionError(f"cutegen sandbox: {reason} is not allowed in a candidate")

    return hook


def enter(*, native_lib: str | None, audit_fd: int, scratch: str,
          read_denied: Iterable[str], allow_subprocess: bool = False) -> list[str]:
    """Lock the process down; returns notes about defences that could not be installed."""
    notes: list[str] = []
    if native_lib:
        from cutegen.codegen.eval.observer import lockdown

        try:
            lockdown(pathlib.Path(native_lib))
        except Exception as e:  # noqa: BLE001 - seccomp may be unavailable; say so
            notes.append(f"seccomp filter not installed: {e}")
    install_audit_hook(audit_fd=audit_fd, scratch=scratch, read_denied=read_denied,
                       allow_subprocess=allow_subprocess)
    return notes
