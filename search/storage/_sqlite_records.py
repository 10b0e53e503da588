"""The append-only side tables of ``SqliteStorage`` (profiles, lessons, prunes, best
decisions, LLM calls, baselines), and the sqlite3-error translation both halves share."""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from cutegen.codegen.llm.records import LLMCall
from cutegen.errors import StorageError
from cutegen.profilers import Finding
from cutegen.search.storage._records import (
    Baseline,
    BestDecision,
    LessonRecord,
    ProfileRecord,
    PruneRecord,
)

F = TypeVar("F", bound=Callable[..., Any])


def wrap_sqlite_error(e: sqlite3.Error, what: str) -> StorageError:
    """Translate a sqlite3 error into a StorageError that says what to do about it."""
    msg = str(e)
    if "disk is full" in msg or "disk I/O" in msg:
        hint = " (disk full? free some space, then `cutegen resume`)"
    elif "readonly" in msg:
        hint = " (the store is read-only: check the permissions of the file and its folder)"
    elif "locked" in msg or "busy" in msg:
        hint = " (another process held the store's lock for longer than busy_timeout)"
    else:
        hint = ""
    return StorageError(f"{what}: {msg}{hint}")


def guard(fn: F) -> F:
    """Turn sqlite3 errors escaping a storage method into StorageError."""

    @functools.wraps(fn)
    def inner(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except sqlite3.Error as e:
            raise wrap_sqlite_error(e, fn.__name__) from e

    return inner  # type: ignore[return-value]


class SqliteRecordsMixin:
    """Side-table methods of :class:`~cutegen.search.storage.SqliteStorage`."""

    _clock: Callable[[], float]
    _rows: Callable[..., list[dict[str, Any]]]
    _one: Callable[..., Any]
    _insert: Callable[[str, dict[str, Any]], int]
    atomic: Callable[[], AbstractContextManager[None]]

    def _run_of(self, node_id: int) -> int:
        run_id = self._one("SELECT run_id FROM nodes WHERE id = ?", (node_id,))
        if run_id is None:
            raise StorageError(f"no node with id {node_id}")
        return int(run_id)

    @guard
    def record_profile(self, record: ProfileRecord) -> None:
        with self.atomic():
            self._insert("profile_reports", {
                "run_id": self._run_of(record.node_id), "node_id": record.node_id,
                "profiler": record.profiler, "status": record.status,
                "findings_json": json.dumps([f.to_dict() for f in record.findings]),
                "artifact_path": record.artifact_path, "seconds": record.seconds,
                "error": record.error, "created_at": record.created_at or self._clock()})

    @guard
    def get_profiles(self, node_id: int) -> list[ProfileRecord]:
        return [ProfileRecord(r["node_id"], r["profiler"], r["status"],
                              stored_findings(r["findings_json"], r["guidance_json"]),
                              r["artifact_path"], r["seconds"] or 0.0, r["created_at"] or 0.0,
                              r.get("error") or "")
                for r in self._rows("SELECT * FROM profile_reports WHERE node_id = ? "
                                    "ORDER BY id", (node_id,))]

    @guard
    def add_lesson(self, record: LessonRecord) -> None:
        with self.atomic():
            row = dataclasses.asdict(record)
            row["created_at"] = record.created_at or self._clock()
            self._insert("lessons", row)

    @guard
    def get_lessons(self, *, run_id: int | None = None, task_name: str | None = None,
                    task_prefix: str | None = None, parent_sha256: str | None = None,
                    limit: int | None = None) -> list[LessonRecord]:
        where: list[str] = []
        params: list[Any] = []
        for col, val in (("run_id", run_id), ("task_name", task_name),
                         ("parent_sha256", parent_sha256)):
            if val is not None:
                where.append(f"{col} = ?")
                params.append(val)
        if task_prefix is not None:
            where.append("(task_name = ? OR substr(task_name, 1, ?) = ?)")
            params += [task_prefix, len(task_prefix) + 1, task_prefix + "_"]
        sql = "SELECT * FROM lessons"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        names = [f.name for f in dataclasses.fields(LessonRecord)]
        return [LessonRecord(**{k: r[k] for k in names}) for r in self._rows(sql, params)]

    @guard
    def record_prune(self, record: PruneRecord) -> bool:
        with self.atomic():
            if self._one("SELECT 1 FROM prunes WHERE run_id = ? AND node_id = ? AND kind = ?",
                         (record.run_id, record.node_id, record.kind)):
                return False
            self._insert("prunes", {
                "run_id": record.run_id, "node_id": record.node_id, "kind": record.kind,
                "reason": record.reason, "details_json": json.dumps(dict(record.details)),
                "created_at": record.created_at or self._clock()})
            return True

    @guard
    def get_prunes(self, run_id: int) -> list[PruneRecord]:
        return [PruneRecord(r["run_id"], r["node_id"], r["kind"], r["reason"] or "",
                            json.loads(r["details_json"] or "{}"), r["created_at"] or 0.0)
                for r in self._rows("SELECT * FROM prunes WHERE run_id = ? ORDER BY id",
                                    (run_id,))]

    @guard
    def record_best(self, record: BestDecision) -> None:
        with self.atomic():
            row = dataclasses.asdict(record)
            row["accepted"] = int(record.accepted)
            row["created_at"] = record.created_at or self._clock()
            self._insert("best_history", row)

    @guard
    def get_best_history(self, run_id: int) -> list[BestDecision]:
        names = [f.name for f in dataclasses.fields(BestDecision)]
        out = []
        for r in self._rows("SELECT * FROM best_history WHERE run_id = ? ORDER BY id",
                            (run_id,)):
            kw = {k: r[k] for k in names}
            kw["accepted"] = bool(kw["accepted"])
            out.append(BestDecision(**kw))
        return out

    @guard
    def record_llm_call(self, run_id: int, call: LLMCall) -> int:
        with self.atomic():
            return self._insert("llm_calls", _llm_row(run_id, call, self._clock()))

    @guard
    def get_llm_calls(self, run_id: int) -> list[LLMCall]:
        return [_llm_call(r) for r in self._rows(
            "SELECT * FROM llm_calls WHERE run_id = ? ORDER BY id", (run_id,))]

    @guard
    def llm_spent_usd(self, run_id: int) -> float:
        return float(self._one("SELECT coalesce(sum(cost_usd), 0) FROM llm_calls "
                               "WHERE run_id = ?", (run_id,)))

    @guard
    def get_baseline(self, task_sha256: str, environment: str) -> Baseline | None:
        rows = self._rows("SELECT * FROM baselines WHERE task_sha256 = ? AND environment = ?",
                          (task_sha256, environment))
        if not rows:
            return None
        r = rows[0]
        return Baseline(r["task_sha256"], r["environment"], json.loads(r["value_json"] or "{}"),
                        r["created_at"] or 0.0)

    @guard
    def put_baseline(self, baseline: Baseline) -> None:
        with self.atomic():
            if self.get_baseline(baseline.task_sha256, baseline.environment) is not None:
                return
            self._insert("baselines", {
                "task_sha256": baseline.task_sha256, "environment": baseline.environment,
                "value_json": json.dumps(dict(baseline.value), sort_keys=True),
                "created_at": baseline.created_at or self._clock()})


def stored_findings(findings_json: str | None, guidance_json: str | None) -> tuple[Finding, ...]:
    """A stored report's findings. Rows written before findings carried every fact kept
    their guidance in a column of its own: a line with no hint finding behind it becomes a
    ``hint.legacy`` finding, so old runs read (and display) as they did."""
    found = [Finding.from_dict(d) for d in json.loads(findings_json or "[]")]
    known = {f.summary for f in found}
    for i, line in enumerate(json.loads(guidance_json or "[]")):
        if line and line not in known and "\n" not in line:
            found.append(Finding(f"hint.legacy{i}", "", line))
    return tuple(found)


def _llm_row(run_id: int, call: LLMCall, now: float) -> dict[str, Any]:
    """One ``llm_calls`` row: every field of the record, plus the run. ``node_id`` stays
    empty (the node is made after the call; traces find it by ``candidate_sha256``), and
    ``created_at`` is when the attempt started, as in rows written before ``started_at``."""
    row = dataclasses.asdict(call)
    row.update(run_id=run_id, node_id=None, created_at=call.started_at or now,
               # the column is NOT NULL: an unpriced call is 0 with cost_basis "unpriced"
               cost_usd=call.cost_usd or 0.0,
               streamed=int(call.streamed), structured=int(call.structured))
    return row


def _llm_call(r: Mapping[str, Any]) -> LLMCall:
    """The record a row was written from. Rows from before schema step m004 lack
    ``base_url``, ``cost_basis``, ``started_at``, ``streamed`` and ``structured``: their
    basis reads "unrecorded" and their start is ``created_at``."""
    basis = r["cost_basis"] or "unrecorded"
    return LLMCall(
        call_id=r["call_id"] or "", attempt=r["attempt"] or 1, purpose=r["purpose"] or "",
        model=r["model"], base_url=r["base_url"] or "", system=r["system"] or "",
        prompt=r["prompt"] or "", response=r["response"] or "",
        finish_reason=r["finish_reason"] or "", prompt_tokens=r["prompt_tokens"],
        completion_tokens=r["completion_tokens"],
        cost_usd=None if basis == "unpriced" else r["cost_usd"], cost_basis=basis,
        latency_s=r["latency_s"] or 0.0, outcome=r["outcome"], error=r["error"] or "",
        http_status=r["http_status"], parent_sha256=r["parent_sha256"],
        candidate_sha256=r["candidate_sha256"],
        started_at=r["started_at"] if r["started_at"] is not None else r["created_at"] or 0.0,
        streamed=bool(r["streamed"]), structured=bool(r["structured"]))
