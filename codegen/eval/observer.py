"""The two ends of the observer's channel: the parent's reader and the worker's attach.

Parent side, :class:`ObserverChannel`: makes the HMAC key (``secrets.token_bytes(32)``) and
three pipes (key, records out, control in), hands the child's ends to ``subprocess.Popen``
through ``pass_fds``, writes the key once the child exists, and reads frames on a daemon
thread. :meth:`ObserverChannel.flush` is the only way to learn what the worker's GPU did:
it sends ``b"F" + nonce`` on the control pipe and waits for the FLUSHED record carrying that
nonce. FLUSHED is written by the observer's own thread after ``cuptiActivityFlushAll``, in
the same authenticated, gap-free sequence as every record, so everything CUPTI held before
the request has arrived once the echo has. Synchronise the worker's device before asking
(a forced flush hands back running kernels with an end time of 0, for good).

Anything else (no echo in time, end of stream, a frame that fails authentication) raises
:class:`ObserverSilent` and the channel stays dead: the parent must then treat the worker's
run as unobserved, never as clean.

Worker side, :func:`attach` and :func:`lockdown`: load the library with ctypes and start it,
then install the seccomp filter. They run before any candidate code is imported, which is
why ctypes is allowed there; the worker's audit hook forbids it afterwards.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import select
import threading
import time
from pathlib import Path

from cutegen.codegen.eval.observer_build import ObserverUnavailable
from cutegen.codegen.eval.observer_records import (
    KEY_LEN,
    NONCE_LEN,
    ClockMap,
    FlushedRec,
    FrameError,
    FrameReader,
    HelloFlag,
    HelloRec,
    Record,
)

DEFAULT_MAX_PENDING = 2_000_000


class ObserverSilent(Exception):
    """The observer did not answer a flush: timeout, end of stream, or a forged frame.

    Not an infrastructure error by itself: a candidate can cause it (closing or flooding
    the observer's descriptors), so the caller decides what it means for the verdict.

    Attributes:
        reason: one line saying what happened.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ObserverChannel:
    """The parent's end: key, pipes, a reader thread, and the flush handshake.

    Use::

        ch = ObserverChannel()
        proc = subprocess.Popen([...worker..., *map(str, ch.child_fds())],
                                pass_fds=ch.child_fds())
        ch.after_spawn()
        ...                     # the worker runs, then synchronises its device
        records = ch.flush(10.0)  # keep the worker alive until this returns
        ch.close()

    Args:
        selftest_ok: accept a stream whose HELLO says SELFTEST (tests only; a production
            worker must never be able to pass off the selftest writer as the observer).
        max_pending: records held between flushes before the channel gives up (a bound on
            the parent's memory; the observer itself cannot be made to send forged data).
    """

    def __init__(self, *, selftest_ok: bool = False,
                 max_pending: int = DEFAULT_MAX_PENDING) -> None:
        self._key = secrets.token_bytes(KEY_LEN)
        self._selftest_ok = selftest_ok
        self._max_pending = max_pending
        self._key_r, self._key_w = os.pipe()
        self._out_r, self._out_w = os.pipe()
        self._ctl_r, self._ctl_w = os.pipe()
        self._reader = FrameReader(self._key)
        self._cond = threading.Condition()
        self._records: list[Record] = []
        self._dead: str | None = None
        self._stop = False
        self._thread: threading.Thread | None = None
        self._spawned = False
        self._asked: set[bytes] = set()  # every nonce sent; FLUSHED for any other is forged
        self._flush_lock = threading.Lock()
        self.hello: HelloRec | None = None
        self.clock = ClockMap()

    def child_fds(self) -> tuple[int, int, int]:
        """``(key_r, out_w, ctl_r)``: the descriptors the worker passes to :func:`attach`."""
        return (self._key_r, self._out_w, self._ctl_r)

    def after_spawn(self) -> None:
        """Sends the key, closes the child's ends here, and starts reading. Call once, right
        after the child was started."""
        if self._spawned:
            raise RuntimeError("after_spawn() was already called")
        self._spawned = True
        try:
            os.write(self._key_w, self._key)  # 32 bytes: one atomic pipe write
        except OSError as e:
            self._set_dead(f"could not send the key: {e}")
        finally:
            os.close(self._key_w)
        for fd in (self._key_r, self._out_w, self._ctl_r):
            os.close(fd)
        os.set_blocking(self._ctl_w, False)
        self._thread = threading.Thread(target=self._read_loop, name="observer-reader",
                                        daemon=True)
        self._thread.start()

    def attach_here(self, *, lib: Path, cupti: Path) -> None:
        """Attach the observer to *this* process and read it here (trusted processes only:
        the reference worker times the baselines with it). Call instead of
        :meth:`after_spawn`; the child ends then belong to the native observer."""
        if self._spawned:
            raise RuntimeError("the channel is already in use")
        self._spawned = True
        try:
            os.write(self._key_w, self._key)
        finally:
            os.close(self._key_w)
        attach(lib=lib, cupti=cupti, key_fd=self._key_r, out_fd=self._out_w, ctl_fd=self._ctl_r)
        os.set_blocking(self._ctl_w, False)
        self._thread = threading.Thread(target=self._read_loop, name="observer-reader",
                                        daemon=True)
        self._thread.start()

    @property
    def dead(self) -> str | None:
        """Why the channel stopped, or ``None`` while it works."""
        with self._cond:
            return self._dead

    def flush(self, timeout: float) -> list[Record]:
        """Every record received since the previous ``flush()``, up to and including the
        FLUSHED record that echoes this call's nonce, in arrival order. Calls from several
        threads are served one at a time.

        Raises:
            ObserverSilent: no echo within ``timeout`` seconds, the stream ended, it failed
                authentication, or it echoed a nonce this channel never sent (someone else
                wrote into the control pipe). The channel is dead afterwards.
        """
        if not self._spawned:
            raise RuntimeError("flush() before after_spawn()")
        with self._flush_lock:
            return self._flush(timeout)

    def _flush(self, timeout: float) -> list[Record]:
        nonce = secrets.token_bytes(NONCE_LEN)
        with self._cond:
            if self._dead:
                raise ObserverSilent(self._dead)
            self._asked.add(nonce)
        try:
            n = os.write(self._ctl_w, b"F" + nonce)
        except BlockingIOError:
            n = -1
        except OSError as e:
            self._set_dead(f"the control pipe is closed: {e}")
            raise ObserverSilent(self.dead or "control pipe closed") from e
        if n != 1 + NONCE_LEN:
            self._set_dead("the control pipe is full: the observer stopped reading it")
            raise ObserverSilent(self.dead or "control pipe full")
        deadline = time.monotonic() + timeout
        scanned = 0
        with self._cond:
            while True:
                # Trouble anywhere in the stream fails the flush, even when the echo came
                # before it: a stream that was tampered with once is not trusted at all.
                if self._dead:
                    raise ObserverSilent(self._dead)
                for i in range(scanned, len(self._records)):
                    rec = self._records[i]
                    if isinstance(rec, FlushedRec) and rec.nonce == nonce:
                        out = self._records[:i + 1]
                        del self._records[:i + 1]
                        return out
                scanned = len(self._records)
                left = deadline - time.monotonic()
                if left <= 0:
                    self._dead = f"no FLUSHED echo within {timeout:g} s"
                    self._cond.notify_all()
                    raise ObserverSilent(self._dead)
                self._cond.wait(left)

    def close(self) -> None:
        """Stops reading and closes the parent's descriptors (idempotent). Closing the
        control pipe also ends the observer's flusher thread."""
        with self._cond:
            self._stop = True
            if not self._dead:
                self._dead = "the channel was closed"
            self._cond.notify_all()
        if not self._spawned:
            for fd in (self._key_r, self._key_w, self._out_w, self._ctl_r):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._spawned = True
        with contextlib.suppress(OSError):
            os.close(self._ctl_w)
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._thread is None or not self._thread.is_alive():
            with contextlib.suppress(OSError):
                os.close(self._out_r)

    def __enter__(self) -> ObserverChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reader thread -----------------------------------------------------------------

    def _set_dead(self, why: str) -> None:
        with self._cond:
            if not self._dead:
                self._dead = why
            self._cond.notify_all()

    def _read_loop(self) -> None:
        fd = self._out_r
        poller = select.poll()  # not select.select: a busy parent may hold fds above 1024
        poller.register(fd, select.POLLIN)
        try:
            while True:
                with self._cond:
                    if self._stop:
                        return
                if not poller.poll(200):
                    continue
                try:
                    data = os.read(fd, 1 << 20)
                except OSError as e:
                    self._set_dead(f"reading the observer's pipe failed: {e}")
                    return
                if not data:
                    self._set_dead("the observer's stream ended (the worker closed it or died)")
                    return
                try:
                    recs = self._reader.feed(data)
                except FrameError as e:
                    self._set_dead(f"the observer's stream failed authentication: {e}")
                    return
                if recs and not self._accept(recs):
                    return
        finally:
            with self._cond:
                stopping = self._stop
            if not stopping:
                with contextlib.suppress(OSError):
                    os.close(fd)
                self._out_r = -1

    def _accept(self, recs: list[Record]) -> bool:
        with self._cond:
            for rec in recs:
                if isinstance(rec, HelloRec):
                    if self.hello is not None:
                        self._dead = "a second HELLO in one stream"
                    elif rec.flags & HelloFlag.SELFTEST and not self._selftest_ok:
                        self._dead = "the stream comes from the selftest writer, not the observer"
                    self.hello = rec
                    self.clock.add(rec.clock)
                elif isinstance(rec, FlushedRec):
                    if rec.nonce not in self._asked:
                        self._dead = "a FLUSHED echo of a nonce this channel never sent"
                    self.clock.add(rec.clock)
                elif self.hello is None:
                    self._dead = "records before HELLO"
            self._records.extend(recs)
            if len(self._records) > self._max_pending:
                self._dead = f"more than {self._max_pending} records between two flushes"
            self._cond.notify_all()
            return self._dead is None


# -- worker side ---------------------------------------------------------------------------


def _load(lib: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(lib))
    except OSError as e:
        raise ObserverUnavailable(f"could not load the observer library {lib}: {e}") from e


def _last_error(dll: ctypes.CDLL) -> str:
    dll.cgobs_last_error.restype = ctypes.c_char_p
    msg = dll.cgobs_last_error()
    return msg.decode("utf-8", "replace") if msg else "(no message)"


def attach(*, lib: Path, cupti: Path, key_fd: int, out_fd: int, ctl_fd: int,
           no_api: bool = False) -> None:
    """Starts the observer in this (worker) process. Call before importing candidate code.

    The library reads the key from ``key_fd`` and closes it; ``out_fd`` and ``ctl_fd``
    belong to the observer from then on.

    Args:
        no_api: leave CUDA runtime/driver API records off (overhead comparisons only).

    Raises:
        ObserverUnavailable: the library or CUPTI could not be loaded or started (no GPU,
            no driver, a CUPTI of another major version...), with the library's reason.
    """
    dll = _load(lib)
    fn = dll.cgobs_start
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    rc = fn(key_fd, out_fd, ctl_fd, os.fsencode(str(cupti)), 1 if no_api else 0)
    if rc != 0:
        raise ObserverUnavailable(f"the observer did not start ({rc}): {_last_error(dll)}")


def attach_selftest(*, lib: Path, key_fd: int, out_fd: int, ctl_fd: int) -> None:
    """Starts the selftest writer instead of the observer (tests: no CUPTI, no GPU).

    It sends HELLO (flagged SELFTEST) and fixed records, then echoes every flush request like
    the real flusher thread. :class:`ObserverChannel` refuses such a stream unless it was
    made with ``selftest_ok=True``.
    """
    dll = _load(lib)
    fn = dll.cgobs_selftest_start
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    rc = fn(key_fd, out_fd, ctl_fd)
    if rc != 0:
        raise ObserverUnavailable(f"the selftest observer did not start ({rc}): "
                                  f"{_last_error(dll)}")


def lockdown(lib: Path, *, keep_caps: bool = False, keep_dumpable: bool = False) -> None:
    """Locks this (worker) process down before candidate code runs.

    The process becomes non-dumpable (no other process of this user, a sibling worker
    included, can open its ``/proc/PID/mem`` or ``/proc/PID/fd``), the calling thread drops
    every capability (a root worker keeps no CAP_SYS_PTRACE or CAP_DAC_OVERRIDE; threads it
    starts later inherit that), and the library's seccomp filter goes on every thread: no
    new processes, no exec, no ptrace or cross-process memory access, no sockets but
    AF_UNIX, no signals to other processes. Threads keep working.

    Args:
        keep_caps: skip dropping capabilities (escape hatch, should a driver need one).
        keep_dumpable: skip PR_SET_DUMPABLE 0 (escape hatch for debuggers and profilers).

    Raises:
        ObserverUnavailable: a step failed (not x86-64, no seccomp, capset refused...).
    """
    dll = _load(lib)
    fn = dll.cgobs_lockdown
    fn.argtypes = [ctypes.c_uint]
    fn.restype = ctypes.c_int
    rc = fn((1 if keep_caps else 0) | (2 if keep_dumpable else 0))
    if rc != 0:
        raise ObserverUnavailable(f"lockdown failed ({rc}): {_last_error(dll)}")
