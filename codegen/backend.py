"""The evaluation seam: what the search needs from an evaluator, and the options it takes.

The search talks to an :class:`Evaluator` bound to one task. Implementations: the local
process-isolated evaluator (:class:`cutegen.codegen.eval.evaluator.LocalEvaluator`), the fake one
used in CPU tests (:class:`cutegen.testing.FakeEvaluator`), and pools or remote engines that
wrap them behind the same interface: one evaluator per GPU of this host
(:class:`cutegen.codegen.pool.GpuPool`) or per GPU of a Ray cluster
(:func:`cutegen.codegen.ray_backend.make_ray_pool`). Those also accept work asynchronously
(:class:`AsyncEvaluator`), which is what a parallel search needs.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.evaluation import Evaluation, Timing
from cutegen.errors import GPURequiredError

if TYPE_CHECKING:
    from cutegen.profilers import ProfileTarget

_H = TypeVar("_H", bound=Callable[..., Any])

#: Set in the environment of every child the evaluators start: NVLink multicast stays off
#: (a program using it can take a shared multi-GPU host's GPUs out of service).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True, slots=True)
class EvalOptions:
    """How candidates are evaluated. Frozen; passed down from the run's config.

    Attributes:
        compile_only: stop after compiling (works without a GPU); verdict ``compiled``.
        arch: target for compile-only mode (``CUTE_DSL_ARCH``); on a GPU the DSL detects it.
        compile_timeout_s: limit for one ``cute.compile`` call (separate from run limits).
        run_timeout_s: limit for every other phase (import, init, one call, benchmark).
        eval_timeout_s: limit for one evaluation's calls and comparisons together, from the
            job sent to the last comparison: past it the candidate's verdict is ``timeout``
            where its own calls took most of the time, and the evaluation fails as the
            machine's (InfrastructureError) where checking them did (float64 references in
            host memory on a GPU without room for them); a search's time budget is checked
            only between evaluations. 900 s: KernelBench L1 34 (InstanceNorm, 7 GiB) on an
            80 GB H100 took about 45 s a comparison with its float64 references in host
            memory before they were compared on the GPU, and an evaluation makes about 18
            (six verification calls, eleven timed calls checked, the ghost call).
        main_trials: verification trials on the task's main shape (one distribution each).
        hidden_shapes: also verify on the task's hidden shapes.
        bench_warmup / bench_runs: untimed and timed calls of the benchmark (runs >= 30).
        flush_mb: size of the buffer written before every timed call to flush the L2.
        baselines: time eager and torch.compile in the trusted reference worker.
        check_kernels: kept for stored settings; the native observer accounts for every call's
            GPU work whatever its value (it cannot be turned off).
        ghost_check: one timed call runs with the candidate's CuTe launches disabled and its
            output must then be wrong (RELIABILITY.md C5).
        spare_workers: candidate workers kept starting ahead of need on a GPU (each takes
            about 8 s to import torch and the DSL and attach the observer on the H200).
        log_cap_bytes: how much of a worker's stdout/stderr tail is kept.
        host_mem_limit_mb: a worker whose resident memory grows past this is killed.
        gpu: device index given to the workers (``CUDA_VISIBLE_DEVICES``), None = inherit.
        keep_sass: ask the DSL for SASS (needs nvdisasm) so the sass profiler can read it.
        static_checks: run the static filters (turned off only by the harness's own tests,
            to prove the runtime defenses hold on their own).
    """

    compile_only: bool = False
    arch: str = "sm_90a"
    compile_timeout_s: float = 180.0
    run_timeout_s: float = 120.0
    eval_timeout_s: float = 900.0
    main_trials: int = 3
    hidden_shapes: bool = True
    bench_warmup: int = 3
    bench_runs: int = 50
    flush_mb: int = 256
    baselines: bool = True
    check_kernels: bool = True
    log_cap_bytes: int = 64 * 1024
    host_mem_limit_mb: int = 32 * 1024
    gpu: int | None = None
    keep_sass: bool = True
    static_checks: bool = True
    ghost_check: bool = True
    spare_workers: int = 2

    def __post_init__(self) -> None:
        if self.bench_runs < 30 and not self.compile_only:
            raise ValueError("bench_runs must be at least 30 (PERFORMANCE.md protocol)")
        if self.main_trials < 3:
            raise ValueError("main_trials must be at least 3 (RELIABILITY.md B6/B7)")


class BaselineCache(Protocol):
    """Where eager / torch.compile baseline samples are kept per task + environment (the
    store implements it, so baselines survive a restart and are shared across runs)."""

    def get(self, task_sha256: str, env_fingerprint: str) -> dict[str, Any] | None: ...

    def put(self, task_sha256: str, env_fingerprint: str, value: dict[str, Any]) -> None: ...


@runtime_checkable
class Evaluator(Protocol):
    """Evaluates candidates for one task. Never raises for a candidate's own fault.

    Raises (from every method):
        InfrastructureError: the machine failed (no GPU, GPU left busy); retry later.
    """

    def evaluate(self, candidate: CandidateSource) -> Evaluation:
        """Run static → compile → verify → benchmark and return the frozen result."""
        ...

    def retime(self, candidates: Sequence[CandidateSource], *,
               rounds: int = 3) -> list[Timing | None]:
        """Re-time already-correct candidates in fresh processes, interleaved round-robin,
        for the statistically gated best. Returns one Timing per candidate (all samples),
        or None for a candidate whose re-timed outputs were wrong or whose worker failed."""
        ...

    def close(self) -> None:
        """Stop any worker processes."""
        ...


@runtime_checkable
class AsyncEvaluator(Evaluator, Protocol):
    """An evaluator that takes several candidates at once (one per device it drives).

    ``evaluate``/``retime`` stay usable from the caller's thread; ``submit`` queues work.
    A device that raises :class:`~cutegen.errors.InfrastructureError` is taken out of
    service and its candidate's future fails with :class:`~cutegen.errors.DeviceLostError`
    (the search requeues the node); once no device is left, futures fail with
    :class:`~cutegen.errors.InfrastructureError`.
    """

    @property
    def capacity(self) -> int:
        """Devices still in service."""
        ...

    def submit(self, candidate: CandidateSource) -> Future[Evaluation]:
        """Queue one candidate; the future holds its Evaluation or the infrastructure error."""
        ...


# -- capabilities: what some evaluators can do besides the Evaluator protocol -------------
# Callers check these with isinstance (each Protocol is runtime-checkable), never with
# getattr: a capability is declared by having the method, and named here once.
@runtime_checkable
class Warms(Protocol):
    """Can prepare a candidate ahead of its evaluation (parse it, start its worker)."""

    def warm(self, candidate: CandidateSource) -> None: ...


@runtime_checkable
class Aborts(Protocol):
    """Can drop queued work and kill the evaluations in flight (their results are never
    told; the nodes stay RUNNING and are requeued when the run is reopened)."""

    def abort(self) -> None: ...


@runtime_checkable
class MeasuresBaselines(Protocol):
    """Measures (or loads from its cache) the eager / torch.compile baselines on demand."""

    def baselines(self) -> object: ...


@runtime_checkable
class Prepares(Protocol):
    """Must be prepared in the search's own thread before work is submitted (a pool
    measuring its devices' baselines, so no pool thread writes the store)."""

    def prepare(self) -> None: ...


@runtime_checkable
class ProfileTargets(Protocol):
    """Builds what a profiler needs to inspect or re-run one evaluated candidate."""

    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> ProfileTarget: ...


@runtime_checkable
class SerializesProfiling(Protocol):
    """Wraps a profile hook so each call has a device to itself (ncu and co. must run
    alone on their GPU)."""

    def serialize_profiling(self, hook: _H) -> _H: ...


def gpu_available() -> bool:
    """Whether an NVIDIA GPU is visible to this process (``nvidia-smi`` on PATH and torch
    sees a CUDA device)."""
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install is "no GPU" here
        return False


def require_gpu(what: str) -> None:
    """Raises:
        GPURequiredError: no GPU is visible; the message names ``what`` needed one.
    """
    if not gpu_available():
        raise GPURequiredError(
            f"{what} needs an NVIDIA GPU (none is visible here). Without a GPU, "
            "--compile-only compiles candidates for sm_90a and inspects their SASS.")

