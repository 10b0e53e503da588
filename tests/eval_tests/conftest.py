"""Shared fixtures for the observer tests: the library, built once per session.

The observer needs a C compiler and the CUPTI headers (not a GPU). Where either is missing
the tests that need the library skip and say which; a library that fails to *compile* with
both present is a failure, not a skip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("_observer_child.py")


@pytest.fixture(scope="session")
def observer_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cutegen.codegen.eval import observer_build as ob

    try:
        ob.compiler()
        ob.include_dirs()
    except ob.ObserverUnavailable as e:
        pytest.skip(f"cannot build the observer here: {e}")
    return ob.observer_library(tmp_path_factory.mktemp("observer-cache"))


@pytest.fixture
def child_cmd(observer_lib: Path):
    """``child_cmd(mode, *args)``: the argv of ``_observer_child.py`` in that mode."""

    def make(mode: str, *args: object) -> list[str]:
        return [sys.executable, str(CHILD), mode, str(observer_lib), *map(str, args)]

    return make
