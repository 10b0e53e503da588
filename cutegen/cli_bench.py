"""``cutegen bench``: one search per task of a suite, with fixed budgets, then one table.

Composition only: the suite and the records are :mod:`cutegen.codegen.bench`, the ceilings
:mod:`cutegen.codegen._ceilings`, the means and files :mod:`cutegen.codegen._bench_table`;
each task's search is exactly ``cutegen search`` (invoked as a command, so it validates,
stores and resumes the same way) into the same store. Tables go to stdout; the searches'
progress and summaries go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import click

from cutegen._cli_options import db_option
from cutegen.errors import ConfigError, CuteGenError, DuplicatedRunError, GPURequiredError


def _llm_passthrough(f: Any) -> Any:
    """The raw LLM options of ``cutegen search`` (forwarded to each search unchanged)."""
    from cutegen.cli_llm import _llm_option_list

    for opt in reversed(_llm_option_list(with_max_dollars=True)):
        f = opt(f)
    return f


def _command_line(ctx: click.Context) -> str:
    """The command as typed (non-default options), for the report."""
    parts = ["cutegen", ctx.info_name or "bench"]
    for p in ctx.command.params:
        v = ctx.params.get(p.name or "")
        if v in (None, False, (), "") or v == p.default:
            continue
        if isinstance(p, click.Argument):
            parts.append(str(v))
        elif isinstance(p, click.Option):
            flag = max(p.opts, key=len)
            if p.is_flag:
                parts.append(flag)
            else:
                for item in v if isinstance(v, tuple) else (v,):
                    parts += [flag, str(item)]
    return " ".join(parts)


def _suite(suite: str | None, kernelbench: str | None, level: int, problems: str | None,
           max_evals: int | None) -> Any:
    from cutegen.codegen.bench import bundled_suite_names, kernelbench_suite, load_suite

    if kernelbench is not None:
        nums = None
        if problems:
            try:
                nums = [int(x) for x in problems.replace(" ", "").split(",") if x]
            except ValueError as e:
                raise ConfigError(f"--problems takes numbers like 19,23,40: {problems!r}") from e
        return kernelbench_suite(kernelbench, level, nums, max_evals=max_evals or 40)
    if suite is None:
        raise ConfigError("give a SUITE (bundled: " + ", ".join(bundled_suite_names())
                          + "; or a .toml file) or --kernelbench DIR --level L")
    return load_suite(suite)


def _has_run(db: str, name: str) -> bool:
    from cutegen.search.storage import SqliteStorage

    if not Path(db).is_file():
        return False
    store = SqliteStorage(db)
    try:
        return any(r.name == name for r in store.list_runs())
    finally:
        store.close()


@contextlib.contextmanager
def _stdout_to_stderr() -> Any:
    with contextlib.redirect_stdout(sys.stderr):
        yield


@click.command("bench")
@click.argument("suite", required=False)
@click.option("--kernelbench", type=click.Path(file_okay=False), default=None,
              help="Run a KernelBench checkout's level as the suite (fp32, upstream sizes).")
@click.option("--level", type=int, default=1, show_default=True, help="KernelBench level.")
@click.option("--problems", default=None, metavar="N,N,...",
              help="KernelBench problems to run (default: every problem of the level).")
@db_option
@click.option("--max-evals", type=click.IntRange(1, None), default=None,
              help="Evaluations per task (default: the suite's max_evals).")
@click.option("--max-gpu-minutes", type=click.FloatRange(0, None, min_open=True),
              default=None, help="Also stop each task's search after this much GPU time.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Folder for BENCHMARKS.md, bench.json and one HTML report per run.")
@click.option("--reports/--no-reports", default=True, show_default=True,
              help="With --out, also write each run's HTML report into OUT/reports/.")
@click.option("--compile-only", is_flag=True,
              help="Only compile candidates (no GPU; for CI): nothing is verified or timed.")
@click.option("--arch", default="sm_90a", show_default=True, help="Target for --compile-only.")
@click.option("--gpu", type=int, default=None, help="GPU index for the workers.")
@click.option("--no-ceilings", is_flag=True,
              help="Do not measure copy bandwidth and GEMM rate; use PERFORMANCE.md's H200 "
                   "values (said so in the output).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every run.")
@click.option("--run-prefix", default=None,
              help="Runs are named PREFIX-TASK (default: bench-SUITE-YYYYmmdd-HHMMSS).")
@click.option("--rewriter", type=click.Choice(["builtin", "llm", "mixed"]), default="builtin",
              show_default=True, help="Who proposes candidates (llm/mixed need --model).")
@_llm_passthrough
@click.pass_context
def bench_cmd(ctx: click.Context, suite: str | None, kernelbench: str | None, level: int,
              problems: str | None, db: str, max_evals: int | None,
              max_gpu_minutes: float | None, out: str | None, reports: bool,
              compile_only: bool, arch: str, gpu: int | None, no_ceilings: bool, seed: int,
              run_prefix: str | None, rewriter: str, **llm: Any) -> None:
    """Benchmark cutegen on a SUITE of tasks: one search per task with a fixed budget.

    First the machine's ceilings are measured (copy bandwidth: torch.clone of 1 GB bf16;
    cuBLAS bf16 torch.mm 8192³; same timing harness as the evaluator), then each task is
    searched (`cutegen search` with the suite's budget, into the same store). The table
    (stdout, and with --out as BENCHMARKS.md and bench.json) gives per task the best time,
    eager and torch.compile, speedups with bootstrap intervals, fractions of the roofline,
    evaluations and GPU-minutes to the best, LLM cost and sanity flags (PERFORMANCE.md §6),
    and geometric means per tier and dtype, stated over correct tasks and with failures
    counted as 1.0×.

    \b
    Suites: tierA (bf16 memory-bound), fp32, gemm, all, or a .toml file.
    Examples:
      cutegen bench tierA --out bench-out/
      cutegen bench gemm --max-evals 60 --out bench-gemm/
      cutegen bench --kernelbench ~/KernelBench --level 1 --problems 19,23,40
      cutegen bench tierA --compile-only --max-evals 3     (no GPU: CI smoke run)
    """
    from cutegen.cli_eval import require_gpu
    from cutegen.cli_search import search_cmd
    from cutegen.codegen import toolchain
    from cutegen.codegen._bench_table import BenchReport, task_table, write_outputs
    from cutegen.codegen._ceilings import measure_ceilings
    from cutegen.codegen.bench import collect_task_result, error_result
    from cutegen.codegen.roofline import H200_MEASURED
    from cutegen.search.storage import SqliteStorage

    s = _suite(suite, kernelbench, level, problems, max_evals)
    budget = max_evals or s.max_evals
    if not compile_only:
        require_gpu("benchmarking (verifying and timing candidates)")
    prefix = run_prefix or f"bench-{s.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    names: list[str] = []
    seen: dict[str, int] = {}
    for t in s.tasks:  # a task listed twice (e.g. in two tiers) gets -2, -3, ...
        base = f"{prefix}-{t.label}"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    taken = [n for n in names if _has_run(db, n)]
    if taken:
        raise DuplicatedRunError(f"runs {taken} exist in {db}; choose another --run-prefix")
    measured, note, ceil = None, "", H200_MEASURED
    if compile_only:
        note = "--compile-only: nothing is timed"
    elif no_ceilings:
        note = (f"--no-ceilings: PERFORMANCE.md's H200 values used ({ceil.bandwidth_gbs / 1000:.1f}"
                f" TB/s, {ceil.peak_tflops:.0f} TFLOP/s)")
    else:
        click.echo("measuring the ceilings (copy bandwidth, cuBLAS bf16 GEMM) ...", err=True)
        measured = measure_ceilings(gpu=gpu)
        ceil = measured.ceilings()
        click.echo(f"  copy {measured.copy_gbs / 1000:.2f} TB/s, GEMM "
                   f"{measured.gemm_tflops:.0f} TFLOP/s", err=True)
    results = []
    for i, (entry, name) in enumerate(zip(s.tasks, names, strict=True), start=1):
        click.echo(f"[{i}/{len(s.tasks)}] {entry.label}: run {name}", err=True)
        kb = entry.kernelbench
        try:
            with _stdout_to_stderr():
                ctx.invoke(search_cmd, task=None if kb else entry.task,
                           kernelbench=kb[0] if kb else None, level=kb[1] if kb else None,
                           problem=kb[2] if kb else None, max_evals=budget,
                           max_gpu_minutes=max_gpu_minutes, run_name=name, seed=seed, db=db,
                           rewriter=rewriter, seed_files=entry.seed_candidates,
                           compile_only=compile_only, arch=arch, gpu=gpu, **llm)
        except GPURequiredError:
            raise
        except CuteGenError as e:
            click.echo(f"  {entry.label}: {e}", err=True)
            results.append(error_result(entry, str(e), run=name if _has_run(db, name) else ""))
            continue
        store = SqliteStorage(db)
        try:
            run = store.get_run(name)
            results.append(collect_task_result(store, run, entry, ceil))
            if out and reports:
                from cutegen.search._report_html import write_report

                write_report(store, run, Path(out) / "reports", db=db)
        finally:
            store.close()
        if run.status == "stopped":
            click.echo("interrupted: the remaining tasks were not run", err=True)
            break
    report = BenchReport(
        suite=s.name, description=s.description, date=time.strftime("%Y-%m-%d %H:%M %Z"),
        command=_command_line(ctx), versions=toolchain.versions(), ceilings=measured,
        ceilings_note=note, max_evals=budget, compile_only=compile_only, tasks=tuple(results),
        settings={"rewriter": rewriter, "seed": seed, "max_gpu_minutes": max_gpu_minutes,
                  "model": llm.get("model"), "db": db, "run_prefix": prefix})
    _print(report, task_table)
    if out:
        for p in write_outputs(report, Path(out)):
            click.echo(f"wrote {p}", err=True)


def _print(report: Any, task_table: Any) -> None:
    from cutegen.codegen._bench_table import MEANS_NOTE, summary_table

    click.echo(task_table(report.tasks))
    click.echo("")
    click.echo(summary_table(report.summary))
    click.echo("")
    click.echo(MEANS_NOTE)
    flags = [f"  {t.task}: {f}" for t in report.tasks for f in t.flags]
    if flags:
        click.echo("\nsanity flags (PERFORMANCE.md §6), for a person to check:")
        click.echo("\n".join(flags))
