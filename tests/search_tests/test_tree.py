"""Tree statistics and selection: golden trees (hand-computed JSON fixtures) and properties."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cutegen.search._policy import ChildStats as CS
from cutegen.search._policy import RewardParams, Widening, uct_score
from cutegen.search._tree import ResultFact, Selection, TreeCache, rebuild_stats

DATA = Path(__file__).resolve().parents[1] / "data" / "search"
GOLDEN = sorted(DATA.glob("golden_tree_*.json"))


def _load(path: Path):
    g = json.loads(path.read_text())
    p = g["params"]
    reward = RewardParams(clip=p["clip"], penalties={k: p["penalty"] for k in
                                                     ("static", "compile", "wrong", "crash",
                                                      "timeout", "cheat")})
    widen = {k: (Widening(*p[k]) if p[k] else None) for k in ("root", "cheap", "expensive")}
    facts = [ResultFact(r["node"], r["reward"], r["expandable"], r["regressed"])
             for r in g["results"]]
    edges = [(n["id"], n["parent"], n["cost"]) for n in g["nodes"]]
    return g, p, reward, widen, facts, edges


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_tree(path):
    g, p, reward, widen, facts, edges = _load(path)
    exp = g["expected"]
    stats = rebuild_stats([(n, par) for n, par, _ in edges],
                          {f.node_id: f.reward for f in facts}, params=reward)
    assert {str(k): [v.visits, pytest.approx(v.value_sum)] for k, v in stats.items()} == \
        exp["stats"]
    tree = TreeCache.rebuild(edges, facts, [tuple(x) for x in g["exhausted"]], params=reward,
                             dead_end_m=p["dead_end_m"])
    for k, (v, s) in exp["stats"].items():
        assert tree.stats(int(k)).visits == v and tree.stats(int(k)).value_sum == \
            pytest.approx(s)
    assert sorted(tree.dead_ends) == exp["dead_ends"]
    sel = tree.select(c=p["c"], **widen)
    want = exp["selection"]
    assert sel == (Selection(want["node"], want["cost"], want["forced"]) if want else None)


def test_golden_fixtures_exist():
    assert len(GOLDEN) >= 3


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 60))
def test_incremental_cache_agrees_with_rebuild(seed, n):
    rng = random.Random(seed)
    params = RewardParams()
    tree = TreeCache(params=params, dead_end_m=3)
    edges, rewards, facts = [], {}, []
    for i in range(1, n + 1):
        parent = rng.choice([None, *range(1, i)])
        edges.append((i, parent, "cheap"))
        tree.add_node(i, parent, "cheap")
    order = list(range(1, n + 1))
    rng.shuffle(order)
    for i in order:
        r = rng.uniform(-4, 3)
        rewards[i] = r
        f = ResultFact(i, r, rng.random() < 0.7, rng.choice([None, True, False]))
        facts.append(f)
        tree.add_result(f)
    expected = rebuild_stats([(a, b) for a, b, _ in edges], rewards, params=params)
    replayed = TreeCache.rebuild(edges, facts, [], params=params, dead_end_m=3)
    for k, v in expected.items():
        assert tree.stats(k).visits == v.visits == replayed.stats(k).visits
        assert tree.stats(k).value_sum == pytest.approx(v.value_sum)
    assert tree.dead_ends == replayed.dead_ends


def _chain_tree(m=8):
    params = RewardParams()
    t = TreeCache(params=params, dead_end_m=m)
    t.add_node(1, None, "cheap")
    t.add_result(ResultFact(1, 0.0, True, None))
    return t


def test_unvisited_node_cannot_widen_but_pending_blocks_closure():
    t = _chain_tree()
    w = Widening(1.0, 0.5)
    t.mark_exhausted(0, "initial")
    t.add_node(2, 1, "cheap")  # pending child of 1 (WAITING)
    t.mark_exhausted(1, "cheap")
    assert t.select(c=1.0, root=w, cheap=w, expensive=None) is None  # nothing to do now
    t.add_result(ResultFact(2, 0.5, True, True))
    sel = t.select(c=1.0, root=w, cheap=w, expensive=None)
    assert sel == Selection(2, "cheap", False)  # node 1 was not closed while 2 was pending


def test_forced_widening_when_no_open_child():
    t = _chain_tree()
    w = Widening(1.0, 0.5)
    t.add_node(2, 1, "cheap")
    t.add_result(ResultFact(2, -3.0, False, False))  # 1 has 2 visits: limit 1, one child
    t.mark_exhausted(0, "initial")
    assert t.select(c=1.0, root=w, cheap=w, expensive=None) == Selection(1, "cheap", True)
    t.mark_exhausted(1, "cheap")
    assert t.select(c=1.0, root=w, cheap=w, expensive=Widening(1.0, 0.2)) == \
        Selection(1, "expensive", False)  # 2 visits: the expensive budget allows one child
    t.mark_exhausted(1, "expensive")
    assert t.select(c=1.0, root=w, cheap=w, expensive=Widening(1.0, 0.2)) is None


def test_ties_break_by_creation_order():
    t = _chain_tree()
    w = Widening(1.0, 0.5)
    for i in (2, 3, 4):
        t.add_node(i, 1, "cheap")
        t.add_result(ResultFact(i, 0.25, True, False))
    t.mark_exhausted(0, "initial")
    t.mark_exhausted(1, "cheap")
    assert t.select(c=1.0, root=w, cheap=w, expensive=None).node_id == 2


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32))
def test_selection_descends_by_uct(seed):
    """Below a seed that may not widen, the walk enters the UCT-argmax child of the seed."""
    rng = random.Random(seed)
    t = TreeCache(params=RewardParams(), dead_end_m=10**6)
    t.add_node(1, None, "cheap")
    t.add_result(ResultFact(1, 0.0, True, None))
    kids = []
    for i in range(2, 2 + rng.randint(1, 8)):
        t.add_node(i, 1, "cheap")
        t.add_result(ResultFact(i, rng.uniform(-2, 2), True, False))
        for j in range(rng.randint(0, 3)):  # failed grandchildren change the visit counts
            g = 100 * i + j
            t.add_node(g, i, "cheap")
            t.add_result(ResultFact(g, rng.uniform(-4, 2), False, False))
        kids.append(i)
    t.mark_exhausted(0, "initial")
    one_child = Widening(1.0, 0.0)  # every node may have exactly one child
    sel = t.select(c=0.7, root=one_child, cheap=one_child, expensive=None)
    parent_visits = t.stats(1).visits
    scores = [uct_score(CS(t.stats(k).visits, t.stats(k).value_sum),
                        parent_visits=parent_visits, c=0.7) for k in kids]
    assert sel is not None and sel.node_id == kids[scores.index(max(scores))]
