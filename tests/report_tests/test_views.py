"""The Datasette views (schema step m003): readable on new stores and on upgraded old ones."""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database

from cutegen.search.storage import SqliteStorage
from cutegen.search.storage._schema import STEPS, apply_migrations

VIEWS = ("node_results", "run_summary", "best_nodes", "evaluations_readable")


def _rows(db, sql):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def test_views_agree_with_the_store(fake_run):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    best = s.get_best_node(run.id)
    ev = s.get_evaluation(best.id)
    results = s.get_results(run.id)
    lineage = " » ".join(n.move.description for n in s.lineage(best.id))
    s.close()
    names = {r["name"] for r in _rows(fake_run.db, "SELECT name FROM sqlite_master "
                                                   "WHERE type = 'view'")}
    assert set(VIEWS) <= names
    (summary,) = _rows(fake_run.db, "SELECT * FROM run_summary")
    assert summary["run"] == fake_run.name and summary["evaluations"] == len(results)
    assert summary["best_node"] == best.id
    assert summary["best_speedup_eager"] == round(ev.speedup_eager, 3)
    assert summary["llm_usd"] == 0.0123 and summary["gpu"] == "FakeGPU"
    assert summary["succeeded"] == sum(r.verdict.ok for r in results)
    (b,) = _rows(fake_run.db, "SELECT * FROM best_nodes")
    assert b["node_id"] == best.id and b["lineage"] == lineage
    assert b["time_us"] == round(ev.time_us, 2) and b["eager_us"] == round(ev.eager.median_us, 2)
    order = [r.node_id for r in results]
    assert b["evaluations_to_best"] == order.index(best.id) + 1
    rows = _rows(fake_run.db, "SELECT * FROM evaluations_readable ORDER BY node_id")
    assert len(rows) == len(results)
    by_node = {r["node_id"]: r for r in rows}
    assert by_node[best.id]["message"] == "correct" and by_node[best.id]["stage"] == "benchmark"
    failed = [r for r in rows if r["verdict"] not in ("correct", "compiled")]
    assert failed and all(r["time_us"] is None and r["message"] for r in failed)


def test_old_stores_are_upgraded_with_the_views(tmp_path):
    db = tmp_path / "old.db"
    d = Database(sqlite3.connect(db, isolation_level=None), execute_plugins=False)
    d.enable_wal()
    apply_migrations(d, STEPS[:2])  # the release before the views
    con = d.conn
    con.execute("INSERT INTO runs (id, name, task_name, task_path, task_sha256, seed, "
                "config_json, status, created_at, toolchain_json) VALUES (1, 'old', 'toy', "
                "'t.py', 'abc', 3, '{}', 'finished', 1.0, '{\"gpu\": \"H200\"}')")
    for nid, parent, move in ((1, None, "seed x.py"), (2, 1, "vec 4->8")):
        con.execute("INSERT INTO nodes (id, run_id, parent_id, depth, state, source_sha256, "
                    "source_path, move_kind, move_description, created_at) VALUES "
                    "(?, 1, ?, ?, 'complete', 'f', 'candidates/f.py', 'tunable', ?, 1.0)",
                    (nid, parent, nid, move))
        con.execute("INSERT INTO evaluations (run_id, node_id, stage, verdict, time_us, "
                    "speedup_eager, reward, evaluation_json, created_at, gpu_seconds) VALUES "
                    "(1, ?, 'benchmark', 'correct', ?, ?, 1.0, ?, 2.0, 30.0)",
                    (nid, 100.0 / nid, 2.0 * nid,
                     '{"message": "correct", "eager": {"median_us": 200.0}, '
                     '"roofline": {"bound_us": 40.0}}'))
    con.execute("INSERT INTO best_history (run_id, node_id, accepted, reason, retime_seconds) "
                "VALUES (1, 1, 1, 'first', 0), (1, 2, 1, 'faster', 30.0)")
    con.close()
    SqliteStorage(db).close()  # opening migrates
    applied = [r["name"] for r in _rows(db, "SELECT name FROM _sqlite_migrations ORDER BY id")]
    assert applied == [s.__name__ for s in STEPS]
    (b,) = _rows(db, "SELECT * FROM best_nodes")
    assert b["node_id"] == 2 and b["lineage"] == "seed x.py » vec 4->8"
    assert b["roofline_fraction"] == 0.8 and b["evaluations_to_best"] == 2
    (summary,) = _rows(db, "SELECT * FROM run_summary")
    assert summary["gpu_minutes"] == 1.5 and summary["verdicts"] == "correct 2"
    assert summary["best_speedup_eager"] == 4.0 and summary["gpu"] == "H200"
