"""Content-addressed files under a run folder, written so a crash never leaves half a file.

A blob is written to a temporary name in its final folder, flushed and fsynced, renamed
over the final name with ``os.replace`` (atomic on POSIX), and the folder is fsynced so the
rename itself survives a power cut. The database row that names a blob is written only
after all that returned, so a row never points at a missing or partial file; a crash in
between leaves at most an orphan file, which is harmless because names are content hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path, PurePosixPath

from cutegen.codegen.atomic import TMP_SUFFIX, write_atomic
from cutegen.errors import StorageError


class BlobStore:
    """Blobs of one run folder, addressed ``<folder>/<sha256><suffix>``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, folder: str, data: bytes, *, suffix: str = "") -> str:
        """Store ``data``; returns its path relative to the run folder.

        Raises:
            StorageError: the file cannot be written (disk full, read-only, ...).
        """
        sha = hashlib.sha256(data).hexdigest()
        rel = f"{folder}/{sha}{suffix}"
        self._check_rel(rel)
        path = self.root / rel
        try:
            if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == sha:
                return rel
            write_atomic(path, data)
        except OSError as e:
            raise StorageError(f"cannot write {path}: {e.strerror or e}") from e
        return rel

    def get(self, rel: str) -> bytes:
        """Read a blob and check it against its address.

        Raises:
            StorageError: missing, unreadable, or its content does not match its name.
        """
        self._check_rel(rel)
        path = self.root / rel
        try:
            data = path.read_bytes()
        except OSError as e:
            raise StorageError(f"cannot read {path}: {e.strerror or e}") from e
        stem = PurePosixPath(rel).name.split(".")[0]
        if len(stem) == 64 and hashlib.sha256(data).hexdigest() != stem:
            raise StorageError(f"{path} is damaged: its content does not match its hash")
        return data

    def sweep_temporaries(self) -> int:
        """Remove temporary files a crash left behind. Returns how many were removed."""
        n = 0
        if not self.root.is_dir():
            return 0
        for p in self.root.rglob(f".*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                p.unlink()
                n += 1
        return n

    @staticmethod
    def _check_rel(rel: str) -> None:
        p = PurePosixPath(rel)
        if p.is_absolute() or ".." in p.parts or not p.parts:
            raise StorageError(f"not a path inside the run folder: {rel!r}")
