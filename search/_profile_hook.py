"""The search's delayed-profiling hook: stage 1 → stage 2 → profile records.

:func:`profile_hook` composes the profilers for :class:`~cutegen.search.Search`: for a
successful node at depth ≥ ``profile_depth`` (or always / never, by ``mode``; in a
compile-only run, every compiled node, since its SASS is all there is to inspect) it
classifies the bottleneck from the node's own Evaluation, runs only the profilers that
apply to it on a :class:`~cutegen.profilers.ProfileTarget` the evaluator builds, and
returns one :class:`~cutegen.search.storage.ProfileRecord` per profiler, plus the stage-1
record. The hook stores nothing: the Search writes the records in the node's one commit,
charges their time to the GPU budget, and hands their findings to the rewriters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from cutegen.codegen.backend import ProfileTargets
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation
from cutegen.profilers import (
    Finding,
    ProfileMode,
    Profiler,
    ProfileReport,
    classify,
    run_stage2,
    should_profile,
)
from cutegen.search._node import FrozenNode
from cutegen.search.storage import BaseStorage, ProfileRecord

#: ``hook(node, evaluation) -> records``: called for successful nodes before their commit.
ProfileHook = Callable[[FrozenNode, Evaluation], tuple[ProfileRecord, ...]]

#: The stage-1 record's profiler name and finding key.
STAGE1 = "stage1"
BOTTLENECK = "stage1.bottleneck"


def _record(node_id: int, r: ProfileReport, run_dir: Path) -> ProfileRecord:
    art = None
    if r.artifact is not None:
        try:
            art = str(Path(r.artifact).resolve().relative_to(Path(run_dir).resolve()))
        except ValueError:
            art = str(r.artifact)
    return ProfileRecord(node_id, r.profiler, r.status.value, tuple(r.findings), art,
                         r.seconds, error=r.error or "")


def profile_hook(*, evaluator: ProfileTargets, storage: BaseStorage,
                 profilers: Mapping[str, Profiler], profile_depth: int, mode: ProfileMode,
                 run_dir: Path, timeout_s: float = 120.0,
                 compile_only: bool = False) -> ProfileHook:
    """Build the ``profile_hook(node, evaluation)`` the Search calls for successful nodes.

    Args:
        evaluator: builds the profile target (``profile_target(candidate, evaluation,
            workdir)``).
        storage: where the node's source is read from.
        profilers: the profilers plugins contributed (``available_profilers(pm)``).
        profile_depth: the depth from which correct nodes are profiled ("delayed").
        mode: "auto" (depth rule), "force" (every successful node) or "off".
        run_dir: the run's folder; artifacts go to ``profiles/<node>/``.
        timeout_s: limit for each profiler.
        compile_only: the run only compiles; "auto" then profiles every compiled node.
    """
    if compile_only and mode == "auto":
        mode = "force"

    def hook(node: FrozenNode, evaluation: Evaluation) -> tuple[ProfileRecord, ...]:
        if not profilers or not should_profile(node.depth, evaluation,
                                               profile_depth=profile_depth, mode=mode):
            return ()
        cand = CandidateSource(storage.get_source(node.id), origin=node.origin)
        workdir = Path(run_dir) / "profiles" / str(node.id)
        target = evaluator.profile_target(cand, evaluation, workdir)
        bottleneck = classify(evaluation)
        reports, _seconds = run_stage2(profilers, target, bottleneck, timeout_s=timeout_s)
        head = f"stage 1: {bottleneck.kind.value}-bound" + (
            f" ({bottleneck.reason})" if bottleneck.reason else "")
        stage1 = ProfileRecord(node.id, STAGE1, "ok",
                               (Finding(BOTTLENECK, bottleneck.kind.value, head),))
        return (stage1, *(_record(node.id, r, run_dir) for r in reports))

    return hook
