"""The plugin's own tests: cutegen's contract suite, plus the parser on sample outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from cutegen.plugins.testing import ProfilerContract
from cutegen_sanitizer import (
    SANITIZER_ARGS,
    SanitizerProfiler,
    findings,
    parse_sanitizer_output,
)

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


#: memcheck of a CuTe DSL softmax on an H200 (CUDA driver 580.159.04, 2026-11-30), host frames
#: trimmed to one per error: 20 printed errors, all cuda-python's cuGetProcAddress probes
#: failing on the host, and 14 more not printed. The first version of this plugin called
#: the kernel unsafe from it.
API_PROBES = (Path(__file__).parent / "data" / "memcheck_cute_api_probe_h200.txt").read_text()


def test_failed_host_api_calls_are_not_kernel_errors():
    r = parse_sanitizer_output(API_PROBES, "memcheck")
    assert r is not None and r.api_errors == 20
    assert r.first == ""  # no kernel error line to blame
    # the summary's "34 errors", not its "14 errors were not printed" line, less the 20 probes
    assert r.errors == 14
    hint = [f for f in findings([r]) if f.key == "hint.memory_safety"]
    assert hint and "did not print" in hint[0].summary
    assert "out-of-bounds" not in hint[0].summary
    api = [f for f in findings([r]) if f.key == "sanitizer.memcheck.api_errors"]
    assert api and api[0].value == 20


def test_api_errors_beside_a_kernel_error_keep_the_kernel_error_first():
    text = API_PROBES.replace("========= ERROR SUMMARY: 34 errors",
                              MEMCHECK_ERRORS.split("\n", 1)[1].replace(
                                  "ERROR SUMMARY: 3 errors", "ERROR SUMMARY: 23 errors"))
    text = text.replace("========= ERROR SUMMARY: 14 errors were not printed", "")
    r = parse_sanitizer_output(text, "memcheck")
    assert r is not None and r.api_errors == 20 and r.errors == 3
    assert r.first.startswith("Invalid __global__ write")


def test_host_api_errors_are_not_requested():
    assert ("--report-api-errors", "no") == SANITIZER_ARGS[:2]
