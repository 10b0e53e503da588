"""How fast the evaluator is, stage by stage (needs a GPU): the two figures issue 16 asks for.

    python tools/eval_speed.py [--small TASK,...] [--long TASK] [--repeat N] [--json F]

* **Large outputs**: one evaluation of the built-in family's first candidate for ``--long``
  (default ``softmax_393k_fp32``: 4096 rows of 393,216 fp32 values, 6.4 GB of outputs per
  call), every stage included: worker start, import, compile, the verification calls on
  every shape and distribution, the timed calls and the comparisons on the GPU. Printed
  with the reference worker's GPU memory.
* **Small kernels**: ``--repeat`` evaluations per ``--small`` task, through one evaluator
  (its reference worker and baselines are set up once, as in a search), reported as
  evaluations per minute of wall time.

Every evaluation prints its verdict, its time and ``stage_seconds``; one table per figure.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _evaluate_many(task_name: str, repeat: int, out: Path) -> list[dict]:
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_bundled_task

    task = load_bundled_task(task_name)
    props = family_proposals(task)
    rows = []
    with LocalEvaluator(task, EvalOptions(), run_dir=out / task_name) as ev:
        t_setup = time.monotonic()
        ev.baselines()  # once per task, as in a search (cached in the store)
        setup_s = time.monotonic() - t_setup
        for i in range(repeat):
            p = props[i % len(props)]
            t0 = time.monotonic()
            e = ev.evaluate(CandidateSource(p.candidate.code, f"eval_speed:{i}"))
            wall = time.monotonic() - t0
            rows.append({"task": task_name, "i": i, "strategy": p.move.params.get("strategy"),
                         "verdict": e.verdict.value, "message": e.message[:160],
                         "us": e.timing.median_us if e.timing else None,
                         "eager_us": e.eager.median_us if e.eager else None,
                         "wall_s": round(wall, 2), "stages": dict(e.stage_seconds),
                         "details": [d for d in e.details if "GPU memory" in d or "first timed" in d],
                         "setup_s": round(setup_s, 1)})
            r = rows[-1]
            print(f"  {task_name} #{i} {r['strategy']:10} {r['verdict']:10} "
                  f"{(r['us'] or float('nan')):10.1f} us  {wall:6.1f} s  "
                  + " ".join(f"{k}={v:.1f}" for k, v in sorted(r["stages"].items()))
                  + (f"  | {r['message']}" if r["verdict"] != "correct" else ""), flush=True)
            for d in r["details"]:
                print(f"      {d}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", default="softmax_bf16,relu_bf16,rmsnorm_fp32")
    ap.add_argument("--long", default="softmax_393k_fp32")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    out = Path(tempfile.mkdtemp(prefix="eval_speed_"))
    result: dict = {"small": [], "long": []}
    if args.long:
        print(f"# large outputs: {args.long}, one evaluation, all stages", flush=True)
        result["long"] = _evaluate_many(args.long, 1, out)
    small = [s for s in args.small.split(",") if s]
    for name in small:
        print(f"# small kernels: {name}, {args.repeat} evaluations through one evaluator",
              flush=True)
        result["small"] += _evaluate_many(name, args.repeat, out)
    print("\n| figure | task | evaluations | wall per evaluation | evaluations / min | verdicts |")
    print("|---|---|---|---|---|---|")
    for r in result["long"]:
        print(f"| large outputs | {r['task']} | 1 | {r['wall_s']:.1f} s | "
              f"{60 / r['wall_s']:.1f} | {r['verdict']} |")
    for name in small:
        rs = [r for r in result["small"] if r["task"] == name]
        if rs:
            walls = [r["wall_s"] for r in rs]
            verdicts = ",".join(sorted({r["verdict"] for r in rs}))
            print(f"| small kernels | {name} | {len(rs)} | {statistics.median(walls):.1f} s "
                  f"(median) | {60 * len(rs) / sum(walls):.1f} | {verdicts} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
