"""The LLM rewriter: expensive moves written by a model behind an OpenAI-compatible API.

Moves:

* ``llm_initial``: a first candidate from the reference (one focus hint per proposal);
* ``llm_rewrite``: an improved child of a parent, given its Evaluation, profiler guidance
  and Lessons (focus hints already banned on this parent are not asked for again);
* ``llm_repair``: a child that did not compile, sent back with its compile error for at
  most ``repair_rounds`` turns (needs an injected ``compile_check``).

The rewriter never evaluates or compiles by itself: the search (or its evaluator) injects
``compile_check(candidate) -> error text | None``. Proposals are deduplicated by source
hash within a batch and against the parent and ``ctx.seen_sources``. A call whose reply is
unusable (cut off, no candidate, malformed) yields no proposal; it is in the call record.
When *no* proposal comes back and a call raised, the most serious error is raised
(budget, then rate limit, then endpoint failure) so the scheduler can pause or stop.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cutegen.codegen.backend import Evaluator
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.llm.client import LLMClient, LLMRequest, LLMResult
from cutegen.codegen.llm.extract import extract_candidate
from cutegen.codegen.prompting import (
    FocusHint,
    Prompt,
    focus_hints,
    initial_prompt,
    repair_prompt,
    rewrite_prompt,
)
from cutegen.codegen.rewriters.base import CostClass, Move, Proposal, RewriteContext
from cutegen.codegen.tasks import Task
from cutegen.errors import BudgetExceededError, LLMError, RateLimitError

#: The focus hint that leads when the parent failed its evaluation.
FIX_FOCUS = "fix"

#: ``compile_check(candidate) -> compile error text, or None when it compiles``.
CompileCheck = Callable[[CandidateSource], "str | None"]


#: Verdicts a repair turn can act on: the candidate never ran.
REPAIRABLE = frozenset({Verdict.COMPILE_ERROR, Verdict.STATIC_REJECT})


def compile_check_from(evaluator: Evaluator) -> CompileCheck:
    """A ``compile_check`` over an evaluator, normally one built with
    ``EvalOptions(compile_only=True)`` (no GPU needed; compile results are cached by source
    hash, so the search's own evaluation of the same child compiles nothing twice).

    The check returns the evaluator's message, details and log tail for a compile error or
    a static rejection, and None for anything else (a crash or a wrong answer is for the
    search to record, not for a repair turn).
    """
    def check(candidate: CandidateSource) -> str | None:
        ev = evaluator.evaluate(candidate)
        if ev.verdict not in REPAIRABLE:
            return None
        parts = [f"{ev.verdict.value}: {ev.message}".strip(), *ev.details]
        if ev.log_tail:
            parts.append(ev.log_tail)
        return "\n".join(p for p in parts if p)

    return check


@dataclass(frozen=True, slots=True)
class _Draft:
    """A candidate on its way to becoming a proposal."""

    code: str
    move: Move
    focus: FocusHint
    repairs: int = 0
    error: str | None = None  # the last compile error, while it does not compile


def _move(kind: str, focus: FocusHint, **extra: object) -> Move:
    descriptions = {"llm_initial": "LLM first candidate", "llm_rewrite": "LLM rewrite",
                    "llm_repair": "LLM rewrite, repaired"}
    params: dict[str, object] = {"focus": focus.key, **extra}
    return Move(kind, f"{descriptions[kind]} ({focus.key})", cost="expensive", params=params)


def pick_hints(hints: Sequence[FocusHint], n: int, rng: random.Random, *, kind: str,
               banned: frozenset[str] = frozenset(), first: str | None = None
               ) -> list[FocusHint]:
    """``n`` focus hints, distinct while possible, skipping banned ``kind`` moves; the hint
    keyed ``first`` (when allowed) leads."""
    allowed = [h for h in hints if _move(kind, h).key not in banned]
    if not allowed or n <= 0:
        return []
    order = list(allowed)
    rng.shuffle(order)
    order.sort(key=lambda h: h.key != first)  # stable: the rest keep their shuffled order
    return [order[i % len(order)] for i in range(n)]


class LLMRewriter:
    """Rewriter whose moves come from an LLM (see the module docstring).

    Args:
        client: the configured client (its config says the model, limits and budget).
        compile_check: compiles a candidate and returns the error text, or None.
        repair_rounds: repair turns per child (default: ``client.config.repair_rounds``).
    """

    name = "llm"

    def __init__(self, client: LLMClient, *, compile_check: CompileCheck | None = None,
                 repair_rounds: int | None = None) -> None:
        self.client = client
        self.compile_check = compile_check
        self.repair_rounds = (client.config.repair_rounds if repair_rounds is None
                              else repair_rounds)
        self._extract = functools.partial(extract_candidate,
                                          max_chars=client.config.max_reply_chars)

    # -- the Rewriter protocol --------------------------------------------------------
    def initial(self, ctx: RewriteContext, *, n: int, rng: random.Random) -> Sequence[Proposal]:
        hints = pick_hints(focus_hints("initial"), n, rng, kind="llm_initial")
        prompts = [initial_prompt(ctx.task, focus=h, lessons=ctx.lessons) for h in hints]
        return self._run(ctx, prompts, hints, kind="llm_initial")

    def propose(self, ctx: RewriteContext, *, n: int, cost: CostClass,
                rng: random.Random) -> Sequence[Proposal]:
        if cost != "expensive" or ctx.parent is None or n <= 0:
            return []  # the LLM has no cheap moves
        failing = ctx.evaluation is not None and not ctx.evaluation.ok
        hints = pick_hints(focus_hints("rewrite"), n, rng, kind="llm_rewrite",
                           banned=ctx.banned_moves, first=FIX_FOCUS if failing else None)
        prompts = [rewrite_prompt(ctx, focus=h) for h in hints]
        return self._run(ctx, prompts, hints, kind="llm_rewrite")

    # -- internals --------------------------------------------------------------------
    def _run(self, ctx: RewriteContext, prompts: Sequence[Prompt], hints: Sequence[FocusHint],
             *, kind: str) -> list[Proposal]:
        parent_sha = ctx.parent.sha256 if ctx.parent is not None else None
        requests = [LLMRequest(p.system, p.user, purpose=p.kind, parent_sha256=parent_sha)
                    for p in prompts]
        results = self.client.complete_many(requests, extract=self._extract)
        errors = _endpoint_errors(results)
        drafts = [_Draft(r.code, _move(kind, h), h)
                  for r, h in zip(results, hints, strict=True)
                  if isinstance(r, LLMResult) and r.code is not None]
        drafts = self._repair(ctx.task, self._unique(ctx, drafts), errors)
        proposals = [Proposal(CandidateSource(d.code, self._origin(d)), d.move)
                     for d in self._unique(ctx, drafts)]  # repairs may converge
        if not proposals and errors:
            raise _most_serious(errors)
        return proposals

    def _repair(self, task: Task, drafts: list[_Draft], errors: list[Exception]) -> list[_Draft]:
        """Up to ``repair_rounds`` repair turns for drafts that do not compile."""
        if self.compile_check is None or self.repair_rounds <= 0:
            return drafts
        drafts = [self._checked(d) for d in drafts]
        for round_no in range(1, self.repair_rounds + 1):
            broken = [i for i, d in enumerate(drafts) if d.error is not None]
            if not broken:
                break
            requests = []
            for i in broken:
                d = drafts[i]
                p = repair_prompt(task, d.code, d.error or "", round_no=round_no,
                                  max_rounds=self.repair_rounds)
                requests.append(LLMRequest(p.system, p.user, purpose="repair",
                                           parent_sha256=CandidateSource(d.code).sha256))
            results = self.client.complete_many(requests, extract=self._extract)
            errors.extend(_endpoint_errors(results))
            for i, r in zip(broken, results, strict=True):
                d = drafts[i]
                if isinstance(r, Exception) or r.code is None:
                    continue  # unusable repair reply: keep the broken draft
                move = _move("llm_repair", d.focus, repairs=round_no)
                drafts[i] = self._checked(_Draft(r.code, move, d.focus, round_no))
        return drafts

    def _checked(self, d: _Draft) -> _Draft:
        assert self.compile_check is not None
        error = self.compile_check(CandidateSource(d.code, self._origin(d)))
        return _Draft(d.code, d.move, d.focus, d.repairs, error)

    def _origin(self, d: _Draft) -> str:
        return f"llm:{self.client.config.model}:{d.move.kind}:{d.focus.key}"

    @staticmethod
    def _unique(ctx: RewriteContext, drafts: Sequence[_Draft]) -> list[_Draft]:
        """Drafts whose source is new: not the parent, not already in the run, not an
        earlier draft of this batch (F9; the search dedupes by hash too)."""
        seen = set(ctx.seen_sources)
        if ctx.parent is not None:
            seen.add(ctx.parent.sha256)
        out = []
        for d in drafts:
            sha = CandidateSource(d.code).sha256
            if sha not in seen:
                seen.add(sha)
                out.append(d)
        return out


def _endpoint_errors(results: Sequence[object]) -> list[Exception]:
    """The endpoint's errors among ``results``; any other exception (a store that cannot
    record, a bug) is raised at once, because continuing could lose track of spending."""
    errors = []
    for r in results:
        if isinstance(r, (LLMError, BudgetExceededError)):
            errors.append(r)
        elif isinstance(r, BaseException):
            raise r
    return errors


def _most_serious(errors: Sequence[Exception]) -> Exception:
    for kind in (BudgetExceededError, RateLimitError):
        for e in errors:
            if isinstance(e, kind):
                return e
    return errors[0]
