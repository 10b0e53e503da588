"""``FrozenNode``: an immutable snapshot of one node as the store holds it (Optuna's
``FrozenTrial``). Storage returns new snapshots; nobody mutates one."""

from __future__ import annotations

from dataclasses import dataclass, field

from cutegen.codegen.rewriters.base import Move
from cutegen.search._state import NodeState

#: Id of the virtual root. Stored nodes start at 1; the root's children are the seeds.
ROOT = 0


@dataclass(frozen=True, slots=True)
class FrozenNode:
    """One candidate's place in the tree.

    Attributes:
        id: positive integer, unique in the store; ids grow in creation order.
        run_id: the run the node belongs to.
        parent_id: the parent node, or None for the root's children (seeds).
        depth: 1 for the root's children, parent's depth + 1 below.
        state: see :class:`NodeState`.
        source_sha256: content hash of the candidate source.
        source_path: where the source lies, relative to the run directory ("" in memory).
        origin: how the candidate was made (``CandidateSource.origin``).
        move: the move that made it from its parent.
        attempts: how often an evaluation of this node was lost (crash, infrastructure).
        created_at / heartbeat_at / finished_at: seconds since the epoch.
        session_id: the search session that last claimed the node.
    """

    id: int
    run_id: int
    parent_id: int | None
    depth: int
    state: NodeState
    source_sha256: str
    origin: str = ""
    move: Move = field(default_factory=lambda: Move(kind="seed", description="seed"))
    source_path: str = ""
    attempts: int = 0
    created_at: float = 0.0
    heartbeat_at: float | None = None
    finished_at: float | None = None
    session_id: int | None = None

    @property
    def parent_or_root(self) -> int:
        """The parent id with the virtual root (0) standing in for None."""
        return ROOT if self.parent_id is None else self.parent_id
