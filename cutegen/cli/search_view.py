"""How ``cutegen search / status / show`` present things: live progress on stderr, tables
and JSON on stdout. Pure formatting over the store; no search logic."""

from __future__ import annotations

import time
from typing import Any

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from cutegen.codegen.evaluation import KernelTime, kernel_times_text, one_line


def _speed(x: float | None) -> str:
    return f"{x:.2f}x" if x else "-"


#: Characters of a failed evaluation's message shown on its progress line.
WHY_CHARS = 110


def _why(ok: bool, message: str) -> str:
    """`` - message`` for a failed evaluation (``cutegen show`` has all of it), else ''."""
    return "" if ok or not message else "  - " + one_line(message, WHY_CHARS)


def _iso(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


class Progress:
    """One status line per evaluation; a live-updating footer when stderr is a terminal."""

    def __init__(self, search: Any, budget: Any) -> None:
        self._search, self._budget = search, budget
        self._console = Console(stderr=True)
        s = search.summary()
        self._counts: dict[str, int] = dict(s.verdicts)
        self._best = s.best_speedup
        self._live: Live | None = None

    def __enter__(self) -> Progress:
        if self._console.is_terminal:
            self._live = Live(self._footer(), console=self._console, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)

    def _footer(self) -> Text:
        usage = self._search.usage()
        left = self._budget.remaining(usage)
        parts = [f"{usage.evals} evaluations", f"best {_speed(self._best)}",
                 " ".join(f"{k} {v}" for k, v in sorted(self._counts.items()))]
        budget = []
        if left["evals"] is not None:
            budget.append(f"{left['evals']:.0f} evals")
        if left["wall_s"] is not None:
            budget.append(f"{left['wall_s'] / 60:.1f} min")
        if left["gpu_s"] is not None:
            budget.append(f"{left['gpu_s'] / 60:.1f} GPU-min")
        if left["usd"] is not None:
            budget.append(f"${left['usd']:.2f}")
        if budget:
            parts.append("left: " + ", ".join(budget))
        return Text(" | ".join(parts), style="bold")

    def update(self, report: Any) -> None:
        v = report.evaluation.verdict.value
        self._counts[v] = self._counts.get(v, 0) + 1
        if report.best_changed:
            self._best = report.evaluation.speedup_eager
        n = report.node
        line = (f"node {n.id:>4} d{n.depth} {n.move.description[:40]:<40} {v:<14} "
                f"{_speed(report.evaluation.speedup_eager):>7}"
                + (f"  {report.outcome}" if report.outcome else "")
                + ("  [new best]" if report.best_changed else "")
                + _why(report.evaluation.ok, report.evaluation.message))
        if self._live is not None:
            self._live.console.print(line)
            self._live.update(self._footer())
        else:
            click.echo(line + "  | " + self._footer().plain, err=True)


def print_summary(summary: Any) -> None:
    """The end of a search, on stdout."""
    verdicts = ", ".join(f"{k} {v}" for k, v in sorted(summary.verdicts.items())) or "none"
    click.echo(f"run {summary.run}: {summary.status} ({summary.reason})")
    click.echo(f"  evaluations {summary.evaluations}: {verdicts}")
    if summary.best is not None:
        tf32 = summary.best_speedup_tf32
        click.echo(f"  best: node {summary.best.id}, {_speed(summary.best_speedup)} vs eager "
                   + (f"({_speed(tf32)} vs eager with cuDNN in TF32, torch's default) "
                      if tf32 is not None else "")
                   + f"(cutegen show {summary.run} {summary.best.id})")
        if summary.best_speedup is not None and summary.best_speedup < 1.0:
            click.echo("  no candidate beat eager PyTorch yet: keep the reference for this "
                       f"task, or go on (cutegen resume {summary.run} with a larger budget; "
                       "an LLM rewriter: --rewriter mixed)")
    else:
        click.echo("  best: none yet (no correct, timed candidate); why each failed: "
                   f"cutegen nodes {summary.run} --failed")


def run_status(storage: Any, run: Any, *, detail: bool) -> dict[str, Any]:
    """A run's status as a JSON-able dict."""
    from cutegen.search import SearchParams, session_live

    results = storage.get_results(run.id)
    speed = {r.node_id: r.speedup_eager for r in results}
    counts: dict[str, int] = {}
    for r in results:
        counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
    best = storage.get_best_node(run.id)
    params = SearchParams.from_dict(dict(run.config.settings).get("params", {}))
    sessions = storage.get_sessions(run.id)
    live = any(session_live(s, now=time.time(), stale_after_s=params.stale_after_s)
               for s in sessions)
    # a run whose session died (kill -9, a crash) is stopped: nothing is running it
    state = "stopped" if run.status in ("running", "created") and not live else run.status
    row: dict[str, Any] = {
        "run": run.name, "task": run.config.task_name, "state": state,
        "evaluations": len(results), "verdicts": counts,
        "best_node": best.id if best else None,
        "best_speedup": speed.get(best.id) if best else None,
        "seed": run.config.seed, "created": _iso(run.created_at)}
    if detail:
        history = storage.get_best_history(run.id)
        prunes: dict[str, int] = {}
        for p in storage.get_prunes(run.id):
            prunes[p.kind.split(":")[0]] = prunes.get(p.kind.split(":")[0], 0) + 1
        row.update(
            nodes=storage.n_nodes(run.id), task_path=run.config.task_path,
            task_sha256=run.config.task_sha256, toolchain=dict(run.config.toolchain),
            budget=dict(run.config.settings).get("budget", {}),
            gpu_seconds=sum(r.gpu_seconds for r in results)
            + sum(d.retime_seconds for d in history),
            llm_usd=storage.llm_spent_usd(run.id), prunes=prunes,
            sessions=[{"started": _iso(s.started_at), "ended": _iso(s.ended_at),
                       "end_reason": s.end_reason or ("live" if live else "died"),
                       "host": s.host, "pid": s.pid} for s in sessions],
            best_history=[{"node": d.node_id, "speedup": speed.get(d.node_id),
                           "p_value": d.p_value, "reason": d.reason}
                          for d in history if d.accepted])
    return row


def print_status(rows: list[dict[str, Any]], *, detail: bool) -> None:
    console = Console()
    if not rows:
        click.echo("no runs in this store yet (start one with `cutegen search TASK`)")
        return
    from cutegen.cli.table import print_table

    table = []
    for r in rows:
        verdicts = " ".join(f"{k} {v}" for k, v in sorted(r["verdicts"].items()))
        best = (f"{_speed(r['best_speedup'])} (node {r['best_node']})"
                if r["best_node"] else "-")
        table.append([r["run"], r["task"], r["state"], str(r["evaluations"]), best, verdicts])
    print_table(["run", "task", "state", "evals", "best", "verdicts"], table)
    if detail:
        r = rows[0]
        console.print(f"task file {r['task_path']} ({r['task_sha256'][:12]}), {r['nodes']} "
                      f"nodes, GPU time {r['gpu_seconds']:.0f} s, LLM ${r['llm_usd']:.2f}, "
                      f"pruned {r['prunes'] or 'nothing'}", highlight=False)
        for d in r["best_history"]:
            console.print(f"  best -> node {d['node']} {_speed(d['speedup'])}: {d['reason']}",
                          highlight=False)


def node_detail(storage: Any, node: Any) -> dict[str, Any]:
    """A node with its lineage, evaluation, guidance, lessons and source (JSON-able)."""
    ev = storage.get_evaluation(node.id)
    lineage = []
    for n in storage.lineage(node.id):
        e = storage.get_evaluation(n.id)
        lineage.append({"node": n.id, "move": n.move.description, "state": n.state.label,
                        "verdict": e.verdict.value if e else None,
                        "speedup": e.speedup_eager if e else None})
    lessons = [lr.text for lr in storage.get_lessons(run_id=node.run_id)
               if lr.node_id == node.id]
    profiles = storage.get_profiles(node.id)
    return {"node": node.id, "parent": node.parent_id, "depth": node.depth,
            "state": node.state.label, "attempts": node.attempts, "origin": node.origin,
            "move": {"kind": node.move.kind, "description": node.move.description,
                     "cost": node.move.cost, "params": dict(node.move.params)},
            "source_sha256": node.source_sha256, "source_path": node.source_path,
            "lineage": lineage, "evaluation": ev.to_dict() if ev else None,
            "guidance": [g for p in profiles for g in p.guidance],
            "profiles": [{"profiler": p.profiler, "status": p.status,
                          "seconds": round(p.seconds, 2), "artifact": p.artifact_path,
                          "findings": [f.to_dict() for f in p.findings],
                          "guidance": list(p.guidance)} for p in profiles],
            "lessons": lessons, "source": storage.get_source(node.id)}


def print_node(d: dict[str, Any]) -> None:
    click.echo(f"node {d['node']} ({d['state']}, depth {d['depth']}, {d['move']['description']})")
    click.echo("lineage: " + " -> ".join(
        f"[{x['node']}] {x['move']} {x['verdict'] or x['state']} {_speed(x['speedup'])}"
        for x in d["lineage"]))
    ev = d["evaluation"]
    if ev:
        t = ev.get("timing") or {}
        busy = ev.get("busy_us")
        click.echo(f"evaluation: {ev['verdict']} at {ev['stage']}: {ev['message']}"
                   + (f"; median {t['median_us']:.2f} us" if t else "")
                   + (f", the GPU busy {busy:.2f} us of it" if t and busy is not None else ""))
        if ev.get("kernel_times"):
            times = [KernelTime(**k) for k in ev["kernel_times"]]
            click.echo(f"  GPU time by kernel (median a call): {kernel_times_text(times)}")
        for line in ev.get("details", [])[:10]:
            click.echo(f"  {line}")
    for g in d["guidance"]:
        click.echo(f"guidance: {g}")
    if d.get("profiles"):
        total = sum(p["seconds"] for p in d["profiles"])
        click.echo(f"profiles ({len(d['profiles'])}, {total:.1f} s of profiler time):")
        for p in d["profiles"]:
            click.echo(f"  {p['profiler']}: {p['status']} in {p['seconds']:.1f} s"
                       + (f", {p['artifact']}" if p["artifact"] else ""))
            for f in p["findings"]:
                summary = f" ({f['summary']})" if f.get("summary") else ""
                click.echo(f"    {f.get('key')} = {f.get('value')}{summary}")
    for lesson in d["lessons"]:
        click.echo(f"lesson: {lesson}")
    click.echo(f"source ({d['source_path']}):")
    click.echo(d["source"])
