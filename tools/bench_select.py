"""Selection overhead as the tree grows: prints numbers, it is not a test.

    python tools/bench_select.py [--nodes 10000] [--search]

Part 1 times :meth:`TreeCache.select` alone while a synthetic search grows the tree (each
iteration selects, adds a child where selection says, and backs up a random reward).
Part 2 (``--search``) times whole :class:`~cutegen.search.Search` iterations (select,
expand, claim, evaluate with the fake evaluator, commit) on the in-memory store, which is
the search's own overhead without any GPU work. Both print microseconds per iteration at
several tree sizes; flat numbers mean the search does not slow down as it grows.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from cutegen.search._node import ROOT
from cutegen.search._params import SearchParams
from cutegen.search._tree import ResultFact, TreeCache

CHECKPOINTS = (100, 1_000, 3_000, 10_000, 30_000)


def bench_select(n_nodes: int, *, seed: int = 0, window: int = 500) -> dict[int, float]:
    """Median microseconds per ``select`` call around each checkpoint up to ``n_nodes``."""
    p = SearchParams(expensive=None)
    rng = random.Random(seed)
    tree = TreeCache(params=p.reward, dead_end_m=10**9)  # no pruning: worst case, all open
    times: list[float] = []
    out: dict[int, float] = {}
    for i in range(1, n_nodes + 1):
        t0 = time.perf_counter()
        sel = tree.select(c=p.c, root=p.root, cheap=p.cheap, expensive=p.expensive)
        times.append(time.perf_counter() - t0)
        assert sel is not None
        tree.add_node(i, None if sel.node_id == ROOT else sel.node_id, "cheap")
        ok = rng.random() > 0.2
        tree.add_result(ResultFact(i, rng.uniform(-1, 1) if ok else -3.0, ok,
                                   None if sel.node_id == ROOT else rng.random() < 0.3))
        if i in CHECKPOINTS:
            out[i] = statistics.median(times[-window:]) * 1e6
    return out


def bench_search(n_nodes: int, *, sqlite: Path | None = None) -> dict[int, float]:
    """Median microseconds per whole Search iteration (fake evaluator; in-memory store, or
    a fresh SQLite store at ``sqlite``: then the fsync per commit dominates)."""
    from cutegen.codegen.tasks import Task
    from cutegen.search import Search
    from cutegen.search.storage import BaseStorage, InMemoryStorage, RunConfig, SqliteStorage
    from cutegen.testing import FakeEvaluator, FakeRewriter, fake_candidate

    storage: BaseStorage = InMemoryStorage() if sqlite is None else SqliteStorage(sqlite)
    task = Task("bench", Path("bench.py"), "class Model: pass\n")
    run = storage.create_run("bench", RunConfig(task.name, "bench.py", task.sha256, seed=1))
    rewriter = FakeRewriter([fake_candidate({"a": 1}, {"a": [1, 2]})])
    search = Search(storage=storage, run=run, task=task, evaluator=FakeEvaluator(),
                    rewriter=rewriter, params=SearchParams(expensive=None, dead_end_m=10**6),
                    heartbeat=False)
    search.open()
    times: list[float] = []
    out: dict[int, float] = {}
    for i in range(1, n_nodes + 1):
        t0 = time.perf_counter()
        if search.step() is None:
            break
        times.append(time.perf_counter() - t0)
        if i in CHECKPOINTS:
            out[i] = statistics.median(times[-500:]) * 1e6
    search.close()
    storage.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--search", action="store_true", help="also time whole Search iterations")
    ap.add_argument("--sqlite", type=Path, default=None,
                    help="with --search: use a new SQLite store at this path")
    a = ap.parse_args()
    print(f"TreeCache.select, median us per call (window of 500) up to {a.nodes} nodes:")
    for n, us in bench_select(a.nodes).items():
        print(f"  {n:>6} nodes: {us:8.1f} us")
    if a.search:
        where = f"SQLite store {a.sqlite}" if a.sqlite else "in-memory store"
        print(f"Search.step (select+expand+claim+fake evaluate+commit, {where}):")
        for n, us in bench_search(a.nodes, sqlite=a.sqlite).items():
            print(f"  {n:>6} nodes: {us:8.1f} us")


if __name__ == "__main__":
    main()
