"""From what the parent observed during one candidate run to a verdict (pure functions).

The evaluator collects facts into a :class:`RunFacts`: what the worker process said (only
its failures are believed: they can only make a candidate look worse), what the reference
worker found comparing outputs, what the native observer's authenticated records show ran
on the GPU in each call (:mod:`.activity`), the audit pipe's denials, timeouts and exit
status. :func:`decide` turns them into (stage, verdict, message, details, flags). The first
failing check decides; ``correct`` needs every check to pass, and every time it reports
comes from the observer, never from the candidate's process.

Faster than physics: a median below the task's speed of light (its bytes at the *datasheet*
bandwidth) is ``suspicious`` (impossible). A median beyond the *measured* roofline but within
the datasheet (e.g. a read-mostly kernel above the copy bandwidth, or one doing less
arithmetic than the reference's operations count) is possible; the evaluator
then has it re-timed by an external profiler (ncu) and keeps it ``correct`` only if that
agrees, else ``suspicious`` (see ``LocalEvaluator``).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cutegen.codegen.eval.activity import FOREIGN_ABS_US, FOREIGN_FRACTION, Activity, kernel_times
from cutegen.codegen.evaluation import Stage, Verdict

#: An external profiler's re-timing agrees with the observer's busy time within this (µs,
#: or relative) ...
EXTERNAL_ABS_US = 2.0
EXTERNAL_REL = 0.10
#: ... plus, on the slow side only, this much per kernel of a call: ncu, with the caches
#: invalidated before each kernel and the GPU idle between its serialised launches, read
#: one 16 MB scale-shift kernel (13.6-13.7 µs by the observer) at 15.2, 15.2, 16.4 and
#: 17.2 µs on an H100 (2026-12-05), never faster. A forged, faster observer time is still
#: caught: the allowance is on the side where ncu reads slower.
EXTERNAL_SLOW_PER_KERNEL_US = 2.5


def external_agrees(ext_us: float, busy_us: float, kernels: int = 1) -> bool:
    """Whether an external re-timing of a call (``ext_us``, summed over its ``kernels``)
    confirms the observer's ``busy_us`` (pure)."""
    slack = max(EXTERNAL_ABS_US, EXTERNAL_REL * busy_us)
    return -slack <= ext_us - busy_us <= slack + EXTERNAL_SLOW_PER_KERNEL_US * max(1, kernels)


#: An event pair honestly around a call reads at least the span of the call's GPU work; a
#: reading shorter by more than this (µs, or relative) is a forged timer.
EVENT_ABS_US = 2.0
EVENT_REL = 0.05
#: ... in more than this fraction of the timed calls.
EVENT_BAD_FRACTION = 0.2


@dataclass
class RunFacts:
    """Everything the parent saw while one candidate worker ran."""

    compile_only: bool = False
    error: dict[str, Any] | None = None  # the worker's "error" message
    timeout_phase: str | None = None
    killed_reason: str | None = None  # e.g. host memory limit
    protocol_error: str | None = None
    finished: bool = False  # "bye" received
    exit_desc: str = ""
    compiled: dict[str, Any] | None = None  # compile-only "compiled" message
    kernel_names: list[str] = field(default_factory=list)  # claimed by the worker's DSL hook
    trial_results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    determinism_label: str = ""
    handoff_failure: tuple[str, dict[str, Any]] | None = None  # (label, reference's reply)
    timed_results: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    ghost_result: dict[str, Any] | None = None
    ghost_k: int | None = None
    benchmarked: bool = False
    timed_ks: tuple[int, ...] = ()
    events_us: dict[int, float] = field(default_factory=dict)  # claimed by the worker
    activity: Activity | None = None
    observer_error: str = ""
    dropped_records: int = 0
    audit: list[str] = field(default_factory=list)
    audit_closed_early: bool = False
    audit_lost: bool = False  # the worker ended with sandbox.AUDIT_LOST_EXIT
    sol_us: float | None = None
    first_main_k: int = 0
    #: calls at a shape whose result, by the reference worker, has no elements (a hidden batch
    #: of 1 that a ``[:-1]`` cuts to none): nothing to compute, so no kernel is owed there
    empty_ks: frozenset[int] = frozenset()
    #: calls whose prefill the worker says stopped short for want of GPU memory
    prefill_short: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Decision:
    stage: Stage
    verdict: Verdict
    message: str
    details: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    samples: tuple[float, ...] = ()  # the observer's per-call times of the timed calls (µs)
    busy: tuple[float, ...] = ()  # per timed call: the summed durations of its GPU work (µs)
    #: where the timed calls' GPU work went (``activity.kernel_times``)
    kernel_times: tuple[tuple[str, float, float, bool], ...] = ()


def decide(f: RunFacts) -> Decision:
    """The verdict for one run. See the module docstring."""
    early = _process_faults(f)
    if early is not None:
        return early
    if f.compile_only:
        if f.compiled is not None:
            note = f.compiled.get("note", "")
            return Decision(Stage.COMPILE, Verdict.COMPILED,
                            f"compiled {len(f.compiled.get('kernels', []))} kernel(s) for the target",
                            (note,) if note else ())
        return Decision(Stage.COMPILE, Verdict.CRASH, f"no result from the worker ({f.exit_desc})")
    for check in (_verification, _observation, _benchmark):
        d = check(f)
        if d is not None:
            return d
    raise AssertionError("unreachable")  # _benchmark always decides


def _process_faults(f: RunFacts) -> Decision | None:
    if f.audit_lost:
        return Decision(Stage.VERIFY, Verdict.FORBIDDEN,
                        "the candidate attempted something candidates may not do after closing "
                        "or replacing the harness's audit pipe (the sandbox ended the process)",
                        tuple(f.audit[:20]))
    if f.audit:
        return Decision(Stage.VERIFY, Verdict.FORBIDDEN,
                        f"the candidate attempted {f.audit[0]}, which candidates may not do",
                        tuple(f.audit[:20]))
    if f.timeout_phase:
        if f.timeout_phase == "compile":
            return Decision(Stage.COMPILE, Verdict.COMPILE_TIMEOUT, "cute.compile did not finish "
                            "within the compile timeout")
        where = {"import": "while importing the candidate", "init": "while constructing ModelNew",
                 "handoff": "while handing outputs back",
                 "evaluation": "past the limit of one evaluation (--eval-timeout), most of the "
                               "time in the candidate's own calls"}.get(
                     f.timeout_phase, f"in phase '{f.timeout_phase}' (a call of forward)")
        stage = Stage.BENCHMARK if f.benchmarked else Stage.VERIFY
        return Decision(stage, Verdict.TIMEOUT, f"timed out {where}")
    if f.killed_reason:
        return Decision(Stage.VERIFY, Verdict.RESOURCE_LIMIT, f.killed_reason)
    if f.error is not None:
        v = Verdict(f.error.get("verdict", "crash"))
        stage = (Stage.COMPILE if v == Verdict.COMPILE_ERROR
                 else Stage.BENCHMARK if f.benchmarked else Stage.VERIFY)
        details = (f.error.get("traceback", ""),) if f.error.get("traceback") else ()
        return Decision(stage, v, f.error.get("message", "") or v.value, details)
    if f.protocol_error:
        return Decision(Stage.VERIFY, Verdict.CRASH, "the worker's result stream was corrupted "
                        f"({f.protocol_error}); nothing it reported is trusted")
    if f.audit_closed_early:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, "the candidate closed the harness's "
                        "audit pipe (its sandbox reports could no longer reach the parent)")
    return None


def _verification(f: RunFacts) -> Decision | None:
    for label, r in f.trial_results:
        if not r.get("passed"):
            v = Verdict(r.get("verdict") or "wrong")
            msg = r.get("reason") or r.get("error") or "mismatch"
            if label == f.determinism_label and v == Verdict.WRONG:
                v = Verdict.NONDETERMINISTIC
                msg = ("same inputs, different pre-filled memory, different result (reads memory "
                       f"it did not write?): {msg}")
            return Decision(Stage.VERIFY, v, f"{label}: {msg}")
    if f.handoff_failure is not None:
        label, r = f.handoff_failure
        v = Verdict(r.get("verdict") or "wrong")
        return Decision(Stage.BENCHMARK if f.benchmarked else Stage.VERIFY, v,
                        f"{label}: {r.get('reason') or 'bad output'}")
    if not f.trial_results:
        return Decision(Stage.VERIFY, Verdict.CRASH, f"the worker ended before any verified "
                        f"call ({f.exit_desc or 'no result'})")
    return None


def _observation(f: RunFacts) -> Decision | None:
    """What really ran on the GPU (RELIABILITY.md C3–C7, lesson 11)."""
    if f.observer_error:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, "the GPU activity observer's channel "
                        f"failed ({f.observer_error}); nothing can be said about what ran")
    if f.dropped_records:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, f"the GPU activity observer dropped "
                        f"{f.dropped_records} record(s); the calls cannot be accounted for")
    a = f.activity
    if a is None:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, "no GPU activity was observed")
    if a.identity.mimics:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS,
                        "a module loaded outside the CuTe DSL defines the candidate's kernel "
                        f"name(s) {', '.join(n[:60] for n in a.identity.mimics[:3])}")
    blind = [k for k, c in a.calls.items() if not c.harness_ok]
    if blind:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, f"call {blind[0]} shows none of the "
                        "harness's own GPU work: the harness was bypassed or the observer blinded")
    if a.outside:
        names = _names(o.name for o in a.outside)
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, f"{len(a.outside)} GPU operation(s) ran "
                        f"outside every call of forward ({names})")
    if a.incomplete:
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, f"{len(a.incomplete)} GPU operation(s) "
                        f"never finished ({_names(o.name for o in a.incomplete)})")
    late = [(k, c) for k, c in sorted(a.calls.items()) if c.late]
    if late:
        k, c = late[0]
        return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, f"call {k} returned while GPU work was "
                        f"still running ({_names(o.name for o in c.late)}): work escapes the "
                        "call (side stream or background thread)")
    if not any(c.cute_kernels for c in a.calls.values()):
        seen = _names(n for c in a.calls.values() for n in c.foreign)
        return Decision(Stage.VERIFY, Verdict.DECOY, "no CuTe DSL kernel of the candidate ran "
                        f"in any call (the GPU ran: {seen or 'nothing'})")
    for k, c in sorted(a.calls.items()):
        if k == f.ghost_k:
            if c.cute_kernels:
                return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, "CuTe DSL kernels ran in the "
                                "call where the harness had disabled them")
            continue
        if k == f.first_main_k:
            continue  # the first call compiles and may set up workspaces (reported, not judged)
        if c.cute_kernels == 0 and k not in f.empty_ks:
            return Decision(Stage.VERIFY, Verdict.DECOY, f"call {k} ran no CuTe DSL kernel "
                            f"(the GPU ran: {', '.join(c.foreign[:4]) or 'nothing'})")
        if c.foreign_over_allowance:
            return Decision(Stage.VERIFY, Verdict.LIBRARY_CALL,
                            f"call {k} spent {c.foreign_us:.1f} us of its {c.cute_us + c.foreign_us:.1f} "
                            f"us of GPU time outside the candidate's CuTe kernels "
                            f"({', '.join(c.foreign[:4])}); the allowance is "
                            f"{FOREIGN_FRACTION:.0%} or {FOREIGN_ABS_US:g} us")
    if f.ghost_result is not None and f.ghost_result.get("unchanged"):
        return Decision(Stage.VERIFY, Verdict.DECOY, "with the candidate's CuTe kernels disabled "
                        "its output did not change: the kernels do not compute it")
    return None


def _benchmark(f: RunFacts) -> Decision:
    if not f.benchmarked:
        return Decision(Stage.VERIFY, Verdict.CORRECT, "verified (benchmark skipped)")
    for i, r in f.timed_results:
        if not r.get("passed"):
            v = Verdict(r.get("verdict") or "wrong")  # the reference worker's (oom, say)
            what = "returned a wrong result" if v == Verdict.WRONG else f"ended {v.value}"
            return Decision(Stage.BENCHMARK, v,
                            f"timed call {i} {what}: {r.get('reason') or r.get('error')}")
    a = f.activity
    assert a is not None
    samples: list[float] = []
    for k in f.timed_ks:
        c = a.calls.get(k)
        if c is None or c.span_us is None:
            return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS, f"timed call {k} shows no GPU work")
        samples.append(c.span_us)
    if not samples:
        return Decision(Stage.BENCHMARK, Verdict.CRASH, f"no timed call completed ({f.exit_desc})")
    med = statistics.median(samples)
    details = [f"time: span of the call's GPU work from the observer's records, median of "
               f"{len(samples)} calls",
               f"outputs of {len(f.timed_results)} warm-up and timed calls compared with the "
               f"reference (drawn in the parent before the first call)"]
    bad = []
    for k in f.timed_ks:
        ev, span = f.events_us.get(k), a.calls[k].span_us
        assert span is not None
        # An event pair around the call covers at least the call's GPU work on the harness's
        # stream; reading less than the observer's span is a forged timer or work escaping
        # the events (a side stream). Reading more is the launch gap: honest.
        if ev is None or ev < span - max(EVENT_ABS_US, EVENT_REL * span):
            bad.append((k, ev, span))
    rows = [f"call {k}: events {f.events_us.get(k, float('nan')):.1f} us, span "
            f"{a.calls[k].span_us:.1f} us, CuTe {a.calls[k].cute_us:.1f} us, other "
            f"{a.calls[k].foreign_us:.1f} us" for k in f.timed_ks[:3]]
    details.append("first timed calls: " + "; ".join(rows))
    if len(bad) > EVENT_BAD_FRACTION * len(f.timed_ks):
        k, ev, span = bad[0]
        return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS,
                        f"timing disagreement: the candidate's CUDA events read "
                        f"{'nothing' if ev is None else f'{ev:.1f} us'} for call {k}, shorter than "
                        f"the {span:.1f} us of GPU work the observer saw in it ({len(bad)} of "
                        f"{len(f.timed_ks)} calls)", tuple(details), samples=tuple(samples))
    if f.sol_us is not None and med < f.sol_us:
        return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS,
                        f"{med:.2f} us is faster than the speed of light of this task "
                        f"({f.sol_us:.2f} us: its bytes at the datasheet bandwidth): timing or "
                        "verification was fooled",
                        tuple(details), samples=tuple(samples))
    flags: list[str] = []
    if not a.identity.verified:
        flags.append("review:kernel_identity_unverified")
        details.append("no module records: CuTe kernels were identified by the names the "
                       "candidate's process reported")
    if f.prefill_short:
        flags.append("review:prefill_short")
        details.append(f"the memory filled before a call (so that an output left unwritten "
                       f"reads as garbage) fell short of the harness's blocks in "
                       f"{len(f.prefill_short)} call(s): no room on the GPU beside the task's "
                       f"inputs and the candidate's own memory")
    busy = tuple(a.calls[k].cute_us + a.calls[k].foreign_us + a.calls[k].benign_us
                 for k in f.timed_ks)
    per_kernel = kernel_times([a.calls[k] for k in f.timed_ks], a.identity)
    return Decision(Stage.BENCHMARK, Verdict.CORRECT, f"correct; {med:.2f} us median",
                    tuple(details), tuple(flags), tuple(samples), busy, per_kernel)


def reference_flags(trials: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """``review:fp32_reference`` where any comparison had the task's own fp32 arithmetic for
    its reference (the reference worker's ``"reference": "fp32"``: it could not compute the
    float64 one, an op without float64 support or no room for it): such a verdict rests on
    a weaker truth, said in the comparison's reason and flagged for whoever reads it."""
    if any(r.get("reference") == "fp32" for _, r in trials):
        return ["review:fp32_reference"]
    return []


def above_roofline(ext: Any, *, median_us: float, busy_us: float, bound_us: float,
                   message: str) -> tuple[Verdict, str, list[str]]:
    """The policy for a time beyond the measured roofline (see the module docstring).

    ``ext`` is an external profiler's re-timing (:class:`.external.ExternalTime`): kernel
    time per call summed over the call's kernels, so it is held against ``busy_us``, the
    observer's summed durations per call. Confirmed (:func:`external_agrees`) with no
    foreign kernel: ``correct``; anything else, no profiler included: ``suspicious``."""
    if ext.error:
        return (Verdict.SUSPICIOUS, f"{median_us:.2f} us is beyond the measured roofline "
                f"({bound_us:.2f} us) and no external profiler could confirm it ({ext.error})", [])
    ok = external_agrees(ext.median_us, busy_us, ext.kernels)
    line = (f"above the measured roofline: re-timed by {ext.tool} at {ext.median_us:.2f} us "
            f"of kernel time per call ({ext.calls} calls) against the observer's {busy_us:.2f} us")
    if ok and not ext.foreign:
        return Verdict.CORRECT, message, [line + ": confirmed"]
    why = f"foreign kernels {', '.join(ext.foreign[:3])}" if ext.foreign else "the times disagree"
    return Verdict.SUSPICIOUS, f"not confirmed by {ext.tool}: {why}", [line]


def _names(names: Iterable[str], n: int = 4) -> str:
    seen: list[str] = []
    for x in names:
        x = x[:60]
        if x not in seen:
            seen.append(x)
    return ", ".join(seen[:n]) + (" ..." if len(seen) > n else "")


_MMA = re.compile(r"\b(HGMMA|HMMA|IMMA|QGMMA)\.[0-9A-Za-z.]*|\b(wgmma\.mma_async|mma\.sync)[0-9A-Za-z._]*")


def detect_precision(sass_texts: Iterable[str], task_dtype: str) -> str:
    """The tensor-core input precision seen in SASS or PTX when it differs from the task's
    dtype ("tf32", "bf16", "f16"), else ""."""
    seen: set[str] = set()
    for text in sass_texts:
        for m in _MMA.finditer(text):
            op = m.group(0).upper()
            op = op.replace("_", ".")
            for tag, name in ((".TF32", "tf32"), (".BF16", "bf16"), (".F16", "f16"),
                              (".E4M3", "fp8"), (".E5M2", "fp8")):
                if tag in op:
                    seen.add(name)
    task = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(task_dtype, task_dtype)
    lower = sorted(p for p in seen if p != task)
    return "+".join(lower)


def summarise(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples):.2f} us" if samples else "n/a"
