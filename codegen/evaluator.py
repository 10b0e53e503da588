"""The local, process-isolated evaluator: static → compile → verify → benchmark.

:class:`LocalEvaluator` is bound to one task. It keeps one trusted reference worker for the
task (:mod:`cutegen.codegen.refworker`) and starts a fresh candidate worker
(:mod:`cutegen.codegen.worker`) for every candidate — warmed up in advance while the
previous candidate runs — so no candidate ever shares a process with another candidate,
the reference, the expected outputs or the search. Timeouts kill whole process trees;
compile and run have separate limits; a worker that crashed, hung or saw a CUDA error is
simply never reused (none is).

Candidate faults become Evaluations; machine faults raise InfrastructureError.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cutegen.codegen import _verdict
from cutegen.codegen._proc import Child
from cutegen.codegen.backend import NO_MULTICAST, BaselineCache, EvalOptions
from cutegen.codegen.candidate import CandidateSource, declared_precision
from cutegen.codegen.compile_cache import CompileCache, CompileEntry, cache_key, default_dir
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, Verdict
from cutegen.codegen.roofline import (
    H200_DATASHEET,
    H200_MEASURED,
    Ceilings,
    roofline,
    speed_of_light_us,
)
from cutegen.codegen.static import check_source
from cutegen.codegen.tasks import Task
from cutegen.codegen.toolchain import fingerprint, nvdisasm_for_dsl, versions
from cutegen.errors import InfrastructureError, TaskError

_ENV_PASS = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "LANG", "LC_ALL",
             "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "VIRTUAL_ENV", "SYSTEMROOT",
             "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


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
        self.scratch = Path(tempfile.mkdtemp(prefix="cutegen-", dir=_scratch_root()))
        self._ref: Child | None = None
        self._ref_info: dict[str, Any] | None = None
        self._req = 0
        self._spare: Child | None = None
        self._spare_lock = threading.Lock()
        self._active: Child | None = None  # the candidate worker in flight (for abort)
        self._baselines: dict[str, Any] | None = None
        self._fsize_mb = 8192
        self.gpu_name = ""
        self.evaluations = 0

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
            sass = self.options.keep_sass and nvdisasm_for_dsl()
            env["CUTE_DSL_KEEP"] = "ptx,cubin,sass" if sass else "ptx,cubin"
            env["CUTE_DSL_DUMP_DIR"] = str(dump_dir)
        return env

    # -- the reference worker -----------------------------------------------------------
    def _reference(self) -> dict[str, Any]:
        if self._ref_info is not None:
            return self._ref_info
        ref_dir = self.scratch / "ref"
        ref_dir.mkdir(exist_ok=True)
        token = secrets.token_hex(16)
        self._ref = Child([sys.executable, "-m", "cutegen.codegen.refworker", "--mode", self.mode,
                           "--task", str(self.task.path), "--scratch", str(ref_dir)],
                          env=self._env(token, None), cwd=str(ref_dir),
                          log_cap=self.options.log_cap_bytes)
        ready = self._ref_wait("ready", timeout=300)
        self.gpu_name = ready.get("gpu", "")
        info = self._ref_call({"op": "load", "hidden": self.options.hidden_shapes,
                               "seed_init": secrets.randbits(62)}, timeout=900)
        max_out = max([int(s["output_bytes"]) for s in info["shapes"]] + [info["output_bytes"]])
        self._fsize_mb = max(1024, 2 * max_out // 2**20 + 64)
        self._ref_info = info
        return info

    def _ref_wait(self, kind: str, *, timeout: float, rid: int | None = None) -> dict[str, Any]:
        assert self._ref is not None
        deadline = time.monotonic() + timeout
        while True:
            ev = self._ref.next_event(deadline - time.monotonic())
            if ev is None:
                tail = self._ref.log_tail()
                self._ref.kill()
                self._ref, self._ref_info = None, None
                raise InfrastructureError(f"the reference worker did not answer within {timeout:.0f} s"
                                          + (f"\n{tail}" if tail else ""))
            what, msg, _ = ev
            if what != "msg":
                tail = self._ref.log_tail()
                self._ref.kill()
                self._ref, self._ref_info = None, None
                raise TaskError(f"the reference worker for {self.task.name} died ({what}); "
                                f"the task's own code may have crashed it\n{tail}")
            if msg["t"] == "task_error":
                raise TaskError(f"{self.task.path}: {msg['message']}")
            if msg["t"] == "infra":
                raise InfrastructureError(msg["message"])
            if msg["t"] == kind and (rid is None or msg.get("id") == rid):
                return msg

    def _ref_call(self, req: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        rid = self._ref_send(req)
        return self._ref_result(rid, timeout=timeout)

    def _ref_send(self, req: dict[str, Any]) -> int:
        assert self._ref is not None
        self._req += 1
        if not self._ref.send_line({**req, "id": self._req}):
            raise InfrastructureError("the reference worker is gone")
        return self._req

    def _ref_result(self, rid: int, *, timeout: float) -> dict[str, Any]:
        msg = self._ref_wait("reply", timeout=timeout, rid=rid)
        if "error" in msg and len(msg) <= 4:
            raise InfrastructureError(f"reference worker error: {msg['error']}\n{msg.get('traceback', '')}")
        return msg

    def baselines(self) -> tuple[Timing | None, Timing | None, str]:
        """Eager and torch.compile timings of the task (cached per task + environment)."""
        if self.mode == "compile" or not self.options.baselines:
            return None, None, ""
        if self._baselines is None:
            fp = fingerprint()
            cached = self.baseline_cache.get(self.task.sha256, fp) if self.baseline_cache else None
            if cached is None:
                self._reference()
                o = self.options
                cached = self._ref_call({"op": "baselines", "warmup": o.bench_warmup,
                                         "runs": o.bench_runs, "flush_mb": o.flush_mb,
                                         "seed0": secrets.randbits(40), "dist": "randn",
                                         "compile": True}, timeout=1800)
                cached = {k: cached.get(k) for k in ("eager", "compiled", "compiled_error")}
                if self.baseline_cache:
                    self.baseline_cache.put(self.task.sha256, fp, cached)
            self._baselines = cached
        b = self._baselines
        eager = Timing.from_samples(b["eager"]) if b.get("eager") else None
        comp = Timing.from_samples(b["compiled"]) if b.get("compiled") else None
        return eager, comp, b.get("compiled_error") or ""

    # -- candidate workers --------------------------------------------------------------
    def _start_worker(self) -> Child:
        token = secrets.token_hex(16)
        wdir = self.scratch / f"w-{token[:12]}"
        (wdir / "dsl").mkdir(parents=True)
        argv = [sys.executable, "-m", "cutegen.codegen.worker", "--mode", self.mode,
                "--fsize-mb", str(self._fsize_mb), "--flush-mb", str(self.options.flush_mb)]
        child = Child(argv, env=self._env(token, wdir / "dsl"), cwd=str(wdir),
                      log_cap=self.options.log_cap_bytes)
        child.workdir = wdir  # type: ignore[attr-defined]
        return child

    def _take_worker(self) -> Child:
        with self._spare_lock:
            w, self._spare = self._spare, None
        if w is None or not w.alive():
            if w is not None:
                w.kill()
            w = self._start_worker()
        self._active = w
        return w

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
        if w is not None and w.alive():
            w.kill()

    def _warm_spare(self) -> None:
        with self._spare_lock:
            if self._spare is None:
                self._spare = self._start_worker()

    def close(self) -> None:
        """Stop every worker and remove the scratch folder."""
        with self._spare_lock:
            if self._spare is not None:
                self._spare.kill()
                self._spare = None
        if self._ref is not None:
            self._ref.send_line({"op": "quit"})
            self._ref.kill()
            self._ref = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> LocalEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        from cutegen.codegen._evalrun import run_candidate

        self.evaluations += 1
        t0 = time.monotonic()
        base = {"candidate_sha256": candidate.sha256, "task_sha256": self.task.sha256}
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
        return run_candidate(self, candidate, info, key=key, entry=entry, t0=t0)

    def retime(self, candidates: Sequence[CandidateSource], *, rounds: int = 3) -> list[Timing | None]:
        """Re-time candidates in fresh workers, round-robin, re-checking timed outputs.

        Returns one Timing per candidate holding all its samples, or None for a candidate
        whose timed outputs were wrong or whose worker failed during re-timing.
        """
        from cutegen.codegen._evalrun import bench_only

        if self.mode == "compile":
            raise InfrastructureError("re-timing needs an NVIDIA GPU")
        info = self._reference()
        samples: list[list[float] | None] = [[] for _ in candidates]
        for _ in range(rounds):
            for k, c in enumerate(candidates):
                if samples[k] is None:
                    continue
                got = bench_only(self, c, info)
                if got is None:
                    samples[k] = None
                else:
                    samples[k].extend(got)  # type: ignore[union-attr]
        return [Timing.from_samples(s, method="re-timed in fresh workers, interleaved")
                if s else None for s in samples]

    def profile_target(self, candidate: CandidateSource, evaluation: Evaluation | None,
                       workdir: Path) -> Any:
        """A :class:`cutegen.profilers.ProfileTarget` for this candidate: its artifacts and a
        launcher job (candidate file, main-shape input specs, the reference's parameters)
        written under ``workdir``, which outlives this evaluator."""
        import json

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
                   "state_path": str(state), "seed": secrets.randbits(40)}
            (workdir / "launch.json").write_text(json.dumps(job))
            argv = (sys.executable, "-m", "cutegen.codegen.launch", str(workdir / "launch.json"))
        env = self._env(secrets.token_hex(16), None)
        env["HOME"] = env["TMPDIR"] = str(workdir)
        return ProfileTarget(candidate_id=candidate.sha256, workdir=workdir, launch_argv=argv,
                             env=env, cubin_path=cubin, sass_path=sass, ptx_path=ptx,
                             cubin_paths=cubins, sass_paths=sasses,
                             evaluation=evaluation)

    # -- helpers used by _evalrun ---------------------------------------------------------
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

    def roofline_for(self, info: Mapping[str, Any]) -> tuple[Any, float]:
        rl = roofline(bytes_moved=int(info["input_bytes"]) + int(info["output_bytes"]),
                      flops=int(info["flops"]), ceilings=self.ceilings)
        sol = speed_of_light_us(input_bytes=int(info["input_bytes"]),
                                output_bytes=int(info["output_bytes"]), flops=int(info["flops"]),
                                ceilings=H200_DATASHEET)
        return rl, sol

    def precision_of(self, cand: CandidateSource, texts: Sequence[str], info: Mapping[str, Any]) -> str:
        dts = [s["dtype"] for s in info["shapes"][0]["specs"] if s.get("kind") == "tensor"]
        task_dtype = next((d for d in dts if d.startswith(("float", "bfloat"))), "float32")
        seen = _verdict.detect_precision(texts, task_dtype)
        declared = declared_precision(cand.code)
        return "+".join(p for p in (declared, seen) if p) if declared != seen else declared


def make_evaluator(task: Task, options: EvalOptions, run_dir: Path, *,
                   baseline_cache: BaselineCache | None = None) -> LocalEvaluator:
    """The evaluator the CLI uses: a :class:`LocalEvaluator` for this machine."""
    return LocalEvaluator(task, options, run_dir=run_dir, baseline_cache=baseline_cache)
