"""One candidate worker driven through its calls, and what the parent makes of it.

:class:`CandidateWorker` is a started worker process with the parent's ends of its
channels: the message pipe (claims), the native observer's authenticated record stream
(facts about the GPU) and the audit pipe (sandbox denials). :class:`CandidateRun` is one
evaluation's event loop over such a worker:

1. send the job (candidate file, shapes, the reference's shared input buffers), wait until
   the candidate is imported and ``ModelNew`` built for every shape;
2. for every call of the plan (:mod:`.plan`): have the reference worker write fresh inputs,
   send ``call`` and note the parent's clock, wait for ``done`` (compile and run time
   limits, host-memory watchdog) and note the clock again, hand the outputs to the
   reference worker (compare now, keep a copy, or copy to scratch at the same cost);
3. after the verification calls, read the observer and stop early when the calls already
   show a decoy or a library doing the work; after the last call, compare the kept copies;
4. assign every observed GPU operation to the window it started in (:mod:`.activity`) and
   hand all facts to :func:`.verdict.decide`.
"""

from __future__ import annotations

import math
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutegen.codegen.eval.activity import (
    Activity,
    Window,
    analyse,
    identity,
    poisoned_sizes,
    prefilled_count,
)
from cutegen.codegen.eval.plan import Call, ShapeInfo, benchmark_plan, verification_plan
from cutegen.codegen.eval.process import WorkerProcess
from cutegen.codegen.eval.sandbox import AUDIT_LOST_EXIT
from cutegen.codegen.eval.verdict import RunFacts
from cutegen.codegen.inputs import timing_distribution
from cutegen.errors import InfrastructureError

if TYPE_CHECKING:
    from cutegen.codegen.eval.evaluator import LocalEvaluator
    from cutegen.codegen.eval.observer import ObserverChannel


#: How long after the audit pipe ends the worker may take to exit for the end to count as
#: its exit closing the pipe (the worker calls ``os._exit`` right after its last message, but
#: the kernel closes a process's files one by one and the GPU driver's own files, closed in
#: the same pass, tear the CUDA context down, which can take a while for a large one).
EXIT_GRACE_S = 5.0


class AuditReader:
    """Reads the sandbox's denial lines; notes whether the pipe was closed before the worker
    process ended (the candidate closing it) or by the process's exit.

    Which of the two happened is decided from the process, never from the order in which two
    reader threads saw two pipes end: on a loaded host the result pipe's reader can stamp the
    worker's last message after the audit reader stamped the end it caused (found on the
    H200 with four evaluations side by side: an honest reduction called ``suspicious``)."""

    def __init__(self, fd: int, exited: Callable[[], bool] | None = None) -> None:
        self.lines: list[str] = []
        self.closed_at: int | None = None
        #: True when the process had ended within :data:`EXIT_GRACE_S` of the pipe's end.
        self.closed_by_exit = False
        self._exited = exited
        self._fd = fd
        self._done = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    break
                buf += chunk
                *done, buf = buf.split(b"\n")
                self.lines.extend(x.decode("utf-8", "replace") for x in done if x)
                if len(self.lines) > 1000:
                    del self.lines[1000:]
        except OSError:
            pass
        finally:
            self.closed_at = time.monotonic_ns()
            try:
                os.close(self._fd)
            except OSError:
                pass
            self.closed_by_exit = self._exited is not None and _within(self._exited, EXIT_GRACE_S)
            self._done.set()

    def closed_early(self, timeout: float = EXIT_GRACE_S + 1.0) -> bool:
        """Did the pipe end while the worker process lived on (the candidate closed it)?
        False while the pipe is still open (the caller ends the process first)."""
        self._done.wait(timeout)
        return self.closed_at is not None and not self.closed_by_exit


def _within(exited: Callable[[], bool], seconds: float) -> bool:
    """Poll ``exited`` until it is true or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        if exited():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


@dataclass
class CandidateWorker:
    """A started candidate worker and the parent's ends of its channels."""

    proc: WorkerProcess
    workdir: Path
    observer: ObserverChannel | None
    audit: AuditReader | None

    def kill(self) -> set[int]:
        pids = self.proc.kill()
        if self.observer is not None:
            self.observer.close()
        return pids


@dataclass
class _State:
    facts: RunFacts
    phase: str = "start"
    phase_t: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)
    windows: list[Window] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)
    sass: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def enter(self, phase: str, t: float) -> None:
        group = {"import": "setup", "init": "setup", "compile": "compile", "call": "call",
                 "handoff": "call", "verify": "verify", "benchmark": "benchmark"}.get(self.phase)
        if group:
            self.seconds[group] = self.seconds.get(group, 0.0) + (t - self.phase_t)
        self.phase, self.phase_t = phase, t


def _empty_result(shape: dict[str, Any]) -> bool:
    """Whether the reference's result at this shape (the reference worker's ``outputs``) is
    tensors without elements."""
    outs = shape.get("outputs") or []
    return bool(outs) and all("shape" in o and math.prod(o["shape"]) == 0 for o in outs)


class _Stop(Exception):
    """The run ended (a fault the facts already hold); skip to the verdict."""


class CandidateRun:
    """One evaluation of one candidate in one worker (see the module docstring)."""

    def __init__(self, ev: LocalEvaluator, worker: CandidateWorker, info: dict[str, Any], *,
                 sol_us: float | None, verify: bool = True, bench: bool = True) -> None:
        self.ev, self.w, self.info = ev, worker, info
        self.o = ev.options
        self.rng = secrets.SystemRandom()
        self.st = _State(RunFacts(sol_us=sol_us))
        self.verify, self.bench = verify, bench
        if ev.mode == "compile":
            verify = bench = False
        shapes = [ShapeInfo(s["label"]) for s in info["shapes"]]
        self.plan: list[Call] = []
        self.st.facts.determinism_label = ""
        if verify:
            self.plan = verification_plan(shapes, info["distributions"],
                                          main_trials=self.o.main_trials, rng=self.rng)
            self.st.facts.determinism_label = next(c.label for c in self.plan
                                                   if c.role == "determinism")
        self.n_verify = len(self.plan)
        if bench:
            slots = max(0, int(info.get("keep_slots", 0)))
            self.plan += benchmark_plan(len(self.plan), warmup=self.o.bench_warmup,
                                        runs=self.o.bench_runs, keep_slots=slots,
                                        ghost=verify and self.o.ghost_check, rng=self.rng,
                                        ghost_of=self.plan[0] if self.plan else None,
                                        dist=timing_distribution(info["distributions"]))
        f = self.st.facts
        f.timed_ks = tuple(c.k for c in self.plan if c.timed)
        f.ghost_k = next((c.k for c in self.plan if c.role == "ghost"), None)
        f.first_main_k = next((c.k for c in self.plan if c.shape == 0), 0)
        empty = {i for i, s in enumerate(info["shapes"]) if _empty_result(s)}
        f.empty_ks = frozenset(c.k for c in self.plan if c.shape in empty)
        self.slot_of: dict[int, int] = {}
        self.t_bye: int | None = None
        #: when the evaluation's calls and comparisons must be over (set by run)
        self.deadline = math.inf
        #: seconds spent waiting on the reference worker (drawing inputs, comparing)
        self.ref_s = 0.0
        self.host_reference = False  # a comparison's float64 reference was in host memory

    # -- the worker's messages -----------------------------------------------------------
    def _await(self, want: str, *, limit: float) -> tuple[dict[str, Any], int]:
        """Wait for message ``want``; apply phase limits and the memory watchdog.

        Raises _Stop after recording the reason in the facts."""
        f, o = self.st.facts, self.o
        proc = self.w.proc
        deadline = time.monotonic() + limit
        next_rss = time.monotonic() + 0.5
        while True:
            now = time.monotonic()
            if now >= deadline:
                f.timeout_phase = self.st.phase
                raise _Stop
            if now >= next_rss:
                next_rss = now + 0.5
                if proc.rss_bytes() > o.host_mem_limit_mb * 2**20:
                    f.killed_reason = (f"out of host memory: above the {o.host_mem_limit_mb} MiB "
                                       f"limit in phase '{self.st.phase}'")
                    raise _Stop
            e = proc.next_event(min(deadline - now, 0.5))
            if e is None:
                continue
            kind, msg, t_ns = e
            if kind == "eof":
                try:
                    proc.proc.wait(timeout=5)
                except Exception:  # noqa: BLE001 - still running: it closed the pipe itself
                    pass
                f.exit_desc = proc.exit_description() if not proc.alive() else "closed its result pipe"
                raise _Stop
            if kind == "protocol_error":
                f.protocol_error = str(msg)
                raise _Stop
            typ = msg.get("t")
            if typ == "phase":
                self.st.enter(str(msg.get("phase")), time.monotonic())
                lim = o.compile_timeout_s if self.st.phase == "compile" else o.run_timeout_s
                deadline = time.monotonic() + lim
            elif typ == "error":
                f.error = msg
                raise _Stop
            elif typ == "infra":
                raise InfrastructureError(str(msg.get("message")))
            elif typ == "note":
                self.st.notes.extend(str(x) for x in msg.get("notes", []))
            elif typ == "compile_info":
                f.kernel_names = [str(x) for x in msg.get("kernels", [])]
                self.st.sass.extend(str(x) for x in msg.get("sass", []))
                if typ == want:
                    return msg, t_ns
            elif typ == "compiled":
                f.compiled = msg
                f.kernel_names = [str(x) for x in msg.get("kernels", [])]
                self.st.sass.extend(str(x) for x in msg.get("sass", []))
                if typ == want:
                    return msg, t_ns
            elif typ == want:
                return msg, t_ns

    # -- the run -------------------------------------------------------------------------
    def run(self, job: dict[str, Any]) -> RunFacts:
        """Drive the worker through the job; never raises for the candidate's faults."""
        f, o = self.st.facts, self.o
        t_start = time.monotonic()
        self.deadline = t_start + o.eval_timeout_s
        try:
            self.w.proc.send_line(job)
            self.st.enter("start", time.monotonic())
            if self.ev.mode == "compile":
                f.compile_only = True
                self._await("compiled", limit=o.run_timeout_s)
                return f
            self._await("loaded", limit=o.run_timeout_s)
            self.w.proc.send_line({"op": "init"})
            self._await("inited", limit=o.run_timeout_s)
            for c in self.plan:
                if c.k == self.n_verify and self.verify:
                    self._flush_observer()
                    if self._early_verdict():
                        break
                if c.k == self.n_verify:
                    f.benchmarked = True
                    self.st.enter("benchmark", time.monotonic())
                self._within_limit(t_start, flush=True)
                self._call(c)
                if f.trial_results and not f.trial_results[-1][1].get("passed") or f.handoff_failure:
                    break
            # Read the observer while the worker is alive and idle (its calls synchronised):
            # a stream that ends, or a flush that runs into unfinished work, is a failure.
            self._flush_observer()
            self.w.proc.send_line({"op": "end"})
            self._await("compile_info", limit=o.run_timeout_s)
            _, self.t_bye = self._await("bye", limit=30)
            f.finished = True
        except _Stop:
            pass
        finally:
            self.st.enter("end", time.monotonic())
        t0 = time.monotonic()
        for c in self.plan:
            if c.keep and c.k in self.slot_of and not f.timeout_phase and not f.error:
                try:
                    self._within_limit(t_start, flush=False)
                except _Stop:
                    break  # decided (timeout, or what ran): the other copies go unchecked
                r = self._ref({"op": "compare_kept", "slot": self.slot_of[c.k], "shape": c.shape,
                               "seed": c.seed, "dist": c.dist, "vary": c.k != 0})
                f.timed_results.append((c.k, r))
        self.st.seconds["verify"] = self.st.seconds.get("verify", 0.0) + time.monotonic() - t0
        return f

    def _ref(self, req: dict[str, Any]) -> dict[str, Any]:
        """One request to the reference worker, its time counted as checking's."""
        t0 = time.monotonic()
        try:
            r = self.ev.ref.call(req, timeout=self.o.run_timeout_s * 4)
        finally:
            self.ref_s += time.monotonic() - t0
        if r.get("reference") == "host64":
            self.host_reference = True
        return r

    def _within_limit(self, t_start: float, *, flush: bool) -> None:
        """Past the evaluation's limit (``eval_timeout_s``), end it: ``timeout`` where the
        candidate's calls took most of the time; where checking them did, the verdict of
        what already ran on the GPU if that decides it (work outside the calls, say, which
        could also have slowed the checks down), else InfrastructureError, no fault of the
        candidate's (found on the H100: KernelBench L1 25's float64 references, 38 GB beside
        the candidate's buffers, went to host memory and held one evaluation, and the bench
        it was part of, past 15 minutes). ``flush``: read the observer first (between calls;
        after the last one it was read already)."""
        now = time.monotonic()
        if now < self.deadline:
            return
        spent = now - t_start
        if self.ref_s * 2 < spent:
            self.st.facts.timeout_phase = "evaluation"
            raise _Stop
        if self.w.observer is not None:
            if flush:
                self._flush_observer()
            if self._early_verdict():
                raise _Stop
        self.slot_of.clear()
        try:
            self.ev.ref.call({"op": "release"}, timeout=120)  # the kept copies
        except Exception:  # noqa: BLE001 - the failure below is reported either way
            pass
        raise InfrastructureError(
            f"checking this candidate's outputs took {self.ref_s:.0f} s of the "
            f"{self.o.eval_timeout_s:.0f} s an evaluation may take (--eval-timeout)"
            + ("; the float64 references were computed in host memory, the GPU having no "
               "room for them beside the candidate's buffers: a GPU with more memory checks "
               "this task faster" if self.host_reference else "")
            + "; the candidate was not judged")

    def _call(self, c: Call) -> None:
        f, o = self.st.facts, self.o
        t_prep = time.monotonic()
        vary = c.k != 0 and c.role != "ghost"  # the first call (and its ghost) see the task's
        # own scalar values
        prep = self._ref({"op": "prepare", "shape": c.shape, "seed": c.seed, "dist": c.dist,
                          "vary": vary})
        self.st.seconds["inputs"] = self.st.seconds.get("inputs", 0.0) + time.monotonic() - t_prep
        if prep.get("ok") is False:  # no room to draw the inputs (``oom``): the call is not made
            if c.compare_now and c.role != "ghost":
                f.trial_results.append((c.label, prep))
            else:
                f.handoff_failure = (c.label, prep)
            return
        out_bytes = int(self.info["shapes"][c.shape]["output_bytes"])
        prefill = sorted({max(512, out_bytes), max(512, 2 * out_bytes), 1 << 20})
        cmd = {"op": "call", "k": c.k, "shape": c.shape, "pattern": c.pattern,
               "prefill": prefill, "ghost": c.role == "ghost",
               "scalars": prep.get("scalars") or {}}
        t0 = time.monotonic_ns()
        self.w.proc.send_line(cmd)
        msg, t1 = self._await("done", limit=o.run_timeout_s)
        filled = prefilled_count(msg.get("prefilled"), len(prefill))
        if filled < len(prefill):
            f.prefill_short.append(c.k)
        self.st.windows.append(Window(c.k, t0, t1, (*poisoned_sizes(msg.get("poisoned")),
                                                    *prefill[:filled], o.flush_mb * 2**20)))
        ev_us = msg.get("event_us")
        if isinstance(ev_us, (int, float)):
            f.events_us[c.k] = float(ev_us)
        if c.role == "ghost":
            mode, slot = "ghost", None
        elif c.k == 0 and c.compare_now:
            mode, slot = "compare_first", None  # compared, and kept for the ghost call
        elif c.compare_now:
            mode, slot = "compare", None
        elif c.keep:
            mode, slot = "keep", len(self.slot_of)
            self.slot_of[c.k] = slot
        elif c.check:
            mode, slot = "compare", None
        else:
            mode, slot = "discard", None
        t_cmp = time.monotonic()
        r = self._ref({"op": "take", "shape": c.shape, "outputs": msg.get("outputs"),
                       "mode": mode, "slot": slot})
        self.st.seconds["verify"] = self.st.seconds.get("verify", 0.0) + time.monotonic() - t_cmp
        if c.role == "ghost":
            f.ghost_result = r
        elif c.compare_now:
            f.trial_results.append((c.label, r))
        elif c.check:
            f.timed_results.append((c.k, r))
        elif not r.get("passed"):
            f.handoff_failure = (c.label, r)

    # -- the observer ----------------------------------------------------------------------
    def _flush_observer(self) -> None:
        obs = self.w.observer
        f = self.st.facts
        if obs is None or f.observer_error:
            return
        from cutegen.codegen.eval.observed import ObserverSilent

        try:
            self.st.records.extend(obs.flush(timeout=30.0))
        except ObserverSilent as e:
            f.observer_error = str(e)

    def activity(self) -> Activity | None:
        from cutegen.codegen.eval.observed import convert

        obs = self.w.observer
        if obs is None:
            return None
        ops, modules, dropped = convert(self.st.records, obs.clock)
        self.st.facts.dropped_records = dropped
        ident = identity(modules, is_dsl_origin=self.ev.is_dsl_origin,
                         claimed=self.st.facts.kernel_names)
        return analyse(ops, self.st.windows, ident)

    def _early_verdict(self) -> bool:
        """After the verification calls: is the run already decided by what ran?"""
        from cutegen.codegen.eval.verdict import _observation

        f = self.st.facts
        if f.observer_error:
            return True
        f.activity = self.activity()
        return _observation(f) is not None

    # -- results ---------------------------------------------------------------------------
    def finish(self) -> RunFacts:
        f = self.st.facts
        if self.w.observer is not None and not f.compile_only:
            f.activity = self.activity()
        if self.w.audit is not None:
            f.audit = list(self.w.audit.lines)
            f.audit_closed_early = self.t_bye is not None and self.w.audit.closed_early()
            f.audit_lost = self.w.proc.proc.poll() == AUDIT_LOST_EXIT
        return f
