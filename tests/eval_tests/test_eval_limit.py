"""One evaluation's calls and comparisons have a limit of their own (``eval_timeout_s``).

Every phase had a limit (a call of forward: ``run_timeout_s``; a reference request: four times
that), but the sum did not: KernelBench L1 25 (x * sigmoid(x), 4096 x 393216 fp32) on an
80 GB H100 had its float64 references computed in host memory (38 GB beside the candidate's
buffers) and compared there, about a minute a comparison: one evaluation ran past 15
minutes, twice, and held `cutegen bench --max-minutes 8.5` with it. Past the limit the
candidate is a ``timeout`` where its own calls took most of the time; where checking them did,
the evaluation fails as the machine's, saying why, and the candidate is not judged.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from cutegen.codegen.backend import EvalOptions
from cutegen.codegen.eval import candidate_run
from cutegen.codegen.eval.candidate_run import CandidateRun
from cutegen.codegen.eval.verdict import decide
from cutegen.codegen.evaluation import Verdict
from cutegen.errors import InfrastructureError

INFO = {"shapes": [{"label": "main", "output_bytes": 4096}], "distributions": ["randn"],
        "keep_slots": 2}


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    def monotonic_ns(self) -> int:
        return int(self.t * 1e9)


class _Ref:
    def __init__(self, clock: _Clock, seconds: float, kind: str = "",
                 kept_s: float | None = None) -> None:
        self.clock, self.seconds, self.kind = clock, seconds, kind
        self.kept_s = seconds if kept_s is None else kept_s  # a kept copy's comparison
        self.ops: list[str] = []

    def call(self, req: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.ops.append(req["op"])
        self.clock.t += self.kept_s if req["op"] == "compare_kept" else self.seconds
        if req["op"] == "prepare":
            return {"ok": True}
        return {"passed": True, "reference": self.kind}


def _run(monkeypatch, *, ref_s: float, call_s: float, kind: str = "",
         limit: float = 600.0, kept_s: float | None = None) -> tuple[CandidateRun, _Ref]:
    clock = _Clock()
    monkeypatch.setattr(candidate_run, "time", types.SimpleNamespace(
        monotonic=clock.monotonic, monotonic_ns=clock.monotonic_ns))
    ref = _Ref(clock, ref_s, kind, kept_s)
    ev = types.SimpleNamespace(options=EvalOptions(eval_timeout_s=limit), mode="gpu", ref=ref)
    proc = types.SimpleNamespace(send_line=lambda cmd: None)
    worker = types.SimpleNamespace(proc=proc, observer=None, audit=None)
    run = CandidateRun(ev, worker, INFO, sol_us=None)  # type: ignore[arg-type]

    def wait(want: str, limit: float) -> tuple[dict[str, Any], int]:
        if want == "done":
            clock.t += call_s
        return {"t": want, "outputs": []}, clock.monotonic_ns()

    run._await = wait  # type: ignore[method-assign]
    run._early_verdict = lambda: False  # type: ignore[method-assign]
    return run, ref


def test_checking_past_the_limit_is_the_machines_and_says_why(monkeypatch):
    run, ref = _run(monkeypatch, ref_s=30.0, call_s=0.1, kind="host64")
    with pytest.raises(InfrastructureError) as e:
        run.run({})
    msg = str(e.value)
    assert "of the 600 s an evaluation may take" in msg and "host memory" in msg
    assert "not judged" in msg and "--eval-timeout" in msg
    assert ref.ops[-1] == "release"  # the kept copies are handed back
    assert ref.ops.count("prepare") < len(run.plan)  # it stopped early


@pytest.mark.parametrize("decided", [True, False])
def test_what_ran_decides_before_checking_is_blamed(monkeypatch, decided):
    """Where checking took the time but what already ran on the GPU decides the verdict
    (work outside the calls, which could also have slowed the checks down), that verdict
    stands: a candidate cannot turn its verdict into a paused search by slowing the
    reference worker. Otherwise the evaluation is the machine's fault, as above."""
    run, ref = _run(monkeypatch, ref_s=30.0, call_s=0.1)
    run.w.observer = object()  # there is an observer (its reading is faked below)
    flushed = []
    run._flush_observer = lambda: flushed.append(1)  # type: ignore[method-assign]
    # (the verification calls' early look finds nothing; past the limit, ``decided``)
    run._early_verdict = (  # type: ignore[method-assign]
        lambda: decided and candidate_run.time.monotonic() >= run.deadline)
    if decided:
        facts = run.run({})
        assert facts.timeout_phase is None and not facts.finished and flushed
        assert "release" not in ref.ops
    else:
        with pytest.raises(InfrastructureError):
            run.run({})
        assert flushed and ref.ops[-1] == "release"


def test_a_candidate_whose_calls_take_the_time_is_a_timeout(monkeypatch):
    run, ref = _run(monkeypatch, ref_s=0.1, call_s=30.0)
    facts = run.run({})
    assert facts.timeout_phase == "evaluation"
    d = decide(facts)
    assert d.verdict == Verdict.TIMEOUT and "--eval-timeout" in d.message
    assert "release" not in ref.ops and ref.ops.count("prepare") < len(run.plan)


def test_the_limit_reached_among_the_kept_copies_ends_the_run_there(monkeypatch):
    """The kept copies are compared after the last call: the limit reached there is a
    ``timeout`` where the calls took the time (the run returns its facts; before, the stop
    escaped the run), and the machine's where the comparisons did."""
    run, ref = _run(monkeypatch, ref_s=0.0, call_s=1.0, kept_s=100.0)
    calls = sum(1 for c in run.plan)  # their calls take 550 s of the 600
    kept = sum(1 for c in run.plan if c.keep)
    assert kept >= 2
    run, ref = _run(monkeypatch, ref_s=0.0, call_s=550.0 / calls, kept_s=100.0)
    facts = run.run({})
    assert facts.finished and facts.timeout_phase == "evaluation"
    assert ref.ops.count("compare_kept") == 1
    run, ref = _run(monkeypatch, ref_s=0.0, call_s=0.1, kept_s=700.0)
    with pytest.raises(InfrastructureError):
        run.run({})
    assert ref.ops.count("compare_kept") == 1 and ref.ops[-1] == "release"


def test_within_the_limit_every_call_is_made_and_compared(monkeypatch):
    run, ref = _run(monkeypatch, ref_s=2.0, call_s=2.0, limit=10_000.0)
    facts = run.run({})
    assert facts.timeout_phase is None and facts.finished
    assert ref.ops.count("prepare") == len(run.plan)
    assert ref.ops.count("compare_kept") == sum(1 for c in run.plan if c.keep)
    assert run.ref_s == pytest.approx(2.0 * len(ref.ops))


def test_the_search_commands_limits_reach_the_runs_settings():
    from cutegen.cli.options import eval_options

    default = eval_options(False, "sm_90a", None, None, None)
    assert (default.run_timeout_s, default.eval_timeout_s) == (120.0, 900.0)
    given = eval_options(False, "sm_90a", 1, 30.0, 1200.0)
    assert (given.run_timeout_s, given.eval_timeout_s, given.gpu) == (30.0, 1200.0, 1)
