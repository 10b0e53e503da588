"""Graph export, SearchParams round trips, resume checks, and the fakes themselves."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import Task
from cutegen.errors import ResumeMismatchError
from cutegen.search import Budget, Search, SearchParams, Widening, check_resume
from cutegen.search.report.graph import best_path, build_graph, to_json
from cutegen.search.storage import FrozenRun, RunConfig
from cutegen.testing import FakeEvaluator, fake_candidate


def test_graph_export(storage, task, run_config, seed_file):
    run = storage.create_run("r", run_config(task))
    with Search(storage=storage, run=run, task=task, evaluator=FakeEvaluator(seed=1),
                rewriter=BuiltinRewriter(seed_files=[seed_file], bundled_seeds=False),
                params=SearchParams(expensive=None), budget=Budget(max_evals=15),
                heartbeat=False) as s:
        summary = s.run()
    g = build_graph(storage, run.id)
    assert g.number_of_nodes() == storage.n_nodes(run.id) + 1
    assert g.number_of_edges() == storage.n_nodes(run.id)
    path = best_path(g, summary.best.id)
    assert path[0] == 0 and path[-1] == summary.best.id
    assert [n.id for n in storage.lineage(summary.best.id)] == path[1:]
    assert g.nodes[summary.best.id]["speedup"] == summary.best_speedup
    json.dumps(to_json(g))
    assert "exhausted:initial" in g.nodes[0]["pruned"]


def test_search_params_round_trip():
    p = SearchParams(c=1.2, cheap=Widening(3.0, 0.4), expensive=None, dead_end_m=5)
    assert SearchParams.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    assert SearchParams.from_dict({}) == SearchParams()
    with pytest.raises(ValueError):
        SearchParams(heartbeat_s=10, stale_after_s=5)


def _run(task: Task, toolchain: dict[str, str]) -> FrozenRun:
    return FrozenRun(1, "r", RunConfig(task.name, str(task.path), task.sha256, 0, toolchain), 0.0)


def test_check_resume(task):
    v = {"cutegen": "0.1", "torch": "2.5", "nvidia-cutlass-dsl": "4.8.1", "gpu": "H200"}
    check_resume(_run(task, v), task, dict(v, python="other"))  # python is not compared
    changed = Task(task.name, task.path, task.source + "# edited\n")
    with pytest.raises(ResumeMismatchError) as e:
        check_resume(_run(task, v), changed, dict(v, torch="2.6", gpu="B200"))
    msg = str(e.value)
    assert "task file" in msg and "torch: 2.5 -> 2.6" in msg and "gpu: H200 -> B200" in msg
    check_resume(_run(task, {k: x for k, x in v.items() if k != "gpu"}), task, v)


def test_check_resume_refuses_a_run_another_evaluator_version_judged(task):
    """A run whose evaluations an older evaluator judged was continued as if nothing had
    changed (the cutegen version string stays 0.1.0 between evaluator changes): its stored
    verdicts and best (KernelBench L1 12, ``suspicious`` under version 4) mixed with the new
    evaluator's. Now resuming it is refused with the counts, like a changed toolchain."""
    from cutegen.codegen.evaluation import HARNESS_VERSION

    v = {"cutegen": "0.1", "torch": "2.5", "nvidia-cutlass-dsl": "4.8.1"}
    check_resume(_run(task, v), task, v, {HARNESS_VERSION: 7})
    check_resume(_run(task, v), task, v, {})  # nothing evaluated yet
    with pytest.raises(ResumeMismatchError) as e:
        check_resume(_run(task, v), task, v, {HARNESS_VERSION - 1: 3, HARNESS_VERSION: 2})
    msg = str(e.value)
    assert f"3 by version {HARNESS_VERSION - 1}" in msg
    assert f"judges with version {HARNESS_VERSION}" in msg and "new run" in msg


def test_fake_evaluator_is_deterministic():
    code = fake_candidate({"a": 1, "b": 2}, {"a": [1, 2]})
    e1, e2 = FakeEvaluator(seed=3), FakeEvaluator(seed=3)
    from cutegen.codegen.candidate import CandidateSource

    c = CandidateSource(code)
    assert e1.evaluate(c) == e2.evaluate(c) and e1.evaluations == 1
    assert e1.retime([c, c]) == e2.retime([c, c])
    assert FakeEvaluator(seed=4).true_time_us(code) != e1.true_time_us(code)
    forced = FakeEvaluator(failures={"a=1": Verdict.WRONG})
    assert forced.evaluate(c).verdict == Verdict.WRONG and forced.retime([c]) == [None]
    assert FakeEvaluator(compile_only=True).evaluate(c).verdict == Verdict.COMPILED
    assert FakeEvaluator().evaluate(CandidateSource("TUNABLES = 3\n")).verdict == \
        Verdict.STATIC_REJECT
    assert dataclasses.is_dataclass(e1.evaluate(c))
