"""The library entry point: a search from Python in three lines, settings stored and read
back, nothing stored when a check fails."""

from __future__ import annotations

import dataclasses

import pytest

import cutegen
import cutegen.api as api
from cutegen.errors import ConfigError, DuplicatedRunError, GPURequiredError
from cutegen.search.storage import SqliteStorage
from cutegen.settings import RunSettings
from cutegen.testing import FakeEvaluator

TASK_SRC = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"


@pytest.fixture
def fake_evaluator(monkeypatch):
    monkeypatch.setattr(api, "make_evaluator", lambda task, settings, run_dir, storage:
                        FakeEvaluator(seed=1, compile_only=settings.eval.compile_only))


@pytest.fixture
def task(tmp_path):
    p = tmp_path / "toy_fp32.py"
    p.write_text(TASK_SRC)
    return p


def test_a_search_in_three_lines(tmp_path, task, seed_file, fake_evaluator):
    db = tmp_path / "runs" / "demo.db"
    # the README's three lines (with a seed candidate: a toy task has no kernel family)
    settings = cutegen.RunSettings(budget=cutegen.Budget(max_evals=3),
                                   eval=cutegen.EvalOptions(compile_only=True),
                                   seed_candidates=api.seed_candidates([seed_file]))
    summary = cutegen.create_run(str(task), settings, db=db, name="demo").search()
    assert summary.status == "finished" and summary.evaluations == 3
    s = SqliteStorage(db)
    stored = RunSettings.from_dict(s.get_run("demo").config.settings)
    s.close()
    assert stored == settings  # one to_dict / from_dict, stored with the run


def test_settings_round_trip_and_defaults_written_once():
    s = RunSettings()
    assert s.params.expensive is None  # the builtin rewriter has only cheap moves
    assert RunSettings.from_dict(s.to_dict()) == s
    older = {k: v for k, v in s.to_dict().items() if k != "seed"}  # a run stored before "seed"
    assert RunSettings.from_dict(older, seed=7).seed == 7
    with pytest.raises(ConfigError, match="needs a model"):
        RunSettings(rewriter="llm")
    assert dataclasses.replace(s, seed=3).seed == 3


def test_checks_come_before_the_run_is_stored(tmp_path, task, seed_file, monkeypatch):
    db = tmp_path / "c.db"
    gpu_run = RunSettings(seed_candidates=api.seed_candidates([seed_file]))
    monkeypatch.setattr("cutegen.codegen.backend.gpu_available", lambda: False)
    with pytest.raises(GPURequiredError):
        api.create_run(str(task), gpu_run, db=db, name="r")
    with pytest.raises(ConfigError, match="no seed candidate"):
        api.create_run(str(task), RunSettings(eval=cutegen.EvalOptions(compile_only=True)),
                       db=db, name="r")
    s = SqliteStorage(db)
    assert s.list_runs() == []  # nothing left behind in state "created"
    s.close()


def test_a_taken_name_is_refused_first(tmp_path, task, seed_file, fake_evaluator):
    db = tmp_path / "c.db"
    settings = RunSettings(budget=cutegen.Budget(max_evals=1),
                           eval=cutegen.EvalOptions(compile_only=True),
                           seed_candidates=api.seed_candidates([seed_file]))
    api.create_run(str(task), settings, db=db, name="r").search()
    with pytest.raises(DuplicatedRunError):
        api.create_run(tmp_path / "missing.py", settings, db=db, name="r")  # before the task
    summary = api.resume_run("r", db=db, budget=cutegen.Budget(max_evals=2)).search()
    assert summary.evaluations == 2
