"""Precision variants of a task: the same reference with its floating-point inputs and
parameters in another dtype.

PERFORMANCE.md's tier B runs KernelBench's fp32 problems as written (held to fp32's 1e-4)
and **also as a bf16 variant** held to bf16's 1e-2 (the precision KernelBench's own harness
offers with ``precision=bf16``); the two never share a mean. ``cutegen search --precision
bf16`` and ``cutegen bench --precision bf16`` run such variants.

A variant is a task file of its own: the original text unchanged, then a few lines that

* wrap ``get_inputs`` so that every floating-point tensor it returns (also inside a list or
  tuple) is cast to the variant's dtype; integer and bool tensors and Python scalars stay;
* wrap ``Model.__init__`` so that the model's floating-point parameters and buffers are cast
  after it is built (``Module.to(dtype)``). The class keeps its name and identity, so a
  ``super(Model, self).__init__()`` in the task still resolves (a subclass bound to the same
  name recursed there).

The built-in families copy ``Model``'s constructor into their candidates; for a variant the
copy casts too (:func:`init_cast`), since the harness loads the reference's parameters into
``ModelNew``'s own in their dtypes. A candidate of one's own (or an LLM's) should likewise
build its parameters in the variant's dtype.

Everything that runs the task (the capture, the trusted reference worker and its float64
reference, the families' recognition) therefore sees the variant as any other task file: the
float64 reference is computed from the variant's rounded inputs and parameters, and outputs
are compared at the tolerance of their own dtype. A tensor a forward builds with torch's
default dtype stays fp32 and promotes what it meets, as it would for a user casting the
model. The file's text differs from the original's, so a run of it is a run of its own,
identified by its own hash and resumed from its own path.

The file is written atomically under ``FOLDER/<first 12 hex digits of the original's
sha256>/<task name>_<dtype>.py`` (``cutegen`` uses the folder ``variants/`` beside the store),
so the same task gives the same file every time and a resumed run finds it.

**Tolerance variants** (``--atol`` / ``--rtol``): the task's text, unchanged, then one
``TOLERANCE = {...}`` line (the last assignment wins when the file runs, and
:func:`cutegen.codegen.tasks.declared_tolerance` reads it the same way), the value not given
kept from the task's own ``TOLERANCE`` or else the dtype's row of the table
(:data:`cutegen.codegen.numerics.TOLERANCES`). It is a task of its own for the same reason as
a precision variant: a kernel held to 1e-2 is not comparable with one held to 1e-4. With both,
the tolerance line comes first and the precision's lines after it.
"""

from __future__ import annotations

import math
from pathlib import Path

from cutegen.codegen.atomic import write_atomic
from cutegen.codegen.tasks import Task, declared_tolerance, load_task_file
from cutegen.errors import TaskError

#: The precisions a run may ask for: "native" (the task as written) or a variant's dtype.
PRECISIONS = ("native", "bf16")

#: torch's name of each variant dtype.
_TORCH_DTYPE = {"bf16": "bfloat16"}

#: Appended to the task's text (``{dtype}``: torch's name of the dtype). Names start with
#: ``_cutegen_`` so as not to meet the task's own.
_SUFFIX = '''

# --- cutegen: the {tag} variant of this task (cutegen.codegen.variants): floating-point
# --- inputs and parameters cast to torch.{dtype}; the text above is the original, unchanged.
# --- A candidate's ModelNew must build its parameters in torch.{dtype} too (e.g. end its
# --- __init__ with self.to(torch.{dtype})): the harness loads Model's values into ModelNew's
# --- own parameters, which keep their dtype.
import torch as _cutegen_torch


def _cutegen_cast(value):
    if isinstance(value, _cutegen_torch.Tensor) and value.is_floating_point():
        return value.to(_cutegen_torch.{dtype})
    if isinstance(value, (list, tuple)):
        return type(value)(_cutegen_cast(v) for v in value)
    return value


_cutegen_get_inputs = get_inputs


def get_inputs(*args, **kwargs):
    return _cutegen_cast(_cutegen_get_inputs(*args, **kwargs))


_cutegen_model_init = Model.__init__


def _cutegen_init_{tag}(self, *args, **kwargs):
    _cutegen_model_init(self, *args, **kwargs)
    self.to(_cutegen_torch.{dtype})


Model.__init__ = _cutegen_init_{tag}
'''


def variant_dtype(source: str) -> str | None:
    """torch's name of the dtype ``source`` is a variant in ("bfloat16"), or None for a task
    that is no variant (its text does not end with a variant's lines)."""
    for tag, dtype in _TORCH_DTYPE.items():
        if source.endswith(_SUFFIX.format(tag=tag, dtype=dtype)):
            return dtype
    return None


def init_cast(class_name: str, dtype: str) -> str:
    """Lines that make ``class_name``'s constructor cast what it builds to ``dtype``, as a
    variant's ``Model`` does: the built-in families copy ``Model``'s constructor into their
    candidates (``cutegen.codegen.families.taskmodule``), and the harness loads the
    reference's parameters into ``ModelNew``'s own, in their dtypes, so the copy must build
    them in the variant's dtype too."""
    return (f"\n\n\n_cutegen_task_init = {class_name}.__init__\n\n\n"
            f"def _cutegen_task_init_cast(self, *args, **kwargs):\n"
            f"    _cutegen_task_init(self, *args, **kwargs)\n"
            f"    import torch as _cutegen_torch\n\n"
            f"    self.to(_cutegen_torch.{dtype})\n\n\n"
            f"{class_name}.__init__ = _cutegen_task_init_cast")


def variant_source(source: str, precision: str) -> str:
    """The text of ``source``'s variant in ``precision`` (a dtype tag of :data:`PRECISIONS`
    other than "native").

    Raises:
        TaskError: an unknown precision.
    """
    if precision not in _TORCH_DTYPE:
        raise TaskError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    return source + _SUFFIX.format(tag=precision, dtype=_TORCH_DTYPE[precision])


#: Appended for a tolerance variant ({value}: the dict's literal).
_TOL_SUFFIX = """

# --- cutegen: this task held to another tolerance (cutegen.codegen.variants, --atol / --rtol);
# --- the text above is the original, unchanged.
TOLERANCE = {value}
"""


def tolerance_source(source: str, atol: float | None = None, rtol: float | None = None) -> str:
    """The text of ``source`` held to ``atol`` / ``rtol`` (None: the task's own value, else
    the dtype's row of the table).

    Raises:
        TaskError: a tolerance that is negative, not finite, or neither given.
    """
    given = {k: v for k, v in (("atol", atol), ("rtol", rtol)) if v is not None}
    if not given:
        raise TaskError("a tolerance variant needs atol or rtol")
    for k, v in given.items():
        if not (math.isfinite(v) and v >= 0):
            raise TaskError(f"{k} must be a finite number >= 0, got {v!r}")
    value = {**(declared_tolerance(source) or {}), **{k: float(v) for k, v in given.items()}}
    return source + _TOL_SUFFIX.format(value=repr(dict(sorted(value.items()))))


def _tag(x: float) -> str:
    """A file-name-safe spelling of a tolerance: 0.01 -> 0p01, 1e-05 -> 1em05."""
    return f"{x:g}".replace(".", "p").replace("-", "m").replace("+", "")


def make_variant(task: Task, precision: str, folder: str | Path, *, atol: float | None = None,
                 rtol: float | None = None) -> Task:
    """``task`` in ``precision`` and held to ``atol`` / ``rtol``: ``task`` itself for
    "native" with neither tolerance given, else its variant, written under ``folder`` (see the
    module doc) unless the file there already holds that text.

    Raises:
        TaskError: an unknown precision, a tolerance that is negative or not finite, or the
            file cannot be written.
    """
    if precision == "native" and atol is None and rtol is None:
        return task
    text, name = task.source, task.name
    if atol is not None or rtol is not None:
        text = tolerance_source(text, atol, rtol)
        name += "".join(f"_{k}{_tag(v)}" for k, v in (("atol", atol), ("rtol", rtol))
                        if v is not None)
    if precision != "native":
        text = variant_source(text, precision)
        name += f"_{precision}"
    path = Path(folder).expanduser() / task.sha256[:12] / f"{name}.py"
    try:
        if not (path.is_file() and path.read_text(encoding="utf-8") == text):
            write_atomic(path, text.encode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot write the {name.removeprefix(task.name + '_')} variant of "
                        f"{task.name} to {path}: "
                        f"{e}") from e
    return load_task_file(path, name=name, origin=task.origin)
