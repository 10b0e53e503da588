"""Lessons: outcomes, their text, what rewriters are shown, and banned moves."""

from __future__ import annotations

import pytest

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.rewriters.base import Move
from cutegen.search._lessons import Lessons, classify, lesson_text
from cutegen.search.storage import LessonRecord, StoredResult


def _r(verdict=Verdict.CORRECT, t=None, s=None):
    return StoredResult(0, 1, verdict, 0.0, t, s, None)


@pytest.mark.parametrize(("parent", "child", "want"), [
    (_r(s=2.0), _r(s=2.6), ("faster", 1.3)),
    (_r(s=2.0), _r(s=1.5), ("slower", 0.75)),
    (_r(s=2.0), _r(s=2.02), ("same", 1.01)),
    (_r(t=100.0), _r(t=50.0), ("faster", 2.0)),  # no speedups: medians
    (_r(s=2.0), _r(Verdict.COMPILE_ERROR), ("compile_error", None)),
    (_r(s=2.0), _r(Verdict.STATIC_REJECT), ("static_reject", None)),
    (_r(s=2.0), _r(Verdict.INPUT_MODIFIED), ("wrong", None)),
    (_r(s=2.0), _r(Verdict.TIMEOUT), ("timeout", None)),
    (_r(s=2.0), _r(Verdict.DECOY), ("cheat", None)),
    (_r(Verdict.COMPILED), _r(Verdict.COMPILED), ("compiled", None)),
])
def test_classify(parent, child, want):
    outcome, ratio = classify(parent, child, tolerance=0.02)
    assert outcome == want[0]
    assert ratio == (pytest.approx(want[1]) if want[1] is not None else None)


def test_lesson_text():
    assert lesson_text(description="vec 4->8", outcome="faster", ratio=1.31,
                       task_name="softmax_fp32", parent_time_us=120.0,
                       child_time_us=91.6) == \
        "vec 4->8 on softmax_fp32: 1.31x faster (120.0 us -> 91.6 us)"
    assert lesson_text(description="vec 4->8", outcome="slower", ratio=0.5, task_name="t",
                       parent_time_us=None, child_time_us=None) == "vec 4->8 on t: 2.00x slower"
    assert lesson_text(description="d", outcome="compile_error", ratio=None, task_name="t",
                       parent_time_us=None, child_time_us=None) == "d on t: compile error"
    assert "no change" in lesson_text(description="d", outcome="same", ratio=1.0, task_name="t",
                                      parent_time_us=1.0, child_time_us=1.0)


def _rec(storage, run_id, node_id, task, key, outcome, parent_sha="p"):
    storage.add_lesson(LessonRecord(run_id, node_id, node_id, parent_sha, task, "sha", "tunable",
                                    key, key, outcome, None, None, None, f"{key} {outcome}"))


def test_views_prefer_this_task_then_family_one_per_move_outcome(storage, task, run_config):
    run = storage.create_run("r", run_config(task))
    n = storage.add_node(run.id, parent_id=None, source=CandidateSource("x"), move=Move("s", "s"))
    _rec(storage, run.id, n.id, "softmax_bf16", "k1", "faster")
    _rec(storage, run.id, n.id, "softmax_fp32", "k2", "slower")
    _rec(storage, run.id, n.id, "softmax_fp32", "k2", "slower")  # duplicate (move, outcome)
    _rec(storage, run.id, n.id, "gemm_fp32", "k3", "faster")  # other family: not shown
    mem = Lessons(storage, run_id=run.id, task_name="softmax_fp32", task_sha256="s",
                 tolerance=0.02, limit=5)
    views = mem.views()
    assert [(v.task, v.description, v.outcome) for v in views] == [
        ("softmax_fp32", "k2", "slower"), ("softmax_bf16", "k1", "faster")]
    assert Lessons(storage, run_id=run.id, task_name="softmax_fp32", task_sha256="s",
                  tolerance=0.02, limit=1).views()[0].task == "softmax_fp32"


def test_banned_after_failing_the_same_way_twice(storage, task, run_config):
    run = storage.create_run("r", run_config(task))
    n = storage.add_node(run.id, parent_id=None, source=CandidateSource("x"), move=Move("s", "s"))
    mem = Lessons(storage, run_id=run.id, task_name="t", task_sha256="s", tolerance=0.02)
    _rec(storage, run.id, n.id, "t", "a", "compile_error")
    _rec(storage, run.id, n.id, "t", "b", "compile_error")
    _rec(storage, run.id, n.id, "t", "b", "wrong")  # failed twice, but not the same way
    _rec(storage, run.id, n.id, "t", "c", "slower")
    _rec(storage, run.id, n.id, "t", "c", "slower")  # slower is not a failure
    _rec(storage, run.id, n.id, "t", "d", "crash", parent_sha="other")
    assert mem.banned_moves("p") == frozenset()
    _rec(storage, run.id, n.id, "t", "a", "compile_error")
    _rec(storage, run.id, n.id, "t", "d", "crash")
    assert mem.banned_moves("p") == frozenset({"a"})
    assert mem.banned_moves("other") == frozenset()
