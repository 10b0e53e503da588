"""Inline SVG for run reports, written by hand: no plotting library needed.

* :func:`progress_chart`: the gated best's speedup (a step line) and every timed
  candidate's speedup (dots) against evaluations or GPU-minutes; failures are marks on the
  x axis.
* :func:`tree_layout` / :func:`graphviz_layout`: node positions of the search tree, from a
  plain layered layout (leaves left to right in depth-first order, parents centred over
  their children) or from Graphviz ``dot`` when it is installed.
* :func:`tree_svg`: the tree drawn from a layout, coloured by verdict, the path to the
  reported node marked.
* :func:`strip_svg`: one provider's timing samples as dots, with p10 / median / p90.

All functions are pure (``graphviz_layout`` runs ``dot``); text is escaped.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import networkx as nx

from cutegen.codegen.evaluation import Timing
from cutegen.search._node import ROOT

#: Fill colour per verdict (and per state for nodes not evaluated yet).
COLORS = {
    "correct": "#2f9e5b", "compiled": "#3f83c8", "suspicious": "#e0a100",
    "compile_error": "#e8833a", "compile_timeout": "#e8833a", "static_reject": "#b7793f",
    "wrong": "#d64545", "wrong_type": "#d64545", "input_modified": "#d64545",
    "aliased_output": "#d64545", "nondeterministic": "#d64545", "decoy": "#8b1e1e",
    "library_call": "#8b1e1e", "thread_spawned": "#8b1e1e", "crash": "#8e5bd6",
    "timeout": "#8e5bd6", "oom": "#8e5bd6", "resource_limit": "#8e5bd6",
    "waiting": "#d0d0d0", "running": "#a0a0a0", "failed": "#777777", "root": "#ffffff",
}
PATH_COLOR = "#1f4fd1"
_FONT = "font-family='system-ui, sans-serif'"


def color_of(verdict: str | None, state: str) -> str:
    return COLORS.get(verdict or state, "#999999")


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt_tick(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"


def progress_chart(xs: Sequence[float], speedups: Sequence[float | None],
                   best: Sequence[float | None], ok: Sequence[bool], *, x_label: str,
                   title: str, width: int = 620, height: int = 280) -> str:
    """Best speedup so far (step line) and each candidate's speedup (dots) against ``xs``.

    Args:
        xs: x of each evaluation (evaluation count or cumulative GPU-minutes), increasing.
        speedups: each evaluation's speedup vs eager (None when not timed).
        best: the gated best's speedup after each evaluation (None before the first).
        ok: whether each evaluation succeeded (failures are drawn as red marks on the axis).
    """
    ys = [y for y in (*speedups, *best) if y is not None]
    head = (f"<svg class='chart' viewBox='0 0 {width} {height}' role='img' "
            f"aria-label='{escape(title)}' xmlns='http://www.w3.org/2000/svg' {_FONT}>"
            f"<text x='{width / 2}' y='16' font-size='13' text-anchor='middle' "
            f"font-weight='600'>{escape(title)}</text>")
    if not xs or not ys:
        return (head + f"<text x='{width / 2}' y='{height / 2}' text-anchor='middle' "
                "font-size='12' fill='#666'>no timed evaluation yet</text></svg>")
    left, right, top, bottom = 52, 16, 28, 44
    x0, x1 = 0.0, max(xs) * 1.02 or 1.0
    y0, y1 = min(ys), max(ys)
    pad = max(0.05 * (y1 - y0), 0.02 * y1, 1e-3)
    y0, y1 = max(0.0, y0 - pad), y1 + pad

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def py(y: float) -> float:
        return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)

    parts = [head]
    for t in nice_ticks(y0, y1):
        parts.append(f"<line x1='{left}' x2='{width - right}' y1='{py(t):.1f}' y2='{py(t):.1f}' "
                     f"stroke='#eee'/><text x='{left - 6}' y='{py(t) + 4:.1f}' font-size='11' "
                     f"text-anchor='end' fill='#555'>{_fmt_tick(t)}x</text>")
    for t in nice_ticks(x0, x1, 6):
        parts.append(f"<line x1='{px(t):.1f}' x2='{px(t):.1f}' y1='{height - bottom}' "
                     f"y2='{height - bottom + 4}' stroke='#888'/><text x='{px(t):.1f}' "
                     f"y='{height - bottom + 16}' font-size='11' text-anchor='middle' "
                     f"fill='#555'>{_fmt_tick(t)}</text>")
    parts.append(f"<line x1='{left}' x2='{width - right}' y1='{height - bottom}' "
                 f"y2='{height - bottom}' stroke='#888'/><text x='{(left + width - right) / 2}' "
                 f"y='{height - 8}' font-size='12' text-anchor='middle'>{escape(x_label)}</text>"
                 f"<text x='14' y='{(top + height - bottom) / 2}' font-size='12' "
                 f"text-anchor='middle' transform='rotate(-90 14 {(top + height - bottom) / 2})'>"
                 "speedup vs eager</text>")
    if y0 <= 1.0 <= y1:
        parts.append(f"<line x1='{left}' x2='{width - right}' y1='{py(1.0):.1f}' "
                     f"y2='{py(1.0):.1f}' stroke='#999' stroke-dasharray='4 3'/>")
    for x, s, good in zip(xs, speedups, ok, strict=True):
        if s is not None:
            parts.append(f"<circle cx='{px(x):.1f}' cy='{py(s):.1f}' r='3' fill='#2f9e5b' "
                         f"fill-opacity='0.45'><title>{s:.3f}x</title></circle>")
        elif not good:
            parts.append(f"<line x1='{px(x):.1f}' x2='{px(x):.1f}' y1='{height - bottom - 7}' "
                         f"y2='{height - bottom}' stroke='#d64545' stroke-width='2'/>")
    pts: list[str] = []
    last: float | None = None
    for x, b in zip(xs, best, strict=True):
        if b is None:
            continue
        if last is not None:
            pts.append(f"{px(x):.1f},{py(last):.1f}")
        pts.append(f"{px(x):.1f},{py(b):.1f}")
        last = b
    if pts:
        pts.append(f"{px(x1):.1f},{py(last or 0):.1f}")
        parts.append(f"<polyline points='{' '.join(pts)}' fill='none' stroke='{PATH_COLOR}' "
                     "stroke-width='2.2'/>")
    return "".join(parts) + "</svg>"


@dataclass(frozen=True, slots=True)
class Layout:
    """Node centres in pixels, the canvas size, and which engine placed them."""

    pos: dict[int, tuple[float, float]]
    width: float
    height: float
    engine: str


def tree_layout(g: nx.DiGraph, *, dx: float = 34.0, dy: float = 64.0,
                max_width: float = 1300.0) -> Layout:
    """A layered layout: depth gives the row, leaves sit left to right in depth-first order
    (children by id), and each parent is centred over its first and last child."""
    leaves = sum(1 for n in g if g.out_degree(n) == 0) or 1
    dx = min(dx, max(6.0, (max_width - 40) / leaves))
    pos: dict[int, tuple[float, float]] = {}
    slot = 0
    stack: list[tuple[int, int, bool]] = [(ROOT, 0, False)]
    while stack:  # iterative post-order, so deep trees cannot hit the recursion limit
        n, depth, done = stack.pop()
        kids = sorted(g.successors(n))
        if not kids:
            pos[n] = (20 + dx * (slot + 0.5), 24 + depth * dy)
            slot += 1
        elif done:
            pos[n] = ((pos[kids[0]][0] + pos[kids[-1]][0]) / 2, 24 + depth * dy)
        else:
            stack.append((n, depth, True))
            stack.extend((k, depth + 1, False) for k in reversed(kids))
    height = max(y for _, y in pos.values()) + 40
    return Layout(pos, 40 + dx * slot, height, "layered")


def graphviz_layout(g: nx.DiGraph, *, timeout_s: float = 30.0) -> Layout | None:
    """Positions from Graphviz ``dot -Tplain``, or None when dot is absent or fails."""
    exe = shutil.which("dot")
    if exe is None:
        return None
    lines = ["digraph T {", "graph [rankdir=TB, nodesep=0.12, ranksep=0.55];",
             'node [shape=circle, width=0.32, fixedsize=true, label=""];']
    lines += [f"n{n};" for n in sorted(g)]
    lines += [f"n{a} -> n{b};" for a, b in sorted(g.edges)]
    lines.append("}")
    try:
        out = subprocess.run([exe, "-Tplain"], input="\n".join(lines), capture_output=True,
                             text=True, timeout=timeout_s, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    scale, pos, width, height = 72.0, {}, 0.0, 0.0
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "graph" and len(f) >= 4:
            width, height = float(f[2]) * scale, float(f[3]) * scale
        elif f and f[0] == "node" and len(f) >= 4 and f[1].startswith("n"):
            pos[int(f[1][1:])] = (float(f[2]) * scale, float(f[3]) * scale)
    if set(pos) != set(g) or width <= 0:
        return None
    pad = 24.0
    pos = {n: (x + pad, height - y + pad) for n, (x, y) in pos.items()}
    return Layout(pos, width + 2 * pad, height + 2 * pad, "graphviz dot")


def tree_svg(g: nx.DiGraph, layout: Layout, path: Sequence[int]) -> str:
    """The search tree: one circle per node coloured by verdict, the path to the reported
    node drawn thick with speedups beside it, its last node ringed, dead ends dashed; hover
    shows details."""
    on_path = set(path)
    path_edges = set(zip(path, path[1:], strict=False))
    pos = layout.pos
    rows: dict[int, list[float]] = {}
    for x, y in pos.values():
        rows.setdefault(round(y), []).append(x)
    spacing = min((b - a for xs in rows.values() for a, b in
                   zip(sorted(xs), sorted(xs)[1:], strict=False)), default=34.0)
    r = max(3.0, min(11.0, spacing * 0.4))
    parts = [f"<svg class='tree' viewBox='0 0 {layout.width:.0f} {layout.height:.0f}' "
             f"width='{layout.width:.0f}' xmlns='http://www.w3.org/2000/svg' {_FONT}>"]
    for a, b in sorted(g.edges, key=lambda e: (e in path_edges, e)):
        (xa, ya), (xb, yb) = pos[a], pos[b]
        hot = (a, b) in path_edges
        mid = (ya + yb) / 2
        parts.append(f"<path d='M{xa:.1f},{ya + r:.1f} C{xa:.1f},{mid:.1f} {xb:.1f},{mid:.1f} "
                     f"{xb:.1f},{yb - r:.1f}' fill='none' "
                     f"stroke='{PATH_COLOR if hot else '#c4c4c4'}' "
                     f"stroke-width='{3 if hot else 1.2}'/>")
    target = path[-1] if path else None
    for n in sorted(g, key=lambda n: (n in on_path, n)):
        x, y = pos[n]
        a = g.nodes[n]
        if n == ROOT:
            parts.append(f"<rect x='{x - 18:.1f}' y='{y - 10:.1f}' width='36' height='20' "
                         f"rx='4' fill='#fff' stroke='#555'/><text x='{x:.1f}' y='{y + 4:.1f}' "
                         "font-size='10' text-anchor='middle'>task</text>")
            continue
        sp = a.get("speedup")
        tip = (f"node {n}: {a.get('label', '')} | {a.get('verdict') or a.get('state')}"
               + (f" | {sp:.3f}x vs eager" if sp else "")
               + (f" | {a['time_us']:.2f} us" if a.get("time_us") else "")
               + (f" | pruned: {a['pruned']}" if a.get("pruned") else ""))
        dash = " stroke-dasharray='2 2'" if "dead_end" in (a.get("pruned") or "") else ""
        parts.append(f"<g><title>{escape(tip)}</title>")
        if n == target:
            parts.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{r + 4:.1f}' fill='none' "
                         f"stroke='{PATH_COLOR}' stroke-width='2.5'/>")
        parts.append(f"<circle cx='{x:.1f}' cy='{y:.1f}' r='{r:.1f}' "
                     f"fill='{color_of(a.get('verdict'), a.get('state', ''))}' "
                     f"stroke='{PATH_COLOR if n in on_path else '#555'}' "
                     f"stroke-width='{2 if n in on_path else 0.8}'{dash}/>")
        if r >= 8:
            parts.append(f"<text x='{x:.1f}' y='{y + 3.5:.1f}' font-size='9' fill='#fff' "
                         f"text-anchor='middle' font-weight='600'>{n}</text>")
        parts.append("</g>")
    for n in path:  # speedups along the path, last so they stay on top, with a white halo
        sp = g.nodes[n].get("speedup") if n != ROOT else None
        if sp:
            x, y = pos[n]
            parts.append(f"<text x='{x + r * 0.8:.1f}' y='{y - r - 3:.1f}' font-size='11' "
                         f"fill='{PATH_COLOR}' font-weight='700' stroke='#fff' "
                         f"stroke-width='3' paint-order='stroke'>{sp:.2f}x</text>")
    return "".join(parts) + "</svg>"


def strip_svg(t: Timing, label: str, *, width: int = 560, height: int = 58) -> str:
    """One provider's samples as dots on a time axis, with p10 / median / p90 marks."""
    xs = list(t.samples_us) or [t.median_us]
    lo, hi = min(xs + [t.p10_us]), max(xs + [t.p90_us])
    if hi - lo < 1e-9:
        lo, hi = lo * 0.99, hi * 1.01 + 1e-9
    left, right = 120, 14

    def px(v: float) -> float:
        return left + (v - lo) / (hi - lo) * (width - left - right)

    parts = [f"<svg class='strip' viewBox='0 0 {width} {height}' "
             f"xmlns='http://www.w3.org/2000/svg' {_FONT}>"
             f"<text x='4' y='26' font-size='12'>{escape(label)}</text>"
             f"<text x='4' y='41' font-size='10' fill='#666'>n={t.n}</text>"
             f"<rect x='{px(t.p10_us):.1f}' y='12' width='{max(1.0, px(t.p90_us) - px(t.p10_us)):.1f}' "
             "height='22' fill='#dfe8fb'/>"
             f"<line x1='{px(t.median_us):.1f}' x2='{px(t.median_us):.1f}' y1='8' y2='38' "
             f"stroke='{PATH_COLOR}' stroke-width='2'/>"]
    for i, v in enumerate(xs):
        parts.append(f"<circle cx='{px(v):.1f}' cy='{17 + (i % 5) * 3}' r='1.8' "
                     "fill='#333' fill-opacity='0.55'/>")
    for v, anchor in ((lo, "start"), (t.median_us, "middle"), (hi, "end")):
        if anchor == "middle" and min(px(v) - px(lo), px(hi) - px(v)) < 45:
            continue  # would overlap an end label
        parts.append(f"<text x='{px(v):.1f}' y='52' font-size='10' text-anchor='{anchor}' "
                     f"fill='#555'>{v:,.2f}</text>")
    return "".join(parts) + "</svg>"
