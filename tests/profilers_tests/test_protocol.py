"""The launcher protocol's result line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cutegen.profilers.protocol import LaunchResult, format_launch_result, parse_launch_result


@given(calls=st.integers(1, 10**6), warmup=st.integers(0, 100), t0=st.integers(0, 2**62),
       dt=st.integers(1, 10**12), energy=st.none() | st.tuples(st.floats(0, 1e9), st.floats(0, 1e9)),
       device=st.text(max_size=20).filter(lambda s: "\n" not in s and "\r" not in s))
def test_round_trip(calls, warmup, t0, dt, energy, device):
    r = LaunchResult(calls, warmup, t0, t0 + dt, energy, device)
    out = "some output\n" + format_launch_result(r) + "\ntrailing line\n"
    assert parse_launch_result(out) == r


def test_last_good_line_wins_and_garbage_is_ignored():
    out = ("CUTEGEN_LAUNCH_RESULT {\"calls\": 3}\n"
           "CUTEGEN_LAUNCH_RESULT {\"calls\": 7, \"t0_ns\": 1, \"t1_ns\": 3000000001}\n"
           "CUTEGEN_LAUNCH_RESULT {not json\n"
           "CUTEGEN_LAUNCH_RESULT {\"calls\": 0}\n")
    r = parse_launch_result(out)
    assert r is not None and r.calls == 7 and r.seconds == 3.0


def test_no_line():
    assert parse_launch_result("hello\n") is None
    assert parse_launch_result("CUTEGEN_LAUNCH_RESULT []") is None
