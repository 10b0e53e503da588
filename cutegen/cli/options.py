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


def precision_option(f: Any) -> Any:
    from cutegen.codegen.variants import PRECISIONS

    return click.option(
        "--precision", type=click.Choice(list(PRECISIONS)), default="native",
        show_default=True,
        help="native: the task as written. bf16: its bf16 variant, the task's floating-point "
             "inputs and parameters cast to bfloat16 and its outputs held to bf16's tolerance "
             "(1e-2), a task file of its own written to variants/ beside the store (eval: "
             "under --run-dir) "
             "(PERFORMANCE.md tier B; fp32 and bf16 results never share a mean).")(f)


def tolerance_options(f: Any) -> Any:
    """--atol / --rtol: the task held to another tolerance, as a task file of its own."""
    for name, what in (("--rtol", "relative"), ("--atol", "absolute")):
        f = click.option(
            name, type=click.FloatRange(0, None), default=None, metavar="X",
            help=f"Hold the outputs to this {what} tolerance instead of the task's own "
                 f"TOLERANCE or its dtype's (fp32 1e-4, fp16 1e-3, bf16 1e-2): |out - ref| <= atol + "
                 f"rtol*|ref|. The task with that tolerance is a task file of its own, written "
                 f"beside the precision variants, so its results never share a mean with the "
                 f"task's.")(f)
    return f


def variant_words(precision: str, atol: float | None, rtol: float | None) -> str:
    """What a variant is, for a message: "the bf16 variant held to atol=0.01"."""
    held = [f"{k}={v:g}" for k, v in (("atol", atol), ("rtol", rtol)) if v is not None]
    return ("the task" if precision == "native" else f"the {precision} variant") + (
        " held to " + ", ".join(held) if held else "")


def variants_folder(db: str) -> str:
    """Where the precision variants of a store's tasks are written: variants/ beside it."""
    from pathlib import Path

    return str(Path(db).expanduser().parent / "variants")
