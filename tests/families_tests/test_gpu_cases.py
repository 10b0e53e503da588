"""The GPU checks' shared case runner (``_gpu_cases.py``), on the CPU with a fake evaluator:
a GPU session is too short to find out there that a helper lost a row or a verdict."""

import json

import _cutegen_gpu_cases as gc  # registered by conftest.py
import pytest

from cutegen.codegen.evaluation import Verdict
from cutegen.testing import FakeEvaluator

GOOD = "TUNABLES = {'tile': 128}\n"
BAD = "TUNABLES = {'tile': 64}\n"


class Closing(FakeEvaluator):
    closed = 0

    def close(self) -> None:
        type(self).closed += 1


def test_pool_makes_one_evaluator_per_task_and_closes_them(tmp_path):
    made = []
    pool = gc.evaluator_pool(tmp_path, lambda name: made.append(name) or Closing())
    get = next(pool)
    assert get("a") is get("a") and made == ["a"]
    get("b")
    Closing.closed = 0
    pool.close()
    assert Closing.closed == 2 and gc.summary_path(tmp_path).read_text() == ""


def test_pool_one_at_a_time_closes_the_previous_task(tmp_path):
    pool = gc.evaluator_pool(tmp_path, lambda name: Closing(), one_at_a_time=True)
    get = next(pool)
    Closing.closed = 0
    first = get("a")
    assert get("b") is not first and Closing.closed == 1
    assert get("a") is not first  # made again: the first one was closed
    pool.close()
    assert Closing.closed == 3


def test_judge_keeps_the_candidate_and_a_row(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    row = gc.judge(FakeEvaluator(), GOOD, "t-good", tmp_path, tmp_path / "task.py")
    assert (tmp_path / "t-good.py").read_text() == GOOD
    lines = (tmp_path / "summary-gw3.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [row]
    assert row["verdict"] == "correct" and row["median_us"] > 0


def test_judge_fails_on_a_wrong_candidate_and_says_how_to_reproduce(tmp_path):
    ev = FakeEvaluator(failures={"tile=64": Verdict.WRONG})
    with pytest.raises(AssertionError, match=r"wrong(.|\n)*reproduce: cutegen eval .*task.py "):
        gc.judge(ev, BAD, "t-bad", tmp_path, tmp_path / "task.py")
    assert json.loads(gc.summary_path(tmp_path).read_text())["verdict"] == "wrong"
