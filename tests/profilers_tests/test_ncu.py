"""The ncu profiler: the metric list, the pure CSV parser on synthetic samples, hints, and the
profile flow against a fake ncu (the real one runs on the GPU machine: markers tool/gpu)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cutegen.plugins.testing import ProfilerContract, make_target
from cutegen.profilers import Bottleneck, BottleneckKind, Status
from cutegen.profilers._ncu_metrics import ALL_METRICS, METRICS, STALLS, metrics_for
from cutegen.profilers._run import ToolRun
from cutegen.profilers.ncu import (
    NcuProfiler,
    explain_failure,
    ncu_findings,
    parse_ncu_csv,
    rejected_metrics,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "profilers"
MEMORY = Bottleneck(BottleneckKind.MEMORY, "memory", 0.35, 41.0, 2, "memory")
COMPUTE = Bottleneck(BottleneckKind.COMPUTE, "compute", 0.5, 1420.0, 1, "compute")


class TestNcuContract(ProfilerContract):
    @pytest.fixture
    def profiler(self) -> NcuProfiler:
        return NcuProfiler()


# -- the metric list ----------------------------------------------------------------------
def test_metric_names_are_unique_and_well_formed():
    names = [m.name for m in ALL_METRICS]
    assert len(names) == len(set(names))
    for n in names:
        assert re.fullmatch(r"[a-z0-9]+__[a-z0-9_]+(\.[a-z0-9_]+)*", n), n


@pytest.mark.parametrize("kind", list(BottleneckKind))
def test_every_set_has_the_common_metrics_and_time(kind):
    chosen = metrics_for(kind)
    assert "gpu__time_duration.sum" in chosen
    assert {m.name for m in METRICS if m.group == "common"} <= set(chosen)


def test_sets_follow_the_bottleneck():
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in metrics_for(BottleneckKind.COMPUTE)
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" not in metrics_for(BottleneckKind.MEMORY)
    assert "lts__t_sector_hit_rate.pct" in metrics_for(BottleneckKind.MEMORY)
    assert {m.name for m in STALLS} <= set(metrics_for(BottleneckKind.LATENCY))
    assert set(metrics_for(BottleneckKind.UNKNOWN)) == {m.name for m in ALL_METRICS}


@pytest.mark.tool("ncu")
def test_metric_names_exist_in_installed_ncu():
    """Every metric's base name is known to the installed ncu for Hopper (no GPU needed).

    ``launch__*`` are launch attributes, not hardware metrics, and are not listed.
    """
    out = subprocess.run(["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True,
                         text=True, timeout=120).stdout
    known = {line.split()[0] for line in out.splitlines() if line.strip() and "__" in line.split()[0]}
    ours = {m.name.split(".")[0] for m in ALL_METRICS if not m.name.startswith("launch__")}
    missing = sorted(ours - known)
    assert not missing, f"unknown to this ncu: {missing}"


# -- parsing ------------------------------------------------------------------------------
def test_raw_page_with_prof_lines_units_row_and_thousands_separators():
    ks = parse_ncu_csv((DATA / "ncu_raw_synthetic.csv").read_text())
    assert [k.id for k in ks] == [0, 1]
    k = ks[0]
    assert k.name.startswith("kernel_cutlass_add_kernel")
    assert k.metrics["gpu__time_duration.sum"] == 41216
    assert k.metrics["dram__bytes_read.sum"] == 67108864
    assert k.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(35.62)
    assert k.units["dram__bytes_read.sum"] == "byte"
    assert "Block Size" not in k.metrics


def test_details_page():
    (k,) = parse_ncu_csv((DATA / "ncu_details_synthetic.csv").read_text())
    assert k.name == "kernel_cutlass_gemm_kernel_0"
    assert k.metrics["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"] == pytest.approx(41.7)
    assert k.units["gpu__time_duration.sum"] == "msecond"


def test_real_h200_raw_page_has_every_requested_metric():
    # recorded on the H200 (tests/data/profilers/record_h200.sh, ncu 2025.3.1): every metric
    # of every set was accepted and comes back, parsed with its unit
    (k,) = parse_ncu_csv((DATA / "ncu_raw_h200.csv").read_text())
    assert k.name.startswith("kernel_cutlass_add_kernel")
    assert not [m.name for m in ALL_METRICS if m.name not in k.metrics]
    assert k.metrics["gpu__time_duration.sum"] == 45312 and k.units["gpu__time_duration.sum"] == "ns"
    assert k.metrics["launch__grid_size"] == 32768  # thousands separator "32,768"
    fs = {f.key: f for f in ncu_findings((k,), MEMORY)}
    assert fs["hint.dram"].value == pytest.approx(83.38)
    assert fs["ncu.load_sectors_per_request"].value == 16.0  # 128-bit loads: 4 sectors x 4
    assert "hint.coalescing" not in fs and "hint.occupancy" not in fs
    # its top stall is long scoreboard (216 per issue), normal at 83% of DRAM: no stall hint
    # (it used to say "pipeline loads", which the rewriter turned into bigger per-thread tiles)
    assert "hint.stall" not in fs


def test_real_h200_details_page():
    (k,) = parse_ncu_csv((DATA / "ncu_details_h200.csv").read_text())
    assert k.metrics["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(83.38)
    assert k.metrics["dram__bytes_read.sum"] == 134224640


@pytest.mark.parametrize("text", ["", "==PROF== Connected\nhello\n", '"ID","Kernel Name"\n', "\x00\x01garbage"])
def test_no_table_gives_nothing(text):
    assert parse_ncu_csv(text) == ()


def test_findings_and_hints_for_the_memory_bound_kernel():
    fs = {f.key: f for f in ncu_findings(parse_ncu_csv((DATA / "ncu_raw_synthetic.csv").read_text()), MEMORY)}
    assert fs["ncu.kernels"].value == 2
    assert fs["ncu.kernel"].value.startswith("kernel_cutlass_add")  # the longer launch
    assert fs["ncu.load_sectors_per_request"].value == 16.0
    assert fs["hint.coalescing"].value == 25
    assert fs["ncu.achieved_occupancy"].value == pytest.approx(0.224)
    assert fs["hint.occupancy"].value == "warps"  # limited by warps (16 blocks): the value
    assert "warps" in fs["hint.occupancy"].summary
    assert fs["hint.stall"].value == "long_scoreboard"
    assert "hint.dram" not in fs and "hint.tensor_cores" not in fs
    assert fs["dram__throughput.avg.pct_of_peak_sustained_elapsed"].summary == "DRAM throughput: 35.62%"


def test_hints_for_the_compute_bound_gemm():
    fs = {f.key: f for f in ncu_findings(parse_ncu_csv((DATA / "ncu_details_synthetic.csv").read_text()), COMPUTE)}
    assert fs["hint.tensor_pipe"].value == pytest.approx(41.7)
    assert fs["hint.stall"].value == "barrier"
    assert "hint.occupancy" not in fs  # low occupancy is normal for a compute-bound GEMM


def test_rejected_metrics_and_failure_messages():
    run = ToolRun(("ncu",), 1, "", "==ERROR== Failed to find metric sm__pipe_fma_cycles_active\n", 0.1)
    assert rejected_metrics(run, [m.name for m in ALL_METRICS]) == {
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"}
    perm = ToolRun(("ncu",), 1, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "", 0.1)
    assert "permission" in explain_failure(perm, "kernel_cutlass")
    none = ToolRun(("ncu",), 0, "==WARNING== No kernels were profiled.", "", 0.1)
    assert "regex:kernel_cutlass" in explain_failure(none, "kernel_cutlass")


# -- the profile flow against a fake ncu ---------------------------------------------------
FAKE_NCU = r'''
import json, os, sys, time
argv = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as f:
    f.write(json.dumps(argv) + "\n")
mode = os.environ.get("FAKE_NCU_MODE", "ok")
if "--import" in argv:
    sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read()); sys.exit(0)
if mode == "hang":
    time.sleep(600)
if mode == "noperm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission"); sys.exit(1)
metrics = argv[argv.index("--metrics") + 1]
if mode == "reject" and "sm__pipe_fma_cycles_active" in metrics:
    print("==ERROR== Failed to find metric sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active")
    sys.exit(1)
if mode == "nokernels":
    print("==WARNING== No kernels were profiled."); sys.exit(0)
open(argv[argv.index("--export") + 1] + ".ncu-rep", "w").write("fake report")
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    exe.write_text(f"#!{sys.executable}\n{FAKE_NCU}")
    exe.chmod(0o755)
    log = tmp_path / "ncu_calls.jsonl"
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(DATA / "ncu_raw_synthetic.csv"))
    return exe, log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_profile_runs_ncu_with_the_metric_set_and_reads_the_report_back(fake_ncu, tmp_path):
    exe, log = fake_ncu
    target = make_target(tmp_path / "w", launch_code="pass", bottleneck=MEMORY)
    target.workdir.mkdir()
    r = NcuProfiler(binary=str(exe)).profile(target, timeout_s=60)
    assert r.status is Status.OK, r.error
    assert r.artifact == target.workdir / "ncu.ncu-rep"
    assert r.get("hint.coalescing") == 25
    profile, imp = _calls(log)
    assert profile[:4] == ["--clock-control", "none", "--target-processes", "all"]
    assert profile[profile.index("--kernel-name") + 1] == "regex:kernel_cutlass"
    assert profile[profile.index("--metrics") + 1].split(",") == list(metrics_for(BottleneckKind.MEMORY))
    assert profile[-3:] == list(target.launch_argv)
    assert imp[:2] == ["--import", str(target.workdir / "ncu.ncu-rep")] and "raw" in imp
    assert (target.workdir / "ncu.csv").read_text() == (DATA / "ncu_raw_synthetic.csv").read_text()


def test_profile_retries_without_metrics_ncu_rejects(fake_ncu, tmp_path, monkeypatch):
    exe, log = fake_ncu
    monkeypatch.setenv("FAKE_NCU_MODE", "reject")
    target = make_target(tmp_path / "w", launch_code="pass", bottleneck=COMPUTE)
    target.workdir.mkdir()
    r = NcuProfiler(binary=str(exe)).profile(target, timeout_s=60)
    assert r.status is Status.OK and "sm__pipe_fma_cycles_active" in (r.error or "")
    assert len(_calls(log)) == 3


@pytest.mark.parametrize("mode, status, words", [
    ("noperm", Status.FAILED, "permission"),
    ("nokernels", Status.FAILED, "no kernel matching"),
    ("hang", Status.TIMEOUT, "timed out"),
])
def test_profile_failures_become_reports(fake_ncu, tmp_path, monkeypatch, mode, status, words):
    exe, _ = fake_ncu
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    target = make_target(tmp_path / "w", launch_code="pass", bottleneck=MEMORY)
    target.workdir.mkdir()
    r = NcuProfiler(binary=str(exe)).profile(target, timeout_s=2 if mode == "hang" else 60)
    assert r.status is status and words in (r.error or "")


def test_profile_without_ncu_or_launcher_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setattr("cutegen.profilers.ncu.find_tool", lambda *a, **k: None)
    r = NcuProfiler().profile(make_target(tmp_path, launch_code="pass"), timeout_s=5)
    assert r.status is Status.UNAVAILABLE and "not found" in (r.error or "")
    assert not NcuProfiler().is_available()
    r2 = NcuProfiler(binary="/bin/true").profile(make_target(tmp_path), timeout_s=5)
    assert r2.status is Status.UNAVAILABLE and "launcher" in (r2.error or "")
