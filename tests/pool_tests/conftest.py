"""Fixtures of the pool tests: a toy task, seed files, stores, and pools of fake devices."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.pool import GpuPool
from cutegen.codegen.tasks import Task
from cutegen.search.storage import RunConfig
from cutegen.testing import FakeEvaluator, fake_candidate

TASK_SRC = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"

#: 4 * 4 * 3 = 48 reachable candidates: small enough to exhaust in a test.
SMALL = ({"a": 1, "b": 2, "c": "x"}, {"a": [1, 2, 3, 4], "b": [1, 2, 4, 8], "c": ["x", "y", "z"]})
#: 576 reachable candidates.
BIG = ({"a": 1, "b": 2, "c": "x", "d": 0, "e": True},
       {"a": [1, 2, 3, 4], "b": [1, 2, 4, 8], "c": ["x", "y", "z", "w"], "d": [0, 1, 2],
        "e": [True, False, None]})


def latency_of(candidate, *, scale: float = 0.01) -> float:
    """A per-candidate delay from its hash: results of a parallel run arrive out of order."""
    return scale * (int(candidate.sha256[:4], 16) % 7)


@pytest.fixture
def task(tmp_path: Path) -> Task:
    p = tmp_path / "toy_fp32.py"
    p.write_text(TASK_SRC)
    return Task("toy_fp32", p, TASK_SRC)


@pytest.fixture
def small_seed(tmp_path: Path) -> Path:
    p = tmp_path / "small_seed.py"
    p.write_text(fake_candidate(*SMALL))
    return p


@pytest.fixture
def big_seed(tmp_path: Path) -> Path:
    p = tmp_path / "big_seed.py"
    p.write_text(fake_candidate(*BIG))
    return p


def run_config(task: Task, seed: int = 0) -> RunConfig:
    return RunConfig(task.name, str(task.path), task.sha256, seed=seed,
                     toolchain={"torch": "x"}, settings={})


def fake_pool(task: Task, tmp_path: Path, *, devices: int = 2, latency=latency_of,
              cls=FakeEvaluator, **fake_kw) -> tuple[GpuPool, dict[int | None, FakeEvaluator]]:
    """A GpuPool of ``devices`` fake devices, and the fakes by device index."""
    fakes: dict[int | None, FakeEvaluator] = {}

    def make(device: int | None) -> FakeEvaluator:
        fakes[device] = cls(device=device, latency=latency, **{"seed": 3, **fake_kw})
        return fakes[device]

    pool = GpuPool(task, EvalOptions(compile_only=True), tmp_path / "run",
                   gpus=list(range(devices)), factory=make)
    return pool, fakes


@pytest.fixture
def pool_factory(task, tmp_path):
    """``pool_factory(devices=2, latency=..., **FakeEvaluator kwargs)``; closed after the test."""
    made = []

    def make(**kw):
        pool, fakes = fake_pool(task, tmp_path, **kw)
        made.append(pool)
        return pool, fakes

    yield make
    for p in made:
        p.close()



@pytest.fixture
def h():
    """The helpers above (test modules cannot import conftest under importlib mode)."""
    return types.SimpleNamespace(SMALL=SMALL, BIG=BIG, latency_of=latency_of,
                                 run_config=run_config, fake_pool=fake_pool)
