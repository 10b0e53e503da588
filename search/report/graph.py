"""The search tree as a ``networkx.DiGraph``, for analysis and export.

Node 0 is the virtual root; every stored node carries its state, move, verdict, speedup and
reward as attributes; edges point from parent to child. ``node_link_data`` of the graph is
a plain JSON export.
"""

from __future__ import annotations

from typing import Any

import networkx as nx

from cutegen.search._node import ROOT
from cutegen.search.storage import BaseStorage


def build_graph(storage: BaseStorage, run_id: int) -> nx.DiGraph:
    """The run's tree with node attributes (see the module docstring)."""
    g = nx.DiGraph()
    g.add_node(ROOT, label="root", state="root")
    results = {r.node_id: r for r in storage.get_results(run_id)}
    pruned: dict[int, list[str]] = {}
    for p in storage.get_prunes(run_id):
        pruned.setdefault(p.node_id, []).append(p.kind)
    for n in storage.get_nodes(run_id):
        r = results.get(n.id)
        g.add_node(n.id, label=n.move.description, state=n.state.label, depth=n.depth,
                   move_kind=n.move.kind, move_key=n.move.key, sha256=n.source_sha256,
                   verdict=r.verdict.value if r else None,
                   speedup=r.speedup_eager if r else None,
                   time_us=r.time_us if r else None, reward=r.reward if r else None,
                   pruned=",".join(pruned.get(n.id, ())))
        g.add_edge(n.parent_or_root, n.id)
    g.nodes[ROOT]["pruned"] = ",".join(pruned.get(ROOT, ()))
    return g


def best_path(g: nx.DiGraph, node_id: int) -> list[int]:
    """Node ids from the root down to ``node_id``."""
    return list(nx.shortest_path(g, ROOT, node_id))


def to_json(g: nx.DiGraph) -> dict[str, Any]:
    """A JSON-able export (networkx node-link format)."""
    return dict(nx.node_link_data(g, edges="edges"))
