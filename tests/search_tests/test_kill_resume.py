"""THE resume test: a search killed with SIGKILL at random points, more than twenty times,
and resumed each time, ends with exactly the tree and best node of the same run left alone.
Also RELIABILITY.md E1 (kill -9 during commits) and E6 (kill between a blob and its row)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from cutegen.search import NodeState
from cutegen.search.storage import SqliteStorage
from cutegen.testing import CommitLogChild, tree_signature

CHILD = Path(__file__).with_name("_child.py")


def Child(*args: str) -> CommitLogChild:
    return CommitLogChild(CHILD, *args)


def _check_store(db: Path, committed: dict[int, str]) -> SqliteStorage:
    s = SqliteStorage(db)
    assert s.integrity_check() == "ok"
    for nid, state in committed.items():  # every commit that returned is there
        node = s.get_node(nid)
        if state:
            assert node.state.label == state
    for run in s.list_runs():  # no partial rows: a finished node has exactly one evaluation
        results = s.get_results(run.id)
        with_eval = [r.node_id for r in results]
        assert len(with_eval) == len(set(with_eval))
        finished = {n.id for n in s.get_nodes(run.id) if n.state.is_finished()}
        assert finished == set(with_eval)
    return s


@pytest.mark.slow
def test_search_killed_twenty_times_equals_uninterrupted(tmp_path, task, big_seed):
    seed_file = big_seed
    n_evals = "150"
    ref_db = tmp_path / "ref" / "store.db"
    Child("search", str(ref_db), str(seed_file), str(task.path), "kill", n_evals, "0").finish()

    db = tmp_path / "killed" / "store.db"
    rng = random.Random(20240601)
    committed: dict[int, str] = {}
    kills = attempts = 0
    while kills < 22 and attempts < 80:
        attempts += 1
        child = Child("search", str(db), str(seed_file), str(task.path), "kill", n_evals,
                      "0.004")
        if rng.random() < 0.25:
            time.sleep(rng.uniform(0.05, 0.45))  # during start-up, open, requeue
        else:
            child.wait_for_commits(rng.randint(1, 4))
            time.sleep(rng.uniform(0.0, 0.012))  # mid-run: evaluation, commit or heartbeat
        killed = child.kill()
        kills += killed
        committed.update(child.committed())
        _check_store(db, committed).close()
        if "done" in child.lines:
            break
    assert kills >= 20, f"only {kills} kills landed in {attempts} attempts"
    last = Child("search", str(db), str(seed_file), str(task.path), "kill", n_evals, "0")
    last.finish()
    committed.update(last.committed())

    got, ref = _check_store(db, committed), SqliteStorage(ref_db)
    run, ref_run = got.get_run("kill"), ref.get_run("kill")
    assert len(got.get_results(run.id)) == int(n_evals)
    assert tree_signature(got, run.id) == tree_signature(ref, ref_run.id)
    assert got.get_best_node(run.id).id == ref.get_best_node(ref_run.id).id
    assert all(n.state.is_finished() for n in got.get_nodes(run.id))
    sessions = got.get_sessions(run.id)  # one per start that got as far as opening the run
    assert len(sessions) > 10 and sum(s.end_reason == "died" for s in sessions) > 10
    requeued = [n for n in got.get_nodes(run.id) if n.attempts > 0]
    assert requeued, "some kill should have landed during an evaluation"
    got.close()
    ref.close()


@pytest.mark.slow
def test_kill_during_commits_loses_nothing(tmp_path):
    """E1: kill -9 while committing multi-row transactions, repeatedly."""
    db = tmp_path / "store.db"
    rng = random.Random(1)
    committed: dict[int, str] = {}
    for _ in range(8):
        child = Child("commits", str(db))
        child.wait_for_commits(rng.randint(1, 40))
        assert child.kill()
        committed.update(child.committed())
        s = _check_store(db, committed)
        run = s.get_run("hammer")
        assert all(n.state == NodeState.COMPLETE for n in s.get_nodes(run.id))  # no half rows
        s.close()
    assert len(committed) > 20


@pytest.mark.slow
def test_kill_between_blob_and_row(tmp_path):
    """E6: a row never names a missing or partial blob; temporaries are swept on open."""
    db = tmp_path / "store.db"
    rng = random.Random(2)
    for _ in range(6):
        child = Child("blobs", str(db))
        child.wait_for_commits(rng.randint(1, 5))
        time.sleep(rng.uniform(0, 0.02))
        assert child.kill()
        s = SqliteStorage(db)
        run = s.get_run("blobs")
        for n in s.get_nodes(run.id):  # get_source checks the content against its hash
            assert s.get_source(n.id).startswith("# ")
        s.sweep_temporaries(run.id)
        leftovers = list(s.run_dir(run.id).rglob("*.tmp"))
        assert leftovers == []
        names = {p.name for p in (s.run_dir(run.id) / "candidates").iterdir()}
        rows = {Path(n.source_path).name for n in s.get_nodes(run.id)}
        assert rows <= names  # orphan files (blob written, row not) are allowed and harmless
        s.close()
