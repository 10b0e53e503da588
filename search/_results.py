"""What the search hands back: claimed nodes, per-iteration reports, run summaries."""

from __future__ import annotations

from dataclasses import dataclass

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.search._budget import Usage
from cutegen.search._node import FrozenNode


@dataclass(frozen=True, slots=True)
class NodeHandle:
    """A claimed (RUNNING) node and its candidate, returned by :meth:`Search.ask`."""

    node: FrozenNode
    candidate: CandidateSource


@dataclass(frozen=True, slots=True)
class StepReport:
    """What one :meth:`Search.tell` committed."""

    node: FrozenNode
    evaluation: Evaluation
    reward: float
    outcome: str | None  # vs the parent ("faster", "compile_error", ...); None for seeds
    best: FrozenNode | None
    best_changed: bool


@dataclass(frozen=True, slots=True)
class RunSummary:
    """How a :meth:`Search.run` ended."""

    run: str
    reason: str
    status: str
    evaluations: int
    verdicts: dict[str, int]
    best: FrozenNode | None
    best_speedup: float | None
    usage: Usage
    #: the best's speed-up over eager with cuDNN in TF32 (torch's default), where the task
    #: runs cuDNN convolutions (Evaluation.eager_tf32); ``best_speedup`` is over fp32 eager
    best_speedup_tf32: float | None = None
