"""Evaluations per minute of one search on 1 vs 2 GPUs, and what compile-ahead adds.

    python3 tools/pool_throughput.py gpu [--task softmax_fp32] [--evals 40] [--gpus 0,1]
    python3 tools/pool_throughput.py compile [--task softmax_fp32] [--evals 16]
    python3 tools/pool_throughput.py model [--p-compile-error 0.3] [--compile-s 5]
                                                [--gpu-s 15] [--scale 0.01]

Every mode runs the same search (builtin rewriter, bundled seed, seed 0, no dead-end
pruning) once per configuration and prints one table; ``--json FILE`` also writes the rows.

* ``gpu`` (needs the GPUs; the numbers the issue asks for): serial on GPU 0 (as cutegen
  searches today); two evaluations in flight on GPU 0 alone and on GPUs 0 and 1, with
  results told in claim order, which builds the *same tree* on one and two GPUs, so the
  rows compare devices and nothing else (the "tree" column shows it); the same on two GPUs
  told as results arrive; four in flight on two GPUs without and with two CPU
  compile-ahead workers (again one tree). ``--inject-compile-errors 0.3`` breaks that share
  of the proposals so that compile-ahead has something to save. Baselines are measured
  once, before any timing.
* ``compile`` (CPU, the real CuTe DSL): the compile-only part: one vs two CPU compile
  workers, and the compile stage's median seconds, i.e. what a compile-ahead worker
  sustains per core.
* ``model`` (CPU, fake devices): the same configurations with FakeEvaluator latencies
  modelled from ``--p-compile-error`` (fraction of candidates that do not compile),
  ``--compile-s`` (compile time, on a GPU worker or a CPU worker alike) and ``--gpu-s``
  (verify + benchmark), all times multiplied by ``--scale``. A model, not a measurement.

Columns: wall seconds of the whole search (worker start-up included), evaluations per
minute from the first to the last commit (steady state), that rate over the first row's,
the best speedup vs eager found, the compile stage's median seconds, a hash of the tree
(equal hashes: the same search), evaluations per device (GPU evaluations; candidates the
compile-ahead pass settled are not on a GPU), verdict counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.compile_cache import CompileCache
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.pool import GpuPool
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import resolve_task
from cutegen.search import Budget, Search, SearchParams
from cutegen.search.storage import RunConfig, SqliteStorage
from cutegen.testing import FakeEvaluator

#: (label, GPU indices or None for serial, evaluations in flight, told in order, CPU workers)
CONFIGS = [
    ("serial, 1 GPU", None, 1, True, 0),
    ("2 in flight, 1 GPU", [0], 2, True, 0),
    ("2 in flight, 2 GPUs", [0, 1], 2, True, 0),
    ("2 in flight, 2 GPUs, as they arrive", [0, 1], 2, False, 0),
    ("4 in flight, 2 GPUs", [0, 1], 4, True, 0),
    ("4 in flight, 2 GPUs + 2 compile-ahead", [0, 1], 4, True, 2),
]


class _Corrupting(BuiltinRewriter):
    """The builtin rewriter, with a fraction of its proposals broken so the DSL refuses to
    compile them (what LLM rewrites often produce), picked by hash: the same for every row."""

    def __init__(self, rate: float) -> None:
        super().__init__()
        self.rate = rate

    def propose(self, ctx: Any, **kw: Any) -> list[Any]:
        out = []
        for p in super().propose(ctx, **kw):
            u = int(p.candidate.sha256[:8], 16) / 2**32
            code = p.candidate.code
            if u < self.rate and "cute.arch.thread_idx()" in code:
                code = code.replace("cute.arch.thread_idx()", "cute.arch.thread_idx_()", 1)
                p = dataclasses.replace(p, candidate=CandidateSource(code, p.candidate.origin))
            out.append(p)
        return out


@dataclasses.dataclass(frozen=True)
class Row:
    label: str
    evals: int
    wall_s: float
    per_min: float
    best_speedup: float | None
    per_device: dict[str, int]
    verdicts: dict[str, int]
    compile_s_median: float | None
    tree: str  # hash of (parent, source) pairs: equal hashes mean the same tree
    best_source: str = ""  # sha256 (12) of the fastest correct candidate: the same kernel?


class _SharedBaselines:
    """One baseline measurement for every configuration (each has its own store, so that
    no run sees another's lessons: the rows must search the same tree)."""

    def __init__(self) -> None:
        self.value: dict[str, Any] = {}

    def get(self, task_sha256: str, env_fingerprint: str) -> dict[str, Any] | None:
        return self.value.get(f"{task_sha256}:{env_fingerprint}")

    def put(self, task_sha256: str, env_fingerprint: str, value: dict[str, Any]) -> None:
        self.value[f"{task_sha256}:{env_fingerprint}"] = value


def _store(work: Path, k: int) -> SqliteStorage:
    return SqliteStorage(work / f"store{k}" / "store.db")


def _search(store: SqliteStorage, name: str, task: Any, evaluator: Any, *, parallel: int,
            in_order: bool, evals: int, corrupt: float = 0.0) -> tuple[float, list[float], Any]:
    run = store.create_run(name, RunConfig(task.name, str(task.path), task.sha256, seed=0))
    params = SearchParams(expensive=None, dead_end_m=1000, parallel=parallel,
                          tell_in_order=in_order)
    stamps: list[float] = []
    t0 = time.monotonic()
    with Search(storage=store, run=run, task=task, evaluator=evaluator,
                rewriter=_Corrupting(corrupt) if corrupt else BuiltinRewriter(), params=params,
                budget=Budget(max_evals=evals)) as s:
        s.run(on_step=lambda r: stamps.append(time.monotonic()))
    return time.monotonic() - t0, stamps, run


def _row(label: str, store: SqliteStorage, run: Any, wall: float, stamps: list[float],
         pool: Any = None) -> Row:
    nodes = store.get_nodes(run.id)
    evs = [store.get_evaluation(n.id) for n in nodes if n.state.is_finished()]
    ok = [(e.speedup_eager, n.source_sha256) for n, e in zip(
        [n for n in nodes if n.state.is_finished()], evs, strict=True)
        if e.verdict == Verdict.CORRECT and e.speedup_eager]
    speedups = [x for x, _ in ok]
    comp = [float(e.stage_seconds["compile"]) for e in evs if "compile" in e.stage_seconds]
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    tree = hashlib.sha256(repr([(n.parent_id, n.source_sha256) for n in nodes]).encode())
    return Row(label, len(evs), round(wall, 1),
               round(60 * (len(stamps) - 1) / span, 1) if span > 0 else 0.0,
               round(max(speedups), 3) if speedups else None,
               ({f"gpu{h.device}": h.evaluations for h in pool.health()} if pool is not None
                else dict(Counter(e.gpu or "?" for e in evs))),
               dict(Counter(e.verdict.value for e in evs)),
               round(statistics.median(comp), 2) if comp else None, tree.hexdigest()[:12],
               max(ok)[1][:12] if ok else "")


def _print(rows: list[Row], title: str) -> None:
    print(f"\n{title}")
    base = rows[0].per_min or 1.0
    head = f"{'configuration':40} {'evals':>5} {'wall s':>7} {'evals/min':>9} {'x':>5} " \
           f"{'best':>6} {'compile s':>9}  tree          best kernel   per device / verdicts"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r.label:40} {r.evals:5d} {r.wall_s:7.1f} {r.per_min:9.1f} "
              f"{r.per_min / base:5.2f} {r.best_speedup or float('nan'):6.2f} "
              f"{r.compile_s_median if r.compile_s_median is not None else float('nan'):9.2f}"
              f"  {r.tree}  {r.best_source or '-':12}  {r.per_device} {r.verdicts}")


def gpu_mode(a: argparse.Namespace) -> list[Row]:
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.pool import make_compile_ahead

    task = resolve_task(a.task)
    gpus = [int(x) for x in a.gpus.split(",")]
    work = Path(tempfile.mkdtemp(prefix="pool-throughput-"))
    cache = _SharedBaselines()
    opts = EvalOptions(compile_only=a.dry_run)
    rows = []
    for k, (label, devs, parallel, in_order, ahead) in enumerate(CONFIGS):
        if (devs is not None and len(devs) > len(gpus)) or k not in a.only:
            continue
        store = _store(work, k)
        run_dir = work / f"run{k}"
        compiled = CompileCache(work / f"cache{k}")  # cold per row: no row reuses another's
        if devs is None:
            ev: Any = LocalEvaluator(task, dataclasses.replace(opts, gpu=gpus[0]),
                                     run_dir=run_dir, baseline_cache=cache,
                                     compile_cache=compiled)
            ev.baselines()
        else:
            pre = (make_compile_ahead(task, opts, run_dir, workers=ahead,
                                      compile_cache=compiled) if ahead else None)
            ev = GpuPool(task, opts, run_dir, gpus=gpus[:len(devs)], baseline_cache=cache,
                         compile_cache=compiled, compile_ahead=pre)
            ev.prepare()
        try:
            wall, stamps, run = _search(store, f"r{k}", task, ev, parallel=parallel,
                                        in_order=in_order, evals=a.evals,
                                        corrupt=a.inject_compile_errors)
            row = _row(label, store, run, wall, stamps,
                       pool=ev if isinstance(ev, GpuPool) else None)
        finally:
            ev.close()
        rows.append(row)
        print(f"done: {rows[-1]}", file=sys.stderr, flush=True)
        if a.json is not None:  # after every row: a command cut short keeps what it measured
            a.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    return rows


def compile_mode(a: argparse.Namespace) -> list[Row]:
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    task = resolve_task(a.task)
    work = Path(tempfile.mkdtemp(prefix="pool-compile-"))
    opts = EvalOptions(compile_only=True)
    rows = []
    for k, (label, workers) in enumerate((("compile-only, 1 CPU worker", 1),
                                          ("compile-only, 2 CPU workers", 2))):
        store = _store(work, k)
        cache = CompileCache(work / f"cache{k}")  # cold: every compile really happens
        if workers == 1:
            ev: Any = LocalEvaluator(task, opts, run_dir=work / f"run{k}", compile_cache=cache)
        else:
            ev = GpuPool(task, opts, work / f"run{k}", gpus=[None] * workers,
                         compile_cache=cache)
        try:
            wall, stamps, run = _search(store, f"c{k}", task, ev, parallel=workers,
                                        in_order=True, evals=a.evals)
        finally:
            ev.close()
        rows.append(_row(label, store, run, wall, stamps))
    return rows


class _Modelled(FakeEvaluator):
    """Fake device with modelled latencies (see the module docstring)."""

    def __init__(self, *, p: float, compile_s: float, gpu_s: float, scale: float,
                 cpu: bool = False, **kw: Any) -> None:
        super().__init__(seed=0, compile_only=cpu, **kw)
        self.p, self.c, self.g, self.scale, self.cpu = p, compile_s, gpu_s, scale, cpu
        self.latency = self._latency

    def verdict_of(self, code: str) -> Verdict:
        h = int(hashlib.sha256(code.encode()).hexdigest()[:8], 16) / 2**32
        if h < self.p:
            return Verdict.COMPILE_ERROR
        return Verdict.COMPILED if self.cpu else Verdict.CORRECT

    def _latency(self, c: CandidateSource) -> float:
        fails = self.verdict_of(c.code) == Verdict.COMPILE_ERROR
        return self.scale * (self.c + (0.0 if fails or self.cpu else self.g))


def model_mode(a: argparse.Namespace) -> list[Row]:
    task = resolve_task(a.task)
    work = Path(tempfile.mkdtemp(prefix="pool-model-"))
    kw = dict(p=a.p_compile_error, compile_s=a.compile_s, gpu_s=a.gpu_s, scale=a.scale)
    rows = []
    for k, (label, devs, parallel, in_order, ahead) in enumerate(CONFIGS):
        if k not in a.only:
            continue
        store = _store(work, k)
        opts = EvalOptions(compile_only=True)
        pre = (GpuPool(task, opts, work, gpus=[None] * ahead,
                       factory=lambda d: _Modelled(cpu=True, **kw)) if ahead else None)
        ev = GpuPool(task, opts, work, gpus=devs or [0], compile_ahead=pre,
                     factory=lambda d: _Modelled(device=d, **kw))
        try:
            wall, stamps, run = _search(store, f"m{k}", task, ev, parallel=parallel,
                                        in_order=in_order, evals=a.evals)
        finally:
            ev.close()
        rows.append(_row(label, store, run, wall, stamps))
    store = _store(work, len(CONFIGS))  # the search thread's own cost: devices take no time
    wall, stamps, run = _search(store, "zero", task, FakeEvaluator(seed=0), parallel=1,
                                in_order=True, evals=a.evals)
    rows.append(_row("search thread alone (zero-latency fake)", store, run, wall, stamps))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("gpu", "compile", "model"))
    ap.add_argument("--task", default="softmax_fp32")
    ap.add_argument("--evals", type=int, default=None)
    ap.add_argument("--gpus", default="0,1", help="gpu mode: the GPUs to use (first = serial)")
    ap.add_argument("--p-compile-error", type=float, default=0.3)
    ap.add_argument("--compile-s", type=float, default=5.0)
    ap.add_argument("--gpu-s", type=float, default=15.0)
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    ap.add_argument("--inject-compile-errors", type=float, default=0.0, metavar="P",
                    help="gpu mode: break this fraction of the rewriter's proposals so they "
                         "fail to compile (same candidates in every row)")
    ap.add_argument("--dry-run", action="store_true",
                    help="gpu mode without a GPU: compile-only evaluators (checks the script)")
    ap.add_argument("--only", default=None, metavar="0,2",
                    help="gpu/model: run only these configurations (0-based, table order)")
    a = ap.parse_args(argv)
    a.only = (set(range(len(CONFIGS))) if a.only is None
              else {int(x) for x in a.only.split(",") if x.strip()})
    a.evals = a.evals or {"gpu": 40, "compile": 16, "model": 40}[a.mode]
    rows = {"gpu": gpu_mode, "compile": compile_mode, "model": model_mode}[a.mode](a)
    title = f"{a.mode}: task {a.task}, {a.evals} evaluations per configuration"
    if a.mode == "gpu" and a.inject_compile_errors:
        title += f", {a.inject_compile_errors:.0%} of proposals broken to fail compiling"
    if a.mode == "model":
        title += (f" (MODELLED: p_compile_error={a.p_compile_error}, compile {a.compile_s} s, "
                  f"verify+bench {a.gpu_s} s, times x{a.scale})")
    _print(rows, title)
    if a.json is not None:
        a.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
