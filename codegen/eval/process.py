"""Child processes the evaluator can always stop: own session, capped logs, tree kill.

Every worker is started like ``spawn`` (a fresh interpreter via ``subprocess``) with
``start_new_session=True``, an explicit environment carrying a per-process marker
(``CUTEGEN_TOKEN``), stdout/stderr drained by threads into capped tail buffers (an output
flood can neither deadlock the pipe nor grow our memory: RELIABILITY.md A7), and frames on
a dedicated pipe. Killing a child kills its process group *and* every process that still
carries its marker, so grandchildren that called ``setsid`` or double-forked die too (A5).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from cutegen.codegen.eval import framing


class TailBuffer:
    """Keeps the last ``cap`` bytes written to it (thread-safe)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.total = 0
        self._lock = threading.Lock()

    def write(self, b: bytes) -> None:
        with self._lock:
            self.total += len(b)
            self._chunks.append(b)
            self._size += len(b)
            while self._size - len(self._chunks[0]) >= self.cap:
                self._size -= len(self._chunks.popleft())

    def text(self) -> str:
        with self._lock:
            data = b"".join(self._chunks)[-self.cap:]
        prefix = f"[... {self.total - len(data)} bytes dropped ...]\n" if self.total > len(data) else ""
        return prefix + data.decode("utf-8", errors="replace")


def _drain(stream: Any, buf: TailBuffer) -> None:
    try:
        while True:
            b = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
            if not b:
                return
            buf.write(b)
    except (OSError, ValueError):
        return


class WorkerProcess:
    """A worker process and its message queue.

    Events on :attr:`events` are tuples ``(kind, payload, t_ns)`` with kind "msg" (a
    decoded frame), "protocol_error" (str) or "eof", and ``t_ns`` the
    ``time.monotonic_ns()`` at which this process read it. ``pass_fds`` are further
    descriptors the child inherits (the observer's and the audit pipe's ends).
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], cwd: str,
                 log_cap: int = 64 * 1024, pass_fds: Sequence[int] = ()) -> None:
        r, w = os.pipe()
        self.token = env["CUTEGEN_TOKEN"]
        self.stdout = TailBuffer(log_cap)
        self.stderr = TailBuffer(log_cap)
        try:
            self.proc = subprocess.Popen(
                [*argv, "--msg-fd", str(w)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=(w, *pass_fds), start_new_session=True, env=dict(env),
                cwd=cwd, close_fds=True)
        finally:
            os.close(w)
        self.pgid = self.proc.pid
        self.events: queue.Queue[tuple[str, Any, int]] = queue.Queue()
        self.started = time.monotonic()
        threading.Thread(target=self._read, args=(r,), daemon=True).start()
        threading.Thread(target=_drain, args=(self.proc.stdout, self.stdout), daemon=True).start()
        threading.Thread(target=_drain, args=(self.proc.stderr, self.stderr), daemon=True).start()

    def _read(self, fd: int) -> None:
        try:
            for msg in framing.frames(fd):
                self.events.put(("msg", msg, time.monotonic_ns()))
            self.events.put(("eof", None, time.monotonic_ns()))
        except framing.ProtocolError as e:
            self.events.put(("protocol_error", str(e), time.monotonic_ns()))
        except OSError as e:
            self.events.put(("protocol_error", f"message pipe: {e}", time.monotonic_ns()))
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def next_event(self, timeout: float) -> tuple[str, Any, int] | None:
        try:
            return self.events.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None

    def send_line(self, obj: Any) -> bool:
        """Write one JSON line to the child's stdin; False if the child is gone."""
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(obj) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def exit_description(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "still running"
        if rc < 0:
            try:
                return f"killed by signal {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit code {rc}"

    def rss_bytes(self) -> int:
        """Resident memory of every process carrying this child's marker."""
        return sum(_rss(pid) for pid in marked_pids(self.token) | {self.proc.pid})

    def log_tail(self) -> str:
        out, err = self.stdout.text(), self.stderr.text()
        parts = []
        if out.strip():
            parts.append("--- stdout ---\n" + out)
        if err.strip():
            parts.append("--- stderr ---\n" + err)
        return "\n".join(parts)

    def kill(self) -> set[int]:
        """Kill the process group and every marked process; returns the pids signalled."""
        pids = kill_tree(self.pgid, self.token)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for s in (self.proc.stdin,):
            try:
                if s:
                    s.close()
            except OSError:
                pass
        return pids | {self.proc.pid}


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def marked_pids(token: str) -> set[int]:
    """Pids whose environment carries ``CUTEGEN_TOKEN=token`` (Linux /proc scan)."""
    needle = f"CUTEGEN_TOKEN={token}".encode()
    found: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    me = os.getpid()
    for e in entries:
        if not e.isdigit() or int(e) == me:
            continue
        try:
            with open(f"/proc/{e}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.add(int(e))
        except OSError:
            continue
    return found


def kill_tree(pgid: int, token: str, *, rounds: int = 50) -> set[int]:
    """SIGKILL a process group and all marked processes until none is left (fork loops
    included). Returns every pid signalled."""
    signalled: set[int] = set()
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for _ in range(rounds):
        left = marked_pids(token)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                signalled.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return signalled
