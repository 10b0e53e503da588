"""The one place profilers start processes: timeouts, process groups, capped output.

Every child starts in its own session (``start_new_session=True``), so a tool and the
program it profiles form one process group. On timeout, on an interrupt, and after a
normal exit (to reap anything the tool left running), the whole group is signalled with
``os.killpg``: SIGTERM, a short grace period, then SIGKILL. Output goes to anonymous
temporary files (no pipe can fill and block the child) and only its last ``cap_bytes``
are kept.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: Default cap on the output kept from one stream.
DEFAULT_CAP_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class ToolRun:
    """The outcome of one child process.

    Attributes:
        argv: what was run.
        returncode: the exit status, or ``None`` when it timed out or could not start.
        stdout / stderr: the last ``cap_bytes`` of each stream, decoded leniently.
        seconds: wall time.
        timed_out: killed after the timeout.
        truncated: some output was dropped by the cap.
        start_error: why the process could not be started (``OSError`` text), else None.
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    truncated: bool = False
    start_error: str | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def tail(self, n_chars: int = 400) -> str:
        """The end of stderr (else stdout) on one line, for a report's ``error``."""
        text = (self.stderr.strip() or self.stdout.strip())[-n_chars:]
        return " | ".join(line.strip() for line in text.splitlines() if line.strip())

    def describe(self) -> str:
        """One line saying how the run ended."""
        name = Path(self.argv[0]).name if self.argv else "?"
        if self.start_error:
            return f"{name} could not start: {self.start_error}"
        if self.timed_out:
            return f"{name} timed out after {self.seconds:.1f} s"
        tail = self.tail()
        return f"{name} exited with status {self.returncode}" + (f": {tail}" if tail else "")


def run_tool(
    argv: Sequence[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    grace_s: float = 3.0,
) -> ToolRun:
    """Run a command in its own process group, with a timeout that kills the group.

    Args:
        argv: the command.
        timeout_s: wall-clock limit; the group is killed when it is reached.
        env: the complete environment for the child; ``None`` inherits this process's.
        cwd: working directory for the child.
        cap_bytes: how much of the end of each stream to keep.
        grace_s: time between SIGTERM and SIGKILL.

    Returns:
        A :class:`ToolRun`; this function raises only for programming errors (and
        re-raises ``KeyboardInterrupt`` after killing the group).
    """
    argv = tuple(str(a) for a in argv)
    if not argv:
        raise ValueError("empty argv")
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=dict(env) if env is not None else None,
                cwd=str(cwd) if cwd is not None else None,
                start_new_session=True,
            )
        except OSError as e:
            return ToolRun(argv, None, "", "", time.monotonic() - t0, start_error=str(e))
        timed_out = False
        try:
            proc.wait(timeout=max(timeout_s, 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
        except BaseException:
            _kill_group(proc, grace_s)
            raise
        _kill_group(proc, grace_s)
        seconds = time.monotonic() - t0
        stdout, cut_out = _read_capped(out, cap_bytes)
        stderr, cut_err = _read_capped(err, cap_bytes)
    return ToolRun(
        argv,
        None if timed_out else proc.returncode,
        stdout,
        stderr,
        seconds,
        timed_out=timed_out,
        truncated=cut_out or cut_err,
    )


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the child's process group, give it ``grace_s``, then SIGKILL; reap the child.

    After a normal exit this finds an empty group and returns at once.
    """
    if _signal_group(proc.pid, signal.SIGTERM):
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader so a zombie does not count as alive
            if not _signal_group(proc.pid, 0):
                break
            time.sleep(0.05)
        else:
            _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.wait(timeout=max(grace_s, 1.0))
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL did not take
        pass


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _read_capped(f: IO[bytes], cap: int) -> tuple[str, bool]:
    size = f.seek(0, os.SEEK_END)
    start = max(0, size - cap)
    f.seek(start)
    data = f.read()
    return data.decode("utf-8", errors="replace"), start > 0


def find_tool(
    name: str, *, path: str | None = None, candidates: Sequence[str] = ()
) -> str | None:
    """Find an executable: on ``path`` (default: this process's PATH), then in ``candidates``.

    Args:
        name: the executable's name (``ncu``).
        path: a ``PATH`` string to search instead of this process's.
        candidates: further absolute paths, glob patterns allowed (newest version last
            in sort order wins).

    Returns:
        The executable's path, or ``None``.
    """
    found = shutil.which(name, path=path)
    if found:
        return found
    for pattern in candidates:
        for hit in sorted(glob.glob(pattern), reverse=True):
            if os.path.isfile(hit) and os.access(hit, os.X_OK):
                return hit
    return None


def gpu_visible() -> bool:
    """A cheap check that an NVIDIA GPU is present (no CUDA initialisation, no torch import)."""
    return Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None
