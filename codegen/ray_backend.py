"""Beyond one host: evaluation on a Ray cluster, behind the same Evaluator interface.

Optional extra: ``pip install -e ".[ray]"`` from a checkout (cutegen is not on an index).
Ray is imported only when this backend is used, so the core never needs it.

:func:`make_ray_pool` starts one Ray actor per device (``num_gpus=1``: Ray places it on a
host with a free GPU and sets ``CUDA_VISIBLE_DEVICES`` for it); each actor owns a
:class:`~cutegen.codegen.eval.evaluator.LocalEvaluator`, which starts the reference and
candidate worker processes on the actor's host exactly as on a single machine. The search
host wraps the actors in a :class:`~cutegen.codegen.pool.GpuPool` (one driving thread per
actor), so leasing, device health, compile-ahead and the profiling scope are the local
pool's: an actor that dies (its host went away: ``RayActorError``) or whose evaluator
raises :class:`~cutegen.errors.InfrastructureError` is taken out of service and its node is
requeued by the search. The store is only ever written by the search process.

What crosses the wire: the candidate's source (``CandidateSource``), the task's source text
(each actor writes it to its own scratch folder), the options, and Evaluations as plain
dicts. Artifacts (PTX, cubin, SASS) stay in the run folder of the host that compiled them:
the same path on the search host only when the run folder is on a shared file system.
Profiling needs the candidate's GPU: for an actor on another host the profile target
carries no launcher and no artifacts, so profilers report ``unavailable`` there instead of
measuring the wrong machine (profile on one host with ``--backend local``).

Every actor gets ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1`` in its environment, and passes them on to its workers.

CPU-only mode (tests, compile-only clusters): ``num_gpus=0`` and a picklable ``factory``
(e.g. ``functools.partial(cutegen.testing.FakeEvaluator, seed=3)``) instead of a
LocalEvaluator.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cutegen.codegen.backend import (
    NO_MULTICAST,
    Aborts,
    BaselineCache,
    EvalOptions,
    Evaluator,
    MeasuresBaselines,
)
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.eval.evaluator import local_evaluator
from cutegen.codegen.evaluation import Evaluation, Timing
from cutegen.codegen.tasks import Task
from cutegen.errors import ConfigError, InfrastructureError

#: How many methods of one actor may run at once: an evaluation plus an ``abort``.
_ACTOR_CONCURRENCY = 2


def require_ray() -> Any:
    """Import ray, or say how to install it.

    Raises:
        ConfigError: ray is not installed.
    """
    try:
        import ray
    except ImportError as e:
        raise ConfigError('--backend ray needs Ray: pip install -e ".[ray]" from a checkout of '
                          'cutegen (or pip install ray)') from e
    return ray


def connect(address: str | None = None, **init_kwargs: Any) -> Any:
    """Join the cluster at ``address`` ("auto": the one this host belongs to), or start a
    local one when None. Idempotent. Returns the ray module.

    Raises:
        ConfigError: ray is not installed.
        InfrastructureError: the cluster cannot be reached.
    """
    ray = require_ray()
    if ray.is_initialized():
        return ray
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                          "runtime_env": {"env_vars": dict(NO_MULTICAST)}}
    kw.update(init_kwargs)
    try:
        ray.init(address=address, **kw)
    except ValueError as e:  # arguments Ray refuses, e.g. num_cpus with an address
        raise ConfigError(f"ray.init refused the settings: {e}") from e
    except (ConnectionError, RuntimeError) as e:
        raise InfrastructureError(f"cannot reach the Ray cluster at {address!r}: {e}") from e
    return ray


def cluster_gpus(address: str | None = None, **init_kwargs: Any) -> int:
    """GPUs the cluster offers (what ``--gpus all`` means with ``--backend ray``)."""
    ray = connect(address, **init_kwargs)
    return int(ray.cluster_resources().get("GPU", 0))


class EvalActor:
    """Runs inside a Ray actor process: owns one evaluator for the actor's device.

    Args:
        task_name / task_source: the task (written to this host's scratch folder).
        options: EvalOptions as a dict (``gpu`` is left to Ray's CUDA_VISIBLE_DEVICES).
        run_dir: the run folder, as a path on this host.
        factory: builds the evaluator instead of a LocalEvaluator (CPU-only mode).
    """

    def __init__(self, task_name: str, task_source: str, options: dict[str, Any],
                 run_dir: str, factory: Callable[[int | None], Evaluator] | None = None
                 ) -> None:
        for k, v in NO_MULTICAST.items():  # this is the actor's own process
            os.environ[k] = v
        self.host = socket.gethostname()
        self.baseline_memory = _MemoryBaselines()
        if factory is not None:
            self.ev: Any = factory(None)
            return
        folder = Path(tempfile.mkdtemp(prefix="cutegen-task-"))
        path = folder / f"{task_name}.py"
        path.write_text(task_source, encoding="utf-8")
        task = Task(task_name, path, task_source)
        opts = EvalOptions(**{**options, "gpu": None})
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        self.ev = local_evaluator(task, opts, Path(run_dir), baseline_cache=self.baseline_memory)

    def where(self) -> tuple[str, str]:
        return self.host, os.environ.get("CUDA_VISIBLE_DEVICES", "")

    def evaluate(self, candidate: CandidateSource) -> dict[str, Any]:
        return self.ev.evaluate(candidate).to_dict()

    def retime(self, candidates: Sequence[CandidateSource], rounds: int) -> list[Timing | None]:
        return self.ev.retime(candidates, rounds=rounds)

    def fingerprint(self) -> str:
        from cutegen.codegen.toolchain import fingerprint

        return fingerprint()

    def baselines(self, known: dict[str, Any] | None) -> dict[str, Any] | None:
        """Load ``known`` baselines (from the search host's store) or measure them here;
        returns what this actor's evaluator now uses, for the store."""
        self.baseline_memory.value = known
        if isinstance(self.ev, MeasuresBaselines):
            self.ev.baselines()
        return self.baseline_memory.value

    def profile_target(self, candidate: CandidateSource, evaluation: dict[str, Any] | None,
                       workdir: str) -> Any:
        ev = Evaluation.from_dict(evaluation) if evaluation is not None else None
        return self.ev.profile_target(candidate, ev, Path(workdir))

    def abort(self) -> None:
        if isinstance(self.ev, Aborts):
            self.ev.abort()

    def close(self) -> None:
        self.ev.close()


class ActorEvaluator:
    """The search host's proxy for one actor: an Evaluator whose calls block on Ray.

    Ray's own failures (the actor or its host died, a task failed to deserialise) become
    :class:`~cutegen.errors.InfrastructureError`, so the pool takes the device out of
    service; a candidate's faults are Evaluations, as everywhere.
    """

    def __init__(self, ray: Any, actor: Any, *, task_sha256: str = "",
                 baseline_cache: BaselineCache | None = None) -> None:
        self._ray, self._actor = ray, actor
        self._task_sha256, self._baseline_cache = task_sha256, baseline_cache
        self.host, self.visible = self._call(actor.where.remote(), "start")

    def _call(self, ref: Any, what: str) -> Any:
        try:
            return self._ray.get(ref)
        except InfrastructureError:
            raise
        except self._ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, InfrastructureError):
                raise InfrastructureError(str(cause)) from e
            if isinstance(cause, Exception):
                raise cause from e
            raise
        except self._ray.exceptions.RayError as e:
            raise InfrastructureError(f"Ray actor failed during {what}: {e}") from e

    def evaluate(self, candidate: CandidateSource) -> Evaluation:
        return Evaluation.from_dict(self._call(self._actor.evaluate.remote(candidate),
                                               "evaluation"))

    def retime(self, candidates: Sequence[CandidateSource], *, rounds: int = 3
               ) -> list[Timing | None]:
        return self._call(self._actor.retime.remote(list(candidates), rounds), "re-timing")

    def baselines(self) -> None:
        """Give the actor the stored baselines of its environment, or store what it
        measured (called by :meth:`GpuPool.prepare` in the search thread)."""
        cache = self._baseline_cache
        fp = self._call(self._actor.fingerprint.remote(), "baselines")
        known = cache.get(self._task_sha256, fp) if cache is not None else None
        got = self._call(self._actor.baselines.remote(known), "baselines")
        if cache is not None and known is None and got is not None:
            cache.put(self._task_sha256, fp, got)

    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> Any:
        target = self._call(self._actor.profile_target.remote(
            candidate, evaluation.to_dict() if evaluation is not None else None,
            str(workdir)), "profiling")
        if self.host != socket.gethostname():  # nothing of it can run or be read here
            Path(workdir).mkdir(parents=True, exist_ok=True)
            target = dataclasses.replace(target, launch_argv=(), env={}, cubin_path=None,
                                         sass_path=None, ptx_path=None, cubin_paths=(),
                                         sass_paths=())
        return target

    def abort(self) -> None:
        self._actor.abort.remote()  # runs beside the evaluation (actor concurrency 2)

    def close(self) -> None:
        try:
            self._ray.get(self._actor.close.remote(), timeout=60)
        except Exception:  # noqa: BLE001 - the actor may be gone already
            pass
        try:
            self._ray.kill(self._actor)
        except Exception:  # noqa: BLE001
            pass


def make_ray_pool(task: Task, options: EvalOptions, run_dir: Path, *, actors: int,
                  address: str | None = None, num_gpus: float = 1.0, num_cpus: float = 1.0,
                  factory: Callable[[int | None], Evaluator] | None = None,
                  baseline_cache: BaselineCache | None = None, compile_ahead: Any = None,
                  init_kwargs: dict[str, Any] | None = None) -> Any:
    """A :class:`~cutegen.codegen.pool.GpuPool` whose devices are Ray actors.

    Args:
        task / options / run_dir: as for the local pool (``run_dir`` must be a path each
            host can write; artifacts stay where they were compiled).
        actors: how many actors (one device each).
        address: the cluster: "auto" (this host runs a Ray node: ``ray start``), an
            "IP:6379" head address, or "ray://head:10001" (Ray Client, which needs
            ``pip install 'ray[client]'``); None starts a local one.
        num_gpus / num_cpus: resources of one actor (``num_gpus=0``: CPU-only mode).
        factory: picklable evaluator factory for CPU-only mode (default: LocalEvaluator).
        baseline_cache: read and written by :meth:`GpuPool.prepare` in the search thread.
        compile_ahead: as for the local pool.
        init_kwargs: extra ``ray.init`` arguments (e.g. ``num_cpus`` for a local cluster).

    Raises:
        ConfigError: ray missing, or fewer than one actor.
        InfrastructureError: the cluster cannot be reached or cannot place the actors.
    """
    from cutegen.codegen.pool import GpuPool

    if actors < 1:
        raise ConfigError("the Ray backend needs at least one actor (no GPU in the cluster?)")
    ray = connect(address, **(init_kwargs or {}))
    remote = ray.remote(EvalActor).options(
        num_gpus=num_gpus, num_cpus=num_cpus, max_restarts=0,
        max_concurrency=_ACTOR_CONCURRENCY,
        runtime_env={"env_vars": dict(NO_MULTICAST)})
    opts = {k: v for k, v in dataclasses.asdict(options).items() if k != "gpu"}
    handles = [remote.remote(task.name, task.source, opts, str(run_dir), factory)
               for _ in range(actors)]
    proxies = [ActorEvaluator(ray, h, task_sha256=task.sha256, baseline_cache=baseline_cache)
               for h in handles]  # each waits until its actor is placed
    return GpuPool(task, options, run_dir, gpus=list(range(actors)),
                   factory=lambda k: proxies[k],  # type: ignore[index]
                   compile_ahead=compile_ahead)


class _MemoryBaselines:
    """An actor's baseline cache: one value, filled from and returned to the search host."""

    def __init__(self) -> None:
        self.value: dict[str, Any] | None = None

    def get(self, task_sha256: str, env_fingerprint: str) -> dict[str, Any] | None:
        return self.value

    def put(self, task_sha256: str, env_fingerprint: str, value: dict[str, Any]) -> None:
        self.value = dict(value)
