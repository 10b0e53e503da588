"""Plugin discovery: one pluggy manager, loaded from the ``cutegen`` entry-point group.

The built-in profilers (``sass``, ``ncu``, ``nsys``, ``energy``) are registered exactly as
third-party plugins are: through entry points in the distribution's metadata. Nothing is
loaded at import time; :func:`get_plugin_manager` builds the manager on first use and
caches it per set of arguments (tests call ``get_plugin_manager.cache_clear()``).

Plugins are blocked by name (the entry-point name) with ``pm.set_blocked`` before
loading: from ``CUTEGEN_DISABLE_PLUGINS`` (comma list, read in :func:`get_plugin_manager`
only), from ``disabled`` (``--disable-profilers``) and, when ``only`` is given
(``--profilers``), every plugin not named in it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pluggy

from cutegen.errors import ConfigError, PluginError
from cutegen.plugins import hookspecs
from cutegen.profilers import Profiler

if TYPE_CHECKING:
    import click

ENTRY_POINT_GROUP = hookspecs.PROJECT
DISABLE_ENV_VAR = "CUTEGEN_DISABLE_PLUGINS"


def parse_names(text: str | Iterable[str] | None) -> frozenset[str]:
    """``"ncu, nsys"`` -> ``frozenset({"ncu", "nsys"})``; None or empty -> empty."""
    if text is None:
        return frozenset()
    parts = text.split(",") if isinstance(text, str) else text
    return frozenset(p.strip() for p in parts if p and p.strip())


def get_plugin_manager(
    load_entry_points: bool = True,
    *,
    only: frozenset[str] | None = None,
    disabled: frozenset[str] = frozenset(),
) -> pluggy.PluginManager:
    """The plugin manager, with hookspecs added and entry-point plugins loaded.

    Args:
        load_entry_points: load the ``cutegen`` entry points; False gives a bare manager
            (tests register exactly the plugins they need).
        only: load only the plugins with these entry-point names (``--profilers``).
        disabled: never load these (``--disable-profilers``); ``CUTEGEN_DISABLE_PLUGINS``
            is added to it here, the one place that variable is read.

    Returns:
        A cached manager (the same object for the same effective arguments).

    Raises:
        ConfigError: ``only`` names a plugin that is not installed.
        PluginError: a plugin fails to import, implements a hook that does not exist, or
            implements one with the wrong arguments.
    """
    env_disabled = parse_names(os.environ.get(DISABLE_ENV_VAR))
    return _build_manager(load_entry_points, only=only, disabled=frozenset(disabled) | env_disabled)


@functools.cache
def _build_manager(
    load_entry_points: bool, *, only: frozenset[str] | None, disabled: frozenset[str]
) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if load_entry_points:
        eps = _entry_points()
        names = {ep.name for ep in eps}
        blocked = set(disabled)
        if only is not None:
            unknown = sorted(set(only) - names)
            if unknown:
                raise ConfigError(f"unknown profiler plugin(s): {', '.join(unknown)}; "
                                  f"installed: {', '.join(sorted(names)) or 'none'}")
            blocked |= names - set(only)
        for name in sorted(blocked):
            pm.set_blocked(name)
        for ep in eps:
            if pm.is_blocked(ep.name) or pm.get_plugin(ep.name) is not None:
                continue
            try:
                plugin = ep.load()
            except Exception as e:
                raise PluginError(f"plugin {ep.name!r} ({ep.value}) failed to import: "
                                  f"{type(e).__name__}: {e}; disable it with "
                                  f"{DISABLE_ENV_VAR}={ep.name}") from e
            _register(pm, plugin, ep.name)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as e:
        name = pm.get_name(e.plugin) or repr(e.plugin)
        raise PluginError(f"plugin {name!r} implements a hook cutegen does not have: {e}") from e
    return pm


get_plugin_manager.cache_clear = _build_manager.cache_clear  # type: ignore[attr-defined]


def _register(pm: pluggy.PluginManager, plugin: object, name: str) -> None:
    try:
        pm.register(plugin, name=name)
    except pluggy.PluginValidationError as e:
        raise PluginError(f"plugin {name!r} has a bad hook implementation: {e}") from e
    except ValueError as e:  # the same module under two names
        raise PluginError(f"plugin {name!r} could not be registered: {e}") from e


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def _collect(pm: pluggy.PluginManager) -> list[tuple[str, Profiler]]:
    """``(plugin name, profiler)`` for every profiler every plugin registers."""
    out: list[tuple[str, Profiler]] = []
    for impl in reversed(pm.hook.register_profilers.get_hookimpls()):
        result: Any = impl.function()
        if result is None:
            continue
        try:
            items = list(result)
        except TypeError as e:
            raise PluginError(f"plugin {impl.plugin_name!r}: register_profilers must return a "
                              f"list of profilers, got {type(result).__name__}") from e
        for p in items:
            if not isinstance(p, Profiler):
                raise PluginError(f"plugin {impl.plugin_name!r} registered {p!r}, which is not a "
                                  "Profiler (needs name, is_available, applies_to, profile)")
            if not isinstance(p.name, str) or not p.name or any(c.isspace() for c in p.name):
                raise PluginError(f"plugin {impl.plugin_name!r} registered a profiler with a bad "
                                  f"name {p.name!r} (a non-empty word)")
            out.append((impl.plugin_name, p))
    return out


def available_profilers(pm: pluggy.PluginManager) -> dict[str, Profiler]:
    """Every profiler the loaded plugins register, by name (sorted).

    "Available" means loaded and not blocked; whether a profiler can run here is its own
    ``is_available()``, which stage 2 checks.

    Raises:
        PluginError: two plugins register the same profiler name, or a plugin returns
            something that is not a profiler.
    """
    found: dict[str, tuple[str, Profiler]] = {}
    for plugin, prof in _collect(pm):
        if prof.name in found:
            raise PluginError(f"two plugins register a profiler named {prof.name!r}: "
                              f"{found[prof.name][0]!r} and {plugin!r}; disable one with "
                              f"{DISABLE_ENV_VAR}=<plugin>")
        found[prof.name] = (plugin, prof)
    return {name: found[name][1] for name in sorted(found)}


def add_plugin_commands(cli: click.Group, pm: pluggy.PluginManager | None = None) -> None:
    """Let every plugin add its subcommands to ``cli`` (the ``register_commands`` hook)."""
    (pm or get_plugin_manager()).hook.register_commands(cli=cli)


@dataclass(frozen=True, slots=True)
class ProfilerInfo:
    """A profiler as ``cutegen plugins`` shows it."""

    name: str
    available: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A plugin as ``cutegen plugins`` shows it."""

    name: str
    version: str | None
    distribution: str | None
    hooks: tuple[str, ...]
    profilers: tuple[ProfilerInfo, ...] = ()
    blocked: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "hooks": list(self.hooks),
            "profilers": [{"name": p.name, "available": p.available, "error": p.error}
                          for p in self.profilers],
            "blocked": self.blocked,
        }


def plugin_info(pm: pluggy.PluginManager) -> tuple[PluginInfo, ...]:
    """Describe every plugin: loaded ones with hooks and profilers, blocked ones as such.

    Calls each profiler's ``is_available()``; one that raises is shown as unavailable
    with the error, not propagated.
    """
    eps = {ep.name: ep for ep in _entry_points()}
    by_plugin: dict[str, list[ProfilerInfo]] = {}
    for plugin, prof in _collect(pm):
        try:
            ok, err = bool(prof.is_available()), None
        except Exception as e:  # a plugin bug must not hide the listing
            ok, err = False, f"is_available() raised {type(e).__name__}: {e}"
        by_plugin.setdefault(plugin, []).append(ProfilerInfo(prof.name, ok, err))
    out = []
    for name, module in sorted(pm.list_name_plugin()):
        plugin = cast(Any, module)
        if plugin is None:
            continue
        dist = eps[name].dist if name in eps else None
        version = dist.version if dist else str(getattr(plugin, "__version__", "") or "") or None
        hooks = tuple(sorted(h.name for h in pm.get_hookcallers(plugin) or ()))
        out.append(PluginInfo(name, version, dist.name if dist else None, hooks,
                              tuple(by_plugin.get(name, ()))))
    for name in sorted(eps):
        if pm.is_blocked(name):
            dist = eps[name].dist
            out.append(PluginInfo(name, dist.version if dist else None,
                                  dist.name if dist else None, (), (), blocked=True))
    return tuple(out)
