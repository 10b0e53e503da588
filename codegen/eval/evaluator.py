"""The local, process-isolated evaluator: static → compile → verify → benchmark.

:class:`LocalEvaluator` is bound to one task. It keeps one trusted reference worker for the
task (:mod:`.refworker`, reached through :class:`.refchannel.ReferenceChannel`) and starts a
fresh candidate worker (:mod:`.worker`) for every candidate — warmed up in advance while the
previous candidate runs — so no candidate ever shares a process with another candidate, the
reference, the expected outputs, the search or the timer. On a GPU every candidate worker
carries the native observer (:mod:`.observer`), whose authenticated records of what ran on
the GPU are the only source of times and kernel identities (docs/threat-model.md).

Timeouts kill whole process trees; compile and run have separate limits; a worker is never
reused. Candidate faults become Evaluations; machine faults raise InfrastructureError.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cutegen.codegen.backend import NO_MULTICAST, BaselineCache, EvalOptions
from cutegen.codegen.candidate import CandidateSource, declared_precision
from cutegen.codegen.compile_cache import CompileCache, CompileEntry, cache_key, default_dir
from cutegen.codegen.eval import verdict as _verdict
from cutegen.codegen.eval.candidate_run import AuditReader, CandidateRun, CandidateWorker
from cutegen.codegen.eval.process import WorkerProcess, marked_pids
from cutegen.codegen.eval.refchannel import ReferenceChannel
from cutegen.codegen.eval.static import check_source
from cutegen.codegen.evaluation import (
    COMPILE_FAILED,
    EAGER_FAILED,
    Evaluation,
    KernelTime,
    Stage,
    Timing,
    TrialResult,
    Verdict,
    plain_text,
)
from cutegen.codegen.inputs import timing_distribution
from cutegen.codegen.roofline import (
    H200_DATASHEET,
    H200_MEASURED,
    Ceilings,
    roofline,
    speed_of_light_us,
)
from cutegen.codegen.scratch import make_scratch
from cutegen.codegen.tasks import Task
from cutegen.codegen.toolchain import fingerprint, nvdisasm_for_dsl, versions
from cutegen.errors import InfrastructureError

_ENV_PASS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL",
             "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "VIRTUAL_ENV", "SYSTEMROOT",
             "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "XDG_CACHE_HOME", "CUPTI_INCLUDE",
             "CUPTI_LIB", "CC")


class _WorkerExited(InfrastructureError):
    """A candidate worker exited before it was ready (``LocalEvaluator._ready`` starts one
    more in its place before the machine is called failed)."""


def _scratch_root() -> Path:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        try:
            st = os.statvfs(shm)
            if st.f_bavail * st.f_frsize > 8 * 2**30:
                return shm
        except OSError:
            pass
    return Path(tempfile.gettempdir())


def _dsl_roots() -> tuple[str, ...]:
    """Folders of the CuTe DSL's own files: a module loaded by code from there (or by code
    the DSL compiled just in time, which lives in no file) is the candidate's CuTe code."""
    roots = []
    spec = importlib.util.find_spec("cutlass")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        p = Path(loc).resolve()
        for parent in (p, *p.parents):
            if parent.name == "nvidia_cutlass_dsl":
                roots.append(str(parent))
                break
        else:
            roots.append(str(p))
    return tuple(roots)


class LocalEvaluator:
    """Evaluates candidates for one task on this machine (one GPU, or none in compile-only).

    Args:
        task: the reference problem.
        options: how to evaluate (frozen).
        run_dir: where artifacts are kept (``runs/<run>``); paths in Evaluations are relative
            to it.
        baseline_cache: where eager / torch.compile timings are cached per task + environment.
        compile_cache: compile results by source hash + DSL version + arch + options.
        ceilings: the machine's measured ceilings for roofline fractions.
    """

    def __init__(self, task: Task, options: EvalOptions, *, run_dir: Path,
                 baseline_cache: BaselineCache | None = None,
                 compile_cache: CompileCache | None = None,
                 ceilings: Ceilings = H200_MEASURED) -> None:
        self.task, self.options = task, options
        self.run_dir = Path(run_dir)
        self.mode = "compile" if options.compile_only else "gpu"
        self.cache = compile_cache or CompileCache(default_dir())
        self.baseline_cache = baseline_cache
        self.ceilings = ceilings
        self.scratch = make_scratch(_scratch_root())  # owned; a dead owner's is swept
        self.native_lib: Path | None = None
        self.cupti: Path | None = None
        self.ref = ReferenceChannel(task_path=task.path, task_name=task.name, mode=self.mode,
                                    scratch=self.scratch / "ref", env=lambda t: self._env(t, None),
                                    log_cap=options.log_cap_bytes, native_lib=None, cupti=None)
        self._spares: list[CandidateWorker] = []
        self._spare_lock = threading.Lock()
        self._active: CandidateWorker | None = None
        self._baselines: dict[str, Any] | None = None
        self._fsize_mb = 8192
        self._dsl_roots = _dsl_roots()
        self.evaluations = 0

    @property
    def gpu_name(self) -> str:
        return self.ref.gpu_name

    def _native(self) -> None:
        from cutegen.codegen.eval.observer_build import (
            ObserverUnavailable,
            find_libcupti,
            observer_library,
        )

        if self.native_lib is not None:
            return
        try:
            lib = observer_library()
        except ObserverUnavailable as e:
            if not _gpu_visible():
                raise InfrastructureError("no CUDA device is visible: verification and timing need "
                                          "an NVIDIA GPU (use compile-only mode without one)") from e
            raise InfrastructureError(f"cannot evaluate on the GPU without the native observer: {e}") from e
        self.cupti = find_libcupti()
        if self.cupti is None:
            if not _gpu_visible():
                raise InfrastructureError("no CUDA device is visible: verification and timing "
                                          "need an NVIDIA GPU (use compile-only mode without one)")
            raise InfrastructureError("cannot evaluate on the GPU: libcupti was not found (it "
                                      "comes with torch's CUDA wheels or the CUDA toolkit; set "
                                      "CUPTI_LIB to its path)")
        self.native_lib = lib
        self.ref.set_native(lib, self.cupti)

    # -- environment --------------------------------------------------------------------
    def _env(self, token: str, dump_dir: Path | None) -> dict[str, str]:
        env = {k: os.environ[k] for k in _ENV_PASS if k in os.environ}
        env.update(HOME=str(self.scratch), TMPDIR=str(self.scratch), PYTHONUNBUFFERED="1",
                   PYTHONDONTWRITEBYTECODE="1", CUTEGEN_TOKEN=token,
                   CUTE_DSL_DISABLE_FILE_CACHING="1")
        env.update(NO_MULTICAST)
        if self.options.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = str(self.options.gpu)
        elif "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        if self.mode == "compile":
            env["CUTE_DSL_ARCH"] = self.options.arch
            if self.options.gpu is None:  # compiling needs no GPU: keep off the timed ones
                env["CUDA_VISIBLE_DEVICES"] = ""
        if dump_dir is not None:
            # SASS needs nvdisasm, a subprocess: only in compile-only mode (a GPU worker may
            # not start processes; the profilers disassemble the kept cubin themselves).
            sass = self.options.keep_sass and self.mode == "compile" and nvdisasm_for_dsl()
            env["CUTE_DSL_KEEP"] = "ptx,cubin,sass" if sass else "ptx,cubin"
            env["CUTE_DSL_DUMP_DIR"] = str(dump_dir)
        return env

    def _reference(self) -> dict[str, Any]:
        if self.mode == "gpu":
            self._native()
        info = self.ref.start(hidden=self.options.hidden_shapes)
        if "fsize" not in info:
            max_out = max([int(s["output_bytes"]) for s in info["shapes"]] + [info["output_bytes"]])
            self._fsize_mb = max(1024, 2 * max_out // 2**20 + 64)
            info["fsize"] = self._fsize_mb
        return info

    def baselines(self) -> tuple[Timing | None, Timing | None, str]:
        """Eager and torch.compile timings of the task (cached per task + environment)."""
        if self.mode == "compile" or not self.options.baselines:
            return None, None, ""
        if self._baselines is None:
            fp = fingerprint()
            cached = self.baseline_cache.get(self.task.sha256, fp) if self.baseline_cache else None
            # timed on the inputs the candidates are timed on (kept before: always randn)
            dist = timing_distribution(self._reference()["distributions"])
            if (cached is None or cached.get("method") != "observer"
                    or cached.get("dist", "randn") != dist
                    or not cached.get("tf32_checked")):  # kept before eager_tf32 was timed
                o = self.options
                import secrets

                got = self.ref.call({"op": "baselines", "warmup": o.bench_warmup,
                                     "runs": o.bench_runs, "flush_bytes": o.flush_mb * 2**20,
                                     "seed0": secrets.randbits(40), "dist": dist,
                                     "compile": True}, timeout=1800)
                cached = {k: got.get(k) for k in ("eager", "compiled", "compiled_error",
                                                  "eager_error", "eager_tf32", "tf32_ops",
                                                  "eager_tf32_error")}
                cached["method"], cached["dist"] = "observer", dist
                cached["tf32_checked"] = True
                if self.baseline_cache and cached.get("eager"):  # a failed one is not kept
                    self.baseline_cache.put(self.task.sha256, fp, cached)
            self._baselines = cached
        b = self._baselines
        eager = Timing.from_samples(b["eager"]) if b.get("eager") else None
        comp = Timing.from_samples(b["compiled"]) if b.get("compiled") else None
        return eager, comp, b.get("compiled_error") or ""

    def _eager_tf32(self) -> Timing | None:
        """Eager with cuDNN in TF32 (torch's default) where the task's forward runs cuDNN
        convolutions or recurrent layers, from the baselines (see Evaluation.eager_tf32)."""
        b = self._baselines or {}
        return Timing.from_samples(b["eager_tf32"]) if b.get("eager_tf32") else None

    # -- candidate workers --------------------------------------------------------------
    def _start_worker(self) -> CandidateWorker:
        import secrets

        token = secrets.token_hex(16)
        wdir = self.scratch / f"w-{token[:12]}"
        (wdir / "dsl").mkdir(parents=True)
        argv = [sys.executable, "-m", "cutegen.codegen.eval.worker", "--mode", self.mode,
                "--fsize-mb", str(self._fsize_mb), "--flush-mb", str(self.options.flush_mb)]
        audit_r, audit_w = os.pipe()
        fds = [audit_w]
        observer = None
        if self.mode == "gpu":
            from cutegen.codegen.eval.observer import ObserverChannel

            observer = ObserverChannel()
            key_r, out_w, ctl_r = observer.child_fds()
            fds += [key_r, out_w, ctl_r]
            argv += ["--observer-fds", f"{key_r},{out_w},{ctl_r}",
                     "--native-lib", str(self.native_lib), "--cupti", str(self.cupti)]
        argv += ["--audit-fd", str(audit_w)]
        env = self._env(token, wdir / "dsl")
        env["HOME"] = env["TMPDIR"] = str(wdir)  # the only folder it may write in
        try:
            proc = WorkerProcess(argv, env=env, cwd=str(wdir),
                                 log_cap=self.options.log_cap_bytes, pass_fds=fds)
        finally:
            os.close(audit_w)
        if observer is not None:
            observer.after_spawn()
        return CandidateWorker(proc, wdir, observer,
                               AuditReader(audit_r, lambda: not proc.alive()))

    def _take_worker(self) -> CandidateWorker:
        w = None
        with self._spare_lock:
            while self._spares and w is None:
                w = self._spares.pop(0)
                if not w.proc.alive():
                    w.kill()
                    w = None
        if w is None:
            w = self._start_worker()
        self._active = w
        return w

    def _warm_spare(self) -> None:
        """Keep ``options.spare_workers`` workers starting (a worker takes seconds to import
        torch and the DSL and attach the observer; an evaluation of a small kernel less)."""
        want = max(1, int(getattr(self.options, "spare_workers", 1)))
        if self.mode == "compile":
            want = 1  # host memory: each worker holds torch and the DSL
        with self._spare_lock:
            while len(self._spares) < want:
                self._spares.append(self._start_worker())

    def _ready(self, w: CandidateWorker) -> CandidateWorker:
        """``w`` once it is ready, or a fresh worker started in its place when ``w`` exited
        while starting: a spare starts while the previous candidate runs, and may die of what
        the GPU held then (a CUDA context refused while that candidate filled the memory, or
        while a killed one's memory was still being freed) with nothing wrong now. A second
        failure, or a worker that hung, is the machine's: InfrastructureError."""
        try:
            self._wait_ready(w)
            return w
        except _WorkerExited as e:
            first = str(e)
        shutil.rmtree(w.workdir, ignore_errors=True)
        w = self._start_worker()
        self._active = w
        try:
            self._wait_ready(w)
        except InfrastructureError as e:
            raise InfrastructureError(f"{e}\n(a worker started before it failed too: {first})") \
                from e
        return w

    def _wait_ready(self, w: CandidateWorker) -> None:
        deadline = time.monotonic() + self.options.run_timeout_s + 180
        while True:
            e = w.proc.next_event(deadline - time.monotonic())
            if e is None or e[0] != "msg":
                tail = w.proc.log_tail()
                w.kill()
                err = _WorkerExited if e is not None else InfrastructureError
                raise err(f"a candidate worker failed to start "
                          f"({w.proc.exit_description()})" + (f"\n{tail}" if tail else ""))
            if e[1]["t"] == "infra":
                w.kill()
                raise InfrastructureError(e[1]["message"])
            if e[1]["t"] == "ready":
                return

    def warm(self, candidate: CandidateSource) -> None:
        """Do this candidate's source parsing now, in the caller's thread (the results are
        cached), so the thread that later evaluates it parses nothing: on CPython < 3.12,
        ``ast.parse`` running in two threads at once can fail spuriously."""
        check_source(candidate.code)
        declared_precision(candidate.code)

    def abort(self) -> None:
        """Kill the candidate worker in flight, if any (called from another thread than the
        one driving it: that evaluation then ends as a crash nobody should store)."""
        w = self._active
        if w is not None and w.proc.alive():
            w.proc.kill()

    def close(self) -> None:
        """Stop every worker and remove the scratch folder."""
        with self._spare_lock:
            for w in self._spares:
                w.kill()
            self._spares.clear()
        self.ref.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> LocalEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_dsl_origin(self, origin: str) -> bool:
        """Whether a module load came from the CuTe DSL (its JIT-compiled host code has no
        file; its own libraries live under the DSL's folder)."""
        if origin in ("", "<anonymous>"):
            return True
        try:
            p = str(Path(origin).resolve())
        except OSError:
            p = origin
        return any(p == r or p.startswith(r + "/") for r in self._dsl_roots)

    # -- evaluation ---------------------------------------------------------------------
    def _key(self, cand: CandidateSource) -> str:
        o = self.options
        # The task is part of the key: a candidate compiles different kernels for
        # different shapes and dtypes, so its result for one task says nothing of another.
        return cache_key(cand.sha256, dsl_version=versions().get("nvidia-cutlass-dsl", "?"),
                         arch=o.arch, options={"keep_sass": o.keep_sass,
                                               "task": self.task.sha256})

    def evaluate(self, candidate: CandidateSource) -> Evaluation:
        """Evaluate one candidate. Never raises for the candidate's own fault.

        Raises:
            InfrastructureError: no GPU, the reference worker failed, or the GPU stayed busy.
            TaskError: the task turned out to be unusable (its reference raised).
        """
        self.evaluations += 1
        t0 = time.monotonic()
        base: dict[str, Any] = {"candidate_sha256": candidate.sha256,
                                "task_sha256": self.task.sha256}
        st = check_source(candidate.code)
        if not st.ok and (self.options.static_checks or st.verdict == Verdict.COMPILE_ERROR):
            assert st.verdict is not None
            return Evaluation(**base, stage=Stage.STATIC, verdict=st.verdict, message=st.message,
                              details=st.findings, stage_seconds={"static": time.monotonic() - t0})
        key = self._key(candidate)
        entry = self.cache.get(key)
        if entry is not None and (not entry.ok or self.mode == "compile"):
            return Evaluation(
                **base, stage=Stage.COMPILE,
                verdict=Verdict.COMPILED if entry.ok else Verdict.COMPILE_ERROR,
                message=("compiled (cached)" if entry.ok else entry.error.splitlines()[0][:500]
                         if entry.error else "compile error (cached)"),
                details=(entry.error,) if entry.error and not entry.ok else (),
                kernels=entry.kernels, compile_cached=True,
                artifacts=self._keep_artifacts(candidate, key, entry),
                stage_seconds={"static": time.monotonic() - t0})
        info = self._reference()
        return self._evaluate_in_worker(candidate, info, key=key, entry=entry, t0=t0)

    def _job(self, cand: CandidateSource, w: CandidateWorker, info: Mapping[str, Any]) -> dict[str, Any]:
        cand_path = w.workdir / f"cand_{cand.short}.py"
        cand_path.write_text(cand.code, encoding="utf-8")
        shapes = info["shapes"] if self.mode == "gpu" else info["shapes"][:1]
        return {"candidate_path": str(cand_path), "token": w.proc.token,
                "scratch": str(w.workdir), "shapes": shapes,
                "read_denied": [str(self.scratch / "ref"), str(self.run_dir.resolve())]}

    def _evaluate_in_worker(self, cand: CandidateSource, info: dict[str, Any], *, key: str,
                            entry: CompileEntry | None, t0: float) -> Evaluation:
        t_held = time.monotonic()  # from here to the verdict the evaluation holds the GPU
        w = self._take_worker()
        self._warm_spare()
        t_wait = time.monotonic()
        w = self._ready(w)
        rl, sol = self.roofline_for(info)
        run = CandidateRun(self, w, info, sol_us=sol)
        run.st.seconds["worker_start"] = time.monotonic() - t_wait
        sharers: set[int] | None = None
        try:
            facts = run.run(self._job(cand, w, info))
            if self.mode == "gpu" and facts.benchmarked:
                sharers = self._sharers(w)
        finally:
            log_tail = self._finish_worker(w, run)
        if self.mode == "gpu":
            rel = self.ref.call({"op": "release"}, timeout=120)
            run.st.notes.append(f"reference worker GPU memory: {rel.get('reserved_bytes', 0) / 2**30:.1f} GiB "
                                f"reserved, peak {rel.get('max_reserved_bytes', 0) / 2**30:.1f} GiB")
        facts = run.finish()
        facts.exit_desc = facts.exit_desc or w.proc.exit_description()
        d = _verdict.decide(facts)
        return self._evaluation(cand, key, entry, run, d, info, rl, sharers, log_tail, t_held)

    def _evaluation(self, cand: CandidateSource, key: str, entry: CompileEntry | None,
                    run: CandidateRun, d: Any, info: Mapping[str, Any], rl: Any,
                    sharers: set[int] | None, log_tail: str, t_held: float) -> Evaluation:
        f = run.st.facts
        artifacts = self._store_compile(cand, key, entry, f, run.w.workdir, d.verdict)
        t_base = time.monotonic()
        eager, comp, comp_err = self.baselines() if d.stage == Stage.BENCHMARK else (None, None, "")
        t_base = time.monotonic() - t_base  # the task's eager / compile timing, once a task
        flags = list(d.flags)
        flags += _verdict.reference_flags(f.trial_results)
        details = [plain_text(x) for x in d.details]
        details += run.st.notes
        if d.stage == Stage.BENCHMARK and self._baselines and self._baselines.get("eager_error"):
            details.append(EAGER_FAILED + str(self._baselines["eager_error"]))
        if comp_err:
            details.append(COMPILE_FAILED + comp_err)
        if info.get("note"):
            details.append(info["note"])
        timing = None
        if d.samples and d.stage == Stage.BENCHMARK:
            timing = Timing.from_samples(d.samples)
        verdict, message = d.verdict, plain_text(d.message)
        texts = list(run.st.sass)
        for p in sorted((run.w.workdir / "dsl").glob("*")):
            if p.suffix in (".ptx", ".sass") and p.stat().st_size < 64 * 2**20:
                texts.append(p.read_text(errors="replace"))
        precision = self.precision_of(cand, texts, info)
        if precision:
            flags.append(f"precision:{precision}")
        if timing and eager and eager.median_us / timing.median_us > 10:
            flags.append("review:speedup>10x_eager")
        if timing and verdict == Verdict.CORRECT and rl.fraction(timing.median_us) > 1.0:
            busy = statistics.median(d.busy) if d.busy else timing.median_us
            verdict, message, more = self._above_roofline(cand, timing, busy, rl, message)
            details += more
            if rl.kind == "compute":  # beyond the FLOPs at the measured rate
                details.append(f"the roofline's {rl.flops / 1e9:.3g} GFLOP are the reference's "
                               "own operations: a kernel doing less arithmetic than they do "
                               "(a diagonal matrix product as a row scaling) is beyond it")
            flags.append("review:above_roofline")
        if timing and sharers:
            flags.append("review:gpu_shared")
            details.append(f"{len(sharers)} other process(es) (pids {sorted(sharers)[:5]}) held a "
                           "context on this GPU when the timing ended: the times may be too slow")
        shutil.rmtree(run.w.workdir, ignore_errors=True)
        seconds = {k: round(v, 4) for k, v in run.st.seconds.items() if k != "start"}
        if t_base >= 0.01:
            seconds["baselines"] = round(t_base, 4)
        # the stages above overlap (the reference worker's inputs and comparisons happen
        # while the worker's phase is a call): the wall time held is their sum's truth
        seconds["total"] = round(time.monotonic() - t_held, 4)
        busy_us = statistics.median(d.busy) if timing and d.busy else None
        return Evaluation(
            candidate_sha256=cand.sha256, task_sha256=self.task.sha256, stage=d.stage,
            verdict=verdict, message=message, details=tuple(x for x in details if x),
            trials=tuple(_trial(label, r) for label, r in f.trial_results),
            timing=timing, eager=eager if timing else None, compiled=comp if timing else None,
            eager_tf32=self._eager_tf32() if timing else None,
            roofline=rl, flags=tuple(flags), kernels=tuple(f.kernel_names), precision=precision,
            stage_seconds=seconds, compile_cached=entry is not None, artifacts=artifacts,
            log_tail=plain_text(log_tail), busy_us=busy_us, gpu=self.gpu_name,
            kernel_times=tuple(KernelTime(*k) for k in d.kernel_times) if timing else ())

    def _above_roofline(self, cand: CandidateSource, timing: Timing, busy_us: float, rl: Any,
                        message: str) -> tuple[Verdict, str, list[str]]:
        """Faster than the measured roofline (but not than physics): re-timed by an external
        profiler (see :func:`.verdict.above_roofline`)."""
        from cutegen.codegen.eval.external import external_kernel_time

        return _verdict.above_roofline(external_kernel_time(self, cand), median_us=timing.median_us,
                                       busy_us=busy_us, bound_us=rl.bound_us, message=message)

    def retime(self, candidates: Sequence[CandidateSource], *, rounds: int = 3) -> list[Timing | None]:
        """Re-time candidates in fresh workers, round-robin, re-checking timed outputs.

        Returns one Timing per candidate holding all its samples, or None for a candidate
        whose timed outputs were wrong, whose run showed anything but its own CuTe kernels,
        or whose worker failed during re-timing.
        """
        if self.mode == "compile":
            raise InfrastructureError("re-timing needs an NVIDIA GPU")
        info = self._reference()
        samples: list[list[float] | None] = [[] for _ in candidates]
        for _ in range(rounds):
            for k, c in enumerate(candidates):
                got = samples[k]
                if got is None:
                    continue
                more = self._bench_only(c, info)
                if more is None:
                    samples[k] = None
                else:
                    got.extend(more)
        return [Timing.from_samples(s, method="re-timed in fresh workers, interleaved "
                                    "(gpu-activity spans)") if s else None for s in samples]

    def _bench_only(self, cand: CandidateSource, info: dict[str, Any]) -> list[float] | None:
        w = self._take_worker()
        self._warm_spare()
        w = self._ready(w)
        rl, sol = self.roofline_for(info)
        run = CandidateRun(self, w, info, sol_us=sol, verify=False)
        try:
            run.run(self._job(cand, w, info))
            run.st.facts.benchmarked = True
        finally:
            self._finish_worker(w, run)
        self.ref.call({"op": "release"}, timeout=120)
        f = run.finish()
        f.trial_results = [("re-timing", {"passed": True})]
        d = _verdict.decide(f)
        shutil.rmtree(w.workdir, ignore_errors=True)
        return list(d.samples) if d.verdict == Verdict.CORRECT and d.samples else None

    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> Any:
        """A :class:`cutegen.profilers.ProfileTarget` for this candidate: its artifacts and a
        launcher job (candidate file, main-shape input specs, the reference's parameters)
        written under ``workdir``, which outlives this evaluator."""
        import json
        import secrets

        from cutegen.profilers import ProfileTarget, artifact_lists, artifact_paths

        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        cubin = sass = ptx = None
        cubins: tuple[Path, ...] = ()
        sasses: tuple[Path, ...] = ()
        if evaluation is not None:
            cubin, sass, ptx = artifact_paths(evaluation.artifacts, self.run_dir)
            cubins, sasses = artifact_lists(evaluation.artifacts, self.run_dir)
        argv: tuple[str, ...] = ()
        if self.mode == "gpu":
            info = self._reference()
            main = info["shapes"][0]
            cand_path = workdir / f"cand_{candidate.short}.py"
            cand_path.write_text(candidate.code, encoding="utf-8")
            state = workdir / "state.pt"
            shutil.copyfile(main["state_path"], state)
            job = {"candidate_path": str(cand_path), "specs": main["specs"],
                   "init_args": main["init_args"], "seed_init": main["seed_init"],
                   "state_path": str(state), "seed": secrets.randbits(40),
                   "dist": timing_distribution(info["distributions"])}
            (workdir / "launch.json").write_text(json.dumps(job))
            argv = (sys.executable, "-m", "cutegen.codegen.launch", str(workdir / "launch.json"))
        env = self._env(secrets.token_hex(16), None)
        env["HOME"] = env["TMPDIR"] = str(workdir)
        return ProfileTarget(candidate_id=candidate.sha256, workdir=workdir, launch_argv=argv,
                             env=env, cubin_path=cubin, sass_path=sass, ptx_path=ptx,
                             cubin_paths=cubins, sass_paths=sasses,
                             evaluation=evaluation)

    # -- helpers ----------------------------------------------------------------------------
    def _finish_worker(self, w: CandidateWorker, run: CandidateRun) -> str:
        killed = w.proc.kill()
        f = run.st.facts
        if (f.timeout_phase or f.killed_reason) and self.mode == "gpu":
            if not _gpu_released(killed):
                raise InfrastructureError(
                    "the GPU still holds a killed worker's context 15 s after the kill; the device "
                    "is unhealthy and the search pauses (RELIABILITY.md A3)")
        if w.observer is not None:
            w.observer.close()
        return w.proc.log_tail()

    def _sharers(self, w: CandidateWorker) -> set[int] | None:
        """Foreign processes on the timed GPU right after the benchmark (see foreign_pids)."""
        own = {os.getpid()}
        for c in (self.ref.proc, *(s.proc for s in self._spares)):
            if c is not None:
                own |= marked_pids(c.token) | {c.proc.pid}
        return foreign_pids(_device_pids(), marked_pids(w.proc.token) | {w.proc.proc.pid}, own)

    def _keep_artifacts(self, cand: CandidateSource, key: str, entry: CompileEntry) -> dict[str, str]:
        out: dict[str, str] = {}
        if not entry.files:
            return out
        dest = self.run_dir / "artifacts" / cand.sha256[:16]
        try:
            dest.mkdir(parents=True, exist_ok=True)
            for name in entry.files:
                src = self.cache.path(key, name)
                if src.is_file():
                    tmp = dest / (name + ".tmp")
                    shutil.copyfile(src, tmp)
                    os.replace(tmp, dest / name)
                    out[name] = str((dest / name).relative_to(self.run_dir))
        except OSError:
            return out
        return out

    def _store_compile(self, cand: CandidateSource, key: str, entry: CompileEntry | None,
                       f: Any, wdir: Path, verdict: Verdict) -> dict[str, str]:
        """Record the compile result in the cache (first time) and keep artifacts in the run dir."""
        if entry is None:
            files = {p.name: p for p in sorted((wdir / "dsl").glob("*"))
                     if p.is_file() and p.suffix in (".ptx", ".cubin", ".sass")}
            if verdict == Verdict.COMPILE_ERROR and f.error:
                new = CompileEntry(ok=False, error=plain_text(str(f.error.get("message", ""))))
            elif f.kernel_names:
                new = CompileEntry(ok=True, kernels=tuple(f.kernel_names))
            else:
                return {}
            try:
                self.cache.put(key, new, files)
            except OSError:
                return {}
            entry = self.cache.get(key)
            if entry is None:
                return {}
        return self._keep_artifacts(cand, key, entry)

    def roofline_for(self, info: Mapping[str, Any]) -> tuple[Any, float]:
        rl = roofline(bytes_moved=int(info["input_bytes"]) + int(info["output_bytes"]),
                      flops=int(info["flops"]), ceilings=self.ceilings)
        sol = speed_of_light_us(input_bytes=int(info["input_bytes"]),
                                output_bytes=int(info["output_bytes"]), ceilings=H200_DATASHEET)
        return rl, sol

    def precision_of(self, cand: CandidateSource, texts: Sequence[str], info: Mapping[str, Any]) -> str:
        dts = [s["dtype"] for s in info["shapes"][0]["specs"] if s.get("kind") == "tensor"]
        task_dtype = next((d for d in dts if d.startswith(("float", "bfloat"))), "float32")
        seen = _verdict.detect_precision(texts, task_dtype)
        declared = declared_precision(cand.code)
        return "+".join(p for p in (declared, seen) if p) if declared != seen else declared


def _trial(label: str, r: Mapping[str, Any]) -> TrialResult:
    return TrialResult(label=label, passed=bool(r.get("passed")),
                       reason=plain_text(str(r.get("reason") or r.get("error") or "")),
                       max_abs_err=float(r.get("max_abs_err", 0.0)),
                       max_rel_err=float(r.get("max_rel_err", 0.0)),
                       rmse=float(r.get("rmse", 0.0)), ref_rmse=float(r.get("ref_rmse", 0.0)))


def _gpu_visible() -> bool:
    """Whether NVML sees a GPU (without creating a CUDA context in the search process)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()) > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no driver, no NVML: no GPU
        return False


def _gpu_released(pids: set[int], timeout: float = 15.0) -> bool:
    """After a kill, wait until none of ``pids`` holds a GPU context (A3). True if released
    (or NVML cannot tell)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to check
        return True
    try:
        deadline = time.monotonic() + timeout
        while True:
            busy = set()
            for d in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(d)
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    busy.add(int(p.pid))
            if not busy & pids:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.25)
    except Exception:  # noqa: BLE001
        return True
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def foreign_pids(device_pids: dict[int, set[int]], worker: set[int],
                 own: set[int]) -> set[int] | None:
    """Processes other than ours holding a context on the GPU the candidate worker used.

    ``device_pids`` maps each NVML device to the pids with a compute context on it; the
    worker's device is the one listing a worker pid. ``None`` when no device lists one (no
    NVML, or pids from another namespace): then nothing can be said.
    """
    for pids in device_pids.values():
        if pids & worker:
            return pids - worker - own
    return None


def _device_pids() -> dict[int, set[int]]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to check
        return {}
    try:
        return {d: {int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(
                    pynvml.nvmlDeviceGetHandleByIndex(d))}
                for d in range(pynvml.nvmlDeviceGetCount())}
    except Exception:  # noqa: BLE001
        return {}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def local_evaluator(task: Task, options: EvalOptions, run_dir: Path, *,
                    baseline_cache: BaselineCache | None = None,
                    compile_cache: CompileCache | None = None) -> LocalEvaluator:
    """The process-isolated evaluator of this machine for one task: what the CLI, the
    library entry point, the GPU pool and the Ray actors build."""
    return LocalEvaluator(task, options, run_dir=Path(run_dir), baseline_cache=baseline_cache,
                          compile_cache=compile_cache)
