"""``cutegen report``, ``export`` and ``bench``: results people can look at, reuse and trust.

Parsing and printing only: the report is built by :mod:`cutegen.search.report.html`, the
export by :mod:`cutegen.search.report.export`, the benchmark by :mod:`cutegen.cli.bench` over
:mod:`cutegen.codegen.suites` and :mod:`cutegen.search.report.bench`. Data goes to stdout, messages to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cutegen.cli.options import db_option
from cutegen.errors import StorageError

if TYPE_CHECKING:
    from cutegen.search.storage import SqliteStorage


def _open_store(db: str) -> SqliteStorage:
    from cutegen.search.storage import SqliteStorage

    if not Path(db).is_file():
        raise StorageError(f"no store at {db} (`cutegen search` creates one; --db picks "
                           "another)")
    return SqliteStorage(db)


@click.command("report")
@click.argument("run_name")
@click.argument("node", type=int, required=False)
@db_option
@click.option("-o", "--out", "out", type=click.Path(), default=".", show_default=True,
              help="A folder (the file is named RUN.html) or a file name ending in .html.")
def report_cmd(run_name: str, node: int | None, db: str, out: str) -> None:
    """Write one self-contained HTML report of RUN (its gated best, or NODE).

    The page holds the best speedup against evaluations and against GPU-minutes, the
    verdicts, LLM cost, the search tree with the path to the best marked, the best kernel's
    source with how it was verified (trials, tolerances, errors) and timed (method, samples,
    baselines, bootstrap intervals), profiler findings along the path, and the versions of
    everything. No scripts and no external files: it can be mailed or attached.

    \b
    Examples:
      cutegen report sm1                  writes ./sm1.html
      cutegen report sm1 -o reports/      writes reports/sm1.html
      cutegen report sm1 17 -o node17.html
    """
    from cutegen.search.report.html import write_report

    storage = _open_store(db)
    try:
        run = storage.get_run(run_name)
        try:
            path = write_report(storage, run, Path(out), node_id=node, db=db)
        except OSError as e:
            raise StorageError(f"cannot write the report to {out}: {e}") from e
    finally:
        storage.close()
    click.echo(str(path))


@click.command("export")
@click.argument("run_name")
@click.argument("node", type=int, required=False)
@db_option
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="The .py file to write (default: print to stdout).")
def export_cmd(run_name: str, node: int | None, db: str, out: str | None) -> None:
    """Export RUN's best kernel (or NODE) as a drop-in Python module.

    The file is the candidate's source (class ModelNew, same constructor as the task's
    Model) under a comment block that records the task, GPU, versions, how it was verified
    and how fast it was. It needs only torch and nvidia-cutlass-dsl, not cutegen.

    \b
    Examples:
      cutegen export sm1 -o softmax_kernel.py
      cutegen export sm1 17 -o node17.py
    """
    from cutegen.search.report.export import export_candidate, write_export

    storage = _open_store(db)
    try:
        run = storage.get_run(run_name)
        text = export_candidate(storage, run, node, db=db)
    finally:
        storage.close()
    if out is None:
        sys.stdout.write(text)
        return
    try:
        write_export(text, Path(out))
    except OSError as e:
        raise StorageError(f"cannot write {out}: {e}") from e
    click.echo(f"wrote {out}", err=True)


def register(cli: click.Group) -> None:
    """Attach ``report``, ``export`` and ``bench`` to the ``cutegen`` group."""
    from cutegen.cli.bench import bench_cmd

    for cmd in (report_cmd, export_cmd, bench_cmd):
        cli.add_command(cmd)
