"""Option bundles shared by several command modules."""

from __future__ import annotations

from typing import Any

import click

DEFAULT_DB = "runs/cutegen.db"


def db_option(f: Any) -> Any:
    return click.option(
        "--db", type=click.Path(dir_okay=False), default=DEFAULT_DB, show_default=True,
        envvar="CUTEGEN_DB",
        help="The SQLite store (env CUTEGEN_DB). Each run keeps its files in a folder named "
             "after it next to the store: runs/<run>/candidates/<sha256>.py ...")(f)


def eval_options(compile_only: bool, arch: str, gpu: int | None, timeout: float | None,
                 eval_timeout: float | None) -> Any:
    """A run's evaluation settings (an EvalOptions): the limits given, the defaults for
    the others."""
    import dataclasses

    from cutegen.codegen.backend import EvalOptions

    opts = EvalOptions(compile_only=compile_only, arch=arch, gpu=gpu)
    if timeout is not None:
        opts = dataclasses.replace(opts, run_timeout_s=timeout)
    if eval_timeout is not None:
        opts = dataclasses.replace(opts, eval_timeout_s=eval_timeout)
    return opts
