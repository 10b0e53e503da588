"""cutegen: search for fast, correct GPU kernels written in NVIDIA's CuTe DSL.

The import name ``cutegen`` covers the project's top-level folders:
``cutegen.search`` (search/), ``cutegen.codegen`` (codegen/), ``cutegen.profilers``
(profilers/), ``cutegen.plugins`` (plugins/) and ``cutegen.benchmarks`` (benchmarks/).
Heavy dependencies (torch, the CuTe DSL, openai) are imported lazily, where they are used.

A search from Python (the library entry point is :mod:`cutegen.api`)::

    import cutegen
    settings = cutegen.RunSettings(budget=cutegen.Budget(max_evals=3),
                                   eval=cutegen.EvalOptions(compile_only=True))
    summary = cutegen.create_run("softmax_bf16", settings, db="runs/demo.db").search()
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import pluggy

try:
    __version__ = version("cutegen")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: pluggy's markers for the ``cutegen`` project (the pluggy project name is also the
#: entry-point group plugins register under). They live at the bottom of the package so
#: that the built-in profilers, which are plugins like any other, mark their hooks without
#: importing the plugin machinery above them; :mod:`cutegen.plugins` re-exports both, and
#: the hooks themselves are declared in :mod:`cutegen.plugins.hookspecs`.
PROJECT = "cutegen"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The library entry point, imported on first use so that ``import cutegen`` stays light.
_LAZY = {
    "create_run": "cutegen.api", "resume_run": "cutegen.api", "SearchRun": "cutegen.api",
    "open_store": "cutegen.api",
    "RunSettings": "cutegen.settings", "ProfilingSettings": "cutegen.settings",
    "LLMSettings": "cutegen.settings", "DeviceSettings": "cutegen.settings",
    "Budget": "cutegen.search", "SearchParams": "cutegen.search",
    "EvalOptions": "cutegen.codegen.backend",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cutegen' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = ["PROJECT", "__version__", "hookimpl", "hookspec", *_LAZY]
