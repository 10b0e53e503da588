"""``SearchParams``: the search's hyperparameters, frozen, stored with the run so that a
resume uses exactly the values the run started with."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from cutegen.search._best import GateParams
from cutegen.search._policy import DEFAULT_PENALTIES, RewardParams, Widening


@dataclass(frozen=True, slots=True)
class SearchParams:
    """Hyperparameters of one search.

    Attributes:
        c: UCT exploration weight (rewards are normalised to [0, 1]).
        root: widening of the virtual root (the rewriter's ``initial`` candidates).
        cheap / expensive: widening per cost class; None turns that class off (the
            builtin rewriter has no expensive moves, an LLM-only one no cheap moves).
        reward: log-reward calibration and failure penalties.
        dead_end_m: a node whose last m children all failed or regressed is pruned with its
            subtree.
        same_tolerance: relative speed change counted as noise ("same") in Lessons.
        initial_candidates: how many candidates one root expansion asks for.
        proposals_per_expansion: how many children one expansion asks for (all unseen
            ones are stored WAITING and evaluated before anything new is selected).
        max_attempts: a node whose evaluation was lost this often (the search died, or the
            evaluator raised an infrastructure error) becomes FAILED.
        heartbeat_s: how often the session and its RUNNING node are stamped.
        stale_after_s: a session or RUNNING node silent this long is considered dead.
        gate: the statistically gated best.
        lessons_limit: Lessons shown to a rewriter per expansion.
        ban_after: a move failing the same way this often on one parent is banned there.
        parallel: evaluations in flight at once (1: the serial loop). With more, selection
            uses virtual loss and the evaluator must accept work asynchronously
            (:class:`cutegen.codegen.pool.GpuPool`, also over Ray actors:
            :func:`cutegen.codegen.ray_backend.make_ray_pool`); see
            :mod:`cutegen.search._parallel`.
        virtual_loss: the normalised value [0, 1] an evaluation in flight counts as during
            selection (0: a loss, which spreads parallel selections the most).
        tell_in_order: tell results in the order their nodes were claimed, so the tree
            depends only on the seed, ``parallel`` and the results (not on timing) and a
            resumed run repeats an uninterrupted one; False tells each result as it
            arrives (no device waits behind a slower one; timing then shapes the tree).
    """

    c: float = 0.7
    root: Widening = field(default_factory=lambda: Widening(k=1.0, alpha=0.5))
    cheap: Widening | None = field(default_factory=lambda: Widening(k=2.0, alpha=0.5))
    expensive: Widening | None = field(default_factory=lambda: Widening(k=1.0, alpha=0.3))
    reward: RewardParams = field(default_factory=RewardParams)
    dead_end_m: int = 8
    same_tolerance: float = 0.02
    initial_candidates: int = 8
    proposals_per_expansion: int = 1
    max_attempts: int = 3
    heartbeat_s: float = 15.0
    stale_after_s: float = 120.0
    gate: GateParams = field(default_factory=GateParams)
    lessons_limit: int = 12
    ban_after: int = 2
    parallel: int = 1
    virtual_loss: float = 0.0
    tell_in_order: bool = True

    def __post_init__(self) -> None:
        if self.parallel < 1 or not 0.0 <= self.virtual_loss <= 1.0:
            raise ValueError("parallel >= 1 and 0 <= virtual_loss <= 1 are required")
        if self.c < 0 or self.dead_end_m < 1 or self.max_attempts < 1:
            raise ValueError("c >= 0, dead_end_m >= 1 and max_attempts >= 1 are required")
        if self.initial_candidates < 1 or self.proposals_per_expansion < 1:
            raise ValueError("initial_candidates and proposals_per_expansion must be >= 1")
        if self.heartbeat_s <= 0 or self.stale_after_s <= self.heartbeat_s:
            raise ValueError("need 0 < heartbeat_s < stale_after_s")

    @staticmethod
    def for_rewriter(rewriter: str) -> SearchParams:
        """The defaults for a rewriter: the builtin one has only cheap moves, the llm one
        only expensive ones, mixed both."""
        if rewriter == "builtin":
            return SearchParams(expensive=None)
        if rewriter == "llm":
            return SearchParams(cheap=None)
        return SearchParams()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["reward"]["penalties"] = dict(self.reward.penalties)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> SearchParams:
        """Rebuild params stored by :meth:`to_dict` (unknown keys are ignored)."""
        kw: dict[str, Any] = {k: v for k, v in d.items()
                              if k in SearchParams.__dataclass_fields__}
        for k in ("root", "cheap", "expensive"):
            if kw.get(k) is not None:
                kw[k] = Widening(**kw[k])
        if "reward" in kw:
            r = dict(kw["reward"])
            kw["reward"] = RewardParams(clip=r.get("clip", math.log(16.0)),
                                        penalties=r.get("penalties", dict(DEFAULT_PENALTIES)),
                                        untimed=r.get("untimed", 0.0))
        if "gate" in kw:
            kw["gate"] = GateParams(**kw["gate"])
        return SearchParams(**kw)
