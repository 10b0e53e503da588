"""Node states: the life of one node in the search tree (Optuna's ``TrialState``).

A node is created ``WAITING`` (its candidate source is stored, nothing evaluated yet), moves
to ``RUNNING`` when the search claims it for evaluation, and ends ``COMPLETE`` (an
Evaluation was stored, whatever its verdict: a candidate's own failure is data) or
``FAILED`` (no real evaluation could be obtained: the search died while evaluating it more
often than allowed, or the evaluator raised an infrastructure error on the last attempt).
A ``RUNNING`` node whose search process died is put back to ``WAITING`` on resume.
"""

from __future__ import annotations

import enum


class NodeState(enum.IntEnum):
    """The state of a node; stored by name (lower case) so the database reads well."""

    WAITING = 0
    RUNNING = 1
    COMPLETE = 2
    FAILED = 3

    def is_finished(self) -> bool:
        """True for COMPLETE and FAILED: a finished node never changes again."""
        return self in (NodeState.COMPLETE, NodeState.FAILED)

    @property
    def label(self) -> str:
        return self.name.lower()

    @staticmethod
    def from_label(label: str) -> NodeState:
        """Parse a stored label ("waiting", ...).

        Raises:
            ValueError: the label names no state.
        """
        try:
            return NodeState[label.upper()]
        except KeyError:
            raise ValueError(f"unknown node state {label!r}") from None


#: Allowed transitions; everything else raises in the storage layer.
TRANSITIONS: dict[NodeState, frozenset[NodeState]] = {
    NodeState.WAITING: frozenset({NodeState.RUNNING, NodeState.FAILED}),
    NodeState.RUNNING: frozenset({NodeState.WAITING, NodeState.COMPLETE, NodeState.FAILED}),
    NodeState.COMPLETE: frozenset(),
    NodeState.FAILED: frozenset(),
}
