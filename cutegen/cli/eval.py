"""``cutegen eval`` (one candidate through the evaluator) and ``cutegen tasks`` (the suite)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import click

from cutegen.cli.options import precision_option, tolerance_options, variant_words
from cutegen.codegen.backend import require_gpu


def task_options(f: Any) -> Any:
    """Options shared by every command that takes a task (sqlite-utils style bundle)."""
    for opt in reversed([
        click.option("--kernelbench", type=click.Path(file_okay=False), default=None,
                     help="A KernelBench checkout; use with --level and --problem instead of TASK."),
        click.option("--level", type=int, default=None, help="KernelBench level (1, 2, 3)."),
        click.option("--problem", type=int, default=None, help="KernelBench problem number."),
    ]):
        f = opt(f)
    return f




@click.command("eval")
@click.argument("args", nargs=-1, required=True, metavar="[TASK] CANDIDATE")
@task_options
@precision_option
@tolerance_options
@click.option("--json", "as_json", is_flag=True, help="Print the Evaluation as JSON.")
@click.option("--compile-only", is_flag=True,
              help="Only compile (works without a GPU, for --arch) and summarise the SASS.")
@click.option("--arch", default="sm_90a", show_default=True, help="Target for --compile-only.")
@click.option("--runs", type=click.IntRange(30, None), default=50, show_default=True,
              help="Timed calls of the candidate (and of each baseline).")
@click.option("--no-baselines", is_flag=True, help="Skip timing eager and torch.compile.")
@click.option("--gpu", type=int, default=None, help="GPU index to use (default: the visible one).")
@click.option("--run-dir", type=click.Path(file_okay=False), default="runs/eval", show_default=True,
              help="Where compiler artifacts of this evaluation are kept.")
@click.option("--compile-timeout", type=float, default=180.0, show_default=True,
              help="Seconds allowed for one cute.compile.")
@click.option("--timeout", type=float, default=120.0, show_default=True,
              help="Seconds allowed for every other phase (import, one call, the benchmark).")
@click.option("--eval-timeout", type=click.FloatRange(1, None), default=900.0,
              show_default=True,
              help="Seconds the calls and output checks may take together.")
def eval_cmd(args: tuple[str, ...], kernelbench: str | None, level: int | None,
             problem: int | None, precision: str, atol: float | None, rtol: float | None, as_json: bool, compile_only: bool, arch: str, runs: int,
             no_baselines: bool, gpu: int | None, run_dir: str, compile_timeout: float,
             timeout: float, eval_timeout: float) -> None:
    """Evaluate one CANDIDATE file against TASK and print the verdict.

    TASK is a task file, a bundled task name (see `cutegen tasks`), or omitted with
    --kernelbench DIR --level L --problem P. The candidate runs in its own process:
    compiled, verified against the reference on fresh secret inputs (several
    distributions, hidden shapes), and timed against eager PyTorch and torch.compile with
    the L2 flushed before every call.

    \b
    Examples:
      cutegen eval softmax_bf16 my_softmax.py
      cutegen eval softmax_bf16 my_softmax.py --compile-only     (no GPU needed)
      cutegen eval --kernelbench ~/KernelBench --level 1 --problem 23 cand.py --json
      cutegen eval softmax_fp32 my_bf16_softmax.py --precision bf16   (its bf16 variant,
                                                        written to RUN_DIR/variants/)
    """
    from cutegen.codegen.backend import EvalOptions
    from cutegen.codegen.candidate import CandidateSource
    from cutegen.codegen.eval.evaluator import local_evaluator
    from cutegen.codegen.tasks import resolve_task

    # click fills optional positionals first, so `--kernelbench ... cand.py` would bind the
    # candidate to TASK: take one or two arguments and decide here
    if len(args) > 2:
        raise click.UsageError("give at most TASK and CANDIDATE")
    task, candidate = (None, args[0]) if len(args) == 1 else args
    if task is None and kernelbench is None:
        raise click.UsageError("give TASK and CANDIDATE (or --kernelbench DIR --level L "
                               "--problem P and CANDIDATE)")
    if task is not None and kernelbench is not None:
        raise click.UsageError("give TASK or --kernelbench, not both")
    t = resolve_task(task, kernelbench=kernelbench, level=level, problem=problem)
    if precision != "native" or atol is not None or rtol is not None:
        from cutegen.codegen.variants import make_variant

        t = make_variant(t, precision, Path(run_dir) / "variants", atol=atol, rtol=rtol)
        click.echo(f"{t.name}: {variant_words(precision, atol, rtol)}, {t.path}",
                   err=True)
    cand = CandidateSource.from_path(candidate)
    if not compile_only:
        require_gpu("verifying and timing a candidate")
    opts = EvalOptions(compile_only=compile_only, arch=arch, bench_runs=runs,
                       baselines=not no_baselines, gpu=gpu, compile_timeout_s=compile_timeout,
                       run_timeout_s=timeout, eval_timeout_s=eval_timeout)
    click.echo(f"evaluating {Path(candidate).name} ({cand.short}) on {t.name}"
               f"{' (compile only, ' + arch + ')' if compile_only else ''} ...", err=True)
    ev = local_evaluator(t, opts, Path(run_dir))
    try:
        e = ev.evaluate(cand)
        sass_lines = sass_summary(ev, cand, e, Path(run_dir)) if e.artifacts else []
    finally:
        ev.close()
    if as_json:
        click.echo(json.dumps(e.to_dict(), indent=2))
    else:
        print_evaluation(e)
        for line in sass_lines:
            click.echo(line)
    sys.exit(0 if e.ok else 1)


def sass_summary(ev: Any, cand: Any, e: Any, run_dir: Path) -> list[str]:
    """One line per SASS fact worth a glance (load widths, tensor cores, spills, registers),
    from the built-in sass profiler over the evaluation's artifacts."""
    from cutegen.profilers.sass import SassProfiler

    target = ev.profile_target(cand, e, run_dir / "profiles" / cand.short)
    rep = SassProfiler().profile(target, timeout_s=60.0)
    if rep.status.value != "ok":
        return [f"SASS: {rep.status.value} ({rep.error})"]
    f = {x.key: x for x in rep.findings}
    out = []
    if "sass.ldg_count" in f:
        out.append(f"SASS: {f['sass.instructions'].value} instructions; global loads "
                   f"{f['sass.ldg_min_bits'].value}-{f['sass.ldg_max_bits'].value} bit, stores "
                   f"{f['sass.stg_min_bits'].value}-{f['sass.stg_max_bits'].value} bit; HGMMA "
                   f"{f['sass.hgmma'].value}, HMMA {f['sass.hmma'].value}; local memory "
                   f"{int(f['sass.local_loads'].value) + int(f['sass.local_stores'].value)} ops")
    out += [f"  {x.summary}" for x in rep.findings
            if x.key.startswith(("hint.", "resources.", "occupancy")) and x.summary]
    return out


def _fmt_us(t: Any) -> str:
    return f"{t.median_us:,.2f} us" if t else "-"


def print_evaluation(e: Any) -> None:
    """An Evaluation for people (stdout): the verdict line, then what went wrong (the
    compiler's traceback, the candidate's output), then the table of numbers, so the table
    never lands inside a traceback."""
    from rich.console import Console
    from rich.table import Table

    from cutegen.codegen.evaluation import kernel_times_text, short_kernel_name

    con = Console()
    color = "green" if e.ok else ("yellow" if e.verdict.value == "suspicious" else "red")
    con.print(f"[bold {color}]{e.verdict.value}[/] at stage {e.stage.label}: ", end="")
    con.print(e.message, markup=False, highlight=False)
    for d in e.details[:3]:
        con.print(d if len(d) < 4000 else d[-4000:], markup=False, highlight=False)
    if not e.ok and e.log_tail:
        con.print("[dim]candidate output (tail):[/]")
        con.print(e.log_tail[-3000:], markup=False, highlight=False)
    tab = Table(show_header=False, box=None)
    if e.timing:
        tab.add_row("candidate", f"{_fmt_us(e.timing)}  (p10 {e.timing.p10_us:,.2f}, "
                    f"p90 {e.timing.p90_us:,.2f}, n={e.timing.n})")
        tab.add_row("eager", _fmt_us(e.eager) + ("  (cuDNN in fp32, as the candidate)"
                                                 if e.eager_tf32 else ""))
        if e.eager_tf32:
            tab.add_row("eager, TF32", _fmt_us(e.eager_tf32) + "  (torch's default: cuDNN in "
                        "TF32, less precise than the tolerance the candidate met)")
        tab.add_row("torch.compile", _fmt_us(e.compiled))
        for label, base, sp in (("speedup vs eager", e.eager, e.speedup_eager),
                                ("speedup vs eager, TF32", e.eager_tf32, e.speedup_eager_tf32),
                                ("speedup vs compile", e.compiled, e.speedup_compile)):
            if sp:
                tab.add_row(label, f"{sp:.2f}x{_ci(base, e.timing)}")
        if e.busy_us is not None and e.host_wait_fraction is not None:
            tab.add_row("GPU busy", f"{e.busy_us:,.2f} us of the span; the GPU waited on the "
                        f"host {100 * e.host_wait_fraction:.0f}% of it (between launches)")
        if e.roofline_fraction is not None and e.roofline:
            tab.add_row("roofline", f"{100 * e.roofline_fraction:.1f}% of the {e.roofline.kind} "
                        f"bound ({e.roofline.bound_us:,.2f} us)")
    if e.trials:
        worst = max(e.trials, key=lambda t: t.max_abs_err)
        tab.add_row("max abs error", f"{worst.max_abs_err:.3e} ({worst.label}; "
                    f"{sum(t.passed for t in e.trials)}/{len(e.trials)} trials passed)")
    if e.kernel_times:
        tab.add_row("GPU time by kernel", kernel_times_text(e.kernel_times))
    if e.kernels:
        tab.add_row("kernels", ", ".join(dict.fromkeys(short_kernel_name(k, 48)
                                                       for k in e.kernels)))
    if e.precision:
        tab.add_row("precision", e.precision)
    if e.flags:
        tab.add_row("flags", ", ".join(e.flags))
    if e.stage_seconds:
        tab.add_row("time spent", ", ".join(f"{k} {v:.2f}s" for k, v in e.stage_seconds.items()))
    if tab.row_count:
        con.print(tab)


def _ci(base: Any, cand: Any) -> str:
    """ (95% CI lo-hi), from the raw samples, or "" when they are not kept."""
    from cutegen.codegen.stats import bootstrap_ratio_ci

    if not (base and cand and base.samples_us and cand.samples_us):
        return ""
    lo, hi = bootstrap_ratio_ci(base.samples_us, cand.samples_us)
    return f"  (95% CI {lo:.2f}-{hi:.2f}, bootstrap of the medians)"


def task_summary(doc: str, width: int = 110) -> str:
    """A task docstring's first sentence (its first paragraph where no sentence ends in it),
    on one line, cut at a word with "…" past ``width`` characters."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    end = para.find(". ")
    text = para[:end + 1] if end >= 0 else para
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width - 1)
    return text[:cut if cut > 0 else width - 1].rstrip(",;:") + "…"


@click.command("tasks")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def tasks_cmd(as_json: bool) -> None:
    """List the bundled tasks (KernelBench format, sized to fill an H200)."""
    from cutegen.codegen.tasks import bundled_dir, bundled_task_names

    rows: list[dict[str, Any]] = []
    for name in bundled_task_names():
        src = (bundled_dir() / f"{name}.py").read_text()
        tree = ast.parse(src)
        doc = task_summary(ast.get_docstring(tree) or "")
        sizes = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, int)}
        rows.append({"name": name, "sizes": sizes, "description": doc})
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from cutegen.cli.table import print_table

    print_table(["task", "sizes", "description"],
                [[r["name"], " ".join(f"{k}={v}" for k, v in r["sizes"].items()),
                  r["description"]] for r in rows])


def register(cli: click.Group) -> None:
    cli.add_command(tasks_cmd)
    cli.add_command(eval_cmd)
