"""Confidence intervals for speedups, from the raw timing samples every Evaluation keeps.

A speedup is a ratio of two medians measured with noise; ``cutegen eval`` and reports print
it with a percentile-bootstrap 95% interval (both sample sets resampled independently,
10,000 times). The resampling loop is compiled with numba (the user's dependency list
includes it; this is its job here), with a NumPy fallback where numba cannot compile.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np


def _ratio_medians_py(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.choice(num, size=(n_boot, num.size), replace=True)
    b = rng.choice(den, size=(n_boot, den.size), replace=True)
    return np.median(a, axis=1) / np.median(b, axis=1)


@cache
def _compiled() -> Any:
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is a dependency; keep working without it
        return None

    @numba.njit(cache=False, nogil=True)
    def ratio_medians(num: np.ndarray, den: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
        np.random.seed(seed)
        out = np.empty(n_boot)
        a = np.empty(num.size)
        b = np.empty(den.size)
        for k in range(n_boot):
            for i in range(num.size):
                a[i] = num[np.random.randint(0, num.size)]
            for i in range(den.size):
                b[i] = den[np.random.randint(0, den.size)]
            out[k] = np.median(a) / np.median(b)
        return out

    return ratio_medians


def bootstrap_ratio_ci(numerator: Sequence[float], denominator: Sequence[float], *,
                       n_boot: int = 10_000, level: float = 0.95, seed: int = 0,
                       use_numba: bool = True) -> tuple[float, float]:
    """Percentile-bootstrap interval of ``median(numerator) / median(denominator)``.

    For a speedup over eager pass (eager samples, candidate samples).

    Raises:
        ValueError: empty samples or a level outside (0, 1).
    """
    if not numerator or not denominator:
        raise ValueError("need samples on both sides")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    fn = _compiled() if use_numba else None
    ratios = fn(num, den, n_boot, seed) if fn is not None else _ratio_medians_py(num, den, n_boot, seed)
    lo, hi = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)
