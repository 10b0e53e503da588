"""Delayed two-stage profiling: classify (pure), should_profile, run_stage2, guidance, hints."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutegen.codegen.evaluation import Evaluation, Roofline, Stage, Timing, Verdict
from cutegen.errors import ConfigError, PluginError
from cutegen.profilers import (
    Bottleneck,
    BottleneckKind,
    Finding,
    ProfileReport,
    ProfileTarget,
    Status,
    classify,
    guidance,
    hints,
    run_stage2,
    should_profile,
)


def ev(time_us: float | None = 100.0, *, bound_us: float | None = 80.0, kind: str = "memory",
       verdict: Verdict = Verdict.CORRECT, kernels: int = 1) -> Evaluation:
    return Evaluation(
        "a" * 64, "b" * 64, Stage.BENCHMARK, verdict,
        timing=Timing.from_samples([time_us] * 30) if time_us is not None else None,
        roofline=Roofline(1, 1, bound_us, kind, 4300.0, 790.0) if bound_us is not None else None,
        kernels=tuple(f"kernel_cutlass_{i}" for i in range(kernels)),
    )


# -- stage 1 ------------------------------------------------------------------------------
@pytest.mark.parametrize("evaluation, kind", [
    (None, BottleneckKind.UNKNOWN),
    (ev(None), BottleneckKind.UNKNOWN),
    (ev(100.0, bound_us=None), BottleneckKind.UNKNOWN),
    (ev(100.0, bound_us=80.0), BottleneckKind.MEMORY),
    (ev(1000.0, bound_us=700.0, kind="compute"), BottleneckKind.COMPUTE),
    (ev(100.0, bound_us=10.0), BottleneckKind.LATENCY),       # 10% of the roofline
    (ev(4.0, bound_us=1.0), BottleneckKind.LATENCY),          # very short, far from the bound
    (ev(4.0, bound_us=3.6), BottleneckKind.MEMORY),           # short but at 90% of the bound
    (ev(4.0, bound_us=None), BottleneckKind.LATENCY),
])
def test_classify(evaluation, kind):
    b = classify(evaluation)
    assert b.kind is kind and b.reason


def test_classify_records_the_numbers():
    b = classify(ev(100.0, bound_us=80.0, kernels=3))
    assert (b.roofline, b.fraction, b.time_us, b.n_kernels, b.measured) == ("memory", 0.8, 100.0, 3, True)
    assert "80%" in b.reason


@given(time_us=st.floats(0.5, 1e6), frac=st.floats(0.001, 1.5), compute=st.booleans())
def test_classify_is_total_and_consistent(time_us, frac, compute):
    b = classify(ev(time_us, bound_us=time_us * frac, kind="compute" if compute else "memory"))
    assert b.measured and b.fraction == pytest.approx(frac)
    if b.kind is not BottleneckKind.LATENCY:
        assert b.kind is (BottleneckKind.COMPUTE if compute else BottleneckKind.MEMORY)
        assert frac >= 0.15


# -- when ---------------------------------------------------------------------------------
@pytest.mark.parametrize("depth, evaluation, mode, expected", [
    (3, ev(), "auto", True),
    (2, ev(), "auto", False),
    (0, ev(), "force", True),
    (9, ev(), "off", False),
    (9, ev(verdict=Verdict.WRONG), "auto", False),
    (9, ev(verdict=Verdict.WRONG), "force", False),
    (9, ev(None, verdict=Verdict.COMPILED), "auto", True),   # compile-only: sass still applies
    (9, None, "force", False),
])
def test_should_profile(depth, evaluation, mode, expected):
    assert should_profile(depth, evaluation, profile_depth=3, mode=mode) is expected


def test_should_profile_rejects_bad_config():
    with pytest.raises(ConfigError):
        should_profile(1, ev(), profile_depth=1, mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        should_profile(1, ev(), profile_depth=-1)


# -- stage 2 ------------------------------------------------------------------------------
class Fake:
    def __init__(self, name: str, *, kinds=tuple(BottleneckKind), available=True, sleep=0.0,
                 findings=(), raises=None, returns=None):
        self.name, self.kinds, self.available, self.sleep = name, kinds, available, sleep
        self.findings, self.raises, self.returns, self.calls = findings, raises, returns, []

    def is_available(self):
        return self.available

    def applies_to(self, bottleneck):
        return bottleneck.kind in self.kinds

    def profile(self, target, *, timeout_s):
        self.calls.append((target, timeout_s))
        time.sleep(self.sleep)
        if self.raises:
            raise self.raises
        if self.returns is not None:
            return self.returns
        return ProfileReport(self.name, Status.OK, tuple(self.findings))


MEM = Bottleneck(BottleneckKind.MEMORY, "memory", 0.5, 100.0, 1, "m")


def test_only_applicable_profilers_run_each_in_its_own_folder(tmp_path: Path):
    a, b, c = Fake("a"), Fake("b", kinds=(BottleneckKind.COMPUTE,)), Fake("c", available=False)
    reports, seconds = run_stage2([a, b, c], ProfileTarget("x", tmp_path), MEM, timeout_s=10)
    assert [(r.profiler, r.status) for r in reports] == [("a", Status.OK), ("c", Status.UNAVAILABLE)]
    (target, timeout), = a.calls
    assert target.workdir == tmp_path / "a" and target.workdir.is_dir()
    assert target.bottleneck == MEM and timeout == 10
    assert not b.calls and not c.calls and seconds >= 0


def test_profiler_time_is_measured_and_returned(tmp_path):
    reports, seconds = run_stage2({"s": Fake("s", sleep=0.2)}, ProfileTarget("x", tmp_path), MEM,
                                  timeout_s=10)
    assert reports[0].seconds >= 0.2 and seconds >= reports[0].seconds


def test_budget_stops_later_profilers(tmp_path):
    slow, later = Fake("slow", sleep=0.3), Fake("later")
    reports, _ = run_stage2([slow, later], ProfileTarget("x", tmp_path), MEM, timeout_s=10, budget_s=0.2)
    assert [r.status for r in reports] == [Status.OK, Status.TIMEOUT]
    assert slow.calls[0][1] == pytest.approx(0.2, abs=0.05) and not later.calls


def test_a_raising_plugin_becomes_a_failed_report_or_a_plugin_error(tmp_path):
    bad = Fake("bad", raises=RuntimeError("boom"))
    (r,), _ = run_stage2([bad, ], ProfileTarget("x", tmp_path), MEM, timeout_s=10)
    assert r.status is Status.FAILED and "boom" in (r.error or "") and "bug" in (r.error or "")
    with pytest.raises(PluginError, match="boom"):
        run_stage2([bad], ProfileTarget("x", tmp_path), MEM, timeout_s=10, strict=True)


@pytest.mark.parametrize("returns", [42, ProfileReport("other", Status.OK)])
def test_contract_violations(tmp_path, returns):
    liar = Fake("liar", returns=returns)
    (r,), _ = run_stage2([liar], ProfileTarget("x", tmp_path), MEM, timeout_s=10)
    assert r.status is Status.FAILED and r.profiler == "liar"
    with pytest.raises(PluginError):
        run_stage2([liar], ProfileTarget("x", tmp_path), MEM, timeout_s=10, strict=True)


# -- what rewriters get -------------------------------------------------------------------
def test_guidance_and_hints():
    reports = (
        ProfileReport("sass", Status.OK, (Finding("sass.ldg_min_bits", 32),
                                          Finding("hint.vector_width", 128, "use 128-bit loads"),
                                          Finding("hint.spills", 4, "spills"))),
        ProfileReport("ncu", Status.FAILED, (Finding("hint.stall", "x", "ignored: not ok"),), error="e"),
        ProfileReport("nsys", Status.OK, (Finding("hint.vector_width", 64, "use 128-bit loads"),
                                          Finding("hint.memcpy", 1, "no copies"))),
    )
    assert guidance(reports) == ("use 128-bit loads", "spills", "no copies")
    assert guidance(reports, limit=1) == ("use 128-bit loads",)
    assert hints(reports) == {"hint.vector_width": 128, "hint.spills": 4, "hint.memcpy": 1}
