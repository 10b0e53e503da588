"""Budgets: evaluations, wall time, GPU time and LLM dollars, in any combination.

The search checks the budget before every iteration; the first limit reached stops the run
cleanly (the evaluation in flight finishes and is committed first). A wall-time limit also
stops the run when the next evaluation, at the run's typical duration, would end past it
(a 90-second evaluation is not started 20 seconds before the limit). Usage is computed from
stored facts, so it carries over a resume: wall time sums the run's sessions, GPU time sums
the evaluations' verify and benchmark stages plus re-timing, dollars sum the LLM calls.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run has used so far."""

    evals: int = 0
    wall_s: float = 0.0
    gpu_s: float = 0.0
    usd: float = 0.0


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits of a run; None means no limit on that resource."""

    max_evals: int | None = None
    max_wall_s: float | None = None
    max_gpu_s: float | None = None
    max_usd: float | None = None

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():
            if v is not None and v < 0:
                raise ValueError(f"budget {k} must not be negative, got {v}")

    def reached(self, usage: Usage) -> str | None:
        """The first limit reached, as a sentence, or None while every limit has room."""
        checks = (
            (self.max_evals, usage.evals, "evaluation budget reached ({u:.0f} of {m:.0f})"),
            (self.max_wall_s, usage.wall_s, "time budget reached ({u:.0f} s of {m:.0f} s)"),
            (self.max_gpu_s, usage.gpu_s, "GPU-time budget reached ({u:.0f} s of {m:.0f} s)"),
            (self.max_usd, usage.usd, "LLM budget reached (${u:.2f} of ${m:.2f})"),
        )
        for limit, used, text in checks:
            if limit is not None and used >= limit:
                return text.format(u=used, m=limit)
        return None

    def next_overruns(self, usage: Usage, eval_s: float | None) -> str | None:
        """Why an evaluation expected to last ``eval_s`` seconds should not start: it would
        end past the wall-time limit. None when it fits, or without a limit or an estimate."""
        if self.max_wall_s is None or eval_s is None or eval_s <= 0:
            return None
        if usage.wall_s + eval_s > self.max_wall_s:
            return (f"time budget nearly reached ({usage.wall_s:.0f} s of {self.max_wall_s:.0f}"
                    f" s; an evaluation takes about {eval_s:.0f} s)")
        return None

    def remaining(self, usage: Usage) -> dict[str, float | None]:
        """What is left of each limited resource (None where unlimited)."""
        def left(limit: float | None, used: float) -> float | None:
            return None if limit is None else max(0.0, limit - used)
        return {"evals": left(self.max_evals, usage.evals),
                "wall_s": left(self.max_wall_s, usage.wall_s),
                "gpu_s": left(self.max_gpu_s, usage.gpu_s),
                "usd": left(self.max_usd, usage.usd)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Budget:
        return Budget(**{k: d.get(k) for k in ("max_evals", "max_wall_s", "max_gpu_s",
                                              "max_usd")})
