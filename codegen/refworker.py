"""The trusted reference worker: ``python -m cutegen.codegen.refworker``.

It imports the task (never a candidate), learns its input specs and hidden shapes,
computes the float64 and native references for any (shape, seed, distribution), compares
a candidate's output files with them, and times the eager and torch.compile baselines
under the same protocol as candidates. One reference worker serves a whole search for one
task; no candidate code ever runs in it, so its verdicts can be trusted (RELIABILITY.md
lesson 1).

Requests arrive as JSON lines on stdin; replies go out as frames on ``--msg-fd``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from cutegen.codegen import _tensorfile, _wire
from cutegen.codegen._tensorfile import flatten_outputs
from cutegen.codegen.inputs import DISTRIBUTIONS, EXTRA_DISTRIBUTIONS, ArgSpec, generate, spec_of

_SIZE_NAMES = ("batch_size",)





#: GPU memory the reference worker may keep cached between comparisons.
_KEEP_CACHED_BYTES = 4 * 2**30


def _release_cached_memory(keep: int = _KEEP_CACHED_BYTES) -> None:
    """Hand cached GPU memory back after a comparison when it exceeds ``keep``: the float64
    references of a large task reach tens of GiB (48 GiB for softmax_long_bf16 on the H200),
    and the candidate worker shares the GPU with this process."""
    import torch

    if torch.cuda.is_available() and torch.cuda.memory_reserved() > keep:
        torch.cuda.empty_cache()

class TaskFault(Exception):
    """The task itself is unusable (reported to the user as a TaskError)."""


class Reference:
    def __init__(self, task_path: str, *, gpu: bool, scratch: Path) -> None:
        import torch

        self.gpu = gpu
        self.device = "cuda" if gpu else "cpu"
        self.scratch = scratch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        name = "cutegen_task_" + Path(task_path).stem.replace("-", "_")
        spec = importlib.util.spec_from_file_location(name, task_path)
        if spec is None or spec.loader is None:
            raise TaskFault(f"cannot import {task_path}")
        self.mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(self.mod)
        except Exception as e:
            raise TaskFault(f"importing the task raised {type(e).__name__}: {e}") from e
        self.shapes: list[dict[str, Any]] = []
        self.models: dict[int, Any] = {}
        self.models64: dict[int, Any] = {}

    # -- shapes -----------------------------------------------------------------------
    def shape_configs(self, hidden: bool) -> tuple[list[dict[str, Any]], str]:
        configs: list[dict[str, Any]] = [{}]
        note = ""
        if hidden:
            declared = getattr(self.mod, "VERIFY_SHAPES", None)
            if declared is not None:
                configs += [dict(c) for c in declared]
            else:
                found = [n for n in _SIZE_NAMES if isinstance(getattr(self.mod, n, None), int)]
                if found:
                    configs += [{found[0]: 1}, {found[0]: 127}]
                    note = f"hidden shapes vary {found[0]} only (the task has no VERIFY_SHAPES)"
                else:
                    note = "no hidden shapes: the task defines no VERIFY_SHAPES and no batch_size"
        return configs, note

    def _with_overrides(self, overrides: dict[str, Any], fn: Any) -> Any:
        saved = {k: getattr(self.mod, k) for k in overrides if hasattr(self.mod, k)}
        for k in overrides:
            if not hasattr(self.mod, k):
                raise TaskFault(f"VERIFY_SHAPES names {k!r}, which the task does not define")
            setattr(self.mod, k, overrides[k])
        try:
            return fn()
        finally:
            for k, v in saved.items():
                setattr(self.mod, k, v)

    def load(self, *, hidden: bool, seed_init: int) -> dict[str, Any]:
        import torch

        for fn in ("get_inputs", "get_init_inputs"):
            if not callable(getattr(self.mod, fn, None)):
                raise TaskFault(f"the task defines no function {fn}()")
        if not isinstance(getattr(self.mod, "Model", None), type):
            raise TaskFault("the task defines no class Model")
        configs, note = self.shape_configs(hidden)
        skipped: list[str] = []
        for k, ov in enumerate(configs):
            label = "main" if not ov else ",".join(f"{a}={b}" for a, b in ov.items())
            try:
                sh = self._with_overrides(ov, lambda k=k, label=label: self._prepare(k, label, seed_init))
            except TaskFault:
                if k == 0:
                    raise
                skipped.append(label)
                continue
            self.shapes.append(sh)
        dists = list(getattr(self.mod, "INPUT_DISTRIBUTIONS", DISTRIBUTIONS))
        bad = [d for d in dists if d not in DISTRIBUTIONS + EXTRA_DISTRIBUTIONS]
        if bad:
            raise TaskFault(f"INPUT_DISTRIBUTIONS names unknown distributions {bad}; "
                            f"known: {list(DISTRIBUTIONS + EXTRA_DISTRIBUTIONS)}")
        flops, in_bytes, out_bytes = self._count(configs[0])
        if not self.gpu:
            self._validate_on_cpu(configs)
        if skipped:
            note = (note + "; " if note else "") + f"hidden shapes skipped (reference raised): {skipped}"
        return {"shapes": self.shapes, "distributions": dists, "note": note,
                "tolerance": getattr(self.mod, "TOLERANCE", None), "flops": flops,
                "input_bytes": in_bytes, "output_bytes": out_bytes,
                "torch": torch.__version__}

    def _prepare(self, k: int, label: str, seed_init: int) -> dict[str, Any]:
        import torch

        try:
            init_args = list(self.mod.get_init_inputs())
        except Exception as e:
            raise TaskFault(f"get_init_inputs() raised {type(e).__name__}: {e}") from e
        try:
            json.dumps(init_args)
        except TypeError as e:
            raise TaskFault(f"get_init_inputs() must return JSON-able values: {e}") from e
        torch.manual_seed(seed_init)
        try:
            model = self.mod.Model(*init_args)
        except Exception as e:
            raise TaskFault(f"Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from e
        _perturb(model, seed_init)
        model = model.to(self.device)
        state_path = self.scratch / f"state_{len(self.shapes)}.pt"
        torch.save({k2: v.detach().cpu() for k2, v in model.state_dict().items()}, state_path)
        ctx = torch.device("cuda") if self.gpu else torch.device("meta")
        try:
            with ctx:
                raw = list(self.mod.get_inputs())
        except Exception as e:
            if self.gpu:
                raise TaskFault(f"get_inputs() raised {type(e).__name__}: {e}") from e
            raw = list(self.mod.get_inputs())
        devs = {x.device.type for x in raw if isinstance(x, torch.Tensor)}
        if not devs <= {"cpu", "cuda", "meta"} or len(devs - {"meta"}) > 1:
            raise TaskFault(f"get_inputs() returned tensors on devices {sorted(devs)}; "
                            "inputs must all be on one device (cpu or cuda)")
        specs = [spec_of(x) for x in raw]
        out_bytes = 0
        if self.gpu:
            inputs = [x.to("cuda") if isinstance(x, torch.Tensor) else x for x in raw]
            try:
                with torch.no_grad():
                    out = flatten_outputs(model(*inputs))
            except Exception as e:
                raise TaskFault(f"the reference Model raised on its own inputs ({label}): "
                                f"{type(e).__name__}: {e}") from e
            torch.cuda.synchronize()
            out_bytes = sum(o.numel() * o.element_size() for o in out if isinstance(o, torch.Tensor))
        self.models[len(self.shapes)] = model
        return {"label": label, "init_args": init_args, "state_path": str(state_path),
                "specs": [s.to_dict() for s in specs], "seed_init": seed_init,
                "output_bytes": out_bytes}

    def _validate_on_cpu(self, configs: list[dict[str, Any]]) -> None:
        """Without a GPU, run the reference once on the CPU at its smallest shape, so a
        reference that raises is reported before any candidate is compiled."""
        import torch

        k = min(range(len(self.shapes)),
                key=lambda i: sum(ArgSpec.from_dict(s).nbytes for s in self.shapes[i]["specs"]))
        specs = [ArgSpec.from_dict(s) for s in self.shapes[k]["specs"]]
        if sum(s.nbytes for s in specs) > 2**30:
            return  # too large to run here; the GPU worker checks it before any verdict
        inputs = generate(specs, seed=0, distribution="randn", device="cpu")
        try:
            with torch.no_grad():
                self.models[k](*inputs)
        except Exception as e:
            raise TaskFault(f"the reference Model raised ({self.shapes[k]['label']}): "
                            f"{type(e).__name__}: {e}") from e

    def _count(self, overrides: dict[str, Any]) -> tuple[int, int, int]:
        """FLOPs (FlopCounterMode) and minimal bytes of the main shape, on the meta device."""
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        specs = [ArgSpec.from_dict(s) for s in self.shapes[0]["specs"]]
        in_bytes = sum(s.nbytes for s in specs)
        try:
            with torch.device("meta"):
                model = self.mod.Model(*self.shapes[0]["init_args"])
                inputs = [torch.empty(s.shape, dtype=getattr(torch, s.dtype)) if s.kind == "tensor"
                          else s.value for s in specs]
                counter = FlopCounterMode(display=False)
                with counter, torch.no_grad():
                    out = flatten_outputs(model(*inputs))
            out_bytes = sum(o.numel() * o.element_size() for o in out if isinstance(o, torch.Tensor))
            return int(counter.get_total_flops()), in_bytes, out_bytes
        except Exception:  # noqa: BLE001 - counting is best effort; bytes still known
            return 0, in_bytes, int(self.shapes[0]["output_bytes"])

    # -- references and comparison ----------------------------------------------------
    def references(self, idx: int, seed: int, dist: str) -> tuple[list[Any], list[Any]]:
        import torch

        specs = [ArgSpec.from_dict(s) for s in self.shapes[idx]["specs"]]
        inputs = generate(specs, seed=seed, distribution=dist, device=self.device)
        model = self.models[idx]
        with torch.no_grad():
            native = flatten_outputs(model(*inputs))
            if idx not in self.models64:
                self.models64[idx] = copy.deepcopy(model).double()
            in64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
            try:
                ref64 = flatten_outputs(self.models64[idx](*in64))
            except Exception:  # noqa: BLE001 - an op without float64 support: use float32
                m32 = copy.deepcopy(model).float()
                in32 = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                        for x in inputs]
                ref64 = flatten_outputs(m32(*in32))
        return ref64, native

    def compare(self, idx: int, seed: int, dist: str, path: str) -> dict[str, Any]:
        from cutegen.codegen.numerics import compare

        ref64, native = self.references(idx, seed, dist)
        try:
            cand = _tensorfile.load(path, device=self.device)
        except (OSError, ValueError) as e:
            return {"passed": False, "reason": f"unreadable output file: {e}"}
        finally:  # read once: free the scratch space (tmpfs, i.e. host memory) at once
            with contextlib.suppress(OSError):
                os.unlink(path)
        c = compare(cand, ref64, native, override=getattr(self.mod, "TOLERANCE", None))
        del cand, ref64, native
        _release_cached_memory()
        return {"passed": c.passed, "reason": c.reason, "max_abs_err": c.max_abs_err,
                "max_rel_err": c.max_rel_err, "rmse": c.rmse, "ref_rmse": c.ref_rmse}

    # -- baselines --------------------------------------------------------------------
    def baselines(self, *, warmup: int, runs: int, flush_mb: int, seed0: int, dist: str,
                  with_compile: bool) -> dict[str, Any]:
        import torch

        from cutegen.codegen._timing import Timer
        from cutegen.codegen.inputs import refill

        timer = Timer(flush_mb=flush_mb, sleep_cycles=400_000)
        specs = [ArgSpec.from_dict(s) for s in self.shapes[0]["specs"]]
        inputs = generate(specs, seed=seed0, distribution=dist, device="cuda")
        model = self.models[0]

        def before(i: int) -> None:
            refill(inputs, specs, seed=seed0 + 1000 + i, distribution=dist)

        out: dict[str, Any] = {}
        with torch.no_grad():
            out["eager"] = timer.time_calls(lambda: model(*inputs), warmup=warmup, runs=runs,
                                            before_each=before)
        if with_compile:
            try:
                torch._dynamo.reset()
                cm = torch.compile(model, mode="default", dynamic=False)
                with torch.no_grad():
                    out["compiled"] = timer.time_calls(lambda: cm(*inputs), warmup=warmup,
                                                       runs=runs, before_each=before)
            except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, not fatal
                out["compiled_error"] = f"{type(e).__name__}: {e}"[:2000]
        return out


def _perturb(model: Any, seed: int) -> None:
    """Move parameters away from their initial values (e.g. LayerNorm's ones and zeros), so a
    candidate that ignores a weight cannot pass."""
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            if not p.is_floating_point() or p.numel() == 0:
                continue
            noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
            scale = float(p.float().std()) if p.numel() > 1 else 0.0
            scale = 0.5 * (scale if scale > 0 else 1.0)
            p.add_((noise * scale).to(dtype=p.dtype, device=p.device))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cutegen.codegen.refworker")
    ap.add_argument("--msg-fd", type=int, required=True)
    ap.add_argument("--mode", choices=("gpu", "compile"), required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--scratch", required=True)
    args = ap.parse_args(argv)

    def send(t: str, **kw: Any) -> None:
        _wire.send(args.msg_fd, {"t": t, **kw})

    import torch

    gpu = args.mode == "gpu"
    if gpu and not torch.cuda.is_available():
        send("infra", message="no CUDA device is visible to the reference worker")
        return 0
    try:
        ref = Reference(args.task, gpu=gpu, scratch=Path(args.scratch))
    except TaskFault as e:
        send("task_error", message=str(e))
        return 0
    send("ready", pid=os.getpid(), gpu=torch.cuda.get_device_name(0) if gpu else "")
    for line in sys.stdin:
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        try:
            if op == "load":
                send("reply", id=rid, **ref.load(hidden=req["hidden"], seed_init=req["seed_init"]))
            elif op == "compare":
                send("reply", id=rid, **ref.compare(req["shape"], req["seed"], req["dist"], req["path"]))
            elif op == "baselines":
                send("reply", id=rid, **ref.baselines(
                    warmup=req["warmup"], runs=req["runs"], flush_mb=req["flush_mb"],
                    seed0=req["seed0"], dist=req["dist"], with_compile=req["compile"]))
            elif op == "quit":
                break
            else:
                send("reply", id=rid, error=f"unknown op {op!r}")
        except TaskFault as e:
            send("task_error", id=rid, message=str(e))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
            send("reply", id=rid, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-4000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
