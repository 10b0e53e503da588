"""``python -m cutegen`` is the ``cutegen`` command."""

from cutegen.cli import main

main()
