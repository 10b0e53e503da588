"""Child process for the crash tests (run as a script, killed with SIGKILL by the tests).

    python _child.py search DB SEED_FILE TASK_FILE RUN_NAME MAX_EVALS DELAY_S
    python _child.py commits DB
    python _child.py blobs DB

Each prints one line per commit *after* the commit returned, so the parent knows what the
store must hold whatever happens next.
"""

from __future__ import annotations

import os
import sys

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Verdict
from cutegen.codegen.rewriters.base import Move
from cutegen.search import NodeState
from cutegen.search.storage import RunConfig, SqliteStorage


def search(db: str, seed_file: str, task_file: str, run_name: str, max_evals: str,
           delay: str) -> None:
    from cutegen.codegen.rewriters.builtin import BuiltinRewriter
    from cutegen.codegen.tasks import load_task_file
    from cutegen.search import Budget, Search, SearchParams
    from cutegen.testing import FakeEvaluator

    storage = SqliteStorage(db)
    task = load_task_file(task_file, name="toy_fp32")
    run = storage.create_run(run_name, RunConfig(task.name, str(task.path), task.sha256,
                                                 seed=42), load_if_exists=True)
    params = SearchParams(expensive=None, max_attempts=10**6, heartbeat_s=0.02,
                          stale_after_s=30.0, proposals_per_expansion=2)
    with Search(storage=storage, run=run, task=task,
                evaluator=FakeEvaluator(seed=3, failure_rate=0.15, delay_s=float(delay)),
                rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                params=params, budget=Budget(max_evals=int(max_evals))) as s:
        s.run(on_step=lambda r: print(f"committed {r.node.id} {r.node.state.label}",
                                      flush=True))
    print("done", flush=True)


def commits(db: str) -> None:
    """Hammer the store with small multi-row transactions."""
    storage = SqliteStorage(db)
    run = storage.create_run("hammer", RunConfig("t", "t.py", "sha"), load_if_exists=True)
    i = len(storage.get_nodes(run.id))
    while True:
        i += 1
        with storage.atomic():
            n = storage.add_node(run.id, parent_id=None, source=CandidateSource(f"src {i}"),
                                 move=Move("seed", f"s{i}"))
            storage.set_node_state(n.id, NodeState.RUNNING)
            storage.record_evaluation(n.id, Evaluation(n.source_sha256, "t", Stage.COMPILE,
                                                       Verdict.COMPILED), reward=0.0)
            storage.set_node_state(n.id, NodeState.COMPLETE)
        print(f"committed {n.id}", flush=True)


def blobs(db: str) -> None:
    """Write big blobs and their rows, one after the other."""
    storage = SqliteStorage(db)
    run = storage.create_run("blobs", RunConfig("t", "t.py", "sha"), load_if_exists=True)
    i = len(storage.get_nodes(run.id))
    while True:
        i += 1
        code = f"# {i}\n" + os.urandom(1 << 19).hex()  # 1 MiB of text
        n = storage.add_node(run.id, parent_id=None, source=CandidateSource(code),
                             move=Move("seed", f"b{i}"))
        print(f"committed {n.id}", flush=True)


if __name__ == "__main__":
    {"search": search, "commits": commits, "blobs": blobs}[sys.argv[1]](*sys.argv[2:])
