"""GPU check: every family candidate is correct through the real evaluator.

    pytest -m gpu tests/families_tests/test_families_gpu.py -q -s

Issue 19's cases (reductions over any dims, norms, losses, masks) have ids starting ``r19-``:
select them with ``-k r19``; issue 17's long rows (6 GB tasks, ~15 s an evaluation) start
``long-``: ``-k long-``, or ``-k "not long-"`` to leave them out.

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


import _cutegen_famdata as fd  # registered by conftest.py
import _cutegen_gpu_cases as gc  # registered by conftest.py
import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.families.render import knobs
from cutegen.codegen.tasks import load_task_file

OUT = fd.ROOT / "runs" / "families_gpu"
pytestmark = pytest.mark.gpu

#: (task, strategy, fused, extra knobs) with the extra knobs "" (none), a knob set to True
#: ("fast_math", "smem_row"), "KEY=VALUE" (an integer knob set to VALUE, a switch to "true" or
#: "false"), or several of those joined by "+".
CASES = [(name, fd.variants(name)[0][0], True, "") for name in sorted(fd.BUNDLED_COVERED)]
CASES += [(name, s, f, "") for name in sorted(p.stem for p in fd.TASKS.glob("*.py"))
          for s, f in fd.variants(name)]
#: TUNABLES["fast_math"] (approximate transcendentals, bf16 / fp16 results only) on every
#: bundled task that offers it: the approximation must stay inside the task's tolerance.
CASES += [(name, fd.variants(name)[0][0], True, "fast_math")
          for name in sorted(fd.BUNDLED_COVERED) if fd.offers_fast_math(name)]
#: Issue 19: reductions over any dims and norms: the bundled tasks' default candidates, and
#: every strategy of the small tasks in reduce_tasks/ (awkward hidden shapes).
CASES += [(name, fd.variants(name)[0][0], True, "") for name in sorted(fd.BUNDLED_REDUCE)]
CASES += [(name, s, f, "") for name in sorted(p.stem for p in fd.REDUCE_TASKS.glob("*.py"))
          for s, f in fd.variants(name)]
#: Issue 17: the long suite's tasks (6 GB rows of 1.5 MiB, 16 rows of 4M values), default,
#: with the row slice read twice (smem_row off; on by default), split over independent
#: CTAs in two launches, and resident (one persistent launch; ids start ``long-``).
CASES += [(name, fd.variants(name)[0][0], True, extra) for name in sorted(fd.BUNDLED_LONG)
          for extra in ("", "smem_row=false")]
CASES += [(name, s, True, "") for s in ("split", "resident") for name in sorted(fd.BUNDLED_LONG)]
#: ... and with the staged slice copied in by plain loads and stores (async_stage off; on by
#: default: cp.async), and with the output and x's last read evict-first in L2 (l2_hints),
#: each on the staged walk and the resident launch.
CASES += [(name, s, True, extra) for name in sorted(fd.BUNDLED_LONG)
          for s, base in (("auto", "smem_row+"), ("resident", ""))
          for extra in (base + "async_stage=false", base + "l2_hints")]
#: ... and the split strategy's launches a few rows at a time where it is offered (l2_batch:
#: each pair of launches over 32 MiB of rows; the hidden shapes' last batch is shorter).
CASES += [(name, "split", True, "l2_batch") for name in sorted(fd.BUNDLED_LONG)
          if "l2_batch" in knobs(fd.plan_of(name))[0]]
#: The pool family's other span shapes on its small tasks: eight outputs a thread, scalar
#: span reads, and the input staged through shared memory forced on and off (``KEY=VALUE``
#: extras set that knob; on the wide-stride tasks "auto" stages, elsewhere it does not).
CASES += [(name, "default", True, extra)
          for name in sorted(p.stem for p in fd.REDUCE_TASKS.glob("*.py"))
          if fd.plan_of(name).family == "pool"
          for extra in ("pool_outs=8", "vec_bits=32", "pool_stage=true", "pool_stage=false")]

#: Issue 19's kinds furthest below copy bandwidth, with the knob a search would try first:
#: approximate transcendentals where they offer it (kl_div's two logs an element), fewer rows
#: a thread kept in registers for a bf16 map over the channel dim (registers cap occupancy).
CASES += [(name, fd.variants(name)[0][0], True, "fast_math")
          for name in sorted(fd.BUNDLED_REDUCE) if fd.offers_fast_math(name)]
CASES += [("rmsnorm_channels_bf16", fd.variants("rmsnorm_channels_bf16")[0][0], True,
           "keep_vals=32")]

_R19 = set(fd.reduce_task_names())


def _id(case) -> str:
    name, strategy, fused, extra = case
    prefix = "r19-" if name in _R19 else "long-" if name in fd.BUNDLED_LONG else ""
    return (prefix + f"{name}-{strategy}" + ("" if fused else "-unfused")
            + (f"-{extra}" if extra else ""))


@pytest.fixture(scope="session")
def evaluators():
    """One LocalEvaluator per task (its reference worker is reused across that task's cases)."""
    from cutegen.codegen.eval.evaluator import LocalEvaluator

    def make(name: str):
        task = load_task_file(fd.task_path(name), name=name)
        return LocalEvaluator(task, EvalOptions(bench_runs=30, baselines=False),
                              run_dir=OUT / "run")

    yield from gc.evaluator_pool(OUT, make, one_at_a_time=True)


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_family_candidate_is_correct(case, evaluators):
    name, strategy, fused, extra = case
    knobs = []
    for item in extra.split("+") if extra else ():
        key, _, val = item.partition("=")
        knobs.append((key, True if not val else val == "true" if val in ("true", "false")
                      else int(val)))
    code = fd.rendered(name, strategy, fused, tuple(sorted(knobs)))
    gc.judge(evaluators(name), code, _id(case), OUT, fd.task_path(name))
