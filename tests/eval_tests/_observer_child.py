"""A stand-in worker for the observer tests: ``python _observer_child.py MODE LIB ...``.

Modes (KEY OUT CTL are the descriptors from ObserverChannel.child_fds()):

* ``serve KEY OUT CTL``: the selftest observer (HELLO, fixed records, then one FLUSHED per
  flush request), until stdin closes.
* ``serve_locked KEY OUT CTL``: the same, then lockdown; the flusher must keep answering.
* ``garbage KEY OUT CTL``: serve, then write bytes that are not a frame into OUT, as a
  candidate holding the descriptor could.
* ``forge KEY OUT CTL``: serve, then write a well-formed frame (the next sequence number, a
  FLUSHED record) under a key of its own.
* ``inject KEY OUT CTL``: serve, then open its own write end of the control pipe through
  /proc/self/fd and ask for a flush the parent never asked for.
* ``close_ctl KEY OUT CTL``: serve, keep a duplicate of CTL (so the parent's writes still
  succeed), close CTL itself: the flusher thread ends and flushes must time out.
* ``start CUPTI``: the real cgobs_start on this GPU-less machine; prints the error.
* ``lockdown VICTIM``: lockdown, then try what it must forbid and allow, including opening
  the memory of VICTIM (a locked-down sibling); prints JSON.
* ``victim``: lockdown, print ready, wait for stdin to close.
* ``peek VICTIM``: no lockdown: can this process open VICTIM's memory? (the control)
* ``elf_fuzz IMAGE N``: the cubin parser on N mangled copies of IMAGE; prints a count.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path


def _serve(lib: Path, key: int, out: int, ctl: int) -> None:
    from cutegen.codegen.eval.observer import attach_selftest

    attach_selftest(lib=lib, key_fd=key, out_fd=out, ctl_fd=ctl)


def _wait_stdin() -> None:
    sys.stdin.read()


def _try(fn) -> str:
    try:
        fn()
    except OSError as e:
        return f"denied:{type(e).__name__}:{e.errno}"
    return "allowed"


def _open_mem(pid: int) -> None:
    with open(f"/proc/{pid}/mem", "rb"):
        pass


def _lockdown(lib: Path, victim: int) -> None:
    from cutegen.codegen.eval.observer import lockdown
    from cutegen.codegen.eval.observer_build import ObserverUnavailable

    go = threading.Event()
    early: dict[str, str] = {}

    def early_thread() -> None:  # started before the filter: TSYNC must cover it too
        go.wait()
        early["fork"] = _try(lambda: os._exit(0) if os.fork() == 0 else None)

    t = threading.Thread(target=early_thread)
    t.start()
    try:
        lockdown(lib)
    except ObserverUnavailable as e:
        go.set()
        t.join()
        print(json.dumps({"unavailable": str(e)}))
        return
    go.set()
    t.join()
    res: dict[str, str] = {"early_thread_fork": early["fork"]}
    res["fork"] = _try(lambda: os._exit(0) if os.fork() == 0 else None)
    res["subprocess"] = _try(lambda: subprocess.run(["true"], check=False))
    res["posix_spawn"] = _try(lambda: os.posix_spawn("/bin/true", ["true"], dict(os.environ)))
    res["socket_inet"] = _try(lambda: socket.socket(socket.AF_INET).close())
    res["kill_1"] = _try(lambda: os.kill(1, 0))
    res["kill_group"] = _try(lambda: os.kill(0, 0))
    res["kill_self"] = _try(lambda: os.kill(os.getpid(), 0))
    done: list[int] = []
    th = threading.Thread(target=lambda: done.append(1))
    th.start()
    th.join()
    res["thread"] = "ran" if done else "did not run"
    res["socketpair"] = _try(lambda: [s.close() for s in socket.socketpair()])
    res["victim_mem"] = _try(lambda: _open_mem(victim))
    status = Path("/proc/self/status").read_text()
    res["cap_eff"] = next(ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff"))
    print(json.dumps(res))


def _elf_fuzz(lib: Path, image: Path, n: int) -> None:
    import ctypes

    dll = ctypes.CDLL(str(lib))
    fn = dll.cgobs_elf_kernel_names
    fn.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                   ctypes.POINTER(ctypes.c_uint)]
    fn.restype = ctypes.c_long
    data = image.read_bytes()
    rng = random.Random(1234)
    out = ctypes.create_string_buffer(1 << 16)
    flags = ctypes.c_uint()
    seen = 0
    for i in range(n):
        b = bytearray(data)
        if i % 3 == 0:
            b = b[:rng.randrange(len(b))]
        for _ in range(rng.randrange(1, 16)):
            if not b:
                break
            # bias the flips towards the ELF header and the section table at the end
            pos = rng.randrange(min(len(b), 64)) if rng.random() < 0.5 else rng.randrange(len(b))
            b[pos] = rng.randrange(256)
        fn(bytes(b), len(b), out, len(out), ctypes.byref(flags))
        seen += 1
    print(json.dumps({"ran": seen}))


def main() -> None:
    mode, lib = sys.argv[1], Path(sys.argv[2])
    args = sys.argv[3:]
    if mode in ("serve", "serve_locked", "garbage", "forge", "inject", "close_ctl"):
        key, out, ctl = map(int, args[:3])
        _serve(lib, key, out, ctl)
        if mode == "serve_locked":
            from cutegen.codegen.eval.observer import lockdown

            lockdown(lib)
        elif mode == "garbage":
            os.write(out, b"PASS\n" * 64)
        elif mode == "forge":
            from cutegen.codegen.eval.observer_records import encode_frame

            body = bytes(16) + bytes(20) + bytes(28)
            payload = bytes([7]) + len(body).to_bytes(4, "little") + body
            os.write(out, encode_frame(os.urandom(32), 3, payload))
        elif mode == "inject":
            wfd = os.open(f"/proc/self/fd/{ctl}", os.O_WRONLY)
            os.write(wfd, b"F" + os.urandom(16))
        elif mode == "close_ctl":
            keep = os.dup(ctl)
            os.close(ctl)
            del keep
        print("ready", flush=True)
        _wait_stdin()
    elif mode == "start":
        from cutegen.codegen.eval.observer import attach
        from cutegen.codegen.eval.observer_build import ObserverUnavailable

        kr, kw = os.pipe()
        os.write(kw, os.urandom(32))
        r, w = os.pipe()
        cr, cw = os.pipe()
        try:
            attach(lib=lib, cupti=Path(args[0]), key_fd=kr, out_fd=w, ctl_fd=cr)
        except ObserverUnavailable as e:
            print(json.dumps({"error": str(e)}))
        else:
            print(json.dumps({"started": True}))
    elif mode == "lockdown":
        _lockdown(lib, int(args[0]))
    elif mode == "victim":
        from cutegen.codegen.eval.observer import lockdown

        lockdown(lib)
        print("ready", flush=True)
        _wait_stdin()
    elif mode == "peek":
        print(json.dumps({"victim_mem": _try(lambda: _open_mem(int(args[0])))}))
    elif mode == "elf_fuzz":
        _elf_fuzz(lib, Path(args[0]), int(args[1]))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
