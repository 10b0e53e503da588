"""The channel end to end, with child processes standing in for the worker (no GPU needed).

The child runs the library's selftest observer instead of CUPTI: HELLO, fixed records, and
the real flusher thread echoing each flush nonce. A child that writes garbage or forged
frames into its descriptor, or closes the control pipe, must make ``flush`` raise, never
return records. The real ``cgobs_start`` and the seccomp lockdown run in children too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cutegen.codegen.eval.observer import ObserverChannel, ObserverSilent
from cutegen.codegen.eval.observer_records import (
    ApiRec,
    FlushedRec,
    HelloFlag,
    HelloRec,
    KernelRec,
    MemcpyRec,
    MemsetRec,
    ModuleFlag,
    ModuleRec,
    NoteRec,
)


class _Child:
    """One stand-in worker on a channel; stdin closing ends it."""

    def __init__(self, argv_of, mode: str, ch: ObserverChannel) -> None:
        self.proc = subprocess.Popen(argv_of(mode, *ch.child_fds()), pass_fds=ch.child_fds(),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        ch.after_spawn()
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.strip() == "ready", (line, self.proc.stderr.read() if self.proc.stderr else "")

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def run_child(child_cmd):
    started: list[_Child] = []

    def start(mode: str, ch: ObserverChannel) -> _Child:
        c = _Child(child_cmd, mode, ch)
        started.append(c)
        return c

    yield start
    for c in started:
        c.stop()


def test_flush_returns_everything_up_to_its_own_echo(run_child):
    with ObserverChannel(selftest_ok=True) as ch:
        child = run_child("serve", ch)
        t0 = time.monotonic_ns()
        first = ch.flush(10.0)
        t1 = time.monotonic_ns()
        assert [type(r) for r in first] == [HelloRec, KernelRec, MemcpyRec, MemsetRec, ApiRec,
                                            ModuleRec, NoteRec, ModuleRec, FlushedRec]
        assert ch.hello is not None and ch.hello.pid == child.proc.pid
        assert ch.hello.flags == HelloFlag.SELFTEST
        echo = first[-1]
        assert isinstance(echo, FlushedRec) and echo.records_total == 8
        # the selftest's CUPTI clock is CLOCK_MONOTONIC itself: the map is about the identity
        assert t0 <= echo.clock.mono_ns <= t1
        assert abs(ch.clock.offset_ns) <= echo.clock.bracket_ns
        second = ch.flush(10.0)
        assert len(second) == 1 and isinstance(second[0], FlushedRec)
        assert second[0].records_total == 9 and second[0].nonce != echo.nonce
        for _ in range(20):  # many round trips, each answered in order
            (rec,) = ch.flush(10.0)
            assert isinstance(rec, FlushedRec)
        assert ch.dead is None
        child.stop()
        with pytest.raises(ObserverSilent):  # the worker is gone: no more echoes
            ch.flush(5.0)


def test_module_records_name_the_caller_that_loaded_the_image(run_child, observer_lib):
    """The real callback code (backtrace, /proc/self/maps) on a module 'loaded' by the
    selftest: the origin is the first object outside the skip list (here Python's ctypes
    machinery, which called cgobs_selftest_start), never the observer library itself."""
    with ObserverChannel(selftest_ok=True) as ch:
        child = run_child("serve", ch)
        mod = [r for r in ch.flush(10.0) if isinstance(r, ModuleRec)][-1]
    assert mod.module_id == 6 and mod.flags == ModuleFlag.NOT_ELF
    assert mod.thread_id == child.proc.pid  # loaded on the child's main thread
    assert mod.origin.startswith("/") and Path(mod.origin).exists(), mod
    assert "ffi" in mod.origin or "ctypes" in mod.origin or "python" in mod.origin, mod
    assert mod.chain and mod.chain[0] == mod.origin, mod
    real_lib = str(observer_lib.resolve())
    assert real_lib not in mod.chain and mod.origin != real_lib
    assert 0 < len(mod.chain) <= 12
    assert all(a != b for a, b in zip(mod.chain[:-1], mod.chain[1:], strict=True))  # repeats folded


def test_the_flusher_keeps_answering_after_lockdown(run_child):
    if not _seccomp_supported():
        pytest.skip("this kernel has no seccomp")
    with ObserverChannel(selftest_ok=True) as ch:
        run_child("serve_locked", ch)
        assert isinstance(ch.flush(10.0)[-1], FlushedRec)
        assert isinstance(ch.flush(10.0)[-1], FlushedRec)


def test_a_selftest_stream_is_refused_unless_a_test_asked_for_one(run_child):
    with ObserverChannel() as ch:
        run_child("serve", ch)
        with pytest.raises(ObserverSilent, match="selftest"):
            ch.flush(10.0)


@pytest.mark.parametrize("mode", ["garbage", "forge"])
def test_bytes_written_into_the_pipe_by_the_worker_make_flush_raise(run_child, mode):
    with ObserverChannel(selftest_ok=True) as ch:
        run_child(mode, ch)
        with pytest.raises(ObserverSilent, match="authentication") as ei:
            ch.flush(10.0)
        assert "magic" in ei.value.reason if mode == "garbage" else "MAC" in ei.value.reason
        with pytest.raises(ObserverSilent):  # and it stays dead
            ch.flush(1.0)


def test_a_flush_the_parent_never_asked_for_kills_the_channel(run_child):
    with ObserverChannel(selftest_ok=True) as ch:
        run_child("inject", ch)
        with pytest.raises(ObserverSilent, match="never sent"):
            ch.flush(10.0)


def test_a_worker_that_closes_the_control_pipe_makes_flush_time_out(run_child):
    with ObserverChannel(selftest_ok=True) as ch:
        run_child("close_ctl", ch)
        time.sleep(0.3)  # the flusher notices the closed descriptor within one poll period
        t0 = time.monotonic()
        with pytest.raises(ObserverSilent, match="no FLUSHED echo"):
            ch.flush(1.0)
        assert 0.9 <= time.monotonic() - t0 < 5.0


def test_flush_before_spawn_and_close_twice_are_harmless():
    ch = ObserverChannel()
    with pytest.raises(RuntimeError):
        ch.flush(1.0)
    assert len(ch.child_fds()) == 3
    ch.close()
    ch.close()


# -- the real start, without a GPU ------------------------------------------------------------


def test_start_without_a_gpu_fails_with_a_readable_message(child_cmd):
    from cutegen.codegen.eval.observer_build import find_libcupti

    r = subprocess.run(child_cmd("start", "/nonexistent/libcupti.so.13"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    err = json.loads(r.stdout.strip().splitlines()[-1])["error"]
    assert "dlopen(/nonexistent/libcupti.so.13) failed" in err

    cupti = find_libcupti()
    if cupti is None:
        pytest.skip("no libcupti on this machine for the second half")
    if _has_gpu():
        pytest.skip("a GPU is visible: cgobs_start would succeed")
    r = subprocess.run(child_cmd("start", cupti), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]  # no crash, no signal
    err = json.loads(r.stdout.strip().splitlines()[-1])["error"]
    assert "the observer did not start" in err
    assert "GPU" in err or "driver" in err, err


# -- lockdown -------------------------------------------------------------------------------


def _seccomp_supported() -> bool:
    try:
        return "Seccomp:" in Path("/proc/self/status").read_text()
    except OSError:
        return False


def _has_gpu() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*"))


def test_lockdown_forbids_new_processes_sockets_signals_and_sibling_memory(child_cmd):
    if sys.platform != "linux" or not _seccomp_supported():
        pytest.skip("seccomp is not available in this sandbox")
    victim = subprocess.Popen(child_cmd("victim"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        line = victim.stdout.readline() if victim.stdout else ""
        if line.strip() != "ready":
            msg = victim.stderr.read() if victim.stderr else ""
            if "x86-64" in msg:
                pytest.skip("lockdown is x86-64 only")
            pytest.fail(f"the victim did not lock down: {line!r} {msg[-2000:]}")
        r = subprocess.run(child_cmd("lockdown", victim.pid), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr[-2000:]
        res = json.loads(r.stdout.strip().splitlines()[-1])
        assert "unavailable" not in res, res
        control = subprocess.run(child_cmd("peek", victim.pid), capture_output=True, text=True,
                                 timeout=60)
        peek = json.loads(control.stdout.strip().splitlines()[-1])["victim_mem"]
    finally:
        if victim.stdin:
            victim.stdin.close()
        victim.wait(timeout=10)
    eperm = "denied:PermissionError:1"
    assert res.pop("victim_mem").startswith("denied:PermissionError")
    assert res == {
        "early_thread_fork": eperm,  # a thread that existed before the filter (TSYNC)
        "fork": eperm,
        "subprocess": eperm,
        "posix_spawn": eperm,
        "socket_inet": eperm,
        "kill_1": eperm,
        "kill_group": eperm,
        "kill_self": "allowed",
        "thread": "ran",
        "socketpair": "allowed",
        "cap_eff": "0000000000000000",
    }
    if os.geteuid() == 0:  # the control: a root process that kept CAP_SYS_PTRACE gets in
        assert peek == "allowed"
