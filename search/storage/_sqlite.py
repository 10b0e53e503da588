"""``SqliteStorage``: the storage contract on one SQLite file, through sqlite-utils.

Durability choices, asserted when the store opens and logged (RELIABILITY.md E5):

* ``journal_mode = wal``: readers (``cutegen status``, Datasette) never block the search,
  and a killed writer never corrupts the file.
* ``synchronous = FULL`` (default): every commit is fsynced before it returns, so a commit
  that returned survives a power cut as well as a ``kill -9``. Commits are a few per
  evaluation, which takes seconds, so the fsync is free in practice.
* ``busy_timeout``: a second process writing the same store waits for the lock instead of
  failing; every write transaction starts with ``BEGIN IMMEDIATE`` so it never has to
  upgrade a read lock (which busy_timeout cannot help with in WAL mode).
* ``foreign_keys = ON``.

Blobs live in the run folder next to the store: ``<store dir>/<run name>/candidates/
<sha256>.py``. Any ``sqlite3`` or file-system failure surfaces as
:class:`~cutegen.errors.StorageError` after the transaction was rolled back.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlite_utils import Database

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Verdict
from cutegen.codegen.rewriters.base import Move
from cutegen.errors import DuplicatedRunError, RunLockedError, RunNotFoundError, StorageError
from cutegen.search._node import FrozenNode
from cutegen.search._state import NodeState
from cutegen.search.storage._base import (
    AliveCheck,
    BaseStorage,
    check_run_name,
    check_transition,
    iter_chunks,
    locked_message,
)
from cutegen.search.storage._blobs import BlobStore
from cutegen.search.storage._records import (
    RUN_STATUSES,
    FrozenRun,
    RunConfig,
    Session,
    StoredResult,
)
from cutegen.search.storage._schema import STEPS, Step, apply_migrations, build_migrations
from cutegen.search.storage._sqlite_records import SqliteRecordsMixin, guard, wrap_sqlite_error

log = logging.getLogger("cutegen.search.storage")
_SYNC_LEVELS = {"OFF": 0, "NORMAL": 1, "FULL": 2, "EXTRA": 3}


class SqliteStorage(SqliteRecordsMixin, BaseStorage):
    """The storage contract on a SQLite file (single writer per run, many readers)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0,
                 synchronous: str = "FULL", clock: Callable[[], float] = time.time,
                 steps: Sequence[Step] = STEPS, readonly: bool = False) -> None:
        """Open (creating if needed) and migrate the store.

        With ``readonly`` nothing is created, migrated or written: the store is only read
        (``cutegen status``, ``show``, ``report`` on a copy or a read-only mount).

        Raises:
            StorageError: cannot open, WAL cannot be enabled (e.g. read-only file or a
                file system without shared memory), or the schema cannot be migrated.
        """
        self.path = Path(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._blobs: dict[int, BlobStore] = {}
        self.readonly = readonly
        if readonly:
            self._open_readonly(busy_timeout_s, steps)
            return
        level = synchronous.upper()
        if level not in _SYNC_LEVELS:
            raise ValueError(f"synchronous must be one of {sorted(_SYNC_LEVELS)}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s,
                                         isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as e:
            raise StorageError(f"cannot open the store {self.path}: {e}") from e
        try:
            self._db = Database(self._conn, execute_plugins=False)
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self._enable_wal(busy_timeout_s)
            mode = self._one("PRAGMA journal_mode")
            if str(mode).lower() != "wal":
                raise StorageError(f"{self.path}: journal_mode is {mode!r}, WAL is required")
            self._conn.execute(f"PRAGMA synchronous = {level}")
            if self._one("PRAGMA synchronous") != _SYNC_LEVELS[level]:
                raise StorageError(f"{self.path}: could not set synchronous = {level}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            applied = apply_migrations(self._db, steps)
        except sqlite3.Error as e:
            self._conn.close()
            raise wrap_sqlite_error(e, f"cannot open the store {self.path}") from e
        except BaseException:
            self._conn.close()
            raise
        self.durability = {"journal_mode": "wal", "synchronous": level,
                           "sqlite_version": sqlite3.sqlite_version}
        log.info("store %s: SQLite %s, journal_mode=wal, synchronous=%s%s", self.path,
                 sqlite3.sqlite_version, level,
                 f", migrated {applied}" if applied else "")

    def _open_readonly(self, busy_timeout_s: float, steps: Sequence[Step]) -> None:
        """Open for reading only. On a read-only mount SQLite cannot create the WAL's
        shared-memory file, so the file is then opened as immutable (what a checkpoint left
        in the database file; a writer's uncheckpointed tail is not seen)."""
        if not self.path.is_file():
            raise StorageError(f"no store at {self.path}")
        base = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        last: sqlite3.Error | None = None
        for uri in (base, base + "&immutable=1"):
            try:
                conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s,
                                       isolation_level=None, check_same_thread=False)
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as e:
                last = e
                continue
            self._conn = conn
            self._db = Database(conn, execute_plugins=False)
            known = {s.__name__ for s in steps}
            applied = {m.name for m in build_migrations(steps).applied(self._db)}
            if applied != known:
                conn.close()
                raise StorageError(f"the store {self.path} has schema steps {sorted(applied)}, "
                                   f"this cutegen reads {sorted(known)}: open it writable "
                                   "once (any command that searches migrates it), or "
                                   "upgrade cutegen")
            self.durability = {"journal_mode": "read-only", "synchronous": "",
                               "sqlite_version": sqlite3.sqlite_version}
            return
        raise wrap_sqlite_error(last or sqlite3.Error("unknown"),
                                f"cannot open the store {self.path} for reading")

    def _enable_wal(self, busy_timeout_s: float) -> None:
        """Switch a new store to WAL, retrying while another process does the same: the
        switch needs the file to itself and SQLite does not wait for it (two `cutegen
        search` processes opening a fresh store at once failed with "database is locked")."""
        deadline = time.monotonic() + busy_timeout_s
        delay = 0.01
        while True:
            try:
                self._db.enable_wal()
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)

    # -- plumbing -------------------------------------------------------------------
    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            row = self._conn.execute(sql, params).fetchone()
            return row[0] if row else None

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._conn.execute(sql, params)
            keys = [d[0] for d in cur.description]
            return [dict(zip(keys, r, strict=True)) for r in cur.fetchall()]

    def _insert(self, table: str, row: dict[str, Any]) -> int:
        t = self._db.table(table)
        t.insert(row)
        return int(t.last_pk)  # type: ignore[arg-type]

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self._lock:
            if self._conn.in_transaction:
                yield
                return
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise wrap_sqlite_error(e, "cannot start a write transaction") from e
            try:
                yield
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as e:
                self._rollback()
                raise wrap_sqlite_error(e, "commit failed, nothing was written") from e

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:  # pragma: no cover - the connection is gone
                log.exception("rollback failed")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # -- runs -----------------------------------------------------------------------
    @guard
    def create_run(self, name: str, config: RunConfig, *, load_if_exists: bool = False
                   ) -> FrozenRun:
        check_run_name(name)
        with self.atomic():
            rows = self._rows("SELECT * FROM runs WHERE name = ?", (name,))
            if rows:
                if load_if_exists:
                    return _run_from_row(rows[0])
                raise DuplicatedRunError(
                    f"a run named {name!r} already exists in {self.path}; resume it with "
                    f"`cutegen resume {name}` or choose another --run name")
            rid = self._insert("runs", {
                "name": name, "task_name": config.task_name, "task_path": config.task_path,
                "task_sha256": config.task_sha256, "seed": config.seed,
                "config_json": json.dumps(dict(config.settings), sort_keys=True),
                "toolchain_json": json.dumps(dict(config.toolchain), sort_keys=True),
                "status": "created", "created_at": self._clock()})
            return _run_from_row(self._rows("SELECT * FROM runs WHERE id = ?", (rid,))[0])

    @guard
    def delete_run(self, run_id: int) -> None:
        folder = self.run_dir(run_id)
        with self.atomic():
            for table in ("llm_calls", "profile_reports", "lessons", "prunes", "best_history",
                          "evaluations"):
                self._conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self._conn.execute("UPDATE nodes SET parent_id = NULL WHERE run_id = ?", (run_id,))
            for table in ("nodes", "sessions"):
                self._conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self._conn.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        self._blobs.pop(run_id, None)
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)

    @guard
    def get_run(self, name: str) -> FrozenRun:
        rows = self._rows("SELECT * FROM runs WHERE name = ?", (name,))
        if not rows:
            known = [r["name"] for r in self._rows("SELECT name FROM runs ORDER BY id")]
            raise RunNotFoundError(f"no run named {name!r} in {self.path}"
                                   + (f"; runs: {', '.join(known[-10:])}" if known else ""))
        return _run_from_row(rows[0])

    @guard
    def list_runs(self) -> list[FrozenRun]:
        return [_run_from_row(r) for r in self._rows("SELECT * FROM runs ORDER BY id")]

    @guard
    def set_run_status(self, run_id: int, status: str) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        with self.atomic():
            self._conn.execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id))

    def _run_name(self, run_id: int) -> str:
        name = self._one("SELECT name FROM runs WHERE id = ?", (run_id,))
        if name is None:
            raise StorageError(f"no run with id {run_id}")
        return str(name)

    # -- sessions -------------------------------------------------------------------
    @guard
    def open_session(self, run_id: int, *, host: str, pid: int, stale_after_s: float,
                     is_alive: AliveCheck) -> tuple[Session, list[Session]]:
        with self.atomic():
            self._run_name(run_id)
            now = self._clock()
            ended: list[Session] = []
            for s in self.get_sessions(run_id):
                if s.ended_at is not None:
                    continue
                if s.heartbeat_at >= now - stale_after_s and is_alive(s.host, s.pid):
                    raise RunLockedError(locked_message(s, now))
                self._conn.execute(
                    "UPDATE sessions SET ended_at = heartbeat_at, end_reason = 'died' "
                    "WHERE id = ?", (s.id,))
                ended.append(Session(s.id, s.run_id, s.host, s.pid, s.started_at,
                                     s.heartbeat_at, s.heartbeat_at, "died"))
            sid = self._insert("sessions", {"run_id": run_id, "host": host, "pid": pid,
                                            "started_at": now, "heartbeat_at": now,
                                            "end_reason": ""})
            return Session(sid, run_id, host, pid, now, now), ended

    @guard
    def heartbeat(self, session_id: int, node_id: int | None = None) -> None:
        with self.atomic():
            now = self._clock()
            self._conn.execute("UPDATE sessions SET heartbeat_at = ? WHERE id = ?",
                               (now, session_id))
            if node_id is not None:
                self._conn.execute(
                    "UPDATE nodes SET heartbeat_at = ? WHERE id = ? AND state = 'running'",
                    (now, node_id))

    @guard
    def close_session(self, session_id: int, reason: str) -> None:
        with self.atomic():
            now = self._clock()
            self._conn.execute(
                "UPDATE sessions SET ended_at = ?, heartbeat_at = ?, end_reason = ? "
                "WHERE id = ?", (now, now, reason, session_id))

    @guard
    def get_sessions(self, run_id: int) -> list[Session]:
        return [Session(r["id"], r["run_id"], r["host"], r["pid"], r["started_at"],
                        r["heartbeat_at"], r["ended_at"], r["end_reason"] or "")
                for r in self._rows("SELECT * FROM sessions WHERE run_id = ? ORDER BY id",
                                    (run_id,))]

    # -- nodes ----------------------------------------------------------------------
    @guard
    def add_node(self, run_id: int, *, parent_id: int | None, source: CandidateSource,
                 move: Move) -> FrozenNode:
        with self.atomic():
            depth = 1
            if parent_id is not None:
                parent = self.get_node(parent_id)
                if parent.run_id != run_id:
                    raise StorageError(f"node {parent_id} belongs to another run")
                depth = parent.depth + 1
            rel = self.put_blob(run_id, "candidates", source.code.encode("utf-8"), suffix=".py")
            nid = self._insert("nodes", {
                "run_id": run_id, "parent_id": parent_id, "depth": depth,
                "state": NodeState.WAITING.label, "source_sha256": source.sha256,
                "source_path": rel, "origin": source.origin, "move_kind": move.kind,
                "move_description": move.description, "move_cost": move.cost,
                "move_params_json": json.dumps(dict(move.params), sort_keys=True),
                "attempts": 0, "created_at": self._clock()})
            return self.get_node(nid)

    @guard
    def set_node_state(self, node_id: int, state: NodeState, *,
                       expected: NodeState | None = None, session_id: int | None = None
                       ) -> FrozenNode:
        with self.atomic():
            node = self.get_node(node_id)
            check_transition(node, state, expected)
            now = self._clock()
            sets: list[str] = ["state = ?"]
            params: list[Any] = [state.label]
            if state == NodeState.RUNNING:
                sets += ["heartbeat_at = ?", "session_id = ?"]
                params += [now, session_id]
            if state.is_finished():
                sets.append("finished_at = ?")
                params.append(now)
            cur = self._conn.execute(
                f"UPDATE nodes SET {', '.join(sets)} WHERE id = ? AND state = ?",
                (*params, node_id, node.state.label))
            if cur.rowcount != 1:  # pragma: no cover - guarded by the write lock
                raise StorageError(f"node {node_id} changed under us")
            return self.get_node(node_id)

    @guard
    def get_node(self, node_id: int) -> FrozenNode:
        rows = self._rows("SELECT * FROM nodes WHERE id = ?", (node_id,))
        if not rows:
            raise StorageError(f"no node with id {node_id}")
        return _node_from_row(rows[0])

    @guard
    def get_nodes(self, run_id: int, *, states: Collection[NodeState] | None = None
                  ) -> list[FrozenNode]:
        sql = "SELECT * FROM nodes WHERE run_id = ?"
        params: list[Any] = [run_id]
        if states is not None:
            labels = [s.label for s in states]
            sql += f" AND state IN ({', '.join('?' * len(labels))})"
            params += labels
        return [_node_from_row(r) for r in self._rows(sql + " ORDER BY id", params)]

    @guard
    def requeue_node(self, node_id: int) -> FrozenNode:
        with self.atomic():
            check_transition(self.get_node(node_id), NodeState.WAITING, NodeState.RUNNING)
            self._conn.execute("UPDATE nodes SET state = 'waiting', attempts = attempts + 1 "
                               "WHERE id = ?", (node_id,))
            return self.get_node(node_id)

    @guard
    def requeue_stale_nodes(self, run_id: int, *, older_than: float,
                            dead_sessions: Collection[int] = ()) -> list[FrozenNode]:
        with self.atomic():
            stale = [n for n in self.get_nodes(run_id, states=(NodeState.RUNNING,))
                     if (n.heartbeat_at or 0.0) < older_than or n.session_id in dead_sessions]
            ids = [n.id for n in stale]
            for chunk in iter_chunks(ids):
                self._conn.execute(
                    "UPDATE nodes SET state = 'waiting', attempts = attempts + 1 "
                    f"WHERE state = 'running' AND id IN ({', '.join('?' * len(chunk))})",
                    tuple(chunk))
            return [self.get_node(i) for i in ids]

    # -- blobs ----------------------------------------------------------------------
    def run_dir(self, run_id: int) -> Path:
        return self.path.parent / self._run_name(run_id)

    def _blob_store(self, run_id: int) -> BlobStore:
        if run_id not in self._blobs:
            self._blobs[run_id] = BlobStore(self.run_dir(run_id))
        return self._blobs[run_id]

    @guard
    def put_blob(self, run_id: int, folder: str, data: bytes, *, suffix: str = "") -> str:
        return self._blob_store(run_id).put(folder, data, suffix=suffix)

    @guard
    def get_blob(self, run_id: int, relpath: str) -> bytes:
        return self._blob_store(run_id).get(relpath)

    def sweep_temporaries(self, run_id: int) -> int:
        """Remove temporary files a crash left in the run folder."""
        return self._blob_store(run_id).sweep_temporaries()

    # -- evaluations ----------------------------------------------------------------
    @guard
    def record_evaluation(self, node_id: int, evaluation: Evaluation, *, reward: float,
                          gpu_seconds: float = 0.0) -> int:
        with self.atomic():
            node = self.get_node(node_id)
            if evaluation.candidate_sha256 not in ("", node.source_sha256):
                raise StorageError(f"evaluation of {evaluation.candidate_sha256[:12]} "
                                   f"given for node {node_id} ({node.source_sha256[:12]})")
            if self._one("SELECT 1 FROM evaluations WHERE node_id = ?", (node_id,)):
                raise StorageError(f"node {node_id} already has an evaluation")
            return self._insert("evaluations", {
                "run_id": node.run_id, "node_id": node_id, "stage": evaluation.stage.label,
                "verdict": evaluation.verdict.value, "time_us": evaluation.time_us,
                "speedup_eager": evaluation.speedup_eager,
                "speedup_compile": evaluation.speedup_compile, "reward": float(reward),
                "gpu_seconds": float(gpu_seconds),
                "evaluation_json": json.dumps(evaluation.to_dict(), sort_keys=True),
                "created_at": self._clock()})

    @guard
    def get_evaluation(self, node_id: int) -> Evaluation | None:
        raw = self._one("SELECT evaluation_json FROM evaluations WHERE node_id = ?", (node_id,))
        return Evaluation.from_dict(json.loads(raw)) if raw else None

    @guard
    def get_results(self, run_id: int) -> list[StoredResult]:
        return [StoredResult(r["id"], r["node_id"], Verdict(r["verdict"]), r["reward"],
                             r["time_us"], r["speedup_eager"], r["speedup_compile"],
                             r["gpu_seconds"] or 0.0, r["created_at"] or 0.0)
                for r in self._rows(
                    "SELECT id, node_id, verdict, reward, time_us, speedup_eager, "
                    "speedup_compile, gpu_seconds, created_at FROM evaluations "
                    "WHERE run_id = ? ORDER BY id", (run_id,))]

    @guard
    def get_harness_versions(self, run_id: int) -> dict[int, int]:
        return {int(r["v"]): int(r["n"]) for r in self._rows(
            # an evaluation stored before the field existed counts as version 0 (older)
            "SELECT COALESCE(json_extract(evaluation_json, '$.harness_version'), 0) AS v, "
            "COUNT(*) AS n FROM evaluations WHERE run_id = ? GROUP BY v", (run_id,))}

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check``: "ok" for a sound file."""
        with self._lock:
            return str(self._one("PRAGMA integrity_check"))


def _run_from_row(r: dict[str, Any]) -> FrozenRun:
    cfg = RunConfig(task_name=r["task_name"] or "", task_path=r["task_path"] or "",
                    task_sha256=r["task_sha256"], seed=int(r["seed"] or 0),
                    toolchain=json.loads(r.get("toolchain_json") or "{}"),
                    settings=json.loads(r["config_json"] or "{}"))
    return FrozenRun(r["id"], r["name"], cfg, r["created_at"] or 0.0, r["status"])


def _node_from_row(r: dict[str, Any]) -> FrozenNode:
    move = Move(kind=r["move_kind"] or "seed", description=r["move_description"] or "",
                cost=r["move_cost"] or "cheap",
                params=json.loads(r["move_params_json"] or "{}"))
    return FrozenNode(
        id=r["id"], run_id=r["run_id"], parent_id=r["parent_id"], depth=r["depth"],
        state=NodeState.from_label(r["state"]), source_sha256=r["source_sha256"],
        origin=r["origin"] or "", move=move, source_path=r["source_path"] or "",
        attempts=r.get("attempts") or 0, created_at=r["created_at"] or 0.0,
        heartbeat_at=r["heartbeat_at"], finished_at=r["finished_at"],
        session_id=r.get("session_id"))

