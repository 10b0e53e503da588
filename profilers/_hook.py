"""The search's delayed-profiling hook: stage 1 → stage 2 → stored reports → guidance.

:func:`make_profile_hook` composes the pieces for :class:`cutegen.search.Search`: for a
correct node at depth ≥ ``profile_depth`` (or always / never, by ``mode``) it classifies the
bottleneck from the node's own Evaluation, runs only the profilers that apply to it on a
:class:`ProfileTarget` the evaluator builds (artifacts plus a launcher job), stores one
report row per profiler, and returns the one-line guidance the rewriters read. The Search
charges the hook's wall time to the run's GPU budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.profilers._base import Profiler
from cutegen.profilers._stage import ProfileMode, classify, guidance, run_stage2, should_profile


def make_profile_hook(*, evaluator: Any, storage: Any, profilers: Mapping[str, Profiler],
                      profile_depth: int, mode: ProfileMode, run_dir: Path,
                      timeout_s: float = 120.0) -> Callable[[Any, Evaluation], tuple[str, ...]]:
    """Build the ``profile_hook(node, evaluation)`` the Search calls for successful nodes.

    Args:
        evaluator: provides ``profile_target(candidate, evaluation, workdir)``.
        storage: where each profiler's report is recorded (``record_profile``).
        profilers: the profilers plugins contributed (``available_profilers(pm)``).
        profile_depth: the depth from which correct nodes are profiled ("delayed").
        mode: "auto" (depth rule), "force" (every successful node) or "off".
        run_dir: the run's folder; reports and artifacts go to ``profiles/<node>/``.
        timeout_s: limit for each profiler.
    """
    from cutegen.search.storage import ProfileRecord

    def hook(node: Any, evaluation: Evaluation) -> tuple[str, ...]:
        if not profilers or not should_profile(node.depth, evaluation,
                                               profile_depth=profile_depth, mode=mode):
            return ()
        cand = CandidateSource(storage.get_source(node.id), origin=node.origin)
        workdir = Path(run_dir) / "profiles" / str(node.id)
        target = evaluator.profile_target(cand, evaluation, workdir)
        bottleneck = classify(evaluation)
        reports, _seconds = run_stage2(profilers, target, bottleneck, timeout_s=timeout_s)
        for r in reports:
            art = None
            if r.artifact is not None:
                try:
                    art = str(Path(r.artifact).resolve().relative_to(Path(run_dir).resolve()))
                except ValueError:
                    art = str(r.artifact)
            storage.record_profile(ProfileRecord(
                node.id, r.profiler, r.status.value, guidance((r,)),
                tuple(f.to_dict() for f in r.findings), art, r.seconds))
        head = f"stage 1: {bottleneck.kind.value}-bound" + (f" ({bottleneck.reason})" if bottleneck.reason else "")
        return (head,) + guidance(reports)

    return hook
