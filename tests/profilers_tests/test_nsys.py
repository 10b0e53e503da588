"""The nsys profiler: pure timeline parsers on synthetic nsys/torch.profiler samples, and the
torch.profiler fallback against a fake launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cutegen.plugins.testing import ProfilerContract, make_target
from cutegen.profilers import Bottleneck, BottleneckKind, Status
from cutegen.profilers._timeline import (
    GpuEvent,
    candidate_window,
    parse_nsys_api_sum,
    parse_nsys_gpu_trace,
    parse_torch_trace,
    summarize_timeline,
    timeline_findings,
)
from cutegen.profilers.nsys import NsysProfiler

DATA = Path(__file__).resolve().parents[1] / "data" / "profilers"
LATENCY = Bottleneck(BottleneckKind.LATENCY, "memory", 0.05, 3.0, 1, "short")


class TestNsysContract(ProfilerContract):
    @pytest.fixture
    def profiler(self) -> NsysProfiler:
        return NsysProfiler()


def test_nsys_gpu_trace_and_candidate_window():
    events = parse_nsys_gpu_trace((DATA / "nsys_cuda_gpu_trace_synthetic.csv").read_text())
    assert len(events) == 11
    assert [e.kind for e in events].count("memcpy") == 3
    window = candidate_window(events, "kernel_cutlass")
    assert len(window) == 9  # torch's set-up and clean-up kernels are outside
    assert window[0].name == "kernel_cutlass_rowmax_kernel_0"


def test_nsys_api_sum_counts_only_launch_calls():
    assert parse_nsys_api_sum((DATA / "nsys_cuda_api_sum_synthetic.csv").read_text()) == 409_000 + 157_000


def test_per_call_summary_of_a_two_kernel_candidate():
    events = candidate_window(parse_nsys_gpu_trace((DATA / "nsys_cuda_gpu_trace_synthetic.csv").read_text()),
                              "kernel_cutlass")
    s = summarize_timeline(events, calls=3, source="nsys", launch_api_ns=566_000)
    assert s.kernels_per_call == 2 and s.memcpy_per_call == 1
    assert s.kernel_us_per_call == pytest.approx(38.0)
    assert s.busy_us_per_call == pytest.approx(41.0)
    # 6 + 2 us inside each call, 15 us between calls (the last call's tail is outside the span)
    assert s.idle_us_per_call == pytest.approx((3 * 8 + 2 * 15) / 3)
    fs = {f.key: f.value for f in timeline_findings(s)}
    assert fs["hint.fuse_kernels"] == 2 and fs["hint.memcpy"] == 1
    assert fs["hint.launch_overhead"] == pytest.approx(566 / 3, abs=1e-3)


def test_torch_trace_of_a_launch_bound_kernel():
    events, api_ns = parse_torch_trace((DATA / "torch_trace_synthetic.json").read_text())
    assert [e.kind for e in events] == ["kernel"] * 4
    assert api_ns == pytest.approx(4 * 9000)
    s = summarize_timeline(events, calls=4, source="torch.profiler", launch_api_ns=api_ns)
    assert s.kernel_us_per_call == pytest.approx(3.0) and s.kernels_per_call == 1
    fs = {f.key: f.value for f in timeline_findings(s)}
    assert fs["timeline.source"] == "torch.profiler"
    assert fs["hint.launch_overhead"] == pytest.approx(9.0)
    assert "hint.fuse_kernels" not in fs and "hint.memcpy" not in fs


def test_real_h200_torch_trace_counts_the_dsl_launch_api():
    # recorded on the H200: the CuTe DSL launches with cudaLaunchKernelExC, which the
    # launch-API pattern missed (launch overhead read 0)
    events, api_ns = parse_torch_trace((DATA / "torch_trace_h200.json").read_text())
    assert [e.kind for e in events] == ["kernel"] * 5
    assert api_ns == pytest.approx((47.004 + 6.525 + 6.281 + 4.688 + 6.253) * 1000)
    s = summarize_timeline(events, calls=5, source="torch.profiler", launch_api_ns=api_ns)
    assert s.kernels_per_call == 1 and s.kernel_us_per_call == pytest.approx(47.58, abs=0.01)


@pytest.mark.parametrize("text", ["42", '{"traceEvents": "no"}', "not json"])
def test_bad_torch_traces(text):
    with pytest.raises(ValueError):
        parse_torch_trace(text)


def test_overlapping_events_count_once_as_busy():
    evs = [GpuEvent("kernel", "a", 0, 10_000), GpuEvent("kernel", "b", 5_000, 10_000),
           GpuEvent("kernel", "c", 20_000, 5_000)]
    s = summarize_timeline(evs, calls=1, source="x")
    assert (s.busy_us_per_call, s.span_us_per_call, s.idle_us_per_call) == (20.0, 25.0, 5.0)
    with pytest.raises(ValueError):
        summarize_timeline(evs, calls=0, source="x")


# -- the torch.profiler fallback against a fake launcher -----------------------------------
FAKE_LAUNCHER = """
import os, shutil, json
path = os.environ.get("CUTEGEN_LAUNCH_TORCH_PROFILE")
if path:
    shutil.copy({sample!r}, path)
print("CUTEGEN_LAUNCH_RESULT " + json.dumps({{"calls": int(os.environ["CUTEGEN_LAUNCH_REPEAT"]),
      "warmup": 1, "t0_ns": 1, "t1_ns": 2}}))
"""


def test_falls_back_to_torch_profiler_when_nsys_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr("cutegen.profilers.nsys.find_tool", lambda *a, **k: None)
    target = make_target(tmp_path / "w", bottleneck=LATENCY,
                         launch_code=FAKE_LAUNCHER.format(sample=str(DATA / "torch_trace_synthetic.json")))
    target.workdir.mkdir()
    r = NsysProfiler(repeat=4).profile(target, timeout_s=60)
    assert r.status is Status.OK, r.error
    assert r.get("timeline.source") == "torch.profiler" and r.get("timeline.calls") == 4
    assert "nsys not found" in (r.error or "")
    assert r.artifact == target.workdir / "torch_trace.json"


def test_launcher_without_torch_profile_support_fails_with_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr("cutegen.profilers.nsys.find_tool", lambda *a, **k: None)
    target = make_target(tmp_path / "w", bottleneck=LATENCY, launch_code="pass")
    target.workdir.mkdir()
    r = NsysProfiler().profile(target, timeout_s=60)
    assert r.status is Status.FAILED and "CUTEGEN_LAUNCH_TORCH_PROFILE" in (r.error or "")


def test_nsys_that_cannot_make_a_report_falls_back(tmp_path, monkeypatch):
    fake = tmp_path / "nsys"
    fake.write_text(f"#!{sys.executable}\nimport sys; print('importer not found'); sys.exit(1)\n")
    fake.chmod(0o755)
    target = make_target(tmp_path / "w", bottleneck=LATENCY,
                         launch_code=FAKE_LAUNCHER.format(sample=str(DATA / "torch_trace_synthetic.json")))
    target.workdir.mkdir()
    r = NsysProfiler(binary=str(fake)).profile(target, timeout_s=60)
    assert r.status is Status.OK
    assert "nsys could not make a report" in (r.error or "")


def test_applies_to_latency_or_several_kernels():
    p = NsysProfiler()
    assert p.applies_to(LATENCY)
    assert p.applies_to(Bottleneck(BottleneckKind.MEMORY, "memory", 0.8, 100.0, 2))
    assert not p.applies_to(Bottleneck(BottleneckKind.MEMORY, "memory", 0.8, 100.0, 1))
    assert not p.applies_to(Bottleneck(BottleneckKind.UNKNOWN))


def test_synthetic_trace_is_valid_json():
    assert json.loads((DATA / "torch_trace_synthetic.json").read_text())["traceEvents"]
