"""The built-in rewriter: moves that need no LLM.

It composes a list of **move generators**: functions ``(ctx) -> Iterable[Proposal]`` that
list every move they know for ``ctx.parent``, in a deterministic order. The rewriter drops
banned moves, sources already in the run and duplicates, shuffles what is left with the
search's RNG and returns the first ``n`` of the requested cost class. The first generator,
:func:`tunable_moves`, changes one ``TUNABLES`` value to another allowed value of
``TUNABLE_CHOICES``; kernel-family moves (template variants, strategies) are further
generators added to :data:`DEFAULT_GENERATORS` or passed to :class:`BuiltinRewriter`.

Initial candidates are the bundled seeds of the task (``benchmarks/seeds/X.py`` applies to
a task named ``X`` or ``X_...``), any seed files the user gave, then the kernel-family
candidates rendered for the task when :mod:`cutegen.codegen.families` recognises it (move
kind "family"). :func:`~cutegen.codegen.families.moves.family_moves` adds strategy, fuse and
profiler-hinted moves for family-rendered parents; hinted proposals are offered first.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from cutegen.codegen.candidate import CandidateSource, parse_tunables, set_tunable
from cutegen.codegen.families.moves import (
    family_moves,
    family_proposals,
    not_covered_message,
    read_family,
)
from cutegen.codegen.rewriters.base import CostClass, Move, Proposal, RewriteContext
from cutegen.codegen.tasks import Task, bundled_task_names, load_bundled_task, seeds_dir
from cutegen.errors import CandidateError, TaskError

MoveGenerator = Callable[[RewriteContext], Iterable[Proposal]]


def tunable_moves(ctx: RewriteContext) -> Iterator[Proposal]:
    """Every single-tunable change of the parent: each other allowed value of each tunable.

    A family-rendered parent's ``precision`` is left to
    :func:`~cutegen.codegen.families.moves.family_moves`, which changes it only to a mode
    the task's tolerance allows."""
    if ctx.parent is None:
        return
    try:
        tunables = parse_tunables(ctx.parent.code)
    except CandidateError:
        return
    family = read_family(ctx.parent.code) is not None
    for name in sorted(tunables):
        if family and name == "precision":
            continue
        t = tunables[name]
        for value in t.choices:
            if value == t.value:
                continue
            desc = f"{name} {t.value!r}->{value!r}"
            yield Proposal(
                CandidateSource(set_tunable(ctx.parent.code, name, value), f"builtin:{desc}"),
                Move(kind="tunable", description=desc, cost="cheap",
                     params={"name": name, "from": t.value, "to": value}))


#: The generators the builtin rewriter uses unless given others. Family moves come first so
#: a strategy switch is recorded as kind "strategy" (the same edit from tunable_moves is then
#: a duplicate and dropped).
DEFAULT_GENERATORS: tuple[MoveGenerator, ...] = (family_moves, tunable_moves)


def seeds_for_task(task_name: str, folder: Path | None = None) -> list[Path]:
    """Bundled seed files for a task: ``X.py`` where the task is named ``X`` or ``X_...``."""
    folder = seeds_dir() if folder is None else folder
    if not folder.is_dir():
        return []
    return [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")
            and (task_name == p.stem or task_name.startswith(p.stem + "_"))]


class BuiltinRewriter:
    """Proposes cheap moves from its generators, and the seeds as initial candidates."""

    name = "builtin"

    def __init__(self, *, generators: Sequence[MoveGenerator] = DEFAULT_GENERATORS,
                 seed_files: Sequence[str | Path] = (), seeds_folder: Path | None = None,
                 bundled_seeds: bool = True, families: bool = True) -> None:
        """
        Args:
            generators: move generators, tried in order.
            seed_files: user-given seed candidates (read now, so a bad path fails early).
            seeds_folder: where bundled seeds live (default: the package's seeds folder).
            bundled_seeds: offer the bundled seeds of the task.
            families: offer kernel-family candidates for a recognised task.

        Raises:
            CandidateError: a seed file is missing or not UTF-8.
        """
        self.generators = tuple(generators)
        self._user = [CandidateSource.from_path(p, origin=f"seed:{Path(p).name}")
                      for p in seed_files]
        self._folder = seeds_folder
        self._bundled = bundled_seeds
        self._families = families

    def _task(self, task: Task | str) -> Task | None:
        if isinstance(task, Task):
            return task
        if task in bundled_task_names():
            try:
                return load_bundled_task(task)
            except TaskError:
                return None
        return None

    def not_covered(self, task: Task | str) -> str:
        """Why no kernel family covers the task ("" when one does, or families are off)."""
        t = self._task(task) if self._families else None
        return not_covered_message(t) if t is not None else ""

    def seeds(self, task: Task | str) -> list[Proposal]:
        """All initial candidates for a task (a Task, or a name: bundled tasks are resolved
        for the family candidates), bundled seeds first, in a fixed order."""
        task_name = task.name if isinstance(task, Task) else task
        out = []
        if self._bundled:
            for p in seeds_for_task(task_name, self._folder):
                out.append(Proposal(CandidateSource.from_path(p, origin=f"seed:{p.name}"),
                                    Move(kind="seed", description=f"seed {p.name}",
                                         params={"file": p.name})))
        for c in self._user:
            name = c.origin.split(":", 1)[1]
            out.append(Proposal(c, Move(kind="seed", description=f"seed {name}",
                                        params={"file": name})))
        t = self._task(task) if self._families else None
        if t is not None:
            out += family_proposals(t)
        return out

    def initial(self, ctx: RewriteContext, *, n: int, rng: random.Random) -> list[Proposal]:
        """Up to ``n`` seeds not yet in the run (the order is fixed; ``rng`` is unused)."""
        return _filter(self.seeds(ctx.task), ctx)[:n]

    def propose(self, ctx: RewriteContext, *, n: int, cost: CostClass,
                rng: random.Random) -> list[Proposal]:
        """Up to ``n`` new children of ``ctx.parent`` with moves of class ``cost``."""
        if ctx.parent is None:
            return []
        moves = [p for g in self.generators for p in g(ctx) if p.move.cost == cost]
        options = _filter(moves, ctx)
        rng.shuffle(options)
        # moves a profiler finding asked for (see families.moves) go first, in random order
        options.sort(key=lambda p: "hint" not in p.move.params)
        return options[:n]


def _filter(proposals: Iterable[Proposal], ctx: RewriteContext) -> list[Proposal]:
    parent_sha = ctx.parent.sha256 if ctx.parent is not None else None
    out, shas = [], set()
    for p in proposals:
        sha = p.candidate.sha256
        if (p.move.key in ctx.banned_moves or sha in ctx.seen_sources or sha == parent_sha
                or sha in shas):
            continue
        shas.add(sha)
        out.append(p)
    return out
