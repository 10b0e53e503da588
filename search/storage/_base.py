"""``BaseStorage``: the one storage contract, implemented in memory and on SQLite.

The contract (Optuna's ``BaseStorage`` shape, held by the shared suite in
``tests/search_tests/test_storage_contract.py``):

* **Snapshots.** Every record returned (``FrozenRun``, ``FrozenNode``, ...) is frozen and
  never changes; reading again gives a new snapshot.
* **Node states.** A node is created WAITING; it may only move WAITING -> RUNNING | FAILED,
  RUNNING -> WAITING | COMPLETE | FAILED. A finished (COMPLETE/FAILED) node never changes:
  any attempt raises :class:`~cutegen.errors.NodeFinishedError`. Claiming a node is a
  compare-and-set (``expected=WAITING``), so two processes can never both claim it.
* **Append-only facts.** Evaluations (at most one per node), profile reports, lessons,
  prunes, best decisions and LLM calls are only ever inserted. Visit counts and values are
  derived from them (``cutegen.search._tree``), never stored.
* **Transactions.** Each method is atomic on its own; :meth:`atomic` groups several into one
  commit (nested blocks join the outer one). When a method raises, nothing it did remains.
* **Blobs.** Candidate sources and other large artifacts are content-addressed
  (``candidates/<sha256>.py``) and written completely before the row that names them, with
  paths relative to the run directory.
* **Runs.** A name is unique: ``create_run`` on an existing name raises
  :class:`~cutegen.errors.DuplicatedRunError` unless ``load_if_exists``; ``get_run`` on an
  unknown one raises :class:`~cutegen.errors.RunNotFoundError`. A wrong name never starts a
  fresh run.
* **Single writer per run.** One search session holds a run's lease (:meth:`open_session`);
  other processes may read (SQLite WAL) and may write other runs.
* **Errors.** Anything the backend cannot do (disk full, read-only file, corrupt database)
  raises :class:`~cutegen.errors.StorageError` after rolling the transaction back.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.codegen.llm.records import LLMCall
from cutegen.codegen.rewriters.base import Move
from cutegen.errors import ConfigError, NodeFinishedError, StorageError
from cutegen.search._node import FrozenNode
from cutegen.search._state import TRANSITIONS, NodeState
from cutegen.search.storage._records import (
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

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")

#: ``is_alive(host, pid)``: whether a session's process still runs (see ``open_session``).
AliveCheck = Callable[[str, int], bool]


def check_run_name(name: str) -> None:
    """Run names become folder names: letters, digits, ``._+-``, at most 128 characters.

    Raises:
        ConfigError: the name is not usable.
    """
    if not _RUN_NAME.match(name) or name in (".", ".."):
        raise ConfigError(
            f"invalid run name {name!r}: use letters, digits and . _ + - (at most 128), "
            "starting with a letter or digit")


@runtime_checkable
class SweepsTemporaries(Protocol):
    """A store that keeps blobs as files can remove the temporary files a killed writer
    left behind (the search does it when it reopens a run)."""

    def sweep_temporaries(self, run_id: int) -> int: ...


class BaseStorage(abc.ABC):
    """Abstract store of runs, nodes and their facts. See the module docstring."""

    # -- runs -----------------------------------------------------------------------
    @abc.abstractmethod
    def create_run(self, name: str, config: RunConfig, *, load_if_exists: bool = False
                   ) -> FrozenRun:
        """Create a run, or return the existing one of that name when ``load_if_exists``.

        Raises:
            DuplicatedRunError: the name exists and ``load_if_exists`` is False.
            ConfigError: the name is not a valid run name.
            StorageError: the store cannot be written.
        """

    @abc.abstractmethod
    def get_run(self, name: str) -> FrozenRun:
        """Raises:
            RunNotFoundError: no run has this name.
        """

    @abc.abstractmethod
    def list_runs(self) -> list[FrozenRun]:
        """All runs, oldest first."""

    @abc.abstractmethod
    def set_run_status(self, run_id: int, status: str) -> None:
        """Raises:
            ValueError: unknown status. StorageError: cannot write.
        """

    def delete_run(self, run_id: int) -> None:
        """Remove a run with everything stored for it (nodes, facts, files); lessons it
        taught other runs go too. The caller makes sure no live session holds it.

        Raises:
            StorageError: the store cannot do it.
        """
        raise StorageError(f"{type(self).__name__} cannot delete runs")

    # -- sessions (the run's lease) ----------------------------------------------------
    @abc.abstractmethod
    def open_session(self, run_id: int, *, host: str, pid: int, stale_after_s: float,
                     is_alive: AliveCheck) -> tuple[Session, list[Session]]:
        """Take the run's lease: end the open sessions that are dead, refuse a live one.

        A session is dead when its heartbeat is older than ``stale_after_s`` or
        ``is_alive(host, pid)`` says its process is gone.

        Returns:
            The new session, and the sessions this call ended as dead.

        Raises:
            RunLockedError: another live session holds the run.
        """

    @abc.abstractmethod
    def heartbeat(self, session_id: int, node_id: int | None = None) -> None:
        """Refresh the session's heartbeat, and the RUNNING node's when given."""

    @abc.abstractmethod
    def close_session(self, session_id: int, reason: str) -> None:
        """End a session ("stopped", "finished", "error", ...)."""

    @abc.abstractmethod
    def get_sessions(self, run_id: int) -> list[Session]:
        """All sessions of a run, oldest first."""

    # -- nodes ----------------------------------------------------------------------
    @abc.abstractmethod
    def add_node(self, run_id: int, *, parent_id: int | None, source: CandidateSource,
                 move: Move) -> FrozenNode:
        """Store the source blob, then a WAITING node for it.

        Raises:
            StorageError: unknown parent or run, or the blob or row cannot be written.
        """

    @abc.abstractmethod
    def set_node_state(self, node_id: int, state: NodeState, *,
                       expected: NodeState | None = None, session_id: int | None = None
                       ) -> FrozenNode:
        """Move a node to ``state`` (and stamp ``finished_at`` when it finishes).

        Args:
            expected: compare-and-set: only move it if it is in this state now.
            session_id: the claiming session (stored when moving to RUNNING).

        Raises:
            NodeFinishedError: the node is already COMPLETE or FAILED.
            StorageError: unknown node, a transition not allowed, or ``expected`` differs.
        """

    @abc.abstractmethod
    def get_node(self, node_id: int) -> FrozenNode:
        """Raises:
            StorageError: no such node.
        """

    @abc.abstractmethod
    def get_nodes(self, run_id: int, *, states: Collection[NodeState] | None = None
                  ) -> list[FrozenNode]:
        """Nodes of a run in id order, optionally only those in ``states``."""

    @abc.abstractmethod
    def requeue_node(self, node_id: int) -> FrozenNode:
        """Put one RUNNING node back to WAITING with ``attempts + 1`` (its evaluation was
        lost to an infrastructure failure).

        Raises:
            NodeFinishedError: the node is finished. StorageError: it is not RUNNING.
        """

    @abc.abstractmethod
    def requeue_stale_nodes(self, run_id: int, *, older_than: float,
                            dead_sessions: Collection[int] = ()) -> list[FrozenNode]:
        """Put RUNNING nodes whose heartbeat is older than ``older_than`` (epoch seconds),
        or whose session is in ``dead_sessions``, back to WAITING with ``attempts + 1``.

        Returns:
            The requeued nodes.
        """

    # -- blobs ----------------------------------------------------------------------
    @abc.abstractmethod
    def put_blob(self, run_id: int, folder: str, data: bytes, *, suffix: str = "") -> str:
        """Store bytes content-addressed under the run (``<folder>/<sha256><suffix>``),
        completely and atomically. Returns the path relative to the run directory."""

    @abc.abstractmethod
    def get_blob(self, run_id: int, relpath: str) -> bytes:
        """Raises:
            StorageError: missing, or its content does not match its address.
        """

    def run_dir(self, run_id: int) -> Path | None:
        """The run's folder on disk, or None for a store without one (in memory)."""
        return None

    def get_source(self, node_id: int) -> str:
        """The candidate source of a node.

        Raises:
            StorageError: the blob is missing or damaged.
        """
        node = self.get_node(node_id)
        return self.get_blob(node.run_id, node.source_path).decode("utf-8")

    # -- evaluations ----------------------------------------------------------------
    @abc.abstractmethod
    def record_evaluation(self, node_id: int, evaluation: Evaluation, *, reward: float,
                          gpu_seconds: float = 0.0) -> int:
        """Append the node's evaluation (at most one per node). Returns the row id.

        Raises:
            StorageError: the node already has one, or cannot write.
        """

    @abc.abstractmethod
    def get_evaluation(self, node_id: int) -> Evaluation | None:
        """The full evaluation of a node, or None."""

    @abc.abstractmethod
    def get_results(self, run_id: int) -> list[StoredResult]:
        """The indexed columns of every evaluation of a run, in commit order."""

    def get_harness_versions(self, run_id: int) -> dict[int, int]:
        """How many of the run's evaluations each evaluator version judged
        (:data:`~cutegen.codegen.evaluation.HARNESS_VERSION` when each was computed):
        ``{version: count}``, empty for a run with no evaluation. A run judged by another
        version than this cutegen's is not continued (its verdicts and times would mix
        two evaluators)."""
        counts: dict[int, int] = {}
        for r in self.get_results(run_id):
            ev = self.get_evaluation(r.node_id)
            if ev is not None:
                counts[ev.harness_version] = counts.get(ev.harness_version, 0) + 1
        return counts

    # -- append-only side facts -----------------------------------------------------
    @abc.abstractmethod
    def record_profile(self, record: ProfileRecord) -> None:
        """Append a profile report."""

    @abc.abstractmethod
    def get_profiles(self, node_id: int) -> list[ProfileRecord]:
        """Profile reports of a node, oldest first."""

    @abc.abstractmethod
    def add_lesson(self, record: LessonRecord) -> None:
        """Append a lesson."""

    @abc.abstractmethod
    def get_lessons(self, *, run_id: int | None = None, task_name: str | None = None,
                    task_prefix: str | None = None, parent_sha256: str | None = None,
                    limit: int | None = None) -> list[LessonRecord]:
        """Lessons across all runs of the store matching every filter given, newest first.

        ``task_prefix`` matches task names equal to it or starting with ``prefix + "_"``.
        """

    @abc.abstractmethod
    def record_prune(self, record: PruneRecord) -> bool:
        """Append a prune decision; a second one for (run, node, kind) is ignored.

        Returns:
            True when a row was added.
        """

    @abc.abstractmethod
    def get_prunes(self, run_id: int) -> list[PruneRecord]:
        """Prune decisions of a run, oldest first."""

    @abc.abstractmethod
    def record_best(self, record: BestDecision) -> None:
        """Append a gated-best decision."""

    @abc.abstractmethod
    def get_best_history(self, run_id: int) -> list[BestDecision]:
        """Gated-best decisions of a run, oldest first."""

    @abc.abstractmethod
    def record_llm_call(self, run_id: int, call: LLMCall) -> int:
        """Append one attempt of an LLM call to a run, the client's record kept whole
        (prompt, reply, tokens, cost and how it was arrived at). Returns its row id."""

    @abc.abstractmethod
    def get_llm_calls(self, run_id: int) -> list[LLMCall]:
        """A run's LLM call attempts, oldest first, as the records that were stored."""

    @abc.abstractmethod
    def llm_spent_usd(self, run_id: int) -> float:
        """Dollars spent on LLM calls by a run (retries included)."""

    @abc.abstractmethod
    def get_baseline(self, task_sha256: str, environment: str) -> Baseline | None:
        """The cached baseline timings of a task in an environment, if any."""

    @abc.abstractmethod
    def put_baseline(self, baseline: Baseline) -> None:
        """Cache baseline timings (the first one stored for a key is kept)."""

    # -- transactions and lifetime --------------------------------------------------
    @abc.abstractmethod
    def atomic(self) -> AbstractContextManager[None]:
        """Group writes into one commit; on an exception nothing of the block remains.

        Raises:
            StorageError: the commit failed (the block is rolled back).
        """

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources; the store must not be used afterwards."""

    # -- concrete helpers -----------------------------------------------------------
    def get_best_node(self, run_id: int) -> FrozenNode | None:
        """The run's current best: the last node the gate accepted."""
        accepted = [d for d in self.get_best_history(run_id) if d.accepted]
        return self.get_node(accepted[-1].node_id) if accepted else None

    def n_nodes(self, run_id: int, *, states: Collection[NodeState] | None = None) -> int:
        return len(self.get_nodes(run_id, states=states))

    def verdict_counts(self, run_id: int) -> dict[str, int]:
        """How many evaluations of a run reached each verdict."""
        counts: dict[str, int] = {}
        for r in self.get_results(run_id):
            counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
        return counts

    def lineage(self, node_id: int) -> list[FrozenNode]:
        """The node and its ancestors, from the seed down to the node."""
        chain: list[FrozenNode] = []
        n: int | None = node_id
        while n is not None:
            node = self.get_node(n)
            chain.append(node)
            n = node.parent_id
        return chain[::-1]


def check_transition(node: FrozenNode, state: NodeState, expected: NodeState | None) -> None:
    """Enforce the node-state rules of the contract.

    Raises:
        NodeFinishedError: the node is finished.
        StorageError: ``expected`` differs from the current state, or the move is not allowed.
    """
    if node.state.is_finished():
        raise NodeFinishedError(f"node {node.id} is already {node.state.label}")
    if expected is not None and node.state != expected:
        raise StorageError(
            f"node {node.id} is {node.state.label}, not {expected.label} (claimed elsewhere?)")
    if state not in TRANSITIONS[node.state]:
        raise StorageError(f"node {node.id}: {node.state.label} -> {state.label} not allowed")


def locked_message(s: Session, now: float) -> str:
    return (f"run is being searched by another process (pid {s.pid} on {s.host}, last "
            f"heartbeat {now - s.heartbeat_at:.0f} s ago); stop it first, or wait until its "
            "heartbeat is stale")


def iter_chunks(seq: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
    """Split ids for ``IN (...)`` queries below SQLite's variable limit."""
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


class StoreBaselineCache:
    """``cutegen.codegen.backend.BaselineCache`` over a store's ``baselines`` table, so
    eager / torch.compile timings survive restarts and are shared by runs of a task."""

    def __init__(self, storage: BaseStorage) -> None:
        self._storage = storage

    def get(self, task_sha256: str, env_fingerprint: str) -> dict[str, Any] | None:
        b = self._storage.get_baseline(task_sha256, env_fingerprint)
        return dict(b.value) if b is not None else None

    def put(self, task_sha256: str, env_fingerprint: str, value: dict[str, Any]) -> None:
        self._storage.put_baseline(Baseline(task_sha256, env_fingerprint, dict(value)))


class StoreCallRecorder:
    """The LLM client's :class:`~cutegen.codegen.llm.CallRecorder` for one run of a store.

    Every attempt becomes a row of the run's ``llm_calls``, committed before the client goes
    on, and the dollars spent are summed from those rows, so the cost ledger survives a
    restart: a resumed run sees what the killed one spent.
    """

    def __init__(self, storage: BaseStorage, run_id: int) -> None:
        self.storage = storage
        self.run_id = run_id

    def record(self, call: LLMCall) -> None:
        self.storage.record_llm_call(self.run_id, call)

    def spent_usd(self) -> float:
        return float(self.storage.llm_spent_usd(self.run_id))
