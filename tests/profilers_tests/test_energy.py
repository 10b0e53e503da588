"""The energy profiler: the objective, pure energy arithmetic, and the profile flow against a
fake launcher and a fake energy counter (the NVML one is a gpu test)."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutegen.plugins.testing import ProfilerContract, make_target
from cutegen.profilers import Bottleneck, BottleneckKind, Status
from cutegen.profilers.energy import (
    EnergyProfiler,
    choose_calls,
    energy_findings,
    energy_from_samples,
    nvml_energy_reader,
    objective_value,
    prefer,
)

MEASURED = Bottleneck(BottleneckKind.MEMORY, "memory", 0.8, 100.0, 1)


class TestEnergyContract(ProfilerContract):
    @pytest.fixture
    def profiler(self) -> EnergyProfiler:
        return EnergyProfiler(reader=itertools.count(0, 5).__next__, target_seconds=0.01)


def test_objective_values():
    assert objective_value(10.0, None, "time") == 10.0
    assert objective_value(10.0, 0.002, "energy") == 0.002
    assert objective_value(10.0, 0.002, "edp") == pytest.approx(0.02)
    with pytest.raises(ValueError):
        objective_value(10.0, None, "energy")
    with pytest.raises(ValueError):
        objective_value(10.0, 1.0, "joules")  # type: ignore[arg-type]


def test_prefer_energy_at_matched_speed():
    assert prefer((100.0, 0.5), (101.0, 0.4)) == 1       # within 2%: less energy wins
    assert prefer((100.0, 0.5), (110.0, 0.1)) == -1      # clearly faster wins
    assert prefer((100.0, None), (100.5, 0.1)) == 0      # unknown energy: a tie
    assert prefer((100.0, 0.3), (100.0, 0.3)) == 0


@given(st.floats(0.1, 1e6), st.floats(0.01, 10))
def test_choose_calls_is_bounded_and_reaches_the_target(time_us, target_s):
    n = choose_calls(time_us, target_seconds=target_s, min_calls=20, max_calls=200_000)
    assert 20 <= n <= 200_000
    if 20 < n < 200_000:
        assert n * time_us >= target_s * 1e6


def test_energy_from_samples_interpolates():
    samples = [(0, 1000.0), (1_000_000_000, 2000.0), (2_000_000_000, 4000.0)]
    assert energy_from_samples(samples, 500_000_000, 1_500_000_000) == pytest.approx(1.5)
    assert energy_from_samples(samples, 0, 2_000_000_000) == pytest.approx(3.0)
    assert energy_from_samples(samples, -1, 10) is None             # not covered
    assert energy_from_samples([(0, 5.0), (10, 5.0)], 1, 9) is None  # did not advance
    assert energy_from_samples(samples[:1], 0, 1) is None


def test_energy_findings():
    fs = {f.key: f.value for f in energy_findings(2.0, calls=1000, seconds=0.5, source="launcher")}
    assert fs["energy.j_per_call"] == pytest.approx(0.002)
    assert fs["energy.avg_power_w"] == 4.0 and fs["energy.loop_us_per_call"] == 500.0


LAUNCHER = """
import json, os, time
n = int(os.environ["CUTEGEN_LAUNCH_REPEAT"]); assert os.environ["CUTEGEN_LAUNCH_ENERGY"] == "1"
t0 = time.monotonic_ns(); time.sleep(0.3); t1 = time.monotonic_ns()
energy = {energy}
print("noise"); print("CUTEGEN_LAUNCH_RESULT " + json.dumps({{"calls": n, "warmup": 5, "t0_ns": t0,
      "t1_ns": t1, "energy_mj": energy, "device": "fake"}}))
"""


def test_profile_uses_the_launchers_energy_readings(tmp_path):
    target = make_target(tmp_path, launch_code=LAUNCHER.format(energy="[1000.0, 1500.0]"),
                         bottleneck=MEASURED, time_us=100.0)
    r = EnergyProfiler(reader=lambda: 0.0, target_seconds=0.1).profile(target, timeout_s=30)
    assert r.status is Status.OK, r.error
    assert r.get("energy.calls") == 1000 and r.get("energy.source") == "launcher"
    assert r.get("energy.j_per_call") == pytest.approx(0.5 / 1000)


def test_profile_falls_back_to_its_own_samples(tmp_path):
    start = time.monotonic_ns()
    counter = lambda: (time.monotonic_ns() - start) / 1e6  # noqa: E731  1 W: 1 mJ per ms
    target = make_target(tmp_path, launch_code=LAUNCHER.format(energy="None"), bottleneck=MEASURED)
    r = EnergyProfiler(reader=counter, poll_s=0.005).profile(target, timeout_s=30)
    assert r.status is Status.OK, r.error
    assert r.get("energy.source") == "sampled"
    assert r.get("energy.avg_power_w") == pytest.approx(1.0, rel=0.2)


def test_launcher_without_the_protocol_fails_with_a_reason(tmp_path):
    r = EnergyProfiler(reader=lambda: 0.0).profile(make_target(tmp_path, launch_code="pass"), timeout_s=30)
    assert r.status is Status.FAILED and "CUTEGEN_LAUNCH_REPEAT" in (r.error or "")


@pytest.mark.gpu
def test_nvml_energy_counter_advances_on_this_gpu():
    read = nvml_energy_reader()
    a = read()
    time.sleep(0.5)
    assert read() >= a
