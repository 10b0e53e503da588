"""Lessons: what each move did relative to its parent (the search's memory).

Every evaluated child of a real parent leaves one lesson: the move, the outcome
(``faster`` / ``slower`` / ``same`` beyond a noise tolerance, or the failure: ``compile_error``,
``static_reject``, ``wrong``, ``crash``, ``timeout``, ``cheat``; ``compiled`` / ``untimed``
when nothing was timed), the speed ratio and both times. Lessons are stored per run and read
across runs and tasks of the same store:

* :meth:`Lessons.views` gives rewriters the lessons of this task first, then of the same
  task family (the name up to its first ``_``), newest first, one per (move, outcome);
* :meth:`Lessons.banned_moves` gives the moves that failed the same way at least twice on
  the same parent source; the search passes them to the rewriter as
  ``RewriteContext.banned_moves`` so they are not tried a third time.

Speed ratios compare speedups over eager when both sides have them (each measured
interleaved with its own eager baseline, so drifting clocks cancel out), else medians.
"""

from __future__ import annotations

from collections import Counter

from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.rewriters.base import LessonView
from cutegen.search._node import FrozenNode
from cutegen.search.storage import BaseStorage, LessonRecord, StoredResult

#: Outcome name per :attr:`Verdict.failure_kind`.
FAILURE_OUTCOMES = {"static": "static_reject", "compile": "compile_error", "wrong": "wrong",
                    "crash": "crash", "timeout": "timeout", "cheat": "cheat"}


def speed_ratio(parent: StoredResult, child: StoredResult) -> float | None:
    """Child speed over parent speed (> 1 = faster), or None when either was not timed."""
    if parent.speedup_eager and child.speedup_eager:
        return child.speedup_eager / parent.speedup_eager
    if parent.time_us and child.time_us:
        return parent.time_us / child.time_us
    return None


def classify(parent: StoredResult, child: StoredResult, *, tolerance: float
             ) -> tuple[str, float | None]:
    """The outcome of a move and its speed ratio.

    Args:
        parent / child: the stored results of the two nodes.
        tolerance: relative change treated as noise ("same"), e.g. 0.02.
    """
    if not child.verdict.ok:
        kind = child.verdict.failure_kind
        return FAILURE_OUTCOMES.get(kind, kind), None
    ratio = speed_ratio(parent, child)
    if ratio is None:
        return ("compiled" if child.verdict == Verdict.COMPILED else "untimed"), None
    if ratio > 1 + tolerance:
        return "faster", ratio
    if ratio < 1 / (1 + tolerance):
        return "slower", ratio
    return "same", ratio


def lesson_text(*, description: str, outcome: str, ratio: float | None, task_name: str,
                parent_time_us: float | None, child_time_us: float | None) -> str:
    """One line a person or a prompt can use, e.g. "vec 4->8 on softmax_fp32: 1.31x faster
    (120.0 us -> 91.6 us)"."""
    head = f"{description} on {task_name}: "
    if ratio is None:
        return head + outcome.replace("_", " ")
    times = (f" ({parent_time_us:.1f} us -> {child_time_us:.1f} us)"
             if parent_time_us and child_time_us else "")
    if outcome == "same":
        return head + f"no change beyond noise ({ratio:.2f}x){times}"
    shown = ratio if ratio >= 1 else 1 / ratio
    return head + f"{shown:.2f}x {outcome}{times}"


class Lessons:
    """The Lessons a run writes and the Lessons its rewriters read (this run's, this
    task's and its family's across the store), through the store."""

    def __init__(self, storage: BaseStorage, *, run_id: int, task_name: str, task_sha256: str,
                 tolerance: float, limit: int = 12, ban_after: int = 2) -> None:
        self._storage = storage
        self._run_id = run_id
        self._task_name = task_name
        self._task_sha = task_sha256
        self.tolerance = tolerance
        self._limit = limit
        self._ban_after = ban_after

    def lesson(self, *, node: FrozenNode, parent: FrozenNode, parent_result: StoredResult,
               child_result: StoredResult) -> LessonRecord:
        """The lesson a finished child teaches (the caller stores it in its commit)."""
        outcome, ratio = classify(parent_result, child_result, tolerance=self.tolerance)
        return LessonRecord(
            run_id=self._run_id, node_id=node.id, parent_id=parent.id,
            parent_sha256=parent.source_sha256, task_name=self._task_name,
            task_sha256=self._task_sha, move_kind=node.move.kind, move_key=node.move.key,
            description=node.move.description, outcome=outcome, ratio=ratio,
            parent_time_us=parent_result.time_us, child_time_us=child_result.time_us,
            text=lesson_text(description=node.move.description, outcome=outcome, ratio=ratio,
                             task_name=self._task_name, parent_time_us=parent_result.time_us,
                             child_time_us=child_result.time_us))

    def views(self) -> tuple[LessonView, ...]:
        """Lessons for a rewriter: this task first, then its family, newest first, one per
        (move, outcome), at most ``limit``."""
        family = self._task_name.split("_", 1)[0]
        rows = self._storage.get_lessons(task_prefix=family, limit=self._limit * 8)
        rows.sort(key=lambda r: r.task_name != self._task_name)  # stable: keeps newest first
        seen: set[tuple[str, str]] = set()
        out: list[LessonView] = []
        for r in rows:
            key = (r.move_key, r.outcome)
            if key in seen:
                continue
            seen.add(key)
            out.append(LessonView(move_kind=r.move_kind, description=r.description,
                                  outcome=r.outcome, ratio=r.ratio, task=r.task_name,
                                  text=r.text))
            if len(out) >= self._limit:
                break
        return tuple(out)

    def banned_moves(self, parent_sha256: str) -> frozenset[str]:
        """Move keys that failed the same way ``ban_after`` times on this parent source."""
        failures = set(FAILURE_OUTCOMES.values())
        counts = Counter((r.move_key, r.outcome)
                         for r in self._storage.get_lessons(parent_sha256=parent_sha256)
                         if r.outcome in failures)
        return frozenset(k for (k, _), c in counts.items() if c >= self._ban_after)
