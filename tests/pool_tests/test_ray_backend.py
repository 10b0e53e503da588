"""The Ray backend on a local CPU-only cluster (skipped when ray is not installed).

Actors run fake evaluators (``num_gpus=0``); the search drives them through the same pool
as local devices, so a Ray run must build exactly the tree a local pool builds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os

import pytest

ray = pytest.importorskip("ray")

from cutegen.codegen.backend import EvalOptions  # noqa: E402
from cutegen.codegen.candidate import CandidateSource  # noqa: E402
from cutegen.codegen.evaluation import Verdict  # noqa: E402
from cutegen.codegen.ray_backend import cluster_gpus, connect, make_ray_pool  # noqa: E402
from cutegen.codegen.rewriters.builtin import BuiltinRewriter  # noqa: E402
from cutegen.search import Budget, Search, SearchParams  # noqa: E402
from cutegen.search.storage import InMemoryStorage, RunConfig  # noqa: E402
from cutegen.testing import FakeEvaluator, fake_evaluator_factory, tree_signature  # noqa: E402

PARAMS = SearchParams(expensive=None, dead_end_m=1000, parallel=2)


@pytest.fixture(scope="module")
def cluster():
    connect(None, num_cpus=2)
    yield
    ray.shutdown()


def _search(task, seed_file, pool, *, evals):
    store = InMemoryStorage()
    run = store.create_run("r", RunConfig(task.name, str(task.path), task.sha256, seed=5))
    with Search(storage=store, run=run, task=task, evaluator=pool,
                rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                params=PARAMS, budget=Budget(max_evals=evals), heartbeat=False) as s:
        summary = s.run()
    return store, run, summary


def test_ray_run_builds_the_tree_a_local_pool_builds(cluster, task, big_seed, tmp_path, h):
    pool = make_ray_pool(task, EvalOptions(compile_only=True), tmp_path / "ray", actors=2,
                         num_gpus=0, factory=fake_evaluator_factory(seed=3))
    try:
        assert pool.capacity == 2
        store, run, summary = _search(task, big_seed, pool, evals=20)
    finally:
        pool.close()
    local, _ = h.fake_pool(task, tmp_path / "local", devices=2, latency=None)
    try:
        ref_store, ref_run, _ = _search(task, big_seed, local, evals=20)
    finally:
        local.close()
    assert summary.evaluations == 20
    assert tree_signature(store, run.id) == tree_signature(ref_store, ref_run.id)
    assert cluster_gpus() == 0


def test_an_actor_that_dies_is_retired_and_the_run_goes_on(cluster, task, big_seed, tmp_path):
    marker = tmp_path / "died"

    class DiesOnce(FakeEvaluator):  # defined here: Ray pickles it by value
        def evaluate(self, candidate):
            if self.evaluations >= 3:
                try:
                    fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                except FileExistsError:
                    pass
                else:
                    os.close(fd)
                    os._exit(1)  # the actor's process (its "host") goes away
            ev = super().evaluate(candidate)
            return dataclasses.replace(ev, message=os.environ.get("NCCL_NVLS_ENABLE", "unset"))

    pool = make_ray_pool(task, EvalOptions(compile_only=True), tmp_path / "ray", actors=2,
                         num_gpus=0, factory=lambda d: DiesOnce(seed=3))
    try:
        store, run, summary = _search(task, big_seed, pool, evals=16)
        health = pool.health()
    finally:
        pool.close()
    assert summary.evaluations == 16 and marker.exists()
    assert sorted(x.healthy for x in health) == [False, True]
    (lost,) = [n for n in store.get_nodes(run.id) if n.attempts]
    assert lost.state.is_finished()
    # every actor (and what it starts) keeps NVLink multicast off
    assert {store.get_evaluation(n.id).message for n in store.get_nodes(run.id)
            if store.get_evaluation(n.id).verdict.ok} == {"0"}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="no CuTe DSL")
def test_actor_runs_a_real_compile_only_evaluator(cluster, tmp_path):
    """No factory: the actor builds a LocalEvaluator from the task's source text."""
    from cutegen.codegen.tasks import resolve_task, seeds_dir

    task = resolve_task("softmax_fp32")
    seed = CandidateSource((seeds_dir() / "softmax.py").read_text())
    broken = CandidateSource(seed.code.replace("cute.arch.thread_idx()", "cute.arch.no_such()"))
    pool = make_ray_pool(task, EvalOptions(compile_only=True), tmp_path / "run", actors=1,
                         num_gpus=0)
    try:
        ok, bad = (pool.submit(c).result(timeout=300) for c in (seed, broken))
    finally:
        pool.close()
    assert ok.verdict == Verdict.COMPILED and ok.kernels
    assert bad.verdict == Verdict.COMPILE_ERROR, bad.message
