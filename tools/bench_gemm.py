"""Benchmark the gemm family's candidate against cuBLAS (needs a GPU).

    python tools/bench_gemm.py [--quick] [--runs 30] [--configs default|sweep]
                                    [--out runs/bench_gemm]
                                    [--parts all|bf16|fp32]

* bf16 C = A @ B (row-major A [M, K], B [K, N], fp32 accumulation) at 4096^3, 8192^3 and two
  LLM-like shapes (M=8192, N=4096, K=14336 and a skinny M=128, N=8192, K=8192): the rendered
  candidate's median time, torch.mm's (cuBLAS, same dtype), TFLOP/s and the ratio
  t_torch / t_candidate. Each candidate is checked against torch first (max |c - ref| within
  bf16 tolerance of an fp32 reference) and skipped from the table when wrong. With
  ``--configs sweep`` a few tile / cluster settings are timed too and the best is reported.
* fp32 C = A @ B at 4096^2 and 8192^2 (KernelBench's square matmul) with the 3xTF32
  candidate: max abs / max rel error and rmse against a float64 reference (eager fp32 beside
  it), the harness's verdict, and the speedup over eager fp32 (torch default: TF32 off).
  The sweep times every ``promote`` value of FP32_PROMOTE (k tiles per promotion of the
  WGMMA accumulator into an FADD fragment; 0: the old single accumulator) plus a few tile
  settings, so one run shows error and speed per value. ``--quick``: the default and
  ``promote`` 0.

Timing: the evaluator's protocol (``cutegen.codegen._timing.Timer``: the L2 flushed by a 256 MiB
write, a GPU-side sleep so the call is queued before its start event fires, CUDA events),
providers interleaved, ``--runs`` calls each after 3 warm-ups (compilation excluded), median
reported.
The environment (GPU, driver, torch, nvidia-cutlass-dsl) goes into the JSON and Markdown
written to ``--out``. ``--quick``: 4096^3 bf16 and 4096^2 fp32 only, 15 runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BF16_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 14336), (128, 8192, 8192)]
FP32_SIZES = [4096, 8192]
SWEEP = [{}, {"tile_n": 128}, {"cluster_m": 2}, {"cluster_n": 2}, {"raster": "n", "swizzle": 4},
         {"tile_m": 64, "tile_n": 256}, {"tile_m": 64, "tile_n": 128}, {"split_k": 1},
         {"split_k": 2}, {"split_k": 4}]
FP32_PROMOTE = [0, 1, 2, 3, 4, 6, 8]
#: the default candidate (promote 4), every other promote value, then tile / cluster settings;
#: tile_n 256 only without promotion (two fragments of it do not fit in registers)
FP32_SWEEP = ([{}] + [{"promote": p} for p in FP32_PROMOTE if p != 4]
              + [{"tile_n": 128}, {"tile_n": 64}, {"cluster_m": 2}, {"tile_k": 64},
                 {"tile_n": 256, "promote": 0}])
FP32_QUICK = [{}, {"promote": 0}]
_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)
'''


def _plan(dtype: str, precision: str):
    from cutegen.codegen.families.plan import Chain, Leaf, Plan

    a = Leaf("A", "input", "A", "full", dtype)
    b = Leaf("B", "input", "B", "full", dtype)
    params = (("a", "A"), ("b", "B"), ("a_major", "k"), ("b_major", "n"), ("batched", False),
              ("reduce", ""), ("reduce_keepdim", False), ("precision_default", precision))
    return Plan("gemm", "matmul", (a, b), "A", Chain((), "@A"), Chain((), "%y"), params,
                dtype, "matrix", ("A", "B"), f"A @ B {dtype}")


def _candidate(dtype: str, precision: str, tunables: dict, workdir: Path):
    """ModelNew of the rendered candidate, imported from a file (the DSL needs sources)."""
    from cutegen.codegen.families.gemm import render_gemm

    code = render_gemm(_plan(dtype, precision), _TASK, tunables=tunables or None)
    tag = "_".join(f"{k}{v}" for k, v in sorted(tunables.items()))
    path = workdir / f"cand_{precision}_{tag}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew().cuda()


class Timer:
    """Median per-call times of several providers, interleaved, under the evaluator's timing
    protocol (``cutegen.codegen._timing.Timer``: the L2 flushed, then a GPU-side sleep so the
    host has queued the call before the start event fires; a call queued late is timed
    again with a longer sleep). The plain event pair used before also timed the candidate's
    Python launch path whenever it outlasted the flush, so a short kernel's time could carry
    it (whether the skinny product's 139 µs against cuBLAS's 54 µs did is for the next GPU
    run of ``gpu_checks.sh gemm-skinny`` to say)."""

    def __init__(self, runs: int) -> None:
        from cutegen.codegen._timing import Timer as ProtocolTimer

        self.runs = runs
        self.protocol = ProtocolTimer(flush_mb=256)

    def time_us(self, fns: dict) -> dict:
        for fn in fns.values():
            for _ in range(3):
                fn()
        times: dict = {k: [] for k in fns}
        for _ in range(self.runs):
            for k, fn in fns.items():  # interleaved providers
                times[k] += self.protocol.time_calls(fn, warmup=0, runs=1)
        return {k: statistics.median(v) for k, v in times.items()}


def _env() -> dict:
    import torch

    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        from importlib.metadata import version

        env["nvidia-cutlass-dsl"] = version("nvidia-cutlass-dsl")
    except Exception:  # noqa: BLE001 - informational only
        env["nvidia-cutlass-dsl"] = "?"
    try:
        import pynvml

        pynvml.nvmlInit()
        env["driver"] = pynvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001
        pass
    return env


def bench_bf16(shapes, configs, timer: Timer, workdir: Path) -> list[dict]:
    import torch

    rows = []
    models: dict = {}  # one candidate (and compiled kernel) per config, across shapes
    for m, n, k in shapes:
        a = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
        b = torch.randn(k, n, dtype=torch.bfloat16, device="cuda")
        ref = a.float() @ b.float()
        scale = ref.abs().max().item()
        best = None
        tried = []
        for i, cfg in enumerate(configs):
            try:
                if i not in models:
                    models[i] = _candidate("bfloat16", "bf16", cfg, workdir)
                model = models[i]
                out = model(a, b)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 - reported in the table
                tried.append({"config": cfg, "error": f"{type(e).__name__}: {e}"[:300]})
                continue
            err = (out.float() - ref).abs().max().item()
            ok = err <= 1e-2 + 1e-2 * scale
            entry = {"config": cfg, "max_abs_err": err, "correct": ok}
            if ok:
                t = timer.time_us({"cand": partial(model, a, b), "torch": partial(torch.mm, a, b)})
                entry.update(cand_us=t["cand"], torch_us=t["torch"])
                if best is None or t["cand"] < best["cand_us"]:
                    best = entry
            tried.append(entry)
            print(f"  bf16 {m}x{n}x{k} {cfg or 'default'}: {entry}", file=sys.stderr)
        flops = 2.0 * m * n * k
        row = {"shape": [m, n, k], "tried": tried}
        if best is not None:
            row.update(config=best["config"], cand_us=best["cand_us"], torch_us=best["torch_us"],
                       cand_tflops=flops / best["cand_us"] / 1e6,
                       torch_tflops=flops / best["torch_us"] / 1e6,
                       ratio=best["torch_us"] / best["cand_us"])
        rows.append(row)
    return rows


def bench_fp32(sizes, configs, timer: Timer, workdir: Path) -> list[dict]:
    import torch

    from cutegen.codegen.families.gemm import PROMOTE_DEFAULT

    torch.backends.cuda.matmul.allow_tf32 = False
    models = []
    for cfg in configs:
        try:
            models.append((cfg, _candidate("float32", "3xtf32", cfg, workdir)))
        except Exception as e:  # noqa: BLE001 - reported on stderr, the rest still runs
            print(f"  fp32 {cfg}: {type(e).__name__}: {e}"[:300], file=sys.stderr)
    rows = []
    for s in sizes:
        a = torch.randn(s, s, dtype=torch.float32, device="cuda")
        b = torch.randn(s, s, dtype=torch.float32, device="cuda")
        ref = a.double() @ b.double()
        scale = ref.abs().max().item()
        eager = torch.mm(a, b)
        for cfg, model in models:
            try:
                out = model(a, b)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                print(f"  fp32 {s} {cfg}: {type(e).__name__}: {e}"[:300], file=sys.stderr)
                continue
            row = {"size": s, "config": cfg, "promote": cfg.get("promote", PROMOTE_DEFAULT)}
            for name, c in (("cand", out), ("eager", eager)):
                d = (c.double() - ref).abs()
                row[f"{name}_max_abs_err"] = d.max().item()
                row[f"{name}_rmse"] = d.pow(2).mean().sqrt().item()
                row[f"{name}_max_rel_err"] = (d / ref.abs().clamp_min(1e-3 * scale)).max().item()
                row[f"{name}_within_1e-4"] = bool((d <= 1e-4 + 1e-4 * ref.abs()).all().item())
            # the harness's own rule (cutegen eval's verdict): every element within
            # atol 1e-4 + rtol 1e-4 |ref|, or as accurate as the task's own fp32 (eager) result
            from cutegen.codegen.numerics import compare

            verdict = compare([out], [ref], [eager])
            row["harness_passed"] = verdict.passed
            row["harness_reason"] = verdict.reason
            t = timer.time_us({"cand": partial(model, a, b), "eager": partial(torch.mm, a, b)})
            row.update(cand_us=t["cand"], eager_us=t["eager"], speedup=t["eager"] / t["cand"],
                       cand_tflops=2.0 * s ** 3 / t["cand"] / 1e6)
            print(f"  fp32 {s} {cfg or 'default'}: {row}", file=sys.stderr)
            rows.append(row)
    return rows


def _markdown(env: dict, bf16: list[dict], fp32: list[dict]) -> str:
    lines = [f"# gemm family vs cuBLAS ({env.get('gpu')}, torch {env.get('torch')}, "
             f"nvidia-cutlass-dsl {env.get('nvidia-cutlass-dsl')}, {env.get('date')})", "",
             "| bf16 M x N x K | config | candidate us | torch.mm us | cand TFLOP/s | "
             "torch TFLOP/s | t_torch / t_cand |", "|---|---|---|---|---|---|---|"]
    for r in bf16:
        shape = "x".join(map(str, r["shape"]))
        if "cand_us" not in r:
            lines.append(f"| {shape} | - | failed: {r['tried']} | | | | |")
            continue
        lines.append(f"| {shape} | {r['config'] or 'default'} | {r['cand_us']:.1f} | "
                     f"{r['torch_us']:.1f} | {r['cand_tflops']:.0f} | {r['torch_tflops']:.0f} | "
                     f"{r['ratio']:.2f} |")
    lines += ["", "| fp32 N^3 (3xtf32) | config | promote | candidate us | eager fp32 us | "
              "speedup | cand max abs err | cand rmse | cand max rel err | eager max abs err | "
              "eager rmse | within 1e-4 | harness verdict |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in fp32:
        lines.append(f"| {r['size']} | {r['config'] or 'default'} | {r.get('promote', '?')} | "
                     f"{r['cand_us']:.0f} | {r['eager_us']:.0f} | "
                     f"{r['speedup']:.2f} | {r['cand_max_abs_err']:.2e} | "
                     f"{r.get('cand_rmse', float('nan')):.2e} | "
                     f"{r['cand_max_rel_err']:.2e} | {r['eager_max_abs_err']:.2e} | "
                     f"{r.get('eager_rmse', float('nan')):.2e} | "
                     f"{r['cand_within_1e-4']} | "
                     f"{'correct' if r.get('harness_passed') else 'wrong'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="4096 shapes only, 15 runs")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--configs", choices=["default", "sweep"], default="sweep")
    ap.add_argument("--out", type=Path, default=None, help="write results.json and results.md")
    ap.add_argument("--parts", choices=["all", "bf16", "fp32"], default="all",
                    help="time only the bf16 table or only the fp32 (3xTF32) table")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_gemm needs a CUDA GPU (sm_90a); none is visible", file=sys.stderr)
        return 2
    runs = 15 if args.quick else args.runs
    shapes = BF16_SHAPES[:1] if args.quick else BF16_SHAPES
    sizes = FP32_SIZES[:1] if args.quick else FP32_SIZES
    configs = SWEEP if args.configs == "sweep" and not args.quick else [{}]
    timer = Timer(runs)
    env = _env()
    with tempfile.TemporaryDirectory() as tmp:
        bf16 = (bench_bf16(shapes, configs, timer, Path(tmp))
                if args.parts in ("all", "bf16") else [])
        fp32 = (bench_fp32(sizes, FP32_SWEEP if configs is SWEEP else FP32_QUICK, timer,
                           Path(tmp)) if args.parts in ("all", "fp32") else [])
    md = _markdown(env, bf16, fp32)
    print(md)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(
            {"env": env, "runs": runs, "bf16": bf16, "fp32": fp32}, indent=1))
        (args.out / "results.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
