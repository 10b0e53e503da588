"""The observer's records as the evaluator uses them: GPU operations on the parent's clock.

:func:`convert` turns decoded records (:mod:`.observer_records`) into the plain
:class:`~.activity.Op` and :class:`~.activity.Module` values that :mod:`.activity` reasons
about, with every GPU timestamp mapped onto ``time.monotonic_ns()`` of this host.
:class:`LocalObserver` is the observer attached to the process that uses it (the trusted
reference worker, which times the eager and torch.compile baselines exactly as candidates
are timed).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cutegen.codegen.eval.activity import Module, Op
from cutegen.codegen.eval.observer import ObserverChannel, ObserverSilent
from cutegen.codegen.eval.observer_records import (
    ClockMap,
    FlushedRec,
    KernelRec,
    MemcpyRec,
    MemsetRec,
    ModuleRec,
)

__all__ = ["LocalObserver", "ObserverSilent", "convert"]


def convert(records: Iterable[Any], clock: ClockMap) -> tuple[list[Op], list[Module], int]:
    """(GPU operations, loaded modules, records the observer dropped)."""
    ops: list[Op] = []
    modules: list[Module] = []
    dropped = 0

    def t(ns: int) -> int:
        return clock.to_mono_ns(ns) if ns else 0

    for r in records:
        if isinstance(r, KernelRec):
            ops.append(Op("kernel", r.name, t(r.start), t(r.end), r.stream_id, r.correlation_id))
        elif isinstance(r, MemcpyRec):
            ops.append(Op("memcpy", f"memcpy {r.copy_kind}", t(r.start), t(r.end), r.stream_id,
                          r.correlation_id, r.bytes))
        elif isinstance(r, MemsetRec):
            ops.append(Op("memset", "memset", t(r.start), t(r.end), r.stream_id,
                          r.correlation_id, r.bytes))
        elif isinstance(r, ModuleRec):
            modules.append(Module(r.origin, tuple(r.kernel_names), r.sha256.hex()))
        elif isinstance(r, FlushedRec):
            dropped = max(dropped, int(r.dropped_total))
    return ops, modules, dropped


class LocalObserver:
    """The native observer attached to this very process (trusted processes only)."""

    def __init__(self, lib: Path, cupti: Path) -> None:
        self.channel = ObserverChannel()
        self.channel.attach_here(lib=lib, cupti=cupti)

    def drain(self, timeout: float = 30.0) -> list[Op]:
        """Every GPU operation completed since the previous call."""
        recs = self.channel.flush(timeout)
        ops, _, dropped = convert(recs, self.channel.clock)
        if dropped:
            raise ObserverSilent(f"the observer dropped {dropped} records")
        return ops

    def close(self) -> None:
        self.channel.close()
