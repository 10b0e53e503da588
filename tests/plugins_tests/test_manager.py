"""The plugin manager: discovery through (fake) distributions, blocking, validation, listing."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from pathlib import Path

import click
import pytest

import cutegen.profilers.sass
from cutegen.errors import ConfigError, PluginError
from cutegen.plugins import (
    DISABLE_ENV_VAR,
    add_plugin_commands,
    available_profilers,
    get_plugin_manager,
    hookimpl,
    parse_names,
    plugin_info,
)
from cutegen.profilers import Status


@pytest.fixture(autouse=True)
def fresh_manager(monkeypatch):
    monkeypatch.delenv(DISABLE_ENV_VAR, raising=False)
    get_plugin_manager.cache_clear()
    yield
    get_plugin_manager.cache_clear()


class FakeDistribution(importlib.metadata.Distribution):
    """A distribution that exists only in memory (pluggy's own tests use the same trick)."""

    def __init__(self, name: str, entry_points: dict[str, str], version: str = "9.9") -> None:
        self._name, self._eps, self._version = name, entry_points, version

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {self._name}\nVersion: {self._version}\n"
        if filename == "entry_points.txt":
            return "[cutegen]\n" + "".join(f"{k} = {v}\n" for k, v in self._eps.items())
        return None

    def locate_file(self, path: str | Path) -> Path:
        return Path("/nonexistent") / path


class Dummy:
    """A minimal profiler."""

    def __init__(self, name: str = "dummy", available: bool = True) -> None:
        self.name, self._available = name, available

    def is_available(self) -> bool:
        return self._available

    def applies_to(self, bottleneck) -> bool:
        return True

    def profile(self, target, *, timeout_s):
        from cutegen.profilers import ProfileReport

        return ProfileReport(self.name, Status.OK)


def module(name: str, **attrs: object) -> types.ModuleType:
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    return mod


def install(monkeypatch, *plugins: tuple[str, types.ModuleType | None], version: str = "9.9") -> None:
    """Make ``importlib.metadata`` see one fake distribution with these entry points only."""
    eps = {}
    for ep_name, mod in plugins:
        modname = f"cutegen_test_plugin_{ep_name}"
        if mod is not None:
            monkeypatch.setitem(sys.modules, modname, mod)
        eps[ep_name] = modname
    dist = FakeDistribution("cutegen-test-plugins", eps, version)
    monkeypatch.setattr(importlib.metadata, "distributions", lambda **kw: iter([dist]))


def profilers_hook(*profs: object):
    @hookimpl
    def register_profilers():
        return list(profs)

    return register_profilers


# -- discovery ------------------------------------------------------------------------------
def test_entry_point_plugins_are_loaded_and_listed_with_their_version(monkeypatch):
    install(monkeypatch, ("dummy", module("m", register_profilers=profilers_hook(Dummy()))))
    pm = get_plugin_manager()
    assert list(available_profilers(pm)) == ["dummy"]
    (info,) = plugin_info(pm)
    assert (info.name, info.version, info.distribution) == ("dummy", "9.9", "cutegen-test-plugins")
    assert info.hooks == ("register_profilers",) and info.profilers[0].available
    assert info.to_dict()["profilers"] == [{"name": "dummy", "available": True, "error": None}]


def test_bare_manager_and_registering_a_builtin_by_hand():
    pm = get_plugin_manager(load_entry_points=False)
    assert available_profilers(pm) == {}
    pm.register(cutegen.profilers.sass, name="sass")
    try:
        assert list(available_profilers(pm)) == ["sass"]
    finally:
        pm.unregister(cutegen.profilers.sass)


def test_the_manager_is_cached_per_arguments():
    assert get_plugin_manager() is get_plugin_manager()
    assert get_plugin_manager(disabled=frozenset({"nsys"})) is not get_plugin_manager()


# -- blocking ---------------------------------------------------------------------------------
def _three(monkeypatch):
    install(monkeypatch, *[(n, module(n, register_profilers=profilers_hook(Dummy(n))))
                           for n in ("alpha", "beta", "gamma")])


def test_env_var_blocks_plugins(monkeypatch):
    _three(monkeypatch)
    monkeypatch.setenv(DISABLE_ENV_VAR, " beta , gamma,")
    pm = get_plugin_manager()
    assert list(available_profilers(pm)) == ["alpha"]
    assert [(i.name, i.blocked) for i in plugin_info(pm)] == [("alpha", False), ("beta", True), ("gamma", True)]


def test_only_and_disabled(monkeypatch):
    _three(monkeypatch)
    assert list(available_profilers(get_plugin_manager(only=frozenset({"beta"})))) == ["beta"]
    assert list(available_profilers(get_plugin_manager(disabled=frozenset({"alpha"})))) == ["beta", "gamma"]
    assert list(available_profilers(get_plugin_manager(disabled=frozenset({"not-installed"})))) == [
        "alpha", "beta", "gamma"]


def test_only_with_an_unknown_name_is_a_config_error(monkeypatch):
    _three(monkeypatch)
    with pytest.raises(ConfigError, match="delta"):
        get_plugin_manager(only=frozenset({"alpha", "delta"}))


def test_parse_names():
    assert parse_names(None) == frozenset()
    assert parse_names(" a, b ,,") == {"a", "b"}
    assert parse_names(["x", " "]) == {"x"}


# -- validation ------------------------------------------------------------------------------
def test_duplicate_profiler_names_name_both_plugins(monkeypatch):
    install(monkeypatch, ("one", module("one", register_profilers=profilers_hook(Dummy("same")))),
            ("two", module("two", register_profilers=profilers_hook(Dummy("same")))))
    with pytest.raises(PluginError, match="same.*one.*two|same.*two.*one"):
        available_profilers(get_plugin_manager())


@pytest.mark.parametrize("returned", [[object()], [Dummy("has space")], 42])
def test_things_that_are_not_profilers_are_refused(monkeypatch, returned):
    @hookimpl
    def register_profilers():
        return returned

    install(monkeypatch, ("odd", module("odd", register_profilers=register_profilers)))
    with pytest.raises(PluginError, match="odd"):
        available_profilers(get_plugin_manager())


def test_misspelled_hook_fails_loudly(monkeypatch):
    @hookimpl
    def register_profiler():  # missing "s"
        return []

    install(monkeypatch, ("typo", module("typo", register_profiler=register_profiler)))
    with pytest.raises(PluginError, match="typo"):
        get_plugin_manager()


def test_hook_with_unknown_arguments_is_refused(monkeypatch):
    @hookimpl
    def register_commands(cli, verbose):
        pass

    install(monkeypatch, ("args", module("args", register_commands=register_commands)))
    with pytest.raises(PluginError, match="args"):
        get_plugin_manager()


def test_plugin_that_fails_to_import_says_how_to_disable_it(monkeypatch):
    install(monkeypatch, ("broken", None))  # the module does not exist
    with pytest.raises(PluginError, match=f"{DISABLE_ENV_VAR}=broken"):
        get_plugin_manager()
    monkeypatch.setenv(DISABLE_ENV_VAR, "broken")
    assert available_profilers(get_plugin_manager()) == {}


def test_is_available_that_raises_is_shown_not_propagated(monkeypatch):
    class Flaky(Dummy):
        def is_available(self):
            raise RuntimeError("driver?")

    install(monkeypatch, ("flaky", module("flaky", register_profilers=profilers_hook(Flaky("flaky")))))
    (info,) = plugin_info(get_plugin_manager())
    assert not info.profilers[0].available and "driver?" in (info.profilers[0].error or "")


# -- commands ----------------------------------------------------------------------------------
def test_plugins_add_commands(monkeypatch):
    @hookimpl
    def register_commands(cli):
        @cli.command("hello")
        def hello():
            """Say hello."""
            click.echo("hello from a plugin")

    install(monkeypatch, ("greeter", module("greeter", register_commands=register_commands)))
    group = click.Group("cutegen")
    add_plugin_commands(group)
    assert "hello" in group.commands
