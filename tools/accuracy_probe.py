"""How close a built-in candidate is to float64, next to the task's own reference (GPU).

    python tools/accuracy_probe.py TASK [--set KEY=VALUE ...] [--size NAME=VALUE ...]
                                        [--dist randn,large,...] [--seeds 2]

A development probe, not the evaluator (which runs candidates in a worker it can kill): the
task's first built-in candidate is rendered, imported here with ``--set`` TUNABLES, and run
at the task's shape (module-level sizes changed by ``--size``, e.g. ``batch_size=2``) on
inputs of each distribution of :data:`cutegen.codegen.inputs.DISTRIBUTIONS`; the task's
Model runs the same inputs in float64 (the truth) and in its own dtype (TF32 off, as in the
evaluator's reference worker). Per distribution it
prints the candidate's rmse and max error against float64, the same for the task's own
reference, their ratio (the evaluator's fallback admits a candidate whose elements miss
atol + rtol |ref| only while its rmse is within ``K_RMSE`` times the reference's, or
``FP32_STEPS`` fp32 rounding steps of the truth's rms where that is more), and the
verdict :func:`cutegen.codegen.numerics.compare` gives. Use it to see which knob keeps a
kernel within the evaluator's bound on every distribution, e.g. 3xTF32's ``promote``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from pathlib import Path

# tools/ is the script's folder: its sibling's loader and KEY=VALUE parser
from host_overhead import _load, _parse_sets


def probe(task_path: str, sets: dict, sizes: dict, dists: list[str], seeds: int) -> list[dict]:
    import torch

    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.inputs import _draw
    from cutegen.codegen.numerics import K_RMSE, compare, fallback_bounds
    from cutegen.codegen.tasks import load_bundled_task, load_task_file

    task = (load_task_file(task_path, name=Path(task_path).stem) if task_path.endswith(".py")
            else load_bundled_task(task_path))
    props = family_proposals(task)
    if not props:
        raise SystemExit(f"{task_path}: no built-in candidate")
    tmp = Path(tempfile.mkdtemp(prefix="accuracy_probe_"))
    cand_path = tmp / "cand.py"
    cand_path.write_text(props[0].candidate.code)
    tmod = _load("probe_task", Path(task.path))
    cmod = _load("probe_cand", cand_path)
    for key, val in sizes.items():
        for mod in (tmod, cmod):
            if hasattr(mod, key):
                setattr(mod, key, val)
    for key, val in sets.items():
        if key not in cmod.TUNABLES:
            raise SystemExit(f"{key} is not one of the TUNABLES ({sorted(cmod.TUNABLES)})")
        cmod.TUNABLES[key] = val
    # the task's own reference as the evaluator's reference worker runs it: no TF32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    ref = tmod.Model(*tmod.get_init_inputs()).cuda().eval()
    new = cmod.ModelNew(*tmod.get_init_inputs()).cuda().eval()
    new.load_state_dict(ref.state_dict())
    ref64 = copy.deepcopy(ref).double()
    shapes = [(tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else (None, t)
              for t in tmod.get_inputs()]
    rows = []
    for dist in dists:
        for seed in range(seeds):
            gen = torch.Generator(device="cuda").manual_seed(seed)
            inputs = [_draw(s, dist, gen, "cuda").to(d) if s is not None else d
                      for s, d in shapes]
            with torch.no_grad():
                got = new(*inputs)
                native = ref(*inputs)
                truth = ref64(*[t.double() if isinstance(t, torch.Tensor) else t
                                for t in inputs])
            c = compare([got], [truth], [native])
            # the comparison's rmse bound, in the task's own reference's rmse
            # (in float64: an argmax / argmin truth is int64, whose mean torch refuses)
            fin = truth[torch.isfinite(truth)].double()
            rms = float(fin.pow(2).mean().sqrt()) if fin.numel() else 0.0
            rmse_bound = fallback_bounds(got.dtype, c.ref_rmse, 0.0, rms, 0.0)[0]
            bound = rmse_bound / c.ref_rmse if c.ref_rmse else K_RMSE
            row = {"dist": dist, "seed": seed, "passed": c.passed, "rmse": c.rmse,
                   "ref_rmse": c.ref_rmse, "max_abs": c.max_abs_err,
                   "ratio": c.rmse / c.ref_rmse if c.ref_rmse else None, "bound": bound,
                   "reason": c.reason[:160]}
            rows.append(row)
            print(f"{dist:<12} seed {seed}  {'pass' if c.passed else 'FAIL'}  rmse "
                  f"{c.rmse:.3e} / reference's {c.ref_rmse:.3e} = "
                  f"{(row['ratio'] or 0):.2f} (bound {bound:.2f})  max abs {c.max_abs_err:.3e}"
                  + (f"  {c.reason[:100]}" if not c.passed else ""), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    from cutegen.codegen.inputs import DISTRIBUTIONS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task", help="a bundled task name or a task file (.py)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override one of the candidate's TUNABLES (repeatable)")
    ap.add_argument("--size", action="append", default=[], metavar="NAME=VALUE",
                    help="override a module-level size of the task (repeatable)")
    ap.add_argument("--dist", default=",".join(DISTRIBUTIONS),
                    help="input distributions, comma-separated")
    ap.add_argument("--seeds", type=int, default=1, help="inputs drawn per distribution")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("accuracy_probe.py needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = probe(args.task, _parse_sets(args.set), _parse_sets(args.size),
                 [d for d in args.dist.split(",") if d], args.seeds)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
