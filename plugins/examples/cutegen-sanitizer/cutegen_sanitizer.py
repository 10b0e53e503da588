"""cutegen-sanitizer: a cutegen profiler plugin that runs candidates under compute-sanitizer.

It registers one profiler, ``sanitizer``, through the ``cutegen`` entry-point group, and
one command, ``cutegen sanitize``. The parser (:func:`parse_sanitizer_output`) is pure.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

import click
from cutegen.plugins import hookimpl
from cutegen.profilers import (
    Bottleneck,
    Finding,
    ProfileReport,
    ProfileTarget,
    Status,
    find_tool,
    gpu_visible,
    run_tool,
)

__version__ = "0.1.0"

CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda-*/bin/compute-sanitizer")
_SUMMARY = re.compile(r"^=+\s*(?:ERROR SUMMARY:\s*(?P<errors>\d+)\s+errors?"
                      r"|RACECHECK SUMMARY:.*?\((?P<race>\d+)\s+errors?)", re.IGNORECASE)
_FIRST = re.compile(r"^=+\s+(?P<what>(Invalid|Race|Uninitialized|Barrier|Program hit|Misaligned|"
                    r"Out-of-range|Error)\b.*)$")


@dataclass(frozen=True, slots=True)
class SanitizerResult:
    """What one compute-sanitizer tool reported: its error count and first error line."""

    tool: str
    errors: int
    first: str = ""


def parse_sanitizer_output(text: str, tool: str) -> SanitizerResult | None:
    """Read compute-sanitizer's ``=========``-prefixed output.

    Args:
        text: everything the run printed.
        tool: the tool that ran ("memcheck", "racecheck", ...).

    Returns:
        The result, or ``None`` when the output holds no summary line (the tool did not run).
    """
    errors = None
    first = ""
    for line in text.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            errors = int(m.group("errors") or m.group("race") or 0)
            continue
        f = _FIRST.match(line.strip())
        if f and not first:
            first = f.group("what").strip()
    return None if errors is None else SanitizerResult(tool, errors, first)


def findings(results: list[SanitizerResult]) -> tuple[Finding, ...]:
    """Facts per tool, and one ``hint.memory_safety`` when any tool found errors."""
    out: list[Finding] = []
    for r in results:
        out.append(Finding(f"sanitizer.{r.tool}.errors", r.errors,
                           f"compute-sanitizer {r.tool}: {r.errors} error(s)"))
        if r.first:
            out.append(Finding(f"sanitizer.{r.tool}.first", r.first[:300]))
    bad = [r for r in results if r.errors]
    if bad:
        total = sum(r.errors for r in bad)
        first = next((r.first for r in bad if r.first), "")
        out.append(Finding("hint.memory_safety", total,
                           f"compute-sanitizer found {total} error(s)"
                           + (f" ({first[:120]})" if first else "")
                           + ": fix out-of-bounds indexing, guard partial tiles, add missing barriers"))
    return tuple(out)


class SanitizerProfiler:
    """Runs the candidate's launcher under compute-sanitizer memcheck and racecheck."""

    name = "sanitizer"

    def __init__(self, *, tools: tuple[str, ...] = ("memcheck", "racecheck"),
                 binary: str | None = None) -> None:
        self.tools = tools
        self._binary = binary

    def _find(self, path: str | None = None) -> str | None:
        return self._binary or find_tool("compute-sanitizer", path=path, candidates=CANDIDATES)

    def is_available(self) -> bool:
        return self._find() is not None and gpu_visible()

    def applies_to(self, bottleneck: Bottleneck) -> bool:
        return bottleneck.measured  # only nodes that ran correctly on a GPU

    def profile(self, target: ProfileTarget, *, timeout_s: float) -> ProfileReport:
        t0 = time.monotonic()
        binary = self._find(target.search_path)
        if binary is None or not target.launch_argv:
            why = "compute-sanitizer not found" if binary is None else "no launcher for this candidate"
            return ProfileReport(self.name, Status.UNAVAILABLE, error=why, seconds=time.monotonic() - t0)
        results: list[SanitizerResult] = []
        log = target.workdir / "sanitizer.log"
        with log.open("w") as fh:
            for i, tool in enumerate(self.tools):
                left = (t0 + timeout_s - time.monotonic()) / (len(self.tools) - i)
                run = run_tool([binary, "--tool", tool, "--print-limit", "20", *target.launch_argv],
                               timeout_s=max(left, 1.0), env=target.child_env(), cwd=target.workdir)
                fh.write(f"# {tool}: {run.describe()}\n{run.stdout}{run.stderr}\n")
                if run.timed_out:
                    return ProfileReport(self.name, Status.TIMEOUT, findings(results), log,
                                         run.describe(), time.monotonic() - t0)
                parsed = parse_sanitizer_output(run.stdout + "\n" + run.stderr, tool)
                if parsed is None:
                    return ProfileReport(self.name, Status.FAILED, findings(results), log,
                                         f"{tool}: no summary line; {run.describe()}",
                                         time.monotonic() - t0)
                results.append(parsed)
        return ProfileReport(self.name, Status.OK, findings(results), log, None, time.monotonic() - t0)


@hookimpl
def register_profilers() -> list[SanitizerProfiler]:
    """The ``sanitizer`` profiler."""
    return [SanitizerProfiler()]


@hookimpl
def register_commands(cli: click.Group) -> None:
    """``cutegen sanitize -- CMD...``: run any command under compute-sanitizer."""

    @cli.command("sanitize", context_settings={"ignore_unknown_options": True})
    @click.option("--tool", default="memcheck", show_default=True,
                  type=click.Choice(["memcheck", "racecheck", "initcheck", "synccheck"]))
    @click.option("--timeout", "timeout_s", default=600.0, show_default=True, help="Seconds.")
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    def sanitize(tool: str, timeout_s: float, command: tuple[str, ...]) -> None:
        """Run COMMAND under compute-sanitizer and print its summary as JSON."""
        binary = SanitizerProfiler()._find()
        if binary is None:
            raise click.ClickException("compute-sanitizer not found (it ships with the CUDA toolkit)")
        run = run_tool([binary, "--tool", tool, "--print-limit", "20", *command], timeout_s=timeout_s)
        parsed = parse_sanitizer_output(run.stdout + "\n" + run.stderr, tool)
        click.echo(json.dumps({"tool": tool, "returncode": run.returncode, "timed_out": run.timed_out,
                               "errors": parsed.errors if parsed else None,
                               "first": parsed.first if parsed else None}, indent=2))
        if run.timed_out or parsed is None or parsed.errors:
            raise SystemExit(1)
