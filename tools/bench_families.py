"""Benchmark the built-in kernel families on the bundled memory-bound tasks (needs a GPU).

    python tools/bench_families.py [--set rows|reduce] [--strategies all|default]
                                   [--only softmax,layernorm] [--runs 100] [--calibrate]
                                   [--out runs/bench_families]

For each bundled task a family covers (softmax, log-softmax, layer-norm, RMSNorm,
cross-entropy, sum, cumsum, GELU·scale+bias; fp32 and bf16), the family's candidates are
rendered (every strategy, or only the default) and evaluated by the search's own evaluator
(``LocalEvaluator``: verification on the main and hidden shapes, then ``--runs`` timed calls
with the L2 flushed, eager and torch.compile timed the same way in the trusted worker).
One table row per task: the fastest correct strategy, its median time, eager, torch.compile,
the speedups, and the fraction of the copy bandwidth (minimal bytes / time / B_copy, with
B_copy 4.3 TB/s or, with ``--calibrate``, measured by ``torch.clone`` of 1 GB first). Then
the targets of issue 4: ≥ 85% of B_copy for softmax, log-softmax, layer-norm, RMSNorm and
cross-entropy, and the geometric-mean speedup over torch.compile (≥ 1.2x) across softmax,
log-softmax, cross-entropy and layer-norm (failures counted as 1.0x and listed). Every
evaluation is also written to ``--out``/results.json with all candidates' times.

``--set reduce`` takes issue 19's kinds instead (reductions over any dims, norms, losses,
pooling): the target is >= 85% of B_copy on every one of them, and the geomean is over all
of them. Batch norm with batch statistics, the Frobenius normalisation and batch centring
must read their input twice (statistics first): their floor is 2/3 of that.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

TASKS = ("softmax_fp32", "softmax_bf16", "softmax_long_bf16", "log_softmax_fp32",
         "log_softmax_bf16", "layernorm_fp32", "layernorm_bf16", "rmsnorm_fp32", "rmsnorm_bf16",
         "cross_entropy_fp32", "cross_entropy_bf16", "sum_rows_fp32", "sum_rows_bf16",
         "cumsum_fp32", "cumsum_bf16", "gelu_scale_bias_fp32", "gelu_scale_bias_bf16")
#: Ops with a bandwidth target (fraction of B_copy) and the ones in the speedup geomean.
BANDWIDTH_TARGET = ("softmax", "log_softmax", "layernorm", "rmsnorm", "cross_entropy")
GEOMEAN_OPS = ("softmax", "log_softmax", "cross_entropy", "layernorm")
#: Issue 19's kinds (``--set reduce``): every one has a bandwidth target and is in the geomean.
REDUCE_TASKS = (
    "sum_dim1_fp32", "mean_dim1_bf16", "amax_dim0_fp32", "argmin_dim1_bf16", "var_dim1_fp32",
    "std_rows_bf16", "sum_dims02_fp32", "mean_all_fp32", "hinge_loss_fp32",
    "rmsnorm_channels_fp32", "rmsnorm_channels_bf16", "l2norm_rows_fp32", "l1norm_rows_bf16",
    "normalize_channels_fp32", "group_norm_bf16", "instance_norm_fp32", "batch_norm_fp32",
    "batch_norm_eval_bf16", "frobenius_norm_fp32", "batch_center_fp32", "smooth_l1_loss_fp32",
    "kl_div_bf16", "selu_bf16", "masked_scale_fp32", "max_pool2d_fp32",
    "max_pool2d_dilated_bf16", "avg_pool2d_fp32", "avg_pool2d_wide_fp32", "avg_pool1d_fp32",
    "max_pool1d_bf16",
    "max_pool3d_fp32", "avg_pool3d_bf16", "global_avg_pool_bf16", "cumsum_exclusive_fp32",
    "cumsum_exclusive_cut_fp32", "cumsum_exclusive_cat_bf16",
    "matvec_fp32", "cosine_loss_fp32", "triplet_loss_fp32")
#: Kinds that must read their input twice: their floor is 2/3 of the bandwidth target.
TWO_READS = ("batch_norm_fp32", "frobenius_norm_fp32", "batch_center_fp32")


def _op(task: str) -> str:
    return task.rsplit("_", 1)[0].replace("_long", "")


def _targets(task: str, kind: str) -> tuple[bool, float | None]:
    """(in the geomean, bandwidth floor or None) of a task of set ``kind``."""
    if kind == "reduce":
        return True, 2 / 3 * 0.85 if task in TWO_READS else 0.85
    op = _op(task)
    return op in GEOMEAN_OPS, 0.85 if op in BANDWIDTH_TARGET else None


def _evaluate(name: str, strategies: str, runs: int, ceilings, out: Path) -> dict:
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.evaluation import Verdict
    from cutegen.codegen.families.moves import family_proposals
    from cutegen.codegen.tasks import load_bundled_task

    task = load_bundled_task(name)
    props = family_proposals(task)
    if strategies == "default":
        props = props[:1]
    kw = {"ceilings": ceilings} if ceilings is not None else {}
    rows = []
    with LocalEvaluator(task, EvalOptions(bench_runs=runs), run_dir=out / "run", **kw) as ev:
        for p in props:
            t0 = time.monotonic()
            e = ev.evaluate(CandidateSource(p.candidate.code, p.candidate.origin))
            (out / "candidates").mkdir(parents=True, exist_ok=True)
            path = out / "candidates" / f"{name}-{p.move.params['strategy']}" \
                f"{'' if p.move.params['fused'] else '-unfused'}.py"
            path.write_text(p.candidate.code)
            rows.append({
                "strategy": p.move.params["strategy"], "fused": p.move.params["fused"],
                "file": str(path), "verdict": e.verdict.value, "message": e.message,
                "us": e.timing.median_us if e.timing else None,
                "eager_us": e.eager.median_us if e.eager else None,
                "compile_us": e.compiled.median_us if e.compiled else None,
                "bound_us": e.roofline.bound_us if e.roofline else None,
                "seconds": round(time.monotonic() - t0, 1), "flags": list(e.flags),
                "ok": e.verdict == Verdict.CORRECT})
            shared = "  [GPU SHARED: time not trustworthy]" if "review:gpu_shared" in e.flags else ""
            print(f"  {name} {rows[-1]['strategy']:10} {e.verdict.value:10} "
                  f"{rows[-1]['us'] or float('nan'):9.1f} us  {e.message[:90]}{shared}",
                  flush=True)
    good = [r for r in rows if r["ok"] and r["us"]]
    best = min(good, key=lambda r: r["us"]) if good else None
    return {"task": name, "candidates": rows, "best": best}


def _line(res: dict) -> str:
    b = res["best"]
    if b is None:
        errs = "; ".join(f"{r['strategy']}: {r['verdict']}" for r in res["candidates"])
        return f"{res['task']:22} FAILED ({errs})"
    eager, comp = b["eager_us"], b["compile_us"]
    frac = b["bound_us"] / b["us"] if b["bound_us"] else float("nan")
    sp_e = eager / b["us"] if eager else float("nan")
    sp_c = comp / b["us"] if comp else float("nan")
    others = " ".join(f"{r['strategy']}={r['us']:.1f}" for r in res["candidates"]
                      if r["ok"] and r["us"] and r is not b)
    return (f"{res['task']:22} {b['strategy']:10} {b['us']:9.1f} {eager or float('nan'):9.1f} "
            f"{comp or float('nan'):9.1f} {sp_e:7.2f}x {sp_c:7.2f}x {frac:6.0%}  {others}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", dest="kind", choices=("rows", "reduce"), default="rows",
                    help="rows: issue 4's row kernels; reduce: issue 19's kinds")
    ap.add_argument("--strategies", choices=("all", "default"), default="all")
    ap.add_argument("--only", default="",
                    help="comma-separated substrings of the task names to run")
    ap.add_argument("--runs", type=int, default=100, help="timed calls per candidate (>= 30)")
    ap.add_argument("--calibrate", action="store_true",
                    help="measure the copy bandwidth first (torch.clone of 1 GB)")
    ap.add_argument("--out", default="", help="folder for results.json and the candidates")
    args = ap.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_families_"))
    out.mkdir(parents=True, exist_ok=True)
    ceilings, bw = None, 4.3e12
    if args.calibrate:
        from cutegen.codegen.ceilings import measure_ceilings

        measured = measure_ceilings()
        ceilings, bw = measured.ceilings(), measured.copy_gbs * 1e9
    print(f"# kernel families, bundled {args.kind} tasks; B_copy {bw / 1e12:.2f} TB/s"
          f"{' (measured)' if args.calibrate else ' (PERFORMANCE.md)'}; {args.runs} timed calls,"
          f" L2 flushed per call; results in {out}", flush=True)
    results = []
    for n in (REDUCE_TASKS if args.kind == "reduce" else TASKS):
        if any(part in n for part in args.only.split(",")):
            results.append(_evaluate(n, args.strategies, args.runs, ceilings, out))
            # written after every task, so a run cut short keeps what it measured
            (out / "results.json").write_text(json.dumps(results, indent=1))
    header = (f"{'task':22} {'strategy':10} {'us':>9} {'eager us':>9} {'compile':>9} "
              f"{'vs eager':>8} {'vs comp':>8} {'of bw':>6}  other strategies (us)")
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        print(_line(r))
    logs, misses = [], []
    for r in results:
        b = r["best"]
        in_geomean, floor = _targets(r["task"], args.kind)
        if in_geomean:
            ok = b is not None and b["compile_us"]
            logs.append(math.log(b["compile_us"] / b["us"]) if ok else 0.0)
        if floor is not None and (b is None or not b["bound_us"] or b["bound_us"] / b["us"] < floor):
            misses.append(r["task"])
    if logs:
        gm = math.exp(sum(logs) / len(logs))
        print(f"\ngeomean speedup over torch.compile ({len(logs)} tasks, fp32 and bf16;"
              f" failures as 1.0x): {gm:.2f}x (target >= 1.2x)")
    print("below 85% of B_copy (two-read kinds: of 2/3 of it): "
          + (", ".join(misses) if misses else "none"))
    return 0 if all(r["best"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
