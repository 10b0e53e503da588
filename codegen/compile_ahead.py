"""Compile-ahead: compile candidates on CPU workers before they take a GPU.

Compiling needs no GPU (``CUTE_DSL_ARCH=sm_90a``), so a pool of CPU compile-only slots
(:func:`cutegen.codegen.pool.make_compile_ahead`) can see every candidate first; this module
is the policy of what that pass may settle. What it can reuse, as checked
against nvidia-cutlass-dsl 4.8.1:

* **Verdicts** (used): a candidate the DSL refuses to compile, or that the static checks
  reject, is answered from the CPU pass and never takes a GPU slot
  (:func:`settled_before_gpu`). The compile-only evaluator also writes the verdict into the
  shared compile cache (:mod:`cutegen.codegen.compile_cache`), whose key (source sha256 +
  DSL version + arch + options + task) is the one GPU evaluations read, so a later GPU
  evaluation of the same source answers from the cache too.
* **Artifacts** (used as before): PTX / cubin / SASS land in the cache entry and the run
  folder, so the sass profiler can read them whichever worker compiled.
* **The compiled function** (not reused): a GPU worker still compiles again, because it
  needs a launchable function in its own process. The DSL's own file cache could hand one
  over, but it stays disabled in workers on purpose: its key (a hash of the generated IR and
  the compile settings) has an empty version component in 4.8.1, and the IR carries the
  candidate's per-worker module name (``cutegen_candidate_<token>``), so two workers never
  produce the same key anyway. Reusing it would need a per-source cache folder and a
  module name derived from the source hash, checked on a GPU first (see
  ``tools/pool_throughput.py --help``).

Only failures the GPU would see identically are trusted: a DSL compile error whose message
does not come from the CUDA driver (a kernel that queries the device while compiling may
fail on a CPU and compile on the GPU) and a static rejection. Anything else (compiled,
crash, timeout on a slow CPU, a decoy) goes on to the GPU evaluation.
"""

from __future__ import annotations

import dataclasses

from cutegen.codegen.evaluation import Evaluation, Verdict

#: Flag added to an Evaluation settled by the CPU pass.
FLAG = "compile_ahead:cpu"

#: A compile error mentioning one of these may be the missing GPU's, not the kernel's.
_DRIVER_MARKERS = ("CUDA_ERROR", "cuInit", "cudaGetDevice", "no CUDA", "CUDA driver",
                   "libcuda", "cudaErrorNoDevice", "NoDevice", "torch.cuda")


def settled_before_gpu(ev: Evaluation) -> Evaluation | None:
    """The CPU pass's Evaluation when it settles the candidate (the GPU would say the same),
    flagged :data:`FLAG`; None when the candidate must go on to a GPU.

    Args:
        ev: what the compile-only evaluator returned.
    """
    if ev.verdict == Verdict.STATIC_REJECT:
        return dataclasses.replace(ev, flags=(*ev.flags, FLAG))
    if ev.verdict != Verdict.COMPILE_ERROR:
        return None
    text = "\n".join((ev.message, *ev.details))
    if any(m in text for m in _DRIVER_MARKERS):
        return None
    return dataclasses.replace(ev, flags=(*ev.flags, FLAG))
