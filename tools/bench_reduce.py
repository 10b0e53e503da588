"""Benchmark issue 19's kernel kinds (reductions over any dims, norms) on their bundled tasks
(needs a GPU): the coverage table.

    python tools/bench_reduce.py [--strategies default|all] [--only sum,norm] [--runs 100]
                                      [--calibrate] [--out runs/bench_reduce]

Each task's family candidates are rendered and evaluated by the search's own evaluator, as
``bench_families.py`` does (verification on the main and hidden shapes, ``--runs`` timed
calls with the L2 flushed, eager and torch.compile timed the same way in the trusted
worker). One row per task: the fastest correct strategy, its median time, eager,
torch.compile, the speedups, and the fraction of the copy bandwidth (minimal bytes / time /
B_copy). Then the issue's targets: >= 85% of B_copy on the memory-bound kinds, and the
geometric-mean speedup over torch.compile across all of them (failures counted as 1.0x).
Batch norm with batch statistics, the Frobenius normalisation and batch centring must read
their input twice (statistics first): their floor is 2/3 of the copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

from cutegen.benchmarks.bench_families import _evaluate, _line

TASKS = ("sum_dim1_fp32", "mean_dim1_bf16", "amax_dim0_fp32", "argmin_dim1_bf16",
         "var_dim1_fp32", "std_rows_bf16", "sum_dims02_fp32", "mean_all_fp32",
         "hinge_loss_fp32", "rmsnorm_channels_fp32", "rmsnorm_channels_bf16",
         "l2norm_rows_fp32", "l1norm_rows_bf16", "normalize_channels_fp32", "group_norm_bf16",
         "instance_norm_fp32", "batch_norm_fp32", "batch_norm_eval_bf16", "frobenius_norm_fp32",
         "batch_center_fp32", "smooth_l1_loss_fp32", "kl_div_bf16", "selu_bf16",
         "masked_scale_fp32", "max_pool2d_fp32", "max_pool2d_dilated_bf16", "avg_pool2d_fp32",
         "avg_pool1d_fp32", "max_pool1d_bf16", "max_pool3d_fp32", "avg_pool3d_bf16",
         "global_avg_pool_bf16")
#: Kinds whose floor is below the copy bandwidth (they must read their input twice: the
#: statistic over the whole batch or tensor comes before any output).
TWO_READS = ("batch_norm_fp32", "frobenius_norm_fp32", "batch_center_fp32")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategies", choices=("all", "default"), default="default")
    ap.add_argument("--only", default="", help="comma-separated substrings of the task names")
    ap.add_argument("--runs", type=int, default=100, help="timed calls per candidate (>= 30)")
    ap.add_argument("--calibrate", action="store_true",
                    help="measure the copy bandwidth first (torch.clone of 1 GB)")
    ap.add_argument("--out", default="", help="folder for results.json and the candidates")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_reduce_"))
    out.mkdir(parents=True, exist_ok=True)
    ceilings, bw = None, 4.3e12
    if args.calibrate:
        from cutegen.codegen._ceilings import measure_ceilings

        measured = measure_ceilings()
        ceilings, bw = measured.ceilings(), measured.copy_gbs * 1e9
    print(f"# issue 19 kinds; B_copy {bw / 1e12:.2f} TB/s"
          f"{' (measured)' if args.calibrate else ' (PERFORMANCE.md)'}; {args.runs} timed calls,"
          f" L2 flushed per call; results in {out}", flush=True)
    results = []
    for n in TASKS:
        if any(part in n for part in args.only.split(",")):
            results.append(_evaluate(n, args.strategies, args.runs, ceilings, out))
            (out / "results.json").write_text(json.dumps(results, indent=1))
    header = (f"{'task':22} {'strategy':10} {'us':>9} {'eager us':>9} {'compile':>9} "
              f"{'vs eager':>8} {'vs comp':>8} {'of bw':>6}  other strategies (us)")
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        print(_line(r))
    logs, misses = [], []
    for r in results:
        b = r["best"]
        ok = b is not None and b["compile_us"]
        logs.append(math.log(b["compile_us"] / b["us"]) if ok else 0.0)
        floor = 2 / 3 * 0.85 if r["task"] in TWO_READS else 0.85
        if b is None or not b["bound_us"] or b["bound_us"] / b["us"] < floor:
            misses.append(r["task"])
    if logs:
        gm = math.exp(sum(logs) / len(logs))
        print(f"\ngeomean speedup over torch.compile ({len(logs)} tasks, fp32 and bf16, failures "
              f"as 1.0x): {gm:.2f}x (target >= 1.2x)")
    print("below 85% of B_copy (batch norm: of its two-read floor): "
          + (", ".join(misses) if misses else "none"))
    return 0 if all(r["best"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
