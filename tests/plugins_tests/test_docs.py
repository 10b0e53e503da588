"""Documentation tests: the plugin-author page covers every hook, status and contract member."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from cutegen.plugins import hookspecs
from cutegen.profilers import Profiler, ProfileReport, ProfileTarget, Status

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "writing-a-profiler-plugin.md").read_text()


def _hookspecs() -> list[str]:
    return [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction)
            if hasattr(fn, f"{hookspecs.PROJECT}_spec")]


def test_there_are_hookspecs():
    assert set(_hookspecs()) >= {"register_profilers", "register_commands"}


@pytest.mark.parametrize("name", _hookspecs())
def test_every_hookspec_has_a_section(name):
    params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
    assert f"### `{name}({params})`" in PAGE, f"docs/writing-a-profiler-plugin.md lacks a section for {name}"


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_every_status_is_documented(status):
    assert f"| `{status}` |" in PAGE


@pytest.mark.parametrize("member", ["name", "is_available", "applies_to", "profile"])
def test_every_profiler_member_is_documented(member):
    assert hasattr(Profiler, member) or member in Profiler.__annotations__
    assert f"`{member}" in PAGE


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(ProfileTarget)])
def test_every_target_field_is_documented(field):
    assert f"`{field}`" in PAGE


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(ProfileReport)])
def test_every_report_field_is_documented(field):
    assert field in PAGE


def _builtin_hint_keys() -> set[str]:
    import re

    src = Path(__file__).resolve().parents[2] / "profilers"
    return {m for f in src.glob("*.py") for m in re.findall(r'Finding\("(hint\.[a-z_]+)"', f.read_text())}


def test_builtins_emit_hints():
    assert {"hint.vector_width", "hint.stall", "hint.fuse_kernels"} <= _builtin_hint_keys()


@pytest.mark.parametrize("key", sorted(_builtin_hint_keys()))
def test_every_builtin_hint_is_documented(key):
    from cutegen.profilers import hints

    assert f"`{key}`" in PAGE
    assert f"``{key}``" in (hints.__doc__ or "")
