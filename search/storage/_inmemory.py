"""``InMemoryStorage``: the contract held in Python dicts (tests, benchmarks, dry runs).

Transactions keep an undo log: every mutation inside :meth:`atomic` registers how to revert
it, and an exception replays the log backwards, so a failed block leaves nothing behind,
as SQLite's rollback does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.codegen.llm.records import LLMCall
from cutegen.codegen.rewriters.base import Move
from cutegen.errors import DuplicatedRunError, RunLockedError, RunNotFoundError, StorageError
from cutegen.search._node import FrozenNode
from cutegen.search._state import NodeState
from cutegen.search.storage._base import (
    AliveCheck,
    BaseStorage,
    check_run_name,
    check_transition,
    locked_message,
)
from cutegen.search.storage._records import (
    RUN_STATUSES,
    Baseline,
    BestDecision,
    FrozenRun,
    LessonRecord,
    ProfileRecord,
    PruneRecord,
    RunConfig,
    Session,
    StoredResult,
)

_MISSING = object()


class InMemoryStorage(BaseStorage):
    """The storage contract in memory. Thread-safe for the search's heartbeat thread."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._undo: list[Callable[[], None]] | None = None
        self._ids: dict[str, int] = {}
        self._runs: dict[int, FrozenRun] = {}
        self._run_names: dict[str, int] = {}
        self._sessions: dict[int, Session] = {}
        self._nodes: dict[int, FrozenNode] = {}
        self._run_nodes: dict[int, list[int]] = {}
        self._blobs: dict[tuple[int, str], bytes] = {}
        self._evals: dict[int, Evaluation] = {}
        self._results: dict[int, list[StoredResult]] = {}
        self._profiles: dict[int, list[ProfileRecord]] = {}
        self._lessons: list[LessonRecord] = []
        self._lessons_by_parent: dict[str, list[LessonRecord]] = {}
        self._prunes: dict[int, list[PruneRecord]] = {}
        self._prune_keys: set[tuple[int, int, str]] = set()
        self._best: dict[int, list[BestDecision]] = {}
        self._llm: list[tuple[int, LLMCall]] = []
        self._baselines: dict[tuple[str, str], Baseline] = {}

    # -- undo log ---------------------------------------------------------------------
    def _set(self, d: dict[Any, Any], key: Any, value: Any) -> None:
        old = d.get(key, _MISSING)
        d[key] = value
        if self._undo is not None:
            self._undo.append(lambda: d.__setitem__(key, old) if old is not _MISSING
                              else d.pop(key, None))

    def _append(self, lst: list[Any], value: Any) -> None:
        lst.append(value)
        if self._undo is not None:
            self._undo.append(lst.pop)

    def _add(self, s: set[Any], value: Any) -> None:
        s.add(value)
        if self._undo is not None:
            self._undo.append(lambda: s.discard(value))

    def _next_id(self, kind: str) -> int:
        n = self._ids.get(kind, 0) + 1
        self._set(self._ids, kind, n)
        return n

    @contextmanager
    def atomic(self) -> Iterator[None]:
        with self._lock:
            if self._undo is not None:
                yield
                return
            self._undo = []
            try:
                yield
            except BaseException:
                for undo in reversed(self._undo):
                    undo()
                raise
            finally:
                self._undo = None

    # -- runs -------------------------------------------------------------------------
    def create_run(self, name: str, config: RunConfig, *, load_if_exists: bool = False
                   ) -> FrozenRun:
        check_run_name(name)
        with self.atomic():
            if name in self._run_names:
                if load_if_exists:
                    return self._runs[self._run_names[name]]
                raise DuplicatedRunError(f"a run named {name!r} already exists")
            run = FrozenRun(self._next_id("run"), name, config, self._clock(), "created")
            self._set(self._runs, run.id, run)
            self._set(self._run_names, name, run.id)
            self._set(self._run_nodes, run.id, [])
            return run

    def get_run(self, name: str) -> FrozenRun:
        with self._lock:
            if name not in self._run_names:
                raise RunNotFoundError(f"no run named {name!r}")
            return self._runs[self._run_names[name]]

    def list_runs(self) -> list[FrozenRun]:
        with self._lock:
            return [self._runs[k] for k in sorted(self._runs)]

    def set_run_status(self, run_id: int, status: str) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        with self.atomic():
            self._set(self._runs, run_id, dataclasses.replace(self._run(run_id), status=status))

    def _run(self, run_id: int) -> FrozenRun:
        if run_id not in self._runs:
            raise StorageError(f"no run with id {run_id}")
        return self._runs[run_id]

    # -- sessions ---------------------------------------------------------------------
    def open_session(self, run_id: int, *, host: str, pid: int, stale_after_s: float,
                     is_alive: AliveCheck) -> tuple[Session, list[Session]]:
        with self.atomic():
            self._run(run_id)
            now = self._clock()
            ended: list[Session] = []
            for s in self.get_sessions(run_id):
                if s.ended_at is not None:
                    continue
                if s.heartbeat_at >= now - stale_after_s and is_alive(s.host, s.pid):
                    raise RunLockedError(locked_message(s, now))
                dead = dataclasses.replace(s, ended_at=s.heartbeat_at, end_reason="died")
                self._set(self._sessions, s.id, dead)
                ended.append(dead)
            s = Session(self._next_id("session"), run_id, host, pid, now, now)
            self._set(self._sessions, s.id, s)
            return s, ended

    def heartbeat(self, session_id: int, node_id: int | None = None) -> None:
        with self.atomic():
            now = self._clock()
            s = self._sessions[session_id]
            self._set(self._sessions, session_id, dataclasses.replace(s, heartbeat_at=now))
            if node_id is not None:
                n = self._node(node_id)
                if n.state == NodeState.RUNNING:
                    self._set(self._nodes, node_id, dataclasses.replace(n, heartbeat_at=now))

    def close_session(self, session_id: int, reason: str) -> None:
        with self.atomic():
            s = self._sessions[session_id]
            now = self._clock()
            self._set(self._sessions, session_id,
                      dataclasses.replace(s, ended_at=now, heartbeat_at=now, end_reason=reason))

    def get_sessions(self, run_id: int) -> list[Session]:
        with self._lock:
            return [s for k, s in sorted(self._sessions.items()) if s.run_id == run_id]

    # -- nodes ------------------------------------------------------------------------
    def add_node(self, run_id: int, *, parent_id: int | None, source: CandidateSource,
                 move: Move) -> FrozenNode:
        with self.atomic():
            self._run(run_id)
            depth = 1
            if parent_id is not None:
                parent = self._node(parent_id)
                if parent.run_id != run_id:
                    raise StorageError(f"node {parent_id} belongs to another run")
                depth = parent.depth + 1
            rel = self.put_blob(run_id, "candidates", source.code.encode("utf-8"), suffix=".py")
            node = FrozenNode(
                id=self._next_id("node"), run_id=run_id, parent_id=parent_id, depth=depth,
                state=NodeState.WAITING, source_sha256=source.sha256, origin=source.origin,
                move=move, source_path=rel, created_at=self._clock())
            self._set(self._nodes, node.id, node)
            self._append(self._run_nodes[run_id], node.id)
            return node

    def _node(self, node_id: int) -> FrozenNode:
        if node_id not in self._nodes:
            raise StorageError(f"no node with id {node_id}")
        return self._nodes[node_id]

    def set_node_state(self, node_id: int, state: NodeState, *,
                       expected: NodeState | None = None, session_id: int | None = None
                       ) -> FrozenNode:
        with self.atomic():
            n = self._node(node_id)
            check_transition(n, state, expected)
            now = self._clock()
            changes: dict[str, Any] = {"state": state}
            if state == NodeState.RUNNING:
                changes.update(heartbeat_at=now, session_id=session_id)
            if state.is_finished():
                changes["finished_at"] = now
            new = dataclasses.replace(n, **changes)
            self._set(self._nodes, node_id, new)
            return new

    def get_node(self, node_id: int) -> FrozenNode:
        with self._lock:
            return self._node(node_id)

    def get_nodes(self, run_id: int, *, states: Collection[NodeState] | None = None
                  ) -> list[FrozenNode]:
        with self._lock:
            nodes = (self._nodes[i] for i in self._run_nodes.get(run_id, ()))
            return [n for n in nodes if states is None or n.state in states]

    def requeue_node(self, node_id: int) -> FrozenNode:
        with self.atomic():
            n = self._node(node_id)
            check_transition(n, NodeState.WAITING, NodeState.RUNNING)
            new = dataclasses.replace(n, state=NodeState.WAITING, attempts=n.attempts + 1)
            self._set(self._nodes, node_id, new)
            return new

    def requeue_stale_nodes(self, run_id: int, *, older_than: float,
                            dead_sessions: Collection[int] = ()) -> list[FrozenNode]:
        out: list[FrozenNode] = []
        with self.atomic():
            for n in self.get_nodes(run_id, states=(NodeState.RUNNING,)):
                if (n.heartbeat_at or 0.0) < older_than or n.session_id in dead_sessions:
                    new = dataclasses.replace(n, state=NodeState.WAITING,
                                              attempts=n.attempts + 1)
                    self._set(self._nodes, n.id, new)
                    out.append(new)
        return out

    # -- blobs ------------------------------------------------------------------------
    def put_blob(self, run_id: int, folder: str, data: bytes, *, suffix: str = "") -> str:
        rel = f"{folder}/{hashlib.sha256(data).hexdigest()}{suffix}"
        with self.atomic():
            self._set(self._blobs, (run_id, rel), bytes(data))
        return rel

    def get_blob(self, run_id: int, relpath: str) -> bytes:
        with self._lock:
            if (run_id, relpath) not in self._blobs:
                raise StorageError(f"no blob {relpath!r} in run {run_id}")
            return self._blobs[(run_id, relpath)]

    # -- evaluations ------------------------------------------------------------------
    def record_evaluation(self, node_id: int, evaluation: Evaluation, *, reward: float,
                          gpu_seconds: float = 0.0) -> int:
        with self.atomic():
            n = self._node(node_id)
            if node_id in self._evals:
                raise StorageError(f"node {node_id} already has an evaluation")
            if evaluation.candidate_sha256 not in ("", n.source_sha256):
                raise StorageError(f"evaluation of {evaluation.candidate_sha256[:12]} "
                                   f"given for node {node_id} ({n.source_sha256[:12]})")
            rid = self._next_id("evaluation")
            res = StoredResult(rid, node_id, evaluation.verdict, float(reward),
                               evaluation.time_us, evaluation.speedup_eager,
                               evaluation.speedup_compile, float(gpu_seconds), self._clock())
            self._set(self._evals, node_id, evaluation)
            self._append(self._results.setdefault(n.run_id, []), res)
            return rid

    def get_evaluation(self, node_id: int) -> Evaluation | None:
        with self._lock:
            return self._evals.get(node_id)

    def get_results(self, run_id: int) -> list[StoredResult]:
        with self._lock:
            return list(self._results.get(run_id, ()))

    # -- side facts -------------------------------------------------------------------
    def record_profile(self, record: ProfileRecord) -> None:
        with self.atomic():
            self._node(record.node_id)
            self._append(self._profiles.setdefault(record.node_id, []), _stamp(record, self))

    def get_profiles(self, node_id: int) -> list[ProfileRecord]:
        with self._lock:
            return list(self._profiles.get(node_id, ()))

    def add_lesson(self, record: LessonRecord) -> None:
        with self.atomic():
            self._node(record.node_id)
            rec = _stamp(record, self)
            self._append(self._lessons, rec)
            self._append(self._lessons_by_parent.setdefault(rec.parent_sha256, []), rec)

    def get_lessons(self, *, run_id: int | None = None, task_name: str | None = None,
                    task_prefix: str | None = None, parent_sha256: str | None = None,
                    limit: int | None = None) -> list[LessonRecord]:
        with self._lock:
            out = []
            pool = (self._lessons if parent_sha256 is None
                    else self._lessons_by_parent.get(parent_sha256, []))
            for r in reversed(pool):
                if ((run_id is None or r.run_id == run_id)
                        and (task_name is None or r.task_name == task_name)
                        and (task_prefix is None or r.task_name == task_prefix
                             or r.task_name.startswith(task_prefix + "_"))
                        and (parent_sha256 is None or r.parent_sha256 == parent_sha256)):
                    out.append(r)
                    if limit is not None and len(out) >= limit:
                        break
            return out

    def record_prune(self, record: PruneRecord) -> bool:
        key = (record.run_id, record.node_id, record.kind)
        with self.atomic():
            if key in self._prune_keys:
                return False
            self._add(self._prune_keys, key)
            self._append(self._prunes.setdefault(record.run_id, []), _stamp(record, self))
            return True

    def get_prunes(self, run_id: int) -> list[PruneRecord]:
        with self._lock:
            return list(self._prunes.get(run_id, ()))

    def record_best(self, record: BestDecision) -> None:
        with self.atomic():
            self._node(record.node_id)
            self._append(self._best.setdefault(record.run_id, []), _stamp(record, self))

    def get_best_history(self, run_id: int) -> list[BestDecision]:
        with self._lock:
            return list(self._best.get(run_id, ()))

    def record_llm_call(self, run_id: int, call: LLMCall) -> int:
        with self.atomic():
            self._run(run_id)
            self._append(self._llm, (run_id, call))
            return len(self._llm)

    def get_llm_calls(self, run_id: int) -> list[LLMCall]:
        with self._lock:
            return [c for r, c in self._llm if r == run_id]

    def llm_spent_usd(self, run_id: int) -> float:
        with self._lock:
            return float(sum(c.cost_usd or 0.0 for r, c in self._llm if r == run_id))

    def get_baseline(self, task_sha256: str, environment: str) -> Baseline | None:
        with self._lock:
            return self._baselines.get((task_sha256, environment))

    def put_baseline(self, baseline: Baseline) -> None:
        key = (baseline.task_sha256, baseline.environment)
        with self.atomic():
            if key not in self._baselines:
                self._set(self._baselines, key, _stamp(baseline, self))


def _stamp(record: Any, storage: InMemoryStorage) -> Any:
    return dataclasses.replace(record, created_at=record.created_at or storage._clock())

