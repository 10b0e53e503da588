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
_SUMMARY = re.compile(r"^=+\s*(?:ERROR SUMMARY:\s*(?P<errors>\d+)\s+errors?\s*$"
                      r"|RACECHECK SUMMARY:.*?\((?P<race>\d+)\s+errors?)", re.IGNORECASE)
_UNPRINTED = re.compile(r"^=+\s*ERROR SUMMARY:\s*(?P<n>\d+)\s+errors? were not printed",
                        re.IGNORECASE)
_FIRST = re.compile(r"^=+\s+(?P<what>(Invalid|Race|Uninitialized|Barrier|Program hit|Misaligned|"
                    r"Out-of-range|Error)\b.*)$")
#: A failed CUDA API call on the host, not a fault in the kernel: cuda-python and the CuTe DSL
#: probe driver entry points with cuGetProcAddress, and each probe that fails is reported
#: (34 per launch on an H200, CUDA 13 driver 580). Not requested (--report-api-errors no),
#: and never counted as a kernel error when an older sanitizer prints them anyway.
_API_ERROR = re.compile(r"on CUDA API call to\b")
#: Arguments for every compute-sanitizer run: host API errors off (above), 20 errors printed.
SANITIZER_ARGS = ("--report-api-errors", "no", "--print-limit", "20")


@dataclass(frozen=True, slots=True)
class SanitizerResult:
    """What one compute-sanitizer tool reported.

    ``errors`` counts the kernel's errors (memory, race, hardware exceptions): the tool's
    summary less the host API errors it printed (``api_errors``). ``first`` is the first
    kernel error's line.
    """

    tool: str
    errors: int
    first: str = ""
    api_errors: int = 0


def parse_sanitizer_output(text: str, tool: str) -> SanitizerResult | None:
    """Read compute-sanitizer's ``=========``-prefixed output.

    Args:
        text: everything the run printed.
        tool: the tool that ran ("memcheck", "racecheck", ...).

    Returns:
        The result, or ``None`` when the output holds no summary line (the tool did not run).
        Errors that were not printed (``--print-limit``) cannot be told apart and count as
        kernel errors.
    """
    errors = None
    first = ""
    api = 0
    for line in text.splitlines():
        line = line.strip()
        if _UNPRINTED.match(line):
            continue
        m = _SUMMARY.match(line)
        if m:
            errors = int(m.group("errors") or m.group("race") or 0)
            continue
        f = _FIRST.match(line)
        if f is None:
            continue
        if _API_ERROR.search(line):
            api += 1
        elif not first:
            first = f.group("what").strip()
    if errors is None:
        return None
    return SanitizerResult(tool, max(errors - api, 0), first, api)


def findings(results: list[SanitizerResult]) -> tuple[Finding, ...]:
    """Facts per tool, and one ``hint.memory_safety`` when any tool found errors."""
    out: list[Finding] = []
    for r in results:
        out.append(Finding(f"sanitizer.{r.tool}.errors", r.errors,
                           f"compute-sanitizer {r.tool}: {r.errors} error(s)"))
        if r.api_errors:
            out.append(Finding(f"sanitizer.{r.tool}.api_errors", r.api_errors,
                               f"{r.api_errors} failed CUDA API call(s) on the host "
                               "(not kernel errors)"))
        if r.first:
            out.append(Finding(f"sanitizer.{r.tool}.first", r.first[:300]))
    bad = [r for r in results if r.errors]
    if bad:
        total = sum(r.errors for r in bad)
        first = next((r.first for r in bad if r.first), "")
        if first:
            text = (f"compute-sanitizer found {total} error(s) ({first[:120]}): fix "
                    "out-of-bounds indexing, guard partial tiles, add missing barriers")
        else:  # only errors past --print-limit: their kind is unknown
            text = (f"compute-sanitizer counted {total} error(s) it did not print: run "
                    "`cutegen sanitize` on the candidate to see them before trusting it")
        out.append(Finding("hint.memory_safety", total, text))
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
                run = run_tool([binary, "--tool", tool, *SANITIZER_ARGS, *target.launch_argv],
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
        run = run_tool([binary, "--tool", tool, *SANITIZER_ARGS, *command], timeout_s=timeout_s)
        parsed = parse_sanitizer_output(run.stdout + "\n" + run.stderr, tool)
        click.echo(json.dumps({"tool": tool, "returncode": run.returncode, "timed_out": run.timed_out,
                               "errors": parsed.errors if parsed else None,
                               "first": parsed.first if parsed else None}, indent=2))
        if run.timed_out or parsed is None or parsed.errors:
            raise SystemExit(1)
