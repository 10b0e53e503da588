"""The statistically gated best: the Mann-Whitney U test and the gate's decisions."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutegen.codegen.evaluation import Timing
from cutegen.search._best import GateParams, gate, mann_whitney_less, worth_retiming


def _brute_force_p(new, old):
    """P(U >= u_obs) by enumerating every split of the pooled sample (exact, no ties)."""
    pooled = [*new, *old]
    n1 = len(new)

    def u(xs, ys):
        return sum((x < y) + 0.5 * (x == y) for x in xs for y in ys)

    u_obs = u(new, old)
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), n1):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        hits += u(xs, ys) >= u_obs - 1e-9
    return u_obs, hits / total


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=2, max_size=14, unique=True),
       st.integers(1, 7))
def test_exact_p_matches_enumeration(values, n1):
    n1 = min(n1, len(values) - 1)
    new, old = [float(v) for v in values[:n1]], [float(v) for v in values[n1:]]
    u, p = mann_whitney_less(new, old)
    u2, p2 = _brute_force_p(new, old)
    assert u == u2
    assert p == pytest.approx(p2)


def test_normal_approximation_close_to_exact_at_moderate_sizes():
    rng = random.Random(1)
    for _ in range(20):
        new = [rng.gauss(95, 5) for _ in range(20)]
        old = [rng.gauss(100, 5) for _ in range(20)]
        _, p_exact = mann_whitney_less(new, old)
        _, p_norm = mann_whitney_less(new + [1e9], old + [1e9])  # a tie forces the normal path
        assert abs(p_exact - p_norm) < 0.05


def test_known_extremes():
    u, p = mann_whitney_less([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert u == 9 and p == pytest.approx(1 / 20)
    u, p = mann_whitney_less([4.0, 5.0, 6.0], [1.0, 2.0, 3.0])
    assert u == 0 and p == 1.0
    u, p = mann_whitney_less([1.0] * 40, [1.0] * 40)  # all tied: no evidence
    assert p >= 0.5
    with pytest.raises(ValueError):
        mann_whitney_less([], [1.0])


def _timing(mean, n=90, sd=1.0, seed=0):
    rng = random.Random(seed)
    return Timing.from_samples([rng.gauss(mean, sd) for _ in range(n)])


def test_gate_accepts_clearly_faster():
    g = gate(old=_timing(100), new=_timing(90, seed=1), params=GateParams())
    assert g.accepted and g.p_value < 1e-6 and g.improvement == pytest.approx(0.1, abs=0.01)
    assert g.n_new == g.n_old == 90


def test_gate_keeps_older_on_ties_and_noise():
    g = gate(old=_timing(100), new=_timing(100, seed=1), params=GateParams())
    assert not g.accepted and "not significantly" in g.reason


def test_gate_needs_minimum_median_improvement():
    # significant but only 0.5 % faster
    g = gate(old=_timing(100, sd=0.1), new=_timing(99.5, sd=0.1, seed=1),
             params=GateParams(min_improvement=0.01))
    assert g.p_value < 0.05 and not g.accepted and "only" in g.reason


def test_gate_retiming_failures():
    assert not gate(old=_timing(100), new=None, params=GateParams()).accepted
    assert gate(old=None, new=_timing(100), params=GateParams()).accepted


def test_false_acceptance_rate_is_about_alpha():
    """Same distribution: the gate must accept (a false positive) at most ~alpha of the time."""
    rng = random.Random(7)
    accepted = 0
    for _ in range(400):
        old = Timing.from_samples([rng.lognormvariate(4.6, 0.05) for _ in range(30)])
        new = Timing.from_samples([rng.lognormvariate(4.6, 0.05) for _ in range(30)])
        accepted += gate(old=old, new=new, params=GateParams(min_improvement=0.0)).accepted
    assert accepted / 400 < 0.09


def test_worth_retiming_prefilter():
    assert worth_retiming(best_speedup=2.0, best_time_us=None, new_speedup=2.1,
                          new_time_us=None, min_improvement=0.01)
    assert not worth_retiming(best_speedup=2.0, best_time_us=None, new_speedup=2.01,
                              new_time_us=None, min_improvement=0.01)
    assert worth_retiming(best_speedup=None, best_time_us=100.0, new_speedup=None,
                          new_time_us=98.0, min_improvement=0.01)
    assert not worth_retiming(best_speedup=None, best_time_us=None, new_speedup=None,
                              new_time_us=None, min_improvement=0.01)
