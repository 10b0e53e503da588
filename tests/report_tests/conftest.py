"""Fixtures for the report, export, views and bench tests: a finished fake search in a
SQLite store (FakeEvaluator + the built-in rewriter), with a profile and an LLM call."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from cutegen.codegen.llm import LLMCall
from cutegen.codegen.rewriters.builtin import BuiltinRewriter
from cutegen.codegen.tasks import Task
from cutegen.profilers import Finding
from cutegen.search import Budget, Search, SearchParams
from cutegen.search.storage import ProfileRecord, RunConfig, SqliteStorage
from cutegen.testing import FakeEvaluator, fake_candidate

TASK_SRC = "class Model: pass\ndef get_inputs(): return []\ndef get_init_inputs(): return []\n"
SEED = fake_candidate({"a": 1, "b": 2, "c": "x"},
                      {"a": [1, 2, 3, 4], "b": [1, 2, 4, 8], "c": ["x", "y", "z"]})
TOOLCHAIN = {"gpu": "FakeGPU", "torch": "2.0-fake", "nvidia-cutlass-dsl": "0.0-fake",
             "cutegen": "0.1.0", "python": "3.11", "driver": "1.0", "cuda": "12.0"}


@dataclass(frozen=True)
class FakeRun:
    db: Path
    name: str
    task_path: Path
    seed_path: Path


def make_fake_run(root: Path, *, name: str = "r1", evals: int = 30, compile_only: bool = False,
                  failure_rate: float = 0.2, task_name: str = "toy_bf16",
                  extras: bool = True) -> FakeRun:
    """Run a fake search into ``root/store.db``; ``extras`` adds a profile with findings on
    the best node and one LLM call, as a real mixed search with profiling would."""
    root.mkdir(parents=True, exist_ok=True)
    task_path, seed_path = root / f"{task_name}.py", root / "seed.py"
    task_path.write_text(TASK_SRC)
    seed_path.write_text(SEED)
    task = Task(task_name, task_path, TASK_SRC)
    db = root / "store.db"
    storage = SqliteStorage(db)
    try:
        run = storage.create_run(name, RunConfig(task.name, str(task_path), task.sha256, seed=3,
                                                 toolchain=TOOLCHAIN,
                                                 settings={"rewriter": "builtin"}))

        def hook(node, ev):
            hint = Finding("hint.vector_width", 64, "loads are 64-bit: widen to 128-bit")
            return (ProfileRecord(node.id, "sass", "ok", (hint,)),) if node.depth >= 2 else ()

        with Search(storage=storage, run=run, task=task,
                    evaluator=FakeEvaluator(seed=1, failure_rate=failure_rate,
                                            compile_only=compile_only),
                    rewriter=BuiltinRewriter(seed_files=[seed_path], bundled_seeds=False),
                    params=SearchParams(expensive=None), budget=Budget(max_evals=evals),
                    heartbeat=False, profile_hook=hook) as s:
            s.run()
        best = storage.get_best_node(run.id)
        if extras and best is not None:
            storage.record_profile(ProfileRecord(
                best.id, "sass", "ok",
                (Finding("sass.ldg_max_bits", 64, "global loads 64-bit"),
                 Finding("hint.vector_width", 64, "loads are 64-bit: widen to 128-bit"))))
            storage.record_profile(ProfileRecord(best.id, "ncu", "unavailable"))
        if extras:
            storage.record_llm_call(run.id, LLMCall(
                "c1", 1, "rewrite", "fake-model", "", "", "p", "r", prompt_tokens=1200,
                completion_tokens=300, cost_usd=0.0123, cost_basis="usage"))
    finally:
        storage.close()
    return FakeRun(db, name, task_path, seed_path)


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory: pytest.TempPathFactory) -> FakeRun:
    return make_fake_run(tmp_path_factory.mktemp("fake") / "s")


@pytest.fixture
def make_run():
    """``make_run(root, **kw) -> FakeRun``: a fresh fake search (see ``make_fake_run``)."""
    return make_fake_run


@pytest.fixture
def best_with_tf32(monkeypatch):
    """``apply(storage, run, factor)``: the store's best node's evaluation read back with
    ``eager_tf32`` = its eager samples / ``factor`` (eager with cuDNN in TF32, as a conv
    task's baselines time it); returns the patched ``get_evaluation``."""
    from dataclasses import replace

    from cutegen.codegen.evaluation import Timing

    def apply(storage, run, factor: float):
        best = storage.get_best_node(run.id)
        real = storage.get_evaluation

        def with_tf32(node_id):
            ev = real(node_id)
            if node_id != best.id or ev is None or ev.eager is None:
                return ev
            return replace(ev, eager_tf32=Timing.from_samples(
                [v / factor for v in ev.eager.samples_us]))

        monkeypatch.setattr(storage, "get_evaluation", with_tf32)
        return with_tf32

    return apply
