"""Child process for the parallel crash tests (run as a script, killed with SIGKILL).

    python _child.py DB SEED_FILE TASK_FILE RUN_NAME MAX_EVALS ORDER

ORDER is "in_order" or "completion". The search keeps three evaluations in flight on a pool
of two fake devices whose latencies make results finish out of order. It prints one line
per commit *after* the commit returned, so the parent knows what the store must hold.
"""

from __future__ import annotations

import sys

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.pool import GpuPool
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import load_task_file
from cutegen.search import Budget, Search, SearchParams
from cutegen.search.storage import RunConfig, SqliteStorage
from cutegen.testing import FakeEvaluator


def latency(c: CandidateSource) -> float:
    return 0.002 * (int(c.sha256[:4], 16) % 7)


def main(db: str, seed_file: str, task_file: str, run_name: str, max_evals: str,
         order: str) -> None:
    storage = SqliteStorage(db)
    task = load_task_file(task_file, name="toy_fp32")
    run = storage.create_run(run_name, RunConfig(task.name, str(task.path), task.sha256,
                                                 seed=42), load_if_exists=True)
    params = SearchParams(expensive=None, max_attempts=10**6, heartbeat_s=0.02,
                          stale_after_s=30.0, proposals_per_expansion=2, parallel=3,
                          tell_in_order=order == "in_order")
    pool = GpuPool(task, EvalOptions(compile_only=True), storage.run_dir(run.id), gpus=[0, 1],
                   factory=lambda d: FakeEvaluator(seed=3, failure_rate=0.15, device=d,
                                                   latency=latency))
    try:
        with Search(storage=storage, run=run, task=task, evaluator=pool,
                    rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                    params=params, budget=Budget(max_evals=int(max_evals))) as s:
            s.run(on_step=lambda r: print(f"committed {r.node.id} {r.node.state.label}",
                                          flush=True))
    finally:
        pool.close()
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
