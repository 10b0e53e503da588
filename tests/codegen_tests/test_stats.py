"""The bootstrap interval of a speedup (numba and NumPy paths agree)."""

from __future__ import annotations

import random

import pytest

from cutegen.codegen.stats import bootstrap_ratio_ci


def _samples(mu: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [mu * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(n)]


@pytest.mark.parametrize("use_numba", [True, False])
def test_interval_brackets_the_true_ratio(use_numba):
    eager, cand = _samples(300.0, 50, 1), _samples(100.0, 50, 2)
    import statistics

    observed = statistics.median(eager) / statistics.median(cand)
    lo, hi = bootstrap_ratio_ci(eager, cand, use_numba=use_numba, n_boot=4000)
    assert lo <= observed <= hi and hi - lo < 0.1 and abs(observed - 3.0) < 0.05


def test_paths_agree_and_are_deterministic():
    eager, cand = _samples(200.0, 40, 3), _samples(150.0, 40, 4)
    a = bootstrap_ratio_ci(eager, cand, seed=7)
    assert a == bootstrap_ratio_ci(eager, cand, seed=7)
    b = bootstrap_ratio_ci(eager, cand, seed=7, use_numba=False)
    assert a == pytest.approx(b, rel=0.01)


def test_bad_input():
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([], [1.0])
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0], level=1.5)
