"""One self-contained HTML file per run: ``cutegen report``.

:func:`render_html` turns a :class:`~cutegen.search.report.data.RunReport` into a single
page with inline CSS and inline SVG (no scripts, no external files, no plotting library),
so it can be mailed, attached to an issue or opened years later. :func:`write_report`
builds the report from a store and writes it atomically. Every number on the page says
how it was measured and can be rebuilt from the store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from cutegen.codegen.evaluation import kernel_times_text, plain_text, short_kernel_name
from cutegen.search import session_live
from cutegen.search.report.data import (
    RunReport,
    build_run_report,
    path_ids,
    timing_summary,
)
from cutegen.search.report.svg import (
    COLORS,
    Layout,
    graphviz_layout,
    progress_chart,
    strip_svg,
    tree_layout,
    tree_svg,
)
from cutegen.search.storage import BaseStorage, FrozenRun, Session, write_atomic

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d1d1f;margin:0;
background:#f6f7f9}
main{max-width:1280px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:24px;margin:8px 0 2px}h2{font-size:18px;margin:30px 0 10px;
border-bottom:1px solid #dde;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.sub{color:#555}.cards{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:10px 14px;
min-width:150px}.card b{display:block;font-size:20px}.card span{color:#666;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:14px}.charts svg{background:#fff;
border:1px solid #e2e4e8;border-radius:8px;width:620px;max-width:100%}
.treebox{background:#fff;border:1px solid #e2e4e8;border-radius:8px;overflow:auto;
max-height:900px;padding:6px}
table{border-collapse:collapse;background:#fff;margin:6px 0 10px;font-size:13px}
th,td{border:1px solid #e2e4e8;padding:4px 8px;text-align:left;vertical-align:top}
details td{overflow-wrap:anywhere}
th{background:#f0f2f5;font-weight:600}table.kv th{white-space:nowrap;width:1%}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #e2e4e8;border-radius:8px;padding:10px;overflow:auto;
font:12px/1.4 ui-monospace,'DejaVu Sans Mono',monospace;max-height:720px}
.chip{display:inline-block;padding:2px 8px;border-radius:10px;color:#fff;margin:2px 4px 2px 0;
font-size:12px}.dot{display:inline-block;width:10px;height:10px;border-radius:50%;
margin:0 4px 0 10px;vertical-align:middle;border:1px solid #555}
.note{color:#666;font-size:12px}.warn{background:#fff5e0;border:1px solid #e0a100;
border-radius:6px;padding:6px 10px}.strip{display:block;width:560px;max-width:100%}
details summary{cursor:pointer;color:#1f4fd1}
"""


def _e(x: Any) -> str:
    """Text for the page: control characters and terminal colour codes removed (stored
    compiler messages may carry them), then HTML-escaped."""
    return escape(plain_text(str(x)))


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f} µs"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}×"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})"


def _iso(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *,
          numeric: Sequence[int] = ()) -> str:
    """An HTML table; cells are escaped, columns in ``numeric`` are right-aligned."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(
        f"<td class='n'>{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
        for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def kv_table(rows: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of facts: the name as a row header, the value escaped."""
    body = "".join(f"<tr><th scope='row'>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f"<table class='kv'><tbody>{body}</tbody></table>"


def _card(value: str, label: str) -> str:
    return f"<div class='card'><b>{_e(value)}</b><span>{_e(label)}</span></div>"


def _summary(r: RunReport) -> str:
    ev = r.evaluation
    n_ok = sum(v for k, v in r.verdicts.items() if k in ("correct", "compiled"))
    which = "gated best" if r.is_gated_best else (f"node {r.node.id}" if r.node else "best")
    cards = [
        _card(_x(ev.speedup_eager) if ev else "-", f"{which} vs PyTorch eager"),
        _card(_x(ev.speedup_compile) if ev else "-", f"{which} vs torch.compile"),
        _card(_us(ev.time_us) if ev else "-", f"{which}: median time"),
        _card(f"{100 * ev.roofline_fraction:.0f}%" if ev and ev.roofline_fraction else "-",
              "of the roofline bound"),
        _card(f"{len(r.points)}", f"evaluations ({n_ok} succeeded)"),
        _card(f"{r.gpu_seconds / 60:.1f}", "GPU-minutes"),
        _card(f"{r.wall_seconds / 60:.1f}", "wall minutes (all sessions)"),
        _card(f"${r.llm.usd:.2f}", f"LLM cost ({r.llm.calls} calls)"),
    ]
    chips = "".join(f"<span class='chip' style='background:{COLORS.get(k, '#999')}'>"
                    f"{_e(k)} {v}</span>" for k, v in sorted(r.verdicts.items(),
                                                             key=lambda kv: -kv[1]))
    return (f"<div class='cards'>{''.join(cards)}</div>"
            f"<div>verdicts: {chips or 'none yet'}</div>")


def _progress(r: RunReport) -> str:
    pts = r.points
    ok = [p.verdict in ("correct", "compiled") for p in pts]
    a = progress_chart([p.index for p in pts], [p.speedup for p in pts],
                       [p.best_speedup for p in pts], ok, x_label="evaluations",
                       title="best speedup against evaluations")
    b = progress_chart([p.gpu_minutes for p in pts], [p.speedup for p in pts],
                       [p.best_speedup for p in pts], ok, x_label="GPU-minutes",
                       title="best speedup against GPU-minutes")
    return (f"<div class='charts'>{a}{b}</div><p class='note'>Blue line: the gated best "
            "(a candidate replaces it only when re-timing shows it faster beyond noise, "
            "Mann-Whitney p &lt; 0.05 and ≥ 1%); green dots: each timed candidate's own "
            "evaluation; red marks: failed candidates. GPU-minutes count the time each "
            "evaluation held its GPU (worker start, compile, every call, the reference's "
            "inputs and comparisons, timing), profiling and re-timing.</p>")


def _tree(r: RunReport) -> str:
    layout: Layout | None = graphviz_layout(r.graph) if len(r.graph) <= 3000 else None
    layout = layout or tree_layout(r.graph)
    legend = "".join(f"<span class='dot' style='background:{COLORS[k]}'></span>{label}"
                     for k, label in (("correct", "correct"), ("compiled", "compiled only"),
                                      ("suspicious", "suspicious"),
                                      ("compile_error", "static / compile error"),
                                      ("wrong", "wrong"), ("decoy", "cheat"),
                                      ("crash", "crash / timeout / OOM"),
                                      ("waiting", "not evaluated")))
    pruned = ", ".join(f"{k} {v}" for k, v in sorted(r.prunes.items())) or "none"
    return (f"<p class='note'>{legend}<span class='dot' style='background:#fff;"
            f"border:2px solid #1f4fd1'></span>path to the reported node. Hover a node for "
            f"its move, verdict and speedup; dashed outline = pruned as a dead end. Layout: "
            f"{_e(layout.engine)}. Pruned: {_e(pruned)}.</p>"
            f"<div class='treebox'>{tree_svg(r.graph, layout, path_ids(r))}</div>")


def _path(r: RunReport) -> str:
    rows = [(s.node_id, s.move, s.verdict or "-", _us(s.time_us), _x(s.speedup),
             _x(s.ratio_vs_parent) if s.ratio_vs_parent else "-",
             "; ".join(s.guidance) or "-") for s in r.path]
    out = table(["node", "move", "verdict", "median time", "vs eager", "vs parent",
                 "profiler guidance"], rows, numeric=(0, 3, 4, 5))
    status = [f"node {s.node_id}: {x}" for s in r.path for x in s.profiler_status]
    if any(s.findings for s in r.path):
        out += _findings(r)
    else:
        out += ("<p class='note'>No profiler findings on this path (profiling starts at "
                "the run's profile depth; a profiler that cannot run here says so).</p>")
    if status:
        out += f"<p class='note'>{_e('; '.join(status))}</p>"
    return out


def _findings(r: RunReport) -> str:
    """Guidance (``hint.*`` findings) in one table, then each node's and profiler's raw
    findings folded away: a profiled node carries dozens of metrics."""
    hints: list[tuple[int, str, str]] = []
    groups: dict[tuple[int, str], list[tuple[str, str, str]]] = {}
    for s in r.path:
        for prof, kv, summ in s.findings:
            key, _, value = kv.partition(" = ")
            if key.startswith("hint."):
                hints.append((s.node_id, prof, summ or kv))
            groups.setdefault((s.node_id, prof), []).append((key, value, summ))
    out = "<h3>Profile findings along the path</h3>"
    out += (table(["node", "profiler", "guidance"], hints) if hints else
            "<p class='note'>The profilers gave no guidance on this path, only facts.</p>")
    for (node, prof), rows in groups.items():
        out += (f"<details><summary>node {node}, {_e(prof)}: {len(rows)} finding"
                f"{'s' if len(rows) != 1 else ''}</summary>"
                + table(["finding", "value", "meaning"], rows) + "</details>")
    return out


def _verification(r: RunReport) -> str:
    ev = r.evaluation
    assert ev is not None
    rows = [(t.label, "pass" if t.passed else f"FAIL {t.reason}", f"{t.max_abs_err:.3e}",
             f"{t.max_rel_err:.3e}", f"{t.rmse:.3e}", f"{t.ref_rmse:.3e}") for t in ev.trials]
    facts = [("verdict", f"{ev.verdict.value} at stage {ev.stage.label}: {ev.message}"),
             ("tolerance", r.tolerance),
             ("precision", ev.precision or "the task's dtype (nothing declared or detected)"),
             ("kernels", ", ".join(dict.fromkeys(short_kernel_name(k) for k in ev.kernels))
              or "-"),
             ("GPU time by kernel", kernel_times_text(ev.kernel_times, most=8) or "-"),
             ("flags", ", ".join(ev.flags) or "none"),
             ("GPU", ev.gpu or "-"), ("harness version", ev.harness_version),
             ("time per stage", ", ".join(f"{k} {v:.2f} s" for k, v in ev.stage_seconds.items()))]
    out = kv_table(facts)
    if rows:
        out += table(["trial (shape / input distribution)", "result", "max abs error",
                      "max rel error", "rmse", "native dtype rmse"], rows, numeric=(2, 3, 4, 5))
    else:
        out += ("<p class='note'>No verification trials ran (compile-only evaluation).</p>"
                if ev.verdict.value == "compiled" else
                "<p class='note'>No verification trials are recorded for this evaluation.</p>")
    if ev.details:
        out += f"<pre>{_e(chr(10).join(ev.details[:20]))}</pre>"
    return out


def _timing(r: RunReport) -> str:
    ev = r.evaluation
    assert ev is not None
    if ev.timing is None:
        return "<p class='note'>Not timed (compile-only, or it failed before the benchmark).</p>"
    rows, strips = [], []
    providers = [("candidate", ev.timing), ("PyTorch eager", ev.eager),
                 ("torch.compile", ev.compiled)]
    if ev.eager_tf32 is not None:  # cuDNN in TF32, torch's default, beside fp32 eager
        providers.insert(2, ("PyTorch eager, cuDNN in TF32", ev.eager_tf32))
    for name, t in providers:
        if t is None:
            rows.append((name, "not measured", "", "", "", "", "", "", ""))
            continue
        s = timing_summary(t)
        rows.append((name, f"{s['median']:,.2f}", f"{s['p10']:,.2f}", f"{s['p90']:,.2f}",
                     f"{s.get('min', 0):,.2f}", f"{s.get('max', 0):,.2f}",
                     f"{s.get('mean', 0):,.2f}", f"{100 * s['spread']:.1f}%", s["n"]))
        strips.append(strip_svg(t, name))
    out = table(["provider", "median µs", "p10", "p90", "min", "max", "mean",
                 "spread (p90-p10)/median", "samples"], rows, numeric=tuple(range(1, 9)))
    out += "".join(strips)
    facts = [("method", ev.timing.method),
             ("speedup vs eager", _x(ev.speedup_eager) + _ci(r.ci_eager)
              + (" (eager with cuDNN in fp32, the precision this kernel is held to; vs "
                 f"torch's default, cuDNN in TF32: {_x(ev.speedup_eager_tf32)})"
                 if ev.eager_tf32 is not None else "")),
             ("speedup vs torch.compile", _x(ev.speedup_compile) + _ci(r.ci_compile)),
             ("intervals", "percentile bootstrap of the ratio of medians, both sample sets "
                           "resampled independently, 10,000 times")]
    rl = ev.roofline
    if rl is not None:
        work = f"{rl.bytes_moved / 1e9:.3f} GB moved" + (
            f", {rl.flops / 1e9:,.1f} GFLOP" if rl.flops else "")
        facts.append(("roofline", f"{rl.kind}-bound: {work}; at {rl.bandwidth_gbs / 1000:.2f} "
                      f"TB/s and {rl.peak_tflops:.0f} TFLOP/s the bound is {rl.bound_us:,.2f} µs"
                      f"; this kernel reaches {100 * (ev.roofline_fraction or 0):.1f}% of it"))
    out += kv_table(facts)
    if r.best_history:
        out += "<h3>Gate decisions that made a new best</h3>" + _gate_table(r.best_history,
                                                                           "replaced")
    if r.gate_rejections:
        retimed = sum(1 for d in r.gate_rejections if d.n_old)
        out += (f"<details><summary>Gate decisions that kept the best ({len(r.gate_rejections)}"
                f" challengers, {retimed} re-timed against it)</summary>"
                + _gate_table(r.gate_rejections, "best kept") + "</details>")
    return out


def _gate_table(decisions: Sequence[Any], against: str) -> str:
    return table(
        ["node", against, "reason", "p-value", "U", "new median µs", "old median µs",
         "improvement", "samples new / old"],
        [(d.node_id, d.previous_best_id or "-", d.reason,
          "-" if d.p_value is None else f"{d.p_value:.2g}",
          "-" if d.u_statistic is None else f"{d.u_statistic:.0f}",
          _us(d.median_new_us), _us(d.median_old_us),
          "-" if d.improvement is None else f"{100 * d.improvement:.1f}%",
          f"{d.n_new} / {d.n_old}") for d in decisions], numeric=(0, 3, 4, 5, 6, 7))


def _environment(r: RunReport, db: str) -> str:
    cfg = r.run.config
    tc = sorted(dict(cfg.toolchain).items()) or [("toolchain", "not recorded")]
    out = kv_table([*tc, ("task", cfg.task_name), ("task file", cfg.task_path),
                    ("task sha256", cfg.task_sha256), ("run seed", cfg.seed),
                    ("store", db or "-")])
    if r.sessions:
        out += table(["session", "host", "pid", "started", "last heartbeat", "ended"],
                     [(s.id, s.host, s.pid, _iso(s.started_at), _iso(s.heartbeat_at),
                       s.end_reason or _open_session(s, r.generated_at))
                      for s in r.sessions], numeric=(0, 2))
    settings = json.dumps(dict(r.run.config.settings), indent=2, sort_keys=True)
    return out + f"<details><summary>run settings</summary><pre>{_e(settings)}</pre></details>"


def _open_session(s: Session, now: float) -> str:
    return "live" if session_live(s, now=now) else "died (no end recorded)"


def _llm(r: RunReport) -> str:
    x = r.llm
    if not x.attempts:
        return "<p>No LLM calls in this run.</p>"
    return table(["calls", "attempts", "prompt tokens", "completion tokens", "cost", "by model",
                  "outcomes"],
                 [(x.calls, x.attempts, f"{x.prompt_tokens:,}", f"{x.completion_tokens:,}",
                   f"${x.usd:.4f}", ", ".join(f"{m} ${c:.4f}" for m, c in x.by_model.items()),
                   ", ".join(f"{k} {v}" for k, v in sorted(x.outcomes.items())))],
                 numeric=(0, 1, 2, 3, 4))


def _failures(r: RunReport) -> str:
    if not r.failures:
        return "<p>No node failed.</p>"
    counts: dict[str, int] = {}
    for f in r.failures:
        counts[f.verdict] = counts.get(f.verdict, 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    rows = [(f.node_id, f.depth, f.move, f"{f.verdict} ({f.stage})", f.message)
            for f in r.failures]
    return (f"<details><summary>{len(r.failures)} failed node(s): {_e(summary)}; see one "
            f"with <code>cutegen show {_e(r.run.name)} NODE</code></summary>"
            + table(["node", "depth", "move", "verdict", "message"], rows, numeric=(0, 1))
            + "</details>")


def render_html(r: RunReport, *, db: str = "") -> str:
    """The report page (see the module docstring)."""
    run = r.run
    title = f"cutegen report: {run.name}"
    node = r.node
    body = [f"<h1>{_e(title)}</h1><div class='sub'>task <b>{_e(run.config.task_name)}</b> · "
            f"{_e(r.state)} · started {_iso(run.created_at)} · generated "
            f"{_iso(r.generated_at)} · GPU {_e(run.config.toolchain.get('gpu', 'none'))}</div>",
            _summary(r), "<h2>Progress</h2>", _progress(r), "<h2>Search tree</h2>", _tree(r)]
    if node is None:
        body.append("<h2>Best kernel</h2><p class='warn'>No best yet: no candidate was "
                    "verified and timed (a compile-only run, or every candidate failed).</p>")
    else:
        label = "Best kernel" if r.is_gated_best else f"Node {node.id}"
        body += [f"<h2>{label}: node {node.id}, {_e(node.move.description)}</h2>",
                 "<h3>Path from the seed</h3>", _path(r)]
        if r.evaluation is not None:
            body += ["<h3>How it was verified</h3>", _verification(r),
                     "<h3>How it was timed</h3>", _timing(r)]
        body.append(f"<h3>Source</h3><p class='note'>{_e(r.source_note)} · sha256 "
                    f"{_e(node.source_sha256)} · export it with <code>cutegen export "
                    f"{_e(run.name)} {node.id} -o kernel.py</code></p>")
        body.append(f"<pre>{_e(r.source)}</pre>" if r.source is not None else
                    "<p class='warn'>The candidate's source is not available here.</p>")
    body += ["<h2>Failed nodes</h2>", _failures(r), "<h2>LLM</h2>", _llm(r),
             "<h2>Environment</h2>", _environment(r, db),
             f"<p class='note'>Every number on this page is derived from the store; rebuild "
             f"it with <code>cutegen report {_e(run.name)}</code>.</p>"]
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>")


def write_report(storage: BaseStorage, run: FrozenRun, out: Path, *,
                 node_id: int | None = None, db: str = "") -> Path:
    """Build the run's report and write it to ``out`` (a file, or a folder that gets
    ``<run>.html``), atomically. Returns the file written.

    Raises:
        StorageError: the node is unknown or belongs to another run.
        OSError: the file cannot be written.
    """
    report = build_run_report(storage, run, node_id=node_id)
    path = out / f"{run.name}.html" if out.suffix.lower() not in (".html", ".htm") else out
    write_atomic(path, render_html(report, db=db).encode("utf-8"))
    return path
