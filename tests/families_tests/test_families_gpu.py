"""GPU check: every family candidate is correct through the real evaluator.

    pytest -m gpu tests/families_tests/test_families_gpu.py -q -s

Issue 19's cases (reductions over any dims, norms, losses, masks) have ids starting ``r19-``:
select them with ``-k r19``.

Each case renders a candidate, evaluates it with :class:`LocalEvaluator` (the harness a
search uses: main shape with three input distributions, every VERIFY_SHAPE — 1 row, 127
rows, row lengths that are no multiple of the vector width or the tile, very long rows —,
poisoned outputs, a determinism re-run, 30 timed calls; no baselines) and asserts the verdict
is ``correct``. Cases: the default candidate of every covered bundled task (fp32 and bf16,
the tasks' own large shapes), and every strategy plus the unfused variant of each task in
``tests/families_tests/tasks/`` (small main shapes, awkward hidden ones).

So one run gives everything needed to fix a bug: every case is its own test (one failure
stops nothing), its candidate file is kept in ``runs/families_gpu/`` (reproduce with
``cutegen eval TASK FILE``), its failure message carries the verdict, the harness's message
and details and each trial's errors, and ``runs/families_gpu/summary*.jsonl`` (one per xdist worker) gets one JSON
line per case (verdict, errors, median time, fraction of the roofline, kernels, registers).
"""

import json
import os
from pathlib import Path

import _cutegen_famdata as fd  # registered by conftest.py
import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict
from cutegen.codegen.tasks import load_task_file

OUT = fd.ROOT / "runs" / "families_gpu"
#: One summary file per pytest-xdist worker (``-n N`` runs cases side by side on the GPU).
SUMMARY = OUT / f"summary{'-' + os.environ['PYTEST_XDIST_WORKER'] if os.environ.get('PYTEST_XDIST_WORKER') else ''}.jsonl"
pytestmark = pytest.mark.gpu

CASES = [(name, fd.variants(name)[0][0], True, False) for name in sorted(fd.BUNDLED_COVERED)]
CASES += [(name, s, f, False) for name in sorted(p.stem for p in fd.TASKS.glob("*.py"))
          for s, f in fd.variants(name)]
#: TUNABLES["fast_math"] (approximate transcendentals, bf16 / fp16 results only) on every
#: bundled task that offers it: the approximation must stay inside the task's tolerance.
CASES += [(name, fd.variants(name)[0][0], True, True) for name in sorted(fd.BUNDLED_COVERED)
          if fd.offers_fast_math(name)]
#: Issue 19: reductions over any dims and norms: the bundled tasks' default candidates, and
#: every strategy of the small tasks in reduce_tasks/ (awkward hidden shapes).
CASES += [(name, fd.variants(name)[0][0], True, False) for name in sorted(fd.BUNDLED_REDUCE)]
CASES += [(name, s, f, False) for name in sorted(p.stem for p in fd.REDUCE_TASKS.glob("*.py"))
          for s, f in fd.variants(name)]


_R19 = set(fd.reduce_task_names())


def _id(case) -> str:
    name, strategy, fused, fast = case
    return (("r19-" if name in _R19 else "") + f"{name}-{strategy}" + ("" if fused else "-unfused")
            + ("-fast_math" if fast else ""))


@pytest.fixture(scope="session")
def evaluators():
    """One LocalEvaluator per task (its reference worker is reused across that task's cases)."""
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    OUT.mkdir(parents=True, exist_ok=True)
    SUMMARY.write_text("")
    made: dict = {}

    def get(name: str):
        if name not in made:
            # one task's workers at a time: a reference worker keeps its task's tensors on
            # the GPU, and side by side (pytest -n) they added up to an out-of-memory GPU
            for ev in made.values():
                ev.close()
            made.clear()
            task = load_task_file(fd.task_path(name), name=name)
            made[name] = LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=False),
                                        run_dir=OUT / "run")
        return made[name]

    yield get
    for ev in made.values():
        ev.close()


def _record(case_id: str, path: Path, ev) -> dict:
    t = ev.timing.median_us if ev.timing else None
    frac = (ev.roofline.bound_us / t) if (ev.roofline and t) else None
    row = {"case": case_id, "file": str(path), "verdict": ev.verdict.value,
           "message": ev.message, "details": [d[:2000] for d in ev.details[:3]],
           "trials": [{"label": tr.label, "passed": tr.passed, "reason": tr.reason,
                       "max_abs": tr.max_abs_err, "max_rel": tr.max_rel_err}
                      for tr in ev.trials],
           "median_us": t, "roofline_fraction": frac, "kernels": list(ev.kernels),
           "flags": list(ev.flags), "log_tail": ev.log_tail[-2000:]}
    with SUMMARY.open("a") as f:
        f.write(json.dumps(row) + "\n")
    return row


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_family_candidate_is_correct(case, evaluators):
    name, strategy, fused, fast = case
    code = fd.rendered(name, strategy, fused, (("fast_math", True),) if fast else ())
    path = OUT / f"{_id(case)}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    ev = evaluators(name).evaluate(CandidateSource(code, origin=f"family:{_id(case)}"))
    row = _record(_id(case), path, ev)
    frac = f"{row['roofline_fraction']:.0%}" if row["roofline_fraction"] else "-"
    print(f"CASE {_id(case)}: {ev.verdict.value} {row['median_us'] or '-'} us, roofline {frac}")
    failed = [tr for tr in row["trials"] if not tr["passed"]]
    assert ev.verdict == Verdict.CORRECT, (
        f"{ev.verdict.value}: {ev.message}\nfailed trials: {failed}\n"
        + "\n".join(row["details"]) + f"\nlog tail:\n{row['log_tail']}\n"
        f"reproduce: cutegen eval {fd.task_path(name)} {path}")
