"""Watches the CuTe DSL inside a worker (never in the search process).

Installed by the candidate worker before the candidate is imported, it wraps

* ``cute.compile`` (``CompileCallable.__call__``): reports the "compile" phase to the
  parent (which applies the compile timeout, separate from the run timeout), records the
  kernel names and artifacts the DSL reports and compile errors, and in compile-only mode
  returns a no-op instead of the launchable function;
* the DSL's ``compile_and_cache``: sees compiles triggered by calling a ``@cute.jit``
  function directly;
* the executor's ``run_compiled_program`` (every launch of compiled DSL code goes through
  it): while the **ghost** switch is on, launches are skipped, so the parent can check
  that the call's output then changes (RELIABILITY.md C5).

What it records are claims of the candidate's process: the parent's kernel identity comes
from the native observer's module records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CompileRecord:
    """What the hook saw, read by the worker after each call."""

    kernels: list[str] = field(default_factory=list)
    compiles: int = 0
    seconds: float = 0.0
    error: str = ""
    sass: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)
    ghost: bool = False
    skipped_launches: int = 0


class _NoOpCompiled:
    """Returned by cute.compile in compile-only mode: calling it launches nothing."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        return None


def install(*, compile_only: bool, on_phase: Callable[[str], None]) -> CompileRecord:
    """Patch the DSL in this process; returns the record the hook fills."""
    from cutlass.base_dsl.compiler import CompileCallable
    from cutlass.base_dsl.jit_executor import JitExecutor
    from cutlass.cutlass_dsl import cutlass as cutlass_dsl_mod

    rec = CompileRecord()
    original_call = CompileCallable.__call__

    def _note(compiled: Any) -> None:
        info = getattr(compiled, "kernel_info", None) or {}
        for name in info:
            if name not in rec.kernels:
                rec.kernels.append(str(name))
        arts = getattr(compiled, "artifacts", None)
        if arts is not None:
            sass = getattr(arts, "SASS", None)
            if sass:
                rec.sass.append(sass)
            ptx = getattr(arts, "PTX", None)
            if ptx:
                rec.ptx.append(ptx)

    def wrapped_call(self: Any, *args: Any, **kwargs: Any) -> Any:
        on_phase("compile")
        t0 = time.perf_counter()
        try:
            compiled = original_call(self, *args, **kwargs)
        except BaseException as e:
            rec.error = f"{type(e).__name__}: {e}"
            raise
        finally:
            rec.seconds += time.perf_counter() - t0
            on_phase("call")
        rec.compiles += 1
        _note(compiled)
        return _NoOpCompiled() if compile_only else compiled

    CompileCallable.__call__ = wrapped_call  # type: ignore[method-assign]

    for cls_name in ("CutlassBaseDSL", "CuteExperimentalDSL"):
        cls = getattr(cutlass_dsl_mod, cls_name, None)
        if cls is None or "compile_and_cache" not in cls.__dict__:
            continue
        orig = cls.__dict__["compile_and_cache"]

        def wrapped_cc(self: Any, *args: Any, __orig: Any = orig, **kwargs: Any) -> Any:
            try:
                compiled = __orig(self, *args, **kwargs)
            except BaseException as e:
                rec.error = rec.error or f"{type(e).__name__}: {e}"
                raise
            _note(compiled)
            return compiled

        cls.compile_and_cache = wrapped_cc

    original_run = JitExecutor.run_compiled_program

    def gated_run(self: Any, exe_args: Any) -> Any:
        if rec.ghost:
            rec.skipped_launches += 1
            return None
        return original_run(self, exe_args)

    JitExecutor.run_compiled_program = gated_run  # type: ignore[method-assign]
    return rec
