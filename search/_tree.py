"""Tree statistics, derived from stored facts, never mutated in the store.

Two ways to get them, which must always agree (a test checks it):

* :func:`rebuild_stats` is a pure function from (node, parent) pairs and rewards to visit
  counts and value sums; it is what "derived, not stored" means.
* :class:`TreeCache` is the in-memory incremental version the search keeps during a run.
  It is rebuilt from the store on open (:meth:`TreeCache.rebuild`) by replaying the stored
  results in commit order, so a crash in the middle of an update cannot corrupt it.

The cache also answers the one question selection asks: which node to expand next, and with
which cost class (:meth:`TreeCache.select`). In a parallel run it also knows which nodes are
in flight (claimed, not yet told: :meth:`TreeCache.begin` / :meth:`TreeCache.end`) and
selects on their virtual-loss statistics (:func:`cutegen.search._policy.virtual_loss`); with
nothing in flight, selection is exactly the serial one. The virtual root has id
:data:`~cutegen.search._node.ROOT` (0); its children are the seed candidates and its
expansion class is ``"initial"``.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cutegen.search import _policy
from cutegen.search._node import ROOT
from cutegen.search._policy import RewardParams, Widening

#: The cost class of the root's expansions (the rewriter's ``initial``).
INITIAL = "initial"


@dataclass(frozen=True, slots=True)
class NodeStats:
    """Visits and the sum of normalised rewards of a node's subtree (itself included)."""

    visits: int
    value_sum: float


@dataclass(frozen=True, slots=True)
class Selection:
    """Selection's answer: expand ``node_id`` with moves of class ``cost``."""

    node_id: int
    cost: str  # "initial" (root) | "cheap" | "expensive"
    forced: bool = False  # widened beyond the budget because nothing else was open


@dataclass(frozen=True, slots=True)
class ResultFact:
    """What the tree needs from one stored result, in commit order."""

    node_id: int
    reward: float
    expandable: bool  # the candidate succeeded, so moves may start from it
    regressed: bool | None  # failed, or slower than its parent beyond noise; None for seeds


def rebuild_stats(
    edges: Iterable[tuple[int, int | None]], rewards: Mapping[int, float], *, params: RewardParams
) -> dict[int, NodeStats]:
    """Visits and value sums of every node and of the root, from stored facts only.

    Args:
        edges: (node id, parent id or None) for every node.
        rewards: raw reward of each finished node (unfinished nodes are absent).
        params: the reward calibration (values are summed after :func:`normalize`).

    Returns:
        Stats for the root (key 0) and every node in ``edges``.
    """
    parent = {n: (ROOT if p is None else p) for n, p in edges}
    visits: Counter[int] = Counter()
    values: dict[int, float] = {}
    for n, r in rewards.items():
        v = _policy.normalize(r, params=params)
        a: int | None = n
        while a is not None:
            visits[a] += 1
            values[a] = values.get(a, 0.0) + v
            a = parent.get(a) if a != ROOT else None
    return {n: NodeStats(visits[n], values.get(n, 0.0)) for n in (ROOT, *parent)}


class TreeCache:
    """In-memory incremental tree statistics plus selection (one per running search)."""

    def __init__(self, *, params: RewardParams, dead_end_m: int) -> None:
        self._params = params
        self._m = dead_end_m
        self._parent: dict[int, int] = {}
        self._children: dict[int, list[int]] = {ROOT: []}
        self._n_by_cost: dict[int, Counter[str]] = {ROOT: Counter()}
        self._visits: dict[int, int] = {ROOT: 0}
        self._value: dict[int, float] = {ROOT: 0.0}
        self._finished: set[int] = set()
        self._expandable: set[int] = {ROOT}
        self._exhausted: dict[int, set[str]] = {}
        self._recent: dict[int, deque[bool]] = {}
        self._dead: set[int] = set()
        self._closed: set[int] = set()
        self._claimed: set[int] = set()
        self._pending: Counter[int] = Counter()  # in-flight evaluations per subtree

    # -- building -------------------------------------------------------------------
    @classmethod
    def rebuild(
        cls,
        edges: Iterable[tuple[int, int | None, str]],
        results: Iterable[ResultFact],
        exhausted: Iterable[tuple[int, str]],
        *,
        params: RewardParams,
        dead_end_m: int,
    ) -> TreeCache:
        """Replay stored facts: nodes by id, results in commit order, exhaustion marks.

        Args:
            edges: (node id, parent id or None, cost class of the move) for every node.
            results: one fact per finished node, in the order they were committed.
            exhausted: (node id or 0, cost class) marks recorded by earlier expansions.
        """
        tree = cls(params=params, dead_end_m=dead_end_m)
        for n, p, cost in sorted(edges):
            tree.add_node(n, p, cost)
        for f in results:
            tree.add_result(f)
        for n, cost in exhausted:
            tree.mark_exhausted(n, cost)
        return tree

    def add_node(self, node_id: int, parent_id: int | None, cost: str) -> None:
        """Register a new (pending) node under its parent."""
        p = ROOT if parent_id is None else parent_id
        self._parent[node_id] = p
        self._children.setdefault(p, []).append(node_id)
        self._children.setdefault(node_id, [])
        self._n_by_cost.setdefault(p, Counter())[INITIAL if p == ROOT else cost] += 1
        self._n_by_cost.setdefault(node_id, Counter())
        self._visits.setdefault(node_id, 0)
        self._value.setdefault(node_id, 0.0)

    def add_result(self, fact: ResultFact) -> list[int]:
        """Back up one result. Returns the node that became a dead end because of it (its
        parent, when the parent's last ``m`` expansions all failed or regressed), if any."""
        n = fact.node_id
        self._finished.add(n)
        if fact.expandable:
            self._expandable.add(n)
        v = _policy.normalize(fact.reward, params=self._params)
        a = n
        while True:
            self._visits[a] += 1
            self._value[a] += v
            if a == ROOT:
                break
            a = self._parent[a]
        a = self._parent[n]
        if fact.regressed is None or a == ROOT:
            return []
        recent = self._recent.setdefault(a, deque(maxlen=self._m))
        recent.append(fact.regressed)
        if a not in self._dead and _policy.is_dead_end(recent, m=self._m):
            self._dead.add(a)
            self._closed.add(a)
            return [a]
        return []

    def begin(self, node_id: int) -> None:
        """A node's evaluation is in flight: count it (virtual loss) on the node and every
        ancestor until :meth:`end`. Idempotent."""
        if node_id in self._claimed:
            return
        self._claimed.add(node_id)
        for a in self._path(node_id):
            self._pending[a] += 1

    def end(self, node_id: int) -> None:
        """A node's evaluation was told or lost: stop counting it. Idempotent."""
        if node_id not in self._claimed:
            return
        self._claimed.discard(node_id)
        for a in self._path(node_id):
            self._pending[a] -= 1
            if not self._pending[a]:
                del self._pending[a]

    def _path(self, node_id: int) -> list[int]:
        out, a = [node_id], node_id
        while a != ROOT:
            a = self._parent[a]
            out.append(a)
        return out

    def mark_exhausted(self, node_id: int, cost: str) -> None:
        """The rewriter had nothing new of this class for this node: never ask again."""
        self._exhausted.setdefault(node_id, set()).add(cost)

    # -- reading --------------------------------------------------------------------
    def stats(self, node_id: int) -> NodeStats:
        return NodeStats(self._visits[node_id], self._value[node_id])

    def effective(self, node_id: int, *, virtual_value: float) -> NodeStats:
        """The statistics selection uses: real ones plus the virtual loss of the evaluations
        in flight in the node's subtree."""
        st = _policy.virtual_loss(_policy.ChildStats(self._visits[node_id],
                                                     self._value[node_id]),
                                  in_flight=self._pending.get(node_id, 0), value=virtual_value)
        return NodeStats(st.visits, st.value_sum)

    @property
    def in_flight(self) -> frozenset[int]:
        """Nodes whose evaluation is in flight."""
        return frozenset(self._claimed)

    def children(self, node_id: int) -> tuple[int, ...]:
        return tuple(self._children.get(node_id, ()))

    @property
    def dead_ends(self) -> frozenset[int]:
        return frozenset(self._dead)

    def is_exhausted(self, node_id: int, cost: str) -> bool:
        return cost in self._exhausted.get(node_id, ())

    def __len__(self) -> int:
        return len(self._parent)

    # -- selection ------------------------------------------------------------------
    def select(
        self, *, c: float, root: Widening, cheap: Widening | None, expensive: Widening | None,
        virtual_value: float = 0.0,
    ) -> Selection | None:
        """Walk from the root by UCT to the node to expand next.

        At each node: widen if its budget allows (root: ``initial``; others: cheap first,
        then expensive); otherwise descend to the open child with the best UCT score;
        with no open child and no pending one, widen anyway with any class not exhausted;
        with nothing left, close the node (never selected again) and restart from the root.
        A node whose only unexplored children are pending (in a parallel run) is skipped
        for this walk instead: its results come back before it is widened by force.
        Visits and values are the virtual-loss ones (``virtual_value`` per evaluation in
        flight); with nothing in flight they are the real ones.

        Returns:
            The selection, or None when the whole tree is closed or only pending nodes
            are left to look at.
        """
        blocked: set[int] = set()
        while True:
            sel = self._walk(c=c, root=root, cheap=cheap, expensive=expensive, blocked=blocked,
                             virtual_value=virtual_value)
            if isinstance(sel, Selection):
                return sel
            if sel == ROOT:
                return None

    def _classes(self, v: int, cheap: Widening | None, expensive: Widening | None
                 ) -> list[str]:
        if v == ROOT:
            return [INITIAL]
        return [k for k, w in (("cheap", cheap), ("expensive", expensive)) if w is not None]

    def _walk(self, *, c: float, root: Widening, cheap: Widening | None,
              expensive: Widening | None, blocked: set[int], virtual_value: float
              ) -> Selection | int:
        v = ROOT
        pend = self._pending
        while True:
            exhausted = self._exhausted.get(v, set())
            counts = self._n_by_cost[v]
            visits = self._visits[v] + pend.get(v, 0)
            if v == ROOT:
                if INITIAL not in exhausted and _policy.should_widen(
                        n_children=counts[INITIAL], visits=visits, k=root.k, alpha=root.alpha):
                    return Selection(ROOT, INITIAL)
            else:
                cost = _policy.choose_widening(
                    visits=visits, n_cheap=counts["cheap"], n_expensive=counts["expensive"],
                    cheap=cheap, expensive=expensive, exhausted=frozenset(exhausted))
                if cost is not None:
                    return Selection(v, cost)
            # _policy.uct_score and virtual_loss inlined (the hot loop): finished children
            # have visits >= 1; k pending evaluations add k visits worth virtual_value each
            explore = c * math.sqrt(math.log(max(visits, 1)))
            best, best_score, pending = -1, float("-inf"), False
            value, nvis = self._value, self._visits
            for ch in self._children[v]:
                if ch not in self._finished:
                    pending = True
                    continue
                if ch not in self._expandable or ch in self._closed or ch in blocked:
                    continue
                k = pend.get(ch, 0)
                n = nvis[ch] + k
                s = (value[ch] + k * virtual_value) / n + explore / math.sqrt(n)
                if s > best_score:
                    best, best_score = ch, s
            if best >= 0:
                v = best
                continue
            if pending:  # only in a parallel run: wait for those results, do not force
                blocked.add(v)
                return v
            for cls in self._classes(v, cheap, expensive):
                if cls not in exhausted:
                    return Selection(v, cls, forced=True)
            self._closed.add(v)
            return v
