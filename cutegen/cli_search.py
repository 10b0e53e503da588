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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from cutegen import _cli_devices
from cutegen._cli_devices import device_options
from cutegen._cli_options import DEFAULT_DB, db_option
from cutegen.cli_llm import llm_options
from cutegen.errors import ConfigError, ResumeMismatchError, StorageError, TaskError


def profiling_options(f: Any) -> Any:
    """Delayed profiling: when, how deep, which plugins (``cutegen plugins`` lists them)."""
    from cutegen.cli_plugins import profiler_options

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
                     default=None, help="Stop after this much GPU time (verify, benchmark, "
                                        "re-timing)."),
        click.option("--max-dollars", type=click.FloatRange(0, None, min_open=True),
                     default=None, help="Stop after this much LLM spending."),
    ]):
        f = opt(f)
    return f


def _budget(max_evals: int | None, max_minutes: float | None, max_gpu_minutes: float | None,
            max_dollars: float | None) -> Any:
    from cutegen.search import Budget

    return Budget(max_evals=max_evals, max_wall_s=None if max_minutes is None else max_minutes * 60,
                  max_gpu_s=None if max_gpu_minutes is None else max_gpu_minutes * 60,
                  max_usd=max_dollars)


def _make_evaluator(task: Any, options: Any, run_dir: Path, storage: Any) -> Any:
    """The evaluator for a run (tests replace this function with a fake)."""
    if not options.compile_only:
        from cutegen.cli_eval import require_gpu

        require_gpu("searching (verifying and timing candidates)")
    try:
        from cutegen.codegen.eval.evaluator import make_evaluator
    except ModuleNotFoundError as e:  # pragma: no cover - only in a partial checkout
        raise ConfigError(f"the evaluator is not available in this build ({e})") from e
    from cutegen.search.storage import StoreBaselineCache

    return make_evaluator(task, options, run_dir, baseline_cache=StoreBaselineCache(storage))


def _make_pool(task: Any, options: Any, run_dir: Path, storage: Any,
               devices: dict[str, Any]) -> Any:
    """The evaluator of a multi-device run (tests replace this function with fakes)."""
    return _cli_devices.make_pool(task, options, run_dir, storage, devices)


def _open_store(db: str, *, must_exist: bool) -> Any:
    from cutegen.search.storage import SqliteStorage

    if must_exist and not Path(db).is_file():
        raise StorageError(f"no store at {db} (`cutegen search` creates one; --db picks "
                           "another)")
    return SqliteStorage(db)


@click.command("search")
@click.argument("task", required=False)
@click.option("--kernelbench", type=click.Path(file_okay=False), default=None,
              help="A KernelBench checkout; use with --level and --problem instead of TASK.")
@click.option("--level", type=int, default=None, help="KernelBench level.")
@click.option("--problem", type=int, default=None, help="KernelBench problem number.")
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
@device_options
@profiling_options
@llm_options(own_max_dollars=False)
def search_cmd(task: str | None, kernelbench: str | None, level: int | None,
               problem: int | None, max_evals: int | None, max_minutes: float | None,
               max_gpu_minutes: float | None, max_dollars: float | None,
               run_name: str | None, seed: int, db: str, rewriter: str,
               seed_files: tuple[str, ...], compile_only: bool, arch: str,
               gpu: int | None, gpus: str | None, backend: str | None,
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
      cutegen search softmax_fp32 --gpus all --max-evals 200         (every GPU here)
      cutegen search softmax_fp32 --backend ray --ray-address auto   (a Ray cluster)
    """
    from cutegen.codegen import toolchain
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.rewriters.builtin import BuiltinRewriter
    from cutegen.codegen.tasks import resolve_task
    from cutegen.search import SearchParams
    from cutegen.search.storage import RunConfig

    t = resolve_task(task, kernelbench=kernelbench, level=level, problem=problem)
    if rewriter == "builtin" and llm_config is not None:
        rewriter = "mixed"  # a configured model makes `mixed` the default (DESIGN.md seams)
        click.echo("--model given: using --rewriter mixed", err=True)
    if rewriter != "builtin" and llm_config is None:
        raise ConfigError(f"--rewriter {rewriter} needs a model: give --model (and --base-url "
                          "for a local server); see `cutegen search --help`")
    if rewriter == "builtin":
        rw = BuiltinRewriter(seed_files=seed_files)
        if not rw.seeds(t):
            raise ConfigError(f"no seed candidate for {t.name}: {rw.not_covered(t)}")
    budget = _budget(max_evals, max_minutes, max_gpu_minutes, max_dollars)
    # the builtin rewriter has only cheap moves, the llm one only expensive ones
    params = (SearchParams(expensive=None) if rewriter == "builtin"
              else SearchParams(cheap=None) if rewriter == "llm" else SearchParams())
    opts = EvalOptions(compile_only=compile_only, arch=arch, gpu=gpu)
    devices = _cli_devices.resolve(gpus=gpus, backend=backend, ray_address=ray_address,
                                   compile_ahead=compile_ahead, gpu=gpu,
                                   compile_only=compile_only)
    params = dataclasses.replace(params, parallel=_cli_devices.width(devices))
    settings = {"params": params.to_dict(), "budget": budget.to_dict(),
                "eval_options": dataclasses.asdict(opts), "rewriter": rewriter,
                "profiling": {"mode": profiling, "depth": profile_depth,
                              "timeout_s": profile_timeout, "only": profilers,
                              "disabled": disable_profilers},
                "llm": _llm_settings(llm_config),
                "seed_candidates": [{"path": str(Path(p).resolve()),
                                     "sha256": CandidateSource.from_path(p).sha256}
                                    for p in seed_files]}
    if devices is not None:
        settings["devices"] = devices
    if all(v is None for v in budget.to_dict().values()):
        click.echo("no budget given: the search runs until every branch is exhausted or "
                   "Ctrl-C (see --max-evals, --max-minutes, --max-gpu-minutes)", err=True)
    name = run_name or f"{t.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    storage = _open_store(db, must_exist=False)
    try:
        run = storage.create_run(name, RunConfig(t.name, str(t.path), t.sha256, seed,
                                                 toolchain.versions(), settings))
        click.echo(f"run {name}: {t.name}, seed {seed}, store {db}", err=True)
        _drive(storage, run, t, params, budget, opts, db, settings, llm_config)
    finally:
        storage.close()


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
    from cutegen.codegen import toolchain
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import sha256_text
    from cutegen.codegen.tasks import Task, load_task_file
    from cutegen.search import Budget, SearchParams, check_resume

    storage = _open_store(db, must_exist=True)
    try:
        run = storage.get_run(run_name)
        cfg, settings = run.config, dict(run.config.settings)
        try:
            task = load_task_file(cfg.task_path, name=cfg.task_name)
        except TaskError as e:
            task = Task(cfg.task_name, Path(cfg.task_path), "", "file")
            if not Path(cfg.task_path).is_file():
                raise ResumeMismatchError(f"cannot resume run {run_name!r}: {e}") from e
        check_resume(run, task, toolchain.versions())
        seeds = settings.get("seed_candidates", [])
        for s in seeds:
            p = Path(s["path"])
            if not p.is_file() or sha256_text(p.read_text(encoding="utf-8")) != s["sha256"]:
                raise ResumeMismatchError(f"cannot resume run {run_name!r}: seed candidate "
                                          f"{p} is missing or changed")
        budget = Budget.from_dict(settings.get("budget", {}))
        if any(v is not None for v in (max_evals, max_minutes, max_gpu_minutes, max_dollars)):
            budget = _budget(max_evals, max_minutes, max_gpu_minutes, max_dollars)
        params = SearchParams.from_dict(settings.get("params", {}))
        opts = EvalOptions(**settings.get("eval_options", {}))
        devices = _cli_devices.resolve(gpus=gpus, backend=backend, ray_address=ray_address,
                                       compile_ahead=compile_ahead,
                                       gpu=None if gpus is not None else opts.gpu,
                                       compile_only=opts.compile_only,
                                       stored=settings.get("devices"))
        if devices is not None:
            settings["devices"] = devices
        if settings.get("rewriter", "builtin") != "builtin":
            stored = settings.get("llm") or {}
            if llm_config is None:
                raise ConfigError(f"run {run_name!r} uses the LLM (model {stored.get('model')!r}): "
                                  "give --model (and --base-url) again to resume it; the key "
                                  "is never stored")
        click.echo(f"resuming run {run_name}: {cfg.task_name}, seed {cfg.seed}", err=True)
        _drive(storage, run, task, params, budget, opts, db, settings, llm_config)
    finally:
        storage.close()


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


def _llm_settings(cfg: Any) -> dict[str, Any] | None:
    """What of the LLM configuration is stored on the run (never the key)."""
    if cfg is None:
        return None
    return {"model": cfg.model, "base_url": cfg.base_url, "max_dollars": cfg.max_dollars,
            "max_tokens": cfg.max_tokens}


def _rewriter(settings: dict[str, Any], storage: Any, run: Any, evaluator: Any,
              llm_config: Any) -> Any:
    from cutegen.codegen.rewriters.builtin import BuiltinRewriter

    seeds = [s["path"] for s in settings.get("seed_candidates", [])]
    builtin = BuiltinRewriter(seed_files=seeds)
    kind = settings.get("rewriter", "builtin")
    if kind == "builtin":
        return builtin
    from cutegen.codegen.llm import LLMClient
    from cutegen.codegen.llm.store_adapter import StoreCallRecorder
    from cutegen.codegen.rewriters.llm import LLMRewriter, compile_check_from
    from cutegen.codegen.rewriters.mixed import MixedRewriter

    client = LLMClient(llm_config, StoreCallRecorder(storage, run.id))
    llm = LLMRewriter(client, compile_check=compile_check_from(evaluator))
    return llm if kind == "llm" else MixedRewriter(llm, builtin)


def _profile_hook(settings: dict[str, Any], evaluator: Any, storage: Any, run_dir: Path) -> Any:
    from cutegen.cli_plugins import plugin_manager_from_options
    from cutegen.plugins import available_profilers
    from cutegen.profilers._hook import make_profile_hook

    p = settings.get("profiling") or {"mode": "off"}
    if p.get("mode", "auto") == "off":
        return None
    pm = plugin_manager_from_options(p.get("only"), p.get("disabled") or "")
    profs = {n: pr for n, pr in available_profilers(pm).items() if pr.is_available()}
    return make_profile_hook(evaluator=evaluator, storage=storage, profilers=profs,
                             profile_depth=int(p.get("depth", 3)), mode=p.get("mode", "auto"),
                             run_dir=run_dir, timeout_s=float(p.get("timeout_s", 120.0)))


def _drive(storage: Any, run: Any, task: Any, params: Any, budget: Any, opts: Any, db: str,
           settings: dict[str, Any], llm_config: Any = None) -> None:
    from cutegen.cli_search_view import Progress, print_summary
    from cutegen.search import Search

    run_dir = storage.run_dir(run.id)
    devices = settings.get("devices")
    evaluator = (_make_pool(task, opts, run_dir, storage, devices) if devices
                 else _make_evaluator(task, opts, run_dir, storage))
    rewriter = _rewriter(settings, storage, run, evaluator, llm_config)
    hook = _profile_hook(settings, evaluator, storage, run_dir)
    if hook is not None and hasattr(evaluator, "serialize_profiling"):
        hook = evaluator.serialize_profiling(hook)  # ncu & co. alone on their GPU
    stop = _StopFlag()
    try:
        with Search(storage=storage, run=run, task=task, evaluator=evaluator,
                    rewriter=rewriter, params=params, budget=budget,
                    profile_hook=hook) as search, \
                stop.installed(), Progress(search, budget) as progress:
            summary = search.run(should_stop=stop, on_step=progress.update)
    finally:
        close: Callable[[], None] | None = getattr(evaluator, "close", None)
        if close is not None:
            close()
    print_summary(summary)
    if summary.status == "stopped":
        db_arg = "" if db == DEFAULT_DB else f" --db {db}"
        click.echo(f"stopped; continue with: cutegen resume {run.name}{db_arg}", err=True)


@click.command("status")
@click.argument("run_name", required=False)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status_cmd(run_name: str | None, db: str, as_json: bool) -> None:
    """What the store holds: every run, or one RUN in detail (evaluations, verdicts, best
    speedup, state). Safe while a search is running."""
    from cutegen.cli_search_view import print_status, run_status

    storage = _open_store(db, must_exist=True)
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
    from cutegen.cli_search_view import node_detail, print_node

    storage = _open_store(db, must_exist=True)
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


def register(cli: click.Group) -> None:
    """Attach the search commands to the ``cutegen`` group."""
    for cmd in (search_cmd, resume_cmd, status_cmd, show_cmd):
        cli.add_command(cmd)

