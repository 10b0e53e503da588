"""A contract test suite for profilers, to subclass in a plugin's own tests (needs pytest).

Like Optuna's ``StorageTestCase``: subclass :class:`ProfilerContract`, provide a
``profiler`` fixture, and pytest runs every contract test against it::

    import pytest
    from cutegen.plugins.testing import ProfilerContract
    from my_plugin import MyProfiler

    class TestMyProfiler(ProfilerContract):
        @pytest.fixture
        def profiler(self):
            return MyProfiler()

The tests need no GPU and no tool: they check what must hold everywhere (a name, the
Protocol, ``applies_to`` answers for every class, reports that round-trip, no exception
for a missing input, a failing launcher or a hung one, the timeout kept). Override
``slack_s`` if your profiler needs more clean-up time after a timeout.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from cutegen.profilers import (
    Bottleneck,
    BottleneckKind,
    Finding,
    Profiler,
    ProfileReport,
    ProfileTarget,
    Status,
)


def make_target(workdir: Path, *, launch_code: str | None = None, time_us: float = 50.0,
                **kw: object) -> ProfileTarget:
    """A :class:`ProfileTarget` for tests.

    Args:
        workdir: an existing folder (``tmp_path``).
        launch_code: Python source the "launcher" runs (``python -c``); None for no launcher.
        time_us: the median time recorded in the target's Evaluation.
        **kw: further ProfileTarget fields (``cubin_path=...``).
    """
    from cutegen.codegen.evaluation import Evaluation, Roofline, Stage, Timing, Verdict

    evaluation = Evaluation(
        candidate_sha256="0" * 64, task_sha256="1" * 64, stage=Stage.BENCHMARK,
        verdict=Verdict.CORRECT, timing=Timing.from_samples([time_us] * 30),
        roofline=Roofline(bytes_moved=1 << 26, flops=1 << 24, bound_us=time_us * 0.5,
                          kind="memory", bandwidth_gbs=4300.0, peak_tflops=790.0),
        kernels=("kernel_cutlass_test_0",),
    )
    argv = (sys.executable, "-c", launch_code) if launch_code is not None else ()
    return ProfileTarget(candidate_id="test", workdir=workdir, launch_argv=argv,
                         evaluation=evaluation, **kw)  # type: ignore[arg-type]


ALL_BOTTLENECKS = (
    Bottleneck(BottleneckKind.MEMORY, "memory", 0.8, 100.0, 1, "memory-bound"),
    Bottleneck(BottleneckKind.COMPUTE, "compute", 0.6, 900.0, 1, "compute-bound"),
    Bottleneck(BottleneckKind.LATENCY, "memory", 0.05, 4.0, 3, "latency-bound"),
    Bottleneck(BottleneckKind.UNKNOWN, None, None, None, 0, "not timed"),
)


class ProfilerContract:
    """Contract tests every profiler must pass. Subclass and provide ``profiler``."""

    #: How long after ``timeout_s`` a profiler may take to clean up and return.
    slack_s: float = 10.0
    #: The timeout used by the hang test.
    hang_timeout_s: float = 2.0

    @pytest.fixture
    def profiler(self) -> Profiler:
        raise NotImplementedError("subclass ProfilerContract and provide a `profiler` fixture")

    def _profile(self, profiler: Profiler, target: ProfileTarget, timeout_s: float) -> ProfileReport:
        target.workdir.mkdir(parents=True, exist_ok=True)
        report = profiler.profile(target, timeout_s=timeout_s)
        self.check_report(profiler, report)
        return report

    @staticmethod
    def check_report(profiler: Profiler, report: ProfileReport) -> None:
        """Assert that a report is well formed (usable from a plugin's own tests too)."""
        assert isinstance(report, ProfileReport)
        assert report.profiler == profiler.name
        assert isinstance(report.status, Status)
        assert report.seconds >= 0.0
        for f in report.findings:
            assert isinstance(f, Finding)
        if report.status is not Status.OK:
            assert report.error, "a report that is not ok must say why in `error`"
        if report.error is not None:
            assert "\n" not in report.error, "error must be one line"
        assert ProfileReport.from_dict(report.to_dict()) == report

    def test_satisfies_the_protocol(self, profiler: Profiler) -> None:
        assert isinstance(profiler, Profiler)

    def test_name_is_a_nonempty_word(self, profiler: Profiler) -> None:
        assert isinstance(profiler.name, str) and profiler.name
        assert not any(c.isspace() for c in profiler.name)

    def test_is_available_is_a_bool_and_does_not_raise(self, profiler: Profiler) -> None:
        assert isinstance(profiler.is_available(), bool)

    @pytest.mark.parametrize("bottleneck", ALL_BOTTLENECKS, ids=lambda b: b.kind.value)
    def test_applies_to_answers_for_every_class(self, profiler: Profiler, bottleneck: Bottleneck) -> None:
        assert isinstance(profiler.applies_to(bottleneck), bool)

    def test_no_inputs_gives_a_report_not_an_exception(self, profiler: Profiler, tmp_path: Path) -> None:
        report = self._profile(profiler, make_target(tmp_path / "w"), timeout_s=30)
        assert report.status in (Status.UNAVAILABLE, Status.FAILED, Status.OK)

    def test_failing_launcher_gives_a_report(self, profiler: Profiler, tmp_path: Path) -> None:
        target = make_target(tmp_path / "w", launch_code="import sys; sys.exit(3)",
                             bottleneck=ALL_BOTTLENECKS[0])
        report = self._profile(profiler, target, timeout_s=60)
        assert report.status in (Status.UNAVAILABLE, Status.FAILED, Status.OK)

    def test_launcher_printing_nonsense_gives_a_report(self, profiler: Profiler, tmp_path: Path) -> None:
        code = "print('CUTEGEN_LAUNCH_RESULT {not json'); print('==PROF== garbage,\"x\"')"
        target = make_target(tmp_path / "w", launch_code=code, bottleneck=ALL_BOTTLENECKS[0])
        report = self._profile(profiler, target, timeout_s=60)
        assert report.status in (Status.UNAVAILABLE, Status.FAILED, Status.OK)

    def test_hung_launcher_is_killed_within_the_timeout(self, profiler: Profiler, tmp_path: Path) -> None:
        target = make_target(tmp_path / "w", launch_code="import time; time.sleep(600)",
                             bottleneck=ALL_BOTTLENECKS[0])
        t0 = time.monotonic()
        report = self._profile(profiler, target, timeout_s=self.hang_timeout_s)
        assert time.monotonic() - t0 < self.hang_timeout_s + self.slack_s
        assert report.status in (Status.TIMEOUT, Status.UNAVAILABLE, Status.FAILED, Status.OK)
