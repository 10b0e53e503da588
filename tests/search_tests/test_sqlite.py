"""SQLite-specific reliability: durability settings (E5), read-only / disk-full stores (E4),
two orchestrators on one store (E3), schema migrations (E8), atomic blob writes (E6)."""

from __future__ import annotations

import errno
import logging
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlite_utils import Database

import cutegen.codegen.atomic as atomic_mod
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Verdict
from cutegen.codegen.rewriters.base import Move
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.errors import StorageError
from cutegen.search import Budget, NodeState, Search, SearchParams
from cutegen.search.storage import SqliteStorage
from cutegen.search.storage._schema import STEPS, apply_migrations
from cutegen.testing import FakeEvaluator

CHILD = Path(__file__).with_name("_child.py")
MOVE = Move("seed", "seed")


def _schema(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return sorted(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
    finally:
        con.close()


# -- E5 -------------------------------------------------------------------------------
def test_wal_and_synchronous_asserted_and_logged(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="cutegen.search.storage"):
        s = SqliteStorage(tmp_path / "s.db")
    assert s.durability == {"journal_mode": "wal", "synchronous": "FULL",
                            "sqlite_version": sqlite3.sqlite_version}
    assert f"SQLite {sqlite3.sqlite_version}" in caplog.text and "synchronous=FULL" in caplog.text
    con = sqlite3.connect(tmp_path / "s.db")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent on the file
    con.close()
    s.close()
    n = SqliteStorage(tmp_path / "n.db", synchronous="normal")
    assert n.durability["synchronous"] == "NORMAL"
    n.close()
    with pytest.raises(ValueError):
        SqliteStorage(tmp_path / "x.db", synchronous="sometimes")


def test_unopenable_store_is_a_storage_error(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StorageError):
        SqliteStorage(tmp_path / "dir.db")
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(StorageError):
        SqliteStorage(tmp_path / "junk.db")


# -- E4 -------------------------------------------------------------------------------
def _run_search(storage, run, task, seed_file, evals=10):
    return Search(storage=storage, run=run, task=task, evaluator=FakeEvaluator(seed=1),
                  rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                  params=SearchParams(expensive=None), budget=Budget(max_evals=evals),
                  heartbeat=False)


@pytest.mark.parametrize("fault", ["read_only", "disk_full"])
def test_write_failure_stops_the_run_cleanly(tmp_path, task, seed_file, run_config, fault):
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("r", run_config(task))
    search = _run_search(s, run, task, seed_file, evals=40)
    search.open()
    for _ in range(5):
        search.step()
    before = (len(s.get_results(run.id)), s.n_nodes(run.id))
    con = s._conn
    if fault == "read_only":
        con.execute("PRAGMA query_only = ON")
    else:
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        con.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StorageError) as e:
        for _ in range(100):  # the first write that does not fit fails
            search.step()
    assert ("read-only" in str(e.value)) if fault == "read_only" else ("disk full" in str(e.value))
    with pytest.raises(StorageError):  # and the search refuses to continue without the store
        search.step()
    con.execute("PRAGMA query_only = OFF")
    con.execute("PRAGMA max_page_count = 1073741823")
    after = (len(s.get_results(run.id)), s.n_nodes(run.id))
    assert after[0] == before[0]  # no evaluation committed past the failure, none half-written
    assert s.integrity_check() == "ok"
    finished = {n.id for n in s.get_nodes(run.id) if n.state.is_finished()}
    assert finished == {r.node_id for r in s.get_results(run.id)}
    search.close("failed")  # what `with Search(...)` does on the way out
    assert s.get_run("r").status == "failed"
    with _run_search(s, run, task, seed_file, evals=12) as again:  # resume after the fix
        assert again.run().evaluations == 12
    assert s.integrity_check() == "ok"
    s.close()


def test_blob_write_failure_leaves_no_row(tmp_path, task, run_config, monkeypatch):
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("r", run_config(task))

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic_mod.os, "replace", full)  # the blobs' writer
    with pytest.raises(StorageError, match="No space left"):
        s.add_node(run.id, parent_id=None, source=CandidateSource("x"), move=MOVE)
    assert s.get_nodes(run.id) == []
    folder = s.run_dir(run.id) / "candidates"
    assert list(folder.iterdir()) == []  # the temporary file was removed too
    s.close()


# -- E6 (unit level; the kill test is in test_kill_resume.py) -------------------------
def test_blobs_are_atomic_and_checked(tmp_path, task, run_config):
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("r", run_config(task))
    n = s.add_node(run.id, parent_id=None, source=CandidateSource("print(1)\n"), move=MOVE)
    path = s.run_dir(run.id) / n.source_path
    assert path.read_text() == "print(1)\n" and path.parent.name == "candidates"
    assert s.run_dir(run.id) == tmp_path / "r"
    path.write_text("tampered")
    with pytest.raises(StorageError, match="damaged"):
        s.get_source(n.id)
    s.close()


def test_an_old_evaluation_without_a_version_reads_back_as_version_0(tmp_path, task, run_config):
    """An evaluation row written before ``harness_version`` existed: the record read back and
    the store's count agree on version 0 (the record read back as this cutegen's version)."""
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("r", run_config(task))
    n = s.add_node(run.id, parent_id=None, source=CandidateSource("print(1)\n"), move=MOVE)
    s.record_evaluation(n.id, Evaluation(candidate_sha256=n.source_sha256, task_sha256="t",
                                                stage=Stage.VERIFY, verdict=Verdict.WRONG),
                        reward=-1.0)
    s._conn.execute("UPDATE evaluations SET evaluation_json = "
                    "json_remove(evaluation_json, '$.harness_version')")
    s._conn.commit()
    assert s.get_evaluation(n.id).harness_version == 0
    assert s.get_harness_versions(run.id) == {0: 1}
    s.close()

# -- E3 -------------------------------------------------------------------------------
def _child(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(CHILD), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_orchestrators_on_one_store(tmp_path, task, big_seed):
    seed_file = big_seed
    db = tmp_path / "s.db"
    SqliteStorage(db).close()
    a = _child("search", str(db), str(seed_file), str(task.path), "run_a", "25", "0.08")
    b = _child("search", str(db), str(seed_file), str(task.path), "run_b", "25", "0.01")
    # wait until run_a is running, then start a second orchestrator on the *same* run
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        st = SqliteStorage(db)
        try:
            live = [x for x in st.get_sessions(st.get_run("run_a").id) if x.ended_at is None]
        except StorageError:
            live = []
        st.close()
        if live:
            break
        time.sleep(0.02)
    c = _child("search", str(db), str(seed_file), str(task.path), "run_a", "25", "0.01")
    out_c, err_c = c.communicate(timeout=60)
    out_a, err_a = a.communicate(timeout=120)
    out_b, err_b = b.communicate(timeout=120)
    assert a.returncode == 0, err_a
    assert b.returncode == 0, err_b
    assert c.returncode != 0 and "RunLockedError" in err_c and "being searched" in err_c
    s = SqliteStorage(db)
    assert s.integrity_check() == "ok"
    for name in ("run_a", "run_b"):
        run = s.get_run(name)
        results = s.get_results(run.id)
        assert len(results) == 25
        assert len({r.node_id for r in results}) == 25  # no node evaluated twice
        assert all(n.state.is_finished() for n in s.get_nodes(run.id))
        claimed = {n.session_id for n in s.get_nodes(run.id)}
        assert claimed <= {x.id for x in s.get_sessions(run.id)}  # claimed by its own sessions
    s.close()


# -- E8 -------------------------------------------------------------------------------
def _old_store(path: Path) -> None:
    """A store as the previous release (schema step 1 only) wrote it, with one run."""
    db = Database(sqlite3.connect(path, isolation_level=None), execute_plugins=False)
    db.enable_wal()
    apply_migrations(db, STEPS[:1])
    con = db.conn
    con.execute("INSERT INTO runs (id, name, task_name, task_path, task_sha256, seed, "
                "config_json, status, created_at) VALUES (1, 'old', 'toy', 't.py', 'abc', 3, "
                "'{\"k\": 1}', 'stopped', 1.0)")
    con.execute("INSERT INTO nodes (id, run_id, parent_id, depth, state, source_sha256, "
                "source_path, origin, move_kind, move_description, move_cost, "
                "move_params_json, created_at) VALUES (1, 1, NULL, 1, 'running', 'f00', "
                "'candidates/f00.py', 'seed', 'seed', 'seed', 'cheap', '{}', 1.0)")
    con.close()


def test_migration_from_previous_schema(tmp_path):
    db = tmp_path / "old.db"
    _old_store(db)
    s = SqliteStorage(db)
    run = s.get_run("old")
    assert run.config.seed == 3 and dict(run.config.toolchain) == {}
    node = s.get_node(1)
    assert node.state == NodeState.RUNNING and node.attempts == 0 and node.session_id is None
    assert s.requeue_stale_nodes(run.id, older_than=10.0)[0].attempts == 1  # new columns work
    sess, _ = s.open_session(run.id, host="h", pid=1, stale_after_s=5, is_alive=lambda h, p: True)
    assert sess.run_id == run.id
    assert s.get_lessons() == [] and s.get_prunes(run.id) == []
    s.close()
    applied = sqlite3.connect(db).execute(
        "SELECT name FROM _sqlite_migrations ORDER BY id").fetchall()
    assert [a[0] for a in applied] == [f.__name__ for f in STEPS]
    SqliteStorage(db).close()  # reopening is a no-op


def test_failed_migration_leaves_store_untouched(tmp_path):
    db = tmp_path / "old.db"
    _old_store(db)
    before = _schema(db)

    def m003_broken(d: Database) -> None:
        d.table("half_done").create({"id": int}, pk="id")
        raise RuntimeError("bug in a migration")

    with pytest.raises(StorageError, match="left unchanged"):
        SqliteStorage(db, steps=(*STEPS, m003_broken))
    assert _schema(db) == before  # neither step 2 nor the broken step 3 left anything
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    con.close()
    SqliteStorage(db).close()  # and the good migration still applies afterwards


def test_store_from_a_newer_release_is_refused(tmp_path):
    db = tmp_path / "new.db"

    def m003_future(d: Database) -> None:
        d.table("future").create({"id": int}, pk="id")

    SqliteStorage(db, steps=(*STEPS, m003_future)).close()
    with pytest.raises(StorageError, match="newer cutegen"):
        SqliteStorage(db)


def _open_at_barrier(path, barrier, errors):
    barrier.wait()
    try:
        SqliteStorage(path).close()
    except StorageError as e:
        errors.put(str(e))


def test_processes_opening_a_new_store_at_once_all_succeed(tmp_path):
    # `cutegen bench --jobs 2` starts two searches on one fresh store; switching it to WAL
    # needs the file to itself and SQLite does not wait for that: one of them failed with
    # "database is locked" before the switch was retried
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    errors = ctx.Queue()
    for round_ in range(25):
        path = tmp_path / f"s{round_}.db"
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_open_at_barrier, args=(path, barrier, errors))
                 for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 6
    got = []
    while not errors.empty():
        got.append(errors.get())
    assert got == []
