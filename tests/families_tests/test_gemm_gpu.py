"""GPU check: the gemm family's candidates are correct through the real evaluator.

    pytest -m gpu tests/families_tests/test_gemm_gpu.py -q -s

Each case renders a hand-built GEMM plan (``gemm_plans.py``: what recognition produces for
matmul tasks) into a candidate and evaluates it with :class:`LocalEvaluator` (main shape with
the task's input distributions, every VERIFY_SHAPE — M = 1, 127 x 1000 x 520, odd N and K,
transposed and batched operands —, poisoned outputs, a determinism re-run, 30 timed calls; no
baselines) and asserts the verdict is ``correct``. Cases: the default candidate of every
plan (the bundled ``gemm_*`` tasks at their 8192 sizes, the ``gemm_tasks/`` ones at 2048),
one case per non-default knob value on ``gemm_bf16``, and a few knob values (split-K with
epilogues and reductions, clusters, direct stores) on the others.

Every case is its own test, keeps its candidate in ``runs/gemm_gpu/`` (reproduce with
``cutegen eval TASK FILE``) and appends one JSON line to ``runs/gemm_gpu/summary*.jsonl`` (one per xdist worker)
(verdict, errors, median time, kernels).
"""

import json
import os

import _cutegen_gemm_plans as gp  # registered by conftest.py
import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.tasks import load_task_file

OUT = gp.ROOT / "runs" / "gemm_gpu"
#: One summary file per pytest-xdist worker: a shared one was emptied by each worker's start.
SUMMARY = OUT / f"summary{'-' + os.environ['PYTEST_XDIST_WORKER'] if os.environ.get('PYTEST_XDIST_WORKER') else ''}.jsonl"
pytestmark = pytest.mark.gpu

CASES: list[tuple[str, tuple]] = [(name, ()) for name in gp.PLANS]
_values, _choices = gp.gemm_knobs_of("gemm_bf16")
CASES += [("gemm_bf16", ((k, v),)) for k, vs in _choices.items() for v in vs
          if v != _values[k]]
CASES += [("gemm_fp32", (("tile_n", 128),)), ("gemm_fp32", (("tile_m", 64),)),
          ("gemm_fp32", (("epilogue", "direct"),)), ("gemm_fp32", (("cluster_m", 2),)),
          ("gemm_fp32", (("split_k", 2),)), ("linear_gelu_bf16", (("split_k", 2),)),
          ("matmul_scale_residual_bf16", (("split_k", 4),)),
          ("matmul_logsumexp_bf16", (("split_k", 2),)), ("bmm_bf16", (("cluster_n", 2),)),
          ("linear_bf16", (("epilogue", "direct"),)), ("matmul_at_bf16", (("tile_m", 64),))]


def _id(case) -> str:
    name, knobs = case
    return name + "".join(f"-{k}={v}" for k, v in knobs)


@pytest.fixture(scope="session")
def evaluators():
    """One LocalEvaluator per task (its reference worker is reused across that task's cases)."""
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    OUT.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text("")
    made: dict = {}

    def get(name: str):
        path = gp.task_path(name)
        if path not in made:
            task = load_task_file(path, name=path.stem)
            made[path] = LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=False),
                                        run_dir=OUT / "run")
        return made[path]

    yield get
    for ev in made.values():
        ev.close()


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_gemm_candidate_is_correct(case, evaluators):
    name, knobs = case
    code = gp.rendered(name, **dict(knobs))
    path = OUT / f"{_id(case)}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    ev = evaluators(name).evaluate(CandidateSource(code, origin=f"family:{_id(case)}"))
    t = ev.timing.median_us if ev.timing else None
    row = {"case": _id(case), "file": str(path), "verdict": ev.verdict.value,
           "message": ev.message, "details": [d[:2000] for d in ev.details[:3]],
           "trials": [{"label": tr.label, "passed": tr.passed, "reason": tr.reason,
                       "max_abs": tr.max_abs_err, "max_rel": tr.max_rel_err}
                      for tr in ev.trials],
           "median_us": t, "kernels": list(ev.kernels), "flags": list(ev.flags),
           "log_tail": ev.log_tail[-2000:]}
    with SUMMARY.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"CASE {_id(case)}: {ev.verdict.value} {t or '-'} us")
    failed = [tr for tr in row["trials"] if not tr["passed"]]
    assert ev.verdict == Verdict.CORRECT, (
        f"{ev.verdict.value}: {ev.message}\nfailed trials: {failed}\n"
        + "\n".join(row["details"]) + f"\nlog tail:\n{row['log_tail']}\n"
        f"reproduce: cutegen eval {gp.task_path(name)} {path}")
