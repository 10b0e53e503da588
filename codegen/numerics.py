"""Tolerances per dtype and the output comparison (RELIABILITY.md B1–B4, lesson 8).

A candidate's output ``c`` is compared with a float64 reference ``r`` (the task's Model run
in float64 on the same inputs) and with ``n``, the task's Model run in its own dtype. It
passes when

* NaN and ±Inf appear at exactly the positions where ``r`` (rounded to the output's dtype)
  has them, or where ``n`` has the same one (the dtype's own arithmetic left its range on
  the way: a cumprod past fp32's largest value and back), and
* every finite element satisfies ``|c - r| <= atol + rtol * |r|`` (the dtype's table), or
  the candidate is as accurate as the task's own reference: ``rmse(c, r) <= 2 * rmse(n, r)
  + atol / 100`` and ``max|c - r| <= 4 * max|n - r| + atol`` (inductor's fp64 rule, which
  admits a different summation order and rejects a precision downgrade), measured where
  ``n`` is finite (elsewhere the tolerance alone). Where ``n`` happens to be more accurate
  than fp32 arithmetic promises (cuBLAS's GEMV for a one-row Linear sums K = 8192 products
  at 1.3 fp32 rounding steps of the output's rms), those bounds are raised to
  ``FP32_STEPS`` such steps, ``FP32_STEPS * eps(fp32) * rms(r)`` and ``* max|r|``: an fp32
  kernel that sums in another order is not wrong for it, while a precision downgrade (TF32
  products: ~2,000 steps; bf16 far more) still is. Not for float64 outputs.

Only torch is needed; the functions take tensors and return plain values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: (atol, rtol) by output dtype. fp32 follows KernelBench's published 1e-4 comparisons.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-3, 1e-3),
    "bfloat16": (1e-2, 1e-2),
}
K_RMSE = 2.0
K_MAX = 4.0
#: The least error bound of the fallback, in fp32 rounding steps (eps = 2^-23) of the float64
#: reference's rms (for the rmse) and largest magnitude (for the max error). Measured on the
#: H100 at an fp32 Linear's one-row hidden shape (K = 8192, inputs scaled by 1e3: rms 803):
#: the 3xTF32 GEMM's rmse 3.3 steps, max 3.5-5.2, torch's CPU fp32 GEMV 3.5 steps, cuBLAS's
#: GEMV (the task's own reference there) 1.3, so 2x the reference's admitted none of them.
FP32_STEPS = 8.0


@dataclass(frozen=True, slots=True)
class Comparison:
    passed: bool
    reason: str
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rmse: float = 0.0
    ref_rmse: float = 0.0


def tolerance_for(dtype: str, override: Mapping[str, float] | None = None) -> tuple[float, float]:
    atol, rtol = TOLERANCES.get(dtype, (0.0, 0.0))
    if override:
        atol = float(override.get("atol", atol))
        rtol = float(override.get("rtol", rtol))
    return atol, rtol


def compare(cand: Sequence[Any], ref64: Sequence[Any], native: Sequence[Any],
            *, override: Mapping[str, float] | None = None) -> Comparison:
    """Compare a candidate's outputs with the float64 and native references.

    Returns a :class:`Comparison`; ``reason`` names the first problem found.
    """
    import torch

    if len(cand) != len(native):
        return Comparison(False, f"returned {len(cand)} outputs, the reference {len(native)}")
    worst = Comparison(True, "")
    for i, (c, r, n) in enumerate(zip(cand, ref64, native, strict=True)):
        tag = f"output {i}" if len(cand) > 1 else "output"
        if not isinstance(n, torch.Tensor):
            n, r = torch.tensor(n), torch.tensor(r)
            if isinstance(c, torch.Tensor) and c.dim() == 0:
                pass
            elif isinstance(c, (bool, int, float)):
                c = torch.tensor(c)
            else:
                return Comparison(False, f"{tag}: expected a scalar, got {type(c).__name__}")
        elif not isinstance(c, torch.Tensor):
            return Comparison(False, f"{tag}: expected a tensor, got {type(c).__name__}")
        if tuple(c.shape) != tuple(n.shape):
            return Comparison(False, f"{tag}: shape {tuple(c.shape)}, expected {tuple(n.shape)}")
        if c.dtype != n.dtype:
            return Comparison(False, f"{tag}: dtype {c.dtype}, expected {n.dtype}")
        one = _compare_one(c, r, n, tag, override)
        if not one.passed:
            return one
        worst = Comparison(True, "", max(worst.max_abs_err, one.max_abs_err),
                           max(worst.max_rel_err, one.max_rel_err),
                           max(worst.rmse, one.rmse), max(worst.ref_rmse, one.ref_rmse))
    return worst


CHUNK = 1 << 26  # elements compared at a time (bounded float64 temporaries on the GPU)
#: Elements a time where the float64 reference is in host memory and the outputs on the GPU
#: (its chunks are streamed there: less room is left, the float64 pass having had none).
STREAM_CHUNK = 1 << 24


def _compare_one(c: Any, r: Any, n: Any, tag: str,
                 override: Mapping[str, float] | None) -> Comparison:
    """One output compared, on the GPU where the candidate's output is there: a float64
    reference in host memory (the GPU had no room for the float64 pass) is streamed to it a
    chunk at a time, since the same arithmetic in host memory took ~60 s an output of 1.6 G
    elements on the GPU machine's CPUs, eleven times an evaluation (KernelBench L1 25 on the
    H100: one evaluation past 15 minutes); in host memory only where the GPU has no room
    even for that."""
    import torch

    if c.is_cuda and not r.is_cuda:
        try:
            return _compare_on(c, r, n, tag, override, c.device, STREAM_CHUNK)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
    return _compare_on(c, r, n, tag, override, r.device, CHUNK)


def _compare_on(c: Any, r: Any, n: Any, tag: str, override: Mapping[str, float] | None,
                dev: Any, chunk: int) -> Comparison:
    import torch

    dtype = str(n.dtype).removeprefix("torch.")
    if not (n.is_floating_point() or n.is_complex()):
        c, n = c.to(dev), n.to(dev)
        if torch.equal(c, n):
            return Comparison(True, "")
        bad = int((c != n).sum().item())
        return Comparison(False, f"{tag}: {bad} of {n.numel()} elements differ (exact match required)")
    atol, rtol = tolerance_for(dtype, override)
    cf, rf, nf = c.reshape(-1), r.reshape(-1), n.reshape(-1)
    max_abs = max_rel = ref_max = 0.0
    sq = ref_sq = 0.0
    r_sq = r_max = 0.0  # the float64 reference's own sum of squares and largest magnitude
    n_fin = n_bad = n_alone_bad = 0
    worst = (0.0, 0.0, 0.0)  # (diff, got, expected)
    for lo in range(0, cf.numel(), chunk):
        c64 = cf[lo:lo + chunk].to(dev, torch.float64)
        r64 = rf[lo:lo + chunk].to(dev, torch.float64)
        nc = nf[lo:lo + chunk].to(dev)  # in its own dtype: float64 only where compared
        # NaN / Inf must sit exactly where the float64 reference has them, with the reference
        # rounded to the output's dtype first: a value beyond that dtype's range is an Inf any
        # correct kernel of that dtype produces (a long cumprod overflowing fp32, say).
        r_out = r64.to(n.dtype).to(torch.float64) if n.dtype != torch.float64 else r64
        # At the edge of the output dtype's range, the summation order decides whether a
        # value rounds to the largest finite number or overflows (found on the H200: an fp16
        # matmul of 1e3-scaled inputs, 2 of 4M elements): there either is right.
        edge = _overflow_edge(r64, n.dtype)
        for name, fn in (("NaN", torch.isnan), ("+Inf", torch.isposinf), ("-Inf", torch.isneginf)):
            mc, mr = fn(c64), fn(r64 if name == "NaN" else r_out)
            if name != "NaN" and edge is not None:
                mc, mr = mc & ~edge, mr & ~edge
            # Where the task's own reference in the output's dtype has this value and the
            # float64 one a finite value, the dtype's arithmetic left its range on the way (a
            # cumprod of randn + 3 past fp32's largest value, then back under it through a
            # factor near zero: found on the H100, KernelBench level 1 problem 90): the
            # candidate may have it too.
            extra = mc & ~mr & ~fn(nc)
            missing = mr & ~mc
            if bool(extra.any()) or bool(missing.any()):
                return Comparison(False, f"{tag}: {name} mismatch ({int(extra.sum().item())} "
                                  f"unexpected, {int(missing.sum().item())} missing)")
        fin = torch.isfinite(r_out) & torch.isfinite(c64)
        if edge is not None:
            fin = fin & ~edge
        # The task's own reference measures how accurate its dtype can be only where it is
        # finite itself; elsewhere the tolerance alone decides.
        alone = fin & ~torch.isfinite(nc)
        if bool(alone.any()):
            d = (c64[alone] - r64[alone]).abs()
            n_alone_bad += int((d > atol + rtol * r64[alone].abs()).sum().item())
            fin = fin & ~alone
        c64, r64 = c64[fin], r64[fin]
        if not c64.numel():
            continue
        n64 = nc[fin].to(torch.float64)
        diff = (c64 - r64).abs()
        ndiff = (n64 - r64).abs()
        n_fin += c64.numel()
        sq += float((diff * diff).sum().item())
        ref_sq += float((ndiff * ndiff).sum().item())
        ref_max = max(ref_max, float(ndiff.max().item()))
        r_sq += float((r64 * r64).sum().item())
        r_max = max(r_max, float(r64.abs().max().item()))
        k = int(torch.argmax(diff).item())
        if float(diff[k]) >= worst[0]:
            worst = (float(diff[k]), float(c64[k]), float(r64[k]))
        max_abs = max(max_abs, worst[0])
        max_rel = max(max_rel, float((diff / r64.abs().clamp_min(1e-30)).max().item()))
        n_bad += int((diff > atol + rtol * r64.abs()).sum().item())
    if n_alone_bad:
        return Comparison(
            False, f"{tag}: {n_alone_bad} elements outside atol={atol:g} rtol={rtol:g} where the "
            f"task's own {dtype} reference is not finite", max_abs, max_rel)
    if n_fin == 0:
        return Comparison(True, "")
    rmse, ref_rmse = math.sqrt(sq / n_fin), math.sqrt(ref_sq / n_fin)
    if n_bad == 0:
        return Comparison(True, "", max_abs, max_rel, rmse, ref_rmse)
    rmse_bound, max_bound = fallback_bounds(n.dtype, ref_rmse, ref_max,
                                            math.sqrt(r_sq / n_fin), r_max)
    if rmse <= rmse_bound + atol / 100 and max_abs <= max_bound + atol:
        return Comparison(True, "", max_abs, max_rel, rmse, ref_rmse)
    return Comparison(
        False,
        f"{tag}: {n_bad} of {n_fin} elements outside atol={atol:g} rtol={rtol:g}; "
        f"max abs err {max_abs:.3e} (got {worst[1]:.6g}, expected {worst[2]:.6g}; bound "
        f"{max_bound:.3e}); rmse {rmse:.3e} vs the task's own {dtype} reference "
        f"{ref_rmse:.3e} (bound {rmse_bound:.3e})",
        max_abs, max_rel, rmse, ref_rmse,
    )


def fallback_bounds(dtype: Any, ref_rmse: float, ref_max: float, r_rms: float,
                    r_max: float) -> tuple[float, float]:
    """(rmse bound, max error bound) of the fallback, before atol is added: ``K_RMSE`` /
    ``K_MAX`` times the native reference's errors, or ``FP32_STEPS`` fp32 rounding steps of
    the float64 reference's rms / largest magnitude where that is more (not for float64
    outputs)."""
    import torch

    rmse_bound, max_bound = K_RMSE * ref_rmse, K_MAX * ref_max
    if dtype != torch.float64:
        step = FP32_STEPS * torch.finfo(torch.float32).eps
        rmse_bound, max_bound = max(rmse_bound, step * r_rms), max(max_bound, step * r_max)
    return rmse_bound, max_bound


def _overflow_edge(r64: Any, dtype: Any) -> Any:
    """Elements whose float64 reference lies within a few rounding steps of the largest
    finite value of ``dtype`` (None for dtypes without a float range)."""
    import torch

    if not dtype.is_floating_point or dtype == torch.float64:
        return None
    fi = torch.finfo(dtype)
    a = r64.abs()
    return (a >= fi.max * (1.0 - 4 * fi.eps)) & (a <= fi.max * (1.0 + 4 * fi.eps))
