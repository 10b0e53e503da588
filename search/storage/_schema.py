"""The SQLite schema and its migrations (sqlite-utils ``Migrations``).

Each step is a function of the database, registered in :data:`STEPS` in order; a step is
never edited once released, a change is a new step. :func:`apply_migrations` runs every
pending step inside **one** ``BEGIN IMMEDIATE`` transaction (each step a savepoint inside
it), so a step that fails leaves the database exactly as it was, and two processes opening
the same new store cannot both migrate it.

Tables (readable names, for Datasette): ``runs``, ``sessions``, ``nodes``, ``evaluations``,
``profile_reports``, ``llm_calls``, ``lessons``, ``prunes``, ``baselines``,
``best_history``. Views, for reading (Datasette's front page lists them): ``node_results``
(a node with its verdict and speedup), ``run_summary`` (one row per run: evaluations,
verdicts, best speedup, GPU minutes, LLM dollars), ``best_nodes`` (each run's gated best
with its lineage of moves as text) and ``evaluations_readable`` (every evaluation with its
move, verdict, stage, times, speedups, roofline fraction and message).
Times are seconds since the epoch (REAL); ``*_json`` columns hold JSON.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from cutegen.errors import StorageError

MIGRATION_SET = "cutegen"
Step = Callable[[Database], None]


def m001_initial(db: Database) -> None:
    """Release 0.1 schema: runs, nodes, evaluations."""
    db.table("runs").create(
        {"id": int, "name": str, "task_name": str, "task_path": str, "task_sha256": str,
         "seed": int, "config_json": str, "status": str, "created_at": float},
        pk="id", not_null={"name", "config_json", "task_sha256", "status"})
    db.table("runs").create_index(["name"], unique=True)
    db.table("nodes").create(
        {"id": int, "run_id": int, "parent_id": int, "depth": int, "state": str,
         "source_sha256": str, "source_path": str, "origin": str, "move_kind": str,
         "move_description": str, "move_cost": str, "move_params_json": str,
         "created_at": float, "heartbeat_at": float, "finished_at": float},
        pk="id", not_null={"run_id", "state", "source_sha256", "depth"},
        foreign_keys=[("run_id", "runs", "id"), ("parent_id", "nodes", "id")])
    db.table("nodes").create_index(["run_id", "state"])
    db.table("nodes").create_index(["parent_id"])
    db.table("evaluations").create(
        {"id": int, "run_id": int, "node_id": int, "stage": str, "verdict": str,
         "time_us": float, "speedup_eager": float, "speedup_compile": float, "reward": float,
         "evaluation_json": str, "created_at": float},
        pk="id", not_null={"run_id", "node_id", "verdict", "reward", "evaluation_json"},
        foreign_keys=[("run_id", "runs", "id"), ("node_id", "nodes", "id")])
    db.table("evaluations").create_index(["node_id"], unique=True)
    db.table("evaluations").create_index(["run_id", "verdict"])


def m002_sessions_memory_and_records(db: Database) -> None:
    """Leases and heartbeats, attempts, toolchain; lessons, prunes, best, LLM, profiles."""
    db.table("runs").add_column("toolchain_json", str, not_null_default="{}")
    db.table("nodes").add_column("attempts", int, not_null_default=0)
    db.table("nodes").add_column("session_id", int)
    db.table("evaluations").add_column("gpu_seconds", float, not_null_default=0.0)
    db.table("sessions").create(
        {"id": int, "run_id": int, "host": str, "pid": int, "started_at": float,
         "heartbeat_at": float, "ended_at": float, "end_reason": str},
        pk="id", not_null={"run_id", "host", "pid", "started_at", "heartbeat_at"},
        foreign_keys=[("run_id", "runs", "id")])
    db.table("sessions").create_index(["run_id"])
    db.table("profile_reports").create(
        {"id": int, "run_id": int, "node_id": int, "profiler": str, "status": str,
         "guidance_json": str, "findings_json": str, "artifact_path": str, "seconds": float,
         "created_at": float},
        pk="id", not_null={"node_id", "profiler", "status"},
        foreign_keys=[("run_id", "runs", "id"), ("node_id", "nodes", "id")])
    db.table("profile_reports").create_index(["node_id"])
    db.table("llm_calls").create(
        {"id": int, "run_id": int, "node_id": int, "call_id": str, "attempt": int,
         "purpose": str, "model": str, "system": str, "prompt": str, "response": str,
         "finish_reason": str, "prompt_tokens": int, "completion_tokens": int,
         "cost_usd": float, "latency_s": float, "outcome": str, "error": str,
         "http_status": int, "parent_sha256": str, "candidate_sha256": str,
         "created_at": float},
        pk="id", not_null={"run_id", "model", "cost_usd", "outcome"},
        foreign_keys=[("run_id", "runs", "id"), ("node_id", "nodes", "id")])
    db.table("llm_calls").create_index(["run_id"])
    db.table("lessons").create(
        {"id": int, "run_id": int, "node_id": int, "parent_id": int, "parent_sha256": str,
         "task_name": str, "task_sha256": str, "move_kind": str, "move_key": str,
         "description": str, "outcome": str, "ratio": float, "parent_time_us": float,
         "child_time_us": float, "text": str, "created_at": float},
        pk="id", not_null={"run_id", "node_id", "task_name", "move_key", "outcome"},
        foreign_keys=[("run_id", "runs", "id"), ("node_id", "nodes", "id")])
    db.table("lessons").create_index(["task_name"])
    db.table("lessons").create_index(["parent_sha256", "move_key"])
    db.table("prunes").create(
        {"id": int, "run_id": int, "node_id": int, "kind": str, "reason": str,
         "details_json": str, "created_at": float},
        pk="id", not_null={"run_id", "node_id", "kind"},
        foreign_keys=[("run_id", "runs", "id")])
    db.table("prunes").create_index(["run_id", "node_id", "kind"], unique=True)
    db.table("baselines").create(
        {"id": int, "task_sha256": str, "environment": str, "value_json": str,
         "created_at": float},
        pk="id", not_null={"task_sha256", "environment"})
    db.table("baselines").create_index(["task_sha256", "environment"], unique=True)
    db.table("best_history").create(
        {"id": int, "run_id": int, "node_id": int, "previous_best_id": int, "accepted": int,
         "reason": str, "p_value": float, "u_statistic": float, "median_new_us": float,
         "median_old_us": float, "improvement": float, "n_new": int, "n_old": int,
         "retime_seconds": float, "created_at": float},
        pk="id", not_null={"run_id", "node_id", "accepted"},
        foreign_keys=[("run_id", "runs", "id"), ("node_id", "nodes", "id")])
    db.table("best_history").create_index(["run_id"])
    db.create_view("node_results", """
        SELECT r.name AS run, n.id AS node_id, n.parent_id, n.depth, n.state, n.move_kind,
               n.move_description, e.verdict, e.time_us, e.speedup_eager, e.speedup_compile,
               e.reward, n.attempts, n.source_path,
               datetime(n.created_at, 'unixepoch') AS created
        FROM nodes n JOIN runs r ON r.id = n.run_id
        LEFT JOIN evaluations e ON e.node_id = n.id""")


#: The current best of a run: its last accepted gate decision (views below use it).
_CURRENT_BEST = """
    SELECT b.run_id, b.node_id FROM best_history b
    WHERE b.accepted = 1 AND b.id = (SELECT max(b2.id) FROM best_history b2
                                     WHERE b2.run_id = b.run_id AND b2.accepted = 1)"""


def m003_readable_views(db: Database) -> None:
    """Views for browsing a store in Datasette: run_summary, best_nodes,
    evaluations_readable. Views only: no table changes, nothing to back-fill."""
    db.create_view("evaluations_readable", """
        SELECT r.name AS run, r.task_name AS task, e.node_id, n.parent_id, n.depth,
               n.move_kind, n.move_description AS move, e.verdict, e.stage,
               round(e.time_us, 2) AS time_us,
               round(json_extract(e.evaluation_json, '$.eager.median_us'), 2) AS eager_us,
               round(json_extract(e.evaluation_json, '$.compiled.median_us'), 2)
                   AS compile_us,
               round(e.speedup_eager, 3) AS speedup_eager,
               round(e.speedup_compile, 3) AS speedup_compile,
               round(json_extract(e.evaluation_json, '$.roofline.bound_us') / e.time_us, 3)
                   AS roofline_fraction,
               json_extract(e.evaluation_json, '$.message') AS message,
               round(e.gpu_seconds, 2) AS gpu_seconds, round(e.reward, 4) AS reward,
               json_extract(e.evaluation_json, '$.gpu') AS gpu, n.source_path,
               datetime(e.created_at, 'unixepoch') AS evaluated_utc
        FROM evaluations e JOIN nodes n ON n.id = e.node_id JOIN runs r ON r.id = e.run_id""")
    db.create_view("best_nodes", f"""
        WITH RECURSIVE best AS ({_CURRENT_BEST}),
        chain(best_id, node_id, parent_id, lineage) AS (
            SELECT best.node_id, n.id, n.parent_id, n.move_description
            FROM best JOIN nodes n ON n.id = best.node_id
            UNION ALL
            SELECT c.best_id, p.id, p.parent_id, p.move_description || ' » ' || c.lineage
            FROM chain c JOIN nodes p ON p.id = c.parent_id)
        SELECT r.name AS run, r.task_name AS task, best.node_id, n.depth,
               round(e.time_us, 2) AS time_us,
               round(json_extract(e.evaluation_json, '$.eager.median_us'), 2) AS eager_us,
               round(json_extract(e.evaluation_json, '$.compiled.median_us'), 2)
                   AS compile_us,
               round(e.speedup_eager, 3) AS speedup_eager,
               round(e.speedup_compile, 3) AS speedup_compile,
               round(json_extract(e.evaluation_json, '$.roofline.bound_us') / e.time_us, 3)
                   AS roofline_fraction,
               (SELECT count(*) FROM evaluations e2 WHERE e2.run_id = e.run_id
                AND e2.id <= e.id) AS evaluations_to_best,
               chain.lineage, n.source_path,
               datetime(e.created_at, 'unixepoch') AS found_utc
        FROM best JOIN runs r ON r.id = best.run_id JOIN nodes n ON n.id = best.node_id
        JOIN evaluations e ON e.node_id = best.node_id
        JOIN chain ON chain.best_id = best.node_id AND chain.parent_id IS NULL""")
    db.create_view("run_summary", f"""
        SELECT r.name AS run, r.task_name AS task, r.status, r.seed,
               json_extract(r.toolchain_json, '$.gpu') AS gpu,
               (SELECT count(*) FROM evaluations e WHERE e.run_id = r.id) AS evaluations,
               (SELECT count(*) FROM evaluations e WHERE e.run_id = r.id
                AND e.verdict IN ('correct', 'compiled')) AS succeeded,
               (SELECT group_concat(v.verdict || ' ' || v.n, ', ') FROM
                (SELECT verdict, count(*) AS n FROM evaluations e WHERE e.run_id = r.id
                 GROUP BY verdict ORDER BY verdict) v) AS verdicts,
               best.node_id AS best_node,
               round(be.speedup_eager, 3) AS best_speedup_eager,
               round(be.speedup_compile, 3) AS best_speedup_compile,
               round(be.time_us, 2) AS best_time_us,
               round(((SELECT coalesce(sum(e.gpu_seconds), 0) FROM evaluations e
                       WHERE e.run_id = r.id)
                      + (SELECT coalesce(sum(b.retime_seconds), 0) FROM best_history b
                         WHERE b.run_id = r.id)) / 60.0, 2) AS gpu_minutes,
               round((SELECT coalesce(sum(c.cost_usd), 0) FROM llm_calls c
                      WHERE c.run_id = r.id), 4) AS llm_usd,
               datetime(r.created_at, 'unixepoch') AS created_utc
        FROM runs r LEFT JOIN ({_CURRENT_BEST}) best ON best.run_id = r.id
        LEFT JOIN evaluations be ON be.node_id = best.node_id""")


def m004_one_record_per_fact(db: Database) -> None:
    """A profile report's error; every field of the LLM client's call record (one record
    for the client and the store: where it went, how its cost was arrived at, when it
    started, whether it streamed or sent a schema)."""
    db.table("profile_reports").add_column("error", str)
    calls = db.table("llm_calls")
    for name, kind in (("base_url", str), ("cost_basis", str), ("started_at", float),
                       ("streamed", int), ("structured", int)):
        calls.add_column(name, kind)


#: Every schema step, oldest first.
STEPS: tuple[Step, ...] = (m001_initial, m002_sessions_memory_and_records,
                           m003_readable_views, m004_one_record_per_fact)


def build_migrations(steps: Sequence[Step] = STEPS) -> Migrations:
    """A sqlite-utils ``Migrations`` set holding ``steps`` in order."""
    ms = Migrations(MIGRATION_SET)
    for step in steps:
        ms(name=step.__name__)(step)
    return ms


def apply_migrations(db: Database, steps: Sequence[Step] = STEPS) -> list[str]:
    """Bring the schema up to date in one transaction. Returns the steps applied.

    Raises:
        StorageError: a step failed (nothing was changed), or the database was written by
            a newer cutegen (it holds steps this version does not know).
    """
    ms = build_migrations(steps)
    conn = db.conn
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as e:
        raise StorageError(f"cannot lock the store to check its schema: {e}") from e
    try:
        known = {s.__name__ for s in steps}
        unknown = [a.name for a in ms.applied(db) if a.name not in known]
        if unknown:
            raise StorageError(
                f"the store was written by a newer cutegen (schema steps {unknown}); "
                "upgrade cutegen to open it")
        pending = [m.name for m in ms.pending(db)]
        ms.apply(db)
        conn.execute("COMMIT")
    except BaseException as e:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if isinstance(e, StorageError):
            raise
        if isinstance(e, Exception):
            raise StorageError(f"schema migration failed, store left unchanged: {e}") from e
        raise
    return pending
