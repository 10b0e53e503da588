"""The rewriter seam: how the search asks for new candidates.

A rewriter turns a parent node (its source, its Evaluation, profiler findings, Lessons)
into proposals. Each proposal carries its :class:`Move`, so the search can record what the
move did relative to the parent (a Lesson) and branch asymmetrically on the move's cost.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.codegen.tasks import Task
from cutegen.profilers import Finding

CostClass = Literal["cheap", "expensive"]


@dataclass(frozen=True, slots=True)
class Move:
    """What a rewrite did, in a form Lessons can group by.

    Attributes:
        kind: a stable identifier of the kind of move ("tunable", "strategy", "fuse",
            "llm_rewrite", "llm_initial", "llm_repair", "seed", "family").
        description: one line for people and prompts ("vec 4->8").
        cost: "cheap" (no LLM; wide branching) or "expensive" (LLM call; narrow branching).
        params: machine-readable details ({"name": "vec", "from": 4, "to": 8}).
    """

    kind: str
    description: str
    cost: CostClass = "cheap"
    params: Mapping[str, object] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity of the move for "do not repeat a move that failed twice" checks."""
        items = ",".join(f"{k}={self.params[k]!r}" for k in sorted(self.params))
        return f"{self.kind}({items})"


@dataclass(frozen=True, slots=True)
class Proposal:
    """One new candidate and the move that made it."""

    candidate: CandidateSource
    move: Move


@dataclass(frozen=True, slots=True)
class LessonView:
    """A Lesson as rewriters see it (read from the store)."""

    move_kind: str
    description: str
    outcome: str  # "faster" | "slower" | "same" | "compile_error" | "wrong" | "crash" | ...
    ratio: float | None  # child speed / parent speed (>1 = faster) when both were timed
    task: str
    text: str


@dataclass(frozen=True, slots=True)
class RewriteContext:
    """Everything a rewriter may use besides the parent's source.

    Attributes:
        task: the task being searched.
        parent: the parent candidate (None when proposing initial candidates).
        evaluation: the parent's Evaluation, when it has one.
        findings: what the profilers found on the parent (delayed profiling), each once:
            its stage-1 class (``stage1.bottleneck``) and the ``hint.*`` findings, whose
            key and value say what to change and whose ``summary`` is the line a prompt
            quotes.
        lessons: relevant Lessons from this and earlier runs in the store.
        banned_moves: move keys that failed the same way twice on this parent.
        depth: the parent's depth in the tree.
        seen_sources: sha256 of every candidate already in this run (a read-only view,
            valid during the call); proposing one again is wasted (the search drops it).
    """

    task: Task
    parent: CandidateSource | None = None
    evaluation: Evaluation | None = None
    findings: tuple[Finding, ...] = ()
    lessons: tuple[LessonView, ...] = ()
    banned_moves: frozenset[str] = frozenset()
    depth: int = 0
    seen_sources: Set[str] = frozenset()


@runtime_checkable
class Rewriter(Protocol):
    """Proposes candidates. Implementations: ``builtin``, ``llm``, ``mixed``.

    A rewriter never evaluates anything. It may return fewer proposals than asked for (or
    none, when it has nothing new to offer for this parent).
    """

    name: str

    def initial(self, ctx: RewriteContext, *, n: int, rng: random.Random) -> Sequence[Proposal]:
        """Candidates to start a search from (the root's children)."""
        ...

    def propose(
        self, ctx: RewriteContext, *, n: int, cost: CostClass, rng: random.Random
    ) -> Sequence[Proposal]:
        """Up to ``n`` children of ``ctx.parent`` using moves of the given cost class."""
        ...
