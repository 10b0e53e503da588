"""Time the hand-written seeds against torch eager on the GPU; prints one table.

    python tools/bench_seeds.py [--runs 100] [--only softmax] [--shapes main|all]

Per row: the seed's device time per call (median over ``--runs`` calls, each after an L2
flush by writing a 256 MB buffer, timed with CUDA events around the one call, so launch
overhead that leaves the GPU idle counts, as in the harness), the same for torch eager,
bytes moved (read + write, the minimum), GB/s, the fraction of 4.1 TB/s, and the
back-to-back time per call (50 calls between two events, no flush: when it is much above
the cold time minus the flush effect, the host is the bottleneck). Also printed: the
first call's wall time (compile included) and the plan the seed chose (threads per row,
rows per CTA, cluster size ...). A case that raises prints its error and the table goes on.
"""

import argparse
import faulthandler
import importlib.util
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parents[1] / "benchmarks"  # the bundled tasks and seeds
COPY_BW = 4.1e12  # bytes/s, H200 copy bandwidth measured (PERFORMANCE.md)

#: (task file, shapes): the tasks' main shapes first, then PERFORMANCE.md tier-A extras.
MAIN = {
    "softmax_fp32": [(32768, 4096)],
    "softmax_bf16": [(32768, 4096)],
    "softmax_long_bf16": [(16384, 131072)],
    "gelu_scale_bias_fp32": [(32768, 8192)],
    "gelu_scale_bias_bf16": [(32768, 8192)],
    "sum_rows_fp32": [(32768, 8192)],
    "sum_rows_bf16": [(32768, 8192)],
}
EXTRA = {
    "softmax_bf16": [(32768, 1024), (32768, 16384), (4096, 32768), (1024, 65536)],
    "softmax_fp32": [(32768, 1000), (1024, 262144), (64, 32768)],
    "softmax_long_bf16": [(8, 262144), (1024, 262144), (127, 100000)],
    "sum_rows_bf16": [(16, 262144), (127, 1000), (4096, 4096)],
    "sum_rows_fp32": [(16, 262144), (127, 1000)],
    "gelu_scale_bias_bf16": [(127, 1000), (4096, 4096)],
}


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _seed_name(task: str) -> str:
    for seed in ("softmax", "gelu_scale_bias", "sum_rows"):
        if task.startswith(seed):
            return seed
    raise KeyError(task)


def _bytes(task: str, rows: int, n: int, esize: int) -> int:
    if task.startswith("sum_rows"):
        return rows * n * esize + rows * esize
    if task.startswith("gelu"):
        return 2 * rows * n * esize + n * esize
    return 2 * rows * n * esize


def _plan(seed_mod, seed: str, x: torch.Tensor) -> str:
    """The launch shape the seed picks for x (re-derived from its op class and TUNABLES)."""
    t = seed_mod.TUNABLES
    n = x.shape[-1]
    dt = seed_mod._TORCH_TO_CUTE[x.dtype]
    if seed == "softmax":
        vec = seed_mod._vector_width(n, t["vec_bits"], x)
        op = seed_mod.RowSoftmax(dt, n, vec, t["vals_per_thread"], t["cta_threads"],
                                 t["max_cta_threads"], t["cluster_max"])
        return (f"vec={vec} tpr={op.tpr} rows/cta={op.rows} threads={op.threads} "
                f"cluster={op.cluster_n} chunks={op.chunks} vecs/thr={op.nvec}")
    if seed == "sum_rows":
        vec = seed_mod._vector_width(n, t["vec_bits"], x)
        op = seed_mod.RowSum(dt, n, vec, t["threads"], t["unroll"], t["cluster_max"],
                             x.shape[0])
        return (f"vec={vec} tpr={op.tpr} rows/cta={op.rows} cluster={op.cluster_n} "
                f"steps={op.steps} unroll={op.unroll}")
    vec = seed_mod._vector_width(n, t["vec_bits"], x)
    return f"vec={vec} threads={t['threads']} rows/thr={t['rows_per_thread']}"


class _Timer:
    def __init__(self) -> None:
        self.flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")

    def cold(self, fn, runs: int) -> float:
        """Median ms of one call after an L2 flush."""
        times = []
        for _ in range(runs + 1):
            self.flush.fill_(1)
            a = torch.cuda.Event(enable_timing=True)
            b = torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        return statistics.median(times[1:])

    @staticmethod
    def back_to_back(fn, calls: int = 50) -> float:
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--only", default="", help="substring of the task names to run")
    ap.add_argument("--shapes", choices=("main", "all"), default="all")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    timer = _Timer()
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"runs={args.runs} (cold: L2 flushed before each call; bw vs {COPY_BW / 1e12:.1f} TB/s)")
    header = (f"{'task':22} {'shape':>15} {'dtype':>5} {'seed ms':>9} {'eager ms':>9} "
              f"{'speedup':>7} {'GB/s':>7} {'of bw':>6} {'b2b ms':>8} {'1st call s':>10}  plan")
    print(header)
    print("-" * len(header))
    tasks = dict(MAIN)
    if args.shapes == "all":
        for k, v in EXTRA.items():
            tasks[k] = tasks.get(k, []) + v
    for task, shapes in tasks.items():
        if args.only and args.only not in task:
            continue
        seed = _seed_name(task)
        task_mod = _load(HERE / "tasks" / f"{task}.py", f"task_{task}")
        seed_mod = _load(HERE / "seeds" / f"{seed}.py", f"seed_{seed}")
        for rows, n in shapes:
            dtype = task_mod.DTYPE
            shape = f"{rows}x{n}"
            dname = "bf16" if dtype == torch.bfloat16 else "fp32"
            faulthandler.dump_traceback_later(300, exit=True)  # a hung kernel ends the run
            try:
                init = [n, 1.702] if seed == "gelu_scale_bias" else []
                ref = task_mod.Model(*init).cuda()
                model = seed_mod.ModelNew(*init).cuda()
                model.load_state_dict(ref.state_dict())
                x = torch.randn(rows, n, device="cuda", dtype=torch.float32).to(dtype)
                t0 = time.perf_counter()
                out = model(x)
                torch.cuda.synchronize()
                first = time.perf_counter() - t0
                want = ref(x)
                err = (out.float() - want.float()).abs().max().item()
                for _ in range(3):
                    model(x)
                    ref(x)
                def run_seed(model=model, x=x):
                    return model(x)

                def run_eager(ref=ref, x=x):
                    return ref(x)

                t_seed = timer.cold(run_seed, args.runs)
                t_eager = timer.cold(run_eager, args.runs)
                b2b = timer.back_to_back(run_seed)
                nbytes = _bytes(task, rows, n, x.element_size())
                gbs = nbytes / (t_seed * 1e-3) / 1e9
                plan = _plan(seed_mod, seed, x)
                print(f"{task:22} {shape:>15} {dname:>5} {t_seed:9.4f} {t_eager:9.4f} "
                      f"{t_eager / t_seed:7.2f} {gbs:7.0f} {gbs * 1e9 / COPY_BW:6.1%} "
                      f"{b2b:8.4f} {first:10.2f}  {plan}  (max|seed-eager| {err:.2e})",
                      flush=True)
                del x, out, want, run_seed, run_eager
            except Exception as e:
                print(f"{task:22} {shape:>15} {dname:>5} ERROR {type(e).__name__}: {e}",
                      flush=True)
                traceback.print_exc()
            faulthandler.cancel_dump_traceback_later()
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
