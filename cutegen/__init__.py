"""cutegen: search for fast, correct GPU kernels written in NVIDIA's CuTe DSL.

The import name ``cutegen`` covers the project's top-level folders:
``cutegen.search`` (search/), ``cutegen.codegen`` (codegen/), ``cutegen.profilers``
(profilers/), ``cutegen.plugins`` (plugins/) and ``cutegen.benchmarks`` (benchmarks/).
Heavy dependencies (torch, the CuTe DSL, openai) are imported lazily, where they are used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cutegen")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
