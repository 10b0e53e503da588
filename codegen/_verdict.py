"""From what the parent observed during one worker run to a verdict (pure functions).

The evaluator collects facts into a :class:`RunFacts` (messages the worker sent, the
verifier's comparisons, timeouts, exit status, its own clock readings); :func:`decide`
turns them into (stage, verdict, message, details, flags). The first failing stage
decides; a success needs every check to pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cutegen.codegen.evaluation import Stage, Verdict

#: aten ops that do the work a CuTe DSL candidate must do itself (seen by torch.profiler).
ATEN_COMPUTE = frozenset({
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
    "aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax",
    "aten::layer_norm", "aten::native_layer_norm", "aten::rms_norm", "aten::_fused_rms_norm",
    "aten::cross_entropy_loss", "aten::nll_loss", "aten::nll_loss_forward", "aten::gelu",
    "aten::relu", "aten::silu", "aten::sigmoid", "aten::tanh", "aten::sum", "aten::mean",
    "aten::cumsum", "aten::cumprod", "aten::exp", "aten::log", "aten::logsumexp", "aten::amax",
    "aten::convolution", "aten::_convolution", "aten::einsum", "aten::_scaled_mm",
    "aten::scaled_dot_product_attention", "aten::_efficient_attention_forward",
})
MARKER_KERNEL = re.compile(r"spin|_sleep|sleep_kernel", re.I)
FOREIGN_TIME_LIMIT = 0.25


@dataclass
class RunFacts:
    """Everything the parent saw while one candidate worker ran."""

    compile_only: bool = False
    error: dict[str, Any] | None = None  # the worker's "error" message
    timeout_phase: str | None = None
    killed_reason: str | None = None  # e.g. host memory limit
    protocol_error: str | None = None
    finished: bool = False  # "done" received
    exit_desc: str = ""
    compiled: dict[str, Any] | None = None  # compile-only "compiled" message
    kernel_names: list[str] = field(default_factory=list)
    trial_results: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    determinism_label: str = ""
    trial_meta_problems: list[str] = field(default_factory=list)
    profile: dict[str, Any] | None = None  # the worker's "kernels" message
    samples: list[float] | None = None
    late_calls: int = 0  # timed calls redone: queued after their start event had fired
    timed_results: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    host_per_call_us: float | None = None
    burst_event_us: float | None = None
    tampered: list[str] = field(default_factory=list)
    sol_us: float | None = None
    wants_bench: bool = True


@dataclass(frozen=True, slots=True)
class Decision:
    stage: Stage
    verdict: Verdict
    message: str
    details: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


def decide(f: RunFacts) -> Decision:
    """The verdict for one run. See the module docstring."""
    if f.timeout_phase:
        if f.timeout_phase == "compile":
            return Decision(Stage.COMPILE, Verdict.COMPILE_TIMEOUT, "cute.compile did not finish "
                            "within the compile timeout")
        where = {"import": "while importing the candidate", "init": "while constructing ModelNew",
                 "bench": "during the benchmark", "burst": "during the benchmark"}.get(
                     f.timeout_phase, f"in phase '{f.timeout_phase}' (a call of forward)")
        stage = Stage.BENCHMARK if f.timeout_phase in ("bench", "burst") else Stage.VERIFY
        return Decision(stage, Verdict.TIMEOUT, f"timed out {where}")
    if f.killed_reason:
        return Decision(Stage.VERIFY, Verdict.RESOURCE_LIMIT, f.killed_reason)
    if f.error is not None:
        v = Verdict(f.error.get("verdict", "crash"))
        phase = f.error.get("phase", "")
        stage = (Stage.COMPILE if v == Verdict.COMPILE_ERROR
                 else Stage.BENCHMARK if phase in ("bench", "burst") else Stage.VERIFY)
        details = (f.error.get("traceback", ""),) if f.error.get("traceback") else ()
        return Decision(stage, v, f.error.get("message", "") or v.value, details)
    if f.protocol_error:
        return Decision(Stage.VERIFY, Verdict.CRASH, "the worker's result stream was corrupted "
                        f"({f.protocol_error}); nothing it reported is trusted")
    if f.compile_only:
        if f.compiled is not None:
            note = f.compiled.get("note", "")
            return Decision(Stage.COMPILE, Verdict.COMPILED,
                            f"compiled {len(f.compiled.get('kernels', []))} kernel(s) for the target",
                            (note,) if note else ())
        return Decision(Stage.COMPILE, Verdict.CRASH, f"no result from the worker ({f.exit_desc})")
    # -- verification ---------------------------------------------------------------
    for label, r in f.trial_results:
        if not r.get("passed"):
            v = Verdict.NONDETERMINISTIC if label == f.determinism_label else Verdict.WRONG
            msg = r.get("reason") or r.get("error") or "mismatch"
            if v == Verdict.NONDETERMINISTIC:
                msg = ("same inputs, different pre-filled memory, different result (reads memory "
                       f"it did not write?): {msg}")
            return Decision(Stage.VERIFY, v, f"{label}: {msg}")
    if f.trial_meta_problems:
        return Decision(Stage.VERIFY, Verdict.WRONG, f.trial_meta_problems[0],
                        tuple(f.trial_meta_problems))
    flags: list[str] = []
    details: list[str] = []
    if f.profile is not None:
        d = kernel_proof(f.profile, f.kernel_names)
        if d is not None:
            return d
    if not f.finished and f.samples is None:
        return Decision(Stage.VERIFY, Verdict.CRASH, f"the worker ended without a result ({f.exit_desc})")
    if not f.wants_bench:
        return Decision(Stage.VERIFY, Verdict.CORRECT, "verified (benchmark skipped)")
    if f.samples is None:
        return Decision(Stage.BENCHMARK, Verdict.CRASH, f"no benchmark result ({f.exit_desc})")
    for i, r in f.timed_results:
        if not r.get("passed"):
            return Decision(Stage.BENCHMARK, Verdict.WRONG,
                            f"timed call {i} returned a wrong result: {r.get('reason') or r.get('error')}")
    if f.tampered:
        return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS,
                        f"the candidate replaced timing functions: {', '.join(f.tampered)}")
    med = sorted(f.samples)[len(f.samples) // 2]
    if f.sol_us is not None and med < f.sol_us:
        return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS,
                        f"{med:.2f} us is faster than the speed of light of this task "
                        f"({f.sol_us:.2f} us at datasheet peaks): timing or verification was fooled")
    if f.host_per_call_us is not None and f.burst_event_us is not None:
        # D1: over the same back-to-back calls, the parent's clock and the CUDA events
        # (idle gaps included) must agree; honest host-bound candidates agree too.
        h, b = f.host_per_call_us, f.burst_event_us
        details.append(f"back-to-back: {h:.2f} us per call by the host clock, {b:.2f} us by "
                       f"CUDA events; {med:.2f} us cold (median)")
        if h > 2.0 * b + 20.0:
            return Decision(Stage.BENCHMARK, Verdict.SUSPICIOUS,
                            f"timing disagreement: the host clock saw {h:.1f} us per call, "
                            f"CUDA events {b:.1f} us over the same calls", tuple(details))
        if b > 1.5 * med + 5.0:
            flags.append("host_bound")
    if f.late_calls:
        details.append(f"{f.late_calls} timed call(s) were queued after their start event had "
                       "fired (the host was slower than the GPU-side sleep) and were timed "
                       "again with a longer sleep")
    return Decision(Stage.BENCHMARK, Verdict.CORRECT, f"correct; {med:.2f} us median",
                    tuple(details), tuple(flags))


def kernel_proof(profile: dict[str, Any], ours: Sequence[str]) -> Decision | None:
    """RELIABILITY.md C3–C6: a CuTe kernel must have run, on the current stream, and no
    aten op may have done the work. ``None`` when the call looks honest."""
    kernels = [k for k in profile.get("gpu", []) if not MARKER_KERNEL.search(k["name"])]
    markers = [k for k in profile.get("gpu", []) if MARKER_KERNEL.search(k["name"])]
    mine = [k for k in kernels if _is_ours(k["name"], ours)]
    if not mine:
        seen = ", ".join(sorted({k["name"][:60] for k in kernels})[:5]) or "no kernels"
        return Decision(Stage.VERIFY, Verdict.DECOY, "no CuTe DSL kernel ran during a profiled "
                        f"call (the profiler saw: {seen})")
    aten = sorted(set(profile.get("aten", [])) & ATEN_COMPUTE)
    if aten:
        return Decision(Stage.VERIFY, Verdict.LIBRARY_CALL,
                        f"torch did the work: {', '.join(aten)} ran during the call")
    total = sum(k["us"] for k in kernels)
    foreign = sum(k["us"] for k in kernels if not _is_ours(k["name"], ours))
    if total > 0 and foreign / total > FOREIGN_TIME_LIMIT:
        names = sorted({k["name"][:60] for k in kernels if not _is_ours(k["name"], ours)})
        return Decision(Stage.VERIFY, Verdict.LIBRARY_CALL,
                        f"{100 * foreign / total:.0f}% of device time in non-CuTe kernels "
                        f"({', '.join(names[:4])})")
    if markers and markers[0].get("stream", -1) >= 0:
        main = markers[0]["stream"]
        off = {k["stream"] for k in mine if k.get("stream", -1) >= 0 and k["stream"] != main}
        if off:
            return Decision(Stage.VERIFY, Verdict.SUSPICIOUS, "CuTe kernels ran on a stream other "
                            "than the current one (side-stream work escapes the timer)")
    return None


def _is_ours(name: str, ours: Iterable[str]) -> bool:
    return any(name == o or name.startswith(o) or o.startswith(name) for o in ours)


_MMA = re.compile(r"\b(HGMMA|HMMA|IMMA|QGMMA)\.[0-9A-Za-z.]*|\b(wgmma\.mma_async|mma\.sync)[0-9A-Za-z._]*")


def detect_precision(sass_texts: Iterable[str], task_dtype: str) -> str:
    """The tensor-core input precision seen in SASS when it differs from the task's dtype
    ("tf32", "bf16", "f16"), else ""."""
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
