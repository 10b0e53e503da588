"""Packaging: the built-in profilers are registered through the `cutegen` entry-point group.

Fails on a stale editable install (re-run `pip install -e .`) or a broken pyproject.toml.
"""

from __future__ import annotations

import importlib.metadata

import pytest

from cutegen.plugins import available_profilers, get_plugin_manager
from cutegen.profilers import Profiler

BUILTINS = ("sass", "ncu", "nsys", "energy")


def test_entry_points_contain_the_builtins():
    eps = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="cutegen")}
    for name in BUILTINS:
        assert eps.get(name) == f"cutegen.profilers.{name}", f"entry point {name!r} missing or wrong"


@pytest.mark.parametrize("name", BUILTINS)
def test_each_builtin_registers_one_profiler_of_its_name(name):
    (ep,) = [ep for ep in importlib.metadata.entry_points(group="cutegen") if ep.name == name]
    profilers = ep.load().register_profilers()
    assert [p.name for p in profilers] == [name]
    assert isinstance(profilers[0], Profiler)


def test_the_default_manager_loads_the_builtins(monkeypatch):
    monkeypatch.delenv("CUTEGEN_DISABLE_PLUGINS", raising=False)
    get_plugin_manager.cache_clear()
    try:
        assert set(BUILTINS) <= set(available_profilers(get_plugin_manager()))
    finally:
        get_plugin_manager.cache_clear()
