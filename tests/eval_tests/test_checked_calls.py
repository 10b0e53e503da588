"""Timed calls compared at once (``Call.check``): the parent asks the reference worker to
compare them right after the call, and their results count as the timed calls' checks.

Before, a task whose outputs left the reference worker fewer slots than calls to check
(KernelBench L1 23's 6.4 GB softmax on an 80 GB H100: one slot) had fewer timed calls checked,
and none where no slot fitted at all.
"""

from __future__ import annotations

import types
from typing import Any

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.eval.candidate_run import CandidateRun
from cutegen.codegen.eval.verdict import _benchmark
from cutegen.codegen.evaluation import Verdict

INFO = {"shapes": [{"label": "main", "output_bytes": 6 * 2**30}], "distributions": ["randn"],
        "keep_slots": 0}


class _Ref:
    def __init__(self, wrong_at: set[int]) -> None:
        self.wrong_at, self.modes, self.k = wrong_at, [], -1

    def call(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        if req["op"] == "prepare":
            self.k += 1
            return {"ok": True}
        assert req["op"] == "take"
        self.modes.append((self.k, req["mode"]))
        if req["mode"] == "compare" and self.k in self.wrong_at:
            return {"passed": False, "verdict": "wrong", "reason": "mismatch"}
        return {"passed": True}


def _run(wrong_at: set[int]) -> tuple[CandidateRun, _Ref]:
    ref = _Ref(wrong_at)
    ev = types.SimpleNamespace(options=EvalOptions(), mode="gpu", ref=ref)
    proc = types.SimpleNamespace(send_line=lambda cmd: None)
    run = CandidateRun(ev, types.SimpleNamespace(proc=proc), INFO, sol_us=None)  # type: ignore[arg-type]
    run._await = lambda want, limit: ({"t": "done", "outputs": []}, 0)  # type: ignore[method-assign]
    return run, ref


def test_with_no_slot_the_drawn_timed_calls_are_compared_at_once():
    run, ref = _run(set())
    checked = [c.k for c in run.plan if c.check]
    assert len(checked) >= 3 and not any(c.keep for c in run.plan)
    for c in run.plan:
        run._call(c)
    assert [k for k, m in ref.modes if m == "compare" and k in checked] == checked
    assert [k for k, _ in run.st.facts.timed_results] == checked


def test_a_wrong_checked_call_makes_the_evaluation_wrong():
    run, ref = _run(set())
    bad = next(c.k for c in run.plan if c.check)
    ref.wrong_at = {bad}
    for c in run.plan:
        run._call(c)
    f = run.st.facts
    f.benchmarked = True
    assert (bad, {"passed": False, "verdict": "wrong", "reason": "mismatch"}) in f.timed_results
    d = _benchmark(f)  # (decide() reads the observer's records first: none here)
    assert d.verdict == Verdict.WRONG and f"timed call {bad}" in d.message
