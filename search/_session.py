"""The search session's plumbing: process liveness, the heartbeat thread, resume checks."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet

from cutegen.codegen import toolchain
from cutegen.codegen.evaluation import HARNESS_VERSION, judged_elsewhere
from cutegen.codegen.scratch import process_alive
from cutegen.codegen.tasks import Task
from cutegen.errors import ResumeMismatchError
from cutegen.search.storage import BaseStorage, FrozenRun, Session

log = logging.getLogger("cutegen.search")

HOST = socket.gethostname()

#: Seconds without a heartbeat after which a session that recorded no end counts as dead
#: (the default of ``SearchParams.stale_after_s``).
STALE_AFTER_S = 120.0


def pid_alive(host: str, pid: int) -> bool:
    """Whether a session's process still runs. On another host we cannot tell and say yes
    (its heartbeat going stale is then what frees the run). A zombie counts as dead."""
    return host != HOST or process_alive(pid)


def session_live(s: Session, *, now: float, stale_after_s: float = STALE_AFTER_S) -> bool:
    """Whether a search session still runs: no end recorded, a heartbeat younger than
    ``stale_after_s`` and, on this host, its process alive. The one judgement behind
    ``cutegen status`` ("stopped"), ``cutegen rm`` (refused while live) and the report."""
    return (s.ended_at is None and now - s.heartbeat_at < stale_after_s
            and pid_alive(s.host, s.pid))


class Heartbeat:
    """A daemon thread stamping the session (and its RUNNING nodes) every ``interval_s``.

    A serial search has at most one RUNNING node, a parallel one several: the search adds
    a node when it claims it (:meth:`add`) and drops it when it is told or lost
    (:meth:`discard`).
    """

    def __init__(self, storage: BaseStorage, session_id: int, *, interval_s: float) -> None:
        self._storage = storage
        self._session_id = session_id
        self._interval = interval_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._nodes: set[int] = set()
        self._thread = threading.Thread(target=self._loop, name="cutegen-heartbeat",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, node_id: int) -> None:
        with self._lock:
            self._nodes.add(node_id)

    def discard(self, node_id: int) -> None:
        with self._lock:
            self._nodes.discard(node_id)

    @property
    def node_ids(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(sorted(self._nodes))

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                nodes = self.node_ids
                if not nodes:
                    self._storage.heartbeat(self._session_id, None)
                for nid in nodes:
                    self._storage.heartbeat(self._session_id, nid)
            except Exception:  # noqa: BLE001 - the main thread meets the same error on commit
                log.warning("heartbeat failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def check_resume(run: FrozenRun, task: Task, versions: Mapping[str, str],
                 harness: Mapping[int, int] | None = None) -> None:
    """Refuse to resume a run whose task file or toolchain changed, or whose evaluations
    another evaluator version judged (``harness``: ``{version: evaluations}``, from
    :meth:`~cutegen.search.storage.BaseStorage.get_harness_versions`): its verdicts, times
    and best would otherwise mix two evaluators, which can disagree (a kernel one called
    suspicious, the other correct).

    Raises:
        ResumeMismatchError: listing every difference.
    """
    changes: list[str] = []
    if task.sha256 != run.config.task_sha256:
        changes.append(f"task file {task.path}: sha256 {run.config.task_sha256[:12]} -> "
                       f"{task.sha256[:12]}")
    old = dict(run.config.toolchain)
    changes += toolchain.diff(old, dict(versions))
    if old.get("gpu") and versions.get("gpu") and old["gpu"] != versions["gpu"]:
        changes.append(f"gpu: {old['gpu']} -> {versions['gpu']}")
    other = judged_elsewhere(harness or {})
    if other:
        judged = ", ".join(f"{n} by version {v}" for v, n in sorted(other.items()))
        changes.append(f"evaluator: its evaluations were judged {judged}; this cutegen "
                       f"judges with version {HARNESS_VERSION}")
    if changes:
        raise ResumeMismatchError(
            f"cannot resume run {run.name!r}: what it was started with changed:\n  - "
            + "\n  - ".join(changes)
            + "\nStart a new run (cutegen search ... --run NEW_NAME) to search with the "
              "changed setup.")


class SetView(AbstractSet[str]):
    """A read-only view of a set (no copy per expansion as the run grows)."""

    __slots__ = ("_s",)

    def __init__(self, s: set[str]) -> None:
        self._s = s

    def __contains__(self, x: object) -> bool:
        return x in self._s

    def __iter__(self) -> Iterator[str]:
        return iter(self._s)

    def __len__(self) -> int:
        return len(self._s)
