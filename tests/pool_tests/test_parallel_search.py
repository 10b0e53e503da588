"""Parallel search over a pool of fake devices: same best as serial, order of tells,
determinism, devices failing mid-run, per-device profiler serialisation, compile-ahead."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.compile_ahead import FLAG, settled_before_gpu
from cutegen.codegen.evaluation import Evaluation, Stage, Verdict
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.errors import ConfigError, DeviceLostError, InfrastructureError
from cutegen.search import Budget, NodeState, Search, SearchParams
from cutegen.search.storage import InMemoryStorage, RunConfig, SqliteStorage
from cutegen.testing import FakeEvaluator, fake_candidate, tree_signature

NO_PRUNE = SearchParams(expensive=None, dead_end_m=1000)


def _run(storage, task, seed_file, evaluator, *, params, budget=None, name="r", hook=None,
         should_stop=None):
    run = storage.create_run(name, RunConfig(task.name, str(task.path), task.sha256, seed=7),
                             load_if_exists=True)
    with Search(storage=storage, run=run, task=task, evaluator=evaluator,
                rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                params=params, budget=budget or Budget(), profile_hook=hook,
                heartbeat=False) as s:
        summary = s.run(should_stop=should_stop)
    return run, summary


def _overlapped(fakes) -> int:
    """The most evaluations that ran at the same moment, over all fake devices."""
    ivs = [(a, b) for f in fakes.values() for what, _, a, b in f.intervals if what == "evaluate"]
    return max(sum(a <= t < b for a, b in ivs) for t, _ in ivs)


def test_parallel_reaches_the_serial_best(h, task, small_seed, pool_factory):
    """On a deterministic landscape explored to exhaustion, a parallel run finds the same
    best kernel (the true optimum) as the serial loop, with evaluations overlapping."""
    serial_store, par_store = InMemoryStorage(), InMemoryStorage()
    run_s, sum_s = _run(serial_store, task, small_seed, FakeEvaluator(seed=3), params=NO_PRUNE)
    pool, fakes = pool_factory(devices=3)
    run_p, sum_p = _run(par_store, task, small_seed, pool,
                        params=dataclasses.replace(NO_PRUNE, parallel=3))
    assert sum_s.reason == sum_p.reason == "nothing left to try (every branch exhausted or " \
                                           "pruned)"
    shas = {n.source_sha256 for n in serial_store.get_nodes(run_s.id)}
    assert shas == {n.source_sha256 for n in par_store.get_nodes(run_p.id)}
    assert len(shas) == 4 * 4 * 3  # every candidate of the landscape was evaluated
    ref = FakeEvaluator(seed=3)
    names, choices = list(h.SMALL[1]), list(h.SMALL[1].values())
    best_us = min(ref.true_time_us(fake_candidate(dict(zip(names, v, strict=True)), h.SMALL[1]))
                  for v in itertools.product(*choices))
    for store, summary in ((serial_store, sum_s), (par_store, sum_p)):
        assert ref.true_time_us(store.get_source(summary.best.id)) == pytest.approx(best_us)
    assert sum_s.best.source_sha256 == sum_p.best.source_sha256
    assert _overlapped(fakes) >= 2
    assert all(f.evaluations > 0 for f in fakes.values())  # every device took work


def test_in_order_tree_depends_on_seed_and_parallel_only(h, task, big_seed, pool_factory):
    """Two devices with one latency pattern, three with the reverse one: the same tree, and
    results committed in claim order although they finished out of order."""
    params = dataclasses.replace(NO_PRUNE, parallel=3)
    pool_a, fakes_a = pool_factory(devices=2, latency=h.latency_of)
    pool_b, _ = pool_factory(devices=3, latency=lambda c: 0.06 - h.latency_of(c))
    a, b = InMemoryStorage(), InMemoryStorage()
    run_a, _ = _run(a, task, big_seed, pool_a, params=params, budget=Budget(max_evals=40))
    run_b, _ = _run(b, task, big_seed, pool_b, params=params, budget=Budget(max_evals=40))
    assert tree_signature(a, run_a.id) == tree_signature(b, run_b.id)
    committed = [r.node_id for r in a.get_results(run_a.id)]
    assert committed == sorted(committed) and len(committed) == 40
    finished = sorted((end, sha) for f in fakes_a.values()
                      for what, sha, _, end in f.intervals if what == "evaluate")
    by_sha = {n.source_sha256: n.id for n in a.get_nodes(run_a.id)}
    arrival = [by_sha[sha] for _, sha in finished]
    assert arrival != sorted(arrival)  # the devices really finished out of order


def test_completion_order_tells_as_results_arrive(h, task, big_seed, pool_factory, tmp_path):
    params = dataclasses.replace(NO_PRUNE, parallel=3, tell_in_order=False)
    pool, _ = pool_factory(devices=3, latency=lambda c: 3 * h.latency_of(c))
    store = SqliteStorage(tmp_path / "s.db")
    run, summary = _run(store, task, big_seed, pool, params=params, budget=Budget(max_evals=30))
    committed = [r.node_id for r in store.get_results(run.id)]
    assert summary.evaluations == 30 and len(set(committed)) == 30
    assert committed != sorted(committed)  # told as they arrived
    assert all(n.state.is_finished() for n in store.get_nodes(run.id))
    # a reopened search rebuilds the same statistics from the commit order and goes on
    _, again = _run(store, task, big_seed, pool, params=params, budget=Budget(max_evals=36))
    assert again.evaluations == 36
    store.close()


class _FailsAfter(FakeEvaluator):
    """Device ``bad`` raises an infrastructure error from its ``after``-th evaluation on."""

    bad: set[int | None] = {1}
    after = 2

    def evaluate(self, candidate):
        if self.device in self.bad and self.evaluations >= self.after:
            raise InfrastructureError(f"GPU {self.device} fell off the bus")
        return super().evaluate(candidate)


def test_a_failing_device_is_retired_and_the_run_continues(task, big_seed, pool_factory):
    pool, fakes = pool_factory(devices=2, cls=_FailsAfter)
    store = InMemoryStorage()
    run, summary = _run(store, task, big_seed, pool, budget=Budget(max_evals=25),
                        params=dataclasses.replace(NO_PRUNE, parallel=2))
    assert summary.evaluations == 25 and summary.status == "finished"
    health = {x.device: x for x in pool.health()}
    assert not health[1].healthy and "fell off the bus" in health[1].error
    assert health[0].healthy and pool.capacity == 1
    lost = [n for n in store.get_nodes(run.id) if n.attempts]
    assert len(lost) == 1 and lost[0].state == NodeState.COMPLETE  # requeued, then done
    assert store.get_evaluation(lost[0].id).gpu == "FakeGPU:0"
    gpus = [store.get_evaluation(n.id).gpu for n in store.get_nodes(run.id)]
    assert gpus.count("FakeGPU:1") == _FailsAfter.after  # nothing more went to device 1
    assert fakes[0].evaluations == 25 - _FailsAfter.after


def test_when_every_device_fails_the_run_pauses(task, big_seed, pool_factory):
    class AllFail(_FailsAfter):
        bad = {0, 1}
        after = 1

    pool, _ = pool_factory(devices=2, cls=AllFail)
    store = InMemoryStorage()
    with pytest.raises(InfrastructureError):
        _run(store, task, big_seed, pool, budget=Budget(max_evals=25),
             params=dataclasses.replace(NO_PRUNE, parallel=2))
    run = store.get_run("r")
    assert run.status == "failed"
    assert len(store.get_results(run.id)) == 2 and pool.capacity == 0
    with pytest.raises(InfrastructureError, match="no device left"):
        pool.submit(CandidateSource("x")).result(timeout=5)


def test_pool_future_reports_the_lost_device(task, pool_factory):
    pool, _ = pool_factory(devices=1, cls=_FailsAfter)
    _FailsAfter.bad = {0}
    try:
        futs = [pool.submit(CandidateSource(fake_candidate({"a": k}))) for k in range(3)]
        assert all(f.result(timeout=5).verdict.ok for f in futs[:2])
        err = futs[2].exception(timeout=5)
        assert isinstance(err, DeviceLostError) and err.device == 0
    finally:
        _FailsAfter.bad = {1}


def test_profilers_never_share_a_gpu_with_an_evaluation(h, task, big_seed, tmp_path):
    """The profile hook, wrapped by the pool, runs alone on the device it profiles."""
    last_device: list[int | None] = []

    class Recording(FakeEvaluator):
        def profile_target(self, candidate, evaluation, workdir):
            last_device.append(self.device)
            return super().profile_target(candidate, evaluation, workdir)

    def run(wrap: bool):
        pool, fakes = h.fake_pool(task, tmp_path / str(wrap), devices=2, cls=Recording,
                                latency=lambda c: 0.01 + h.latency_of(c, scale=0.004))
        profiled: list[tuple[int | None, float, float]] = []

        def hook(node, evaluation):
            pool.profile_target(CandidateSource(store.get_source(node.id)), evaluation,
                                tmp_path / "prof" / str(node.id))
            t0 = time.monotonic()
            time.sleep(0.03)  # "ncu" on the device
            profiled.append((last_device[-1], t0, time.monotonic()))
            return ()

        store = InMemoryStorage()
        try:
            _run(store, task, big_seed, pool, budget=Budget(max_evals=24),
                 params=dataclasses.replace(NO_PRUNE, parallel=4),
                 hook=pool.serialize_profiling(hook) if wrap else hook)
        finally:
            pool.close()
        clashes = sum(1 for d, a, b in profiled for what, _, s, e in fakes[d].intervals
                      if what == "evaluate" and s < b and e > a)
        return len(profiled), clashes

    n, clashes = run(wrap=True)
    assert n >= 10 and clashes == 0
    n, clashes = run(wrap=False)  # the check has teeth: unwrapped, they do overlap
    assert n >= 10 and clashes > 0


def test_compile_ahead_keeps_compile_errors_off_the_gpus(h, task, big_seed, tmp_path):
    failures = {"b=4": Verdict.COMPILE_ERROR, "c=z": Verdict.CRASH}
    ahead, cpu = h.fake_pool(task, tmp_path / "cpu", devices=2, failures=failures,
                           compile_only=True, latency=None)
    gpus: dict[int | None, FakeEvaluator] = {}

    def make(device):
        gpus[device] = FakeEvaluator(seed=3, failures=failures, device=device,
                                     latency=h.latency_of)
        return gpus[device]

    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.pool import GpuPool

    params = dataclasses.replace(NO_PRUNE, parallel=4)
    pool = GpuPool(task, EvalOptions(compile_only=True), tmp_path / "run", gpus=[0, 1],
                   factory=make, compile_ahead=ahead)
    with_ahead = InMemoryStorage()
    try:
        run, _ = _run(with_ahead, task, big_seed, pool, params=params,
                      budget=Budget(max_evals=40))
    finally:
        pool.close()
    evs = [with_ahead.get_evaluation(n.id) for n in with_ahead.get_nodes(run.id)]
    settled = [e for e in evs if FLAG in e.flags]
    assert {e.verdict for e in settled} <= {Verdict.COMPILE_ERROR, Verdict.STATIC_REJECT}
    assert any(e.verdict == Verdict.COMPILE_ERROR for e in settled)
    on_gpu = {sha for f in gpus.values() for sha in f.evaluated}
    assert not on_gpu & {e.candidate_sha256 for e in settled}
    assert any(e.verdict == Verdict.CRASH for e in evs)  # a CPU crash still went to a GPU
    assert sum(f.evaluations for f in cpu.values()) == 40  # every candidate was pre-compiled
    plain_pool, _ = h.fake_pool(task, tmp_path / "plain", devices=2, failures=failures)
    plain = InMemoryStorage()
    try:
        run2, _ = _run(plain, task, big_seed, plain_pool, params=params,
                       budget=Budget(max_evals=40))
    finally:
        plain_pool.close()
    assert tree_signature(plain, run2.id) == tree_signature(with_ahead, run.id)


def _ev(verdict, message="", details=()):
    return Evaluation("s" * 64, "t", Stage.COMPILE, verdict, message=message, details=details)


def test_only_failures_the_gpu_would_repeat_are_settled_on_the_cpu():
    assert FLAG in settled_before_gpu(_ev(Verdict.COMPILE_ERROR, "DSLRuntimeError: bad tile")
                                      ).flags
    assert FLAG in settled_before_gpu(_ev(Verdict.STATIC_REJECT, "no ModelNew")).flags
    assert settled_before_gpu(_ev(Verdict.COMPILE_ERROR, "x", ("CUDA_ERROR_NO_DEVICE",))) is None
    for v in (Verdict.COMPILED, Verdict.CRASH, Verdict.COMPILE_TIMEOUT, Verdict.DECOY):
        assert settled_before_gpu(_ev(v)) is None


def test_parallel_needs_an_asynchronous_evaluator(task, big_seed):
    with pytest.raises(ConfigError, match="asynchronously"):
        _run(InMemoryStorage(), task, big_seed, FakeEvaluator(),
             params=dataclasses.replace(NO_PRUNE, parallel=2), budget=Budget(max_evals=3))


def test_stop_request_drains_what_is_in_flight(task, big_seed, pool_factory):
    pool, _ = pool_factory(devices=2)
    store = InMemoryStorage()
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 6

    run, summary = _run(store, task, big_seed, pool, should_stop=stop,
                        params=dataclasses.replace(NO_PRUNE, parallel=3))
    assert summary.status == "stopped"
    assert all(n.state.is_finished() for n in store.get_nodes(run.id)
               if n.state != NodeState.WAITING)
    assert summary.evaluations == len(store.get_results(run.id)) >= 3


def test_an_infrastructure_error_while_telling_requeues_the_node(task, big_seed, pool_factory):
    pool, _ = pool_factory(devices=2)
    calls = {"n": 0}

    def hook(node, evaluation):
        calls["n"] += 1
        if calls["n"] == 2:
            raise InfrastructureError("the reference worker died while profiling")
        return ()

    store = InMemoryStorage()
    run, summary = _run(store, task, big_seed, pool, hook=hook, budget=Budget(max_evals=12),
                        params=dataclasses.replace(NO_PRUNE, parallel=2))
    assert summary.evaluations == 12
    (lost,) = [n for n in store.get_nodes(run.id) if n.attempts]
    assert lost.state == NodeState.COMPLETE
    assert all(n.state != NodeState.RUNNING for n in store.get_nodes(run.id))
