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


def test_inputs_without_room_are_the_calls_oom_and_no_call_is_made():
    """Before: drawing a bf16 call's inputs (through an fp32 draw of their size) without room
    on the GPU raised in the reference worker, an error that ended the search; now the call
    is not made and the evaluation is ``oom`` (verify or timed call alike)."""
    from cutegen.codegen.eval.verdict import _verification

    for role in ("verify", "timed"):
        run, ref = _run(set())
        at = next(c.k for c in run.plan if (c.role == "verify") == (role == "verify"))
        sent: list[dict] = []
        run.w.proc.send_line = sent.append
        real = ref.call

        def call(req, timeout, at=at, real=real, ref=ref):
            if req["op"] == "prepare" and ref.k + 1 == at:
                ref.k += 1
                return {"ok": False, "passed": False, "verdict": "oom", "reason": "no room"}
            return real(req, timeout)

        ref.call = call
        for c in run.plan:
            run._call(c)
            f = run.st.facts
            if f.trial_results and not f.trial_results[-1][1].get("passed") or \
                    f.handoff_failure:
                break
        assert c.k == at and [m["k"] for m in sent] == list(range(at))  # not made
        d = _verification(run.st.facts)
        assert d.verdict == Verdict.OOM and "no room" in d.message
