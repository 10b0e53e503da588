"""The ``cutegen`` command line.

The top layer: it parses, builds settings, calls the library (:mod:`cutegen.api` and the
packages below it) and prints. Nothing below imports it.

This module only builds the click group, attaches the commands (defined in small modules of
this package, one per area: :mod:`.eval`, :mod:`.search` (with :mod:`.search_view`),
:mod:`.report`, :mod:`.bench` (with :mod:`.bench_jobs`), :mod:`.llm`, :mod:`.plugins`; shared
option bundles in :mod:`.options` and :mod:`.devices`, tables in :mod:`.table`) and turns
:class:`~cutegen.errors.CuteGenError` into a message and an exit code. Data goes to stdout;
progress and messages to stderr.
"""

from __future__ import annotations

import sys

import click

from cutegen import __version__
from cutegen.errors import CuteGenError


class _Group(click.Group):
    """Lists commands in the order they were added (the order a newcomer needs them)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cutegen")
def cli() -> None:
    """cutegen finds fast, correct GPU kernels written in NVIDIA's CuTe DSL.

    Give it a PyTorch reference in KernelBench format (a file with Model, get_inputs and
    get_init_inputs, or a bundled task name from `cutegen tasks`). `cutegen search` grows a
    Monte-Carlo tree of CuTe DSL candidates; every candidate is compiled, verified against
    the reference on fresh secret inputs and timed in its own process; everything is kept
    in a SQLite store so a search can be resumed, inspected and exported.

    \b
    Start here:
      cutegen tasks                         the bundled tasks
      cutegen eval softmax_fp32 FILE.py     evaluate one candidate
      cutegen search softmax_fp32 --max-evals 40
      cutegen status                        what the store holds
    """


def _attach_commands() -> None:
    """Add every command (and those plugins contribute) to the group, once."""
    if cli.commands:
        return
    from cutegen.cli import eval as cli_eval
    from cutegen.cli import llm as cli_llm
    from cutegen.cli import plugins as cli_plugins
    from cutegen.cli import report as cli_report
    from cutegen.cli import search as cli_search

    cli_eval.register(cli)
    cli_search.register(cli)
    cli_report.register(cli)
    cli_llm.register(cli)
    cli_plugins.register(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script: runs the group, maps errors to exit codes."""
    _attach_commands()
    try:
        cli.main(args=argv, prog_name="cutegen", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except CuteGenError as e:
        click.secho(f"error: {e}", fg="red", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
