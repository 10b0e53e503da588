"""What the GPU did during a candidate's calls, from the observer's records (pure functions).

The native observer (:mod:`cutegen.codegen.eval.observer`) reports every kernel, copy and
memset the candidate worker's process ran on the GPU, with GPU start/end timestamps on the
parent's monotonic clock, and every module the process loaded with the kernel names it
defines and where the load came from. The parent brackets each call with its own clock
(``go`` sent .. ``done`` received), so a record belongs to a call by its timestamps alone:
nothing the candidate says decides which window a kernel falls in.

This module turns records + windows into facts:

* per call: the harness's own leading memsets (prefill, L2 flush), the candidate's ops
  after them, their device time split into CuTe DSL kernels and everything else
  ("foreign"), the span of the candidate's ops (the ranking time), and what an honest CUDA
  event pair around the call should have read (for the cross-check);
* per run: ops that ran outside every call, kernels launched but never completed, and the
  kernel identity: which names are the candidate's CuTe DSL kernels, decided from module
  records (a module loaded by the DSL's JIT-compiled host code, never by cuda-python,
  cupy, numba, torch or NVRTC), and names that mimic them.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Kernels that only fill memory (torch's fill / zero kernels): benign, not "foreign work",
#: when a module outside the DSL defines them (they can compute nothing).
_FILL = re.compile(r"FillFunctor|fill_kernel|zero_kernel", re.I)

#: A candidate may spend this much device time per call outside its CuTe kernels ...
FOREIGN_FRACTION = 0.10
#: ... or this many microseconds, whichever is larger (a ``torch.zeros`` of a workspace).
FOREIGN_ABS_US = 2.0


@dataclass(frozen=True, slots=True)
class Op:
    """One GPU operation: a kernel, a copy or a memset (times in parent monotonic ns)."""

    kind: str  # "kernel" | "memcpy" | "memset"
    name: str  # kernel symbol; "memcpy HtoD" etc.; "memset"
    start_ns: int
    end_ns: int
    stream: int = 0
    corr: int = 0
    nbytes: int = 0

    @property
    def us(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e3

    @property
    def complete(self) -> bool:
        return self.start_ns > 0 and self.end_ns >= self.start_ns


@dataclass(frozen=True, slots=True)
class Module:
    """A loaded module: where its load came from and the kernels it defines."""

    origin: str
    kernels: tuple[str, ...]
    sha256: str = ""


@dataclass(frozen=True, slots=True)
class Identity:
    """Which kernel names are the candidate's CuTe DSL kernels.

    ``verified`` is True when the names come from module records whose load came from
    the DSL; False when no module record was available and the names are the ones the
    candidate's process claimed (then ``mimics`` cannot be known).
    """

    cute: frozenset[str]
    foreign_defined: frozenset[str]
    mimics: tuple[str, ...]
    verified: bool

    def is_cute(self, name: str) -> bool:
        return name in self.cute and name not in self.mimics


def identity(modules: Sequence[Module], *, is_dsl_origin: Callable[[str], bool],
             claimed: Iterable[str] = ()) -> Identity:
    """Kernel identity from module records (see the module docstring).

    A name defined both by a DSL-loaded module and by any other module is a mimic: the
    candidate loaded a foreign module carrying its CuTe kernel's name.
    """
    if not modules:
        return Identity(frozenset(claimed), frozenset(), (), False)
    cute: set[str] = set()
    other: set[str] = set()
    for m in modules:
        (cute if is_dsl_origin(m.origin) else other).update(m.kernels)
    return Identity(frozenset(cute), frozenset(other), tuple(sorted(cute & other)), True)


@dataclass(frozen=True, slots=True)
class Window:
    """One call as the parent bracketed it, and the harness memsets it asked for."""

    k: int
    t0_ns: int  # "call" sent
    t1_ns: int  # "done" received
    harness_memsets: tuple[int, ...] = ()  # byte sizes, in order (free-block fills,
    # prefill blocks, flush)


#: The most free-block memsets a worker runs before a call, and may say it ran.
MAX_POISONED = 1024


def poisoned_sizes(claim: Any) -> tuple[int, ...]:
    """The byte sizes of the free-block memsets the worker says it ran before a call's
    prefill, as leading harness memsets of its window. A claim, so bounded: anything but a
    list of at most :data:`MAX_POISONED` positive ints is taken as none, and then the
    memsets it did run are not the harness's and the call shows a bypassed harness."""
    if not isinstance(claim, list) or len(claim) > MAX_POISONED:
        return ()
    if not all(type(n) is int and 0 < n < 1 << 48 for n in claim):
        return ()
    return tuple(claim)


def prefilled_count(claim: Any, asked: int) -> int:
    """How many of the ``asked`` prefill blocks the worker says it filled before a call (it
    stops at the first that finds no room on the GPU). A claim, so bounded: anything but an
    int from 0 to ``asked`` (or no claim) is taken as all of them, and then blocks it did
    not fill leave the call's window without its expected leading memsets (a bypassed
    harness). A true short prefill is flagged (``review:prefill_short``)."""
    if type(claim) is int and 0 <= claim <= asked:
        return claim
    return asked


@dataclass(frozen=True, slots=True)
class CallActivity:
    """The GPU work of one call."""

    k: int
    harness: tuple[Op, ...]
    ops: tuple[Op, ...]  # the candidate's, after the harness's
    harness_ok: bool  # the expected leading memsets were seen
    cute_us: float
    foreign_us: float
    benign_us: float
    foreign: tuple[str, ...]  # distinct names of foreign ops
    cute_kernels: int
    span_us: float | None  # first candidate op start -> last candidate op end
    event_expect_us: float | None  # flush end -> last candidate op end
    late: tuple[Op, ...]  # candidate ops still running when "done" arrived

    @property
    def foreign_over_allowance(self) -> bool:
        total = self.cute_us + self.foreign_us
        return self.foreign_us > max(FOREIGN_FRACTION * total, FOREIGN_ABS_US)


@dataclass(frozen=True, slots=True)
class Activity:
    """Every call's activity and what fell outside the calls."""

    calls: Mapping[int, CallActivity]
    outside: tuple[Op, ...]  # ops after the first call began that belong to no call
    incomplete: tuple[Op, ...]  # ops whose end never arrived
    identity: Identity
    setup_ops: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


def analyse(ops: Sequence[Op], windows: Sequence[Window], ident: Identity) -> Activity:
    """Assign ``ops`` to ``windows`` by start time and summarise each call."""
    ws = sorted(windows, key=lambda w: w.t0_ns)
    first = ws[0].t0_ns if ws else None
    per: dict[int, list[Op]] = {w.k: [] for w in ws}
    outside: list[Op] = []
    incomplete: list[Op] = []
    setup = 0
    for op in sorted(ops, key=lambda o: (o.start_ns, o.corr)):
        if not op.complete:
            incomplete.append(op)
            continue
        if first is None or op.start_ns < first:
            setup += 1
            if first is not None and op.end_ns > first:
                outside.append(op)  # set-up work still running when the calls began
            continue
        w = _window_of(ws, op.start_ns)
        if w is None:
            outside.append(op)
        else:
            per[w.k].append(op)
    calls = {w.k: _call(w, per[w.k], ident) for w in ws}
    return Activity(calls, tuple(outside), tuple(incomplete), ident, setup)


def _window_of(ws: Sequence[Window], t: int) -> Window | None:
    lo, hi = 0, len(ws) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        w = ws[mid]
        if t < w.t0_ns:
            hi = mid - 1
        elif t > w.t1_ns:
            lo = mid + 1
        else:
            return w
    return None


def _call(w: Window, ops: list[Op], ident: Identity) -> CallActivity:
    want = list(w.harness_memsets)
    harness: list[Op] = []
    i = 0
    while want and i < len(ops) and ops[i].kind == "memset" and ops[i].nbytes == want[0]:
        harness.append(ops[i])
        want.pop(0)
        i += 1
    rest = ops[i:]
    cute = foreign = benign = 0.0
    names: set[str] = set()
    n_cute = 0
    for op in rest:
        if op.kind == "kernel" and ident.is_cute(op.name):
            cute += op.us
            n_cute += 1
        elif op.kind == "memset" or (op.kind == "kernel" and _FILL.search(op.name)
                                     and op.name not in ident.cute):
            benign += op.us
        else:
            foreign += op.us
            names.add(op.name[:120])
    span = expect = None
    if rest:
        t_first = min(o.start_ns for o in rest)
        t_last = max(o.end_ns for o in rest)
        span = (t_last - t_first) / 1e3
        if harness:
            expect = (t_last - harness[-1].end_ns) / 1e3
    late = tuple(o for o in rest if o.end_ns > w.t1_ns)
    return CallActivity(w.k, tuple(harness), tuple(rest), not want, cute, foreign, benign,
                        tuple(sorted(names)), n_cute, span, expect, late)


def kernel_times(calls: Sequence[CallActivity], ident: Identity,
                 most: int = 16) -> tuple[tuple[str, float, float, bool], ...]:
    """Where the calls' GPU work went: per name of their ops (a kernel's symbol; copies and
    memsets by their kind), the median over ``calls`` of its summed device time in a call
    (µs; a call that did not run it counts 0), the median launches a call, and whether it is
    a CuTe DSL kernel of the candidate. Largest first, ``most`` at the most."""
    per: dict[str, list[tuple[float, int]]] = {}
    cute: dict[str, bool] = {}
    for i, c in enumerate(calls):
        for op in c.ops:
            name = op.name if op.kind == "kernel" else (op.name or op.kind)
            cute.setdefault(name, op.kind == "kernel" and ident.is_cute(op.name))
            got = per.setdefault(name, [(0.0, 0)] * len(calls))
            us, n = got[i]
            got[i] = (us + op.us, n + 1)
    rows = [(name, statistics.median(us for us, _ in got), statistics.median(n for _, n in got),
             cute[name]) for name, got in per.items()]
    rows.sort(key=lambda r: (-r[1], r[0]))
    return tuple(rows[:most])
