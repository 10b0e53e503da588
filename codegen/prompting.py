"""Prompt rendering: one strict renderer over package-data templates, and pure section
builders that turn records (Evaluation, Lessons, profiler findings) into prompt text.

Templates live in ``codegen/prompts/*.md`` and are read with :mod:`importlib.resources`.
:func:`render` substitutes ``${name}`` variables and raises :class:`PromptError` when a
variable is missing *or* unexpected, so a template and its caller cannot drift apart
silently. Fragments without variables (the primer, the contract) are inserted verbatim.

Three prompt kinds, each a (system, user) pair with the same system message (the primer,
the candidate contract, the answer format), so endpoints that cache prompt prefixes
cache it:

* :func:`initial_prompt`: first candidates from the reference;
* :func:`rewrite_prompt`: improve a parent, quoting its Evaluation, profiler findings and Lessons;
* :func:`repair_prompt`: a bounded repair turn quoting a compile error.
"""

from __future__ import annotations

import functools
import math
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources

from cutegen.codegen.evaluation import (
    HOST_BOUND,
    Evaluation,
    Timing,
    TrialResult,
    kernel_times_text,
)
from cutegen.codegen.rewriters.base import LessonView, RewriteContext
from cutegen.codegen.tasks import Task
from cutegen.errors import CuteGenError
from cutegen.profilers import Finding

#: Longest compile error / log quoted, in characters (head and tail are kept).
MAX_ERROR_CHARS = 6000
#: Lessons quoted in one prompt.
MAX_LESSONS = 8


class PromptError(CuteGenError):
    """A template is missing, or was rendered with missing or unexpected variables."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A rendered prompt: the system and the user message."""

    kind: str  # "initial" | "rewrite" | "repair"
    system: str
    user: str


@dataclass(frozen=True, slots=True)
class FocusHint:
    """One line of ``focus.md``: a direction for one proposal."""

    purpose: str  # "initial" | "rewrite"
    key: str
    text: str


# -- templates ------------------------------------------------------------------------
@functools.cache
def template_text(name: str) -> str:
    """The text of ``prompts/<name>.md``.

    Raises:
        PromptError: no such template.
    """
    path = resources.files("cutegen.codegen") / "prompts" / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, OSError) as e:
        raise PromptError(f"prompt template {name!r} not found ({path})") from e


def template_variables(text: str) -> set[str]:
    """The ``${name}`` / ``$name`` variables a template uses."""
    found: set[str] = set()
    for m in string.Template.pattern.finditer(text):
        if m.group("invalid") is not None:
            raise PromptError(f"invalid '$' at offset {m.start('invalid')} (write $$ for $)")
        name = m.group("named") or m.group("braced")
        if name:
            found.add(name)
    return found


def render(name: str, **context: str) -> str:
    """Render ``prompts/<name>.md`` with exactly the variables it uses.

    Raises:
        PromptError: a variable is missing, or one is given that the template does not use.
    """
    text = template_text(name)
    wanted = template_variables(text)
    missing, extra = wanted - context.keys(), context.keys() - wanted
    if missing or extra:
        raise PromptError(f"template {name!r}: missing {sorted(missing)}, "
                          f"unexpected {sorted(extra)}")
    return string.Template(text).substitute(context)


def focus_hints(purpose: str) -> tuple[FocusHint, ...]:
    """The focus hints of ``focus.md`` for one purpose, in file order."""
    out = []
    for line in template_text("focus").splitlines():
        if not line.startswith("- "):
            continue
        head, _, text = line[2:].partition(":")
        parts = head.split()
        if len(parts) != 2 or not text.strip():
            raise PromptError(f"focus.md: bad line {line!r}")
        if parts[0] == purpose:
            out.append(FocusHint(parts[0], parts[1], text.strip()))
    return tuple(out)


@functools.cache
def system_message() -> str:
    return render("system", primer=template_text("primer").strip(),
                  contract=template_text("contract").strip(),
                  output=template_text("output").strip())


# -- section builders (pure) ----------------------------------------------------------
def code_block(source: str, lang: str = "python") -> str:
    """``source`` in a fence longer than any backtick run inside it."""
    longest = max((len(run) for run in _backtick_runs(source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{source.rstrip()}\n{fence}"


def _backtick_runs(text: str) -> Iterable[str]:
    run = ""
    for ch in text:
        if ch == "`":
            run += ch
        elif run:
            yield run
            run = ""
    if run:
        yield run


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` cut to ``limit`` characters, keeping its head and tail."""
    text = text.strip()
    if len(text) <= limit:
        return text
    half = limit // 2
    skipped = len(text) - 2 * half
    return f"{text[:half]}\n[... {skipped} characters omitted ...]\n{text[-half:]}"


def _us(t: Timing) -> str:
    return f"{t.median_us:.1f} us (p10 {t.p10_us:.1f}, p90 {t.p90_us:.1f}, n={t.n})"


def format_trials(trials: Sequence[TrialResult]) -> str:
    """Verification trials: every failure with its numbers, passes counted."""
    if not trials:
        return ""
    failed = [t for t in trials if not t.passed]
    lines = [f"Verification: {len(trials) - len(failed)} of {len(trials)} trials passed."]
    for t in failed:
        num = (f"max_abs_err={t.max_abs_err:.3g}, max_rel_err={t.max_rel_err:.3g}, "
               f"rmse={t.rmse:.3g} (the reference's own rmse vs float64: {t.ref_rmse:.3g})")
        lines.append(f"- FAILED {t.label}: {t.reason or 'mismatch'}; {num}")
    return "\n".join(lines)


def format_timings(ev: Evaluation) -> str:
    """Candidate and baseline timings, speedups and the roofline fraction."""
    if ev.timing is None:
        return ""
    lines = [f"Time per call: {_us(ev.timing)}."]
    for label, base, speedup in (("PyTorch eager", ev.eager, ev.speedup_eager),
                                 ("torch.compile", ev.compiled, ev.speedup_compile)):
        if base is not None:
            tail = f"; speedup {speedup:.2f}x" if speedup is not None else ""
            lines.append(f"{label}: {_us(base)}{tail}.")
    if ev.eager_tf32 is not None and ev.speedup_eager_tf32 is not None:
        lines.append(f"(PyTorch eager above runs cuDNN in fp32, the precision the candidate is "
                     f"held to; with cuDNN in TF32, torch's default and less precise: "
                     f"{_us(ev.eager_tf32)}; speedup {ev.speedup_eager_tf32:.2f}x.)")
    if ev.roofline is not None and ev.roofline_fraction is not None:
        r = ev.roofline
        lines.append(f"Speed of light ({r.kind}-bound: {r.bytes_moved / 1e6:.1f} MB at "
                     f"{r.bandwidth_gbs:.0f} GB/s, {r.flops / 1e9:.2f} GFLOP): "
                     f"{r.bound_us:.1f} us; this candidate runs at "
                     f"{100 * ev.roofline_fraction:.0f}% of it.")
    wait = ev.host_wait_fraction
    if wait is not None and ev.busy_us is not None and wait >= HOST_BOUND:
        lines.append(f"The GPU was busy {ev.busy_us:.1f} us of that time and waited on the host "
                     f"for the rest ({100 * wait:.0f}%): the launches of one call are too many "
                     "or too far apart (Python between them); fewer, fused kernels win here.")
    if len(ev.kernel_times) > 1:  # one kernel: its time is the call's
        lines.append(f"GPU time by kernel (median a call): {kernel_times_text(ev.kernel_times)}.")
    return "\n".join(lines)


def format_evaluation(ev: Evaluation | None) -> str:
    """Everything the evaluator found about a candidate, for a prompt."""
    if ev is None:
        return "Not evaluated yet."
    head = f"Verdict: {ev.verdict.value} (reached the {ev.stage.label} stage)"
    parts = [head + (f": {ev.message}" if ev.message else ".")]
    if ev.details:
        parts.append("Details:\n" + clip("\n".join(ev.details)))
    trials = format_trials(ev.trials)
    if trials:
        parts.append(trials)
    timings = format_timings(ev)
    if timings:
        parts.append(timings)
    if ev.precision:
        parts.append(f"Declared precision: {ev.precision}.")
    if ev.flags:
        parts.append("Flags: " + ", ".join(ev.flags) + ".")
    if ev.log_tail and not ev.ok:
        parts.append("End of the candidate's output:\n" + clip(ev.log_tail, 2000))
    return "\n\n".join(parts)


def format_findings(findings: Sequence[Finding]) -> str:
    """Profiler findings as a prompt section: each finding's one-line summary, once ("" when
    there are none)."""
    lines = list(dict.fromkeys(f.summary for f in findings if f.summary))
    if not lines:
        return ""
    return "Profiler findings for this candidate:\n" + "\n".join(f"- {g}" for g in lines) + "\n\n"


def select_lessons(lessons: Sequence[LessonView], task: str,
                   limit: int = MAX_LESSONS) -> list[LessonView]:
    """The lessons most worth quoting: this task's first, then the largest effects."""
    def effect(lesson: LessonView) -> float:
        return abs(math.log(lesson.ratio)) if lesson.ratio and lesson.ratio > 0 else 0.0
    ranked = sorted(lessons, key=lambda x: (x.task != task, -effect(x)))
    return ranked[:limit]


def format_lessons(lessons: Sequence[LessonView], task: str) -> str:
    """Lessons as a prompt section ("" when there are none)."""
    chosen = select_lessons(lessons, task)
    if not chosen:
        return ""
    lines = []
    for x in chosen:
        ratio = f" {x.ratio:.2f}x" if x.ratio is not None else ""
        where = "" if x.task == task else f" (on {x.task})"
        lines.append(f"- [{x.outcome}{ratio}] {x.text or x.description}{where}")
    return "What earlier moves did (search memory):\n" + "\n".join(lines) + "\n\n"


# -- the three prompts ----------------------------------------------------------------
def initial_prompt(task: Task, *, focus: FocusHint,
                   lessons: Sequence[LessonView] = ()) -> Prompt:
    """The prompt that asks for a first candidate."""
    user = render("initial", task_name=task.name, task_source=code_block(task.source),
                  focus=focus.text, lessons=format_lessons(lessons, task.name))
    return Prompt("initial", system_message(), user)


def rewrite_prompt(ctx: RewriteContext, *, focus: FocusHint) -> Prompt:
    """The prompt that asks for an improved child of ``ctx.parent``.

    Raises:
        PromptError: the context has no parent.
    """
    if ctx.parent is None:
        raise PromptError("a rewrite prompt needs a parent candidate")
    user = render("rewrite", task_name=ctx.task.name, task_source=code_block(ctx.task.source),
                  parent_source=code_block(ctx.parent.code),
                  evaluation=format_evaluation(ctx.evaluation),
                  guidance=format_findings(ctx.findings),
                  lessons=format_lessons(ctx.lessons, ctx.task.name), focus=focus.text)
    return Prompt("rewrite", system_message(), user)


def repair_prompt(task: Task, broken_code: str, compile_error: str, *, round_no: int,
                  max_rounds: int) -> Prompt:
    """The prompt of a repair turn for a candidate that does not compile."""
    user = render("repair", task_name=task.name, task_source=code_block(task.source),
                  broken_source=code_block(broken_code),
                  compile_error=code_block(clip(compile_error), "text"),
                  round=str(round_no), max_rounds=str(max_rounds))
    return Prompt("repair", system_message(), user)
