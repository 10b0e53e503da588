"""``Search``: the facade that runs the tree search (Optuna's ``Study``).

It composes injected collaborators and owns no math and no SQL: a store
(:class:`~cutegen.search.storage.BaseStorage`), an evaluator
(:class:`~cutegen.codegen.backend.Evaluator`), a rewriter
(:class:`~cutegen.codegen.rewriters.base.Rewriter`), the pure policy and tree cache, and an
optional delayed-profiling hook. One iteration is::

    ask():  reuse the oldest WAITING node, else select (UCT + widening) and expand
            (rewriter proposals stored as WAITING nodes, one commit), then claim it (RUNNING)
    evaluate in the evaluator's worker process, heartbeats running meanwhile
    tell(): profile hook (correct nodes), lesson, gated best (may re-time), then ONE commit
            of evaluation + profile reports + lesson + best decision + dead-end prunes +
            COMPLETE

Every state change is a committed row, and every random choice draws from
``random.Random(f"{seed}:{node}:{cost}:{n_children}")``, facts that are stored, so a run
killed at any point and resumed makes exactly the choices an uninterrupted run makes.
With ``params.parallel > 1``, :meth:`Search.run` keeps that many evaluations in flight
(:mod:`cutegen.search._parallel`; what "exactly" means there is stated in that module).
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import time
from collections.abc import Callable

from cutegen.codegen.backend import Evaluator
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, Verdict
from cutegen.codegen.rewriters.base import RewriteContext, Rewriter
from cutegen.codegen.tasks import Task
from cutegen.errors import BudgetExceededError, CuteGenError, InfrastructureError, StorageError
from cutegen.profilers import Finding
from cutegen.search import _best, _policy
from cutegen.search._budget import Budget, Usage
from cutegen.search._lessons import Lessons, classify
from cutegen.search._node import ROOT, FrozenNode
from cutegen.search._params import SearchParams
from cutegen.search._profile_hook import STAGE1, ProfileHook
from cutegen.search._results import NodeHandle, RunSummary, StepReport
from cutegen.search._session import HOST, Heartbeat, SetView, log, pid_alive
from cutegen.search._state import NodeState
from cutegen.search._tree import ResultFact, Selection, TreeCache
from cutegen.search.storage import (
    BaseStorage,
    BestDecision,
    FrozenRun,
    LessonRecord,
    ProfileRecord,
    PruneRecord,
    Session,
    StoredResult,
    SweepsTemporaries,
)


class Search:
    """Runs one search run against one store. Use as a context manager (or open/close)."""

    def __init__(self, *, storage: BaseStorage, run: FrozenRun, task: Task,
                 evaluator: Evaluator, rewriter: Rewriter, params: SearchParams | None = None,
                 budget: Budget | None = None, profile_hook: ProfileHook | None = None,
                 clock: Callable[[], float] = time.time, heartbeat: bool = True) -> None:
        self.storage, self.run_record, self.task = storage, run, task
        self.evaluator, self.rewriter = evaluator, rewriter
        self.params = params or SearchParams()
        self.budget = budget or Budget()
        self.profile_hook = profile_hook
        self._clock = clock
        self._use_heartbeat = heartbeat
        self._seed = run.config.seed
        self._session: Session | None = None
        self._heartbeat: Heartbeat | None = None
        self._broken = False
        self._asked_at: dict[int, float] = {}  # node id -> when ask() claimed it
        self._eval_s: list[float] = []  # ask-to-tell seconds of this session's evaluations
        self._lessons = Lessons(storage, run_id=run.id, task_name=task.name,
                              task_sha256=task.sha256, tolerance=self.params.same_tolerance,
                              limit=self.params.lessons_limit, ban_after=self.params.ban_after)

    # -- lifetime -------------------------------------------------------------------
    def __enter__(self) -> Search:
        self.open()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.close("failed" if exc is not None and not isinstance(exc, KeyboardInterrupt)
                   else "stopped")

    def open(self) -> None:
        """Take the run's lease, requeue work lost by a dead session, rebuild the tree.

        Raises:
            RunLockedError: another live process is searching this run.
            StorageError: the store cannot be read or written.
        """
        run_id = self.run_record.id
        self._session, _ = self.storage.open_session(
            run_id, host=HOST, pid=os.getpid(), stale_after_s=self.params.stale_after_s,
            is_alive=pid_alive)
        try:
            self._resume(run_id)
        except BaseException:
            self.close("failed")
            raise

    def _resume(self, run_id: int) -> None:
        assert self._session is not None
        ended = {s.id for s in self.storage.get_sessions(run_id) if s.ended_at is not None}
        requeued = self.storage.requeue_stale_nodes(
            run_id, older_than=self._clock() - self.params.stale_after_s, dead_sessions=ended)
        if requeued:
            log.warning("requeued %d node(s) left RUNNING by a dead session: %s",
                        len(requeued), [n.id for n in requeued])
        if isinstance(self.storage, SweepsTemporaries):
            self.storage.sweep_temporaries(run_id)
        self._load()
        for nid in list(self._waiting):
            if self._nodes[nid].attempts >= self.params.max_attempts:
                self._fail(self._nodes[nid], f"its evaluation was lost "
                                             f"{self._nodes[nid].attempts} times")
        self.storage.set_run_status(run_id, "running")
        if self._use_heartbeat:
            self._heartbeat = Heartbeat(self.storage, self._session.id,
                                        interval_s=self.params.heartbeat_s)
            self._heartbeat.start()

    def close(self, status: str = "stopped") -> None:
        """Release the lease and record the run's status (idempotent)."""
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        if self._session is not None:
            session, self._session = self._session, None
            try:
                self.storage.close_session(session.id, status)
                self.storage.set_run_status(self.run_record.id, status)
            except StorageError:
                log.exception("could not record the end of the session")

    def _load(self) -> None:
        run_id = self.run_record.id
        nodes = self.storage.get_nodes(run_id)
        self._nodes = {n.id: n for n in nodes}
        self._results = {r.node_id: r for r in self.storage.get_results(run_id)}
        self._seen = {n.source_sha256 for n in nodes}
        self._waiting = [n.id for n in nodes if n.state == NodeState.WAITING]
        facts = [self._fact(self._nodes[r.node_id], r) for r in self._results.values()]
        exhausted = [(p.node_id, p.kind.split(":", 1)[1])
                     for p in self.storage.get_prunes(run_id) if p.kind.startswith("exhausted:")]
        self._tree = TreeCache.rebuild(
            [(n.id, n.parent_id, n.move.cost) for n in nodes], facts, exhausted,
            params=self.params.reward, dead_end_m=self.params.dead_end_m)
        for a in sorted(self._tree.dead_ends):  # rows missing only if written by an older run
            self.storage.record_prune(self._dead_end_row(a, trigger=None))
        history = self.storage.get_best_history(run_id)
        accepted = [d.node_id for d in history if d.accepted]
        self._best = self._nodes[accepted[-1]] if accepted else None
        self._gpu_s = (sum(r.gpu_seconds for r in self._results.values())
                       + sum(d.retime_seconds for d in history))
        self._past_wall_s = sum((s.ended_at or s.heartbeat_at) - s.started_at
                                for s in self.storage.get_sessions(run_id)
                                if self._session is None or s.id != self._session.id)

    def _require_open(self) -> Session:
        if self._session is None:
            raise CuteGenError("the search is not open (use `with Search(...)` or .open())")
        if self._broken:
            raise StorageError("a commit failed earlier; reopen the search to continue")
        return self._session

    # -- the loop -------------------------------------------------------------------
    def ask(self) -> NodeHandle | None:
        """Claim the next node to evaluate; None when the tree has nothing left to try.

        Raises:
            StorageError: the store failed (the run must stop).
        """
        session = self._require_open()
        while not self._waiting:
            sel = self._tree.select(c=self.params.c, root=self.params.root,
                                    cheap=self.params.cheap, expensive=self.params.expensive,
                                    virtual_value=self.params.virtual_loss)
            if sel is None:
                return None
            self._expand(sel)
        nid = self._waiting.pop(0)
        node = self.storage.set_node_state(nid, NodeState.RUNNING, expected=NodeState.WAITING,
                                           session_id=session.id)
        self._nodes[nid] = node
        self._tree.begin(nid)  # virtual loss while in flight (matters only in parallel)
        self._asked_at[nid] = self._clock()
        if self._heartbeat is not None:
            self._heartbeat.add(nid)
        return NodeHandle(node, CandidateSource(self.storage.get_source(nid), node.origin))

    def _expand(self, sel: Selection) -> None:
        v = sel.node_id
        rng = random.Random(f"{self._seed}:{v}:{sel.cost}:{len(self._tree.children(v))}")
        ctx = self._context(v)
        if v == ROOT:
            proposals = self.rewriter.initial(ctx, n=self.params.initial_candidates, rng=rng)
        else:
            proposals = self.rewriter.propose(ctx, n=self.params.proposals_per_expansion,
                                              cost=sel.cost, rng=rng)  # type: ignore[arg-type]
        fresh, shas = [], set()
        for p in proposals:
            if p.candidate.sha256 not in self._seen and p.candidate.sha256 not in shas:
                fresh.append(p)
                shas.add(p.candidate.sha256)
        if not fresh:
            self.storage.record_prune(PruneRecord(
                self.run_record.id, v, f"exhausted:{sel.cost}",
                f"the {self.rewriter.name} rewriter has no new {sel.cost} move for it"))
            self._tree.mark_exhausted(v, sel.cost)
            return
        with self.storage.atomic():
            added = [self.storage.add_node(self.run_record.id, parent_id=None if v == ROOT else v,
                                           source=p.candidate, move=p.move) for p in fresh]
        for n in added:
            self._nodes[n.id] = n
            self._seen.add(n.source_sha256)
            self._waiting.append(n.id)
            self._tree.add_node(n.id, n.parent_id, n.move.cost)

    def _context(self, v: int) -> RewriteContext:
        seen = SetView(self._seen)
        if v == ROOT:
            return RewriteContext(task=self.task, lessons=self._lessons.views(), seen_sources=seen)
        node = self._nodes[v]
        return RewriteContext(
            task=self.task, parent=CandidateSource(self.storage.get_source(v), node.origin),
            evaluation=self.storage.get_evaluation(v), findings=self._findings(v),
            lessons=self._lessons.views(), depth=node.depth, seen_sources=seen,
            banned_moves=self._lessons.banned_moves(node.source_sha256))

    def _findings(self, node_id: int) -> tuple[Finding, ...]:
        """What the profilers found on a node, for its rewriter: the stage-1 class and
        every hint of the reports that ran, each once."""
        out: dict[tuple[str, str], Finding] = {}
        for p in self.storage.get_profiles(node_id):
            if p.status != "ok" or p.profiler == "profile_hook":  # an older run's digest
                continue
            for f in p.findings:
                if f.is_hint or p.profiler == STAGE1:
                    out.setdefault((f.key, str(f.value)), f)
        return tuple(out.values())

    def evaluate(self, handle: NodeHandle) -> Evaluation:
        """Evaluate a claimed node; an infrastructure error requeues it and propagates.

        Raises:
            InfrastructureError: the machine failed; the node goes back to WAITING (or
                FAILED after ``max_attempts``) and the run should pause.
        """
        try:
            return self.evaluator.evaluate(handle.candidate)
        except InfrastructureError as e:
            self._lose(handle.node, f"infrastructure error: {e}")
            raise

    def tell(self, handle: NodeHandle, evaluation: Evaluation) -> StepReport:
        """Commit a claimed node's evaluation with everything derived from it.

        Raises:
            StorageError: the commit failed; nothing of it was stored and this Search
                object must be reopened.
            InfrastructureError: re-timing for the gated best failed (the node is requeued).
        """
        self._require_open()
        node = self._nodes[handle.node.id]
        ev = evaluation
        asked = self._asked_at.pop(node.id, None)
        if asked is not None:
            self._eval_s.append(self._clock() - asked)
        reward = _policy.reward(verdict=ev.verdict, speedup=ev.speedup_eager,
                                params=self.params.reward)
        profiles: tuple[ProfileRecord, ...] = ()
        profile_s = 0.0
        if ev.verdict.ok and self.profile_hook is not None:
            t0 = self._clock()
            profiles = tuple(self.profile_hook(node, ev))
            profile_s = self._clock() - t0
        # GPU time of this node: the evaluation's time on its GPU, plus profiling (charged
        # here so the budget survives a resume: it is summed from the evaluations rows)
        gpu_s = ev.gpu_seconds + profile_s
        result = StoredResult(0, node.id, ev.verdict, reward, ev.time_us, ev.speedup_eager,
                              ev.speedup_compile, gpu_s)
        lesson = None
        if node.parent_id is not None:
            lesson = self._lessons.lesson(node=node, parent=self._nodes[node.parent_id],
                                         parent_result=self._results[node.parent_id],
                                         child_result=result)
        try:
            decision = self._gate(node, handle.candidate, result)
        except InfrastructureError as e:
            self._lose(node, f"re-timing failed: {e}")
            raise
        return self._commit(node, ev, result, profiles, lesson, decision)

    def _commit(self, node: FrozenNode, ev: Evaluation, result: StoredResult,
                profiles: tuple[ProfileRecord, ...], lesson: LessonRecord | None,
                decision: BestDecision | None,
                state: NodeState = NodeState.COMPLETE) -> StepReport:
        session = self._require_open()
        try:
            with self.storage.atomic():
                current = self.storage.get_node(node.id)
                if current.state == NodeState.RUNNING and current.session_id != session.id:
                    raise StorageError(f"node {node.id} was reclaimed by session "
                                       f"{current.session_id}; this result is dropped")
                rid = self.storage.record_evaluation(node.id, ev, reward=result.reward,
                                                     gpu_seconds=result.gpu_seconds)
                for profile in profiles:
                    self.storage.record_profile(profile)
                if lesson is not None:
                    self.storage.add_lesson(lesson)
                if decision is not None:
                    self.storage.record_best(decision)
                result = dataclasses.replace(result, id=rid)
                self._tree.end(node.id)
                newly_dead = self._tree.add_result(self._fact(node, result))
                for a in newly_dead:
                    self.storage.record_prune(self._dead_end_row(a, trigger=node.id))
                finished = self.storage.set_node_state(node.id, state, expected=node.state)
        except BaseException:
            self._broken = True  # the tree cache may be ahead of the store now
            raise
        self._nodes[node.id] = finished
        self._results[node.id] = result
        self._gpu_s += result.gpu_seconds + (decision.retime_seconds if decision else 0.0)
        changed = decision is not None and decision.accepted
        if changed:
            self._best = finished
        if self._heartbeat is not None:
            self._heartbeat.discard(node.id)
        outcome = lesson.outcome if lesson is not None else None
        return StepReport(finished, ev, result.reward, outcome, self._best, changed)

    def _fact(self, node: FrozenNode, r: StoredResult) -> ResultFact:
        regressed = None
        if node.parent_id is not None and node.parent_id in self._results:
            outcome, _ = classify(self._results[node.parent_id], r,
                                  tolerance=self.params.same_tolerance)
            regressed = outcome == "slower" or not r.verdict.ok
        return ResultFact(node.id, r.reward, r.verdict.ok, regressed)

    def _dead_end_row(self, node_id: int, *, trigger: int | None) -> PruneRecord:
        m = self.params.dead_end_m
        return PruneRecord(self.run_record.id, node_id, "dead_end",
                           f"its last {m} expansions all failed or were slower than it",
                           {"m": m, "trigger_node": trigger})

    def _gate(self, node: FrozenNode, cand: CandidateSource, r: StoredResult
              ) -> BestDecision | None:
        best = self._best

        def retime() -> list[Timing | None]:
            assert best is not None
            old = CandidateSource(self.storage.get_source(best.id), best.origin)
            return self.evaluator.retime([old, cand], rounds=self.params.gate.rounds)

        return _best.decide(run_id=self.run_record.id, node_id=node.id, new=r,
                            best_id=best.id if best else None,
                            best=self._results[best.id] if best else None, retime=retime,
                            params=self.params.gate, clock=self._clock)

    def requeue(self, handle: NodeHandle, why: str) -> None:
        """Give back a claimed node whose evaluation was lost (a device failed under it):
        WAITING again with attempts + 1, first in line, or FAILED after ``max_attempts``.

        Raises:
            StorageError: the store failed.
        """
        self._require_open()
        self._lose(self._nodes[handle.node.id], why)

    def _lose(self, node: FrozenNode, why: str) -> None:
        """An evaluation was lost: back to WAITING with attempts + 1, or FAILED."""
        self._tree.end(node.id)
        if self._heartbeat is not None:
            self._heartbeat.discard(node.id)
        node = self.storage.requeue_node(node.id)
        self._nodes[node.id] = node
        if node.attempts >= self.params.max_attempts:
            self._fail(node, why)
        elif node.id not in self._waiting:
            self._waiting.insert(0, node.id)

    def _fail(self, node: FrozenNode, why: str) -> None:
        ev = Evaluation(candidate_sha256=node.source_sha256, task_sha256=self.task.sha256,
                        stage=Stage.STATIC, verdict=Verdict.CRASH,
                        message=f"not evaluated: {why} (attempts {node.attempts})",
                        flags=("attempts_exhausted",))
        reward = _policy.reward(verdict=ev.verdict, speedup=None, params=self.params.reward)
        result = StoredResult(0, node.id, ev.verdict, reward, None, None, None)
        lesson = None
        if node.parent_id is not None:
            lesson = self._lessons.lesson(node=node, parent=self._nodes[node.parent_id],
                                         parent_result=self._results[node.parent_id],
                                         child_result=result)
        if node.id in self._waiting:
            self._waiting.remove(node.id)
        self._commit(node, ev, result, (), lesson, None, state=NodeState.FAILED)

    def step(self) -> StepReport | None:
        """One iteration (ask, evaluate, tell); None when the tree is exhausted."""
        handle = self.ask()
        if handle is None:
            return None
        return self.tell(handle, self.evaluate(handle))

    def usage(self) -> Usage:
        """Resources used so far, over all sessions of the run."""
        now = self._clock()
        current = now - self._session.started_at if self._session is not None else 0.0
        return Usage(evals=len(self._results), wall_s=self._past_wall_s + current,
                     gpu_s=self._gpu_s, usd=self.storage.llm_spent_usd(self.run_record.id))

    def run(self, *, should_stop: Callable[[], bool] | None = None,
            on_step: Callable[[StepReport], None] | None = None) -> RunSummary:
        """Iterate until a budget limit, exhaustion of the tree, or ``should_stop()``.

        The check happens between iterations: the evaluation in flight always finishes
        and is committed. Raises what :meth:`ask`, :meth:`evaluate` and :meth:`tell` raise.
        With ``params.parallel > 1`` the parallel driver runs instead
        (:func:`cutegen.search._parallel.run_parallel`).
        """
        if self.params.parallel > 1:
            from cutegen.search._parallel import run_parallel

            return run_parallel(self, should_stop=should_stop, on_step=on_step)
        while True:
            usage = self.usage()
            reason = (self.budget.reached(usage)
                      or self.budget.next_overruns(usage, self.eval_estimate()))
            if reason is not None:
                status = "finished"
                break
            if should_stop is not None and should_stop():
                reason, status = "stopped on request", "stopped"
                break
            try:
                report = self.step()
            except BudgetExceededError as e:
                # the LLM's hard cap refused the next call before sending it: a clean stop
                reason, status = f"LLM dollar cap reached ({e})", "finished"
                break
            if report is None:
                reason, status = "nothing left to try (every branch exhausted or pruned)", \
                    "finished"
                break
            if on_step is not None:
                on_step(report)
        self.close(status)
        return self.summary(reason, status)

    def eval_estimate(self) -> float | None:
        """Typical wall seconds of one evaluation: the median ask-to-tell time in this
        session, else (just resumed) the median GPU seconds of the stored evaluations (a
        lower bound); None before any evaluation."""
        seen = self._eval_s or [r.gpu_seconds for r in self._results.values() if r.gpu_seconds > 0]
        return statistics.median(seen) if seen else None

    @property
    def best(self) -> FrozenNode | None:
        return self._best

    def summary(self, reason: str = "", status: str = "") -> RunSummary:
        counts: dict[str, int] = {}
        for r in self._results.values():
            counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
        best_speedup = self._results[self._best.id].speedup_eager if self._best else None
        # (the indexed results hold the fp32 speed-up only: the TF32 one from the best's row)
        best_ev = self.storage.get_evaluation(self._best.id) if self._best else None
        return RunSummary(self.run_record.name, reason, status, len(self._results), counts,
                          self._best, best_speedup, self.usage(),
                          best_ev.speedup_eager_tf32 if best_ev else None)

