"""The statistically gated best.

A correct candidate becomes the run's best only when re-timing shows it faster than the
current best beyond noise:

1. **Pre-filter** (no GPU time): the newcomer's own evaluation must beat the best's by at
   least ``min_improvement`` (speedups vs eager when both have them, else medians).
2. **Re-time** both with ``Evaluator.retime([best, new], rounds=...)``: fresh worker
   processes, the two candidates interleaved round-robin, all raw samples kept.
3. **Test**: a one-sided Mann-Whitney U test of H1 "the newcomer's times are
   stochastically smaller" must give ``p < alpha`` (default 0.05), **and** the newcomer's
   median must be at least ``min_improvement`` (default 1 %) below the best's. Ties, and
   anything short of both, keep the older best.

The U statistic counts the (new, old) sample pairs where the new time is smaller (ties
count one half). The test is scipy's ``mannwhitneyu``: exact for small samples without ties
(both sizes <= 20), otherwise the normal approximation with the tie-corrected variance and a
continuity correction. It makes no normality assumption, which suits GPU timings (skewed,
with outliers).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cutegen.codegen.evaluation import Timing, Verdict
from cutegen.search.storage import BestDecision, StoredResult

_EXACT_MAX = 20


@dataclass(frozen=True, slots=True)
class GateParams:
    """Hyperparameters of the gate (see the module docstring)."""

    alpha: float = 0.05
    min_improvement: float = 0.01
    rounds: int = 2

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or self.min_improvement < 0 or self.rounds < 1:
            raise ValueError(f"bad gate parameters: {self}")


@dataclass(frozen=True, slots=True)
class GateResult:
    """The gate's answer and the numbers behind it."""

    accepted: bool
    reason: str
    p_value: float | None = None
    u_statistic: float | None = None
    median_new_us: float | None = None
    median_old_us: float | None = None
    improvement: float | None = None
    n_new: int = 0
    n_old: int = 0


def mann_whitney_less(new: Sequence[float], old: Sequence[float]) -> tuple[float, float]:
    """One-sided Mann-Whitney U test that ``new`` tends to be smaller than ``old``.

    scipy's ``mannwhitneyu`` computes it; this wrapper only fixes the orientation and the
    method: exact for small samples without ties, the tie-corrected normal approximation
    with continuity correction otherwise (scipy's "exact" refuses ties, so they go
    "asymptotic").

    Returns:
        (U, p): U = #pairs with new < old (+1/2 per tie); p = P(U' >= U) under H0.

    Raises:
        ValueError: an empty sample.
    """
    from scipy.stats import mannwhitneyu

    if not new or not old:
        raise ValueError("Mann-Whitney needs two non-empty samples")
    exact = (len(new) <= _EXACT_MAX and len(old) <= _EXACT_MAX
             and len(set(new) | set(old)) == len(new) + len(old))
    # scipy's U is for its first argument: old vs new, "greater" = new tends to be smaller
    res = mannwhitneyu(list(old), list(new), alternative="greater",
                       method="exact" if exact else "asymptotic", use_continuity=True)
    return float(res.statistic), float(res.pvalue)


def worth_retiming(*, best_speedup: float | None, best_time_us: float | None,
                   new_speedup: float | None, new_time_us: float | None,
                   min_improvement: float) -> bool:
    """The pre-filter: does the newcomer's own evaluation beat the best's enough?"""
    if best_speedup and new_speedup:
        return new_speedup >= best_speedup * (1 + min_improvement)
    if best_time_us and new_time_us:
        return new_time_us <= best_time_us * (1 - min_improvement)
    return False


def gate(*, old: Timing | None, new: Timing | None, params: GateParams) -> GateResult:
    """Decide from re-timed samples whether ``new`` replaces the best ``old``.

    Args:
        old / new: re-timings of the current best and the newcomer; None when the
            evaluator reported that candidate's re-timed outputs wrong or its worker failed.
        params: significance level, minimum median improvement.
    """
    if new is None:
        return GateResult(False, "the newcomer failed re-timing (wrong timed outputs or a "
                                 "worker failure)")
    if old is None:
        return GateResult(True, "the current best failed re-timing; the newcomer passed",
                          median_new_us=new.median_us, n_new=new.n)
    xs = list(new.samples_us) or [new.median_us]
    ys = list(old.samples_us) or [old.median_us]
    u, p = mann_whitney_less(xs, ys)
    m_new, m_old = statistics.median(xs), statistics.median(ys)
    imp = 1.0 - m_new / m_old if m_old > 0 else 0.0
    stats: dict[str, Any] = dict(p_value=p, u_statistic=u, median_new_us=m_new, median_old_us=m_old,
                 improvement=imp, n_new=len(xs), n_old=len(ys))
    if p >= params.alpha:
        return GateResult(False, f"not significantly faster (one-sided Mann-Whitney p={p:.3g}"
                                 f" >= {params.alpha})", **stats)
    if imp < params.min_improvement:
        return GateResult(False, f"significant but median only {imp:.1%} faster "
                                 f"(< {params.min_improvement:.0%})", **stats)
    return GateResult(True, f"faster: median {imp:.1%} lower, one-sided Mann-Whitney "
                            f"p={p:.3g}", **stats)


def decide(*, run_id: int, node_id: int, new: StoredResult, best_id: int | None,
           best: StoredResult | None, retime: Callable[[], Sequence[Timing | None]],
           params: GateParams, clock: Callable[[], float]) -> BestDecision | None:
    """The gated-best decision for a newly evaluated node (None when it is not a correct,
    timed candidate). Calls ``retime() -> [best timing, new timing]`` only when the
    pre-filter passes.

    Raises:
        InfrastructureError: from ``retime``.
    """
    if new.verdict != Verdict.CORRECT or new.time_us is None:
        return None
    if best is None or best_id is None:
        return BestDecision(run_id, node_id, None, True, "first correct candidate",
                            median_new_us=new.time_us)
    if not worth_retiming(best_speedup=best.speedup_eager, best_time_us=best.time_us,
                          new_speedup=new.speedup_eager, new_time_us=new.time_us,
                          min_improvement=params.min_improvement):
        return BestDecision(run_id, node_id, best_id, False,
                            "not faster than the best on its own evaluation",
                            median_new_us=new.time_us, median_old_us=best.time_us)
    t0 = clock()
    old_t, new_t = retime()
    g = gate(old=old_t, new=new_t, params=params)
    return BestDecision(run_id, node_id, best_id, g.accepted, g.reason, g.p_value,
                        g.u_statistic, g.median_new_us, g.median_old_us, g.improvement,
                        g.n_new, g.n_old, retime_seconds=clock() - t0)
