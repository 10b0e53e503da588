"""The library entry point: a search run from typed settings, as Optuna's
``create_study`` / ``load_study`` make a study.

::

    import cutegen
    settings = cutegen.RunSettings(budget=cutegen.Budget(max_evals=3),
                                   eval=cutegen.EvalOptions(compile_only=True))
    summary = cutegen.create_run("softmax_bf16", settings, db="runs/demo.db").search()

:func:`create_run` checks everything that can be checked before anything is stored (the
store and the run name first, then the task, the rewriter's seeds, the GPU, the LLM
configuration and the profiler plugins), then stores the run with its settings.
:func:`resume_run` reopens a stored run and refuses a changed task file, toolchain or seed
candidate. Both return a :class:`SearchRun`, which composes the collaborators of a
:class:`~cutegen.search.Search` (evaluator or device pool, rewriter, delayed-profiling hook)
from the settings and runs it. ``cutegen search``, ``cutegen resume``, ``cutegen bench`` and
the bench's job processes all go through here; the CLI only parses options and prints.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutegen.codegen import toolchain
from cutegen.codegen.backend import Evaluator, require_gpu
from cutegen.codegen.candidate import CandidateSource, sha256_text
from cutegen.codegen.eval.evaluator import local_evaluator
from cutegen.codegen.tasks import Task, load_task_file, resolve_task
from cutegen.errors import (
    ConfigError,
    DuplicatedRunError,
    GPURequiredError,
    ResumeMismatchError,
    StorageError,
    TaskError,
)
from cutegen.search import Budget, RunSummary, Search, StepReport, check_resume
from cutegen.search.storage import (
    BaseStorage,
    FrozenRun,
    RunConfig,
    SqliteStorage,
    StoreCallRecorder,
)
from cutegen.settings import DeviceSettings, RunSettings, SeedCandidate

if TYPE_CHECKING:
    from cutegen.codegen.llm import LLMConfig
    from cutegen.codegen.rewriters.base import Rewriter
    from cutegen.search import ProfileHook

#: The store used when none is named (``--db``, ``CUTEGEN_DB``).
DEFAULT_DB = "runs/cutegen.db"

TaskSpec = str | Path | Task


# -- the store ----------------------------------------------------------------------------
def open_store(db: str | Path = DEFAULT_DB, *, must_exist: bool = False,
               readonly: bool = False) -> SqliteStorage:
    """Open the SQLite store at ``db``.

    Args:
        must_exist: refuse to create a new store (commands that only read).
        readonly: open without writing anything (works on a read-only mount).

    Raises:
        StorageError: no store there (with ``must_exist``), or it cannot be opened.
    """
    if must_exist and not Path(db).is_file():
        raise StorageError(f"no store at {db} (`cutegen search` creates one; --db picks "
                           "another)")
    return SqliteStorage(db, readonly=readonly) if readonly else SqliteStorage(db)


def _task(spec: TaskSpec) -> Task:
    if isinstance(spec, Task):
        return spec
    return resolve_task(str(spec))


# -- the collaborators, from settings -----------------------------------------------------
def make_evaluator(task: Task, settings: RunSettings, run_dir: Path,
                   storage: BaseStorage) -> Evaluator:
    """The evaluator of a run: one local evaluator, or a pool over the run's devices.

    Raises:
        GPURequiredError: the run verifies and times candidates and no GPU is visible.
    """
    from cutegen.search.storage import StoreBaselineCache

    opts, devices = settings.eval, settings.devices
    baselines = StoreBaselineCache(storage)
    if devices is None:
        if not opts.compile_only:
            require_gpu("searching (verifying and timing candidates)")
        return local_evaluator(task, opts, run_dir, baseline_cache=baselines)
    return make_pool(task, settings, run_dir, baselines, devices)


def make_pool(task: Task, settings: RunSettings, run_dir: Path, baselines: Any,
              devices: DeviceSettings) -> Evaluator:
    """The evaluator of a multi-device run: a local GPU pool or Ray actors.

    Raises:
        GPURequiredError: no GPU visible (local backend).
        ConfigError: ray missing.
    """
    from cutegen.codegen.pool import make_compile_ahead

    opts = settings.eval
    local = devices.backend != "ray"
    if local:
        require_gpu("searching (verifying and timing candidates)")
    ahead = (make_compile_ahead(task, opts, run_dir, workers=devices.compile_ahead)
             if devices.compile_ahead else None)
    try:
        if not local:
            from cutegen.codegen.ray_backend import make_ray_pool

            return make_ray_pool(task, opts, run_dir, actors=devices.count,
                                 address=devices.ray_address, baseline_cache=baselines,
                                 compile_ahead=ahead)
        from cutegen.codegen.pool import GpuPool, parse_gpus

        gpus = parse_gpus(devices.gpus) or (opts.gpu,)
        return GpuPool(task, opts, run_dir, gpus=gpus, baseline_cache=baselines,
                       compile_ahead=ahead)
    except BaseException:
        if ahead is not None:
            ahead.close()
        raise


def resolve_devices(*, gpus: str | None = None, backend: str | None = None,
                    ray_address: str | None = None, compile_ahead: int | None = None,
                    gpu: int | None = None, compile_only: bool = False,
                    stored: DeviceSettings | None = None) -> DeviceSettings | None:
    """Device settings from the values given, else the stored ones, else None (one local
    evaluator). Counts the devices now ("all") to size the window of evaluations in flight.

    Raises:
        ConfigError: contradictory options.
        GPURequiredError: ``gpus="all"`` on a host (or Ray cluster) without a GPU.
    """
    if all(v is None for v in (gpus, backend, ray_address, compile_ahead)):
        return stored
    if gpu is not None and gpus is not None:
        raise ConfigError("give --gpu or --gpus, not both")
    if compile_only:
        raise ConfigError("--compile-only needs no GPU: drop --gpus, --backend and "
                          "--compile-ahead")
    base = stored or DeviceSettings()
    b = backend or base.backend
    dev = DeviceSettings(
        backend="ray" if b == "ray" else "local",
        gpus=gpus if gpus is not None else base.gpus,
        ray_address=ray_address if ray_address is not None else base.ray_address,
        compile_ahead=compile_ahead if compile_ahead is not None else base.compile_ahead)
    if dev.backend == "local":
        from cutegen.codegen.pool import parse_gpus

        count = len(parse_gpus(dev.gpus) or (gpu,))
    else:
        count = _ray_count(dev)
    return DeviceSettings(dev.backend, dev.gpus, dev.ray_address, dev.compile_ahead, count)


def _ray_count(dev: DeviceSettings) -> int:
    spec = dev.gpus
    if spec is not None and spec.strip().lower() != "all":
        try:
            n = int(spec)
        except ValueError:
            raise ConfigError("with --backend ray, --gpus is 'all' or a number of GPU "
                              "actors (Ray places them)") from None
        if n < 1:
            raise ConfigError("--gpus must be at least 1")
        return n
    from cutegen.codegen.ray_backend import cluster_gpus

    n = cluster_gpus(dev.ray_address)
    if n < 1:
        raise GPURequiredError(f"the Ray cluster at {dev.ray_address or 'this host'} "
                               "offers no GPU")
    return n


def make_llm_config(settings: RunSettings) -> LLMConfig | None:
    """The LLM client's configuration from the stored settings and the environment (the
    key is read from ``OPENAI_API_KEY`` here, never stored).

    Raises:
        ConfigError: no key for api.openai.com, a cap on a model without a price.
    """
    if settings.llm is None:
        return None
    from cutegen.codegen.llm import config_from_env

    s = settings.llm
    return config_from_env(model=s.model, base_url=s.base_url, max_dollars=s.max_dollars,
                           max_tokens=s.max_tokens)


def make_rewriter(settings: RunSettings, storage: BaseStorage, run: FrozenRun,
                  evaluator: Evaluator, llm_config: LLMConfig | None) -> Rewriter:
    """The run's rewriter: builtin, llm, or mixed (built-in cheap moves, LLM rewrites)."""
    from cutegen.codegen.rewriters.builtin import BuiltinRewriter

    builtin = BuiltinRewriter(seed_files=[s.path for s in settings.seed_candidates])
    if settings.rewriter == "builtin":
        return builtin
    from cutegen.codegen.llm import LLMClient
    from cutegen.codegen.rewriters.llm import LLMRewriter, compile_check_from
    from cutegen.codegen.rewriters.mixed import MixedRewriter

    cfg = llm_config or make_llm_config(settings)
    assert cfg is not None  # RunSettings requires llm for these rewriters
    llm = LLMRewriter(LLMClient(cfg, StoreCallRecorder(storage, run.id)),
                      compile_check=compile_check_from(evaluator))
    return llm if settings.rewriter == "llm" else MixedRewriter(llm, builtin)


def _profilers(settings: RunSettings) -> dict[str, Any]:
    """The profilers the settings ask for that can run here (loading the plugins now, so
    a plugin that fails to import stops the run before it is stored).

    Raises:
        PluginError: a plugin cannot be loaded or breaks the contract.
    """
    p = settings.profiling
    if p.mode == "off":
        return {}
    from cutegen.plugins import available_profilers, get_plugin_manager, parse_names

    only = parse_names(p.only) if p.only is not None else None
    pm = get_plugin_manager(only=only, disabled=parse_names(p.disabled))
    return {n: pr for n, pr in available_profilers(pm).items() if pr.is_available()}


def make_profile_hook(settings: RunSettings, evaluator: Evaluator, storage: BaseStorage,
                      run_dir: Path) -> ProfileHook | None:
    """The delayed-profiling hook of a run (None when profiling is off)."""
    from cutegen.codegen.backend import ProfileTargets, SerializesProfiling
    from cutegen.search import profile_hook

    p = settings.profiling
    if p.mode == "off":
        return None
    if not isinstance(evaluator, ProfileTargets):
        raise ConfigError(f"{type(evaluator).__name__} cannot build profile targets; "
                          "run with --profiling off")
    hook = profile_hook(evaluator=evaluator, storage=storage, profilers=_profilers(settings),
                        profile_depth=p.depth, mode=p.mode, run_dir=run_dir,
                        timeout_s=p.timeout_s, compile_only=settings.eval.compile_only)
    if isinstance(evaluator, SerializesProfiling):
        hook = evaluator.serialize_profiling(hook)  # ncu & co. alone on their GPU
    return hook


def preflight(task: Task, settings: RunSettings, llm_config: LLMConfig | None = None) -> None:
    """Everything that can be checked before a run is stored, cheapest first.

    Raises:
        ConfigError: no seed candidate for the task, a bad LLM configuration.
        GPURequiredError: the run needs a GPU and none is visible.
        PluginError: a profiler plugin cannot be loaded.
    """
    if settings.rewriter == "builtin":
        from cutegen.codegen.rewriters.builtin import BuiltinRewriter

        rw = BuiltinRewriter(seed_files=[s.path for s in settings.seed_candidates])
        if not rw.seeds(task):
            raise ConfigError(f"no seed candidate for {task.name}: {rw.not_covered(task)}")
    if not settings.eval.compile_only and (settings.devices is None
                                           or settings.devices.backend == "local"):
        require_gpu("searching (verifying and timing candidates)")
    if settings.rewriter != "builtin" and llm_config is None:
        make_llm_config(settings)
    _profilers(settings)


def seed_candidates(paths: Any) -> tuple[SeedCandidate, ...]:
    """Seed-candidate records (absolute path and hash) for the user's files.

    Raises:
        CandidateError: a file cannot be read.
    """
    return tuple(SeedCandidate(str(Path(p).resolve()), CandidateSource.from_path(p).sha256)
                 for p in paths)


# -- a run --------------------------------------------------------------------------------
class SearchRun:
    """A stored run, ready to search. Made by :func:`create_run` and :func:`resume_run`.

    Use :meth:`search` to run it to its budget, or :meth:`open` for the
    :class:`~cutegen.search.Search` itself (ask/tell, progress displays). Closing the run
    closes the store when the run opened it.

    Attributes:
        name / record: the run's name and stored record.
        task: the task it searches.
        settings: its settings (as stored, with a resume's budget or devices applied).
        storage: the store.
    """

    def __init__(self, storage: BaseStorage, record: FrozenRun, task: Task,
                 settings: RunSettings, *, llm_config: LLMConfig | None = None,
                 owns_storage: bool = False) -> None:
        self.storage, self.record, self.task, self.settings = storage, record, task, settings
        self.name = record.name
        self._llm_config = llm_config
        self._owns_storage = owns_storage

    @contextlib.contextmanager
    def open(self) -> Iterator[Search]:
        """The run's :class:`Search`, opened (lease taken, tree rebuilt), with its
        evaluator, rewriter and profile hook; all closed again on exit."""
        run_dir = self.storage.run_dir(self.record.id) or Path(".")
        evaluator = make_evaluator(self.task, self.settings, run_dir, self.storage)
        try:
            rewriter = make_rewriter(self.settings, self.storage, self.record, evaluator,
                                     self._llm_config)
            hook = make_profile_hook(self.settings, evaluator, self.storage, run_dir)
            with Search(storage=self.storage, run=self.record, task=self.task,
                        evaluator=evaluator, rewriter=rewriter, params=self.settings.params,
                        budget=self.settings.budget, profile_hook=hook) as search:
                yield search
        finally:
            evaluator.close()

    def search(self, *, should_stop: Callable[[], bool] | None = None,
               on_step: Callable[[StepReport], None] | None = None) -> RunSummary:
        """Search until a budget limit, exhaustion of the tree or ``should_stop()``; the
        run is closed afterwards.

        Raises:
            InfrastructureError: the machine failed (the run is resumable).
            StorageError: the store failed.
        """
        try:
            with self.open() as search:
                return search.run(should_stop=should_stop, on_step=on_step)
        finally:
            self.close()

    def close(self) -> None:
        if self._owns_storage:
            self.storage.close()
            self._owns_storage = False

    def __enter__(self) -> SearchRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_run(task: TaskSpec, settings: RunSettings | None = None, *,
               db: str | Path = DEFAULT_DB, name: str | None = None,
               storage: BaseStorage | None = None,
               llm_config: LLMConfig | None = None) -> SearchRun:
    """Store a new run of ``task`` with ``settings`` and return it, ready to search.

    Args:
        task: a task file, a bundled task name, or a :class:`Task`.
        settings: the run's settings (default: :class:`RunSettings()`, the built-in
            rewriter with no budget).
        db: the SQLite store (created if missing); ignored when ``storage`` is given.
        name: the run's name (default: the task name and a timestamp).
        storage: an open store to use instead of ``db`` (it stays open afterwards).
        llm_config: the LLM client's full configuration (prices, timeouts) when the
            settings' model is not enough; default: built from ``settings.llm`` and the
            environment.

    Raises:
        DuplicatedRunError: the name is taken (checked first, before anything slow).
        TaskError / ConfigError / GPURequiredError / PluginError: see :func:`preflight`;
            nothing is stored then.
        StorageError: the store cannot be opened or written.
    """
    settings = settings or RunSettings()
    own = storage is None
    store = storage if storage is not None else open_store(db)
    try:
        if name is not None and any(r.name == name for r in store.list_runs()):
            raise DuplicatedRunError(f"a run named {name!r} already exists in {db}; resume it "
                                     f"with `cutegen resume {name}` or choose another --run "
                                     "name")
        t = _task(task)
        preflight(t, settings, llm_config)
        run_name = name or f"{t.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        record = store.create_run(run_name, RunConfig(t.name, str(t.path), t.sha256,
                                                      settings.seed, toolchain.versions(),
                                                      settings.to_dict()))
    except BaseException:
        if own:
            store.close()
        raise
    return SearchRun(store, record, t, settings, llm_config=llm_config, owns_storage=own)


def resume_run(name: str, *, db: str | Path = DEFAULT_DB, storage: BaseStorage | None = None,
               budget: Budget | None = None, devices: DeviceSettings | None = None,
               llm_config: LLMConfig | None = None) -> SearchRun:
    """Reopen the stored run ``name`` to continue it exactly where it stopped.

    Args:
        budget: replaces the stored budget (to extend a run that finished on it).
        devices: replaces the stored devices; the number of evaluations in flight stays
            the run's (``params.parallel``), so the resumed tree is the one the run would
            have built.
        llm_config: the LLM configuration (default: from the stored settings and the
            environment; the key is never stored).

    Raises:
        RunNotFoundError: no such run.
        ResumeMismatchError: the task file, the toolchain or a seed candidate changed.
        ConfigError / GPURequiredError / PluginError: see :func:`preflight`.
    """
    own = storage is None
    store = storage if storage is not None else open_store(db, must_exist=True)
    try:
        record = store.get_run(name)
        cfg = record.config
        try:
            t = load_task_file(cfg.task_path, name=cfg.task_name)
        except TaskError as e:
            if not Path(cfg.task_path).is_file():
                raise ResumeMismatchError(f"cannot resume run {name!r}: {e}") from e
            t = Task(cfg.task_name, Path(cfg.task_path), "", "file")
        check_resume(record, t, toolchain.versions(), store.get_harness_versions(record.id))
        settings = RunSettings.from_dict(cfg.settings, seed=cfg.seed)
        for s in settings.seed_candidates:
            p = Path(s.path)
            if not p.is_file() or sha256_text(p.read_text(encoding="utf-8")) != s.sha256:
                raise ResumeMismatchError(f"cannot resume run {name!r}: seed candidate "
                                          f"{p} is missing or changed")
        if budget is not None:
            settings = settings.replace(budget=budget)
        if devices is not None:
            settings = settings.replace(devices=devices)
        if settings.llm is not None and llm_config is None:
            try:
                llm_config = make_llm_config(settings)
            except ConfigError as e:
                raise ConfigError(f"run {name!r} uses the LLM (model {settings.llm.model!r}): "
                                  f"{e}; give --model (and --base-url) again to resume it; "
                                  "the key is never stored") from e
        preflight(t, settings, llm_config)
    except BaseException:
        if own:
            store.close()
        raise
    return SearchRun(store, record, t, settings, llm_config=llm_config, owns_storage=own)


__all__ = ["DEFAULT_DB", "SearchRun", "create_run", "make_evaluator", "open_store",
           "preflight", "resolve_devices", "resume_run"]
