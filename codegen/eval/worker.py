"""The candidate worker: ``python -m cutegen.codegen.eval.worker``. Runs ONE candidate.

Started by the evaluator in its own session, it imports torch and the CuTe DSL, creates
its CUDA context and attaches the native observer (:mod:`.observer`) *before* it receives
a job, so a spare worker can be warmed up while another candidate runs. Then, for one job:

1. map the reference worker's shared input buffers (CUDA IPC);
2. install the DSL hook, lock the process down (:mod:`.sandbox`: seccomp, audit hook) and
   import the candidate;
3. on ``init``, build ``ModelNew`` for every shape and load the reference's parameters;
4. on each ``call``: fill every free block of the caching allocator and the prefill blocks
   with the call's byte, flush the L2 with memsets, run ``forward``
   between two CUDA events, synchronise the device and hand the outputs back as IPC
   descriptors; on ``end``, report what the DSL compiled and exit.

Everything this process says is a claim: the parent brackets every call with its own
clock, reads what really ran on the GPU from the observer's authenticated records, and has
the outputs compared by the reference worker. The worker never sees the task module, a
seed, or which call is timed or compared.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import resource
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cutegen.codegen.eval import framing
from cutegen.codegen.eval.activity import MAX_POISONED
from cutegen.codegen.eval.ipc import flatten_outputs
from cutegen.codegen.inputs import ArgSpec, empty_like_specs

_CUDA_ERROR_MARKERS = ("CUDA error", "cudaError", "illegal memory access", "CUDA_ERROR",
                       "unspecified launch failure", "misaligned address", "an illegal instruction")


def free_blocks(segments: list[dict[str, Any]], limit: int = MAX_POISONED) -> list[tuple[int, int]]:
    """``(address, size)`` of the free blocks in a ``torch.cuda.memory_snapshot()``, in its
    default pool (a CUDA graph's private pool is left alone): the ``limit`` largest, in
    address order."""
    free = [(int(b["address"]), int(b["size"]))
            for seg in segments if tuple(seg.get("segment_pool_id") or (0, 0)) == (0, 0)
            for b in seg.get("blocks", ())
            if b.get("state") == "inactive" and b.get("address") and int(b.get("size", 0)) > 0]
    free = sorted(free, key=lambda ab: -ab[1])[:max(0, limit)]
    return sorted(free)


class _Reporter:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.phase = "start"

    def send(self, t: str, **kw: Any) -> None:
        framing.send(self.fd, {"t": t, **kw})

    def set_phase(self, phase: str, **kw: Any) -> None:
        self.phase = phase
        self.send("phase", phase=phase, **kw)


class _Verdict(Exception):
    """A failure the worker can see itself (it can only make a candidate look worse)."""

    def __init__(self, verdict: str, message: str) -> None:
        super().__init__(message)
        self.verdict = verdict


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


class _GpuJob:
    """One candidate's calls on the GPU."""

    def __init__(self, rep: _Reporter, job: dict[str, Any], ipc: Any, flush: Any) -> None:
        self.rep, self.job, self.ipc, self.flush = rep, job, ipc, flush
        self.shapes = job["shapes"]
        self.models: dict[int, Any] = {}
        self.inputs: dict[int, list[Any]] = {}
        self.states: dict[int, Any] = {}

    def map_inputs(self) -> None:
        """Map the shared inputs and read the reference's parameters: before the sandbox,
        which denies reading the reference worker's folder."""
        import torch

        from cutegen.codegen.eval.ipc import TensorDesc, open_tensor

        loaded: dict[str, Any] = {}  # hidden shapes mostly share the main shape's file
        for idx, sh in enumerate(self.shapes):
            path = sh["state_path"]
            if path not in loaded:
                loaded[path] = torch.load(path, map_location="cuda", weights_only=True)
            self.states[idx] = loaded[path]
            vals = []
            for d in sh["inputs"]:
                vals.append(d["value"] if "value" in d else open_tensor(self.ipc, TensorDesc.parse(d)))
            self.inputs[idx] = vals

    def init_models(self, mod: Any) -> None:
        import torch

        for idx, sh in enumerate(self.shapes):
            self.rep.set_phase("init", shape=sh["label"])
            torch.manual_seed(int(sh["seed_init"]))
            with _size_globals(mod, sh.get("overrides") or {}):
                m = mod.ModelNew(*sh["init_args"]).to("cuda")
            state = self.states.pop(idx)
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
        torch.cuda.synchronize()

    def call(self, cmd: dict[str, Any], rec: Any) -> None:
        import torch
        from cuda.bindings import runtime as rt

        k, idx = int(cmd["k"]), int(cmd["shape"])
        stream = torch.cuda.current_stream().cuda_stream
        pattern = int(cmd["pattern"])
        # Freed memory reads as garbage (C1 stale outputs, B8 determinism, the ghost call):
        # first every block the caching allocator holds free, so that no tensor forward
        # allocates still holds an earlier call's values (a constant output would survive a
        # ghost call there), then the prefill blocks the parent asked for, in its sizes.
        poisoned = []
        try:
            segments = torch.cuda.memory_snapshot()
        except Exception:  # an allocator without snapshots: the prefill alone, as before
            segments = []
        for addr, size in free_blocks(segments):
            if int(rt.cudaMemsetAsync(addr, pattern, size, stream)[0]) == 0:
                poisoned.append(size)  # only the fills enqueued: the parent expects each
        blocks = []
        for n in cmd.get("prefill", []):  # held together, so each is memory of its own
            try:
                blocks.append(torch.empty(max(1, int(n)), dtype=torch.uint8, device="cuda"))
            except torch.OutOfMemoryError:
                # no room beside the inputs (KernelBench L1 34's 7 GiB output: three outputs'
                # worth of blocks on an 80 GB GPU): the blocks that fit, and the parent is told
                break
        for b in blocks:
            rt.cudaMemsetAsync(b.data_ptr(), pattern, b.numel(), stream)
        prefilled = len(blocks)
        del blocks
        rt.cudaMemsetAsync(self.flush.data_ptr(), 0, self.flush.numel(), stream)  # L2 flush
        args = list(self.inputs[idx])
        for key, value in (cmd.get("scalars") or {}).items():  # this call's scalar arguments
            args[int(key)] = value
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        rec.ghost = bool(cmd.get("ghost"))
        self.rep.set_phase("call", k=k)
        try:
            start.record()
            with torch.no_grad():
                out = self.models[idx](*args)
            end.record()
        finally:
            rec.ghost = False
        torch.cuda.synchronize()
        self.rep.set_phase("handoff", k=k)
        descs = [self._describe(o) for o in flatten_outputs(out)]
        self.rep.send("done", k=k, outputs=descs, event_us=start.elapsed_time(end) * 1000.0,
                      poisoned=poisoned, prefilled=prefilled)
        del out

    def _describe(self, o: Any) -> dict[str, Any]:
        import torch

        from cutegen.codegen.eval.ipc import describe

        if isinstance(o, (bool, int, float)):
            return {"value": o}
        if not isinstance(o, torch.Tensor):
            return {"error": f"forward returned a {type(o).__name__}", "verdict": "wrong_type"}
        if type(o) is not torch.Tensor:
            return {"error": f"forward returned a {type(o).__name__}, a subclass of "
                             "torch.Tensor; plain tensors are required", "verdict": "wrong_type"}
        if o.device.type != "cuda":
            return {"error": f"output on {o.device.type}, not on the GPU", "verdict": "wrong"}
        if not o.is_contiguous():
            return {"error": "output is not contiguous", "verdict": "wrong"}
        try:
            return describe(self.ipc, o)
        except Exception as e:  # noqa: BLE001 - e.g. a view of a mapped input
            return {"error": f"output cannot be handed over ({e}); does it alias an input?",
                    "verdict": "aliased_output"}


@contextlib.contextmanager
def _size_globals(mod: Any, overrides: dict[str, Any]) -> Iterator[None]:
    """The hidden shape's size globals in the candidate's module while ``ModelNew`` is built,
    as the reference worker sets them in the task's module while ``Model`` is built: a
    parameter sized by a module global (``nn.Parameter(torch.randn(cols))``) then has the
    reference's shape (found on the H200: every candidate of such a task was ``wrong``).
    Only names the candidate's module defines are set; the main values come back after."""
    saved = {k: getattr(mod, k) for k in overrides if hasattr(mod, k)}
    for k in saved:
        setattr(mod, k, overrides[k])
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(mod, k, v)


def _compile_only(rep: _Reporter, job: dict[str, Any], mod: Any, rec: Any) -> None:
    import torch

    sh = job["shapes"][0]
    rep.set_phase("init", shape=sh["label"])
    torch.manual_seed(int(sh["seed_init"]))
    with _no_init():
        m = mod.ModelNew(*sh["init_args"])
    inputs = empty_like_specs([ArgSpec.from_dict(s) for s in sh["specs"]], device="cpu")
    rep.set_phase("call")
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
    rep.send("compiled", kernels=rec.kernels, seconds=rec.seconds, note=note[:2000],
             sass=rec.sass[:8], ptx_chars=sum(len(p) for p in rec.ptx))


class _no_init:
    """Compile-only: parameters are never read, so skip filling them (a 32768 x 32768
    Linear's initialisation would otherwise touch 4 GiB of host memory)."""

    def __enter__(self) -> None:
        import torch

        self._saved = {}
        for name in dir(torch.nn.init):
            fn = getattr(torch.nn.init, name)
            if callable(fn) and name.endswith("_") and not name.startswith("_"):
                self._saved[name] = fn
                setattr(torch.nn.init, name, lambda t, *a, **k: t)

    def __exit__(self, *exc: object) -> None:
        import torch

        for name, fn in self._saved.items():
            setattr(torch.nn.init, name, fn)


def _classify(e: BaseException, rec: Any, phase: str) -> tuple[str, str]:
    text = f"{type(e).__name__}: {e}"
    if isinstance(e, _Verdict):
        return e.verdict, str(e)
    if isinstance(e, PermissionError) and "cutegen sandbox" in str(e):
        return "forbidden", str(e)
    if rec is not None and rec.error and phase in ("compile", "call"):
        return "compile_error", rec.error
    if type(e).__name__ == "OutOfMemoryError":
        return "oom", text
    if isinstance(e, MemoryError):
        return "resource_limit", f"out of host memory in {phase}: {text}"
    if any(mk in text for mk in _CUDA_ERROR_MARKERS):
        return "crash", f"CUDA error in {phase}: {text}"
    return "crash", f"exception in {phase}: {text}"


def _fds(spec: str) -> tuple[int, int, int]:
    a, b, c = (int(x) for x in spec.split(","))
    return a, b, c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cutegen.codegen.eval.worker")
    ap.add_argument("--msg-fd", type=int, required=True)
    ap.add_argument("--mode", choices=("gpu", "compile"), required=True)
    ap.add_argument("--fsize-mb", type=int, default=8192)
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--audit-fd", type=int, default=-1)
    ap.add_argument("--observer-fds", default="")
    ap.add_argument("--native-lib", default="")
    ap.add_argument("--cupti", default="")
    args = ap.parse_args(argv)
    rep = _Reporter(args.msg_fd)
    _limits(args.fsize_mb)
    gpu = args.mode == "gpu"
    import cutlass.cute  # noqa: F401
    import torch

    from cutegen.codegen.eval import dslhook, sandbox

    ipc = flush = None
    if gpu:
        if not torch.cuda.is_available():
            rep.send("infra", message="no CUDA device is visible to the worker")
            return 0
        torch.empty(1, device="cuda")
        try:
            from cutegen.codegen.eval.ipc import IpcLib
            from cutegen.codegen.eval.observer import attach

            key_fd, out_fd, ctl_fd = _fds(args.observer_fds)
            attach(lib=Path(args.native_lib), cupti=Path(args.cupti), key_fd=key_fd,
                   out_fd=out_fd, ctl_fd=ctl_fd)
            ipc = IpcLib(args.native_lib)
        except Exception as e:  # noqa: BLE001 - the parent reports it as an infrastructure fault
            rep.send("infra", message=f"the candidate worker could not attach the observer: "
                                      f"{type(e).__name__}: {e}")
            return 0
        flush = torch.empty(args.flush_mb * 2**20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
    rep.send("ready", pid=os.getpid())
    line = sys.stdin.readline()
    if not line:
        return 0
    job = json.loads(line)
    os.chdir(job["scratch"])
    rec = None
    try:
        w = _GpuJob(rep, job, ipc, flush) if gpu else None
        if w is not None:
            w.map_inputs()
        if not gpu:
            torch.cuda.current_stream = lambda *a, **k: _FakeStream()  # type: ignore[assignment]
        rec = dslhook.install(compile_only=not gpu, on_phase=lambda p: rep.set_phase(p))
        notes = sandbox.enter(native_lib=args.native_lib if gpu else None, audit_fd=args.audit_fd,
                              scratch=job["scratch"], read_denied=job.get("read_denied", []),
                              allow_subprocess=not gpu)
        if notes:
            rep.send("note", notes=notes)
        rep.set_phase("import")
        mod = _load_candidate(job["candidate_path"], job["token"])
        if not hasattr(mod, "ModelNew"):
            raise _Verdict("static_reject", "the candidate defines no ModelNew")
        if w is None:
            _compile_only(rep, job, mod, rec)
        else:
            rep.send("loaded")
            for line in sys.stdin:
                cmd = json.loads(line)
                op = cmd.get("op")
                if op == "init":
                    w.init_models(mod)
                    rep.send("inited")
                elif op == "call":
                    w.call(cmd, rec)
                else:
                    break
        rep.send("compile_info", kernels=list(rec.kernels), seconds=rec.seconds,
                 sass=rec.sass[:8], skipped_launches=rec.skipped_launches)
        rep.send("bye")
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
