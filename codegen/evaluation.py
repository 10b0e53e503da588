"""The records an evaluation produces: stages, verdicts, timings and the frozen Evaluation.

This module owns the vocabulary shared by the evaluator, the search, the store and the
profilers. Everything here is an immutable value that round-trips through JSON
(``to_dict`` / ``from_dict``), because evaluations are computed in one process, stored by
another and read back on resume.
"""

from __future__ import annotations

import enum
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: Bumped whenever a change to verification or timing could change a verdict or a number.
#: Stored with every evaluation; older "correct" verdicts are stale under a newer harness.
HARNESS_VERSION = 5  # 5: C16 on bytes only, FLOPs beyond the roofline to ncu (2026-12-06)
#: (3: spiky inputs, uninformative distributions left out, 2026-12-06)


def judged_elsewhere(counts: Mapping[int, int]) -> dict[int, int]:
    """Of ``{evaluator version: evaluations}`` (a run's, from the store), those another
    version than :data:`HARNESS_VERSION` judged: a run with any is not continued (its
    verdicts and times would mix two evaluators)."""
    return {v: n for v, n in counts.items() if v != HARNESS_VERSION}

#: Terminal escape sequences (colours, cursor moves) and the other control characters that
#: compiler output carries; tabs and line breaks are kept.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def plain_text(text: str) -> str:
    """``text`` as a person should read it: terminal colour codes and other control
    characters removed (messages stored before the evaluator stripped them still carry
    them, and they show as boxes in a browser)."""
    return _CONTROL.sub("", text)


def one_line(text: str, limit: int) -> str:
    """``text`` as plain text (:func:`plain_text`) on one line, whitespace runs as one
    space, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(plain_text(text).split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


class Stage(enum.IntEnum):
    """The stages of the pipeline, in order. An Evaluation records the last one reached."""

    STATIC = 0
    COMPILE = 1
    VERIFY = 2
    BENCHMARK = 3

    @property
    def label(self) -> str:
        return self.name.lower()


class Verdict(str, enum.Enum):
    """What an evaluation concluded about a candidate.

    Only ``CORRECT`` (verified and timed) and ``COMPILED`` (compile-only mode, nothing run)
    are successes. ``SUSPICIOUS`` means correct but timed faster than physics allows, or the
    harness saw tampering: it is kept out of "best" until a person looks.
    """

    CORRECT = "correct"
    COMPILED = "compiled"
    STATIC_REJECT = "static_reject"
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    WRONG = "wrong"
    WRONG_TYPE = "wrong_type"
    INPUT_MODIFIED = "input_modified"
    ALIASED_OUTPUT = "aliased_output"
    NONDETERMINISTIC = "nondeterministic"
    DECOY = "decoy"
    LIBRARY_CALL = "library_call"
    THREAD_SPAWNED = "thread_spawned"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OOM = "oom"
    RESOURCE_LIMIT = "resource_limit"
    SUSPICIOUS = "suspicious"
    FORBIDDEN = "forbidden"

    @property
    def ok(self) -> bool:
        return self in (Verdict.CORRECT, Verdict.COMPILED)

    @property
    def failure_kind(self) -> str:
        """The coarse class used for reward penalties and Lessons."""
        return _FAILURE_KIND[self]


_FAILURE_KIND = {
    Verdict.CORRECT: "none",
    Verdict.COMPILED: "none",
    Verdict.STATIC_REJECT: "static",
    Verdict.COMPILE_ERROR: "compile",
    Verdict.COMPILE_TIMEOUT: "compile",
    Verdict.WRONG: "wrong",
    Verdict.WRONG_TYPE: "wrong",
    Verdict.INPUT_MODIFIED: "wrong",
    Verdict.ALIASED_OUTPUT: "wrong",
    Verdict.NONDETERMINISTIC: "wrong",
    Verdict.DECOY: "cheat",
    Verdict.LIBRARY_CALL: "cheat",
    Verdict.THREAD_SPAWNED: "cheat",
    Verdict.SUSPICIOUS: "cheat",
    Verdict.FORBIDDEN: "cheat",
    Verdict.CRASH: "crash",
    Verdict.TIMEOUT: "timeout",
    Verdict.OOM: "crash",
    Verdict.RESOURCE_LIMIT: "crash",
}


@dataclass(frozen=True, slots=True)
class Timing:
    """Times of one provider (candidate, eager or torch.compile), in microseconds.

    ``samples_us`` are the raw per-call times, kept so every summary can be recomputed;
    ``method`` says how they were taken.
    """

    median_us: float
    p10_us: float
    p90_us: float
    n: int
    samples_us: tuple[float, ...] = ()
    method: str = "gpu-activity span (CUPTI observer), L2 flushed per call, fresh inputs per call"

    @staticmethod
    def from_samples(samples_us: Sequence[float], *, method: str | None = None) -> Timing:
        xs = sorted(float(s) for s in samples_us)
        if not xs:
            raise ValueError("no timing samples")
        kw = {"method": method} if method else {}
        return Timing(
            median_us=statistics.median(xs),
            p10_us=_quantile(xs, 0.10),
            p90_us=_quantile(xs, 0.90),
            n=len(xs),
            samples_us=tuple(float(s) for s in samples_us),
            **kw,
        )

    @property
    def spread(self) -> float:
        """Relative spread (p90 - p10) / median."""
        return (self.p90_us - self.p10_us) / self.median_us if self.median_us > 0 else math.inf


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = q * (len(sorted_xs) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class TrialResult:
    """One verification trial: one input set (shape, distribution, secret seed) compared."""

    label: str  # e.g. "main/randn" or "batch_size=127/uniform"
    passed: bool
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rmse: float = 0.0
    ref_rmse: float = 0.0  # error of the task's own dtype reference against float64


@dataclass(frozen=True, slots=True)
class KernelTime:
    """One kernel's part of the timed calls, from the native observer's records (what the GPU
    ran, never what the candidate reports): the median over the timed calls of its summed
    device time in a call, its launches a call, and whether it is one of the candidate's CuTe
    DSL kernels (else torch's, a copy or a memset). ``name`` is the kernel's symbol, or
    "memcpy ..." / "memset"."""

    name: str
    us: float
    launches: float
    cute: bool

    @property
    def short(self) -> str:
        return short_kernel_name(self.name)


def short_kernel_name(name: str, width: int = 60) -> str:
    """A kernel symbol for people: a CuTe DSL kernel's class name (``kernel_cutlass_kernel_
    cutegen_candidate_<hash>BatchNormKernel_object_at_...`` -> ``BatchNormKernel``), other
    names cut to ``width`` characters."""
    if name.startswith("kernel_cutlass_kernel_") and "_object_at_" in name:
        head = name[len("kernel_cutlass_kernel_"):name.index("_object_at_")]
        head = re.sub(r"^cutegen_candidate_[0-9a-f]{12}", "", head)
        cls = re.search(r"([A-Z][A-Za-z0-9]*)$", head)
        if cls:
            return cls.group(1)
    return name if len(name) <= width else name[:width - 3] + "..."


def kernel_times_text(times: Sequence[KernelTime], most: int = 5) -> str:
    """``times`` in one line for people: "ConvKernel 54.90 us, BatchNormKernel 2 x 30.10 us,
    memset 1.20 us (torch) ..."; launches shown where a call makes more than one."""
    parts = []
    for t in times[:most]:
        n = f"{t.launches:g} x " if t.launches > 1 else ""
        parts.append(f"{t.short} {n}{t.us:,.2f} us" + ("" if t.cute else " (not CuTe)"))
    more = len(times) - most
    return ", ".join(parts) + (f", and {more} more" if more > 0 else "")


@dataclass(frozen=True, slots=True)
class Roofline:
    """The task's speed-of-light: minimal bytes and FLOPs over the machine's ceilings."""

    bytes_moved: int
    flops: int
    bound_us: float  # max(bytes / bandwidth, flops / peak) with the ceilings below
    kind: str  # "memory" | "compute"
    bandwidth_gbs: float
    peak_tflops: float

    def fraction(self, time_us: float) -> float:
        return self.bound_us / time_us if time_us > 0 else math.inf


#: A call whose GPU waits on the host this part of its span or more is called host-bound
#: (reports and prompts say so: fewer launches, or less Python between them, would win).
HOST_BOUND = 0.25


def host_wait(busy_us: float | None, span_us: float | None) -> float | None:
    """The part of a call's span ``span_us`` in which the GPU ran none of its work (``busy_us``
    of it busy): waiting on the host between launches. None when either is unknown."""
    if busy_us is None or span_us is None or span_us <= 0:
        return None
    return max(0.0, 1.0 - busy_us / span_us)


#: How an evaluation's details begin where a baseline could not be timed (the reason follows):
#: the evaluator writes them, the bench's table reads them back (no speed-up is given).
EAGER_FAILED = "eager baseline failed (no speed-up is given): "
COMPILE_FAILED = "torch.compile baseline failed: "


def baseline_failure(details: tuple[str, ...] | list[str], prefix: str) -> str:
    """The reason after ``prefix`` (:data:`EAGER_FAILED` or :data:`COMPILE_FAILED`) in an
    evaluation's ``details``; "" when no such line is there."""
    for d in details:
        if d.startswith(prefix):
            return d[len(prefix):]
    return ""


#: Stages of ``Evaluation.stage_seconds`` that hold no GPU: the static checks run in the
#: search process before any worker starts.
HOST_STAGES = frozenset({"static"})


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The frozen result of evaluating one candidate against one task.

    Attributes:
        candidate_sha256: content hash of the candidate source.
        task_sha256: content hash of the task file.
        stage: last stage reached.
        verdict: the conclusion; see :class:`Verdict`.
        message: one line a person (or an LLM) can act on.
        details: further lines (compile error text, mismatch numbers, flags' reasons).
        trials: the verification trials, in order.
        timing: the candidate's timing (``None`` unless the benchmark stage ran).
        eager / compiled: the baselines' timings, measured in the trusted reference worker.
        roofline: the speed-of-light of the task on this machine, when known.
        flags: machine-readable notes ("precision:tf32", "timing_disagreement", ...).
        kernels: names of the CuTe DSL kernels the candidate compiled.
        precision: the arithmetic the candidate used where it differs from the task dtype.
        stage_seconds: wall time spent per stage, for "where the time goes".
        compile_cached: whether the compile result came from the cache.
        artifacts: paths (relative to the run directory) of PTX / cubin / SASS / logs.
        log_tail: the end of the candidate's stdout and stderr (capped).
        energy_j: joules per call where measured.
        busy_us: the median over the timed calls of the summed durations of each call's GPU
            work (the native observer's records). ``timing`` is the span of that work, so the
            difference is time the GPU waited on the host between the call's launches.
        kernel_times: where that GPU work went, kernel by kernel (:class:`KernelTime`),
            largest first.
        gpu: the device name the numbers were taken on.
        harness_version: :data:`HARNESS_VERSION` when this was computed.
        eager_tf32: eager as torch runs it by default where that differs from ``eager``:
            the task's cuDNN convolutions / recurrent layers in TF32
            (``torch.backends.cudnn.allow_tf32``, True unless set). ``eager`` runs them in
            fp32, the precision a candidate of an fp32 task is held to, and stays the
            speed-ups' baseline; this is shown beside it. None where the forward calls no
            such op.
    """

    candidate_sha256: str
    task_sha256: str
    stage: Stage
    verdict: Verdict
    message: str = ""
    details: tuple[str, ...] = ()
    trials: tuple[TrialResult, ...] = ()
    timing: Timing | None = None
    eager: Timing | None = None
    compiled: Timing | None = None
    roofline: Roofline | None = None
    flags: tuple[str, ...] = ()
    kernels: tuple[str, ...] = ()
    precision: str = ""
    stage_seconds: Mapping[str, float] = field(default_factory=dict)
    compile_cached: bool = False
    artifacts: Mapping[str, str] = field(default_factory=dict)
    log_tail: str = ""
    energy_j: float | None = None
    busy_us: float | None = None
    kernel_times: tuple[KernelTime, ...] = ()
    gpu: str = ""
    harness_version: int = HARNESS_VERSION
    eager_tf32: Timing | None = None

    # -- derived numbers -------------------------------------------------------------
    @property
    def ok(self) -> bool:
        return self.verdict.ok

    @property
    def time_us(self) -> float | None:
        return self.timing.median_us if self.timing else None

    @property
    def speedup_eager(self) -> float | None:
        if self.timing and self.eager and self.timing.median_us > 0:
            return self.eager.median_us / self.timing.median_us
        return None

    @property
    def speedup_eager_tf32(self) -> float | None:
        """The speed-up over eager with cuDNN in TF32 (torch's default; see ``eager_tf32``)."""
        if self.timing and self.eager_tf32 and self.timing.median_us > 0:
            return self.eager_tf32.median_us / self.timing.median_us
        return None

    @property
    def speedup_compile(self) -> float | None:
        if self.timing and self.compiled and self.timing.median_us > 0:
            return self.compiled.median_us / self.timing.median_us
        return None

    @property
    def gpu_seconds(self) -> float:
        """Wall time this evaluation held its GPU: ``stage_seconds["total"]``, which the
        evaluator measures from taking a worker to the verdict (the workers' start, import,
        compile, the calls, the reference worker's inputs and comparisons, the timed calls,
        the task's baselines where this evaluation timed them, an ncu re-timing); without it
        (an evaluator that does not measure it), the sum of the stages but the static
        checks. 0 where it ran on no GPU (``gpu`` empty: a compile-only evaluation)."""
        if not self.gpu:
            return 0.0
        if "total" in self.stage_seconds:
            return float(self.stage_seconds["total"])
        return sum(float(v) for k, v in self.stage_seconds.items() if k not in HOST_STAGES)

    @property
    def roofline_fraction(self) -> float | None:
        if self.timing and self.roofline:
            return self.roofline.fraction(self.timing.median_us)
        return None

    @property
    def host_wait_fraction(self) -> float | None:
        """The part of the candidate's median span in which the GPU ran none of its work:
        waiting on the host between launches (Python, argument marshalling). None when the
        observer's busy time is not known."""
        return host_wait(self.busy_us, self.timing.median_us if self.timing else None)

    @property
    def max_abs_err(self) -> float | None:
        return max((t.max_abs_err for t in self.trials), default=None)

    # -- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stage"] = self.stage.label
        d["verdict"] = self.verdict.value
        d["stage_seconds"] = dict(self.stage_seconds)
        d["artifacts"] = dict(self.artifacts)
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Evaluation:
        known = {f.name for f in fields(Evaluation)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["stage"] = Stage[str(d["stage"]).upper()]
        kw["verdict"] = Verdict(d["verdict"])
        # a record written before the field existed was judged by an older evaluator: version
        # 0, as the SQLite store's count reads it (not this cutegen's, which would let a
        # resumed run mix two evaluators' verdicts)
        kw["harness_version"] = int(d.get("harness_version", 0))
        kw["details"] = tuple(d.get("details", ()))
        kw["flags"] = tuple(d.get("flags", ()))
        kw["kernels"] = tuple(d.get("kernels", ()))
        kw["trials"] = tuple(TrialResult(**t) for t in d.get("trials", ()))
        kw["kernel_times"] = tuple(KernelTime(**k) for k in d.get("kernel_times", ()))
        for name in ("timing", "eager", "compiled", "eager_tf32"):
            t = d.get(name)
            kw[name] = _timing_from(t) if t else None
        r = d.get("roofline")
        kw["roofline"] = Roofline(**r) if r else None
        kw["stage_seconds"] = dict(d.get("stage_seconds", {}))
        kw["artifacts"] = dict(d.get("artifacts", {}))
        return Evaluation(**kw)


def _timing_from(t: Mapping[str, Any]) -> Timing:
    t = dict(t)
    t["samples_us"] = tuple(t.get("samples_us", ()))
    return Timing(**t)
