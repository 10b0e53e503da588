"""Driving one candidate worker through a job and turning what it said into an Evaluation.

Split from :mod:`cutegen.codegen.evaluator` to keep modules small; the evaluator owns the
processes, this module owns one run's event loop (timeouts per phase, the memory
watchdog, forwarding outputs to the trusted verifier, the go/no-go before the benchmark).
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutegen.codegen._proc import Child, marked_pids
from cutegen.codegen._verdict import RunFacts, decide
from cutegen.codegen.candidate import CandidateSource
from cutegen.codegen.compile_cache import CompileEntry
from cutegen.codegen.evaluation import Evaluation, Stage, Timing, TrialResult, Verdict
from cutegen.errors import InfrastructureError

if TYPE_CHECKING:
    from cutegen.codegen.evaluator import LocalEvaluator

_PHASE_GROUP = {"import": "setup", "init": "setup", "compile": "compile", "call": "call",
                "verify": "verify", "profile": "verify", "bench": "benchmark",
                "burst": "benchmark"}


@dataclass
class _Loop:
    """State of one worker run as seen by the parent."""

    facts: RunFacts
    phase: str = "start"
    phase_t: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=dict)
    pending: dict[int, str] = field(default_factory=dict)  # ref request id -> trial label
    trial_of: dict[int, str] = field(default_factory=dict)
    timed: list[dict[str, Any]] = field(default_factory=list)
    sass: list[str] = field(default_factory=list)
    burst_t0: float | None = None

    def enter(self, phase: str, t: float) -> None:
        g = _PHASE_GROUP.get(self.phase)
        if g:
            self.seconds[g] = self.seconds.get(g, 0.0) + (t - self.phase_t)
        self.phase, self.phase_t = phase, t


def build_trials(info: dict[str, Any], *, main_trials: int, rng: secrets.SystemRandom
                 ) -> tuple[list[dict[str, Any]], dict[int, str], str]:
    """Trials with secret seeds: several distributions on the main shape, one per hidden
    shape, and a determinism re-run of the first trial with other pre-filled memory."""
    dists = list(info["distributions"])
    first = ["randn"] if "randn" in dists else []
    rest = [d for d in dists if d not in first]
    rng.shuffle(rest)
    chosen = (first + rest)[:main_trials]
    while len(chosen) < main_trials:
        chosen.append(rng.choice(dists))
    trials, labels = [], {}
    for k, d in enumerate(chosen):
        trials.append({"i": k, "shape": 0, "seed": rng.getrandbits(62), "dist": d,
                       "prefill": "nan" if k % 2 == 0 else "rand"})
        labels[k] = f"main/{d}"
    for idx in range(1, len(info["shapes"])):
        d = rng.choice(dists)
        k = len(trials)
        trials.append({"i": k, "shape": idx, "seed": rng.getrandbits(62), "dist": d,
                       "prefill": "nan" if k % 2 == 0 else "rand"})
        labels[k] = f"{info['shapes'][idx]['label']}/{d}"
    k = len(trials)
    trials.append({**trials[0], "i": k, "prefill": "rand"})
    labels[k] = f"main/{trials[0]['dist']}/determinism"
    return trials, labels, labels[k]


def _job(ev: LocalEvaluator, cand_path: Path, token: str, info: dict[str, Any],
         trials: list[dict[str, Any]], *, bench: bool, check_kernels: bool,
         rng: secrets.SystemRandom) -> dict[str, Any]:
    o = ev.options
    job: dict[str, Any] = {"candidate_path": str(cand_path), "token": token,
                           "scratch": str(cand_path.parent), "shapes": info["shapes"],
                           "trials": trials, "check_kernels": check_kernels}
    if bench:
        runs = o.bench_runs
        job["bench"] = {"warmup": o.bench_warmup, "runs": runs, "seed0": rng.getrandbits(40),
                        "dist": "randn", "recheck": sorted({runs - 1, rng.randrange(runs // 2, runs - 1)})}
    return job


def _wait_ready(ev: LocalEvaluator, w: Child) -> None:
    deadline = time.monotonic() + ev.options.run_timeout_s + 180
    while True:
        e = w.next_event(deadline - time.monotonic())
        if e is None or e[0] != "msg":
            tail = w.log_tail()
            w.kill()
            raise InfrastructureError(f"a candidate worker failed to start ({w.exit_description()})"
                                      + (f"\n{tail}" if tail else ""))
        if e[1]["t"] == "infra":
            w.kill()
            raise InfrastructureError(e[1]["message"])
        if e[1]["t"] == "ready":
            return


def _drive(ev: LocalEvaluator, w: Child, job: dict[str, Any], loop: _Loop) -> None:
    """Run the worker's job to its end, filling ``loop`` (never raises for candidate faults)."""
    o = ev.options
    f = loop.facts
    w.send_line(job)
    loop.enter("start", time.monotonic())
    deadline = time.monotonic() + o.run_timeout_s
    next_rss = time.monotonic() + 0.5
    while True:
        now = time.monotonic()
        if now >= deadline:
            f.timeout_phase = loop.phase
            return
        if now >= next_rss:
            next_rss = now + 0.5
            if w.rss_bytes() > o.host_mem_limit_mb * 2**20:
                f.killed_reason = (f"host memory above the {o.host_mem_limit_mb} MiB limit "
                                   f"in phase '{loop.phase}'")
                return
        e = w.next_event(min(deadline - now, 0.5))
        if e is None:
            continue
        kind, msg, t = e
        if kind == "eof":
            try:
                w.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - still running: it closed the pipe itself
                pass
            f.exit_desc = w.exit_description() if not w.alive() else "closed its result pipe"
            return
        if kind == "protocol_error":
            f.protocol_error = str(msg)
            return
        typ = msg.get("t")
        if typ == "phase":
            loop.enter(str(msg.get("phase")), t)
            limit = o.compile_timeout_s if loop.phase == "compile" else o.run_timeout_s
            deadline = t + limit
        elif typ == "trial":
            i = int(msg["i"])
            label = loop.trial_of.get(i, f"trial {i}")
            for k, m in enumerate(msg.get("meta", [])):
                if m and not m.get("contiguous", True):
                    f.trial_meta_problems.append(f"{label}: output {k} is not contiguous")
                if m and m.get("device") not in (None, "cuda"):
                    f.trial_meta_problems.append(f"{label}: output {k} is on {m.get('device')}")
            tr = next(x for x in job["trials"] if int(x["i"]) == i)
            rid = ev._ref_send({"op": "compare", "shape": tr["shape"], "seed": tr["seed"],
                                "dist": tr["dist"], "path": msg["path"]})
            loop.pending[rid] = label
            f.kernel_names = list(msg.get("kernels", f.kernel_names))
        elif typ == "kernels":
            f.profile = msg
        elif typ == "await_go":
            ok = _collect(ev, loop)
            if not ok or f.trial_meta_problems or _proof_fails(f):
                f.wants_bench = False
                return
            loop.enter("wait", time.monotonic())
            ev.baselines()  # measured while the candidate worker idles (never concurrently)
            w.send_line("go")
            deadline = time.monotonic() + o.run_timeout_s
        elif typ == "timing":
            f.samples = [float(x) for x in msg["samples"]]
            f.late_calls = int(msg.get("late", 0))
        elif typ == "timed_output":
            loop.timed.append(msg)
        elif typ == "burst_start":
            loop.burst_t0 = t
        elif typ == "burst_end" and loop.burst_t0 is not None:
            calls = max(1, int(msg["calls"]))
            f.host_per_call_us = (t - loop.burst_t0) * 1e6 / calls
            f.burst_event_us = float(msg.get("event_us", 0.0))
        elif typ == "tamper":
            f.tampered = list(msg.get("names", []))
        elif typ in ("compile_info", "compiled"):
            f.kernel_names = list(msg.get("kernels", f.kernel_names))
            loop.sass.extend(msg.get("sass", []))
            if typ == "compiled":
                f.compiled = msg
        elif typ == "error":
            f.error = msg
            return
        elif typ == "infra":
            raise InfrastructureError(str(msg.get("message")))
        elif typ == "done":
            f.finished = True
            return


def _proof_fails(f: RunFacts) -> bool:
    from cutegen.codegen._verdict import kernel_proof

    return f.profile is not None and kernel_proof(f.profile, f.kernel_names) is not None


def _collect(ev: LocalEvaluator, loop: _Loop) -> bool:
    """Wait for every pending comparison; True if all passed."""
    ok = True
    for rid, label in list(loop.pending.items()):
        r = ev._ref_result(rid, timeout=ev.options.run_timeout_s * 4)
        loop.facts.trial_results.append((label, r))
        ok = ok and bool(r.get("passed"))
        del loop.pending[rid]
    return ok


def _gpu_released(pids: set[int], timeout: float = 15.0) -> bool:
    """After a kill, wait until none of ``pids`` holds a GPU context (A3). True if released
    (or NVML cannot tell)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to check
        return True
    try:
        deadline = time.monotonic() + timeout
        while True:
            busy = set()
            for d in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(d)
                for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                    busy.add(int(p.pid))
            if not busy & pids:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.25)
    except Exception:  # noqa: BLE001
        return True
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def foreign_pids(device_pids: dict[int, set[int]], worker: set[int],
                 own: set[int]) -> set[int] | None:
    """Processes other than ours holding a context on the GPU the candidate worker used.

    ``device_pids`` maps each NVML device to the pids with a compute context on it; the
    worker's device is the one listing a worker pid. ``None`` when no device lists one (no
    NVML, or pids from another namespace): then nothing can be said.
    """
    for pids in device_pids.values():
        if pids & worker:
            return pids - worker - own
    return None


def _device_pids() -> dict[int, set[int]]:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: nothing to check
        return {}
    try:
        return {d: {int(p.pid) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(
                    pynvml.nvmlDeviceGetHandleByIndex(d))}
                for d in range(pynvml.nvmlDeviceGetCount())}
    except Exception:  # noqa: BLE001
        return {}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _sharers(ev: LocalEvaluator, w: Child) -> set[int] | None:
    """Foreign processes on the timed GPU right after the benchmark (see foreign_pids)."""
    own = {os.getpid()}
    for c in (ev._ref, ev._spare):
        if c is not None:
            own |= marked_pids(c.token) | {c.proc.pid}
    return foreign_pids(_device_pids(), marked_pids(w.token) | {w.proc.pid}, own)


def _finish_worker(ev: LocalEvaluator, w: Child, loop: _Loop) -> str:
    killed = w.kill()
    if (loop.facts.timeout_phase or loop.facts.killed_reason) and ev.mode == "gpu":
        if not _gpu_released(killed):
            raise InfrastructureError(
                "the GPU still holds a killed worker's context 15 s after the kill; the device "
                "is unhealthy and the search pauses (RELIABILITY.md A3)")
    return w.log_tail()


def run_candidate(ev: LocalEvaluator, cand: CandidateSource, info: dict[str, Any], *, key: str,
                  entry: CompileEntry | None, t0: float) -> Evaluation:
    rng = secrets.SystemRandom()
    w = ev._take_worker()
    ev._warm_spare()
    t_wait = time.monotonic()
    _wait_ready(ev, w)
    wdir: Path = w.workdir  # type: ignore[attr-defined]
    cand_path = wdir / f"cand_{cand.short}.py"
    cand_path.write_text(cand.code, encoding="utf-8")
    compile_only = ev.mode == "compile"
    trials, labels, det = ([], {}, "") if compile_only else build_trials(
        info, main_trials=ev.options.main_trials, rng=rng)
    job = _job(ev, cand_path, w.token, info, trials, bench=not compile_only,
               check_kernels=ev.options.check_kernels and not compile_only, rng=rng)
    rl, sol = ev.roofline_for(info)
    loop = _Loop(RunFacts(compile_only=compile_only, determinism_label=det, sol_us=sol),
                 trial_of=labels)
    loop.seconds["worker_start"] = time.monotonic() - t_wait
    sharers: set[int] | None = None
    try:
        _drive(ev, w, job, loop)
        if not compile_only and loop.facts.samples:
            sharers = _sharers(ev, w)
    finally:
        log_tail = _finish_worker(ev, w, loop)
    f = loop.facts
    f.exit_desc = f.exit_desc or w.exit_description()
    t_cmp = time.monotonic()
    if loop.pending:
        _collect(ev, loop)
    for m in loop.timed:
        r = ev._ref_call({"op": "compare", "shape": 0, "seed": m["seed"], "dist": m["dist"],
                          "path": m["path"]}, timeout=ev.options.run_timeout_s * 4)
        f.timed_results.append((int(m["i"]), r))
    loop.seconds["verify"] = loop.seconds.get("verify", 0.0) + time.monotonic() - t_cmp
    loop.enter("end", time.monotonic())
    d = decide(f)
    artifacts = _store_compile(ev, cand, key, entry, f, wdir, d.verdict)
    eager, comp, comp_err = ev.baselines() if d.stage == Stage.BENCHMARK else (None, None, "")
    flags = list(d.flags)
    details = list(d.details)
    if comp_err:
        details.append(f"torch.compile baseline failed: {comp_err}")
    if info.get("note"):
        details.append(info["note"])
    timing = Timing.from_samples(f.samples) if f.samples and d.stage == Stage.BENCHMARK else None
    texts = list(loop.sass)
    for p in sorted((wdir / "dsl").glob("*")):
        if p.suffix in (".ptx", ".sass") and p.stat().st_size < 64 * 2**20:
            texts.append(p.read_text(errors="replace"))
    precision = ev.precision_of(cand, texts, info)
    if precision:
        flags.append(f"precision:{precision}")
    if timing and eager and eager.median_us / timing.median_us > 10:
        flags.append("review:speedup>10x_eager")
    if timing and rl.fraction(timing.median_us) > 1.0:
        flags.append("review:above_roofline")
    if timing and sharers:
        flags.append("review:gpu_shared")
        details.append(f"{len(sharers)} other process(es) (pids {sorted(sharers)[:5]}) held a "
                       "context on this GPU when the timing ended: the times may be too slow")
    shutil.rmtree(wdir, ignore_errors=True)
    loop.seconds["static"] = 0.0
    return Evaluation(
        candidate_sha256=cand.sha256, task_sha256=ev.task.sha256, stage=d.stage,
        verdict=d.verdict, message=d.message, details=tuple(x for x in details if x),
        trials=tuple(_trial(label, r) for label, r in f.trial_results),
        timing=timing, eager=eager if timing else None, compiled=comp if timing else None,
        roofline=rl, flags=tuple(flags), kernels=tuple(f.kernel_names), precision=precision,
        stage_seconds={k: round(v, 4) for k, v in loop.seconds.items() if k != "start"},
        compile_cached=entry is not None, artifacts=artifacts, log_tail=log_tail,
        gpu=ev.gpu_name)


def _trial(label: str, r: dict[str, Any]) -> TrialResult:
    return TrialResult(label=label, passed=bool(r.get("passed")),
                       reason=str(r.get("reason") or r.get("error") or ""),
                       max_abs_err=float(r.get("max_abs_err", 0.0)),
                       max_rel_err=float(r.get("max_rel_err", 0.0)),
                       rmse=float(r.get("rmse", 0.0)), ref_rmse=float(r.get("ref_rmse", 0.0)))


def _store_compile(ev: LocalEvaluator, cand: CandidateSource, key: str, entry: CompileEntry | None,
                   f: RunFacts, wdir: Path, verdict: Verdict) -> dict[str, str]:
    """Record the compile result in the cache (first time) and keep artifacts in the run dir."""
    if entry is None:
        files = {p.name: p for p in sorted((wdir / "dsl").glob("*"))
                 if p.is_file() and p.suffix in (".ptx", ".cubin", ".sass")}
        if verdict == Verdict.COMPILE_ERROR and f.error:
            new = CompileEntry(ok=False, error=str(f.error.get("message", "")))
        elif f.kernel_names:
            new = CompileEntry(ok=True, kernels=tuple(f.kernel_names))
        else:
            return {}
        try:
            ev.cache.put(key, new, files)
        except OSError:
            return {}
        entry = ev.cache.get(key)
        if entry is None:
            return {}
    return ev._keep_artifacts(cand, key, entry)


def bench_only(ev: LocalEvaluator, cand: CandidateSource, info: dict[str, Any]) -> list[float] | None:
    """One re-timing run in a fresh worker; None if it failed or its timed outputs were wrong."""
    rng = secrets.SystemRandom()
    w = ev._take_worker()
    ev._warm_spare()
    _wait_ready(ev, w)
    wdir: Path = w.workdir  # type: ignore[attr-defined]
    cand_path = wdir / f"cand_{cand.short}.py"
    cand_path.write_text(cand.code, encoding="utf-8")
    job = _job(ev, cand_path, w.token, info, [], bench=True, check_kernels=False, rng=rng)
    loop = _Loop(RunFacts())
    try:
        _drive(ev, w, job, loop)
    finally:
        _finish_worker(ev, w, loop)
    f = loop.facts
    ok = f.finished and f.samples is not None and not f.error
    for m in loop.timed:
        r = ev._ref_call({"op": "compare", "shape": 0, "seed": m["seed"], "dist": m["dist"],
                          "path": m["path"]}, timeout=ev.options.run_timeout_s * 4)
        ok = ok and bool(r.get("passed"))
    shutil.rmtree(wdir, ignore_errors=True)
    return f.samples if ok else None
