"""One counter-reading profiler run on the host at a time, and a retry when another tool
holds the counters (found on the H200, 2026-12-02: an external ncu re-time failed beside
another evaluation's ncu, and an honest kernel at the copy bandwidth stayed suspicious)."""

from __future__ import annotations

import threading
import time

from cutegen.profilers import run_counters_tool
from cutegen.profilers._counters import counters_busy, counters_lock
from cutegen.profilers._run import ToolRun

BUSY = ("==ERROR== Profiling failed because a driver resource was unavailable. Ensure that no "
        "other tool (like DCGM) is concurrently collecting profiling data.")


def _run(rc, err=""):
    return ToolRun(("ncu",), rc, "", err, 0.1)


def test_busy_is_read_from_the_tool_output():
    assert counters_busy(_run(9, BUSY))
    assert not counters_busy(_run(0, BUSY))  # a success is a success
    assert not counters_busy(_run(1, "==ERROR== unknown option"))


def test_a_busy_run_is_tried_again_and_a_clean_failure_is_not(tmp_path):
    calls = []

    def runner(argv, **kw):
        calls.append(kw["timeout_s"])
        return _run(9, BUSY) if len(calls) < 3 else _run(0)

    got = run_counters_tool(["ncu"], timeout_s=30, runner=runner, pause_s=0.01,
                            lock=tmp_path / "l")
    assert got.ok and len(calls) == 3
    calls.clear()
    got = run_counters_tool(["ncu"], timeout_s=30, runner=lambda argv, **kw: (
        calls.append(1), _run(1, "bad metric"))[1], pause_s=0.01, lock=tmp_path / "l")
    assert not got.ok and len(calls) == 1
    calls.clear()
    got = run_counters_tool(["ncu"], timeout_s=30, retries=1, runner=lambda argv, **kw: (
        calls.append(1), _run(9, BUSY))[1], pause_s=0.01, lock=tmp_path / "l")
    assert counters_busy(got) and len(calls) == 2  # gives up after its retries


def test_a_second_session_waits_for_the_first(tmp_path):
    lock = tmp_path / "counters.lock"
    order = []

    def slow(argv, **kw):
        order.append(("start", argv[0]))
        time.sleep(0.4)
        order.append(("end", argv[0]))
        return _run(0)

    a = threading.Thread(target=run_counters_tool, args=(["a"],),
                         kwargs={"timeout_s": 10, "runner": slow, "lock": lock})
    a.start()
    time.sleep(0.1)
    run_counters_tool(["b"], timeout_s=10, runner=slow, lock=lock)
    a.join()
    assert order == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b")]


def test_the_wait_for_the_lock_is_bounded(tmp_path):
    lock = tmp_path / "counters.lock"
    with counters_lock(time.monotonic() + 5, lock) as held:
        assert held
        t0 = time.monotonic()
        with counters_lock(time.monotonic() + 0.2, lock) as second:
            assert not second  # the deadline passed first; the caller runs anyway
        assert time.monotonic() - t0 < 2
    with counters_lock(time.monotonic() + 0.2, lock) as again:
        assert again  # released
