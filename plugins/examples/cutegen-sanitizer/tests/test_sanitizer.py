"""The plugin's own tests: cutegen's contract suite, plus the parser on sample outputs."""

from __future__ import annotations

import pytest
from cutegen.plugins.testing import ProfilerContract
from cutegen_sanitizer import SanitizerProfiler, findings, parse_sanitizer_output

MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 16 bytes
=========     at kernel_cutlass_add_kernel_0+0x120
=========     by thread (127,0,0) in block (2047,0,0)
=========     Address 0x7f3a2c800000 is out of bounds
=========
========= ERROR SUMMARY: 3 errors
"""
RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""


class TestSanitizerContract(ProfilerContract):
    @pytest.fixture
    def profiler(self) -> SanitizerProfiler:
        return SanitizerProfiler()


def test_memcheck_errors_are_counted_with_the_first_one():
    r = parse_sanitizer_output(MEMCHECK_ERRORS, "memcheck")
    assert r is not None and r.errors == 3
    assert r.first.startswith("Invalid __global__ write of size 16 bytes")


def test_clean_racecheck_has_no_hint():
    r = parse_sanitizer_output(RACECHECK_CLEAN, "racecheck")
    assert r is not None and r.errors == 0
    assert not [f for f in findings([r]) if f.is_hint]


def test_errors_become_a_memory_safety_hint():
    r = parse_sanitizer_output(MEMCHECK_ERRORS, "memcheck")
    hint = [f for f in findings([r]) if f.key == "hint.memory_safety"]
    assert hint and hint[0].value == 3


def test_output_without_a_summary_is_none():
    assert parse_sanitizer_output("compute-sanitizer: command not found", "memcheck") is None
