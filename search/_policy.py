"""The MCTS math, as small pure functions (mctx style).

No I/O, no clock, no global random state: whatever needs randomness takes an explicit
``random.Random``; hyperparameters are keyword-only so call sites read like the formulas.

* **UCT** over normalised rewards: ``Q + c * sqrt(ln N / n)``; an unvisited child scores
  ``+inf`` and the first maximum wins, so ties break by creation order (deterministic).
* **Progressive widening**: a node may get another child while
  ``children < floor(k * visits ** alpha)``.
* **Asymmetric branching**: cheap moves (TUNABLES changes, no LLM) and expensive moves (LLM
  rewrites) have separate widening budgets; cheap is tried first.
* **Log-reward calibration**: a correct candidate earns ``ln(speedup vs eager)`` clipped to
  ``[-clip, clip]``; a failed one earns one fixed penalty per failure kind
  (:attr:`cutegen.codegen.evaluation.Verdict.failure_kind`), every penalty below ``-clip``,
  so any correct kernel outranks any failure. UCT sees the reward mapped linearly to [0, 1].
* **Virtual loss** (parallel runs): an evaluation still in flight counts as a visit worth
  a fixed normalised value (0 by default: a loss), on the node and every ancestor, so a
  second selection made before the first result returns is steered elsewhere. With nothing
  in flight the statistics are the real ones, so a serial search is unchanged.
* **Dead-end pruning**: a node whose last ``m`` expansions (the children made from it) all
  failed or were slower than it is a dead end: it and its subtree stop being selected (the
  caller records the decision as a row). Counting a node's own expansions, not every
  expansion below it, keeps one unlucky streak deep in the tree from closing all its
  ancestors (a hill-climb that reaches a local optimum would otherwise end the search).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from cutegen.codegen.evaluation import Verdict

CostClass = Literal["cheap", "expensive"]

#: Penalty per :attr:`Verdict.failure_kind`, on the same natural-log scale as speedups.
DEFAULT_PENALTIES: Mapping[str, float] = MappingProxyType(
    {"static": -3.0, "compile": -3.0, "wrong": -3.5, "crash": -3.5, "timeout": -3.5,
     "cheat": -4.0}
)


@dataclass(frozen=True, slots=True)
class ChildStats:
    """What selection knows about one child: visits and the sum of normalised rewards."""

    visits: int
    value_sum: float

    @property
    def q(self) -> float:
        return self.value_sum / self.visits if self.visits > 0 else 0.0


def virtual_loss(stats: ChildStats, *, in_flight: int, value: float) -> ChildStats:
    """The statistics selection sees while ``in_flight`` evaluations below a node are pending.

    Each pending evaluation adds one visit worth ``value`` (a normalised reward in [0, 1];
    0 is the classic virtual loss). The result is exact arithmetic on the inputs, so removing
    the pending evaluations restores the real statistics bit for bit.

    Args:
        stats: the real statistics (finished evaluations only).
        in_flight: evaluations claimed in the node's subtree and not yet told (>= 0).
        value: what one pending evaluation counts as.

    Raises:
        ValueError: ``in_flight`` is negative or ``value`` lies outside [0, 1].
    """
    if in_flight < 0 or not 0.0 <= value <= 1.0:
        raise ValueError(f"virtual loss needs in_flight >= 0 and 0 <= value <= 1, got "
                         f"{in_flight}, {value}")
    if in_flight == 0:
        return stats
    return ChildStats(stats.visits + in_flight, stats.value_sum + in_flight * value)


def uct_score(child: ChildStats, *, parent_visits: int, c: float) -> float:
    """UCT score of a child; ``+inf`` for an unvisited one.

    Args:
        child: the child's statistics (value_sum over rewards normalised to [0, 1]).
        parent_visits: the parent's visit count.
        c: exploration weight (>= 0).
    """
    if child.visits <= 0:
        return math.inf
    return child.q + c * math.sqrt(math.log(max(parent_visits, 1)) / child.visits)


def select_child(children: Sequence[ChildStats], *, parent_visits: int, c: float) -> int:
    """Index of the child with the highest UCT score; the first maximum wins.

    Raises:
        ValueError: no children.
    """
    if not children:
        raise ValueError("select_child needs at least one child")
    best_i, best = 0, -math.inf
    for i, ch in enumerate(children):
        s = uct_score(ch, parent_visits=parent_visits, c=c)
        if s > best:
            best_i, best = i, s
    return best_i


@dataclass(frozen=True, slots=True)
class Widening:
    """Progressive-widening budget of one cost class: children <= floor(k * visits^alpha)."""

    k: float
    alpha: float

    def __post_init__(self) -> None:
        if self.k <= 0 or not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"widening needs k > 0 and 0 <= alpha <= 1, got {self}")


def widening_limit(*, visits: int, k: float, alpha: float) -> int:
    """How many children a node with ``visits`` visits may have (0 when unvisited)."""
    if visits <= 0:
        return 0
    return int(math.floor(k * visits**alpha + 1e-9))


def should_widen(*, n_children: int, visits: int, k: float, alpha: float) -> bool:
    """Progressive widening: may a node with these counts get one more child?"""
    return n_children < widening_limit(visits=visits, k=k, alpha=alpha)


def choose_widening(
    *,
    visits: int,
    n_cheap: int,
    n_expensive: int,
    cheap: Widening | None,
    expensive: Widening | None,
    exhausted: frozenset[str] = frozenset(),
) -> CostClass | None:
    """Asymmetric branching: the cost class a node may widen with now, cheap first.

    Args:
        visits: the node's visits.
        n_cheap / n_expensive: its children made by cheap / expensive moves.
        cheap / expensive: the budgets; None disables that class.
        exhausted: cost classes for which the rewriter had nothing new for this node.

    Returns:
        "cheap", "expensive", or None when neither budget allows another child.
    """
    for cost, budget, n in (("cheap", cheap, n_cheap), ("expensive", expensive, n_expensive)):
        if budget is None or cost in exhausted:
            continue
        if should_widen(n_children=n, visits=visits, k=budget.k, alpha=budget.alpha):
            return cost  # type: ignore[return-value]
    return None


@dataclass(frozen=True, slots=True)
class RewardParams:
    """Log-reward calibration.

    Attributes:
        clip: |ln speedup| is clipped here (ln 16: 16x faster or slower).
        penalties: reward per failure kind; each must be <= -clip.
        untimed: reward of a successful candidate without a timing (compile-only runs).
    """

    clip: float = math.log(16.0)
    penalties: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_PENALTIES))
    untimed: float = 0.0

    def __post_init__(self) -> None:
        if not self.clip > 0:
            raise ValueError("clip must be positive")
        bad = {k: v for k, v in self.penalties.items() if v > -self.clip}
        if bad:
            raise ValueError(f"failure penalties must be <= -clip ({-self.clip:.3f}): {bad}")
        if not -self.clip <= self.untimed <= self.clip:
            raise ValueError("untimed reward must lie in [-clip, clip]")

    @property
    def floor(self) -> float:
        """The lowest reward any node can get."""
        return min((*self.penalties.values(), -self.clip))


def speedup_reward(*, speedup: float, clip: float) -> float:
    """``ln(speedup)`` clipped to ``[-clip, clip]``; a non-positive or NaN speedup gives -clip."""
    if not speedup > 0 or math.isnan(speedup):
        return -clip
    return max(-clip, min(clip, math.log(speedup)))


def failure_penalty(kind: str, *, params: RewardParams) -> float:
    """The fixed penalty of a failure kind; an unknown kind gets the floor (most severe)."""
    return params.penalties.get(kind, params.floor)


def reward(*, verdict: Verdict, speedup: float | None, params: RewardParams) -> float:
    """The reward of one evaluated node.

    Args:
        verdict: the evaluation's verdict.
        speedup: eager time / candidate time, when the candidate was timed.
        params: the calibration.
    """
    if verdict.ok:
        if speedup is None:
            return params.untimed
        return speedup_reward(speedup=speedup, clip=params.clip)
    return failure_penalty(verdict.failure_kind, params=params)


def normalize(value: float, *, params: RewardParams) -> float:
    """Map a reward from [floor, clip] linearly onto [0, 1] (what UCT averages)."""
    lo, hi = params.floor, params.clip
    return max(0.0, min(1.0, (value - lo) / (hi - lo)))


def is_dead_end(recent_regressed: Sequence[bool], *, m: int) -> bool:
    """True when a node's last ``m`` expansions all failed or regressed.

    Args:
        recent_regressed: for each child made from the node, oldest first, whether it
            failed or was slower than the node beyond noise.
        m: how many consecutive failures/regressions make a dead end (>= 1).
    """
    if m < 1:
        raise ValueError("m must be >= 1")
    if len(recent_regressed) < m:
        return False
    return all(list(recent_regressed)[-m:])
