"""Fixtures shared by the search tests: stores of both kinds, a task, a seed file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cutegen.codegen.tasks import Task
from cutegen.search.storage import BaseStorage, InMemoryStorage, RunConfig, SqliteStorage
from cutegen.testing import FakeClock, fake_candidate

STORAGE_MODES = ("inmemory", "sqlite")

SEED_TUNABLES = {"a": 1, "b": 2, "c": "x"}
SEED_CHOICES = {"a": [1, 2, 3, 4], "b": [1, 2, 4, 8], "c": ["x", "y", "z"]}


def make_storage(mode: str, tmp_path: Path, clock: FakeClock | None = None) -> BaseStorage:
    kw = {"clock": clock} if clock is not None else {}
    if mode == "inmemory":
        return InMemoryStorage(**kw)
    return SqliteStorage(tmp_path / "store.db", **kw)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=STORAGE_MODES)
def storage(request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock):
    s = make_storage(request.param, tmp_path, clock)
    yield s
    s.close()


@pytest.fixture
def task(tmp_path: Path) -> Task:
    p = tmp_path / "toy_fp32.py"
    src = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
    p.write_text(src)
    return Task("toy_fp32", p, src)


@pytest.fixture
def seed_file(tmp_path: Path) -> Path:
    p = tmp_path / "seed.py"
    p.write_text(fake_candidate(SEED_TUNABLES, SEED_CHOICES))
    return p


@pytest.fixture
def run_config():
    """``run_config(task, seed=0) -> RunConfig``."""
    def make(task: Task, seed: int = 0) -> RunConfig:
        return RunConfig(task.name, str(task.path), task.sha256, seed=seed,
                         toolchain={"torch": "x"}, settings={"k": 1})
    return make


@pytest.fixture
def big_seed(tmp_path: Path) -> Path:
    """A seed with 4 * 4 * 4 * 3 * 3 = 576 reachable candidates."""
    p = tmp_path / "big_seed.py"
    p.write_text(fake_candidate({"a": 1, "b": 2, "c": "x", "d": 0, "e": True},
                                {"a": [1, 2, 3, 4], "b": [1, 2, 4, 8], "c": ["x", "y", "z", "w"],
                                 "d": [0, 1, 2], "e": [True, False, None]}))
    return p
