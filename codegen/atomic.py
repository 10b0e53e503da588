"""Files written so that a crash never leaves half of one: a temporary name in the final
folder, flushed and fsynced, renamed over the final name with ``os.replace`` (atomic on
POSIX), then the folder fsynced so the rename itself survives a power cut. The store's blobs
(``cutegen.search.storage``) and the task variants (``cutegen.codegen.variants``) are written
this way; it sits with the records so that both can.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: The suffix of a temporary file before its rename (a crash may leave one: an orphan).
TMP_SUFFIX = ".tmp"


def fsync_dir(path: Path) -> None:
    """fsync a directory so renames in it are durable (a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via temp file + fsync + ``os.replace`` + folder fsync.

    Raises:
        OSError: the write failed (the temporary file is removed; ``path`` is untouched).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp's 0600 would outlive the rename
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _umask() -> int:
    """The process's umask (read by setting it, so set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
