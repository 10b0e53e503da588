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
