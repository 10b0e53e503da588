"""Every KernelBench task's first built-in candidate compiled for sm_90a on the CPU, at its
main shape and its hidden shapes (no GPU; nothing is launched).

    CUTE_DSL_ARCH=sm_90a python tools/kb_compile.py KB_DIR [--levels 1,2] [--problems 45,46]
                                                    [--jobs 2] [--json OUT.json [--resume]]

KB_DIR is a KernelBench checkout's ``KernelBench`` folder (``level1/``, ``level2/``). For each
task: the built-in rewriter's first candidate (``family_proposals``), and the shapes the
evaluator verifies at (``refworker.shape_configs``: the main shape, and for a task without
VERIFY_SHAPES its first size name at 1 and at ``hidden_batch``), whose input shapes and dtypes
are read on the meta device. Each task's shapes are compiled in a child process
(``tests/families_tests/family_compile_driver.py``: the candidate's host code runs on
uninitialised CPU tensors, its kernels are compiled, registers / local memory / SASS memory
ops recorded, none launched), ``--jobs`` at a time. One line per task: the shapes compiled,
the kernels, any error's last line; the summary counts tasks refused (with the reason),
compiled at every shape, and failed. Regressions in what a user's KernelBench task compiles
to show here before any GPU run. A shape whose inputs exceed ``--max-gib`` of host memory is
skipped (said in its line): the host code may touch them.

A whole sweep takes ~40 minutes on two cores. With ``--json`` the rows are written after every
task (atomically); ``--resume`` keeps the rows already in that file and compiles only the
tasks it does not hold (and those whose row has an error), so a sweep stopped part-way goes
on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "families_tests" / "family_compile_driver.py"


def _number(path: Path) -> int:
    m = re.match(r"(\d+)", path.name)
    return int(m.group(1)) if m else 0


def _shapes(path: Path) -> list[tuple[str, list, list, str]]:
    """(label, init values, input specs, why skipped) for the main and hidden shapes of a task
    file. A hidden shape whose reference forward raises on the meta device is skipped, as the
    evaluator skips it (L1 100 at a batch of 127: its targets broadcast along the columns,
    so only a batch equal to the row length runs); the main shape never is."""
    import importlib.util

    import torch

    from cutegen.codegen.eval.refworker import shape_configs
    from cutegen.codegen.inputs import on_meta

    spec = importlib.util.spec_from_file_location(f"kb_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    configs, _ = shape_configs(mod, hidden=True)  # the evaluator's own choice
    out = []
    for cfg in configs:
        saved = {k: getattr(mod, k) for k in cfg}
        for k, v in cfg.items():
            setattr(mod, k, v)
        try:
            with on_meta(), torch.device("meta"):
                inputs = mod.get_inputs()
            init = mod.get_init_inputs()
            why = ""
            if cfg:
                try:
                    with torch.device("meta"), torch.no_grad():
                        mod.Model(*init)(*inputs)
                except Exception as e:  # noqa: BLE001 - the task's own forward, any error
                    why = f"reference raised {type(e).__name__}"
        finally:
            for k, v in saved.items():
                setattr(mod, k, v)
        specs = []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                specs.append({"shape": list(x.shape), "dtype": str(x.dtype).split(".")[-1]})
            else:
                specs.append({"value": x})
        label = ",".join(f"{k}={v}" for k, v in cfg.items()) or "main"
        out.append((label, list(init), specs, why))
    return out


def _gib(specs: list) -> float:
    import torch

    total = 0
    for s in specs:
        if "shape" in s:
            total += math.prod(s["shape"]) * torch.empty(
                0, dtype=getattr(torch, s["dtype"])).element_size()
    return total / 2**30


def one(path: Path, workdir: Path, max_gib: float) -> dict:
    """Compile the task's first candidate at each of its shapes; a row for the report."""
    from cutegen.codegen.families import family_proposals, recognition_for
    from cutegen.codegen.tasks import load_task_file

    row: dict = {"task": path.name, "shapes": 0, "compiled": 0, "kernels": 0, "errors": [],
                 "skipped": []}
    task = load_task_file(path)
    rec = recognition_for(task)
    if not rec.covered:
        row["refused"] = rec.not_covered.reason
        return row
    props = family_proposals(task)
    if not props:
        row["refused"] = "no proposal"
        return row
    cand = workdir / f"{path.stem}_cand.py"
    cand.write_text(props[0].candidate.code)
    cases = []
    for label, init, specs, why in _shapes(path):
        row["shapes"] += 1
        if why:
            row["skipped"].append(f"{label} ({why}; the evaluator skips it too)")
            continue
        if _gib(specs) > max_gib:
            row["skipped"].append(f"{label} ({_gib(specs):.1f} GiB of inputs)")
            continue
        cases.append({"file": str(cand), "init": init, "inputs": specs, "label": label})
    if not cases:
        return row
    cfile = workdir / f"{path.stem}_cases.json"
    cfile.write_text(json.dumps(cases))
    env = dict(os.environ, CUTE_DSL_ARCH=os.environ.get("CUTE_DSL_ARCH", "sm_90a"))
    res = subprocess.run([sys.executable, str(DRIVER), str(cfile)], capture_output=True,
                         text=True, env=env, timeout=1800)
    try:
        got = json.loads(res.stdout.strip().splitlines()[-1])["cases"]
    except (IndexError, ValueError, KeyError):
        row["errors"].append("driver: " + (res.stderr.strip().splitlines() or ["?"])[-1])
        return row
    for case, r in zip(cases, got, strict=True):
        if r["error"]:
            row["errors"].append(f"{case['label']}: {r['error'].strip().splitlines()[-1]}")
            continue
        row["compiled"] += 1
        kernels = [k for c in r["compiles"] for k in c["kernels"].values()]
        row["kernels"] += len(kernels)
        frames = [k.get("frame", 0) for k in kernels if k.get("frame", 0)]
        if frames:
            row.setdefault("local_memory", []).append(f"{case['label']}: {max(frames)} B")
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kb_dir", type=Path, help="a KernelBench folder holding level1/, level2/")
    ap.add_argument("--levels", default="1,2")
    ap.add_argument("--problems", default="", help="problem numbers (all when empty)")
    ap.add_argument("--jobs", type=int, default=2, help="tasks compiled at once")
    ap.add_argument("--max-gib", type=float, default=12.0,
                    help="skip a shape whose inputs take more host memory than this")
    ap.add_argument("--json", type=Path,
                    help="write the rows here too (rewritten after every task)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the rows already in --json; compile only the other tasks")
    args = ap.parse_args(argv)
    if args.resume and not args.json:
        ap.error("--resume needs --json (the file whose rows are kept)")
    wanted = {int(p) for p in args.problems.split(",") if p.strip()}
    paths = []
    for level in args.levels.split(","):
        folder = args.kb_dir / f"level{level.strip()}"
        if not folder.is_dir():
            raise SystemExit(f"no {folder}")
        paths += [p for p in sorted(folder.glob("*.py"), key=_number)
                  if not wanted or _number(p) in wanted]
    rows = _kept_rows(args.json) if args.resume else []
    if args.resume:
        # a row with an error is compiled again: a sweep stopped mid-task may have left one
        # (its child killed), and the error may be what the user has fixed since
        retried = sum(bool(r.get("errors")) for r in rows)
        rows = [r for r in rows if not r.get("errors")]
        done = {(r.get("level"), r.get("task")) for r in rows}
        before = len(paths)
        paths = [p for p in paths if (p.parent.name, p.name) not in done]
        print(f"resuming: {before - len(paths)} tasks kept from {args.json} ({retried} with an "
              f"error compiled again), {len(paths)} to compile", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        def work(p: Path) -> dict:
            try:
                r = one(p, Path(tmp), args.max_gib)
            except Exception as e:  # noqa: BLE001 - a task that cannot be read is a row too
                r = {"task": p.name, "shapes": 0, "compiled": 0, "kernels": 0,
                     "errors": [f"{type(e).__name__}: {e}"], "skipped": []}
            r["level"] = p.parent.name
            return r

        for r in pool.map(work, paths):
            rows.append(r)
            what = (f"refused: {r['refused']}" if "refused" in r else
                    f"{r['compiled']}/{r['shapes']} shapes, {r['kernels']} kernels")
            extra = "; ".join(r["errors"] + [f"skipped {s}" for s in r["skipped"]]
                              + r.get("local_memory", []))
            print(f"{r['level']}/{r['task']}: {what}{' | ' + extra if extra else ''}",
                  flush=True)
            if args.json:
                _write_rows(args.json, rows)
    refused = sum("refused" in r for r in rows)
    failed = sum(bool(r["errors"]) for r in rows)
    whole = sum(not r["errors"] and "refused" not in r and r["compiled"] == r["shapes"]
                for r in rows)
    print(f"{len(rows)} tasks: {whole} compiled at every shape, {failed} with an error, "
          f"{refused} refused, {len(rows) - whole - failed - refused} with shapes skipped")
    if args.json:
        _write_rows(args.json, rows)
    return 1 if failed else 0


def _kept_rows(path: Path) -> list[dict]:
    """The rows of an earlier run's ``--json`` file (none where it does not exist yet)."""
    if not path.exists():
        return []
    try:
        rows = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path} is not a kb_compile --json file ({e}); move it away or "
                         "drop --resume") from e
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise SystemExit(f"{path} is not a kb_compile --json file (a list of rows)")
    return rows


def _write_rows(path: Path, rows: list[dict]) -> None:
    """All rows so far, replacing ``path`` in one step (a sweep killed mid-write keeps
    the previous file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(rows, indent=1))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
