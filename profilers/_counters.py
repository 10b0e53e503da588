"""The GPU's performance counters, one profiling session at a time on this host.

Nsight Compute (and nsys's GPU metrics) need the driver's profiling resources; while one
session holds them another fails with "a driver resource was unavailable". Found on the H200
(2026-12-02): with several evaluations side by side, one evaluation's external re-time by
ncu failed because another's ncu held the counters, and an honest kernel at the copy
bandwidth was left ``suspicious``. So every counter-reading run cutegen starts takes a
host-wide lock first (``flock`` on a file in the system's temporary folder, so separate
processes and pool workers share it), and a run that still finds the counters busy (a tool
outside cutegen, e.g. DCGM) is tried again after a pause.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from cutegen.profilers._run import ToolRun, run_tool

#: What ncu prints when another session holds the counters.
BUSY_MARKERS = ("driver resource was unavailable", "concurrently collecting profiling data")


def lock_path() -> Path:
    return Path(tempfile.gettempdir()) / "cutegen-gpu-counters.lock"


def counters_busy(run: ToolRun) -> bool:
    """Did the tool fail because another session held the counters? (pure)"""
    text = (run.stdout + "\n" + run.stderr).lower()
    return not run.ok and any(m in text for m in BUSY_MARKERS)


@contextlib.contextmanager
def counters_lock(deadline: float, path: Path | None = None) -> Iterator[bool]:
    """Hold the host-wide counters lock; yields False when ``deadline`` (monotonic) passed
    first (the caller then runs anyway and may find the counters busy)."""
    path = path or lock_path()
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    held = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        yield held
    finally:
        if held:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def run_counters_tool(argv: Sequence[str], *, timeout_s: float,
                      env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
                      cap_bytes: int = 1 << 20, retries: int = 2, pause_s: float = 2.0,
                      runner: Callable[..., ToolRun] = run_tool,
                      lock: Path | None = None) -> ToolRun:
    """``run_tool`` for a tool that reads the GPU's counters: under the host-wide lock, and
    tried again up to ``retries`` times while the counters are busy, all within
    ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    with counters_lock(deadline, lock):
        attempt = 0
        while True:
            run = runner(argv, timeout_s=max(deadline - time.monotonic(), 1.0), env=env,
                         cwd=cwd, cap_bytes=cap_bytes)
            if not counters_busy(run) or attempt >= retries \
                    or time.monotonic() + pause_s >= deadline:
                return run
            attempt += 1
            time.sleep(pause_s)
