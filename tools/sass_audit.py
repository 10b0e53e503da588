"""Compile each task file's first built-in candidate for sm_90a and list what its SASS says
(CPU only; needs nvidia-cutlass-dsl and nvdisasm, as the CLI's compile stage does).

    python tools/sass_audit.py FOLDER_OR_FILE [...] [--out DIR] [--jobs 1] [--timeout 400]
    python tools/sass_audit.py --read DIR       (the table again, from the stores in DIR)

For every task file: ``cutegen search FILE --compile-only --max-evals 1`` in a process of its
own (a store per task under ``--out``, the compiled artifacts beside it), then, per kernel of
the candidate, from the cubin and the SASS the compile stage kept: registers, stack frame,
local-memory loads / stores (spills), and the share of the kernel's global bytes moved by
accesses narrower than 128 bits (``profilers.sass.global_bytes``: each static LDG / STG
counted once). One line per task: ``ok`` with what stands out (a stack frame or local
memory, 128 registers or more, narrow accesses carrying a quarter of the bytes or more, a
kernel whose every global load waits for the one before it: ``loads_in_flight`` 1), or
the compile stage's verdict and message. What stands out is a lead for a person, not a fault:
a per-row scalar read, a one-off weight pack or an odd row length no wide access divides
are narrow by nature.

Used on KernelBench's level 1 and 2 task files (a local copy) at their upstream sizes, to find
kernels whose default configuration wastes lanes or bandwidth before any GPU time is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cutegen.profilers._cubin import parse_cubin
from cutegen.profilers._sass_text import parse_sass, summarize
from cutegen.profilers.sass import NARROW_SHARE, global_bytes, serial_loads

#: Registers per thread from which a kernel is listed (half the SM's threads at most).
MANY_REGISTERS = 128


def _task_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out += sorted(p.glob("*.py")) if p.is_dir() else [p]
    return out


def _compile(task: Path, out: Path, timeout: int) -> str:
    """Run the compile-only search of ``task`` into ``out``; the CLI's last lines."""
    db = out / f"{task.stem}.db"
    db.unlink(missing_ok=True)
    env = dict(os.environ, CUTE_DSL_ARCH=os.environ.get("CUTE_DSL_ARCH", "sm_90a"))
    cmd = [sys.executable, "-m", "cutegen", "search", str(task), "--compile-only",
           "--max-evals", "1", "--db", str(db), "--run", task.stem]
    try:
        done = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True,
                              timeout=timeout)
        return (done.stdout + done.stderr).strip().splitlines()[-1:][0] if (
            done.stdout or done.stderr) else ""
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"


def _kernel_notes(run_dir: Path, artifacts: dict) -> list[str]:
    notes: list[str] = []
    paths = [run_dir / rel for rel in artifacts.values() if (run_dir / rel).is_file()]
    kernels = {k.name: k for p in paths if p.suffix == ".sass"
               for k in parse_sass(p.read_text(errors="replace"))}
    for k in kernels.values():
        narrow, total = global_bytes(k)
        s = summarize((k,))
        if total and narrow / total >= NARROW_SHARE:
            notes.append(f"{_short(k.name)}: {narrow} of {total} B narrow "
                         f"(loads {s.ldg_min_bits}-{s.ldg_max_bits} bit, "
                         f"stores {s.stg_min_bits}-{s.stg_max_bits} bit)")
        if serial_loads(k):
            notes.append(f"{_short(k.name)}: {k.count('LDG')} loads, one in flight at a time")
        if s.local_loads + s.local_stores:
            notes.append(f"{_short(k.name)}: {s.local_loads} local loads, "
                         f"{s.local_stores} local stores")
    for p in paths:
        if p.suffix != ".cubin":
            continue
        for r in parse_cubin(p.read_bytes()):
            sass = kernels.get(r.name)
            mma = sass is not None and any(op.startswith("HGMMA") for op in sass.opcodes)
            # tensor-core consumers hold their accumulators in registers by design
            if (r.frame_bytes or 0) > 0 or ((r.registers or 0) >= MANY_REGISTERS and not mma):
                notes.append(f"{_short(r.name)}: {r.registers} registers, "
                             f"{r.frame_bytes} B stack")
    return notes


def _short(name: str) -> str:
    """The class part of a DSL kernel name (``..._candidate_<hash>GemmKernel_object_at...``)."""
    cut = name.split("_object_at_")[0]
    for marker in ("_candidate_", "cand_"):
        if marker in cut:
            cut = cut.split(marker, 1)[1]
            break
    return cut.lstrip("0123456789abcdef") or cut


def read(out: Path, stem: str) -> str:
    """The audit line of one task from its store under ``out``."""
    db = out / f"{stem}.db"
    if not db.is_file():
        return f"{stem}: no store"
    con = sqlite3.connect(db)
    try:
        row = con.execute("select verdict, evaluation_json from evaluations "
                          "order by id desc limit 1").fetchone()
        run = con.execute("select name from runs order by id desc limit 1").fetchone()
    except sqlite3.Error as e:
        return f"{stem}: unreadable store ({e})"
    finally:
        con.close()
    if row is None:
        return f"{stem}: no evaluation"
    verdict, blob = row
    ev = json.loads(blob)
    if verdict != "compiled":
        return f"{stem}: {verdict}: {ev.get('message', '')[:160]}"
    run_dir = out / (run[0] if run else stem)  # a run's files sit beside its store
    notes = _kernel_notes(run_dir, ev.get("artifacts", {}))
    return f"{stem}: ok" + ("; " + "; ".join(notes) if notes else "")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="task files or folders of them")
    ap.add_argument("--out", type=Path, default=Path("runs/sass_audit"))
    ap.add_argument("--jobs", type=int, default=1, help="compiles at once")
    ap.add_argument("--timeout", type=int, default=400, help="seconds per task")
    ap.add_argument("--read", action="store_true", help="only read the stores in --out")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    out = a.out.resolve()
    if a.read:
        stems = sorted(p.stem for p in out.glob("*.db"))
    else:
        files = _task_files(a.paths)
        if not files:
            ap.error("no task files given")

        def one(f: Path) -> str:
            _compile(f.resolve(), out, a.timeout)
            line = read(out, f.stem)
            print(line, flush=True)
            return line

        with ThreadPoolExecutor(max(1, a.jobs)) as pool:
            list(pool.map(one, files))
        return 0
    for stem in stems:
        print(read(out, stem))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
