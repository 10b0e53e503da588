"""Properties of the pure MCTS math (hypothesis) and of the budget."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutegen.codegen.evaluation import Verdict
from cutegen.search import Budget, Usage
from cutegen.search._policy import (
    ChildStats,
    RewardParams,
    Widening,
    choose_widening,
    is_dead_end,
    normalize,
    reward,
    select_child,
    should_widen,
    speedup_reward,
    uct_score,
    widening_limit,
)

P = RewardParams()
visits = st.integers(min_value=1, max_value=10**6)
speedups = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False)


@given(n=st.integers(1, 10**5), parent=visits, q=st.floats(0, 1), c=st.floats(0.01, 5))
def test_exploration_shrinks_as_child_visits_grow(n, parent, q, c):
    a = uct_score(ChildStats(n, q * n), parent_visits=parent, c=c) - q
    b = uct_score(ChildStats(n + 1, q * (n + 1)), parent_visits=parent, c=c) - q
    assert b <= a + 1e-12


@given(parent=visits, c=st.floats(0, 5))
def test_exploration_bonus_vanishes(parent, c):
    big = uct_score(ChildStats(10**9, 0.5 * 10**9), parent_visits=parent, c=c)
    assert big == pytest.approx(0.5, abs=c * math.sqrt(math.log(parent) / 10**9) + 1e-9)


@given(st.lists(st.tuples(st.integers(0, 50), st.floats(0, 1)), min_size=1, max_size=20),
       visits, st.floats(0, 3))
def test_unvisited_children_are_tried_first(children, parent, c):
    stats = [ChildStats(v, q * v) for v, q in children]
    i = select_child(stats, parent_visits=parent, c=c)
    if any(s.visits == 0 for s in stats):
        assert stats[i].visits == 0
        assert i == next(k for k, s in enumerate(stats) if s.visits == 0)  # first one


@given(st.lists(st.tuples(st.integers(1, 50), st.floats(0, 1)), min_size=1, max_size=20),
       visits, st.floats(0, 3))
def test_select_child_is_argmax_first_wins(children, parent, c):
    stats = [ChildStats(v, q * v) for v, q in children]
    scores = [uct_score(s, parent_visits=parent, c=c) for s in stats]
    assert select_child(stats, parent_visits=parent, c=c) == scores.index(max(scores))


def test_select_child_needs_children():
    with pytest.raises(ValueError):
        select_child([], parent_visits=1, c=1.0)


@given(speedups)
def test_reward_bounded(s):
    r = speedup_reward(speedup=s, clip=P.clip)
    assert -P.clip <= r <= P.clip
    assert 0.0 <= normalize(r, params=P) <= 1.0


@given(speedups, speedups)
def test_reward_monotone_in_speedup(a, b):
    lo, hi = sorted((a, b))
    assert speedup_reward(speedup=lo, clip=P.clip) <= speedup_reward(speedup=hi, clip=P.clip)


@given(st.floats(min_value=1 / 15, max_value=15))
def test_reward_antisymmetric(s):
    assert speedup_reward(speedup=s, clip=P.clip) == pytest.approx(
        -speedup_reward(speedup=1 / s, clip=P.clip))


@pytest.mark.parametrize("s", [0.0, -1.0, float("nan")])
def test_reward_of_nonsense_speedup_is_the_floor_of_correct(s):
    assert speedup_reward(speedup=s, clip=P.clip) == -P.clip


@given(speedups, st.sampled_from([v for v in Verdict if not v.ok]))
def test_any_failure_ranks_below_any_correct_kernel(s, bad):
    good = reward(verdict=Verdict.CORRECT, speedup=s, params=P)
    failed = reward(verdict=bad, speedup=s, params=P)
    assert failed < good
    assert failed == P.penalties[bad.failure_kind]  # one fixed penalty per failure kind
    assert failed >= P.floor


def test_reward_calibration_values():
    assert reward(verdict=Verdict.CORRECT, speedup=2.0, params=P) == pytest.approx(math.log(2))
    assert reward(verdict=Verdict.COMPILED, speedup=None, params=P) == P.untimed
    assert reward(verdict=Verdict.CORRECT, speedup=1e9, params=P) == P.clip
    assert normalize(P.floor, params=P) == 0.0 and normalize(P.clip, params=P) == 1.0


def test_reward_params_validation():
    with pytest.raises(ValueError):
        RewardParams(clip=2.0, penalties={"compile": -1.0})  # penalty above -clip
    with pytest.raises(ValueError):
        RewardParams(clip=0.0)


@given(visits, visits, st.floats(0.1, 10), st.floats(0, 1))
def test_widening_monotone_in_visits(v1, v2, k, alpha):
    lo, hi = sorted((v1, v2))
    assert widening_limit(visits=lo, k=k, alpha=alpha) <= widening_limit(visits=hi, k=k,
                                                                           alpha=alpha)


@given(st.integers(0, 1000), visits, st.floats(0.1, 10), st.floats(0, 1))
def test_should_widen_matches_limit(n, v, k, alpha):
    assert should_widen(n_children=n, visits=v, k=k, alpha=alpha) == (
        n < math.floor(k * v**alpha + 1e-9))


def test_unvisited_node_never_widens():
    assert not should_widen(n_children=0, visits=0, k=5.0, alpha=0.5)


def test_asymmetric_branching_separate_budgets():
    cheap, expensive = Widening(k=3.0, alpha=0.5), Widening(k=1.0, alpha=0.5)
    # at 4 visits: cheap allows 6 children, expensive 2
    assert choose_widening(visits=4, n_cheap=0, n_expensive=0, cheap=cheap,
                           expensive=expensive) == "cheap"
    assert choose_widening(visits=4, n_cheap=6, n_expensive=0, cheap=cheap,
                           expensive=expensive) == "expensive"
    assert choose_widening(visits=4, n_cheap=6, n_expensive=2, cheap=cheap,
                           expensive=expensive) is None
    assert choose_widening(visits=4, n_cheap=0, n_expensive=0, cheap=cheap, expensive=expensive,
                           exhausted=frozenset({"cheap"})) == "expensive"
    assert choose_widening(visits=4, n_cheap=0, n_expensive=0, cheap=None,
                           expensive=expensive) == "expensive"
    with pytest.raises(ValueError):
        Widening(k=0, alpha=0.5)


@given(st.lists(st.booleans(), max_size=30), st.integers(1, 10))
def test_dead_end_iff_last_m_all_failed_or_regressed(recent, m):
    expected = len(recent) >= m and all(recent[-m:])
    assert is_dead_end(recent, m=m) == expected


def test_budget_first_limit_reached():
    b = Budget(max_evals=10, max_wall_s=60, max_gpu_s=30, max_usd=1.0)
    assert b.reached(Usage(evals=9, wall_s=59, gpu_s=29, usd=0.99)) is None
    assert "evaluation" in b.reached(Usage(evals=10))
    assert "GPU" in b.reached(Usage(gpu_s=30))
    assert "LLM" in b.reached(Usage(usd=1.5))
    assert "time" in b.reached(Usage(wall_s=61))
    assert Budget().reached(Usage(evals=10**9, wall_s=1e9, gpu_s=1e9, usd=1e9)) is None
    assert b.remaining(Usage(evals=4, usd=0.25)) == {"evals": 6, "wall_s": 60, "gpu_s": 30,
                                                     "usd": 0.75}
    assert Budget.from_dict(b.to_dict()) == b
    assert b.next_overruns(Usage(wall_s=50), 9.0) is None
    assert "about 11 s" in b.next_overruns(Usage(wall_s=50), 11.0)
    assert b.next_overruns(Usage(wall_s=50), None) is None  # no estimate yet: go on
    assert Budget(max_evals=3).next_overruns(Usage(wall_s=1e9), 1e9) is None
    with pytest.raises(ValueError):
        Budget(max_evals=-1)
