"""Input specs and deterministic input generation from (spec, secret seed, distribution).

The trusted reference worker learns what a task's inputs look like (shapes, dtypes, the
range of integer inputs) and hands the *specs* to the candidate worker, which never sees
the task module. Both processes then generate the same inputs from the same seed on the
same device, so the verifier can recompute the reference for exactly what the candidate
saw, without shipping inputs around.

Specs are plain JSON-able dataclasses; generation imports torch lazily.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

#: Float input distributions (RELIABILITY.md B6). A task may restrict them with
#: ``INPUT_DISTRIBUTIONS``; "zeros" is used only where a task lists it. "spiky" is randn
#: with :data:`SPIKES` values of +-(0.5 to 1) x :func:`spike_size` at random places in each
#: tensor (see :func:`spike_size`): every evaluation checks it on the main shape.
DISTRIBUTIONS = ("randn", "spiky", "randn_mean3", "uniform", "large", "small", "negative")
#: "uniform_spiky": uniform with the spikes, all positive: the reference worker puts it in
#: the place of "spiky" for a task defined on positive inputs only (``log`` of them), where
#: "spiky" is NaN everywhere and left out (``Reference.informative``).
EXTRA_DISTRIBUTIONS = ("zeros", "uniform_spiky")

#: Spikes per float tensor of the "spiky" distribution: few, so that a kernel cannot find
#: them without reading every value (reading 1 % of them finds one in 8 % of the draws).
SPIKES = 8


def spike_size(numel: int, dtype: str) -> float:
    """The magnitude of the "spiky" distribution's spikes in a tensor of ``numel`` values.

    A kernel that reduces a subset of its input and scales the result up (the mean of a
    quarter of the squared errors of a 2^30-element MSE: 4x less to read) is within fp32's
    1e-4 tolerance on randn or uniform inputs, whose mean over 2^28 values is that exact
    (KernelBench replaced its losses' inputs with a heavy-tailed Pareto for this reason).
    Spikes of ``numel / 256`` carry 3 % of a sum of absolute values and all but all of a sum
    of squares, so a kernel that skips some of them is off by far more than the tolerance.
    Between 1e3 and 1e7 (fp16: 256, whose square still fits)."""
    cap = 256.0 if dtype == "float16" else 1e7
    return float(min(cap, max(1e3, numel / 256)))


#: The distributions the timed calls prefer, first kept first (see timing_distribution).
TIMING_PREFERENCE = ("spiky", "uniform_spiky", "randn")


def timing_distribution(dists: Sequence[str]) -> str:
    """The distribution the timed calls and the baselines draw from, of those the reference
    worker kept (``Reference.informative``): ``spiky`` where it is kept, else
    ``uniform_spiky``, else ``randn``, else the first the task lists
    (``INPUT_DISTRIBUTIONS = ["uniform"]`` for probabilities: timing them on ``randn``
    measured ``log`` of negative numbers).

    Timed on spikes because a secret subset of the timed calls is checked: a kernel that
    reduces half of a large input and reads the other half only where that half holds a
    spike passes the ``spiky`` verification call, and on ``randn`` its half is within the
    tolerance (a mean over 2^30 values), so timed on ``randn`` it was timed doing half the
    work; on spiky inputs it must read all of them in the calls that set its time too, or be
    wrong in the checked ones. The spikes are 8 values a tensor, which an honest kernel's
    speed does not depend on."""
    if not dists:
        raise ValueError("no input distribution to time with")
    return next((d for d in TIMING_PREFERENCE if d in dists), dists[0])


def load_distribution(dists: Sequence[str]) -> str:
    """The distribution the reference worker's own runs at load draw from, before it knows
    which distributions tell kernels apart: ``randn`` where the task allows it, else the
    first it lists (a forward that refuses negative inputs raised on ``randn``)."""
    if not dists:
        raise ValueError("no input distribution to draw with")
    return "randn" if "randn" in dists else dists[0]


FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """One positional argument of ``forward``.

    kind "tensor": ``shape``/``dtype`` given; integer tensors are drawn uniformly from
    [low, high) (the range seen in the task's own ``get_inputs``), bool tensors as coin
    flips. kind "value": a Python scalar passed through unchanged.
    """

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    low: int = 0
    high: int = 2
    value: Any = None

    @property
    def is_float(self) -> bool:
        return self.kind == "tensor" and self.dtype in FLOAT_DTYPES

    @property
    def nbytes(self) -> int:
        if self.kind != "tensor":
            return 0
        n = 1
        for s in self.shape:
            n *= s
        return n * itemsize(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ArgSpec:
        d = dict(d)
        d["shape"] = tuple(d.get("shape", ()))
        return ArgSpec(**d)


def itemsize(dtype: str) -> int:
    """Bytes per element of a torch dtype named without its ``torch.`` prefix (4 if unknown)."""
    return {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8,
            "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1}.get(dtype, 4)


def spec_of(x: Any) -> ArgSpec:
    """The spec of one value returned by a task's ``get_inputs()``."""
    import torch

    if isinstance(x, torch.Tensor):
        dt = str(x.dtype).removeprefix("torch.")
        low, high = 0, 2
        if dt not in FLOAT_DTYPES and dt != "bool" and x.device.type != "meta" and x.numel():
            low, high = int(x.min().item()), int(x.max().item()) + 1
        return ArgSpec("tensor", tuple(int(s) for s in x.shape), dt, low, high)
    if isinstance(x, (bool, int, float, str)) or x is None:
        return ArgSpec("value", value=x)
    raise TypeError(f"get_inputs() returned a {type(x).__name__}; only tensors and scalars "
                    "are supported")


def generate(specs: Sequence[ArgSpec], *, seed: int, distribution: str, device: str,
             vary_scalars: bool = False) -> list[Any]:
    """Inputs for one trial. Deterministic in (specs, seed, distribution, device).

    Float tensors are drawn in float32 and cast, so every dtype sees the same values up
    to rounding. With ``vary_scalars``, a float scalar argument of ``forward`` is scaled by
    a factor in [0.5, 2) drawn from the seed: a kernel that baked the task's value in at
    compile time is then wrong (ints and bools stay: they are sizes, dims and switches).
    """
    return _inputs(specs, seed, distribution, device, vary_scalars, None)


def refill(tensors: Sequence[Any], specs: Sequence[ArgSpec], *, seed: int, distribution: str,
           vary_scalars: bool = False) -> list[Any]:
    """Overwrite existing input tensors in place with the values :func:`generate` gives, and
    return the arguments (``tensors``, with the scalars :func:`generate` would give).

    An fp32 or integer tensor is drawn straight into its memory, so no input-sized copy is
    held beside it (KernelBench level 1 problem 45's 16 GiB input, twice, did not fit an
    80 GB GPU beside the shared buffers); other dtypes are drawn one tensor at a time."""
    return _inputs(specs, seed, distribution, str(_device_of(tensors)), vary_scalars,
                   list(tensors))


def generate_float64(specs: Sequence[ArgSpec], *, seed: int, distribution: str, device: str,
                     vary_scalars: bool = False) -> list[Any]:
    """:func:`generate`'s inputs with every float tensor widened to float64 (the reference's
    float64 pass), the fp32 ones drawn inside their float64 memory and widened there, so
    that no fp32 copy is held beside them (KernelBench L1 45: 48 GiB for its 16 GiB input
    before, 32 now). The same values as ``[x.double() for x in generate(...)]``."""
    return _inputs(specs, seed, distribution, device, vary_scalars, None, wide=True)


def _inputs(specs: Sequence[ArgSpec], seed: int, distribution: str, device: str,
            vary_scalars: bool, into: list[Any] | None, wide: bool = False) -> list[Any]:
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out: list[Any] = []
    for k, s in enumerate(specs):
        if s.kind == "value":
            out.append(vary_scalar(s.value, seed, k) if vary_scalars else s.value)
            continue
        dt = getattr(torch, s.dtype)
        dst = into[k] if into is not None else None
        # the same random stream whether drawn into ``dst`` or into a new tensor
        # (a bool one never: it is drawn as int64 coin flips, then copied in like any other)
        direct = (dst is not None and s.dtype != "bool"
                  and dst.dtype == (torch.float32 if s.is_float else dt)
                  and tuple(dst.shape) == tuple(s.shape) and dst.is_contiguous())
        if s.is_float and wide and s.dtype == "float32":
            x = _draw_wide(s.shape, distribution, gen, device)
        elif s.is_float:
            x = _draw(s.shape, distribution, gen, device, dst if direct else None, s.dtype)
            if dst is None:
                x = x.to(dt)  # (into a tensor of another dtype, its copy_ casts the same way)
                x = x.to(torch.float64) if wide else x  # rounded to its dtype first
        elif s.dtype == "bool":
            x = torch.randint(0, 2, s.shape, generator=gen, device=device).bool()
        else:
            hi = max(s.high, s.low + 1)
            if direct:
                x = torch.randint(s.low, hi, s.shape, generator=gen, out=dst)
            else:
                x = torch.randint(s.low, hi, s.shape, generator=gen, device=device, dtype=dt)
        if dst is not None and not direct:
            dst.copy_(x)
            x = dst
        out.append(x)
        del x
    return out


def vary_scalar(value: Any, seed: int, index: int) -> Any:
    """``value`` scaled by a factor in [0.5, 2) drawn from (seed, index) when it is a float."""
    if type(value) is not float:
        return value
    import random

    return value * random.Random((seed << 8) ^ index).uniform(0.5, 2.0)


def _device_of(tensors: Sequence[Any]) -> Any:
    for t in tensors:
        if hasattr(t, "device"):
            return t.device
    return "cpu"


def _draw(shape: tuple[int, ...], dist: str, gen: Any, device: str, out: Any = None,
          dtype: str = "float32") -> Any:
    """fp32 values of ``dist`` for a tensor of ``dtype``, into ``out`` (an fp32 tensor of
    ``shape``) where given: the same values either way (one random draw, then the same fp32
    arithmetic, in place)."""
    import torch

    if out is None:
        out = torch.empty(shape, device=device, dtype=torch.float32)
    if dist == "zeros":
        return out.zero_()
    if dist in ("uniform", "uniform_spiky"):
        # (0, 1], never 0: torch.rand gives an exact 0 once in 2^24 values, so a 2^30-value
        # input held dozens and log(p) of it was -inf (KernelBench L1 98's kl_div: Inf
        # everywhere, on every distribution)
        x = torch.rand(shape, generator=gen, out=out).neg_().add_(1.0)
        return _spikes(x, gen, device, dtype, signed=False) if dist == "uniform_spiky" else x
    x = torch.randn(shape, generator=gen, out=out)
    if dist == "randn":
        return x
    if dist == "spiky":
        return _spikes(x, gen, device, dtype, signed=True)
    if dist == "randn_mean3":
        return x.add_(3.0)
    if dist == "large":
        return x.mul_(1e3)
    if dist == "small":
        return x.mul_(1e-3)
    if dist == "negative":
        return x.abs_().neg_()
    raise ValueError(f"unknown input distribution {dist!r}")


def _spikes(x: Any, gen: Any, device: str, dtype: str, *, signed: bool) -> Any:
    """``x`` with :data:`SPIKES` values of (0.5 to 1) x :func:`spike_size` at random places,
    of either sign where ``signed``, else positive."""
    import torch

    n = x.numel()
    if n:
        at = torch.randint(0, n, (SPIKES,), generator=gen, device=device)
        # Sign and size are functions of the place: two spikes drawn at one place write the
        # same value, so the draw is the same every time (a CUDA index_put with repeated
        # places writes one of them, which one unspecified). Sizes differ (half to all of
        # spike_size): with one size, a kernel that kept exactly its share of the spikes (one
        # in five draws for half of 16) would scale up to the right sum.
        sign = (at % 2).to(torch.float32) * 2 - 1 if signed else 1.0
        size = 0.5 + (at % 1021).to(torch.float32) / 2042
        x.view(-1)[at] = sign * size * spike_size(n, dtype)
    return x


def _draw_wide(shape: tuple[int, ...], dist: str, gen: Any, device: str) -> Any:
    """:func:`_draw`'s fp32 values as float64, drawn into the first half of the float64
    memory and widened in place from the top: the fp32 values [lo, hi) sit in bytes
    [4 lo, 4 hi) and go to [8 lo, 8 hi), which for lo = ceil(hi / 2) lies above every value
    not yet widened, so no copy ever reads what another wrote (log2 n copies)."""
    import torch

    n = math.prod(shape)
    wide = torch.empty(n, dtype=torch.float64, device=device)
    if n == 0:
        return wide.view(shape)
    narrow = wide.view(torch.float32)[:n]
    _draw(tuple(shape), dist, gen, device, narrow.view(shape))
    hi = n
    while hi > 1:
        lo = (hi + 1) // 2
        wide[lo:hi].copy_(narrow[lo:hi])
        hi = lo
    wide[:1].copy_(narrow[:1].clone())  # the first value's two places overlap
    return wide.view(shape)


def empty_like_specs(specs: Sequence[ArgSpec], *, device: str) -> list[Any]:
    """Uninitialised inputs of the right shapes (compile-only mode: nothing is computed)."""
    import torch

    out: list[Any] = []
    for s in specs:
        if s.kind == "value":
            out.append(s.value)
        else:
            out.append(torch.empty(s.shape, dtype=getattr(torch, s.dtype), device=device))
    return out


def on_meta() -> Any:
    """A torch function mode under which the tensors a task builds stay on the meta device
    where it names another (``torch.rand(..., device="cuda")`` in ``get_inputs``, ``.cuda()``,
    ``.to("cuda")``): the capture needs shapes and dtypes only, and a CPU-only machine has no
    CUDA device (KernelBench level 1 problem 97 builds its inputs on "cuda").

    Within it, ``torch.distributions`` do not check their arguments: the check reads a
    tensor's value (``.all()``), which a meta tensor has not, so ``Pareto(0.01, 1.5).sample(...)``
    (KernelBench level 1 problems 94, 96 and 100 upstream) failed, and the task with it."""
    import torch
    from torch.distributions import Distribution
    from torch.overrides import TorchFunctionMode

    moves = {torch.Tensor.cuda, torch.Tensor.cpu}

    class _OnMeta(TorchFunctionMode):
        def __enter__(self):
            self._validate = Distribution._validate_args
            Distribution.set_default_validate_args(False)
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                Distribution.set_default_validate_args(self._validate)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = "meta"
            if func in moves:
                return args[0]
            if func is torch.Tensor.to:
                # keep a dtype (or another tensor's dtype), drop a device
                rest = [a.dtype if isinstance(a, torch.Tensor) else a for a in args[1:]
                        if not isinstance(a, (str, torch.device))]
                kwargs.pop("device", None)
                return func(args[0], *rest, **kwargs) if rest or kwargs else args[0]
            return func(*args, **kwargs)

    return _OnMeta()
