"""Smoke tests of the GPU profilers against a real CuTe DSL kernel (run `pytest -m gpu` on the
GPU machine). The launcher is tests/profilers_tests/gpu_launcher.py, which speaks the
launcher protocol the way `python -m cutegen.codegen.launch` must."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cutegen.profilers import Bottleneck, BottleneckKind, ProfileTarget, Status, run_stage2
from cutegen.profilers.energy import EnergyProfiler
from cutegen.profilers.ncu import NcuProfiler
from cutegen.profilers.nsys import NsysProfiler

LAUNCHER = Path(__file__).resolve().with_name("gpu_launcher.py")


def target(tmp_path: Path, *extra: str, time_us: float = 60.0, kind=BottleneckKind.MEMORY) -> ProfileTarget:
    b = Bottleneck(kind, "memory", 0.7, time_us, 1, "smoke")
    return ProfileTarget("smoke", tmp_path, launch_argv=(sys.executable, str(LAUNCHER), *extra),
                         bottleneck=b)


@pytest.mark.gpu
@pytest.mark.tool("ncu")
def test_ncu_reads_counters_of_the_vectorized_add(tmp_path):
    r = NcuProfiler().profile(target(tmp_path), timeout_s=300)
    assert r.status is Status.OK, r.error
    assert str(r.get("ncu.kernel")).startswith("kernel_cutlass_add_kernel")
    assert (r.get("dram__throughput.avg.pct_of_peak_sustained_elapsed") or 0) > 50


@pytest.mark.gpu
@pytest.mark.tool("ncu")
def test_ncu_sees_wider_requests_in_the_vectorized_add(tmp_path):
    vec = NcuProfiler().profile(target(tmp_path / "v"), timeout_s=300)
    scalar = NcuProfiler().profile(target(tmp_path / "s", "--vec", "1"), timeout_s=300)
    assert vec.ok and scalar.ok, (vec.error, scalar.error)
    assert vec.get("ncu.load_sectors_per_request") > scalar.get("ncu.load_sectors_per_request")  # type: ignore[operator]


@pytest.mark.gpu
def test_nsys_or_its_torch_fallback_gives_a_timeline(tmp_path):
    t = target(tmp_path, kind=BottleneckKind.LATENCY)
    r = NsysProfiler(repeat=5).profile(t, timeout_s=300)
    assert r.status is Status.OK, r.error
    assert r.get("timeline.kernels_per_call") == 1
    assert r.get("timeline.source") in ("nsys", "torch.profiler")


@pytest.mark.gpu
def test_energy_per_call_is_positive(tmp_path):
    r = EnergyProfiler(target_seconds=1.0).profile(target(tmp_path), timeout_s=300)
    assert r.status is Status.OK, r.error
    assert r.get("energy.source") == "launcher"
    assert 0 < r.get("energy.j_per_call") < 1  # type: ignore[operator]
    assert 50 < r.get("energy.avg_power_w") < 1500  # type: ignore[operator]


@pytest.mark.gpu
def test_stage2_with_every_builtin(tmp_path):
    from cutegen.plugins import available_profilers, get_plugin_manager

    get_plugin_manager.cache_clear()
    reports, seconds = run_stage2(available_profilers(get_plugin_manager()), target(tmp_path),
                                  Bottleneck(BottleneckKind.LATENCY, "memory", 0.1, 60.0, 1, "smoke"),
                                  timeout_s=300, strict=True)
    by = {r.profiler: r for r in reports}
    assert by["ncu"].ok and by["energy"].ok and by["nsys"].ok, {k: v.error for k, v in by.items()}
    assert seconds >= sum(r.seconds for r in reports) * 0.99
