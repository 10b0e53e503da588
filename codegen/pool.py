"""A local evaluation pool: one evaluator per GPU of this host, several candidates in flight.

:class:`GpuPool` owns one :class:`~cutegen.codegen.eval.evaluator.LocalEvaluator` per device, each
pinned with ``EvalOptions.gpu`` (so its reference worker and every candidate worker see only
that GPU through ``CUDA_VISIBLE_DEVICES``), and one daemon thread per device that *drives*
evaluations; the evaluations themselves run in the evaluators' worker processes, as they do
in a serial search. The pool is an :class:`~cutegen.codegen.backend.AsyncEvaluator`:

* ``submit(candidate) -> Future[Evaluation]`` queues work (first in, first out);
  ``evaluate``/``retime`` run in the caller's thread on the next free device, ahead of
  queued work (the search thread blocks on them, the devices do not wait for it).
* A device is *leased* by one user at a time: an evaluation, a re-timing, or a profiling
  scope (:meth:`GpuPool.serialize_profiling` wraps the search's profile hook so that ncu
  and the other exclusive profilers never share a GPU with an evaluation; the scope takes a
  device only when the hook really asks for a profile target).
* Health: an evaluator that raises :class:`~cutegen.errors.InfrastructureError` (a worker
  that would not die, a GPU left holding a context, no device) takes its device out of
  service; the candidate's future fails with :class:`~cutegen.errors.DeviceLostError` and
  the search requeues the node. The LocalEvaluator already kills hung kernels' process
  trees; the pool only stops sending work to a device that did not recover.
* ``gpus=[None, None]`` with ``compile_only`` options gives CPU compile slots (see
  :mod:`cutegen.codegen.compile_ahead`).

Nothing here writes to the store: baselines are measured (and cached) in the caller's
thread by :meth:`GpuPool.prepare`, so the search thread stays the only writer of results.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from cutegen.codegen.backend import (
    Aborts,
    BaselineCache,
    EvalOptions,
    Evaluator,
    MeasuresBaselines,
    ProfileTargets,
    Warms,
)
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.compile_ahead import settled_before_gpu
from cutegen.codegen.eval.evaluator import local_evaluator
from cutegen.codegen.evaluation import Evaluation, Timing
from cutegen.codegen.tasks import Task
from cutegen.errors import ConfigError, DeviceLostError, GPURequiredError, InfrastructureError

log = logging.getLogger("cutegen.codegen.pool")
_H = TypeVar("_H", bound=Callable[..., Any])

#: ``factory(device) -> Evaluator``: builds the evaluator of one device slot.
EvaluatorFactory = Callable[[int | None], Evaluator]


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """One device slot as the pool sees it now."""

    device: int | None
    healthy: bool
    busy: bool
    evaluations: int
    error: str = ""


def visible_gpu_count() -> int:
    """GPUs NVML sees on this host (0 when NVML or the driver is missing)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver: no GPU
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        return 0
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def parse_gpus(spec: str | None, *, count: Callable[[], int] | None = None
               ) -> tuple[int, ...] | None:
    """``--gpus``: ``None`` (inherit, one device), ``"all"``, or indices like ``"0,2"``.

    Raises:
        ConfigError: an index is malformed, negative or repeated.
        GPURequiredError: ``"all"`` and no GPU is visible.
    """
    if spec is None or not spec.strip():
        return None
    if spec.strip().lower() == "all":
        n = (count or visible_gpu_count)()
        if n < 1:
            raise GPURequiredError("--gpus all: no NVIDIA GPU is visible on this host")
        return tuple(range(n))
    try:
        out = tuple(int(x) for x in spec.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"--gpus {spec!r}: give 'all' or indices like 0,2") from None
    if not out or any(g < 0 for g in out) or len(set(out)) != len(out):
        raise ConfigError(f"--gpus {spec!r}: give 'all' or distinct indices like 0,2")
    return out


class _Device:
    """A device slot's mutable state; every field is guarded by the pool's condition."""

    __slots__ = ("index", "evaluator", "healthy", "busy", "evaluations", "error")

    def __init__(self, index: int | None, evaluator: Evaluator) -> None:
        self.index, self.evaluator = index, evaluator
        self.healthy, self.busy, self.evaluations, self.error = True, False, 0, ""

    @property
    def label(self) -> str:
        return "cpu" if self.index is None else f"gpu {self.index}"


class _Scope:
    """A profiling scope of one thread: the device it leased lazily, if any."""

    def __init__(self) -> None:
        self.lease: contextlib.AbstractContextManager[_Device] | None = None
        self.device: _Device | None = None


class GpuPool:
    """One evaluator per device of this host, driven by one thread per device.

    Args:
        task: the reference problem.
        options: how to evaluate; each device gets a copy with ``gpu`` set to its index.
        run_dir: the run's folder (artifacts, profiles).
        gpus: device indices (``None`` entries: CPU slots, for compile-only options).
        baseline_cache / compile_cache: shared by every device's evaluator.
        factory: builds the evaluator of one device instead of a LocalEvaluator (tests
            pass fakes; the Ray backend passes nothing here).
        compile_ahead: an evaluator pool of CPU compile slots that sees every candidate
            first; its trusted compile failures never take a GPU
            (:mod:`cutegen.codegen.compile_ahead`).

    Raises:
        ConfigError: no device given.
    """

    def __init__(self, task: Task, options: EvalOptions, run_dir: Path, *,
                 gpus: Sequence[int | None], baseline_cache: BaselineCache | None = None,
                 compile_cache: Any = None, factory: EvaluatorFactory | None = None,
                 compile_ahead: Any = None) -> None:
        if not gpus:
            raise ConfigError("an evaluation pool needs at least one device")
        self.task, self.options, self.run_dir = task, options, Path(run_dir)
        if factory is None:
            factory = _local_factory(task, options, self.run_dir, baseline_cache, compile_cache)
        self._devices = [_Device(g, factory(g)) for g in gpus]
        self._ahead = compile_ahead
        self._cond = threading.Condition()
        self._urgent = 0
        self._closed = False
        self._jobs: queue.Queue[tuple[CandidateSource, Future[Evaluation]] | None] = queue.Queue()
        self._where: dict[str, int | None] = {}
        self._local = threading.local()
        self._threads = [threading.Thread(target=self._serve, name=f"cutegen-pool-{k}",
                                          daemon=True) for k in range(len(gpus))]
        for t in self._threads:
            t.start()

    # -- status -------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Devices still in service."""
        with self._cond:
            return sum(d.healthy for d in self._devices)

    def health(self) -> list[DeviceHealth]:
        """Every device slot: in service, busy, evaluations done, why it was retired."""
        with self._cond:
            return [DeviceHealth(d.index, d.healthy, d.busy, d.evaluations, d.error)
                    for d in self._devices]

    # -- leasing ------------------------------------------------------------------------
    @contextlib.contextmanager
    def _lease(self, *, urgent: bool = False, prefer: int | None = None) -> Iterator[_Device]:
        """Hold one healthy idle device (urgent callers go before queued evaluations).

        Raises:
            InfrastructureError: the pool is closed or no device is left in service.
        """
        with self._cond:
            self._urgent += urgent
            try:
                while True:
                    if self._closed:
                        raise InfrastructureError("the evaluation pool is closed")
                    healthy = [d for d in self._devices if d.healthy]
                    if not healthy:
                        raise InfrastructureError(
                            "no device left in service: " + "; ".join(
                                f"{d.label}: {d.error}" for d in self._devices))
                    idle = [d for d in healthy if not d.busy]
                    if idle and (urgent or self._urgent == 0):
                        dev = next((d for d in idle if d.index == prefer), idle[0])
                        dev.busy = True
                        break
                    self._cond.wait()
            finally:
                self._urgent -= urgent
        try:
            yield dev
        finally:
            with self._cond:
                dev.busy = False
                self._cond.notify_all()

    def _on(self, dev: _Device, what: str, fn: Callable[[Evaluator], Any]) -> Any:
        try:
            out = fn(dev.evaluator)
        except InfrastructureError as e:
            self._retire(dev, e)
            raise DeviceLostError(f"{dev.label} failed during {what} and was taken out of "
                                  f"service: {e}", device=dev.index) from e
        with self._cond:
            dev.evaluations += what == "evaluation"
        return out

    def _retire(self, dev: _Device, error: BaseException) -> None:
        text = str(error).strip()
        with self._cond:
            dev.healthy = False
            dev.error = text.splitlines()[0][:500] if text else type(error).__name__
            self._cond.notify_all()
        left = self.capacity
        log.warning("%s taken out of service (%s); %d device(s) left", dev.label, dev.error, left)
        with contextlib.suppress(Exception):
            dev.evaluator.close()

    # -- the Evaluator interface ----------------------------------------------------------
    def submit(self, candidate: CandidateSource) -> Future[Evaluation]:
        """Queue a candidate (after the compile-ahead pass, when there is one)."""
        if self._closed:
            raise InfrastructureError("the evaluation pool is closed")
        first = self._devices[0].evaluator
        if isinstance(first, Warms):  # parse here, in the submitting thread (see its warm)
            first.warm(candidate)
        fut: Future[Evaluation] = Future()
        if self._ahead is None:
            self._jobs.put((candidate, fut))
            return fut
        def after(pre: Future[Evaluation]) -> None:
            try:
                settled = settled_before_gpu(pre.result())
            except Exception:  # noqa: BLE001 - the CPU pass is an optimisation only
                log.warning("compile-ahead failed for %s; evaluating on a GPU",
                            candidate.short, exc_info=True)
                settled = None
            if settled is None:
                self._jobs.put((candidate, fut))
            elif fut.set_running_or_notify_cancel():
                fut.set_result(settled)

        self._ahead.submit(candidate).add_done_callback(after)
        return fut

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            cand, fut = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                with self._lease() as dev:
                    self._where[cand.sha256] = dev.index
                    ev = self._on(dev, "evaluation", lambda e, c=cand: e.evaluate(c))
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on it
                fut.set_exception(e)
            else:
                fut.set_result(ev)

    def evaluate(self, candidate: CandidateSource) -> Evaluation:
        """Evaluate now, in this thread, on the next free device (ahead of queued work).

        Raises:
            DeviceLostError: the device failed (it is out of service now).
            InfrastructureError: no device is left.
        """
        with self._lease(urgent=True) as dev:
            self._where[candidate.sha256] = dev.index
            return self._on(dev, "evaluation", lambda e: e.evaluate(candidate))

    def retime(self, candidates: Sequence[CandidateSource], *, rounds: int = 3
               ) -> list[Timing | None]:
        """Re-time on one device (all candidates on the same one, interleaved).

        Raises:
            DeviceLostError / InfrastructureError: as :meth:`evaluate`.
        """
        with self._lease(urgent=True) as dev:
            return self._on(dev, "re-timing", lambda e: e.retime(candidates, rounds=rounds))

    def prepare(self) -> None:
        """Measure (or load) the eager / torch.compile baselines in this thread, device by
        device, so no pool thread writes the baseline cache; a device that fails here is
        taken out of service.

        Raises:
            InfrastructureError: no device is left.
        """
        for dev in list(self._devices):
            if not isinstance(dev.evaluator, MeasuresBaselines) or not dev.healthy:
                continue
            with contextlib.suppress(DeviceLostError):
                self._on(dev, "baselines", lambda e: e.baselines())  # type: ignore[attr-defined]
        if self.capacity < 1:
            raise InfrastructureError("no device of the pool could measure the baselines")

    # -- profiling ----------------------------------------------------------------------
    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> Any:
        """A profile target from the device that evaluated the candidate (when free).

        Inside :meth:`serialize_profiling`'s scope the device stays leased until the scope
        ends, so the profilers run alone on it; outside, it is leased only to build the target.
        """
        scope: _Scope | None = getattr(self._local, "scope", None)
        prefer = self._where.get(candidate.sha256)
        if scope is None:
            with self._lease(urgent=True, prefer=prefer) as dev:
                return _targets(dev.evaluator).profile_target(candidate, evaluation, workdir)
        if scope.device is None:
            scope.lease = self._lease(urgent=True, prefer=prefer)
            scope.device = scope.lease.__enter__()
        return _targets(scope.device.evaluator).profile_target(candidate, evaluation, workdir)

    @contextlib.contextmanager
    def profiling_scope(self) -> Iterator[None]:
        """Hold the device the scope's first ``profile_target`` leases until the scope ends."""
        scope = _Scope()
        self._local.scope = scope
        try:
            yield
        finally:
            self._local.scope = None
            if scope.lease is not None:
                scope.lease.__exit__(None, None, None)

    def serialize_profiling(self, hook: _H) -> _H:
        """Wrap a profile hook so each call profiles on a device nothing else uses then."""
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.profiling_scope():
                return hook(*args, **kwargs)

        return cast(_H, wrapped)

    # -- shutting down ------------------------------------------------------------------
    def abort(self) -> None:
        """Drop queued work and kill the candidate workers in flight (their results are
        never told; the nodes stay RUNNING and are requeued when the run is reopened)."""
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[1].cancel()
        for dev in self._devices:
            if isinstance(dev.evaluator, Aborts):
                with contextlib.suppress(Exception):
                    dev.evaluator.abort()
        if self._ahead is not None:
            with contextlib.suppress(Exception):
                self._ahead.abort()

    def close(self) -> None:
        """Abort what is in flight, stop the threads and every device's workers."""
        self.abort()
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join(timeout=30)
        for dev in self._devices:
            with contextlib.suppress(Exception):
                dev.evaluator.close()
        if self._ahead is not None:
            self._ahead.close()

    def __enter__(self) -> GpuPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _targets(ev: Evaluator) -> ProfileTargets:
    if not isinstance(ev, ProfileTargets):
        raise TypeError(f"{type(ev).__name__} cannot build profile targets")
    return ev


def _local_factory(task: Task, options: EvalOptions, run_dir: Path,
                   baseline_cache: BaselineCache | None, compile_cache: Any
                   ) -> EvaluatorFactory:
    def make(gpu: int | None) -> Evaluator:
        opts = dataclasses.replace(options, gpu=gpu) if gpu is not None else options
        return local_evaluator(task, opts, run_dir, baseline_cache=baseline_cache,
                               compile_cache=compile_cache)

    return make


def make_compile_ahead(task: Task, options: EvalOptions, run_dir: Path, *, workers: int,
                       baseline_cache: BaselineCache | None = None,
                       compile_cache: Any = None) -> Any:
    """A pool of ``workers`` CPU compile-only slots for :class:`~cutegen.codegen.pool.GpuPool`
    (its ``compile_ahead`` argument).

    Args:
        task / run_dir: as for the GPU pool.
        options: the GPU pool's options; the slots use them with ``compile_only=True`` and no
            GPU (arch, compile timeout and ``keep_sass`` stay, so cache keys match).
        workers: CPU slots (each runs one compile at a time in its own worker process).

    Raises:
        ConfigError: ``workers`` < 1.
    """
    if workers < 1:
        raise ConfigError("compile-ahead needs at least one CPU worker")
    opts = dataclasses.replace(options, compile_only=True, gpu=None)
    return GpuPool(task, opts, run_dir, gpus=[None] * workers, baseline_cache=baseline_cache,
                   compile_cache=compile_cache)
