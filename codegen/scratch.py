"""The evaluator's scratch folders (``/dev/shm/cutegen-*``), and sweeping those left behind.

An evaluator works in one scratch folder (in ``/dev/shm`` when it has room, else the
temporary directory), removed when the evaluator closes. A search killed with ``kill -9``
(or a machine that lost power) never closes it, and the folder (candidate workers' files,
compiled kernels, inputs in shared memory) would stay until a reboot. So each folder holds a
marker naming its owner: host, pid and the process's start time (a reused pid is not the
owner). :func:`make_scratch` sweeps first: every ``cutegen-*`` folder of this user whose
owner on this host is gone is removed. A folder without a marker (an older cutegen's, or one
whose owner died between creating it and writing the marker) is removed only when it is
plainly an evaluator's (``mkdtemp``'s name, a ``ref`` folder inside, in ``/dev/shm``) and
nothing in it has changed for a day. Folders of other hosts (a shared temporary directory), of other users and any
other ``cutegen-*`` name (``/tmp/cutegen-bench``, say) are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

PREFIX = "cutegen-"
SHM = Path("/dev/shm")
MARKER = ".cutegen-owner"
#: A folder without a marker is left alone until nothing in it changed for this long (s).
UNMARKED_GRACE_S = 24 * 3600.0
#: ``tempfile.mkdtemp(prefix=PREFIX)``'s names.
_MKDTEMP_NAME = re.compile(re.escape(PREFIX) + r"[a-z0-9_]{8}")


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def process_alive(pid: int, start: int | None = None) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not), and, given its start
    time (:func:`start_time`), whether it is still the same process (pids are reused)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: the pid exists, take it as alive
    return state != "Z" and (start is None or start == start_time(pid))


def owner_alive(owner: dict[str, object]) -> bool:
    """Whether the process a scratch folder's marker names still runs (on this host)."""
    pid, start = owner.get("pid"), owner.get("start")
    return isinstance(pid, int) and process_alive(pid, start if isinstance(start, int) else None)


def _last_change(d: Path) -> float:
    """The latest modification time of a folder and its entries (a live evaluator makes
    a worker folder per candidate)."""
    times = [d.stat().st_mtime]
    for e in d.iterdir():
        with contextlib.suppress(OSError):
            times.append(e.lstat().st_mtime)
    return max(times)


def roots() -> tuple[Path, ...]:
    """Where scratch folders may be: shared memory and the temporary directory."""
    return tuple(dict.fromkeys((SHM, Path(tempfile.gettempdir()))))


def sweep_scratch(places: Iterable[Path] | None = None, *,
                  alive: Callable[[dict[str, object]], bool] = owner_alive,
                  now: float | None = None) -> list[Path]:
    """Remove the scratch folders whose owner is gone (see the module docstring).

    Returns:
        The folders removed.
    """
    now = time.time() if now is None else now
    host, uid = socket.gethostname(), os.getuid()
    removed = []
    for root in roots() if places is None else places:
        try:
            entries = list(Path(root).glob(PREFIX + "*"))
        except OSError:
            continue
        for d in entries:
            try:
                st = d.lstat()
                if not d.is_dir() or d.is_symlink() or st.st_uid != uid:
                    continue
                try:
                    owner = json.loads((d / MARKER).read_text())
                except FileNotFoundError:
                    owner = None
                except (OSError, ValueError):
                    continue
            except OSError:
                continue
            if owner is None:
                gone = (Path(root) == SHM and _MKDTEMP_NAME.fullmatch(d.name)
                        is not None and (d / "ref").is_dir()
                        and now - _last_change(d) > UNMARKED_GRACE_S)
            elif not isinstance(owner, dict) or owner.get("host") != host:
                continue
            else:
                gone = not alive(owner)
            if gone:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
    return removed


def make_scratch(root: Path) -> Path:
    """A new scratch folder ``root/cutegen-XXXX`` owned by this process, after sweeping
    the ones dead processes left behind."""
    with contextlib.suppress(OSError):
        sweep_scratch()
    d = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    me = os.getpid()
    (d / MARKER).write_text(json.dumps({"host": socket.gethostname(), "pid": me,
                                        "start": start_time(me)}))
    return d
