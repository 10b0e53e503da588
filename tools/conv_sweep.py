"""Time a bundled task's built-in candidate under several knob settings, side by side (GPU).

    python tools/conv_sweep.py conv3d_bf16 "tile_k=64" "stages=4" [--task T ...] [--runs 30]
    python tools/conv_sweep.py KernelBench/level1/65_conv_transposed_2D....py block_stages=True
    python tools/conv_sweep.py conv3d_bf16 --once   (one warm call in an NVTX range "prof",
                                                     for ``ncu --nvtx --nvtx-include prof/``)

A tool for choosing knob defaults, not the evaluator: it renders the family's candidate for
each setting (the default first; a setting is ``knob=value[,knob=value]``), imports it here
(our own rendered code), checks the output against the task's reference (bf16 / fp16 within
2e-2, fp32 within 1e-4 relative to the largest magnitude: a screen, not the evaluator's
comparison; 1e-3 passed 3xTF32 kernels whose lo parts were lost), both models in the mode
the task builds them in (a BatchNorm in training uses its batch's statistics, as the
evaluator's reference does), and times ``--runs`` calls under the
evaluator's protocol (CUDA events, the L2 flushed by a 256 MiB write and a GPU-side sleep before
each, so the host's launch path is not timed); eager PyTorch on the same inputs is the last row. Prints one table per task; ``--json`` writes the rows. A setting that
crashes on the GPU (an illegal address) leaves the CUDA context unusable, so the settings
after it fail too: run a suspect one last, or alone.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "families_tests"))


def _settings(args: list[str]) -> list[tuple[str, tuple[tuple[str, object], ...]]]:
    out: list[tuple[str, tuple[tuple[str, object], ...]]] = [("default", ())]
    for a in args:
        pairs = []
        for kv in a.split(","):
            k, _, v = kv.partition("=")
            try:
                val = ast.literal_eval(v)
            except (ValueError, SyntaxError):
                val = v
            pairs.append((k.strip(), val))
        out.append((a, tuple(pairs)))
    return out


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(fn, runs: int, timer) -> float:
    """Median µs of ``runs`` calls under the evaluator's timing protocol (``timer``: a
    ``cutegen.codegen._timing.Timer``: L2 flushed, a GPU-side sleep so the call is queued
    before its start event; a plain event pair also timed the Python launch path of calls
    shorter than the flush)."""
    return statistics.median(timer.time_calls(fn, warmup=1, runs=runs))


def sweep(task: str, settings, runs: int, once: bool) -> list[dict]:
    import _famdata as fd
    import torch
    tag = Path(task).stem.replace(".", "_") if task.endswith(".py") else task
    tmod = _load(fd.task_path(task), f"task_{tag}")
    torch.manual_seed(0)
    ref = tmod.Model(*tmod.get_init_inputs()).cuda()  # the task's own mode, as the evaluator
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in tmod.get_inputs()]
    with torch.no_grad():
        want = ref(*inputs).float()
    tol = 1e-4 if want.dtype == torch.float32 and inputs[0].dtype == torch.float32 else 2e-2
    from cutegen.codegen._timing import Timer

    timer = Timer(flush_mb=256)
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="conv_sweep_"))
    for label, extra in settings:
        src = fd.rendered(task, None, True, extra)
        path = tmp / f"{tag}_{len(rows)}.py"
        path.write_text(src)
        row = {"task": task, "setting": label}
        try:
            cmod = _load(path, f"cand_{tag}_{len(rows)}")
            model = cmod.ModelNew(*tmod.get_init_inputs()).cuda()
            model.load_state_dict(ref.state_dict())
            with torch.no_grad():
                got = model(*inputs).float()
                torch.cuda.synchronize()
                err = ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
                row["rel_err"] = err
                row["ok"] = bool(err <= tol)
                if once:
                    torch.cuda.nvtx.range_push("prof")
                    model(*inputs)
                    torch.cuda.synchronize()
                    torch.cuda.nvtx.range_pop()
                else:
                    row["us"] = _time(functools.partial(model, *inputs), runs, timer)
        except Exception as e:  # a setting that does not compile or run: say so, go on
            row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    if not once:
        with torch.no_grad():
            rows.append({"task": task, "setting": "eager (torch)",
                         "us": _time(lambda: ref(*inputs), runs, timer), "ok": True})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("settings", nargs="*", help="knob=value[,knob=value] per candidate")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--once", action="store_true", help="one call per setting, in NVTX 'prof'")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    rows = sweep(a.task, _settings(a.settings), a.runs, a.once)
    if not a.once:
        base = rows[0].get("us")
        print(f"\n{a.task}")
        print(f"{'setting':<34} {'us':>10} {'vs default':>10}  ok")
        for r in rows:
            us = r.get("us")
            rel = f"{base / us:.2f}x" if us and base else "-"
            print(f"{r['setting']:<34} {us if us is None else round(us, 1)!s:>10} {rel:>10}  "
                  f"{r.get('ok', r.get('error', ''))}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
