"""The example third-party plugin in plugins/examples/cutegen-sanitizer works with cutegen."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cutegen.plugins import add_plugin_commands, available_profilers, get_plugin_manager
from cutegen.plugins.testing import ProfilerContract

EXAMPLE = Path(__file__).resolve().parents[2] / "plugins" / "examples" / "cutegen-sanitizer"


@pytest.fixture
def sanitizer(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "cutegen_sanitizer", raising=False)
    import cutegen_sanitizer

    return cutegen_sanitizer


class TestExampleContract(ProfilerContract):
    @pytest.fixture
    def profiler(self, sanitizer):
        return sanitizer.SanitizerProfiler()


def test_example_declares_its_entry_point():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["cutegen"] == {"sanitizer": "cutegen_sanitizer"}


def test_example_registers_a_profiler_and_a_command(sanitizer, monkeypatch):
    get_plugin_manager.cache_clear()
    pm = get_plugin_manager(load_entry_points=False)
    pm.register(sanitizer, name="sanitizer")
    try:
        assert list(available_profilers(pm)) == ["sanitizer"]
        group = click.Group("cutegen")
        add_plugin_commands(group, pm)
        assert "sanitize" in group.commands
        monkeypatch.setattr(sanitizer.SanitizerProfiler, "_find", lambda self, path=None: None)
        result = CliRunner().invoke(group, ["sanitize", "--", "true"])
        assert result.exit_code == 1 and "compute-sanitizer not found" in result.output
    finally:
        pm.unregister(sanitizer)
        get_plugin_manager.cache_clear()


@pytest.mark.gpu
@pytest.mark.tool("compute-sanitizer")
def test_example_finds_no_error_in_the_vectorized_add(sanitizer, tmp_path):
    from cutegen.profilers import Bottleneck, BottleneckKind, ProfileTarget, Status

    launcher = Path(__file__).resolve().parents[1] / "profilers_tests" / "gpu_launcher.py"
    target = ProfileTarget("smoke", tmp_path, launch_argv=(sys.executable, str(launcher), "--n", "1048576"),
                           bottleneck=Bottleneck(BottleneckKind.MEMORY, "memory", 0.7, 10.0, 1))
    r = sanitizer.SanitizerProfiler().profile(target, timeout_s=600)
    assert r.status is Status.OK, r.error
    assert r.get("sanitizer.memcheck.errors") == 0 and r.get("sanitizer.racecheck.errors") == 0


@pytest.mark.slow
def test_example_installs_with_pip_and_cutegen_lists_it(tmp_path):
    # what a plugin user does: pip-install the package, then `cutegen plugins` finds it
    # through its entry point (no import of the example by path)
    import json
    import os
    import subprocess

    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(target), str(EXAMPLE)],
                         capture_output=True, text=True, timeout=600)
    if pip.returncode != 0 and "setuptools" in pip.stderr:
        pytest.skip(f"cannot build the example here: {pip.stderr[-300:]}")
    assert pip.returncode == 0, pip.stderr[-2000:]
    assert list(target.glob("cutegen_sanitizer-*.dist-info"))
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-m", "cutegen", "plugins", "--json"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {p["name"]: p for p in json.loads(out.stdout)}
    assert rows["sanitizer"]["distribution"] == "cutegen-sanitizer"
    assert [p["name"] for p in rows["sanitizer"]["profilers"]] == ["sanitizer"]
    assert "register_profilers" in rows["sanitizer"]["hooks"]
    # and the user can switch it off by environment variable
    off = subprocess.run([sys.executable, "-m", "cutegen", "plugins", "--json"],
                         env={**env, "CUTEGEN_DISABLE_PLUGINS": "sanitizer"},
                         capture_output=True, text=True, timeout=300)
    rows = {p["name"]: p for p in json.loads(off.stdout)}
    assert "sanitizer" not in rows or rows["sanitizer"]["blocked"]


def test_the_examples_own_tests_pass(tmp_path):
    """The plugin's tests (its parser on a recorded H200 memcheck log, the contract suite), run
    the way its author runs them: pytest in its folder with the module importable."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(EXAMPLE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(EXAMPLE), str(EXAMPLE / "tests")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
