"""The trusted reference worker: ``python -m cutegen.codegen.eval.refworker``.

It imports the task (never a candidate) and serves one search of that task:

* ``load``: learns the input specs and hidden shapes, saves the reference's parameters for
  candidates to load, and allocates one dedicated device buffer per tensor input and
  shape, which candidate workers map through CUDA IPC (nothing else of this process is
  inside those allocations);
* ``prepare``: writes one call's inputs into those buffers from a seed the parent chose
  (the seed, not a copy, is kept: the inputs are drawn again to check them);
* ``take``: maps the candidate's output descriptors, checks the inputs were left
  untouched and the outputs' metadata, and either compares them with the float64 and
  native references at once or copies them into a slot (or, at the same cost, into a
  scratch buffer) for a comparison after the last call;
* ``compare_kept``: compares a kept copy; ``baselines``: times eager and torch.compile
  with the same native observer and the same rules as candidates.

No candidate code ever runs here, so what it says can be trusted (RELIABILITY.md lesson 1).
Requests arrive as JSON lines on stdin; replies go out as frames on ``--msg-fd``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cutegen.codegen.eval import framing
from cutegen.codegen.eval.ipc import IpcLib, TensorDesc, flatten_outputs, open_tensor
from cutegen.codegen.inputs import (
    DISTRIBUTIONS,
    EXTRA_DISTRIBUTIONS,
    FLOAT_DTYPES,
    ArgSpec,
    generate,
    generate_float64,
    itemsize,
    load_distribution,
    on_meta,
    refill,
    spec_of,
)

#: Module-level sizes a task without VERIFY_SHAPES gets its hidden shapes from: the first of
#: these it defines as an int. KernelBench's matrix products name no batch_size (level 1's
#: problems 1-18 but 3: ``N`` for a square product, ``M, K, N`` for the others, ``b`` for a
#: 4-D einsum) and had no hidden shape: a kernel fixed to the main shape passed.
_SIZE_NAMES = ("batch_size", "M", "N", "b")

#: GPU memory the reference worker may keep cached between comparisons.
_KEEP_CACHED_BYTES = 4 * 2**30
#: Without a GPU, the reference is called a second time (is it random?) only when its first
#: call took less than this (seconds); the GPU worker checks every task.
_CPU_REPEAT_S = 5.0
#: Without a GPU, the reference runs on the CPU only where its inputs, its parameters and its
#: outputs each take at most this many bytes ...
_CPU_CHECK_BYTES = 2**28
#: ... and its forward at most this many FLOPs (KernelBench level 1 problem 7, a 32768 x 64 by
#: 64 x 32768 matmul, has 16 MB of inputs and a 4.3 GB output: 137 GFLOP a call, twice, and
#: 12.7 GB of this process on a compile-only run).
_CPU_CHECK_FLOPS = 2 * 10**10
#: Where the GPU has no room for a call's float64 pass (KernelBench L1 45's 17 GB input: its
#: float64 copy and the fp32 draw it was made from, 51 GB, beside the 36 GB of shared input
#: buffers, on an 80 GB H100; the float64 inputs are now drawn without the fp32 copy), it
#: runs in host memory if the forward is at most this many
#: FLOPs (matrix products and convolutions, counted on the meta device: seconds on the GPU
#: machine's CPUs) and the host has room for it; else the task's own fp32 arithmetic is the
#: reference, and the comparison says so.
_HOST_FLOAT64_FLOPS = 2 * 10**11
#: What a comparison's reason says where the task's own fp32 arithmetic stood in for the
#: float64 reference (its result also carries ``"reference": "fp32"``, which the parent flags
#: ``review:fp32_reference``).
FP32_REFERENCE = "the task's own fp32 arithmetic"
#: Kept copies of outputs may use at most this fraction of the free GPU memory, and at most
#: half of what is left once the comparisons and the candidate's own use are set aside.
_SLOT_FRACTION = 0.25
_SLOT_MARGIN_BYTES = 2 * 2**30


class TaskFault(Exception):
    """The task itself is unusable (reported to the user as a TaskError)."""


class RandomReference(TaskFault):
    """The reference's output changes from call to call on the same inputs: no candidate can
    be checked against it (a fault of the task at every shape, never a hidden shape skipped)."""


def _release_cached_memory(keep: int = _KEEP_CACHED_BYTES) -> None:
    """Hand cached GPU memory back when it exceeds ``keep`` (the float64 references of a
    large task reach tens of GiB; the candidate worker shares the GPU)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.memory_reserved() > keep:
        torch.cuda.empty_cache()


def hidden_batch(main: int) -> int:
    """The second hidden batch size of a task without VERIFY_SHAPES (the first is 1): 127 (a
    prime, no multiple of a tile) where the main batch is at least that, else the smallest
    prime above the main batch (at most twice it, by Bertrand's postulate): larger than the
    main shape, so a buffer sized for it is caught, but never the 8x of 127 against KernelBench
    level 1's batch of 16, which ran a depthwise-separable conv's check out of the H200's
    memory (2026-12-04)."""
    if main >= 127:
        return 127
    p = main + 1
    while p < 2 or any(p % d == 0 for d in range(2, int(p ** 0.5) + 1)):
        p += 1
    return p


def shape_configs(mod: Any, hidden: bool) -> tuple[list[dict[str, Any]], str]:
    """The size overrides a task module is checked at (``{}``: the main shape first), and a
    note where its hidden shapes are chosen for it: VERIFY_SHAPES, else its first size name
    in :data:`_SIZE_NAMES` at 1 and :func:`hidden_batch`, else none."""
    configs: list[dict[str, Any]] = [{}]
    note = ""
    if hidden:
        declared = getattr(mod, "VERIFY_SHAPES", None)
        if declared is not None:
            configs += [dict(c) for c in declared]
        else:
            found = [n for n in _SIZE_NAMES if isinstance(getattr(mod, n, None), int)]
            if found:
                main = int(getattr(mod, found[0]))
                configs += [{found[0]: 1}, {found[0]: hidden_batch(main)}]
                note = f"hidden shapes vary {found[0]} only (the task has no VERIFY_SHAPES)"
            else:
                note = ("no hidden shapes: the task defines no VERIFY_SHAPES and none of "
                        + ", ".join(_SIZE_NAMES))
    return configs, note


def _meta_forward(model: Any, specs: list[ArgSpec]) -> tuple[int, int]:
    """(FLOPs, output bytes) of one forward of ``model`` (built on the meta device) on inputs
    of ``specs``, counted on the meta device (FlopCounterMode: matrix products and
    convolutions). Raises what the forward raises there."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        inputs = [torch.empty(s.shape, dtype=getattr(torch, s.dtype)) if s.kind == "tensor"
                  else s.value for s in specs]
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            out = flatten_outputs(model(*inputs))
    nbytes = sum(o.numel() * o.element_size() for o in out if isinstance(o, torch.Tensor))
    return int(counter.get_total_flops()), nbytes


def _too_costly_for_cpu(model: Any, specs: list[ArgSpec]) -> bool:
    """Whether one forward's output or FLOPs are beyond what the CPU check runs
    (``_CPU_CHECK_BYTES``, ``_CPU_CHECK_FLOPS``); False where the meta count fails (the CPU
    run then says what is wrong)."""
    try:
        flops, nbytes = _meta_forward(model, specs)
    except Exception:  # noqa: BLE001 - a forward that fails on meta tensors: run it on the CPU
        return False
    return nbytes > _CPU_CHECK_BYTES or flops > _CPU_CHECK_FLOPS


class Reference:
    def __init__(self, task_path: str, *, gpu: bool, scratch: Path,
                 ipc: IpcLib | None = None) -> None:
        import torch

        self.gpu = gpu
        self.device = "cuda" if gpu else "cpu"
        self.scratch = scratch
        self.ipc = ipc
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
        self.load_dist = "randn"  # what load() draws to run the reference (see load)
        self.models64: dict[Any, Any] = {}  # shape (or (shape, "cpu")) -> float64 model
        # how the last references() took its truth: "" (float64 on the GPU), "host64" or
        # "fp32", and the words the comparison's reason gives it
        self.reference_kind = ""
        self.reference_note = ""
        self.buffers: dict[int, list[Any]] = {}  # shape -> shared input tensors (or scalars)
        self.current: dict[int, tuple[int, str, bool]] = {}  # shape -> (seed, dist, vary)
        self._allocs: list[int] = []
        self.slots: dict[int, list[Any]] = {}
        self.first: dict[int, list[Any]] = {}  # shape -> the first call's outputs
        # shapes whose comparison ran out of GPU memory with both references on the GPU:
        # their native reference is computed first and parked in host memory (references)
        self.park_native: set[int] = set()
        self.slot_budget = 0
        self._scratch_out: list[Any] = []
        self.vary_scalars = True

    # -- shapes -----------------------------------------------------------------------
    def shape_configs(self, hidden: bool) -> tuple[list[dict[str, Any]], str]:
        return shape_configs(self.mod, hidden)

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
        dists = list(getattr(self.mod, "INPUT_DISTRIBUTIONS", DISTRIBUTIONS))
        bad = [d for d in dists if d not in DISTRIBUTIONS + EXTRA_DISTRIBUTIONS]
        if bad or not dists:
            raise TaskFault(f"INPUT_DISTRIBUTIONS names unknown distributions {bad}; "
                            f"known: {list(DISTRIBUTIONS + EXTRA_DISTRIBUTIONS)}" if bad else
                            "INPUT_DISTRIBUTIONS is empty: name at least one distribution")
        # the reference's own check at load draws what the task allows (a forward that
        # refuses negative inputs, with INPUT_DISTRIBUTIONS = ["uniform"], raised on randn)
        self.load_dist = load_distribution(dists)
        skipped: list[str] = []
        for k, ov in enumerate(configs):
            label = "main" if not ov else ",".join(f"{a}={b}" for a, b in ov.items())
            try:
                sh = self._with_overrides(ov, lambda k=k, label=label: self._prepare_shape(
                    k, label, seed_init))
            except TaskFault:
                if k == 0:
                    raise
                skipped.append(label)
                continue
            sh["overrides"] = dict(ov)  # the candidate's module gets them while ModelNew is built
            self.shapes.append(sh)
        # float scalars of forward vary between calls unless the task says they may not
        self.vary_scalars = bool(getattr(self.mod, "VARY_SCALARS", True))
        flops, in_bytes, out_bytes = self._count()
        if not self.gpu:
            skipped += self._validate_on_cpu()
        if skipped:
            note = (note + "; " if note else "") + f"hidden shapes skipped (reference raised): {skipped}"
        if self.gpu:
            self._allocate_buffers()
            asked = list(dists)
            dists, dropped = self.informative(dists, seed_init)
            if dropped:
                note = (note + "; " if note else "") + (
                    f"input distributions left out: {dropped} (the reference's output is NaN "
                    "or Inf everywhere on them, or it raised: they tell no kernel from another)")
            if set(dists) - set(asked):
                note += f"; in their place: {sorted(set(dists) - set(asked))}"
            free, _ = torch.cuda.mem_get_info()
            self.slot_budget = keep_slots(free, self.shapes)
        return {"shapes": self.shapes, "distributions": dists, "note": note,
                "tolerance": getattr(self.mod, "TOLERANCE", None), "flops": flops,
                "input_bytes": in_bytes, "output_bytes": out_bytes,
                "torch": torch.__version__, "keep_slots": self.slot_budget}

    def _prepare_shape(self, k: int, label: str, seed_init: int) -> dict[str, Any]:
        import torch

        try:
            init_args = list(self.mod.get_init_inputs())
        except Exception as e:
            raise TaskFault(f"get_init_inputs() raised {type(e).__name__}: {e}") from e
        try:
            json.dumps(init_args)
        except TypeError as e:
            raise TaskFault(f"get_init_inputs() must return JSON-able values: {e}") from e
        ctx = torch.device("cuda") if self.gpu else torch.device("meta")
        try:
            with ctx:
                raw = list(self.mod.get_inputs())
        except Exception as e:
            if self.gpu:
                raise TaskFault(f"get_inputs() raised {type(e).__name__}: {e}") from e
            try:  # no GPU (compile-only): a device the task names is the meta device too
                with ctx, on_meta():
                    raw = list(self.mod.get_inputs())
            except Exception as e2:
                raise TaskFault(f"get_inputs() raised {type(e2).__name__}: {e2}") from e2
        devs = {x.device.type for x in raw if isinstance(x, torch.Tensor)}
        if not devs <= {"cpu", "cuda", "meta"} or len(devs - {"meta"}) > 1:
            raise TaskFault(f"get_inputs() returned tensors on devices {sorted(devs)}; "
                            "inputs must all be on one device (cpu or cuda)")
        specs = [spec_of(x) for x in raw]
        del raw
        state_path = self.scratch / f"state_{len(self.shapes)}.pt"
        out_bytes = 0
        out_specs: list[dict[str, Any]] = []
        if self.gpu:
            torch.manual_seed(seed_init)
            try:
                model = self.mod.Model(*init_args)
            except Exception as e:
                raise TaskFault(f"Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from e
            _perturb(model, seed_init)
            model = model.to(self.device)
            same = None
            for j, earlier in self.models.items():  # a hidden shape's model is most often the
                # main one's (batch_size alone differs): one copy of each parameter in memory
                if share_equal_tensors(model, earlier):
                    same = j
                    break
            if same is not None:  # the whole state is shape ``same``'s: one file to load
                state_path = Path(self.shapes[same]["state_path"])
            else:
                torch.save({k2: v.detach().cpu() for k2, v in model.state_dict().items()},
                           state_path)
            inputs = generate(specs, seed=seed_init, distribution=self.load_dist, device="cuda")
            try:
                with torch.no_grad():
                    out = flatten_outputs(model(*inputs))
            except Exception as e:
                raise TaskFault(f"the reference Model raised on its own inputs ({label}): "
                                f"{type(e).__name__}: {e}") from e
            torch.cuda.synchronize()
            out_bytes = sum(o.numel() * o.element_size() for o in out if isinstance(o, torch.Tensor))
            del inputs  # (perhaps changed in place by forward) the second call's are made afresh
            fresh = sum(s.nbytes for s in specs)
            if not self.shapes and torch.cuda.mem_get_info()[0] > 2 * out_bytes + fresh + 2**30:
                self._check_repeatable(model, lambda: generate(
                    specs, seed=seed_init, distribution=self.load_dist, device="cuda"), out, label)
            out_specs = [{"dtype": str(o.dtype).removeprefix("torch."), "shape": list(o.shape)}
                         if isinstance(o, torch.Tensor) else {"value": True} for o in out]
            self.models[len(self.shapes)] = model
        else:
            # Compiling needs shapes, not data: the model is built on the meta device, so a
            # 32768 x 32768 Linear costs no host memory (candidates get no parameters file).
            try:
                with torch.device("meta"):
                    model = self.mod.Model(*init_args)
            except Exception as e:
                raise TaskFault(f"Model(*get_init_inputs()) raised {type(e).__name__}: {e}") from e
            self.models[len(self.shapes)] = model
            state_path = Path("")
        return {"label": label, "init_args": init_args, "state_path": str(state_path),
                "specs": [s.to_dict() for s in specs], "seed_init": seed_init,
                "output_bytes": out_bytes, "outputs": out_specs}

    def _validate_on_cpu(self) -> list[str]:
        """Without a GPU, run the reference once on the CPU at its smallest shape when it is
        small, so a reference that raises is reported before any candidate is compiled. A
        hidden shape the reference itself refuses (BatchNorm in training mode at a batch of
        1: "Expected more than 1 value per channel") is a limit of the task, as on the GPU,
        where such shapes are skipped: the next smallest is tried. An op torch's CPU build
        does not have for the dtype (bf16 ``avg_pool3d``) ends the check here: the GPU
        worker runs it. A reference whose output is random is a fault at any shape. Returns
        the labels of the hidden shapes skipped so; raises where the main shape (or every
        shape tried) fails."""
        import torch

        order = sorted(range(len(self.shapes)), key=lambda i: sum(
            ArgSpec.from_dict(s).nbytes for s in self.shapes[i]["specs"]))
        skipped: list[str] = []
        for k in order:
            specs = [ArgSpec.from_dict(s) for s in self.shapes[k]["specs"]]
            if sum(s.nbytes for s in specs) > _CPU_CHECK_BYTES:
                return skipped  # too large to run here; the GPU worker checks it
            try:
                with torch.device("meta"):  # count the parameters without allocating them
                    sized = self.mod.Model(*self.shapes[k]["init_args"])
                if sum(p.numel() * p.element_size() for p in sized.parameters()) > \
                        _CPU_CHECK_BYTES or _too_costly_for_cpu(sized, specs):
                    return skipped
                torch.manual_seed(0)
                model = self.mod.Model(*self.shapes[k]["init_args"])
                inputs = generate(specs, seed=0, distribution=self.load_dist, device="cpu")
                began = time.perf_counter()
                with torch.no_grad():
                    out = flatten_outputs(model(*inputs))
                if time.perf_counter() - began < _CPU_REPEAT_S:  # else the GPU worker's check
                    self._check_repeatable(model, lambda specs=specs: generate(
                        specs, seed=0, distribution=self.load_dist, device="cpu"), out,
                        self.shapes[k]["label"])
                return skipped
            except RandomReference:
                raise
            except NotImplementedError as e:
                if "not implemented for" not in str(e):
                    raise TaskFault(f"the reference Model raised ({self.shapes[k]['label']}): "
                                    f"{type(e).__name__}: {e}") from e
                return skipped  # an op torch's CPU build lacks for a dtype: the GPU checks it
            except Exception as e:
                if k == 0:
                    raise TaskFault(f"the reference Model raised ({self.shapes[k]['label']}): "
                                    f"{type(e).__name__}: {e}") from e
                skipped.append(self.shapes[k]["label"])
        return skipped

    def _check_repeatable(self, model: Any, make_inputs: Any, first: list[Any],
                          label: str) -> None:
        """Call the reference again on the same inputs, made afresh by ``make_inputs`` (a
        forward that changes its input in place must not look random), the random generator
        not reseeded: its outputs must be the first call's, within the task's tolerance (a
        reference with atomics may differ in its last bits). One that is random
        (``nn.Dropout`` in training mode, ``torch.rand`` in forward) can check no candidate,
        whatever it computes; the search stops at once, saying so, instead of calling every
        candidate wrong."""
        import torch

        from cutegen.codegen.numerics import compare

        with torch.no_grad():
            again = flatten_outputs(model(*make_inputs()))
        same = compare(again, first, first, override=getattr(self.mod, "TOLERANCE", None))
        if not same.passed:
            raise RandomReference(
                f"the reference Model's output is random or depends on earlier calls: called "
                f"twice on the same inputs ({label}) it gave two results ({same.reason}), so "
                "no candidate can be checked against it. Make forward deterministic: "
                "nn.Dropout with p = 0 or the model in eval mode, no torch.rand / randn in "
                "forward, no state that forward keeps on self for its next call")

    def _count(self) -> tuple[int, int, int]:
        """FLOPs (FlopCounterMode) and minimal bytes of the main shape, on the meta device."""
        import torch

        specs = [ArgSpec.from_dict(s) for s in self.shapes[0]["specs"]]
        in_bytes = sum(s.nbytes for s in specs)
        try:
            with torch.device("meta"):
                model = self.mod.Model(*self.shapes[0]["init_args"])
            flops, out_bytes = _meta_forward(model, specs)
            return flops, in_bytes, out_bytes
        except Exception:  # noqa: BLE001 - counting is best effort; bytes still known
            return 0, in_bytes, int(self.shapes[0]["output_bytes"])

    # -- shared input buffers ---------------------------------------------------------
    def _allocate_buffers(self) -> None:
        """One dedicated allocation per tensor input and shape: a candidate that maps it
        can reach that buffer and nothing else of this process."""
        from cuda.bindings import runtime as rt

        from cutegen.codegen.eval.ipc import TensorDesc, tensor_at

        assert self.ipc is not None
        for idx, sh in enumerate(self.shapes):
            bufs: list[Any] = []
            descs: list[dict[str, Any]] = []
            for s in (ArgSpec.from_dict(d) for d in sh["specs"]):
                if s.kind != "tensor":
                    bufs.append(s.value)
                    descs.append({"value": s.value})
                    continue
                n = max(s.nbytes, 1)
                err, ptr = rt.cudaMalloc(n)
                if int(err) != 0:
                    raise MemoryError(f"cudaMalloc({n}) for a shared input failed: {err}")
                self._allocs.append(int(ptr))
                handle, base, _size = self.ipc.export(int(ptr))
                stride = _contiguous_stride(s.shape)
                desc = TensorDesc(handle, int(ptr) - base, s.dtype, tuple(s.shape), stride)
                bufs.append(tensor_at(base, desc))
                descs.append(desc.to_dict())
            self.buffers[idx] = bufs
            sh["inputs"] = descs

    def informative(self, dists: Sequence[str], seed: int) -> tuple[list[str], list[str]]:
        """(kept, left out): the distributions on which the main shape's reference output
        has a finite value, and those on which every element of it is NaN or Inf.

        On the latter a comparison passes any kernel that writes NaN: KernelBench level 1
        problem 98's ``kl_div(log(p), q)`` is NaN for every input distribution with a
        negative value, and the timed calls drew ``randn``, so a kernel that wrote NaN on
        seeing one negative number passed every check there and was timed doing nothing.
        Decided here, from the task's own forward on the shared buffers (no candidate maps
        them yet); a forward that raises on a distribution's inputs leaves it out too. Where
        "spiky" is left out and "uniform" allowed, "uniform_spiky" (positive
        spikes on positive values) is tried in its place. A forward without room on the GPU
        keeps its distribution (it cannot tell); a task with no distribution left is a task
        fault."""
        import torch

        specs = [ArgSpec.from_dict(sp) for sp in self.shapes[0]["specs"]]
        model = self.models[0]
        kept: list[str] = []
        dropped: list[str] = []
        todo = list(dists)
        for d in todo:  # (a list that may grow by one while it is walked: see above)
            try:
                args = refill(self.buffers[0], specs, seed=seed, distribution=d)
                with torch.no_grad():
                    outs = flatten_outputs(model(*args))
                del args
                floats = [o for o in outs if isinstance(o, torch.Tensor)
                          and o.is_floating_point() and o.numel()]
                finite = not floats or any(bool(torch.isfinite(o).any()) for o in floats)
                del outs, floats
            except torch.OutOfMemoryError:
                finite = True
                _release_cached_memory(0)
            except Exception:  # noqa: BLE001 - the task's forward refuses these inputs (a
                # distribution's argument check on negative values): it cannot judge with them
                finite = False
            (kept if finite else dropped).append(d)
            if d == "spiky" and not finite and "uniform" in todo and "uniform_spiky" not in todo:
                todo.append("uniform_spiky")  # a task of positive inputs: positive spikes
        self.current.pop(0, None)
        _release_cached_memory()
        if not kept:
            raise TaskFault(f"the task's output is NaN or Inf everywhere (or its forward "
                            f"raised) on every input distribution ({todo}): no check can tell a "
                            "correct kernel from one that writes NaN; restrict "
                            "INPUT_DISTRIBUTIONS to inputs it is defined on")
        return kept, dropped

    def _draw(self, shape: int, seed: int, dist: str, vary: bool,
              float64: bool = False) -> list[Any]:
        """One call's inputs of ``shape``, drawn from its seed (the same every time); with
        ``float64``, their float tensors widened, drawn without an fp32 copy beside them."""
        specs = [ArgSpec.from_dict(s) for s in self.shapes[shape]["specs"]]
        make = generate_float64 if float64 else generate
        return make(specs, seed=seed, distribution=dist, device=self.device, vary_scalars=vary)

    def prepare(self, shape: int, seed: int, dist: str, vary: bool = False) -> dict[str, Any]:
        import torch

        vary = vary and self.vary_scalars
        specs = [ArgSpec.from_dict(s) for s in self.shapes[shape]["specs"]]
        # drawn straight into the shared buffers: no input-sized copy beside them (fp32 and
        # integer inputs; a bf16 / fp16 one through an fp32 draw of its size)
        try:
            args = refill(self.buffers[shape], specs, seed=seed, distribution=dist,
                          vary_scalars=vary)
        except torch.OutOfMemoryError:
            # no room beside what the candidate's process holds: this call's verdict, not a
            # reference worker error that ends the search
            self.current.pop(shape, None)
            return {"ok": False, **_out_of_memory()}
        scalars = {k: v for k, (sp, v) in enumerate(zip(specs, args, strict=True))
                   if sp.kind == "value"}
        del args
        if self.gpu:
            torch.cuda.synchronize()
        self.current[shape] = (seed, dist, vary)
        return {"ok": True, "scalars": scalars}

    # -- outputs ----------------------------------------------------------------------
    def _outputs(self, shape: int, descs: Any) -> tuple[list[Any] | None, str, str]:
        """Map the candidate's outputs; (tensors, verdict, reason) with tensors None on a
        problem the candidate caused."""
        want = self.shapes[shape]["outputs"]
        if not isinstance(descs, list):
            return None, "wrong", "the worker sent no output list"
        if len(descs) != len(want):
            return None, "wrong", f"returned {len(descs)} outputs, the reference {len(want)}"
        assert self.ipc is not None
        outs: list[Any] = []
        for i, d in enumerate(descs):
            if isinstance(d, dict) and "value" in d:
                outs.append(d["value"])
                continue
            if isinstance(d, dict) and "error" in d:
                return None, str(d.get("verdict", "wrong")), f"output {i}: {d['error']}"
            try:
                desc = TensorDesc.parse(d)
                t = open_tensor(self.ipc, desc)
            except Exception as e:  # noqa: BLE001 - whatever a descriptor does, it is the candidate's
                return None, "wrong", f"output {i} cannot be read: {type(e).__name__}: {e}"
            for b in self.buffers[shape]:
                if hasattr(b, "data_ptr") and _overlaps(t, b):
                    return None, "aliased_output", f"output {i} shares memory with an input"
            outs.append(t)
        return outs, "", ""

    def _inputs_intact(self, shape: int) -> str:
        """What the candidate's call changed in its inputs ("" for nothing): the shared
        buffers against the same inputs drawn again from the seed. No copy of them is kept
        (6.4 GB for a 4096 x 393216 fp32 softmax: that copy was what an 80 GB GPU lacked),
        and the draw is deterministic in (specs, seed, distribution), as the references
        already rely on."""
        import torch

        if shape not in self.current:
            return "no inputs were prepared for this call"
        fresh = self._draw(shape, *self.current[shape])
        for k, (b, own) in enumerate(zip(self.buffers[shape], fresh, strict=True)):
            if isinstance(b, torch.Tensor) and not torch.equal(b, own):
                return f"forward modified input {k} in place"
        return ""

    def take(self, *, shape: int, outputs: Any, mode: str, slot: int | None) -> dict[str, Any]:
        """Check one call's outputs; compare them now ("compare"), keep a copy ("keep"), or
        copy them to scratch at the same cost ("discard")."""
        import torch

        try:  # the check draws the inputs again: as large as they are
            moved = self._inputs_intact(shape)
        except torch.OutOfMemoryError:
            return _out_of_memory()  # this candidate's verdict, not the end of the search
        if moved:
            return {"passed": False, "verdict": "input_modified", "reason": moved}
        outs, verdict, reason = self._outputs(shape, outputs)
        if outs is None:
            return {"passed": False, "verdict": verdict, "reason": reason}
        if mode == "ghost":
            return self._ghost(shape, outs)
        if mode in ("compare", "compare_first"):
            seed, dist, vary = self.current[shape]
            if mode == "compare_first":
                try:
                    self.first[shape] = [o.clone() if isinstance(o, torch.Tensor) else o
                                         for o in outs]
                except torch.OutOfMemoryError:
                    return _out_of_memory()
            try:
                return self.compare_tensors(shape, seed, dist, outs, vary)
            except TaskFault:
                raise
            except torch.OutOfMemoryError:
                return _out_of_memory()
            except Exception as e:  # noqa: BLE001 - e.g. an output view torch cannot read
                return {"passed": False, "verdict": "wrong",
                        "reason": f"the outputs could not be compared: {type(e).__name__}: {e}"}
        try:
            copies = [o.clone() if isinstance(o, torch.Tensor) else o for o in outs]
        except torch.OutOfMemoryError:
            return _out_of_memory()
        torch.cuda.synchronize()
        if mode == "keep" and slot is not None:
            self.slots[slot] = copies
        del outs, copies
        return {"passed": True, "kept": mode == "keep"}

    def _ghost(self, shape: int, outs: list[Any]) -> dict[str, Any]:
        """The ghost call ran the first call's inputs with the CuTe launches disabled: its
        outputs must differ from the first call's (``unchanged`` True means a decoy)."""
        import torch

        first = self.first.get(shape)
        if first is None:
            return {"passed": False, "unchanged": False, "reason": "no first call to compare"}
        same = len(first) == len(outs) and all(
            (torch.equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
             and a.shape == b.shape and a.dtype == b.dtype else a == b)
            for a, b in zip(first, outs, strict=False))
        return {"passed": True, "unchanged": bool(same)}

    def compare_kept(self, *, slot: int, shape: int, seed: int, dist: str,
                     vary: bool = False) -> dict[str, Any]:
        import torch

        outs = self.slots.pop(slot, None)
        if outs is None:
            return {"passed": False, "verdict": "wrong", "reason": "nothing was kept in that slot"}
        try:
            return self.compare_tensors(shape, seed, dist, outs, vary and self.vary_scalars)
        except torch.OutOfMemoryError:
            del outs
            return _out_of_memory()

    def references(self, idx: int, seed: int, dist: str, vary: bool = False,
                   park_native: bool = False) -> tuple[list[Any], list[Any]]:
        """(float64 reference, native reference) of one call's inputs. ``park_native``: the
        native pass runs first and its outputs wait in host memory (the comparison streams
        them to the GPU a chunk at a time), so the GPU never holds both references: their
        sum was what an 80 GB H100 lacked beside a candidate's 41 GiB (KernelBench L1 63, a
        conv with an 8.6 GB fp32 output: 17.1 GB of float64 reference and the native
        output)."""
        import torch

        def draw() -> list[Any]:
            return self._draw(idx, seed, dist, vary)

        model = self.models[idx]

        def native_pass() -> list[Any]:
            inputs = draw()
            return flatten_outputs(model(*inputs))  # outputs aliasing the inputs keep them

        parked: list[Any] | None = None
        if park_native and self.gpu:
            with torch.no_grad():
                parked = [o.cpu() if isinstance(o, torch.Tensor) else o for o in native_pass()]
            _release_cached_memory(0)
        # The float64 pass first, on inputs of its own, then the native pass on a fresh
        # draw: a forward that changes its inputs in place (``x.mul_(2)``) changes neither
        # pass's inputs for the other, and no input copy is held beside the other pass's
        # (the peak is the float64 inputs and outputs, 24 GiB for a 4096 x 393216 softmax;
        # it was 48 with both passes' inputs alive).
        self.reference_kind = self.reference_note = ""
        ref64: list[Any] | None = None
        failure = ""
        with torch.no_grad():
            try:
                ref64 = self._float64_pass(
                    idx, lambda: self._draw(idx, seed, dist, vary, float64=True), None)
            except torch.OutOfMemoryError:
                failure = "oom"
            except Exception as e:  # noqa: BLE001 - an op without float64 support: float32
                failure = type(e).__name__
            # the fallbacks run after the handler, whose traceback held the failed pass's
            # tensors (a partly converted input, the forward's intermediates)
            if ref64 is None and failure == "oom":
                _release_cached_memory(0)
                ref64 = self._float64_on_host(idx, draw)
            if ref64 is None:
                ref64 = self._float32_pass(model, draw)
                self.reference_kind = "fp32"
                self.reference_note = f"{FP32_REFERENCE} (the float64 pass " + (
                    "had no room on the GPU nor in host memory)" if failure == "oom"
                    else f"raised {failure})")
            native = parked if parked is not None else native_pass()
        return ref64, native

    def _float64_pass(self, idx: int, draw: Any, device: str | None) -> list[Any]:
        """The forward in float64 on inputs drawn afresh by ``draw`` (perhaps already in
        float64), on ``device`` (None: the GPU, or wherever the task's tensors are)."""
        import torch

        key: Any = idx if device is None else (idx, device)
        if key not in self.models64:
            m64 = copy.deepcopy(self.models[idx])
            if device is not None:
                m64 = m64.to(device)  # before widening: no float64 copy on the full GPU
            m64 = m64.double()
            for earlier in self.models64.values():
                if share_equal_tensors(m64, earlier):
                    break
            self.models64[key] = m64
        in64 = [(x.to(device=device or x.device, dtype=torch.float64) if x.is_floating_point()
                 else x.to(device or x.device)) if isinstance(x, torch.Tensor) else x
                for x in draw()]
        try:
            return flatten_outputs(self.models64[key](*in64))
        finally:
            del in64

    def _float32_pass(self, model: Any, draw: Any) -> list[Any]:
        """The forward in fp32 on inputs drawn afresh (perhaps changed in place before the
        float64 op that raised): the reference where float64 cannot be had."""
        import torch

        m32 = copy.deepcopy(model).float()
        in32 = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                for x in draw()]
        try:
            return flatten_outputs(m32(*in32))
        finally:
            del in32

    def _float64_on_host(self, idx: int, draw: Any) -> list[Any] | None:
        """The float64 pass in host memory, where the GPU had no room for it; None where the
        forward is too costly for the CPU or the host has no room either (or it fails
        there). The comparison then streams it to the GPU a chunk at a time, where the
        candidate's output is (``numerics.compare``; in host memory only where the GPU has no
        room even for that)."""
        import torch

        sh = self.shapes[idx]
        if not self.gpu or host_available_bytes() < comparison_bytes(sh) + 2 * int(
                sh.get("output_bytes") or 0):
            return None
        specs = [ArgSpec.from_dict(s) for s in sh["specs"]]
        try:
            with torch.device("meta"):
                sized = self.mod.Model(*sh["init_args"])
            if _meta_forward(sized, specs)[0] > _HOST_FLOAT64_FLOPS:
                return None
            out = self._float64_pass(idx, draw, "cpu")
        except Exception:  # noqa: BLE001 - not countable or not runnable there: fp32
            return None
        self.reference_kind = "host64"
        self.reference_note = "float64 in host memory (the GPU had no room for the float64 pass)"
        return out

    def compare_tensors(self, shape: int, seed: int, dist: str, cand: list[Any],
                        vary: bool = False) -> dict[str, Any]:
        import torch

        from cutegen.codegen.numerics import compare

        tol = getattr(self.mod, "TOLERANCE", None)
        parked = shape in self.park_native
        retry = False
        try:
            ref64, native = self.references(shape, seed, dist, vary, park_native=parked)
            c = compare(cand, ref64, native, override=tol)
        except torch.OutOfMemoryError:
            if parked or not self.gpu:
                raise
            retry = True  # again below, once this handler has let go of the tensors
        if retry:  # both references on the GPU beside the candidate's memory did not fit
            _release_cached_memory(0)
            self.park_native.add(shape)
            ref64, native = self.references(shape, seed, dist, vary, park_native=True)
            c = compare(cand, ref64, native, override=tol)
        del cand, ref64, native
        _release_cached_memory()
        reason = c.reason
        if self.reference_note:  # a reference other than float64 on the GPU: said, always
            reason = "; ".join(x for x in (reason, f"reference: {self.reference_note}") if x)
        return {"passed": c.passed, "verdict": "" if c.passed else "wrong", "reason": reason,
                "reference": self.reference_kind,
                "max_abs_err": c.max_abs_err, "max_rel_err": c.max_rel_err, "rmse": c.rmse,
                "ref_rmse": c.ref_rmse}

    def release(self, observer: Any = None) -> dict[str, Any]:
        """Forget one candidate: its mapped outputs and kept copies (and the records this
        process's own observer collected meanwhile: only baselines read them)."""
        self.slots.clear()
        self.first.clear()
        if self.ipc is not None:
            self.ipc.close_all()
        if observer is not None:
            observer.drain()
        _release_cached_memory(0)
        import torch

        return {"ok": True, "reserved_bytes": int(torch.cuda.memory_reserved()),
                "max_reserved_bytes": int(torch.cuda.max_memory_reserved())}

    # -- baselines --------------------------------------------------------------------
    def baselines(self, *, warmup: int, runs: int, flush_bytes: int, seed0: int, dist: str,
                  with_compile: bool, observer: Any) -> dict[str, Any]:
        """Eager and torch.compile, each call bracketed by this process's clock and timed
        from the observer's records exactly as candidates are (the span of the call's GPU
        work after the L2-flush memset)."""
        import torch

        from cutegen.codegen.eval.activity import Identity, Window, analyse

        specs = [ArgSpec.from_dict(s) for s in self.shapes[0]["specs"]]
        # the main shape's shared buffers (no candidate maps them now), each call's inputs
        # drawn into them: KernelBench L1 45's 16 GiB input had its own copy and a fresh
        # draw beside the buffers here, and ran an 80 GB GPU out of memory
        inputs = self.buffers[0]
        self.current.pop(0, None)  # they no longer hold a candidate's call's inputs
        flush = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
        model = self.models[0]
        out: dict[str, Any] = {}

        def timed(fn: Any) -> list[float]:
            observer.drain()
            windows = []
            for i in range(-warmup, runs):
                refill(inputs, specs, seed=seed0 + 1000 + i, distribution=dist)
                torch.cuda.synchronize()
                t0 = time.monotonic_ns()
                _memset(flush)
                with torch.no_grad():
                    fn()
                torch.cuda.synchronize()
                t1 = time.monotonic_ns()
                if i >= 0:
                    windows.append(Window(i, t0, t1, (flush_bytes,)))
            ops = observer.drain()
            act = analyse(ops, windows, Identity(frozenset(), frozenset(), (), True))
            spans = [act.calls[w.k].span_us for w in windows]
            if any(s is None for s in spans):
                raise RuntimeError("the observer saw no GPU work in a baseline call")
            return [float(s) for s in spans if s is not None]

        try:
            out["eager"] = timed(lambda: model(*inputs))
        except torch.OutOfMemoryError as e:
            # the candidate is still evaluated; its speed-ups are not (nor kept as the task's)
            _release_cached_memory(0)
            out["eager_error"] = f"OutOfMemoryError: {e}"[:2000]
            out["compiled_error"] = "not timed: the eager forward ran out of GPU memory"
            return out
        out.update(eager_in_tf32(model, inputs, timed))
        if with_compile:
            try:
                torch._dynamo.reset()
                cm = torch.compile(model, mode="default", dynamic=False)
                out["compiled"] = timed(lambda: cm(*inputs))
            except Exception as e:  # noqa: BLE001 - a baseline that fails is reported, not fatal
                out["compiled_error"] = f"{type(e).__name__}: {e}"[:2000]
        return out

    def close(self) -> None:
        from cuda.bindings import runtime as rt

        for p in self._allocs:
            rt.cudaFree(p)
        self._allocs.clear()


def comparison_bytes(shape: dict[str, Any]) -> int:
    """GPU bytes :meth:`Reference.references` holds at its peak for one shape: the float64
    inputs and outputs during the float64 pass, or the float64 outputs beside the native
    inputs and outputs during the native one (float tensors widened to 8 bytes a value)."""
    def native_and_wide(shape: Sequence[int], dtype: str) -> tuple[int, int]:
        n = math.prod(shape)
        return n * itemsize(dtype), n * (8 if dtype in FLOAT_DTYPES else itemsize(dtype))

    ins = [native_and_wide(d["shape"], d["dtype"]) for d in shape["specs"]
           if d.get("kind") == "tensor"]
    outs = [native_and_wide(o["shape"], o["dtype"]) for o in shape.get("outputs", [])
            if "shape" in o]
    in_native, in64 = sum(a for a, _ in ins), sum(b for _, b in ins)
    out_native, out64 = sum(a for a, _ in outs), sum(b for _, b in outs)
    return max(in64 + out64, out64 + in_native + out_native)


def host_available_bytes() -> int:
    """Host memory available to a new allocation (Linux's MemAvailable; else the free
    pages), 0 where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def keep_slots(free: int, shapes: Sequence[dict[str, Any]]) -> int:
    """How many copies of the main shape's outputs the reference worker keeps for the
    comparisons after the last timed call (pure).

    ``free`` is the GPU memory free once the shared input buffers are allocated. Set aside
    first: a comparison's peak (:func:`comparison_bytes`), the candidate's output with its
    prefill blocks (four outputs), the first call's copy held for the ghost, a margin. Half
    of the rest, and at most a quarter of ``free``, holds slots. The calls drawn for a check
    that find no slot are compared right after their call (``plan.Call.check``), so fewer
    slots check no fewer calls."""
    biggest = max([int(s["output_bytes"]) for s in shapes] + [1])
    work = max([comparison_bytes(s) for s in shapes] + [0])
    spare = free - work - 5 * biggest - _SLOT_MARGIN_BYTES
    return min(int(free * _SLOT_FRACTION // biggest), int(max(spare, 0) // 2 // biggest))


def _out_of_memory() -> dict[str, Any]:
    """The reference worker's ``oom`` result, saying how the GPU's memory stood: what this
    process held at its peak, what was free once its cache was handed back, the total."""
    import torch

    held = torch.cuda.max_memory_reserved() if torch.cuda.is_available() else 0
    _release_cached_memory(0)
    free, total = torch.cuda.mem_get_info() if torch.cuda.is_available() else (0, 0)
    return {"passed": False, "verdict": "oom", "reason": oom_reason(held, free, total)}


def oom_reason(held: int, free: int, total: int) -> str:
    """Why the reference worker could not read the outputs, in GiB (pure)."""
    gib = 2.0 ** 30
    return (f"the GPU ran out of memory while the reference worker read the outputs: it held "
            f"{held / gib:.1f} GiB at its peak (the task's inputs and float64 references), "
            f"{free / gib:.1f} of {total / gib:.1f} GiB were free after it released its cache; "
            f"the candidate's process holds the rest. A GPU with more memory, or a smaller "
            f"main shape, checks this task")


def eager_in_tf32(model: Any, inputs: Sequence[Any], timed: Any) -> dict[str, Any]:
    """Eager as torch runs it by default, where that differs from the baselines' eager:
    cuDNN's convolutions and recurrent layers in TF32 (``torch.backends.cudnn.allow_tf32`` is
    True unless set; this process sets it False, so the baselines' "eager" is fp32, the
    precision candidates are held to). One untimed forward under :func:`_cudnn_tf32_calls`
    finds such ops; where there are some, ``timed`` (the baselines' timer) times the forward
    with the flag on, and the flag is off again after it. Returns ``tf32_ops`` and
    ``eager_tf32`` (the samples) where timed, ``eager_tf32_error`` where the forward failed
    under the mode or in TF32: never fatal to the baselines, which are reported without it."""
    import torch

    out: dict[str, Any] = {}
    seen = _cudnn_tf32_calls()
    try:
        with torch.no_grad(), seen:
            model(*inputs)
    except Exception as e:  # noqa: BLE001 - reported, the baselines go on
        _release_cached_memory(0)
        seen.names.clear()
        out["eager_tf32_error"] = f"{type(e).__name__}: {e}"[:500]
    if seen.names:
        out["tf32_ops"] = sorted(seen.names)
        torch.backends.cudnn.allow_tf32 = True
        try:
            out["eager_tf32"] = timed(lambda: model(*inputs))
        except Exception as e:  # noqa: BLE001 - as above
            _release_cached_memory(0)
            out["eager_tf32_error"] = f"{type(e).__name__}: {e}"[:500]
        finally:
            torch.backends.cudnn.allow_tf32 = False
    return out


#: Names of torch functions that run on cuDNN with TF32 when torch.backends.cudnn.allow_tf32
#: is True (its default): convolutions (torch.conv2d, conv_transpose3d, convolution, ...)
#: and the recurrent layers (_VF.lstm, gru, rnn_tanh, rnn_relu).
_CUDNN_TF32_PREFIXES = ("conv", "_conv", "lstm", "gru", "rnn_")


def _cudnn_tf32_calls() -> Any:
    """A TorchFunctionMode that records, in ``names``, the torch functions called under it
    that cuDNN runs in TF32 by default (:data:`_CUDNN_TF32_PREFIXES`) on fp32 operands: TF32
    applies to fp32 only, so a bf16 or fp16 conv (a bf16 task, or a task's bf16 variant)
    runs the same with the flag on, and timing it again gave a second "eager" that was the
    first one again."""
    import torch
    from torch.overrides import TorchFunctionMode

    def fp32(v: Any) -> bool:
        if isinstance(v, torch.Tensor):
            return v.dtype == torch.float32
        return isinstance(v, (list, tuple)) and any(fp32(x) for x in v)

    class Calls(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: set[str] = set()

        def __torch_function__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", "")
            if (name.startswith(_CUDNN_TF32_PREFIXES) and not name.startswith("convert")
                    and (fp32(args) or fp32(list((kwargs or {}).values())))):
                self.names.add(name)
            return func(*args, **(kwargs or {}))

    return Calls()


def _memset(t: Any) -> None:
    """The L2 flush as a memset (a MEMSET record, like the candidate worker's)."""
    import torch
    from cuda.bindings import runtime as rt

    rt.cudaMemsetAsync(t.data_ptr(), 0, t.numel(), torch.cuda.current_stream().cuda_stream)


def _contiguous_stride(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for s in reversed(shape):
        stride.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(stride))


def _overlaps(a: Any, b: Any) -> bool:
    if not a.numel() or not b.numel():
        return False
    lo_a, lo_b = a.data_ptr(), b.data_ptr()
    hi_a = lo_a + a.untyped_storage().nbytes()
    hi_b = lo_b + b.untyped_storage().nbytes()
    return lo_a < hi_b and lo_b < hi_a


def share_equal_tensors(model: Any, earlier: Any) -> bool:
    """Point ``model``'s parameters and buffers at ``earlier``'s where they hold the same
    values (same qualified name, dtype, shape, strides, device), so that one copy is kept in
    memory: a task's hidden shapes mostly build the same model (KernelBench L2 59's 32768 x
    32768 fp32 weight, kept at three shapes in fp32 and float64, took 37 GiB with the
    candidate worker's 45 GiB beside it: more than an 80 GB H100 has, 2026-12-05). The
    modules stay separate objects, so what ``__init__`` derived from a shape's size globals
    stays that shape's. Returns whether every tensor was shared (the states are equal)."""
    import torch

    theirs: dict[str, Any] = dict(earlier.named_parameters(remove_duplicate=False))
    theirs.update(dict(earlier.named_buffers(remove_duplicate=False)))
    mine = 0
    shared = 0
    for mod_name, module in model.named_modules(remove_duplicate=False):
        for table in (module._parameters, module._buffers):
            for name, t in list(table.items()):
                if t is None:
                    continue
                mine += 1
                other = theirs.get(f"{mod_name}.{name}" if mod_name else name)
                if other is t:
                    shared += 1
                elif (isinstance(other, torch.Tensor) and type(other) is type(t)
                        and other.dtype == t.dtype and other.shape == t.shape
                        and other.stride() == t.stride() and other.device == t.device
                        and other.requires_grad == t.requires_grad
                        and _same_bits(other, t)):
                    table[name] = other
                    shared += 1
    return mine == shared and mine == len(theirs)


def _same_bits(a: Any, b: Any) -> bool:
    """Equal bit for bit (``torch.equal`` holds 0.0 equal to -0.0 and NaN unequal to itself)."""
    import torch

    as_int = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    if a.is_floating_point() and a.element_size() in as_int:
        ints = as_int[a.element_size()]
        return bool(torch.equal(a.view(ints), b.view(ints)))
    return bool(torch.equal(a, b))


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
    ap = argparse.ArgumentParser(prog="python -m cutegen.codegen.eval.refworker")
    ap.add_argument("--msg-fd", type=int, required=True)
    ap.add_argument("--mode", choices=("gpu", "compile"), required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--native-lib", default="")
    ap.add_argument("--cupti", default="")
    args = ap.parse_args(argv)

    def send(t: str, **kw: Any) -> None:
        framing.send(args.msg_fd, {"t": t, **kw})

    import torch

    gpu = args.mode == "gpu"
    if gpu and not torch.cuda.is_available():
        send("infra", message="no CUDA device is visible to the reference worker")
        return 0
    ipc = observer = None
    if gpu:
        torch.empty(1, device="cuda")
        try:
            from cutegen.codegen.eval.observed import LocalObserver

            ipc = IpcLib(args.native_lib)
            observer = LocalObserver(Path(args.native_lib), Path(args.cupti))
        except Exception as e:  # noqa: BLE001 - reported as an infrastructure fault
            send("infra", message=f"the reference worker could not start its observer: "
                                  f"{type(e).__name__}: {e}")
            return 0
    try:
        ref = Reference(args.task, gpu=gpu, scratch=Path(args.scratch), ipc=ipc)
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
            elif op == "prepare":
                send("reply", id=rid, **ref.prepare(req["shape"], req["seed"], req["dist"],
                                                    bool(req.get("vary"))))
            elif op == "take":
                send("reply", id=rid, **ref.take(shape=req["shape"], outputs=req["outputs"],
                                                 mode=req["mode"], slot=req.get("slot")))
            elif op == "compare_kept":
                send("reply", id=rid, **ref.compare_kept(slot=req["slot"], shape=req["shape"],
                                                         seed=req["seed"], dist=req["dist"],
                                                         vary=bool(req.get("vary"))))
            elif op == "release":
                send("reply", id=rid, **ref.release(observer))
            elif op == "baselines":
                send("reply", id=rid, **ref.baselines(
                    warmup=req["warmup"], runs=req["runs"], flush_bytes=req["flush_bytes"],
                    seed0=req["seed0"], dist=req["dist"], with_compile=req["compile"],
                    observer=observer))
            elif op == "quit":
                break
            else:
                send("reply", id=rid, error=f"unknown op {op!r}")
        except TaskFault as e:
            send("task_error", id=rid, message=str(e))
        except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
            send("reply", id=rid, error=f"{type(e).__name__}: {e}",
                 traceback=traceback.format_exc()[-4000:])
    with contextlib.suppress(Exception):
        ref.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
