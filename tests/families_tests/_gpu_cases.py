"""What the families' GPU checks (``test_*_gpu.py``) share: one evaluator per task, and one
judged case (its candidate kept on disk, one JSON line in a summary, a verdict asserted).

Registered by ``conftest.py`` as ``_cutegen_gpu_cases``; ``test_gpu_cases.py`` runs it on the
CPU against :class:`~cutegen.testing.FakeEvaluator`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Verdict


def summary_path(out: Path) -> Path:
    """One summary file per pytest-xdist worker: a shared one was emptied by each worker's
    start."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return out / f"summary{'-' + worker if worker else ''}.jsonl"


def evaluator_pool(out: Path, make: Callable[[str], Any], *,
                   one_at_a_time: bool = False) -> Iterator[Callable[[str], Any]]:
    """Yields ``get(name)``: the evaluator of a task, made once by ``make(name)`` (its
    reference worker is reused across that task's cases) and closed at the end.

    ``one_at_a_time`` closes the previous task's evaluator first: a reference worker keeps
    its task's tensors on the GPU, and side by side (pytest -n) they add up.
    """
    out.mkdir(parents=True, exist_ok=True)
    summary_path(out).write_text("")
    made: dict[str, Any] = {}

    def get(name: str) -> Any:
        if name not in made:
            if one_at_a_time:
                for ev in made.values():
                    ev.close()
                made.clear()
            made[name] = make(name)
        return made[name]

    try:
        yield get
    finally:
        for ev in made.values():
            ev.close()


def judge(evaluator: Any, code: str, case_id: str, out: Path, task_path: Path) -> dict:
    """Evaluates one rendered candidate, keeps it as ``out/<case_id>.py``, appends its row to
    the summary, prints one line and asserts the verdict is ``correct`` (the message names
    the failed trials, the details, the log tail and the command that reproduces it).
    Returns the row."""
    path = out / f"{case_id}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    ev = evaluator.evaluate(CandidateSource(code, origin=f"family:{case_id}"))
    t = ev.timing.median_us if ev.timing else None
    frac = ev.roofline_fraction
    row = {"case": case_id, "file": str(path), "verdict": ev.verdict.value,
           "message": ev.message, "details": [d[:2000] for d in ev.details[:3]],
           "trials": [{"label": tr.label, "passed": tr.passed, "reason": tr.reason,
                       "max_abs": tr.max_abs_err, "max_rel": tr.max_rel_err}
                      for tr in ev.trials],
           "median_us": t, "roofline_fraction": frac, "kernels": list(ev.kernels),
           "flags": list(ev.flags), "log_tail": ev.log_tail[-2000:]}
    with summary_path(out).open("a") as f:
        f.write(json.dumps(row) + "\n")
    shown = f"{frac:.0%}" if frac else "-"
    print(f"CASE {case_id}: {ev.verdict.value} {t or '-'} us, roofline {shown}")
    failed = [tr for tr in row["trials"] if not tr["passed"]]
    assert ev.verdict == Verdict.CORRECT, (
        f"{ev.verdict.value}: {ev.message}\nfailed trials: {failed}\n"
        + "\n".join(row["details"]) + f"\nlog tail:\n{row['log_tail']}\n"
        f"reproduce: cutegen eval {task_path} {path}")
    return row
