"""``cutegen export``: a stored candidate as a drop-in module, with its provenance.

The exported file is the candidate's source unchanged (it defines ``ModelNew`` and imports
only torch and the CuTe DSL, never cutegen) below a block of comments that says what it is
for, where and how it was verified and timed, and how fast it was against PyTorch eager
and torch.compile. Comments only, so ``from __future__`` imports and the module docstring
of the candidate keep working, and the code below the block hashes to the stored sha256.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

from cutegen.codegen.evaluation import Evaluation
from cutegen.errors import ConfigError, StorageError
from cutegen.search._node import FrozenNode
from cutegen.search.report.data import find_source, tolerance_text
from cutegen.search.storage import BaseStorage, FrozenRun, write_atomic

RULE = "# " + "-" * 86


def _one_line(s: str) -> str:
    return " ".join(str(s).split())


def _evaluation_lines(ev: Evaluation | None, task_name: str, task_path: str) -> list[str]:
    if ev is None:
        return ["NOT EVALUATED: this node has no stored evaluation."]
    out: list[str] = []
    if ev.verdict.value == "correct":
        passed = sum(t.passed for t in ev.trials)
        out.append(f"Verified: correct at stage {ev.stage.label} (harness {ev.harness_version}"
                   f", {ev.gpu or 'unknown GPU'}): {passed}/{len(ev.trials)} trials passed")
    elif ev.verdict.value == "compiled":
        out.append(f"NOT VERIFIED: compiled only (compile-only run), never run: "
                   f"{_one_line(ev.message)}")
    else:
        out.append(f"WARNING: NOT A CORRECT KERNEL: verdict {ev.verdict.value} at stage "
                   f"{ev.stage.label}: {_one_line(ev.message)[:200]}")
    for t in ev.trials:
        out.append(f"  {t.label}: {'pass' if t.passed else 'FAIL'}, max abs err "
                   f"{t.max_abs_err:.3e}, max rel err {t.max_rel_err:.3e}")
    if ev.trials:
        out.append(f"  tolerance: {tolerance_text(task_name, task_path)}")
    if ev.precision:
        out.append(f"  precision: {ev.precision}")
    if ev.flags:
        out.append(f"  flags: {', '.join(ev.flags)}")
    if ev.timing is not None:
        timing = ev.timing
        out.append(f"Timed: {timing.method}; {timing.n} samples")
        out.append(f"  this kernel    {timing.median_us:12,.2f} us median (p10 {timing.p10_us:,.2f}, "
                   f"p90 {timing.p90_us:,.2f})")
        for name, base, sp in (("PyTorch eager", ev.eager, ev.speedup_eager),
                               ("torch.compile", ev.compiled, ev.speedup_compile)):
            if base is not None and sp is not None:
                out.append(f"  {name:<14} {base.median_us:12,.2f} us median -> {sp:.3f}x "
                           f"faster{_ci(base, timing)}")
        if ev.eager_tf32 is not None and ev.speedup_eager_tf32 is not None:
            out.append(f"  (eager above ran cuDNN in fp32, as this kernel is held to; with "
                       f"torch's default, cuDNN in TF32: {ev.eager_tf32.median_us:,.2f} us "
                       f"median -> {ev.speedup_eager_tf32:.3f}x)")
        if ev.speedup_eager is not None and ev.speedup_eager < 1.0:
            out.append("  NOTE: slower than PyTorch eager; the reference itself is the faster "
                       "choice for this task")
        if ev.roofline is not None and ev.roofline_fraction is not None:
            rl = ev.roofline
            out.append(f"  roofline: {100 * ev.roofline_fraction:.1f}% of the {rl.kind} bound "
                       f"({rl.bound_us:,.2f} us at {rl.bandwidth_gbs / 1000:.2f} TB/s, "
                       f"{rl.peak_tflops:.0f} TFLOP/s)")
    return out


def _ci(base: object, cand: object) -> str:
    from cutegen.codegen.stats import bootstrap_ratio_ci

    a, b = getattr(base, "samples_us", ()), getattr(cand, "samples_us", ())
    if not a or not b:
        return ""
    lo, hi = bootstrap_ratio_ci(a, b)
    return f" (95% CI {lo:.3f}-{hi:.3f})"


def _status(storage: BaseStorage, run: FrozenRun, node: FrozenNode,
            best: FrozenNode | None) -> str:
    if best is not None and best.id == node.id:
        return ("the run's gated best (faster than every earlier best beyond noise on "
                "re-timing)")
    why = [d.reason for d in storage.get_best_history(run.id) if d.node_id == node.id]
    return "not the run's gated best" + (f" (gate: {why[-1]})" if why else "")


def header(storage: BaseStorage, run: FrozenRun, node: FrozenNode, *, db: str = "",
           now: float | None = None) -> str:
    """The comment block placed above an exported candidate."""
    from cutegen.codegen.toolchain import versions

    cfg, tc = run.config, dict(run.config.toolchain)
    ev = storage.get_evaluation(node.id)
    best = storage.get_best_node(run.id)
    lineage = " » ".join(n.move.description for n in storage.lineage(node.id))
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(time.time() if now is None else now))
    lines = [
        f"Exported by cutegen {versions().get('cutegen', '?')} on {stamp} from run "
        f"{run.name!r}, node {node.id}" + (f" (store {db})" if db else ""),
        f"Task: {cfg.task_name} ({cfg.task_path}, sha256 {cfg.task_sha256[:16]})",
        f"GPU: {tc.get('gpu', 'none recorded')}, driver {tc.get('driver', '?')}, "
        f"CUDA {tc.get('cuda', '?')}",
        f"Versions: torch {tc.get('torch', '?')}, nvidia-cutlass-dsl "
        f"{tc.get('nvidia-cutlass-dsl', '?')}, triton {tc.get('triton', '?')}, "
        f"python {tc.get('python', '?')}",
        f"Candidate sha256 (of the code below this block): {node.source_sha256}",
        f"Moves from the seed: {_one_line(lineage)}",
        "Status in the run: " + _status(storage, run, node, best),
        "",
        *_evaluation_lines(ev, cfg.task_name, cfg.task_path),
        "",
        "Use: ModelNew takes the arguments of the task's Model and returns what its forward",
        "returns; it needs torch and nvidia-cutlass-dsl (not cutegen) and an NVIDIA GPU of",
        "the architecture it was compiled for (sm_90a: Hopper).",
        f"Check it again: cutegen eval {cfg.task_path} THIS_FILE.py",
    ]
    wrapped: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        wrapped += [f"# {w}" for w in textwrap.wrap(line, width=94, subsequent_indent=indent,
                                                    break_on_hyphens=False)] or ["#"]
    return "\n".join([RULE, *wrapped, RULE]) + "\n"


def export_candidate(storage: BaseStorage, run: FrozenRun, node_id: int | None = None, *,
                     db: str = "") -> str:
    """The text of the exported module for ``node_id`` (default: the run's gated best).

    Raises:
        ConfigError: no node given and the run has no best yet.
        StorageError: the node is unknown, of another run, or its source is not available.
    """
    if node_id is None:
        node = storage.get_best_node(run.id)
        if node is None:
            raise ConfigError(f"run {run.name!r} has no best yet (no candidate was verified "
                              "and timed); give a NODE to export (`cutegen status "
                              f"{run.name}` and `cutegen show` list them)")
    else:
        node = storage.get_node(node_id)
        if node.run_id != run.id:
            raise StorageError(f"node {node_id} does not belong to run {run.name!r}")
    source, note = find_source(storage, run, node)
    if source is None:
        raise StorageError(f"the source of node {node.id} is {note}")
    return header(storage, run, node, db=db) + source


def write_export(text: str, out: Path) -> Path:
    """Write an exported module atomically.

    Raises:
        OSError: the file cannot be written.
    """
    write_atomic(out, text.encode("utf-8"))
    return out
