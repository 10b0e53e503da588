"""The timing protocol, shared by the candidate worker and the trusted reference worker.

PERFORMANCE.md §2 and RELIABILITY.md D2/C12/C14/C15: before every timed call the inputs
get fresh contents, the L2 is flushed by writing a buffer larger than it, persisting-L2
state is reset, and a short GPU-side sleep lets the host enqueue the call before the start
event fires (so launch latency of sub-100 µs kernels is not timed). CUDA events bracket the
call on the current stream. Warm-up calls are untimed and the number of timed calls is
fixed by the harness, not by the candidate.

The sleep only works if the host is quicker than it: a host slowed down (CPU contention,
a slow Python launch path) queues the call after the GPU has passed the start event, and
the gap is timed as kernel time. So after queuing each call the timer asks whether the
start event has already completed; if so, the call is timed again with twice the sleep
(up to :data:`MAX_REDO` times per call), and the count is reported (``late_calls``).

The torch functions used for timing are bound when the Timer is built — before any
candidate code runs — so a candidate that reassigns ``torch.cuda.Event.elapsed_time`` or
``torch.cuda.synchronize`` changes nothing here (C9); :func:`tampered` reports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _bind_originals() -> dict[str, Any]:
    import time

    import torch

    return {
        "synchronize": torch.cuda.synchronize,
        "Event": torch.cuda.Event,
        "elapsed_time": torch.cuda.Event.elapsed_time,
        "record": torch.cuda.Event.record,
        "query": torch.cuda.Event.query,
        "sleep": torch.cuda._sleep,
        "perf_counter": time.perf_counter,
    }


def tampered(originals: dict[str, Any]) -> list[str]:
    """Names of timing functions that were replaced since ``originals`` were bound."""
    now = _bind_originals()
    return [k for k, v in originals.items() if now.get(k) is not v]


def _reset_persisting_l2() -> None:
    try:
        from cuda.bindings import runtime as cudart

        cudart.cudaCtxResetPersistingL2Cache()
        cudart.cudaDeviceSetLimit(cudart.cudaLimit.cudaLimitPersistingL2CacheSize, 0)
    except Exception:  # noqa: BLE001 - best effort: absent bindings mean nothing was set
        pass


#: A timed call queued after its start event had fired is redone at most this many times.
MAX_REDO = 3
#: The GPU-side sleep never grows beyond this many cycles (about 30 ms).
MAX_SLEEP_CYCLES = 64_000_000


class Timer:
    """Times calls with CUDA events under the cold-L2, fresh-input protocol.

    Args:
        flush_mb: size of the buffer written before each timed call (>= 2x the L2).
        sleep_cycles: GPU-side backlog before each start event.
    """

    def __init__(self, *, flush_mb: int = 256, sleep_cycles: int = 100_000) -> None:
        import torch

        self.originals = _bind_originals()
        self._flush = torch.empty(flush_mb * 2**20 // 4, dtype=torch.int32, device="cuda")
        self._sleep_cycles = sleep_cycles
        self.late_calls = 0  # timed calls redone because the host queued them too late

    def flush(self) -> None:
        self._flush.zero_()

    def time_calls(
        self,
        fn: Callable[[], Any],
        *,
        warmup: int,
        runs: int,
        before_each: Callable[[int], None] | None = None,
        after_each: Callable[[int, Any], None] | None = None,
        flush: bool = True,
    ) -> list[float]:
        """Return ``runs`` per-call times in microseconds.

        ``before_each(i)`` runs untimed before call ``i`` (refill inputs); ``after_each(i,
        out)`` runs untimed after it (keep outputs for the re-check). Warm-up calls get
        indices ``-warmup..-1``.
        """
        o = self.originals
        for i in range(-warmup, 0):
            if before_each:
                before_each(i)
            fn()
        o["synchronize"]()
        samples: list[float] = []
        i = redo = 0
        while i < runs:
            if before_each:
                before_each(i)
            if flush:
                self.flush()
            _reset_persisting_l2()
            start, end = o["Event"](enable_timing=True), o["Event"](enable_timing=True)
            o["sleep"](self._sleep_cycles)
            o["record"](start)
            out = fn()
            late = bool(o["query"](start))  # the GPU was already past the start event
            o["record"](end)
            if after_each:
                after_each(i, out)
            o["synchronize"]()
            if late and redo < MAX_REDO:
                self.late_calls += 1
                redo += 1
                self._sleep_cycles = min(2 * self._sleep_cycles, MAX_SLEEP_CYCLES)
                continue
            samples.append(o["elapsed_time"](start, end) * 1000.0)
            i, redo = i + 1, 0
        return samples

    def burst(self, fn: Callable[[], Any], *, calls: int) -> float:
        """Back-to-back calls without flush; returns the mean per-call time in µs (events)."""
        o = self.originals
        start, end = o["Event"](enable_timing=True), o["Event"](enable_timing=True)
        o["synchronize"]()
        o["record"](start)
        for _ in range(calls):
            fn()
        o["record"](end)
        o["synchronize"]()
        return o["elapsed_time"](start, end) * 1000.0 / calls
