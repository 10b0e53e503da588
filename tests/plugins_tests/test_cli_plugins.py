"""`cutegen plugins`: JSON and text listings, blocking, help."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from cutegen.cli import plugins as cli_plugins
from cutegen.plugins import get_plugin_manager


@pytest.fixture
def cli(monkeypatch):
    monkeypatch.delenv("CUTEGEN_DISABLE_PLUGINS", raising=False)
    get_plugin_manager.cache_clear()
    group = click.Group("cutegen")
    cli_plugins.register(group)
    yield group
    get_plugin_manager.cache_clear()


def test_json_lists_the_builtins_with_versions_hooks_and_availability(cli):
    result = CliRunner().invoke(cli, ["plugins", "--json"], catch_exceptions=False)
    assert result.exit_code == 0
    data = {p["name"]: p for p in json.loads(result.output)}
    assert {"sass", "ncu", "nsys", "energy"} <= set(data)
    assert data["sass"]["hooks"] == ["register_profilers"]
    assert data["sass"]["profilers"] == [{"name": "sass", "available": True, "error": None}]
    assert data["sass"]["version"] and data["sass"]["distribution"] == "cutegen"


def test_text_listing_and_blocking(cli, monkeypatch):
    monkeypatch.setenv("CUTEGEN_DISABLE_PLUGINS", "nsys")
    result = CliRunner().invoke(cli, ["plugins", "--disable-profilers", "energy"], catch_exceptions=False)
    assert result.exit_code == 0
    assert "profiler sass: available" in result.output
    assert "nsys" in result.output and "energy" in result.output
    assert [line for line in result.output.splitlines() if line.endswith("blocked")] != []


def test_profilers_option_with_unknown_name(cli):
    from cutegen.errors import ConfigError

    with pytest.raises(ConfigError):
        CliRunner().invoke(cli, ["plugins", "--profilers", "nosuch"], catch_exceptions=False)


def test_commands_have_help(cli):
    for name, command in cli.commands.items():
        assert command.help, f"command {name!r} has no help"
