"""Benchmark tables and means (pure): PERFORMANCE.md §5 over :class:`TaskResult` records.

Means are geometric, per (tier, dtype) group, so fp32 and bf16 never share one, and each is
stated twice: over the tasks with a correct kernel, and over every task with a failure
counted as 1.0×. ``fast_1`` / ``fast_1.2`` (KernelBench's fast_p, against torch.compile)
count failed tasks in the denominator. :func:`render_markdown` writes the page that becomes
``BENCHMARKS.md`` (its "Reading" section is left for a person); :func:`to_json` the same
numbers for machines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cutegen.codegen.ceilings import MeasuredCeilings
from cutegen.search.report.bench import TaskResult

SCHEMA = 1


def geomean(xs: Sequence[float]) -> float | None:
    """Geometric mean of positive numbers; None for an empty sequence."""
    if not xs:
        return None
    if any(x <= 0 for x in xs):
        raise ValueError("geometric mean of non-positive numbers")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """Means of one (tier, dtype) group; see the module docstring for how failures count."""

    tier: str
    dtype: str
    tasks: int
    correct: int
    eager_correct: float | None
    eager_fail1: float | None
    compile_correct: float | None
    compile_fail1: float | None
    compile_tasks: int  # tasks with a torch.compile baseline (it can fail to compile)
    fast_1: float | None
    fast_1_2: float | None
    roofline_correct: float | None


def summarize(results: Sequence[TaskResult]) -> tuple[GroupSummary, ...]:
    """One summary per (tier, dtype) group, in the order groups first appear."""
    groups: dict[tuple[str, str], list[TaskResult]] = {}
    for r in results:
        groups.setdefault((r.tier, r.dtype), []).append(r)
    out = []
    for (tier, dtype), rs in groups.items():
        ok = [r for r in rs if r.correct]
        with_c = [r for r in rs if not r.correct or r.speedup_compile is not None]
        sp_c = [r.speedup_compile for r in ok if r.speedup_compile is not None]
        out.append(GroupSummary(
            tier=tier, dtype=dtype, tasks=len(rs), correct=len(ok),
            eager_correct=geomean([r.speedup_eager for r in ok if r.speedup_eager]),
            eager_fail1=geomean([r.speedup_eager if r.correct and r.speedup_eager else 1.0
                                 for r in rs]),
            compile_correct=geomean(sp_c),
            compile_fail1=geomean([r.speedup_compile if r.correct and r.speedup_compile
                                   else 1.0 for r in with_c]),
            compile_tasks=len(with_c),
            fast_1=sum(1 for x in sp_c if x > 1.0) / len(rs) if rs else None,
            fast_1_2=sum(1 for x in sp_c if x > 1.2) / len(rs) if rs else None,
            roofline_correct=geomean([r.frac_kernel for r in ok if r.frac_kernel])))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class BenchReport:
    """One benchmark run: what ran, where, against which ceilings, and each task's result."""

    suite: str
    description: str
    date: str
    command: str
    versions: Mapping[str, str]
    ceilings: MeasuredCeilings | None
    ceilings_note: str
    max_evals: int
    compile_only: bool
    tasks: tuple[TaskResult, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> tuple[GroupSummary, ...]:
        return summarize(self.tasks)


def _x(v: float | None, ci: tuple[float, float] | None = None) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}×" + (f" ({ci[0]:.2f}–{ci[1]:.2f})" if ci else "")


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f} µs"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(str(c)) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def task_table(results: Sequence[TaskResult]) -> str:
    """The per-task table (Markdown)."""
    rows = []
    for r in results:
        best = (_us(r.best_us) if r.correct else
                {"compiled": "compiled only", "no_best": "no correct kernel",
                 "error": "not run"}.get(r.status, r.status))
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(r.verdicts.items()))
        rows.append([
            r.task, r.dtype, best, "failed (flags)" if r.eager_error else (
                _us(r.eager_us) + (f"; TF32 {_us(r.eager_tf32_us)}" if r.eager_tf32_us
                                   else "")),
            "failed (flags)" if r.compile_error and not r.eager_error else _us(r.compile_us),
            _x(r.speedup_eager, r.ci_eager) + (f"; vs TF32 {r.speedup_eager_tf32:.2f}×"
                                               if r.speedup_eager_tf32 else ""),
            _x(r.speedup_compile, r.ci_compile),
            " / ".join(_pct(f) for f in (r.frac_kernel, r.frac_eager, r.frac_compile))
            if r.correct else "-",
            f"{r.evals_to_best or '-'} / {r.evaluations}" + (f" ({verdicts})" if verdicts
                                                             and not r.correct else ""),
            (f"{r.gpu_min_to_best:.1f} / {r.gpu_min_total:.1f}" if r.gpu_min_to_best is not None
             else f"- / {r.gpu_min_total:.1f}"),
            f"${r.llm_usd:.2f}", f"{len(r.flags)} (below)" if r.flags else ""])
    return md_table(["task", "dtype", "best", "eager", "torch.compile", "vs eager (95% CI)",
                     "vs compile (95% CI)", "roofline kernel / eager / compile",
                     "evals to best / total", "GPU-min to best / total", "LLM", "flags"], rows)


def summary_table(groups: Sequence[GroupSummary]) -> str:
    """The means (Markdown), one row per (tier, dtype) group."""
    def g(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}×"

    rows = [[s.tier, s.dtype, f"{s.correct} / {s.tasks}", g(s.eager_correct), g(s.eager_fail1),
             g(s.compile_correct), g(s.compile_fail1), _pct(s.fast_1), _pct(s.fast_1_2),
             _pct(s.roofline_correct)] for s in groups]
    return md_table(["tier", "dtype", "correct / tasks", "vs eager, over correct",
                     "vs eager, failures as 1.0×", "vs compile, over correct",
                     "vs compile, failures as 1.0×", "fast_1 (vs compile)",
                     "fast_1.2 (vs compile)", "roofline, over correct"], rows)


MEANS_NOTE = (
    "Geometric means per (tier, dtype): fp32 and bf16 never share a mean. *Over correct*: "
    "over the tasks whose search found a verified, timed kernel. *Failures as 1.0×*: over "
    "every task, a task without a correct kernel counted as 1.0× (as if PyTorch were kept). "
    "*fast_1 / fast_1.2*: the share of all tasks, failures included, whose kernel beats "
    "torch.compile by more than 1× / 1.2× (KernelBench's fast_p). *Roofline*: the kernel's "
    "time against max(minimal bytes / copy bandwidth, FLOPs / GEMM rate), both measured at "
    "the start of this run.")


def _ceilings_line(r: BenchReport) -> str:
    c = r.ceilings
    if c is None:
        return f"not measured ({r.ceilings_note})"
    clocks = ", ".join(f"{k} {v}" for k, v in c.clocks.items())
    return (f"copy bandwidth {c.copy_gbs / 1000:.2f} TB/s (`torch.clone` of "
            f"{c.copy_bytes / 1e9:.2f} GB bf16, read + write), cuBLAS bf16 `torch.mm` "
            f"{c.gemm_n}³ {c.gemm_tflops:.0f} TFLOP/s; {c.method}, {c.runs} calls each"
            + (f"; clocks: {clocks}" if clocks else ""))


def render_markdown(r: BenchReport) -> str:
    """The page that becomes ``BENCHMARKS.md``: facts, tables, flags, and an empty reading."""
    v = r.versions
    machine = (f"{v.get('gpu', 'no GPU')}, driver {v.get('driver', '-')}, "
               f"CUDA {v.get('cuda', '-')}")
    vers = ", ".join(f"{k} {v[k]}" for k in ("cutegen", "torch", "triton",
                                               "nvidia-cutlass-dsl", "python") if k in v)
    parts = [
        f"# cutegen benchmark: {r.suite}", "",
        "<!-- Generated by `cutegen bench`. Every number below comes from the store and "
        "bench.json; the Reading section is for a person to write. -->", "",
        *([r.description, ""] if r.description else []),
        f"- **Date**: {r.date}",
        f"- **Command**: `{r.command}`",
        f"- **Machine**: {machine}",
        f"- **Versions**: {vers}",
        f"- **Ceilings, measured in this run**: {_ceilings_line(r)}",
        f"- **Budget**: {r.max_evals} evaluations per task"
        + (" (compile-only: nothing verified or timed)" if r.compile_only else ""),
        "- **Protocol**: every candidate in its own process; verified on at least 3 fresh "
        "random inputs of the main shape and on hidden shapes against a float64 reference "
        "(bf16 1e-2, fp32 1e-4); each time is the span of one call's GPU work in the native "
        "CUPTI observer's records, L2 flushed and inputs refreshed before each of 50 calls, "
        "median; eager and torch.compile (mode default) timed the same way in the trusted "
        "reference worker, cuDNN in fp32 (torch.backends.cudnn.allow_tf32 off: the precision "
        "the kernels are held to); where a task runs cuDNN convolutions or recurrent layers, "
        "eager as torch runs it by default (cuDNN in TF32) is shown beside it as \"TF32\". A new best must beat the old one on re-timing (Mann-Whitney p < 0.05, ≥ 1%). "
        "Intervals: bootstrap 95% of the ratio of medians.", "",
        "## Results", "", task_table(r.tasks), "",
        "Times are medians; roofline columns are fractions of the bound with the ceilings "
        "above.", "",
        "## Means", "", summary_table(r.summary), "", MEANS_NOTE, "",
        "## Sanity flags (PERFORMANCE.md §6)", ""]
    flagged = [(t.task, f) for t in r.tasks for f in t.flags]
    parts += [f"- **{t}**: {f}" for t, f in flagged] or ["None raised."]
    parts += ["", "Work on side streams, outputs reused across calls and mutated inputs are "
              "rejected for every candidate by the evaluator (they are verdicts, not flags).", ""]
    failed = [t for t in r.tasks if t.status == "no_best" and t.failure]
    if failed:
        parts += ["## Why tasks have no correct kernel", "",
                  "The first failed evaluation of each (`cutegen nodes RUN --failed` lists "
                  "them all):", ""]
        parts += [f"- **{t.task}**: {t.failure}" for t in failed]
        parts.append("")
    errors = [t for t in r.tasks if t.status == "error"]
    if errors:
        parts += ["## Tasks that did not run", ""]
        parts += [f"- **{t.task}**: {t.error}" for t in errors]
        parts.append("")
    runs = [t for t in r.tasks if t.run]
    if runs:
        parts += ["## Runs", "", "Inspect any of them with `cutegen report RUN` or "
                  "`cutegen status RUN`: " + ", ".join(f"`{t.run}`" for t in runs) + ".", ""]
    parts += ["## Reading", "",
              "_To be written by a person after looking at the numbers: which kernels reach "
              "the roofline, where torch.compile leaves headroom and the search found it or "
              "did not, what the flags above turned out to be, and what to try next._", ""]
    return "\n".join(parts)


def to_json(r: BenchReport) -> dict[str, Any]:
    """Everything in the report, JSON-able (``schema`` versions the layout)."""
    return {"schema": SCHEMA, "suite": r.suite, "description": r.description, "date": r.date,
            "command": r.command, "versions": dict(r.versions),
            "ceilings": r.ceilings.to_dict() if r.ceilings else None,
            "ceilings_note": r.ceilings_note, "max_evals": r.max_evals,
            "compile_only": r.compile_only, "settings": dict(r.settings),
            "tasks": [asdict(t) for t in r.tasks],
            "summary": [asdict(s) for s in r.summary], "means_note": MEANS_NOTE}


def write_outputs(r: BenchReport, out_dir: Path) -> list[Path]:
    """Write ``BENCHMARKS.md`` and ``bench.json`` into ``out_dir`` (atomically).

    Raises:
        OSError: the folder or a file cannot be written.
    """
    from cutegen.search.storage import write_atomic

    md, js = out_dir / "BENCHMARKS.md", out_dir / "bench.json"
    write_atomic(md, render_markdown(r).encode("utf-8"))
    write_atomic(js, (json.dumps(to_json(r), indent=2) + "\n").encode("utf-8"))
    return [md, js]
