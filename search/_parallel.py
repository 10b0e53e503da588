"""The parallel driver: several evaluations in flight, one thread that asks and tells.

:func:`run_parallel` is what :meth:`Search.run` does when ``params.parallel > 1``. The
calling thread (the *search thread*) is the only one that selects, expands, claims and
commits; the evaluator (an :class:`~cutegen.codegen.backend.AsyncEvaluator`: a
:class:`~cutegen.codegen.pool.GpuPool` or a Ray pool) runs the evaluations on its devices::

    fill:  while fewer than `parallel` are in flight and no limit is reached:
               ask() (selection sees the in-flight nodes through virtual loss) -> submit
    tell:  take one finished evaluation and commit it (profile hook, gate, lesson, ...)
    repeat until nothing is in flight and nothing more may be asked

``ask()`` returning None while work is in flight means "wait": the open branches are all
pending; their results may open new ones.

**Order of tells and what resume means.** With ``params.tell_in_order`` (the default) the
search tells results in the order it claimed the nodes, waiting for the oldest even when a
younger one finished first, and it asks again only after a tell. Every selection then sees
exactly the same committed results and the same in-flight set whatever the devices' timing,
so (given the evaluations' results) the tree depends only on the run's seed and
``parallel``, not on timing or the number of devices; and a run killed at any point and
resumed with the same ``parallel`` builds exactly the tree of an uninterrupted one: the
store holds every committed tell in order, the nodes that were in flight are requeued in
claim order (their ids) and claimed again first. The cost is head-of-line waiting: a device
that finished early idles until the oldest evaluation is told.

With ``tell_in_order=False`` each result is told as it arrives, and a device never waits
for another. The guarantee is then the weaker one: every committed result survives a kill,
the in-flight nodes are re-evaluated after a resume (attempts + 1), no node is committed
twice (claims are compare-and-set), and the resumed tree's statistics are the replay of the
committed results in commit order, but which nodes exist depends on arrival order, so two
runs (or a run and its resumed twin) may differ.

Either way a device that fails (:class:`~cutegen.errors.DeviceLostError`) costs one attempt
of the node it held, which goes back to the front of the queue; the run continues on the
devices left, and pauses (raises) only when none is left. Budgets are checked before every
ask with the evaluations in flight counted, so a run never starts more than its evaluation
budget; the in-flight evaluations always finish and are committed before the run ends.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import functools
import logging
import queue
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cutegen.codegen.backend import Aborts, AsyncEvaluator, Prepares
from cutegen.codegen.evaluation import Evaluation
from cutegen.errors import BudgetExceededError, ConfigError, InfrastructureError
from cutegen.search._results import NodeHandle, RunSummary, StepReport
from cutegen.search._state import NodeState

if TYPE_CHECKING:
    from cutegen.search._search import Search

log = logging.getLogger("cutegen.search")

_EXHAUSTED = "nothing left to try (every branch exhausted or pruned)"


@dataclass(frozen=True, slots=True)
class _Flight:
    handle: NodeHandle
    future: cf.Future[Evaluation]


class _Driver:
    def __init__(self, search: Search, should_stop: Callable[[], bool] | None,
                 on_step: Callable[[StepReport], None] | None) -> None:
        ev = search.evaluator
        if not isinstance(ev, AsyncEvaluator):
            raise ConfigError(f"params.parallel = {search.params.parallel} needs an evaluator "
                              "that accepts work asynchronously (a GpuPool, local or over Ray); "
                              f"{type(ev).__name__} does not")
        self.search, self.ev = search, ev  # an AsyncEvaluator from here on
        self.should_stop, self.on_step = should_stop, on_step
        self.width = search.params.parallel
        self.in_order = search.params.tell_in_order
        self.flight: dict[int, _Flight] = {}  # claim order
        self.arrived: queue.SimpleQueue[int] = queue.SimpleQueue()

    def capacity(self) -> int:
        return int(self.ev.capacity)

    def fill(self) -> tuple[str, str] | None:
        """Ask and submit until the window is full; a (reason, status) ends the run."""
        s = self.search
        while len(self.flight) < self.width:
            usage = s.usage()
            reason = (s.budget.reached(dataclasses.replace(
                usage, evals=usage.evals + len(self.flight)))
                or s.budget.next_overruns(usage, s.eval_estimate()))
            if reason is not None:
                return reason, "finished"
            if self.should_stop is not None and self.should_stop():
                return "stopped on request", "stopped"
            try:
                handle = s.ask()
            except BudgetExceededError as e:
                return f"LLM dollar cap reached ({e})", "finished"
            if handle is None:
                return None if self.flight else (_EXHAUSTED, "finished")
            fut = self.ev.submit(handle.candidate)
            nid = handle.node.id
            self.flight[nid] = _Flight(handle, fut)
            if not self.in_order:
                fut.add_done_callback(functools.partial(self._arrived, nid))
        return None

    def _arrived(self, nid: int, _future: object) -> None:
        self.arrived.put(nid)

    def next_done(self) -> int:
        """The node whose result is told next (waits for it; a timeout keeps ^C working)."""
        if self.in_order:
            nid = next(iter(self.flight))
            while not self.flight[nid].future.done():
                cf.wait([self.flight[nid].future], timeout=1.0)
            return nid
        while True:
            try:
                nid = self.arrived.get(timeout=1.0)
            except queue.Empty:
                continue
            if nid in self.flight and self.flight[nid].future.done():
                return nid

    def tell_one(self) -> None:
        nid = self.next_done()
        f = self.flight.pop(nid)
        try:
            evaluation = f.future.result()
        except InfrastructureError as e:
            self.search.requeue(f.handle, f"infrastructure error: {e}")
            self._survive(e)
            return
        try:
            report = self.search.tell(f.handle, evaluation)
        except InfrastructureError as e:  # re-timing (tell requeued the node) or profiling
            if self.search.storage.get_node(nid).state == NodeState.RUNNING:
                self.search.requeue(f.handle, f"infrastructure error while telling: {e}")
            self._survive(e)
            return
        if self.on_step is not None:
            self.on_step(report)

    def _survive(self, e: InfrastructureError) -> None:
        if self.capacity() < 1:
            raise e
        log.warning("evaluation lost, node requeued; %d device(s) left: %s", self.capacity(), e)

    def abandon(self) -> None:
        for f in self.flight.values():
            f.future.cancel()
        if isinstance(self.ev, Aborts):
            self.ev.abort()


def run_parallel(search: Search, *, should_stop: Callable[[], bool] | None = None,
                 on_step: Callable[[StepReport], None] | None = None) -> RunSummary:
    """Run ``search`` with ``search.params.parallel`` evaluations in flight (see the module
    docstring for the order of tells and what resume guarantees).

    Raises:
        ConfigError: the evaluator cannot take work asynchronously.
        InfrastructureError: no device is left (the run pauses; nodes are requeued).
        StorageError: a commit failed.
    """
    d = _Driver(search, should_stop, on_step)
    if isinstance(d.ev, Prepares):
        d.ev.prepare()  # baselines measured in this thread: pool threads never write the store
    end: tuple[str, str] | None = None
    try:
        while True:
            if end is None:
                end = d.fill()
            if not d.flight:
                break
            d.tell_one()
    except BaseException:
        d.abandon()  # the nodes in flight stay RUNNING and are requeued on the next open
        raise
    assert end is not None
    reason, status = end
    search.close(status)
    return search.summary(reason, status)
