"""``cutegen bench``: one search per task of a suite, with fixed budgets, then one table.

Suite handling and a loop: the suites are :mod:`cutegen.codegen.suites`, the ceilings
:mod:`cutegen.codegen.ceilings`, each task's result :mod:`cutegen.search.report.bench`, the
means and files :mod:`cutegen.search.report.bench_table`; each task's search is a run made by the library entry
point (:func:`cutegen.api.create_run` / :func:`~cutegen.api.resume_run`, what ``cutegen
search`` and ``resume`` call) from one :class:`~cutegen.settings.RunSettings`, into the same
store. Tables go to stdout; the searches' progress and summaries go to stderr.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import click

from cutegen import api
from cutegen.cli.bench_jobs import open_job_run
from cutegen.cli.options import (
    db_option,
    eval_options,
    precision_option,
    tolerance_options,
    variants_folder,
)
from cutegen.codegen.backend import require_gpu
from cutegen.errors import ConfigError, CuteGenError, DuplicatedRunError, GPURequiredError
from cutegen.search import Budget
from cutegen.settings import LLMSettings, RunSettings


def _llm_passthrough(f: Any) -> Any:
    """The raw LLM options of ``cutegen search`` (forwarded to each search unchanged)."""
    from cutegen.cli.llm import _llm_option_list

    for opt in reversed(_llm_option_list(with_max_dollars=True)):
        f = opt(f)
    return f


def _command_line(ctx: click.Context) -> str:
    """The command as typed (non-default options), for the report."""
    parts = ["cutegen", ctx.info_name or "bench"]
    for p in ctx.command.params:
        v = ctx.params.get(p.name or "")
        # `is`, not `in`: 0 == False, and `--gpu 0` was dropped from the recorded command
        if v is None or v is False or v == () or v == "" or (v == p.default
                                                              and type(v) is type(p.default)):
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
    from cutegen.codegen.suites import bundled_suite_names, kernelbench_suite, load_suite

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


def _judged_elsewhere(db: str, name: str) -> dict[int, int]:
    """``{version: evaluations}`` of the run ``name``'s evaluations that another evaluator
    version than this cutegen's judged (empty when none did)."""
    from cutegen.codegen.evaluation import judged_elsewhere
    from cutegen.search.storage import SqliteStorage

    store = SqliteStorage(db)
    try:
        return judged_elsewhere(store.get_harness_versions(store.get_run(name).id))
    finally:
        store.close()


#: The bench's wall clock (a seam for tests).
_clock = time.monotonic
#: A task is not started with less than this much of --max-minutes left.
_MIN_TASK_S = 30.0
NOT_RUN = "not run: the bench's --max-minutes ran out (run it with --resume)"
#: A task the table written so far (after each task) has not reached.
NOT_YET = "not run yet: the bench was still running when this table was written"


def _past_wall_s(db: str, name: str, budget: int) -> float | None:
    """Wall seconds the run ``name`` has used so far; -1 when it finished with ``budget``
    evaluations (nothing to resume; one cut short by --max-minutes is resumed); None when
    there is no such run."""
    from cutegen.search.storage import SqliteStorage

    store = SqliteStorage(db)
    try:
        run = next((r for r in store.list_runs() if r.name == name), None)
        if run is None:
            return None
        if run.status == "finished" and len(store.get_results(run.id)) >= budget:
            return -1.0
        return sum((x.ended_at or x.heartbeat_at) - x.started_at
                   for x in store.get_sessions(run.id))
    finally:
        store.close()


def _collect(db: str, name: str, entry: Any, ceil: Any, out: str | None) -> tuple[Any, str]:
    """A task's result read back from the store (and its HTML report written into
    OUT/reports/ when ``out`` is given), with the run's status."""
    from cutegen.search.report.bench import collect_task_result
    from cutegen.search.storage import SqliteStorage

    store = SqliteStorage(db)
    try:
        run = store.get_run(name)
        result = collect_task_result(store, run, entry, ceil)
        if out:
            from cutegen.search.report.html import write_report

            write_report(store, run, Path(out) / "reports", db=db)
        return result, run.status
    finally:
        store.close()


def _stored_or_error(db: str, name: str, entry: Any, ceil: Any, out: str | None,
                     message: str) -> Any:
    """A task whose search (or its resumption) did not run now: what its run stored before,
    if it evaluated anything, with ``message`` as a flag; else an error result saying it."""
    from dataclasses import replace

    from cutegen.search.report.bench import error_result
    from cutegen.search.storage import SqliteStorage

    if _has_run(db, name):
        store = SqliteStorage(db)
        try:
            evaluated = bool(store.get_results(store.get_run(name).id))
        finally:
            store.close()
        if evaluated:
            result, _ = _collect(db, name, entry, ceil, out)
            note = " ".join(message.split())[:300]
            return replace(result, error=note, flags=(*result.flags, note))
    return error_result(entry, message, run=name if _has_run(db, name) else "")


def _job_gpus(jobs: int, gpus: str | None, gpu: int | None) -> list[int | None]:
    """The GPU of each job slot: --gpus as given (parsed as `cutegen search --gpus`), else
    GPU k for slot k (from --gpu on)."""
    from cutegen.codegen.pool import parse_gpus

    ids = parse_gpus(gpus)
    if ids is not None:
        if len(ids) < jobs:
            raise ConfigError(f"--jobs {jobs} needs {jobs} GPUs; --gpus lists {len(ids)}")
        return list(ids[:jobs])
    return [(gpu or 0) + k for k in range(jobs)]


def _run_concurrently(todo: list[tuple[int, Any, str, float | None]], *, jobs: int,
                      gpus: str | None, gpu: int | None, kwargs_for: Any, time_left: Any,
                      results: dict[int, Any], n: int, db: str, ceil: Any, out: str | None,
                      reports: bool, taken: list[str], compile_only: bool,
                      on_result: Any = None) -> None:
    """--jobs N: the tasks' searches in child processes, N at a time, one GPU each;
    ``on_result()`` after each task's result is in ``results``."""
    import tempfile

    from cutegen.cli.bench_jobs import Job, run_jobs
    from cutegen.search.report.bench import error_result
    from cutegen.search.storage import SqliteStorage

    slots = [None] * jobs if compile_only else _job_gpus(jobs, gpus, gpu)
    SqliteStorage(db).close()  # create and migrate the store once, before the children
    by_index = {i: (entry, name) for i, entry, name, _ in todo}
    job_list = []
    for i, entry, name, past_s in todo:
        command, kwargs = kwargs_for(entry, name, past_s)
        job_list.append(Job(i, entry.label, command, kwargs, past_s=max(past_s or 0.0, 0.0)))
    logs = Path(out) / "logs" if out else Path(tempfile.mkdtemp(prefix="cutegen-bench-"))

    def on_start(job: Job, dev: int | None) -> None:
        where = "" if dev is None else f" on GPU {dev}"
        click.echo(f"[{job.index}/{n}] {job.label}: run {job.kwargs['name']}{where}"
                   + (" (resumed)" if job.command == "resume" else "")
                   + f", log {logs / f'{job.index:03d}-{job.label}.log'}", err=True)

    def on_done(job: Job) -> None:
        entry, name = by_index[job.index]
        if job.error and not _has_run(db, name):
            click.echo(f"[{job.index}/{n}] {job.label}: {job.error}", err=True)
            results[job.index] = error_result(entry, job.error)
            if on_result:
                on_result()
            return
        if job.error:  # it stopped early but stored what it did: the table shows that
            click.echo(f"[{job.index}/{n}] {job.label}: {job.error}", err=True)
        results[job.index], status = _collect(db, name, entry, ceil, out if reports else None)
        r = results[job.index]
        best = (f"{r.speedup_eager:.2f}x vs eager" if r.speedup_eager else
                f"{r.best_us:,.1f} us, no eager baseline" if r.correct else r.status)
        click.echo(f"[{job.index}/{n}] {job.label}: done ({status}; best {best}; "
                   f"{r.evaluations} evaluations)", err=True)
        if on_result:
            on_result()

    def on_skip(job: Job) -> None:
        entry, name = by_index[job.index]
        click.echo(f"[{job.index}/{n}] {job.label}: not run (--max-minutes)", err=True)
        results[job.index] = _stored_or_error(db, name, entry, ceil,
                                              out if reports else None, NOT_RUN)
        if on_result:
            on_result()

    try:
        run_jobs(job_list, gpus=slots, workdir=logs, time_left=time_left,
                 min_task_s=_MIN_TASK_S, on_start=on_start, on_done=on_done, on_skip=on_skip)
    except KeyboardInterrupt:
        click.echo("interrupted: the searches were stopped (resume with --resume)", err=True)
        for i, entry, name, _ in todo:
            if i not in results and _has_run(db, name):
                results[i], _ = _collect(db, name, entry, ceil, None)


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
@precision_option
@tolerance_options
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
@click.option("--eval-timeout", type=click.FloatRange(1, None), default=None,
              help="Seconds one evaluation's calls and output checks may take together "
                   "(as `cutegen search --eval-timeout`).  [default: 900]")
@click.option("--jobs", type=click.IntRange(1, None), default=None,
              help="Search this many tasks at once, each in a process of its own on a GPU of "
                   "its own (job k on GPU k, or on the k-th of --gpus); logs go to OUT/logs/. "
                   "[default: one per GPU of --gpus, else 1]")
@click.option("--gpus", default=None, metavar="all|0,1",
              help="The GPUs for --jobs, one per job ('all', or indices).")
@click.option("--no-ceilings", is_flag=True,
              help="Do not measure copy bandwidth and GEMM rate; use PERFORMANCE.md's H200 "
                   "values (said so in the output).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every run.")
@click.option("--run-prefix", default=None,
              help="Runs are named PREFIX-TASK (default: bench-SUITE-YYYYmmdd-HHMMSS).")
@click.option("--rewriter", type=click.Choice(["builtin", "llm", "mixed"]), default="builtin",
              show_default=True, help="Who proposes candidates (llm/mixed need --model).")
@click.option("--max-minutes", type=click.FloatRange(0, None, min_open=True), default=None,
              help="Wall-time limit of this bench command: each task's search gets only the "
                   "time left, and tasks not reached are listed as not run. Finish them later "
                   "with --resume.")
@click.option("--resume", is_flag=True,
              help="Continue a bench with the same --run-prefix: finished runs are read from "
                   "the store, interrupted ones resumed, the rest searched; the table covers "
                   "them all. A run that another evaluator version judged (an older "
                   "cutegen) is kept and its task searched again as RUN-hVERSION.")
@_llm_passthrough
@click.pass_context
def bench_cmd(ctx: click.Context, suite: str | None, kernelbench: str | None, level: int,
              problems: str | None, precision: str, atol: float | None,
              rtol: float | None, db: str, max_evals: int | None,
              max_gpu_minutes: float | None, out: str | None, reports: bool,
              compile_only: bool, arch: str, gpu: int | None, eval_timeout: float | None,
              jobs: int | None,
              gpus: str | None,
              no_ceilings: bool, seed: int,
              run_prefix: str | None, rewriter: str, max_minutes: float | None, resume: bool,
              **llm: Any) -> None:
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
    Suites (benchmarks/suites/): tierA (bf16 memory-bound), fp32, memory (both), gemm,
    reduce (reductions, norms, pooling), long (rows past a CTA), conv, conv-quick,
    conv-chains, conv-norms, conv-direct and conv-deep (parts of conv), all; or a .toml
    file of your own.
    Examples:
      cutegen bench tierA --out bench-out/
      cutegen bench memory --jobs 2 --out bench-out/   (two GPUs: two tasks at a time)
      cutegen bench gemm --max-evals 60 --out bench-gemm/
      cutegen bench --kernelbench ~/KernelBench --level 1 --problems 19,23,40
      cutegen bench --kernelbench ~/KernelBench --level 1 --precision bf16   (tier B's bf16)
      cutegen bench tierA --compile-only --max-evals 3     (no GPU: CI smoke run)
      cutegen bench tierA --run-prefix b1 --max-minutes 9  (then, to finish it:)
      cutegen bench tierA --run-prefix b1 --max-minutes 9 --resume
    """
    from cutegen.cli.search import search_with_progress
    from cutegen.codegen import toolchain
    from cutegen.codegen.ceilings import measure_ceilings
    from cutegen.codegen.roofline import H200_MEASURED
    from cutegen.search.report.bench import error_result
    from cutegen.search.report.bench_table import BenchReport, task_table, write_outputs

    s = _suite(suite, kernelbench, level, problems, max_evals)
    if precision != "native" or atol is not None or rtol is not None:
        # each task's variant, a task file of its own (before the run names: a variant's
        # runs are named after it)
        from cutegen.codegen.suites import with_precision

        s = with_precision(s, precision, variants_folder(db), atol=atol, rtol=rtol)
    if gpus is not None and gpu is not None:
        raise ConfigError("give --gpu or --gpus, not both")
    if jobs is None:  # one job per GPU given
        from cutegen.codegen.pool import parse_gpus

        jobs = len(parse_gpus(gpus) or ()) or 1 if not compile_only else 1
    budget = max_evals or s.max_evals
    if not compile_only:
        require_gpu("benchmarking (verifying and timing candidates)")
    if resume and not run_prefix:
        raise ConfigError("--resume needs the --run-prefix of the bench to continue")
    t0 = _clock()
    prefix = run_prefix or f"bench-{s.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    names: list[str] = []
    seen: dict[str, int] = {}
    for t in s.tasks:  # a task listed twice (e.g. in two tiers) gets -2, -3, ...
        base = f"{prefix}-{t.label}"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    taken = [n for n in names if _has_run(db, n)]
    if taken and not resume:
        raise DuplicatedRunError(f"runs {taken} exist in {db}; choose another --run-prefix "
                                 "(or continue that bench with --resume)")
    if resume:  # a run another evaluator version judged is not continued or read back
        # (its verdicts and times would mix two evaluators): the task runs again beside it
        from cutegen.codegen.evaluation import HARNESS_VERSION

        for k, name in enumerate(names):
            other = _judged_elsewhere(db, name) if name in taken else {}
            if other:
                names[k] = f"{name}-h{HARNESS_VERSION}"
                again = _has_run(db, names[k])
                click.echo(f"{name}: its evaluations were judged by evaluator version "
                           f"{', '.join(map(str, sorted(other)))}, this cutegen's is "
                           f"{HARNESS_VERSION}: the task "
                           + (f"is in {names[k]}" if again else f"runs again as {names[k]}")
                           + " (the old run stays in the store)", err=True)
                if again:
                    taken.append(names[k])
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
    from cutegen.cli.llm import build_llm_config

    llm_config = build_llm_config(**llm)
    if rewriter == "builtin" and llm_config is not None:
        rewriter = "mixed"  # as `cutegen search`: a configured model makes mixed the default
    base_settings = RunSettings(seed=seed, rewriter=rewriter,  # type: ignore[arg-type]
                                budget=Budget(max_evals=budget, max_gpu_s=None if max_gpu_minutes is None
                                     else max_gpu_minutes * 60,
                                     max_usd=llm.get("max_dollars")),
                       eval=eval_options(compile_only, arch, None, None, eval_timeout),
                       llm=LLMSettings.from_config(llm_config))

    def kwargs_for(entry: Any, name: str, past_s: float | None) -> tuple[str, dict[str, Any]]:
        """What a job child runs: the library call and its arguments (JSON)."""
        if past_s is not None:  # resumed: the run keeps its task, seed, rewriter and devices
            return "resume", {"name": name, "db": db, "budget": base_settings.budget.to_dict(),
                              "llm": llm}
        kb = entry.kernelbench
        settings = base_settings.replace(seed_candidates=api.seed_candidates(entry.seed_candidates))
        return "search", {"task": None if kb else entry.task, "kernelbench": kb,
                          "name": name, "db": db, "settings": settings.to_dict(), "llm": llm}

    def time_left() -> float | None:
        return None if max_minutes is None else max_minutes * 60 - (_clock() - t0)

    results: dict[int, Any] = {}
    todo: list[tuple[int, Any, str, float | None]] = []

    def report_of(missing: str) -> BenchReport:
        ordered = [results.get(i) or error_result(entry, missing)
                   for i, entry in enumerate(s.tasks, start=1)]
        return BenchReport(
            suite=s.name, description=s.description, date=time.strftime("%Y-%m-%d %H:%M %Z"),
            command=_command_line(ctx), versions=toolchain.versions(), ceilings=measured,
            ceilings_note=note, max_evals=budget, compile_only=compile_only,
            tasks=tuple(ordered),
            settings={"rewriter": rewriter, "seed": seed, "max_gpu_minutes": max_gpu_minutes,
                      "model": llm.get("model"), "db": db, "run_prefix": prefix})

    def checkpoint() -> None:
        """The table so far, written after every task: a bench stopped from outside (a
        killed job, a machine taken back) leaves what it finished in --out."""
        if out:
            try:
                write_outputs(report_of(NOT_YET), Path(out))
            except OSError as e:
                click.echo(f"could not write the table so far into {out}: {e}", err=True)

    for i, (entry, name) in enumerate(zip(s.tasks, names, strict=True), start=1):
        past_s = _past_wall_s(db, name, budget) if name in taken else None
        if past_s is not None and past_s < 0:  # finished earlier: read it, search nothing
            click.echo(f"[{i}/{len(s.tasks)}] {entry.label}: run {name} (finished earlier)",
                       err=True)
            results[i], _ = _collect(db, name, entry, ceil, out if reports else None)
        else:
            todo.append((i, entry, name, past_s))
    n = len(s.tasks)
    if jobs > 1 and len(todo) > 1:
        _run_concurrently(todo, jobs=jobs, gpus=gpus, gpu=gpu, kwargs_for=kwargs_for,
                          time_left=time_left, results=results, n=n, db=db, ceil=ceil,
                          out=out, reports=reports, taken=taken, compile_only=compile_only,
                          on_result=checkpoint)
    else:  # one job (or one task left): in this process, on the first job's GPU
        if jobs > 1 and not compile_only:
            gpu = _job_gpus(jobs, gpus, gpu)[0]
        for i, entry, name, past_s in todo:
            left_s = time_left()
            if left_s is not None and left_s < _MIN_TASK_S:
                click.echo(f"[{i}/{n}] {entry.label}: not run (--max-minutes)", err=True)
                results[i] = _stored_or_error(db, name, entry, ceil,
                                              out if reports else None, NOT_RUN)
                checkpoint()
                continue
            click.echo(f"[{i}/{n}] {entry.label}: run {name}"
                       + (" (resumed)" if past_s is not None else ""), err=True)
            command, kwargs = kwargs_for(entry, name, past_s)
            if left_s is not None:
                kwargs["max_minutes"] = (left_s + (past_s or 0.0)) / 60
            if command == "search":
                kwargs["gpu"] = gpu
            try:
                with _stdout_to_stderr():
                    search_with_progress(open_job_run(command, kwargs, llm_config), db)
            except GPURequiredError:
                raise
            except CuteGenError as e:
                click.echo(f"  {entry.label}: {e}", err=True)
                # a resumption that failed (e.g. the run's files were not brought along with
                # the store) still shows what the run evaluated before, flagged
                results[i] = _stored_or_error(db, name, entry, ceil,
                                              out if reports else None, str(e))
                checkpoint()
                continue
            results[i], status = _collect(db, name, entry, ceil, out if reports else None)
            checkpoint()
            if status == "stopped":
                click.echo("interrupted: the remaining tasks were not run", err=True)
                break
    report = report_of("not run: the bench was interrupted")
    _print(report, task_table)
    if out:
        for p in write_outputs(report, Path(out)):
            click.echo(f"wrote {p}", err=True)


def _print(report: Any, task_table: Any) -> None:
    from cutegen.search.report.bench_table import MEANS_NOTE, summary_table

    click.echo(task_table(report.tasks))
    click.echo("")
    click.echo(summary_table(report.summary))
    click.echo("")
    click.echo(MEANS_NOTE)
    flags = [f"  {t.task}: {f}" for t in report.tasks for f in t.flags]
    if flags:
        click.echo("\nsanity flags (PERFORMANCE.md §6), for a person to check:")
        click.echo("\n".join(flags))
