"""Parsing source from several threads at once (the search thread and the pool's threads).

On CPython 3.11 concurrent ``ast.parse`` calls fail spuriously with "AST constructor
recursion depth mismatch" when a GC finalizer switches threads mid-conversion; the
scenario below triggers it within a second there. :func:`parse_python` serialises parsing.
"""

from __future__ import annotations

import threading
from pathlib import Path

from cutegen.codegen.candidate import parse_python

SOURCE = (Path(__file__).resolve().parents[2] / "benchmarks" / "seeds" / "softmax.py").read_text()


class _Cyclic:
    def __del__(self) -> None:
        sum(range(50))  # Python code in a finalizer: a chance for a thread switch


def test_parse_python_survives_concurrent_parsing_under_gc():
    errors: list[BaseException] = []

    def work() -> None:
        for _ in range(150):
            try:
                parse_python(SOURCE)
            except SystemError as e:  # pragma: no cover - the bug this guards against
                errors.append(e)
            for _ in range(30):
                a, b = _Cyclic(), _Cyclic()
                a.other, b.other = b, a  # freed by the cyclic GC, finalizers and all

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
