"""The candidate worker: ``python -m cutegen.codegen.worker``. Runs ONE candidate, then exits.

Started by :mod:`cutegen.codegen.evaluator` with spawn semantics in its own session, it
imports torch and the CuTe DSL (and, on a GPU, creates its CUDA context and the timing
buffers) *before* it receives a job, so a spare worker can be warmed up while another
candidate runs. It then reads one job (JSON on stdin), imports the candidate from its
file and reports on a dedicated pipe: phases (for the parent's compile/run timeouts), the
outputs of every verification trial (as files, for the trusted verifier), what the
profiler saw during one call, the benchmark samples and the timed outputs to re-check.

Nothing this process says is taken as a success: correctness is decided by the reference
worker from the output files, and everything else the parent cross-checks. The worker
never sees the task module: it gets input specs, constructor arguments and the reference
model's parameters.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from cutegen.codegen import _tensorfile, _wire
from cutegen.codegen._tensorfile import flatten_outputs
from cutegen.codegen.inputs import ArgSpec, empty_like_specs, generate, refill

_CUDA_ERROR_MARKERS = ("CUDA error", "cudaError", "illegal memory access", "CUDA_ERROR",
                       "unspecified launch failure", "misaligned address", "an illegal instruction")


class _Reporter:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.phase = "start"

    def send(self, t: str, **kw: Any) -> None:
        _wire.send(self.fd, {"t": t, **kw})

    def set_phase(self, phase: str, **kw: Any) -> None:
        self.phase = phase
        self.send("phase", phase=phase, **kw)




def _limits(fsize_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    cap = fsize_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))


def _load_candidate(path: str, token: str) -> Any:
    name = f"cutegen_candidate_{token[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class _Job:
    """One candidate's evaluation inside the worker."""

    def __init__(self, rep: _Reporter, job: dict[str, Any], gpu: bool, timer: Any) -> None:
        self.rep, self.job, self.gpu, self.timer = rep, job, gpu, timer
        self.scratch = Path(job["scratch"])
        self.models: dict[int, Any] = {}
        self.shapes = job["shapes"]
        self.device = "cuda" if gpu else "cpu"

    # -- model per shape --------------------------------------------------------------
    def model(self, mod: Any, idx: int) -> Any:
        import torch

        if idx not in self.models:
            sh = self.shapes[idx]
            self.rep.set_phase("init", shape=sh["label"])
            torch.manual_seed(int(sh["seed_init"]))
            m = mod.ModelNew(*sh["init_args"])
            if self.gpu:
                m = m.to("cuda")
            state = torch.load(sh["state_path"], map_location=self.device, weights_only=True)
            have = {k: tuple(v.shape) for k, v in m.state_dict().items()}
            want = {k: tuple(v.shape) for k, v in state.items()}
            if have != want:
                missing = sorted(set(want) - set(have))
                extra = sorted(set(have) - set(want))
                shapes = sorted(k for k in set(have) & set(want) if have[k] != want[k])
                raise _Verdict("wrong", "ModelNew's parameters differ from Model's "
                               f"(missing {missing}, unexpected {extra}, other shapes {shapes}); "
                               "the harness loads the reference's parameters into ModelNew")
            m.load_state_dict(state)
            self.models[idx] = m
        return self.models[idx]

    def specs(self, idx: int) -> list[ArgSpec]:
        return [ArgSpec.from_dict(s) for s in self.shapes[idx]["specs"]]

    # -- phases -----------------------------------------------------------------------
    def compile_only(self, mod: Any, rec: Any) -> None:
        import torch

        m = self.model(mod, 0)
        inputs = empty_like_specs(self.specs(0), device="cpu")
        self.rep.set_phase("call")
        note = ""
        try:
            with torch.no_grad():
                m(*inputs)
        except Exception as e:  # noqa: BLE001 - expected without a GPU once kernels compiled
            if rec.error or not rec.kernels:
                raise
            note = f"forward raised after compiling (expected without a GPU): {type(e).__name__}: {e}"
        if not rec.kernels:
            raise _Verdict("decoy", "forward compiled no CuTe DSL kernel")
        self.rep.send("compiled", kernels=rec.kernels, seconds=rec.seconds, note=note[:2000],
                      sass=rec.sass[:8], ptx_chars=sum(len(p) for p in rec.ptx))

    def verify(self, mod: Any, rec: Any) -> None:
        import torch

        sync = self.timer.originals["synchronize"]
        threads_after_first: int | None = None
        for trial in self.job["trials"]:
            i, idx = int(trial["i"]), int(trial["shape"])
            m = self.model(mod, idx)
            specs = self.specs(idx)
            self.rep.set_phase("verify", trial=i)
            inputs = generate(specs, seed=int(trial["seed"]), distribution=trial["dist"],
                              device="cuda")
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            _poison(int(self.shapes[idx]["output_bytes"]), trial["prefill"])
            n_threads = threading.active_count()
            self.rep.set_phase("call", trial=i)
            with torch.no_grad():
                out = m(*inputs)
            outs = flatten_outputs(out)
            # Copy on the current stream *before* synchronising: work left running on a
            # side stream is caught here (RELIABILITY.md C6/C7).
            copies = [o.clone() if type(o) is torch.Tensor else o for o in outs]
            sync()
            self.rep.set_phase("verify", trial=i)
            for o in outs:
                if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor:
                    raise _Verdict("wrong_type", f"forward returned a {type(o).__name__}, "
                                   "a subclass of torch.Tensor; plain tensors are required")
                if not isinstance(o, (torch.Tensor, bool, int, float)):
                    raise _Verdict("wrong_type", f"forward returned a {type(o).__name__}")
            _check_alias(outs, inputs)
            for k, (a, b) in enumerate(zip(inputs, before, strict=True)):
                if isinstance(a, torch.Tensor) and not torch.equal(a, b):
                    raise _Verdict("input_modified", f"forward modified input {k} in place")
            if threads_after_first is not None and threading.active_count() > threads_after_first:
                raise _Verdict("thread_spawned", "forward started a thread "
                               f"({threading.active_count() - n_threads} new)")
            if threads_after_first is None:
                threads_after_first = threading.active_count()
            path = self.scratch / f"trial_{i}.bin"
            _tensorfile.save(path, copies)
            meta = [{"contiguous": bool(o.is_contiguous()), "device": o.device.type}
                    if isinstance(o, torch.Tensor) else {} for o in outs]
            self.rep.send("trial", i=i, path=str(path), meta=meta, kernels=list(rec.kernels))

    def profile_call(self, mod: Any) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        m = self.model(mod, 0)
        specs = self.specs(0)
        self.rep.set_phase("profile")
        inputs = generate(specs, seed=int(self.job["bench"]["seed0"]) - 1,
                          distribution=self.job["bench"]["dist"], device="cuda")
        sync = self.timer.originals["synchronize"]
        with torch.no_grad():
            m(*inputs)  # warm (compile happened during verify; this avoids first-call effects)
        sync()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            torch.cuda._sleep(1000)  # a marker kernel on the current stream
            with torch.no_grad():
                m(*inputs)
            sync()
        kernels, aten = [], []
        for ev in prof.profiler.kineto_results.events():
            dev = str(ev.device_type())
            name = ev.name()
            if "CUDA" in dev:
                kernels.append({"name": name, "us": ev.duration_ns() / 1000.0,
                                "stream": int(getattr(ev, "device_resource_id", lambda: -1)())})
            elif name.startswith("aten::"):
                aten.append(name)
        self.rep.send("kernels", gpu=kernels, aten=sorted(set(aten)))

    def bench(self, mod: Any) -> None:
        import torch

        b = self.job["bench"]
        m = self.model(mod, 0)
        specs = self.specs(0)
        seed0, dist = int(b["seed0"]), b["dist"]
        inputs = generate(specs, seed=seed0, distribution=dist, device="cuda")
        recheck = {int(i) for i in b["recheck"]}
        kept: dict[int, list[Any]] = {}

        def before(i: int) -> None:
            refill(inputs, specs, seed=seed0 + 1000 + i, distribution=dist)

        def after(i: int, out: Any) -> None:
            if i in recheck:
                kept[i] = [o.clone() if isinstance(o, torch.Tensor) else o for o in flatten_outputs(out)]

        self.rep.set_phase("bench")
        late0 = self.timer.late_calls
        with torch.no_grad():
            samples = self.timer.time_calls(lambda: m(*inputs), warmup=int(b["warmup"]),
                                            runs=int(b["runs"]), before_each=before,
                                            after_each=after)
        self.rep.send("timing", samples=samples, late=self.timer.late_calls - late0)
        for i, outs in sorted(kept.items()):
            path = self.scratch / f"timed_{i}.bin"
            _tensorfile.save(path, outs)
            self.rep.send("timed_output", i=i, path=str(path), seed=seed0 + 1000 + i, dist=dist)
        med = sorted(samples)[len(samples) // 2]
        calls = int(min(2000, max(10, 0.2e6 / max(med, 1.0))))
        self.rep.set_phase("burst")
        self.rep.send("burst_start", calls=calls)
        with torch.no_grad():
            per_call = self.timer.burst(lambda: m(*inputs), calls=calls)
        self.rep.send("burst_end", calls=calls, event_us=per_call)


class _Verdict(Exception):
    """A failure the worker can see itself (it can only make a candidate look worse)."""

    def __init__(self, verdict: str, message: str) -> None:
        super().__init__(message)
        self.verdict = verdict


def _poison(nbytes: int, pattern: str) -> None:
    """Fill freed allocator blocks so that reading "fresh" memory gives garbage (C1, B8)."""
    import torch

    sizes = {max(512, nbytes), max(512, 2 * nbytes), 1 << 20}
    blocks = []
    for n in sorted(sizes):
        try:
            b = torch.empty(n, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError:
            break
        if pattern == "nan":
            b.fill_(0xFF)
        else:
            b.random_(0, 256)
        blocks.append(b)
    del blocks


def _check_alias(outs: list[Any], inputs: list[Any]) -> None:
    import torch

    spans = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.numel():
            st = x.untyped_storage()
            spans.append((st.data_ptr(), st.data_ptr() + st.nbytes()))
    for k, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.numel():
            st = o.untyped_storage()
            lo, hi = st.data_ptr(), st.data_ptr() + st.nbytes()
            if any(lo < b and a < hi for a, b in spans):
                raise _Verdict("aliased_output", f"output {k} shares memory with an input")


def _classify(e: BaseException, rec: Any, phase: str) -> tuple[str, str]:
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, _Verdict):
        return e.verdict, str(e)
    if rec is not None and rec.error and phase in ("compile", "call"):
        return "compile_error", rec.error
    if type(e).__name__ == "OutOfMemoryError":
        return "oom", text
    if any(mk in text for mk in _CUDA_ERROR_MARKERS):
        return "crash", f"CUDA error in {phase}: {text}"
    return "crash", f"exception in {phase}: {text}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cutegen.codegen.worker")
    ap.add_argument("--msg-fd", type=int, required=True)
    ap.add_argument("--mode", choices=("gpu", "compile"), required=True)
    ap.add_argument("--fsize-mb", type=int, default=8192)
    ap.add_argument("--flush-mb", type=int, default=256)
    args = ap.parse_args(argv)
    rep = _Reporter(args.msg_fd)
    _limits(args.fsize_mb)
    gpu = args.mode == "gpu"
    import cutlass.cute  # noqa: F401
    import torch  # noqa: F401  (warm-up: the spare worker pays the import cost)

    from cutegen.codegen import _dslhook

    timer = None
    if gpu:
        if not torch.cuda.is_available():
            rep.send("infra", message="no CUDA device is visible to the worker")
            return 0
        torch.empty(1, device="cuda")
        from cutegen.codegen._timing import Timer

        timer = Timer(flush_mb=args.flush_mb, sleep_cycles=400_000)
    rep.send("ready", pid=os.getpid())
    line = sys.stdin.readline()
    if not line:
        return 0
    job = json.loads(line)
    os.chdir(job["scratch"])
    rec = None
    try:
        if not gpu:
            torch.cuda.current_stream = lambda *a, **k: _FakeStream()  # type: ignore[assignment]
        rec = _dslhook.install(compile_only=not gpu, on_phase=lambda p: rep.set_phase(p))
        rep.set_phase("import")
        mod = _load_candidate(job["candidate_path"], job["token"])
        if not hasattr(mod, "ModelNew"):
            raise _Verdict("static_reject", "the candidate defines no ModelNew")
        w = _Job(rep, job, gpu, timer)
        if not gpu:
            w.compile_only(mod, rec)
        else:
            w.verify(mod, rec)
            if job.get("check_kernels", True):
                w.profile_call(mod)
            if job.get("bench"):
                # The parent finishes comparing the trials (on the same GPU) before it lets
                # the benchmark start, and skips it for a candidate that is already wrong.
                rep.send("await_go")
                line = sys.stdin.readline()
                if not line.strip() or json.loads(line) != "go":
                    os._exit(0)
                w.bench(mod)
            from cutegen.codegen._timing import tampered

            rep.send("tamper", names=tampered(timer.originals))
        rep.send("compile_info", kernels=list(rec.kernels), seconds=rec.seconds,
                 sass=rec.sass[:8])
        rep.send("done")
    except BaseException as e:  # noqa: BLE001 - everything the candidate does is data
        verdict, message = _classify(e, rec, rep.phase)
        tb = traceback.format_exc(limit=20)
        try:
            rep.send("error", verdict=verdict, phase=rep.phase, message=message[:8000],
                     traceback=tb[-8000:])
        except OSError:
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class _FakeStream:
    """What ``torch.cuda.current_stream()`` returns in compile-only mode (no CUDA)."""

    cuda_stream = 0
    stream_id = 0
    device_index = 0


if __name__ == "__main__":
    sys.exit(main())
