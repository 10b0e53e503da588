"""Compile results cached by source hash + DSL version + arch + options.

A cache entry records whether the candidate compiled, the error text if not, its kernel
names, the compile time and its artifacts (PTX / cubin / SASS files). A known compile
failure never reaches a worker again; compile-only re-evaluations are answered from the
cache; GPU evaluations still compile in their worker (the DSL must build the launchable
function) but take their artifacts from here. Keys include the DSL version and the target,
so a stale binary can never masquerade as a new kernel (RELIABILITY.md A13).

Every entry with a cubin keeps its SASS: the DSL writes a listing only when it compiles in
compile-only mode with a new enough nvdisasm (a GPU worker's compile keeps PTX and cubin),
so a cubin that comes without one is disassembled (``nvdisasm -c``) when the entry is
stored, and when an older entry is read. A compile served from the cache then hands the
sass profiler and the user the same listing as a fresh compile-only one. Without nvdisasm
nothing is added (the profiler says so when it runs).
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

from cutegen.profilers import run_tool
from cutegen.profilers.sass import find_nvdisasm


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


def disassemble_cubin(cubin: Path) -> str | None:
    """The SASS listing of a cubin from ``nvdisasm -c``, or None (no nvdisasm, or it failed)."""
    tool = find_nvdisasm()
    if tool is None:
        return None
    run = run_tool([tool, "-c", str(cubin)], timeout_s=120.0)
    return run.stdout if run.ok and run.stdout.strip() else None


def _sass_name(name: str) -> str:
    """The listing's name for an artifact (``k.sm_90a.cubin`` -> ``k.sass``, as the DSL
    names its own)."""
    return name.split(".", 1)[0] + ".sass"


def _lacking_sass(names: list[str]) -> list[str]:
    """The cubins among ``names`` without a listing beside them."""
    return [n for n in names if n.endswith(".cubin") and _sass_name(n) not in names]


def _add_sass(folder: Path, names: list[str]) -> list[str]:
    """Disassemble the cubins in ``folder`` that have no listing; the names added."""
    added: list[str] = []
    for name in _lacking_sass(names):
        sass = _sass_name(name)
        if sass in added:
            continue
        text = disassemble_cubin(folder / name)
        if text is None:
            continue
        tmp = folder / f"{sass}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / sass)
        added.append(sass)
    return added


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cutegen" / "compile"


class CompileCache:
    """A folder of entries ``<key>/entry.json`` plus artifact files, written atomically.

    Args:
        root: the folder.
        sass: give every stored cubin its SASS listing (see the module docstring).
    """

    def __init__(self, root: Path, *, sass: bool = True) -> None:
        self.root = Path(root)
        self.sass = sass

    def get(self, key: str) -> CompileEntry | None:
        p = self.root / key / "entry.json"
        try:
            d = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        entry = CompileEntry(ok=bool(d["ok"]), error=d.get("error", ""),
                             kernels=tuple(d.get("kernels", ())),
                             seconds=float(d.get("seconds", 0)), files=tuple(d.get("files", ())))
        if (self.sass and entry.ok and not d.get("sass_tried")
                and _lacking_sass(list(entry.files))):
            # an entry stored before the cache kept SASS: tried once, whatever comes of it
            try:
                added = _add_sass(p.parent, list(entry.files))
                entry = CompileEntry(entry.ok, entry.error, entry.kernels, entry.seconds,
                                     (*entry.files, *added))
                d.update(files=list(entry.files), sass_tried=True)
                tmp = p.with_name(f"entry.json.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(d))
                os.replace(tmp, p)
            except OSError:
                pass
        return entry

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
            if self.sass and entry.ok:
                names += _add_sass(tmp, names)
                d["sass_tried"] = True
            d["files"] = names
            (tmp / "entry.json").write_text(json.dumps(d))
            final = self.root / key
            if final.exists():
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
