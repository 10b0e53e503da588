"""The calls one evaluation makes, chosen in the parent and kept there (pure).

Every call the candidate worker makes looks the same from inside it: fresh inputs written
by the trusted reference worker into shared buffers, the harness's prefill and L2-flush
memsets, a CUDA event pair around ``forward``, a device synchronisation and the outputs
handed back. What a call *counts for* is decided here, in the parent, and never sent:

* verification calls on the main shape (one per input distribution), one per hidden
  shape, and a determinism re-run of the first one with other prefilled memory, each
  compared with the float64 reference at once;
* warm-up and timed calls on the main shape with ``spiky`` inputs (or the next the task
  keeps: :func:`~cutegen.codegen.inputs.timing_distribution`): their times are the
  ranking time; a random subset of them, drawn here before the first call, is copied by
  the reference worker (every one of them is copied into a slot or a scratch buffer at the
  same cost, so nothing tells the candidate which) and compared after the last call. Where
  the reference worker has fewer slots than that subset (outputs of GBs), the rest of it is
  compared right after its call: the candidate may see a longer pause after such a call,
  but only once its output is handed over, and the next draw does not depend on it;
* one ghost call among the timed ones, with the candidate's CuTe DSL launches disabled and
  the inputs of the first call: its output must differ from the first call's (RELIABILITY.md
  C5 decoys: a launched kernel that does not compute the output).

Seeds are drawn from :mod:`secrets` here; the candidate's process never sees one.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

#: Distributions checked on the main shape in every evaluation, in this order.
MAIN_SHAPE_DISTRIBUTIONS = ("randn", "spiky", "uniform_spiky")

#: Byte the prefill memsets write on even calls: all-ones bits (NaN in every float dtype).
NAN_BYTE = 0xFF


@dataclass(frozen=True, slots=True)
class Call:
    """One call of ``forward``: what the worker is told, and what it counts for."""

    k: int
    shape: int
    dist: str
    seed: int
    role: str  # "verify" | "determinism" | "warmup" | "timed" | "ghost"
    label: str
    pattern: int  # prefill byte
    keep: bool = False  # copied by the reference worker for a deferred comparison
    check: bool = False  # compared at once (no slot was left for a copy: outputs of GBs)

    @property
    def compare_now(self) -> bool:
        return self.role in ("verify", "determinism", "ghost")

    @property
    def timed(self) -> bool:
        return self.role == "timed"


@dataclass(frozen=True, slots=True)
class ShapeInfo:
    label: str  # "main" or "batch_size=127"


def _pattern(k: int, rng: secrets.SystemRandom) -> int:
    # Odd calls: a byte whose repetition is a finite, ordinary-looking value in every dtype
    # (0x41..0x7e: about 12.0 in fp32 and bf16), so neither NaN checks nor zeros give it away.
    return NAN_BYTE if k % 2 == 0 else rng.randrange(0x41, 0x7F)


def verification_plan(shapes: Sequence[ShapeInfo], dists: Sequence[str], *, main_trials: int,
                      rng: secrets.SystemRandom) -> list[Call]:
    """Main-shape trials (randn first), one per hidden shape, a main-shape trial for each
    distribution still unchecked, and the determinism re-run.

    Every distribution the task allows is checked in every evaluation: the hidden shapes
    take the ones the main trials left out (in a random order) before repeating any, and
    whatever is left after them gets a main-shape trial of its own. A kernel that fails one
    distribution (an fp32 kernel whose error passes atol only at unit scale, say: 1e3-scaled
    "large" inputs send it to the rmse bound) then fails every time, not in the evaluations
    that happened to draw it; which seed, pattern and shape each gets stays secret.

    ``randn`` and ``spiky`` or ``uniform_spiky`` (where the task allows them) are always
    main-shape trials: a
    kernel that reduces only part of a large input does so at the main shape, the largest,
    and the spikes are what it would miss (:func:`~cutegen.codegen.inputs.spike_size`)."""
    first = [d for d in MAIN_SHAPE_DISTRIBUTIONS if d in dists]
    rest = [d for d in dists if d not in first]
    rng.shuffle(rest)
    chosen = (first + rest)[:main_trials]
    while len(chosen) < main_trials:
        chosen.append(rng.choice(list(dists)))
    unchecked = [d for d in dists if d not in chosen]
    rng.shuffle(unchecked)
    calls: list[Call] = []
    for d in chosen:
        k = len(calls)
        calls.append(Call(k, 0, d, rng.getrandbits(62), "verify", f"main/{d}", _pattern(k, rng)))
    for idx in range(1, len(shapes)):
        d = unchecked.pop() if unchecked else rng.choice(list(dists))
        k = len(calls)
        calls.append(Call(k, idx, d, rng.getrandbits(62), "verify", f"{shapes[idx].label}/{d}",
                          _pattern(k, rng)))
    for d in unchecked:
        k = len(calls)
        calls.append(Call(k, 0, d, rng.getrandbits(62), "verify", f"main/{d}", _pattern(k, rng)))
    k = len(calls)
    c0 = calls[0]
    calls.append(Call(k, 0, c0.dist, c0.seed, "determinism", f"{c0.label}/determinism",
                      NAN_BYTE if c0.pattern != NAN_BYTE else rng.randrange(0x41, 0x7F)))
    return calls


def benchmark_plan(start: int, *, warmup: int, runs: int, keep_slots: int, ghost: bool,
                   rng: secrets.SystemRandom, ghost_of: Call | None = None,
                   dist: str = "randn") -> list[Call]:
    """Warm-up and timed main-shape calls drawing from ``dist`` (the task's
    :func:`~cutegen.codegen.inputs.timing_distribution`) from index ``start``, the kept
    subset drawn now, and the ghost call at a random place among the timed ones (with the
    inputs of ``ghost_of``, the first call, whose output the ghost's is held against)."""
    n = warmup + runs + (1 if ghost else 0)
    ghost_at = warmup + rng.randrange(0, runs + 1) if ghost else -1
    roles: list[str] = []
    for i in range(n):
        roles.append("ghost" if i == ghost_at else "warmup" if len(roles) < warmup else "timed")
    eligible = [i for i, r in enumerate(roles) if r in ("warmup", "timed")]
    # a cheat that moves the median must be fast (and wrong) in over half of the timed calls:
    # with ten of them compared it goes unseen once in a thousand evaluations
    # The copies a slot holds are compared after the last call; where the reference worker
    # has fewer slots than that (a task whose outputs are GBs), the rest of the drawn calls
    # are compared at once, so that as many calls are checked whatever the GPU's memory.
    want = min(max(3, math.ceil(0.2 * runs)), len(eligible))
    drawn = rng.sample(eligible, want) if want > 0 else []
    kept = set(drawn[:max(0, keep_slots)])
    checked = set(drawn[max(0, keep_slots):])
    calls = []
    for i, role in enumerate(roles):
        k = start + i
        seed, d = rng.getrandbits(62), dist
        if role == "ghost" and ghost_of is not None:
            seed, d = ghost_of.seed, ghost_of.dist
        calls.append(Call(k, 0, d, seed, role, f"main/{d}/{role} {k}", _pattern(k, rng),
                          keep=i in kept, check=i in checked))
    return calls
