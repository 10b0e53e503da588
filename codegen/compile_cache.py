"""Compile results cached by source hash + DSL version + arch + options.

A cache entry records whether the candidate compiled, the error text if not, its kernel
names, the compile time and its artifacts (PTX / cubin / SASS files). A known compile
failure never reaches a worker again; compile-only re-evaluations are answered from the
cache; GPU evaluations still compile in their worker (the DSL must build the launchable
function) but take their artifacts from here. Keys include the DSL version and the target,
so a stale binary can never masquerade as a new kernel (RELIABILITY.md A13).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class CompileEntry:
    ok: bool
    error: str = ""
    kernels: tuple[str, ...] = ()
    seconds: float = 0.0
    files: tuple[str, ...] = field(default_factory=tuple)  # names inside the entry folder


def cache_key(source_sha256: str, *, dsl_version: str, arch: str, options: dict[str, Any]) -> str:
    blob = json.dumps({"src": source_sha256, "dsl": dsl_version, "arch": arch,
                       "opts": options}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cutegen" / "compile"


class CompileCache:
    """A folder of entries ``<key>/entry.json`` plus artifact files, written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def get(self, key: str) -> CompileEntry | None:
        p = self.root / key / "entry.json"
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        return CompileEntry(ok=bool(d["ok"]), error=d.get("error", ""),
                            kernels=tuple(d.get("kernels", ())), seconds=float(d.get("seconds", 0)),
                            files=tuple(d.get("files", ())))

    def path(self, key: str, name: str) -> Path:
        return self.root / key / name

    def put(self, key: str, entry: CompileEntry, files: dict[str, Path] | None = None) -> None:
        """Store an entry (and copies of ``files`` by name); an existing entry is replaced whole."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=self.root))
        try:
            names = []
            for name, src in (files or {}).items():
                shutil.copyfile(src, tmp / name)
                names.append(name)
            d = asdict(entry)
            d["files"] = names
            (tmp / "entry.json").write_text(json.dumps(d))
            final = self.root / key
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
