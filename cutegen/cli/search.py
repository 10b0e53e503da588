"""``cutegen search``, ``resume``, ``status`` and ``show``: run and inspect tree searches.

Only parsing, composition and printing live here; the search itself is
:class:`cutegen.search.Search`. Data goes to stdout, progress and messages to stderr.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import click

from cutegen import api
from cutegen.cli.devices import device_options
from cutegen.cli.llm import llm_options
from cutegen.cli.options import (
    DEFAULT_DB,
    db_option,
    eval_options,
    precision_option,
    tolerance_options,
    variant_words,
    variants_folder,
)
from cutegen.errors import (
    DuplicatedRunError,
    GPURequiredError,
    InfrastructureError,
    StorageError,
)
from cutegen.search import Budget, RunSummary
from cutegen.settings import LLMSettings, ProfilingSettings, RunSettings


def profiling_options(f: Any) -> Any:
    """Delayed profiling: when, how deep, which plugins (``cutegen plugins`` lists them)."""
    from cutegen.cli.plugins import profiler_options

    f = profiler_options(f)
    for opt in reversed([
        click.option("--profiling", type=click.Choice(["auto", "force", "off"]),
                     default="auto", show_default=True,
                     help="auto: profile correct nodes at --profile-depth or deeper; force: "
                          "every successful node; off: never."),
        click.option("--profile-depth", type=click.IntRange(1, None), default=3,
                     show_default=True,
                     help="Depth from which correct nodes are profiled (seeds are depth 1)."),
        click.option("--profile-timeout", type=float, default=120.0, show_default=True,
                     help="Seconds allowed for each profiler on one node."),
    ]):
        f = opt(f)
    return f


def budget_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--max-evals", type=click.IntRange(1, None), default=None,
                     help="Stop after this many evaluations."),
        click.option("--max-minutes", type=click.FloatRange(0, None, min_open=True),
                     default=None, help="Stop after this much wall time (all sessions)."),
        click.option("--max-gpu-minutes", type=click.FloatRange(0, None, min_open=True),
                     default=None, help="Stop after this much GPU time: each "
                                        "evaluation's time on its GPU (compile, calls, "
                                        "verification, timing), profiling and "
                                        "re-timing."),
        click.option("--max-dollars", type=click.FloatRange(0, None, min_open=True),
                     default=None, help="Stop after this much LLM spending."),
    ]):
        f = opt(f)
    return f


def budget_from_options(max_evals: int | None, max_minutes: float | None,
                        max_gpu_minutes: float | None, max_dollars: float | None) -> Budget:
    """The Budget the budget options describe."""
    return Budget(max_evals=max_evals,
                  max_wall_s=None if max_minutes is None else max_minutes * 60,
                  max_gpu_s=None if max_gpu_minutes is None else max_gpu_minutes * 60,
                  max_usd=max_dollars)


@click.command("search")
@click.argument("task", required=False)
@click.option("--kernelbench", type=click.Path(file_okay=False), default=None,
              help="A KernelBench checkout; use with --level and --problem instead of TASK.")
@click.option("--level", type=int, default=None, help="KernelBench level.")
@click.option("--problem", type=int, default=None, help="KernelBench problem number.")
@precision_option
@tolerance_options
@budget_options
@click.option("--run", "run_name", default=None,
              help="Name of the run (default: the task name and a timestamp).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Run seed: the same seed, task and results give the same tree.")
@db_option
@click.option("--rewriter", type=click.Choice(["builtin", "llm", "mixed"]), default="builtin",
              show_default=True, help="Who proposes candidates.")
@click.option("--seed-candidate", "seed_files", multiple=True,
              type=click.Path(dir_okay=False, exists=True),
              help="A candidate file to start from (repeatable), besides the bundled seeds.")
@click.option("--compile-only", is_flag=True,
              help="Only compile candidates (no GPU needed); nothing is timed.")
@click.option("--arch", default="sm_90a", show_default=True, help="Target for --compile-only.")
@click.option("--gpu", type=int, default=None, help="GPU index for the workers.")
@click.option("--timeout", type=click.FloatRange(1, None), default=None,
              help="Seconds one candidate may take in any phase but compiling (import, "
                   "one call, the benchmark) before it is killed and recorded as a "
                   "timeout.  [default: 120]")
@click.option("--eval-timeout", type=click.FloatRange(1, None), default=None,
              help="Seconds one evaluation's calls and output checks may take together; "
                   "past it the candidate is a timeout where its own calls took most of "
                   "them, else the evaluation fails as the machine's and the run pauses.  "
                   "[default: 900]")
@device_options
@profiling_options
@llm_options(own_max_dollars=False)
def search_cmd(task: str | None, kernelbench: str | None, level: int | None,
               problem: int | None, precision: str, atol: float | None, rtol: float | None, max_evals: int | None,
               max_minutes: float | None,
               max_gpu_minutes: float | None, max_dollars: float | None,
               run_name: str | None, seed: int, db: str, rewriter: str,
               seed_files: tuple[str, ...], compile_only: bool, arch: str,
               gpu: int | None, timeout: float | None, eval_timeout: float | None,
               gpus: str | None, backend: str | None,
               ray_address: str | None, compile_ahead: int | None, profiling: str,
               profile_depth: int, profile_timeout: float, profilers: str | None,
               disable_profilers: str, llm_config: Any) -> None:
    """Search for fast CuTe DSL kernels for TASK with a Monte-Carlo tree search.

    TASK is a task file or a bundled task name (`cutegen tasks`), or omitted with
    --kernelbench DIR --level L --problem P. Every step is committed to the store, so
    Ctrl-C (finishes the current evaluation first), a crash or kill -9 lose nothing:
    `cutegen resume RUN` continues exactly where it stopped.

    \b
    Examples:
      cutegen search softmax_fp32 --max-evals 40
      cutegen search my_task.py --seed-candidate mine.py --max-minutes 30 --run try1
      cutegen search sum_rows_fp32 --compile-only --max-evals 10     (no GPU needed)
      cutegen search --kernelbench ~/KernelBench --level 1 --problem 23 --precision bf16
      cutegen search softmax_fp32 --gpus all --max-evals 200         (every GPU here)
      cutegen search softmax_fp32 --backend ray --ray-address auto   (a Ray cluster)
    """
    from cutegen.codegen.tasks import resolve_task

    if run_name is not None:  # a taken name is refused at once, before anything slow
        with contextlib.closing(api.open_store(db)) as store:
            if any(r.name == run_name for r in store.list_runs()):
                raise DuplicatedRunError(
                    f"a run named {run_name!r} already exists in {db}; resume it with "
                    f"`cutegen resume {run_name}` or choose another --run name")
    t = resolve_task(task, kernelbench=kernelbench, level=level, problem=problem)
    if precision != "native" or atol is not None or rtol is not None:
        from cutegen.codegen.variants import make_variant

        t = make_variant(t, precision, variants_folder(db), atol=atol, rtol=rtol)
        click.echo(f"{t.name}: {variant_words(precision, atol, rtol)}, {t.path}",
                   err=True)
    if rewriter == "builtin" and llm_config is not None:
        rewriter = "mixed"  # a configured model makes `mixed` the default (DESIGN.md seams)
        click.echo("--model given: using --rewriter mixed", err=True)
    devices = api.resolve_devices(gpus=gpus, backend=backend, ray_address=ray_address,
                                  compile_ahead=compile_ahead, gpu=gpu,
                                  compile_only=compile_only)
    settings = RunSettings(
        seed=seed, rewriter=rewriter,  # type: ignore[arg-type]  # click.Choice checked it
        budget=budget_from_options(max_evals, max_minutes, max_gpu_minutes, max_dollars),
        eval=eval_options(compile_only, arch, gpu, timeout, eval_timeout),
        profiling=ProfilingSettings(mode=profiling, depth=profile_depth,  # type: ignore[arg-type]
                                    timeout_s=profile_timeout, only=profilers,
                                    disabled=disable_profilers),
        llm=LLMSettings.from_config(llm_config), devices=devices,
        seed_candidates=api.seed_candidates(seed_files))
    if devices is not None:
        settings = settings.replace(params=dataclasses.replace(settings.params,
                                                               parallel=devices.width))
    if all(v is None for v in settings.budget.to_dict().values()):
        click.echo("no budget given: the search runs until every branch is exhausted or "
                   "Ctrl-C (see --max-evals, --max-minutes, --max-gpu-minutes)", err=True)
    run = api.create_run(t, settings, db=db, name=run_name, llm_config=llm_config)
    click.echo(f"run {run.name}: {t.name}, seed {seed}, store {db}", err=True)
    run_with_progress(run, db)


@click.command("resume")
@click.argument("run_name")
@db_option
@budget_options
@device_options
@llm_options(own_max_dollars=False)
def resume_cmd(run_name: str, db: str, max_evals: int | None, max_minutes: float | None,
               max_gpu_minutes: float | None, max_dollars: float | None, gpus: str | None,
               backend: str | None, ray_address: str | None, compile_ahead: int | None,
               llm_config: Any) -> None:
    """Continue RUN exactly where it stopped (after Ctrl-C, a crash or kill -9).

    Refuses when the task file or the toolchain (torch, nvidia-cutlass-dsl, cutegen, GPU)
    changed since the run started. Budget options replace the stored ones (to extend a
    run that finished on its budget). Device options replace the stored ones too; the
    number of evaluations in flight stays the run's, so the resumed tree is the one the
    run would have built (a run started on one GPU stays serial).
    """
    budget = None
    if any(v is not None for v in (max_evals, max_minutes, max_gpu_minutes, max_dollars)):
        budget = budget_from_options(max_evals, max_minutes, max_gpu_minutes, max_dollars)
    with contextlib.closing(api.open_store(db, must_exist=True)) as store:
        stored = RunSettings.from_dict(store.get_run(run_name).config.settings)
    devices = api.resolve_devices(gpus=gpus, backend=backend, ray_address=ray_address,
                                  compile_ahead=compile_ahead,
                                  gpu=None if gpus is not None else stored.eval.gpu,
                                  compile_only=stored.eval.compile_only,
                                  stored=stored.devices)
    run = api.resume_run(run_name, db=db, budget=budget, devices=devices,
                         llm_config=llm_config)
    click.echo(f"resuming run {run_name}: {run.task.name}, seed {run.settings.seed}", err=True)
    run_with_progress(run, db)


class _StopFlag:
    """First Ctrl-C asks the search to stop after the current evaluation; the second aborts."""

    def __init__(self) -> None:
        self.set = False

    def __call__(self) -> bool:
        return self.set

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        def handler(signum: int, frame: object) -> None:
            if self.set:
                raise KeyboardInterrupt
            self.set = True
            click.echo("\nstopping after the current evaluation (Ctrl-C again to abort; "
                       "nothing committed is lost either way)", err=True)

        try:
            old = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread (e.g. some test runners)
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, old)


def run_with_progress(run: api.SearchRun, db: str) -> RunSummary:
    """Search ``run`` to its end with a progress display on stderr and the summary on
    stdout; the first Ctrl-C stops after the evaluation in flight (exit status 130)."""
    summary = search_with_progress(run, db)
    if summary.status == "stopped":
        raise click.exceptions.Exit(130)
    return summary


def search_with_progress(run: api.SearchRun, db: str) -> RunSummary:
    """:func:`run_with_progress` for callers that go on after a stop (``cutegen bench``)."""
    from cutegen.cli.search_view import Progress, print_summary

    stop = _StopFlag()
    db_arg = "" if db == DEFAULT_DB else f" --db {db}"
    try:
        with run.open() as search, stop.installed(), \
                Progress(search, run.settings.budget) as progress:
            summary = search.run(should_stop=stop, on_step=progress.update)
    except InfrastructureError as e:
        # the machine failed, not a candidate: the node is requeued and every result kept.
        # The same error (its type says what failed: callers stop on GPURequiredError), with
        # the way on; a machine without a GPU has none to offer
        if not isinstance(e, GPURequiredError):
            e.args = (f"{e}\nthe run is kept; once the machine is sound again, continue "
                      f"with: cutegen resume {run.name}{db_arg}", *e.args[1:])
        raise
    finally:
        run.close()
    print_summary(summary)
    if summary.status == "stopped":
        click.echo(f"stopped; continue with: cutegen resume {run.name}{db_arg}", err=True)
    return summary


@click.command("status")
@click.argument("run_name", required=False)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(run_name: str | None, db: str, as_json: bool) -> None:
    """What the store holds: every run, or one RUN in detail (evaluations, verdicts, best
    speedup, state). Safe while a search is running."""
    from cutegen.cli.search_view import print_status, run_status

    storage = api.open_store(db, must_exist=True, readonly=True)
    try:
        runs = [storage.get_run(run_name)] if run_name else storage.list_runs()
        rows = [run_status(storage, r, detail=run_name is not None) for r in runs]
    finally:
        storage.close()
    if as_json:
        click.echo(json.dumps(rows[0] if run_name else rows, indent=2))
    else:
        print_status(rows, detail=run_name is not None)


@click.command("show")
@click.argument("run_name")
@click.argument("node", type=int)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show_cmd(run_name: str, node: int, db: str, as_json: bool) -> None:
    """One NODE of RUN: its lineage (the moves from its seed), evaluation, guidance,
    lessons and source."""
    from cutegen.cli.search_view import node_detail, print_node

    storage = api.open_store(db, must_exist=True, readonly=True)
    try:
        run = storage.get_run(run_name)
        n = storage.get_node(node)
        if n.run_id != run.id:
            raise StorageError(f"node {node} does not belong to run {run_name!r}")
        detail = node_detail(storage, n)
    finally:
        storage.close()
    if as_json:
        click.echo(json.dumps(detail, indent=2))
    else:
        print_node(detail)


@click.command("nodes")
@click.argument("run_name")
@db_option
@click.option("--failed", is_flag=True, help="Only the nodes whose evaluation failed.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def nodes_cmd(run_name: str, db: str, failed: bool, as_json: bool) -> None:
    """The nodes of RUN: number (what `cutegen show` and `export` take), depth, move,
    verdict, speedup and, for failures, the message."""
    from cutegen.cli.table import print_table
    from cutegen.codegen.evaluation import plain_text

    with contextlib.closing(api.open_store(db, must_exist=True, readonly=True)) as storage:
        run = storage.get_run(run_name)
        rows: list[dict[str, Any]] = []
        for n in storage.get_nodes(run.id):
            ev = storage.get_evaluation(n.id)
            if failed and (ev is None or ev.ok):
                continue
            rows.append({"node": n.id, "parent": n.parent_id, "depth": n.depth,
                         "state": n.state.label, "move": n.move.description,
                         "verdict": ev.verdict.value if ev else None,
                         "speedup": ev.speedup_eager if ev else None,
                         "message": plain_text(ev.message) if ev and not ev.ok else ""})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    print_table(["node", "depth", "verdict", "speedup", "move", "message"],
                [[str(r["node"]), str(r["depth"]), r["verdict"] or r["state"],
                  f"{r['speedup']:.2f}x" if r["speedup"] else "-", r["move"],
                  r["message"].splitlines()[0][:200] if r["message"] else ""] for r in rows])


@click.command("rm")
@click.argument("run_names", nargs=-1, required=True, metavar="RUN...")
@db_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
def rm_cmd(run_names: tuple[str, ...], db: str, yes: bool) -> None:
    """Remove RUNs from the store, with their files (runs/<run>/). A run that a live
    search holds is refused."""
    from cutegen.errors import RunLockedError
    from cutegen.search import session_live

    with contextlib.closing(api.open_store(db, must_exist=True)) as storage:
        runs = [storage.get_run(n) for n in run_names]
        for run in runs:
            live = [s for s in storage.get_sessions(run.id)
                    if session_live(s, now=time.time())]
            if live:
                raise RunLockedError(f"run {run.name!r} is being searched (pid {live[0].pid} "
                                     f"on {live[0].host}); stop it first")
        if not yes:
            click.confirm(f"remove {len(runs)} run(s) and their files from {db}?", abort=True,
                          err=True)
        for run in runs:
            storage.delete_run(run.id)
            click.echo(f"removed run {run.name}", err=True)


def register(cli: click.Group) -> None:
    """Attach the search commands to the ``cutegen`` group."""
    for cmd in (search_cmd, resume_cmd, status_cmd, nodes_cmd, show_cmd, rm_cmd):
        cli.add_command(cmd)

