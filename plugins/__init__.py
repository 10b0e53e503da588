"""cutegen.plugins: how plugins are found, checked and listed.

Public API:

* :data:`hookimpl` / :data:`hookspec`: pluggy markers for the ``cutegen`` project;
  hooks are defined in :mod:`cutegen.plugins.hookspecs`.
* :func:`get_plugin_manager`: the cached manager, loaded from the ``cutegen`` entry points.
* :func:`available_profilers`: the loaded profilers by name.
* :func:`add_plugin_commands`: let plugins add ``cutegen`` subcommands.
* :func:`plugin_info`: what ``cutegen plugins`` prints.
* :mod:`cutegen.plugins.testing`: the contract test suite for profiler authors (needs pytest).
"""

from __future__ import annotations

from cutegen.plugins._manager import (
    DISABLE_ENV_VAR,
    ENTRY_POINT_GROUP,
    PluginInfo,
    ProfilerInfo,
    add_plugin_commands,
    available_profilers,
    get_plugin_manager,
    parse_names,
    plugin_info,
)
from cutegen.plugins.hookspecs import hookimpl, hookspec

__all__ = [
    "DISABLE_ENV_VAR",
    "ENTRY_POINT_GROUP",
    "PluginInfo",
    "ProfilerInfo",
    "add_plugin_commands",
    "available_profilers",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "parse_names",
    "plugin_info",
]
