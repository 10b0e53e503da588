"""Capture a task's ``Model.forward`` as a graph of canonical ops, on the meta device.

``python -m cutegen.codegen.families.capture TASK.py`` prints one JSON line: the
:class:`Captured` graph. :func:`capture_task` runs that in a child process (the task is
trusted user code, but importing it in the search process would leave its state there);
:func:`capture_in_process` does it here (tests, and the child itself).

How: the task module is imported, ``Model(*get_init_inputs())`` and ``get_inputs()`` run
under ``torch.device("meta")`` (no memory is used, so a 4 GB input costs nothing; a device
the task names, ``device="cuda"`` or ``.cuda()``, is the meta device there too:
:func:`cutegen.codegen.inputs.on_meta`), ``torch.fx.symbolic_trace`` records the forward,
and an ``Interpreter`` run on the meta inputs gives every node a concrete value: tensors become (shape, dtype), shape arithmetic
becomes numbers. Each call node is then named by :mod:`cutegen.codegen.families.ops`
(``torch.softmax``, ``x.softmax``, ``F.softmax`` and ``nn.Softmax`` are all ``softmax``),
with its tensor arguments as node references and every other argument as a JSON value.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cutegen.codegen.inputs import on_meta
from cutegen.errors import TaskError


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a captured forward.

    Attributes:
        id: position in the graph (topological order).
        kind: "input" (a forward argument), "param" (a parameter or buffer), "call" (an op)
            or "output".
        op: the canonical op name for calls (see :mod:`~cutegen.codegen.families.ops`),
            "?" when unknown; the argument name or attribute path for inputs and params.
        target: the original callee, for messages ("torch.nn.functional.conv2d", "Conv2d").
        tensors: tensor arguments of a call: parameter name -> node id.
        consts: the other arguments, with concrete values (JSON types; tuples as lists).
        shape / dtype: the value's shape and dtype when it is a tensor (dtype "" otherwise).
        value: the value when it is not a tensor (a number, a tuple of tensors -> None).
    """

    id: int
    kind: str
    op: str
    target: str = ""
    tensors: dict[str, int] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)
    shape: tuple[int, ...] = ()
    dtype: str = ""
    value: Any = None


@dataclass(frozen=True, slots=True)
class Captured:
    """A captured forward: nodes, the returned node, and facts about the model (its number
    attributes; the task's ``TOLERANCE`` override, ``{}`` when it has none; the task's
    ``INPUT_DISTRIBUTIONS``, ``()`` when it names none, i.e. every distribution is verified)."""

    nodes: tuple[Node, ...]
    output: int
    forward_args: tuple[str, ...]
    scalar_attrs: dict[str, float] = field(default_factory=dict)
    error: str = ""
    tolerance: dict[str, float] = field(default_factory=dict)
    distributions: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> Captured:
        d = json.loads(text)
        nodes = tuple(Node(**{**n, "shape": tuple(n["shape"])}) for n in d["nodes"])
        return Captured(nodes, d["output"], tuple(d["forward_args"]), d["scalar_attrs"],
                        d.get("error", ""), d.get("tolerance", {}),
                        tuple(d.get("distributions", ())))


def _dtype_name(dt: Any) -> str:
    return str(dt).replace("torch.", "")


def _jsonable(v: Any) -> Any:
    import torch

    if isinstance(v, torch.dtype):
        return _dtype_name(v)
    if isinstance(v, (torch.Size, tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, torch.memory_format):
        return str(v)
    return f"<{type(v).__name__}>"


def _load_module(path: Path) -> Any:
    name = f"_cutegen_task_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"cannot import task file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def capture_in_process(path: str | Path) -> Captured:
    """Capture the task's forward in this process (see the module docstring).

    Raises:
        TaskError: the task cannot be imported, built or run on the meta device.
    """
    import torch
    import torch.fx

    from cutegen.codegen.families.ops import canonical_call

    try:
        module = _load_module(Path(path))
        init = list(module.get_init_inputs())
        with torch.device("meta"), on_meta():
            model = module.Model(*init)
            inputs = list(module.get_inputs())
    except Exception as e:  # noqa: BLE001 - the task's own code
        raise TaskError(f"{path}: building the model on the meta device failed: "
                        f"{type(e).__name__}: {e}") from e
    scalars = {k: float(v) for k, v in vars(model).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tol = getattr(module, "TOLERANCE", None)
    tolerance = {k: float(v) for k, v in tol.items() if k in ("atol", "rtol")
                 and isinstance(v, (int, float))} if isinstance(tol, dict) else {}
    dists = getattr(module, "INPUT_DISTRIBUTIONS", None)
    distributions = tuple(str(d) for d in dists) if isinstance(dists, (list, tuple)) else ()
    try:
        gm = torch.fx.symbolic_trace(model)
    except Exception as e:  # noqa: BLE001 - data-dependent control flow and the like
        return Captured((), -1, (), scalars,
                        f"torch.fx could not trace Model.forward: {type(e).__name__}: {e}"
                        + _trace_hint(e))
    kept = _state_assigned(model, torch.fx.Proxy)
    if kept:
        return Captured((), -1, (), scalars,
                        f"Model.forward assigns {kept} (state kept from one call to the next, "
                        "as a recurrent cell's hidden state): the built-in families cover "
                        "forwards whose result depends only on their inputs and parameters")
    values: dict[Any, Any] = {}
    at: list[torch.fx.Node] = []

    class _Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            at[:] = [n]
            out = super().run_node(n)
            values[n] = out
            return out

    try:
        with torch.no_grad():
            _Recorder(gm).run(*inputs)
    except Exception as e:  # noqa: BLE001
        where = f" at {_node_name(at[0], gm)}" if at else ""
        return Captured((), -1, (), scalars,
                        f"running Model.forward on meta tensors failed{where}: "
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    ids = {n: i for i, n in enumerate(gm.graph.nodes)}
    nodes: list[Node] = []
    forward_args: list[str] = []
    output = -1
    for n in gm.graph.nodes:
        val = values.get(n)
        shape: tuple[int, ...] = ()
        dtype = ""
        plain: Any = None
        if isinstance(val, torch.Tensor):
            shape, dtype = tuple(int(s) for s in val.shape), _dtype_name(val.dtype)
        else:
            plain = _jsonable(val) if not isinstance(val, (tuple, list)) or not any(
                isinstance(v, torch.Tensor) for v in val) else None
        i = ids[n]
        if n.op == "placeholder":
            forward_args.append(str(n.target))
            nodes.append(Node(i, "input", str(n.target), shape=shape, dtype=dtype))
        elif n.op == "get_attr":
            if str(n.target).startswith("_tensor_constant") and isinstance(val, torch.Tensor) \
                    and val.numel() == 1 and val.device.type != "meta":
                plain = float(val.item())  # torch.tensor(self.c) in forward: fx's constant
            nodes.append(Node(i, "param", str(n.target), shape=shape, dtype=dtype, value=plain))
        elif (number := _number_tensor(n)) is not None:
            # torch.tensor(0.5, device=x.device) in forward: a number, as fx's own constants
            nodes.append(Node(i, "param", f"_tensor_constant_call{i}", shape=shape, dtype=dtype,
                              value=number))
        elif n.op == "output":
            arg = n.args[0]
            output = ids[arg] if isinstance(arg, torch.fx.Node) else -1
            nodes.append(Node(i, "output", "output"))
        else:
            op, target, tensors, consts = canonical_call(n, gm, values, ids)
            nodes.append(Node(i, "call", op, target, tensors, consts, shape, dtype, plain))
    return Captured(tuple(nodes), output, tuple(forward_args), scalars, "", tolerance,
                    distributions)


def _node_name(n: Any, gm: Any) -> str:
    """The forward's step ``n`` as a user reads it: ``self.lstm (nn.LSTM)`` for a submodule,
    the function's name for a call."""
    if n.op == "call_module":
        try:
            return f"self.{n.target} (nn.{type(gm.get_submodule(n.target)).__name__})"
        except AttributeError:  # (a message is being written: never fail here)
            return f"self.{n.target}"
    if n.op in ("call_function", "call_method"):
        name = getattr(n.target, "__name__", str(n.target))
        return f"{name}()" if n.op == "call_function" else f"Tensor.{name}()"
    return str(n.target)


def _trace_hint(e: Exception) -> str:
    """What a TypeError from tracing usually means, said plainly ("" for other errors): the
    tracer follows sizes read from a tensor as traced values, and Python refused one where it
    needs a plain number (``self.mask[:, :, :T, :T]`` with ``T = x.size(1)``, ``range(T)``)."""
    if not isinstance(e, TypeError):
        return ""
    return (" (most often the forward uses a size read from a tensor, x.size() or x.shape, "
            "where Python needs a plain number: a slice bound, a range or an index)")


def _state_assigned(model: Any, proxy: type) -> str:
    """``self.NAME`` (or ``self.sub.NAME``) of the first module attribute that tracing the
    forward left holding a traced value (``proxy``): the forward assigned it, so the module
    keeps state between calls; "" when there is none."""
    for prefix, mod in model.named_modules():
        for name, val in vars(mod).items():
            if isinstance(val, proxy):
                return "self." + (f"{prefix}.{name}" if prefix else name)
    return ""


def _number_tensor(n: Any) -> float | None:
    """The number of a ``torch.tensor(number[, device=..., dtype=...])`` call node, else None.
    (``device=x.device`` and a float dtype only place or widen the number; an integer or bool
    dtype would change it and is left to the families to refuse.)"""
    import torch

    if n.op != "call_function" or n.target is not torch.tensor or len(n.args) != 1:
        return None
    v = n.args[0]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not set(n.kwargs) <= {"device", "dtype", "requires_grad"}:
        return None
    dt = n.kwargs.get("dtype")
    if dt is not None and not (isinstance(dt, torch.dtype) and dt.is_floating_point):
        return None
    return float(v)


def capture_task(path: str | Path, *, timeout_s: float = 180.0) -> Captured:
    """Capture the task's forward in a child process (see the module docstring).

    Raises:
        TaskError: the child failed (its stderr tail is in the message) or timed out.
    """
    # ``-c``, not ``-m``: this module is imported by its package, and runpy warns (on stderr,
    # first in a failure's message) when ``-m`` runs a module its package has imported
    cmd = [sys.executable, "-c", _CHILD, str(Path(path).resolve())]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise TaskError(f"capturing {path} took longer than {timeout_s:.0f} s") from e
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise TaskError(f"capturing {path} failed:\n{proc.stderr[-2000:]}")
    return Captured.from_json(lines[-1])


_CHILD = ("import sys; from cutegen.codegen.families.capture import main; "
          "sys.exit(main(sys.argv))")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m cutegen.codegen.families.capture TASK.py", file=sys.stderr)
        return 2
    try:
        cap = capture_in_process(argv[1])
    except TaskError as e:
        print(str(e), file=sys.stderr)
        return 1
    print(cap.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
