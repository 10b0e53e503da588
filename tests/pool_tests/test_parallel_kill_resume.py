"""kill -9 during a parallel run, then resume.

In-order tells (the default): a run killed again and again and resumed each time ends with
exactly the tree and best node of the same parallel run left alone. Completion order: the
weaker guarantee of :mod:`cutegen.search._parallel` (nothing committed is lost, nothing is
committed twice, every node ends finished) holds.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from cutegen.search.storage import SqliteStorage
from cutegen.testing import CommitLogChild, tree_signature

CHILD = Path(__file__).with_name("_child.py")


def Child(*args: str) -> CommitLogChild:
    return CommitLogChild(CHILD, *args)


def _check(db: Path, committed: dict[int, str]) -> SqliteStorage:
    s = SqliteStorage(db)
    assert s.integrity_check() == "ok"
    for nid, state in committed.items():  # every commit that returned is there
        assert s.get_node(nid).state.label == state
    for run in s.list_runs():
        ids = [r.node_id for r in s.get_results(run.id)]
        assert len(ids) == len(set(ids))  # never committed twice
        assert {n.id for n in s.get_nodes(run.id) if n.state.is_finished()} == set(ids)
    return s


def _kill_loop(tmp_path: Path, args: list[str], *, kills: int, seed: int) -> dict[int, str]:
    db = tmp_path / "killed" / "store.db"
    rng = random.Random(seed)
    committed: dict[int, str] = {}
    landed = attempts = 0
    while landed < kills and attempts < 60:
        attempts += 1
        child = Child(str(db), *args)
        if rng.random() < 0.2:
            time.sleep(rng.uniform(0.05, 0.4))  # start-up, open, requeue
        else:
            child.wait_for_commits(rng.randint(1, 5))
            time.sleep(rng.uniform(0.0, 0.006))  # evaluations in flight, a commit, a claim
        landed += child.kill()
        committed.update(child.committed())
        _check(db, committed).close()
        if "done" in child.lines:
            break
    assert landed >= kills, f"only {landed} kills landed in {attempts} attempts"
    last = Child(str(db), *args)
    last.finish()
    committed.update(last.committed())
    return committed


@pytest.mark.slow
def test_in_order_parallel_run_killed_and_resumed_equals_uninterrupted(tmp_path, task,
                                                                        big_seed):
    args = [str(big_seed), str(task.path), "kill", "100", "in_order"]
    ref_db = tmp_path / "ref" / "store.db"
    Child(str(ref_db), *args).finish()
    committed = _kill_loop(tmp_path, args, kills=10, seed=20261129)
    got, ref = _check(tmp_path / "killed" / "store.db", committed), SqliteStorage(ref_db)
    run, ref_run = got.get_run("kill"), ref.get_run("kill")
    assert len(got.get_results(run.id)) == 100
    assert tree_signature(got, run.id) == tree_signature(ref, ref_run.id)
    assert got.get_best_node(run.id).id == ref.get_best_node(ref_run.id).id
    assert any(n.attempts > 0 for n in got.get_nodes(run.id)), "no kill hit an evaluation"
    got.close()
    ref.close()


@pytest.mark.slow
def test_completion_order_run_killed_and_resumed_loses_nothing(tmp_path, task, big_seed):
    args = [str(big_seed), str(task.path), "kill", "60", "completion"]
    committed = _kill_loop(tmp_path, args, kills=8, seed=7)
    got = _check(tmp_path / "killed" / "store.db", committed)
    run = got.get_run("kill")
    assert len(got.get_results(run.id)) == 60
    assert all(n.state.is_finished() for n in got.get_nodes(run.id)
               if n.state.label != "waiting")
    got.close()
