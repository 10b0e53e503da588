"""Fakes for tests without a GPU (Optuna's ``optuna.testing``): shipped on purpose so plugin
and extension authors can test against them too. Keep each fake small and deterministic.

* :class:`FakeEvaluator`: times and verdicts derived from a candidate's TUNABLES (or its
  hash), configurable failures, seeded noisy re-timing, and counters.
* :func:`fake_candidate`: the source of a candidate with given TUNABLES.
* :func:`fake_evaluator_factory`: one FakeEvaluator per device of a pool (picklable).
* :class:`FakeRewriter`: proposes deterministic variants of any cost class.
* :class:`FakeClock`: a clock tests advance by hand.
* :class:`InMemoryCallRecorder`: the LLM client's call recorder without a store.
"""

from __future__ import annotations

import functools
import hashlib
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cutegen.codegen.candidate import CandidateSource, TunableValue, parse_tunables
from cutegen.codegen.evaluation import Evaluation, KernelTime, Stage, Timing, Verdict
from cutegen.codegen.llm.records import LLMCall
from cutegen.codegen.rewriters.base import CostClass, Move, Proposal, RewriteContext
from cutegen.errors import CandidateError

_FAILURES = (Verdict.COMPILE_ERROR, Verdict.WRONG, Verdict.CRASH, Verdict.TIMEOUT)
_STAGE_OF = {Verdict.STATIC_REJECT: Stage.STATIC, Verdict.COMPILE_ERROR: Stage.COMPILE,
             Verdict.COMPILE_TIMEOUT: Stage.COMPILE}


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (independent of PYTHONHASHSEED)."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


@functools.lru_cache(maxsize=4096)
def _tunables_cached(code: str) -> tuple[tuple[str, Any], ...] | None:
    try:
        return tuple(parse_tunables(code).items())
    except CandidateError:
        return None


def _tunables(code: str) -> dict[str, Any] | None:
    """The candidate's tunables (None when they cannot be read), parsed once per source."""
    got = _tunables_cached(code)
    return None if got is None else dict(got)


def fake_candidate(tunables: Mapping[str, TunableValue],
                   choices: Mapping[str, Sequence[TunableValue]] | None = None,
                   *, note: str = "") -> str:
    """Source of a candidate file with these TUNABLES / TUNABLE_CHOICES (not a real kernel)."""
    lines = [f'"""Fake candidate for tests. {note}"""', "import torch", "",
             f"TUNABLES = {dict(tunables)!r}"]
    if choices is not None:
        lines.append(f"TUNABLE_CHOICES = {({k: list(v) for k, v in choices.items()})!r}")
    lines += ["", "", "class ModelNew(torch.nn.Module):",
              "    def forward(self, x):", "        return x", ""]
    return "\n".join(lines)


class FakeEvaluator:
    """A deterministic stand-in for :class:`~cutegen.codegen.backend.Evaluator`.

    The true time of a candidate is ``base_us`` times one factor in [0.6, 1.4] per
    (tunable, value) pair, drawn from a hash of ``seed`` and the pair, so the landscape has
    better and worse settings; a candidate without TUNABLES gets one factor from its hash.
    Timed samples add ``noise`` (relative, Gaussian) seeded by the candidate's hash.

    Args:
        seed: changes the landscape.
        base_us / eager_us: time scale of candidates and of the eager baseline.
        noise: relative standard deviation of samples.
        samples: samples per evaluation (and per re-timing round).
        failures: verdict forced for a candidate whose TUNABLES contain ``"name=value"``
            or whose sha256 is a key.
        failure_rate: fraction of other candidates failing (compile error, wrong, crash or
            timeout, picked by hash).
        compile_only: every success is ``COMPILED`` without timings.
        delay_s: sleep per evaluation (to widen windows in kill tests).
        task_sha256: stamped on evaluations.
        latency: extra sleep per evaluation, from the candidate (makes results of a
            parallel run arrive out of order); results never depend on it.
        device: the device this fake stands for (stamped as ``gpu="FakeGPU:<device>"``).

    Thread-safe: counters and :attr:`intervals` (``(what, sha256, start, end)`` on the
    monotonic clock, for ``evaluate`` and ``retime``) are updated under a lock, so one
    instance may serve several pool threads.
    """

    def __init__(self, *, seed: int = 0, base_us: float = 100.0, eager_us: float = 100.0,
                 noise: float = 0.02, samples: int = 30,
                 failures: Mapping[str, Verdict] | None = None, failure_rate: float = 0.0,
                 compile_only: bool = False, delay_s: float = 0.0,
                 task_sha256: str = "",
                 latency: Callable[[CandidateSource], float] | None = None,
                 device: int | None = None) -> None:
        self.seed, self.base_us, self.eager_us = seed, base_us, eager_us
        self.noise, self.samples = noise, samples
        self.failures = dict(failures or {})
        self.failure_rate, self.compile_only = failure_rate, compile_only
        self.delay_s, self.task_sha256 = delay_s, task_sha256
        self.latency, self.device = latency, device
        self._lock = threading.Lock()
        self.intervals: list[tuple[str, str, float, float]] = []
        self.evaluations = 0
        self.retimes = 0
        self.evaluated: list[str] = []
        self.closed = False

    def warm(self, candidate: CandidateSource) -> None:
        """Parse the candidate now, in the caller's thread (cached; see LocalEvaluator)."""
        _tunables(candidate.code)

    def true_time_us(self, code: str) -> float:
        """The noiseless time of a candidate."""
        tunables = _tunables(code) or {}
        if not tunables:
            return self.base_us * (0.6 + 0.8 * _unit(self.seed, hashlib.sha256(
                code.encode()).hexdigest()))
        factor = 1.0
        for name in sorted(tunables):
            factor *= 0.6 + 0.8 * _unit(self.seed, name, repr(tunables[name].value))
        return self.base_us * factor

    def verdict_of(self, code: str) -> Verdict:
        """The verdict this fake gives a candidate."""
        sha = hashlib.sha256(code.encode()).hexdigest()
        if sha in self.failures:
            return self.failures[sha]
        tunables = _tunables(code)
        if tunables is None:
            return Verdict.STATIC_REJECT
        for name, t in tunables.items():
            forced = self.failures.get(f"{name}={t.value}")
            if forced is not None:
                return forced
        if self.failure_rate and _unit(self.seed, sha, "fail") < self.failure_rate:
            return _FAILURES[int(_unit(self.seed, sha, "kind") * len(_FAILURES))]
        return Verdict.COMPILED if self.compile_only else Verdict.CORRECT

    def _samples(self, mean: float, n: int, rng: random.Random) -> list[float]:
        return [max(1e-3, mean * (1 + self.noise * rng.gauss(0.0, 1.0))) for _ in range(n)]

    def _record(self, what: str, sha: str, t0: float) -> None:
        with self._lock:
            self.intervals.append((what, sha, t0, time.monotonic()))

    def evaluate(self, candidate: CandidateSource) -> Evaluation:
        t0 = time.monotonic()
        with self._lock:
            self.evaluations += 1
            self.evaluated.append(candidate.sha256)
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.latency is not None:
            time.sleep(self.latency(candidate))
        try:
            return self._evaluate(candidate)
        finally:
            self._record("evaluate", candidate.sha256, t0)

    def _evaluate(self, candidate: CandidateSource) -> Evaluation:
        verdict = self.verdict_of(candidate.code)
        gpu = "FakeGPU" if self.device is None else f"FakeGPU:{self.device}"
        common: dict[str, Any] = dict(candidate_sha256=candidate.sha256, task_sha256=self.task_sha256,
                      gpu=gpu)
        if not verdict.ok:
            return Evaluation(stage=_STAGE_OF.get(verdict, Stage.VERIFY), verdict=verdict,
                              message=f"fake {verdict.value}",
                              stage_seconds={"compile": 0.5, "verify": 0.1}, **common)
        if verdict == Verdict.COMPILED:
            return Evaluation(stage=Stage.COMPILE, verdict=verdict, message="compiled",
                              stage_seconds={"compile": 0.5}, **common)
        rng = random.Random(f"{self.seed}:{candidate.sha256}:evaluate")
        t = self.true_time_us(candidate.code)
        timing = Timing.from_samples(self._samples(t, self.samples, rng))
        busy = round(0.95 * timing.median_us, 3)  # the GPU busy most of the span
        kernel = f"kernel_cutlass_kernel_cutegen_candidate_{candidate.sha256[:12]}FakeKernel_object_at_"
        return Evaluation(
            stage=Stage.BENCHMARK, verdict=verdict, message="correct", timing=timing,
            eager=Timing.from_samples(self._samples(self.eager_us, self.samples, rng)),
            busy_us=busy, kernel_times=(KernelTime(kernel, busy, 1, True),), kernels=(kernel,),
            stage_seconds={"compile": 0.5, "verify": 0.2, "benchmark": 0.3}, **common)

    def retime(self, candidates: Sequence[CandidateSource], *, rounds: int = 3
               ) -> list[Timing | None]:
        """Seeded noisy samples around each candidate's true time; None for failing ones."""
        t0 = time.monotonic()
        with self._lock:
            self.retimes += 1
        key = ":".join(c.sha256 for c in candidates)
        rng = random.Random(f"{self.seed}:{key}:retime")
        out: list[Timing | None] = []
        for c in candidates:
            if not self.verdict_of(c.code).ok:
                out.append(None)
                continue
            xs = self._samples(self.true_time_us(c.code), self.samples * rounds, rng)
            out.append(Timing.from_samples(xs, method="fake re-timing"))
        self._record("retime", key, t0)
        return out

    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> Any:
        """A target with no artifacts and nothing to launch: profilers that need them
        report ``unavailable``, as they would for a candidate that cannot run here."""
        from cutegen.profilers import ProfileTarget

        Path(workdir).mkdir(parents=True, exist_ok=True)
        return ProfileTarget(candidate_id=candidate.sha256, workdir=Path(workdir),
                             evaluation=evaluation)

    def close(self) -> None:
        self.closed = True


def fake_evaluator_factory(**kwargs: Any) -> Callable[[int | None], FakeEvaluator]:
    """A picklable ``factory(device) -> FakeEvaluator`` for evaluation pools and Ray actors
    (``kwargs`` go to :class:`FakeEvaluator`; a ``latency`` must be picklable too)."""
    return functools.partial(_fake_on, kwargs)


def _fake_on(kwargs: dict[str, Any], device: int | None) -> FakeEvaluator:
    return FakeEvaluator(device=device, **kwargs)


class FakeRewriter:
    """Proposes variants of the parent (a comment line appended), of any cost class.

    Initial candidates are ``seeds`` (sources). With ``exhaust_after`` set, a parent gets at
    most that many variants per cost class, after which it has nothing new.
    """

    name = "fake"

    def __init__(self, seeds: Sequence[str], *, exhaust_after: int | None = None) -> None:
        self.seeds = list(seeds)
        self.exhaust_after = exhaust_after
        self.calls: list[tuple[str, int]] = []

    def initial(self, ctx: RewriteContext, *, n: int, rng: random.Random) -> list[Proposal]:
        out = [Proposal(CandidateSource(s, f"seed:{i}"), Move("seed", f"seed {i}",
                                                              params={"i": i}))
               for i, s in enumerate(self.seeds)]
        return [p for p in out if p.candidate.sha256 not in ctx.seen_sources][:n]

    def propose(self, ctx: RewriteContext, *, n: int, cost: CostClass,
                rng: random.Random) -> list[Proposal]:
        assert ctx.parent is not None
        self.calls.append((cost, ctx.depth))
        limit = self.exhaust_after if self.exhaust_after is not None else 10**6
        out = []
        for i in range(limit):
            code = f"{ctx.parent.code}# {cost} variant {i}\n"
            move = Move("llm_rewrite" if cost == "expensive" else "variant",
                        f"{cost} variant {i}", cost=cost, params={"i": i})
            if (CandidateSource(code).sha256 not in ctx.seen_sources
                    and move.key not in ctx.banned_moves):
                out.append(Proposal(CandidateSource(code, f"fake:{cost}"), move))
            if len(out) >= n:
                break
        return out


class InMemoryCallRecorder:
    """A :class:`~cutegen.codegen.llm.CallRecorder` that keeps the records in a list (lost
    when the process ends; a run's real recorder is
    :class:`cutegen.search.storage.StoreCallRecorder`)."""

    def __init__(self, calls: Sequence[LLMCall] = ()) -> None:
        self._lock = threading.Lock()
        self.calls: list[LLMCall] = list(calls)

    def record(self, call: LLMCall) -> None:
        with self._lock:
            self.calls.append(call)

    def spent_usd(self) -> float:
        with self._lock:
            return sum(c.cost_usd or 0.0 for c in self.calls)


class FakeClock:
    """A callable clock for tests: ``clock()`` returns ``now``; ``advance(s)`` moves it."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def tree_signature(storage: Any, run_id: int) -> dict[str, list[tuple[Any, ...]]]:
    """Everything that must be identical between a resumed run and an uninterrupted one:
    nodes (structure, sources, moves, states), results in commit order, best decisions,
    prunes and lessons. Times, attempts and session ids are left out on purpose."""
    return {
        "nodes": [(n.id, n.parent_id, n.depth, n.state.label, n.source_sha256, n.move.key)
                  for n in storage.get_nodes(run_id)],
        "results": [(r.node_id, r.verdict.value, r.time_us, r.reward)
                    for r in storage.get_results(run_id)],
        "best": [(d.node_id, d.previous_best_id, d.accepted, d.p_value)
                 for d in storage.get_best_history(run_id)],
        "prunes": [(p.node_id, p.kind) for p in storage.get_prunes(run_id)],
        "lessons": sorted((x.node_id, x.outcome, x.ratio)
                          for x in storage.get_lessons(run_id=run_id)),
    }


class CommitLogChild:
    """``python SCRIPT ARGS...`` in a child process whose stdout lines and stderr are
    collected by threads, for kill-and-resume tests: the script prints
    ``committed <node id> [<state>]`` after every commit, the test kills it at some commit
    with SIGKILL and checks the store holds every commit it saw."""

    def __init__(self, script: str | Path, *args: str) -> None:
        import subprocess
        import sys

        self.lines: list[str] = []
        self.err: list[str] = []
        self.proc = subprocess.Popen([sys.executable, str(script), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._threads = [threading.Thread(target=self._read, args=(f, out), daemon=True)
                         for f, out in ((self.proc.stdout, self.lines),
                                        (self.proc.stderr, self.err))]
        for t in self._threads:
            t.start()

    @staticmethod
    def _read(stream: Any, out: list[str]) -> None:
        for line in stream:
            out.append(line.strip())

    def wait_for_commits(self, n: int, timeout: float = 30.0) -> None:
        """Until the child has printed ``n`` commits, exited, or ``timeout`` passed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.proc.poll() is None:
            if sum(x.startswith("committed") for x in self.lines) >= n:
                return
            time.sleep(0.002)

    def _reap(self, timeout: float | None = None) -> None:
        self.proc.wait(timeout=timeout)
        for t in self._threads:
            t.join(timeout=5)

    def kill(self) -> bool:
        """SIGKILL (if still running), reap, and return whether it was killed mid-run; a
        child that had already ended must have ended well."""
        import signal

        alive = self.proc.poll() is None
        if alive:
            self.proc.send_signal(signal.SIGKILL)
        self._reap()
        if not alive and self.proc.returncode != 0:
            raise AssertionError("\n".join(self.err))
        return alive

    def finish(self, timeout: float = 120.0) -> None:
        """Wait for a clean exit."""
        self._reap(timeout)
        assert self.proc.returncode == 0, "\n".join(self.err)

    def committed(self) -> list[tuple[int, str]]:
        """(node id, state) of every commit the child printed, in order."""
        out = []
        for x in self.lines:
            parts = x.split()
            if parts and parts[0] == "committed":
                out.append((int(parts[1]), parts[2] if len(parts) > 2 else ""))
        return out
