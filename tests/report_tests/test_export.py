"""``cutegen export``: a drop-in module with its provenance, importable without cutegen."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, TrialResult, Verdict
from cutegen.codegen.rewriters.base import Move
from cutegen.codegen.tasks import load_task_file
from cutegen.errors import ConfigError, StorageError
from cutegen.search.report.export import RULE, export_candidate
from cutegen.search.storage import BestDecision, RunConfig, SqliteStorage

DATA = Path(__file__).resolve().parents[1] / "data"


def _body(text: str) -> str:
    """The code below the header block."""
    head, sep, body = text.partition(RULE + "\n#")
    assert head == "" and sep
    return body.split(RULE + "\n", 1)[1]


def test_header_and_source(fake_run):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    best = s.get_best_node(run.id)
    text = export_candidate(s, run, db="runs/x.db")
    s.close()
    body = _body(text)
    assert hashlib.sha256(body.encode()).hexdigest() == best.source_sha256
    head = text[: len(text) - len(body)]
    assert all(line.startswith("#") for line in head.splitlines())
    assert all(len(line) <= 100 for line in head.splitlines())
    for fact in (f"run 'r1', node {best.id}", "Task: toy_bf16", "GPU: FakeGPU",
                 "torch 2.0-fake", "nvidia-cutlass-dsl 0.0-fake", "the run's gated best",
                 "Verified: correct at stage benchmark", "PyTorch eager", "faster (95% CI",
                 "Timed: gpu-activity span (CUPTI observer), L2 flushed per call"):
        assert fact in " ".join(head.split()), fact


def test_other_nodes_and_errors(fake_run, tmp_path, make_run):
    s = SqliteStorage(fake_run.db)
    run = s.get_run(fake_run.name)
    failed = next(r.node_id for r in s.get_results(run.id) if not r.verdict.ok)
    text = export_candidate(s, run, failed)
    assert "WARNING: NOT A CORRECT KERNEL" in text and "not the run's gated best" in text
    with pytest.raises(StorageError, match="no node"):
        export_candidate(s, run, 99_999)
    s.close()
    fr = make_run(tmp_path / "c", evals=3, compile_only=True, extras=False)
    s = SqliteStorage(fr.db)
    run = s.get_run(fr.name)
    with pytest.raises(ConfigError, match="has no best yet"):
        export_candidate(s, run)
    assert "NOT VERIFIED: compiled only" in export_candidate(s, run, 1)
    shutil.rmtree(tmp_path / "c" / fr.name / "candidates")
    with pytest.raises(StorageError, match="is not available"):
        export_candidate(s, run, 2)
    s.close()


def _render_good_kernel() -> str:
    spec = importlib.util.spec_from_file_location(
        "codegen_fixtures", DATA.parent / "codegen_tests" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod.render()


@pytest.fixture
def real_export(tmp_path):
    """A store whose best node is a real CuTe DSL kernel (scale_shift), exported."""
    task = load_task_file(DATA / "tasks" / "scale_shift.py")
    cand = CandidateSource(_render_good_kernel(), "fixture:good")
    s = SqliteStorage(tmp_path / "s.db")
    run = s.create_run("real", RunConfig(task.name, str(task.path), task.sha256,
                                         toolchain={"gpu": "NVIDIA H200"}))
    node = s.add_node(run.id, parent_id=None, source=cand, move=Move("seed", "seed good.py"))
    ev = Evaluation(cand.sha256, task.sha256, Stage.BENCHMARK, Verdict.CORRECT, "correct",
                    trials=(TrialResult("main/randn", True, max_abs_err=1e-7),),
                    timing=Timing.from_samples([10.0, 10.5, 11.0]),
                    eager=Timing.from_samples([20.0, 21.0, 22.0]))
    s.record_evaluation(node.id, ev, reward=1.0)
    s.record_best(BestDecision(run.id, node.id, None, True, "first correct candidate"))
    r = CliRunner().invoke(_cli(), ["export", "real", "--db", str(tmp_path / "s.db"), "-o",
                                    str(tmp_path / "kernel.py")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    s.close()
    return task, cand, tmp_path / "kernel.py"


def _cli():
    from cutegen.cli import _attach_commands, cli

    _attach_commands()
    return cli


IMPORT_WITHOUT_CUTEGEN = """
import importlib.util, json, sys
sys.modules["cutegen"] = None          # any `import cutegen...` now fails
sys.path = [p for p in sys.path if "work/main" not in p and p not in ("", ".")]
spec = importlib.util.spec_from_file_location("exported_kernel", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
m = mod.ModelNew()
print(json.dumps({"model": type(m).__name__,
                  "cutegen": [k for k in sys.modules if k.startswith("cutegen")
                              and sys.modules[k] is not None]}))
"""


def test_exported_module_imports_without_cutegen(real_export, tmp_path):
    _, cand, path = real_export
    text = path.read_text()
    assert _body(text) == cand.code and "Verified: correct" in text
    p = subprocess.run([sys.executable, "-c", IMPORT_WITHOUT_CUTEGEN, str(path)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"model": "ModelNew", "cutegen": []}


@pytest.mark.slow
def test_exported_module_compiles_for_sm90a(real_export, tmp_path):
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.compile_cache import CompileCache
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    task, _, path = real_export
    opts = EvalOptions(compile_only=True, arch="sm_90a", compile_timeout_s=120.0)
    with LocalEvaluator(task, opts, run_dir=tmp_path / "run",
                        compile_cache=CompileCache(tmp_path / "cache")) as ev:
        e = ev.evaluate(CandidateSource.from_path(path))
    assert e.verdict == Verdict.COMPILED, (e.message, e.log_tail[-2000:])
    assert e.kernels and any(n.endswith(".cubin") for n in e.artifacts)


def test_cli_export_to_stdout(fake_run):
    r = CliRunner().invoke(_cli(), ["export", fake_run.name, "--db", str(fake_run.db)],
                           catch_exceptions=False)
    assert r.exit_code == 0 and r.stdout.startswith(RULE) and "class ModelNew" in r.stdout


def test_header_says_eager_in_tf32_and_a_kernel_slower_than_eager():
    from cutegen.search.report.export import _evaluation_lines

    ev = Evaluation(candidate_sha256="a", task_sha256="b", stage=Stage.BENCHMARK,
                    verdict=Verdict.CORRECT, timing=Timing.from_samples([100.0] * 5),
                    eager=Timing.from_samples([250.0] * 5))
    text = " ".join(_evaluation_lines(ev, "t", ""))
    assert "2.500x faster" in text and "TF32" not in text and "slower" not in text
    conv = dataclasses.replace(ev, eager=Timing.from_samples([80.0] * 5),
                               eager_tf32=Timing.from_samples([30.0] * 5))
    text = " ".join(" ".join(_evaluation_lines(conv, "t", "")).split())
    assert "cuDNN in TF32: 30.00 us median -> 0.300x" in text
    assert "NOTE: slower than PyTorch eager" in text
