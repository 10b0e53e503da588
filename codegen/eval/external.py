"""Re-timing a candidate with a profiler outside its process (Nsight Compute).

The observer lives inside the candidate's process; a candidate that reaches native memory
(the one thing in-process defences cannot stop, docs/threat-model.md) could in principle
tamper with it. So a time that matters more than most — one beyond the measured roofline,
or the gated best — is checked by ``ncu``: a separate program that runs the candidate in a
fresh launcher process and reads every kernel's duration from the GPU's counters, with the
caches flushed before each kernel (``--cache-control all``) and the clocks left alone.

:func:`external_kernel_time` returns the median per call of the summed kernel durations
and every kernel name ncu saw that is not one of the candidate's CuTe kernels.
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cutegen.codegen.candidate import CandidateSource

if TYPE_CHECKING:
    from cutegen.codegen.eval.evaluator import LocalEvaluator

#: Measured calls ncu profiles (after two warm-up calls outside its range).
CALLS = 5
METRIC = "gpu__time_duration.sum"


@dataclass(frozen=True, slots=True)
class ExternalTime:
    tool: str
    median_us: float = 0.0
    calls: int = 0
    foreign: tuple[str, ...] = ()
    error: str = ""
    kernels: int = 1  # kernel launches per call


def per_call_us(durations_ns: list[tuple[str, float]], calls: int) -> list[float]:
    """Kernel durations in launch order split into ``calls`` equal groups, summed (pure)."""
    if calls <= 0 or not durations_ns or len(durations_ns) % calls:
        return []
    per = len(durations_ns) // calls
    return [sum(d for _, d in durations_ns[i * per:(i + 1) * per]) / 1e3 for i in range(calls)]


def external_kernel_time(ev: LocalEvaluator, cand: CandidateSource, *,
                         timeout_s: float = 300.0) -> ExternalTime:
    from cutegen.profilers import find_tool, run_counters_tool, run_tool
    from cutegen.profilers.ncu import NCU_CANDIDATES, parse_ncu_csv
    from cutegen.profilers.protocol import ENV_REPEAT, ENV_WARMUP

    binary = find_tool("ncu", candidates=NCU_CANDIDATES)
    if binary is None:
        return ExternalTime("ncu", error="ncu is not installed")
    base = Path(ev.scratch) / f"ext-{cand.short}"
    shutil.rmtree(base, ignore_errors=True)
    (base / "launch").mkdir(parents=True)
    (base / "report").mkdir()
    target = ev.profile_target(cand, None, base / "launch")
    if not target.launch_argv:
        return ExternalTime("ncu", error="no launcher")
    rep = base / "report" / "ext"
    env = target.child_env(**{ENV_WARMUP: "2", ENV_REPEAT: str(CALLS),
                              "CUTEGEN_LAUNCH_DENY": str(base / "report")}) or {}
    # under the host-wide counters lock: another evaluation's ncu would make this one fail
    run = run_counters_tool([binary, "--clock-control", "none", "--cache-control", "all",
                             "--profile-from-start", "off", "--target-processes", "all",
                             "--metrics", METRIC, "--export", str(rep), "--force-overwrite",
                             *target.launch_argv], timeout_s=timeout_s, env=env,
                            cwd=base / "launch")
    if not run.ok or not rep.with_suffix(".ncu-rep").is_file():
        return ExternalTime("ncu", error=f"ncu failed: {run.describe()}")
    imp = run_tool([binary, "--import", str(rep.with_suffix(".ncu-rep")), "--csv", "--page",
                    "raw", "--print-units", "base"], timeout_s=120, env=env, cap_bytes=8 << 20)
    kernels = parse_ncu_csv(imp.stdout)
    rows = [(k.name, k.number(METRIC) or 0.0) for k in kernels]
    times = per_call_us(rows, CALLS)
    if not times:
        return ExternalTime("ncu", error=f"ncu saw {len(rows)} kernel launches for {CALLS} calls")
    foreign = tuple(sorted({n for n, _ in rows if not n.startswith("kernel_cutlass")}))
    shutil.rmtree(base, ignore_errors=True)
    return ExternalTime("ncu", statistics.median(times), CALLS, foreign,
                        kernels=len(rows) // CALLS)
