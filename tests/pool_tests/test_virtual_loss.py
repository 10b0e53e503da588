"""Virtual loss: the pure function, its properties, and the tree cache that applies it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutegen.search._params import SearchParams
from cutegen.search._policy import ChildStats, RewardParams, select_child, uct_score, virtual_loss
from cutegen.search._tree import ResultFact, TreeCache, rebuild_stats

PARAMS = RewardParams()
P = SearchParams(expensive=None)

stats = st.builds(lambda n, q: ChildStats(n, n * q), st.integers(0, 50),
                  st.floats(0.0, 1.0, allow_nan=False))
values = st.floats(0.0, 1.0, allow_nan=False)


@given(stats, values)
def test_nothing_in_flight_is_the_identity(s, v):
    assert virtual_loss(s, in_flight=0, value=v) == s


@given(stats, st.integers(0, 20), values)
def test_adds_visits_and_value_exactly(s, k, v):
    out = virtual_loss(s, in_flight=k, value=v)
    assert out.visits == s.visits + k and out.value_sum == s.value_sum + k * v


@given(stats, st.integers(0, 20), st.floats(0.05, 3.0), st.integers(1, 500))
def test_a_loss_never_raises_the_uct_score(s, k, c, parent):
    """At a fixed parent count, pending losses (value <= q) only lower a child's score."""
    if s.visits == 0:
        return
    for v in (0.0, s.q):
        before = uct_score(s, parent_visits=parent, c=c)
        after = uct_score(virtual_loss(s, in_flight=k, value=v), parent_visits=parent, c=c)
        assert after <= before + 1e-12
        assert virtual_loss(s, in_flight=k, value=v).q <= s.q + 1e-12


@given(st.lists(st.tuples(st.integers(1, 10), st.floats(0.0, 1.0)), min_size=2, max_size=5),
       st.floats(0.5, 1.5))
@settings(max_examples=60, deadline=None)
def test_repeated_selection_with_virtual_loss_diversifies(children, c):
    """Picking by UCT and putting a loss on each pick reaches a second child."""
    base = [ChildStats(n, n * q) for n, q in children]
    parent = sum(n for n, _ in children) + 1
    pending = [0] * len(base)
    picked = set()
    for _ in range(5000):
        eff = [virtual_loss(b, in_flight=k, value=0.0) for b, k in zip(base, pending, strict=True)]
        i = select_child(eff, parent_visits=parent, c=c)
        picked.add(i)
        pending[i] += 1
        if len(picked) >= 2:
            break
    assert len(picked) >= 2


def test_rejects_bad_arguments():
    with pytest.raises(ValueError):
        virtual_loss(ChildStats(1, 0.5), in_flight=-1, value=0.0)
    with pytest.raises(ValueError):
        virtual_loss(ChildStats(1, 0.5), in_flight=1, value=1.5)


def _tree(data):
    """A random tree: node k's parent is one of the earlier nodes or the root."""
    parents, rewards = data
    edges = [(k + 1, None if p == 0 else p) for k, p in enumerate(parents)]
    tree = TreeCache(params=PARAMS, dead_end_m=1000)
    for n, p in edges:
        tree.add_node(n, p, "cheap")
    done = {}
    for (n, _), r in zip(edges, rewards, strict=True):
        if r is not None:
            tree.add_result(ResultFact(n, r, True, None))
            done[n] = r
    return tree, edges, done


trees = st.integers(1, 25).flatmap(lambda n: st.tuples(
    st.tuples(*[st.integers(0, k) for k in range(n)]),
    st.lists(st.one_of(st.none(), st.floats(-4.0, 2.7)), min_size=n, max_size=n)))


@given(trees, st.data(), values)
@settings(max_examples=80, deadline=None)
def test_tree_cache_applies_the_policy_and_restores_exactly(data, draw, v):
    tree, edges, done = _tree(data)
    before = {n: tree.stats(n) for n in (0, *[e[0] for e in edges])}
    flying = draw.draw(st.sets(st.sampled_from([e[0] for e in edges])))
    for n in flying:
        tree.begin(n)
        tree.begin(n)  # idempotent
    parent = {n: (0 if p is None else p) for n, p in edges}

    def under(a, n):
        while True:
            if n == a:
                return True
            if n == 0:
                return False
            n = parent[n]

    for a, real in before.items():
        k = sum(under(a, n) for n in flying)
        want = virtual_loss(ChildStats(real.visits, real.value_sum), in_flight=k, value=v)
        got = tree.effective(a, virtual_value=v)
        assert (got.visits, got.value_sum) == (want.visits, want.value_sum)
        assert tree.stats(a) == real  # the real statistics never see the pending ones
    for n in flying:
        tree.end(n)
        tree.end(n)
    assert {n: tree.effective(n, virtual_value=v) for n in before} == before
    assert tree.in_flight == frozenset()
    assert rebuild_stats(edges, done, params=PARAMS) == before


def _two_seeds():
    tree = TreeCache(params=PARAMS, dead_end_m=1000)
    for n in (1, 2):
        tree.add_node(n, None, "initial")
    tree.add_result(ResultFact(1, math.log(1.5), True, None))  # the better seed
    tree.add_result(ResultFact(2, math.log(1.2), True, None))
    return tree


def _select(tree):
    return tree.select(c=P.c, root=P.root, cheap=P.cheap, expensive=None, virtual_value=0.0)


def test_a_second_selection_goes_elsewhere_while_the_first_is_in_flight():
    tree = _two_seeds()
    first = _select(tree)
    assert (first.node_id, first.cost) == (1, "cheap")
    tree.add_node(3, 1, "cheap")
    # without counting the child in flight, the walk would widen seed 1 again
    assert _select(_copy_with_pending_child(tree, begin=False)).node_id == 1
    tree.begin(3)
    second = _select(tree)
    assert second.node_id == 2 and not second.forced


def _copy_with_pending_child(tree, *, begin):
    t = _two_seeds()
    t.add_node(3, 1, "cheap")
    if begin:
        t.begin(3)
    return t


def test_only_pending_children_mean_wait_not_force():
    tree = TreeCache(params=PARAMS, dead_end_m=1000)
    tree.add_node(1, None, "initial")
    tree.begin(1)
    # the root's only child is in flight and its widening budget is spent: wait
    assert tree.select(c=P.c, root=P.root, cheap=P.cheap, expensive=None) is None
    assert not tree.is_exhausted(0, "initial")
    tree.end(1)
    tree.add_result(ResultFact(1, 0.0, True, None))
    assert tree.select(c=P.c, root=P.root, cheap=P.cheap, expensive=None).node_id == 1
