"""The hooks a cutegen plugin may implement, and the markers to implement them with.

A plugin is a module (or object) registered under the ``cutegen`` entry-point group whose
functions are decorated with :data:`hookimpl` and named after a hook below. pluggy checks
at registration that a hook implementation's arguments are a subset of the hook's, and
:func:`cutegen.plugins.get_plugin_manager` rejects implementations of hooks that do not
exist (a misspelled name fails loudly). Hooks may gain arguments in later versions; an
implementation that does not name them keeps working.

Every hook here is documented in ``docs/writing-a-profiler-plugin.md`` (a test checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutegen import PROJECT, hookimpl, hookspec

if TYPE_CHECKING:
    from collections.abc import Sequence

    import click

    from cutegen.profilers import Profiler

__all__ = ["PROJECT", "hookimpl", "hookspec", "register_commands", "register_profilers"]


@hookspec
def register_profilers() -> Sequence[Profiler]:
    """Return the profiler instances this plugin contributes.

    Each must satisfy :class:`cutegen.profilers.Profiler`; names must be unique across
    all loaded plugins. Called whenever the profilers are listed or a search starts, so
    keep it cheap: construct objects, do not probe tools here (that is ``is_available``).
    """
    return ()


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add subcommands to the ``cutegen`` command line (``@cli.command()``).

    Args:
        cli: the top-level click group.
    """
