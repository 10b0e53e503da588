"""Tables on stdout: the first column (the name people type next) is never cut.

On a terminal the table is drawn with rich, the first column kept whole and the others
folded to fit; piped (``cutegen tasks | cat``, ``> file``) it is plain text, one row per
line, columns separated by two spaces, nothing truncated.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    if not sys.stdout.isatty():
        widths = [max([len(h), *(len(str(r[i])) for r in rows)])
                  for i, h in enumerate(headers[:-1])]
        for r in [list(headers), *rows]:
            cells = [str(c).ljust(w) for c, w in zip(r, widths, strict=False)]
            click.echo("  ".join([*cells, str(r[-1])]).rstrip())
        return
    from rich.console import Console
    from rich.table import Table

    tab = Table(*headers)
    tab.columns[0].no_wrap = True
    tab.columns[0].overflow = "ignore"
    tab.columns[0].min_width = max([len(headers[0]), *(len(str(r[0])) for r in rows)])
    for r in rows:
        tab.add_row(*(str(c) for c in r))
    Console().print(tab)
