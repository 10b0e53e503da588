"""``cutegen plugins``: list plugins, their versions, hooks and profilers; attach plugin commands.

Also the shared ``--profilers`` / ``--disable-profilers`` options for commands that run
profilers (:func:`profiler_options`, :func:`plugin_manager_from_options`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cutegen.errors import PluginError

F = TypeVar("F", bound=Callable[..., Any])


def profiler_options(fn: F) -> F:
    """Add ``--profilers`` and ``--disable-profilers`` (comma lists of plugin names)."""
    fn = click.option("--disable-profilers", "disable_profilers", default="", metavar="NAMES",
                      help="Comma list of profiler plugins not to load (also "
                           "CUTEGEN_DISABLE_PLUGINS).")(fn)
    fn = click.option("--profilers", "profilers", default=None, metavar="NAMES",
                      help="Load only these profiler plugins, e.g. 'sass,ncu'.")(fn)
    return fn


def plugin_manager_from_options(profilers: str | None, disable_profilers: str | None) -> Any:
    """The plugin manager for the values of :func:`profiler_options`."""
    from cutegen.plugins import get_plugin_manager, parse_names

    only = parse_names(profilers) if profilers is not None else None
    return get_plugin_manager(only=only, disabled=parse_names(disable_profilers))


@click.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@profiler_options
def plugins_command(as_json: bool, profilers: str | None, disable_profilers: str) -> None:
    """List installed plugins: version, hooks, profilers and whether each can run here.

    Plugins come from the `cutegen` entry-point group (the built-in sass, ncu, nsys and
    energy profilers too). Disable one with CUTEGEN_DISABLE_PLUGINS=name[,name].
    """
    from cutegen.plugins import plugin_info

    pm = plugin_manager_from_options(profilers, disable_profilers)
    infos = plugin_info(pm)
    if as_json:
        click.echo(json.dumps([i.to_dict() for i in infos], indent=2))
        return
    if not infos:
        click.echo("no plugins installed", err=True)
        return
    for info in infos:
        version = f" {info.version}" if info.version else ""
        dist = f" ({info.distribution})" if info.distribution and info.distribution != info.name else ""
        if info.blocked:
            click.echo(f"{info.name}{version}{dist}: blocked")
            continue
        click.echo(f"{info.name}{version}{dist}: hooks {', '.join(info.hooks) or '-'}")
        for p in info.profilers:
            state = "available" if p.available else "not available here"
            click.echo(f"  profiler {p.name}: {state}" + (f" ({p.error})" if p.error else ""))


def register(cli: click.Group) -> None:
    """Attach ``plugins`` and every plugin-contributed command to ``cli``.

    A plugin that cannot be loaded does not take the command line down: its error is
    printed to stderr and ``cutegen plugins`` reports it when run.
    """
    cli.add_command(plugins_command)
    from cutegen.plugins import add_plugin_commands

    try:
        add_plugin_commands(cli)
    except PluginError as e:
        click.echo(f"warning: plugin commands not loaded: {e}", err=True)
