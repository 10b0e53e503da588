"""The record of every LLM call attempt, and where records go.

Every HTTP attempt the client makes (retries included) becomes one frozen :class:`LLMCall`
handed to a :class:`CallRecorder` right after the attempt ends, before anything else
happens with its reply. The dollars a run has spent are *derived* from these records
(:meth:`CallRecorder.spent_usd`), so the cost ledger survives a restart: a resumed run sees
what the killed one spent.

Recorders here: :class:`InMemoryCallRecorder` (tests, one process) and
:class:`JsonlCallRecorder` (an append-only file, fsynced per record). The SQLite store's
recorder lives with the store (see :mod:`cutegen.codegen.llm.store_adapter`).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cutegen.errors import StorageError

#: What an attempt came to. "ok" is the only outcome whose reply became a candidate.
OUTCOMES = (
    "ok",                # reply parsed; ``candidate_sha256`` is set
    "length",            # finish_reason == "length": output cut off, nothing extracted
    "parse_error",       # reply read but no usable candidate in it (F7)
    "malformed",         # the HTTP body was not an OpenAI-shaped answer
    "too_large",         # the body exceeded max_response_bytes and was cut off
    "rate_limited",      # HTTP 429
    "server_error",      # HTTP 5xx
    "http_error",        # other HTTP 4xx (not retried)
    "connection_error",  # refused, reset, DNS failure
    "timeout",           # this attempt ran past attempt_timeout_s
    "deadline",          # the call's overall deadline (total_timeout_s) passed
    "interrupted",       # the process was interrupted while the attempt was in flight
)

#: How ``cost_usd`` was arrived at.
COST_BASES = (
    "usage",     # the server's token counts at the model's price
    "reserved",  # usage unknown: the worst case reserved before sending was charged
    "none",      # nothing was generated (refused with 4xx, or never sent)
    "unpriced",  # the model has no price: cost unknown (no cap can be active)
)


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One HTTP attempt at an LLM call, as recorded.

    Attributes:
        call_id: shared by every attempt of one logical call.
        attempt: 1-based attempt number within the call.
        purpose: "initial", "rewrite" or "repair".
        model / base_url: where it went.
        system / prompt: the system and user messages sent.
        response: the reply text ("" when there was none).
        finish_reason: the server's finish reason ("" when unknown).
        prompt_tokens / completion_tokens: the server's usage, when it reported one.
        cost_usd: dollars charged to the ledger (None when the model has no price).
        cost_basis: one of :data:`COST_BASES`.
        latency_s: wall time of the attempt.
        outcome: one of :data:`OUTCOMES`.
        error: what went wrong, in one readable paragraph ("" for "ok").
        http_status: the HTTP status, when a response arrived.
        parent_sha256: the candidate the prompt was about (None for initial generation).
        candidate_sha256: the candidate extracted from the reply (outcome "ok" only).
        started_at: Unix time the attempt started.
        streamed / structured: whether the attempt streamed, and sent a JSON schema.
    """

    call_id: str
    attempt: int
    purpose: str
    model: str
    base_url: str
    system: str
    prompt: str
    response: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = 0.0
    cost_basis: str = "none"
    latency_s: float = 0.0
    outcome: str = "ok"
    error: str = ""
    http_status: int | None = None
    parent_sha256: str | None = None
    candidate_sha256: str | None = None
    started_at: float = 0.0
    streamed: bool = False
    structured: bool = False

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown LLM call outcome {self.outcome!r}")
        if self.cost_basis not in COST_BASES:
            raise ValueError(f"unknown cost basis {self.cost_basis!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> LLMCall:
        known = {f.name for f in fields(LLMCall)}
        return LLMCall(**{k: v for k, v in d.items() if k in known})


@runtime_checkable
class CallRecorder(Protocol):
    """Where LLM call records go. The ledger's memory.

    Invariants: ``record`` is durable when it returns (a crash afterwards loses nothing);
    ``spent_usd`` is the sum of ``cost_usd`` over every record of this run, including those
    written by earlier processes.
    """

    def record(self, call: LLMCall) -> None:
        """Store one attempt.

        Raises:
            StorageError: the record could not be stored (the call is then not made again
                blindly: the error stops the run).
        """
        ...

    def spent_usd(self) -> float:
        """Dollars charged so far by this run's recorded calls."""
        ...


class InMemoryCallRecorder:
    """A recorder that keeps records in a list (tests; lost when the process ends)."""

    def __init__(self, calls: list[LLMCall] | None = None) -> None:
        self._lock = threading.Lock()
        self.calls: list[LLMCall] = list(calls or [])

    def record(self, call: LLMCall) -> None:
        with self._lock:
            self.calls.append(call)

    def spent_usd(self) -> float:
        with self._lock:
            return sum(c.cost_usd or 0.0 for c in self.calls)


class JsonlCallRecorder:
    """An append-only JSON-lines file of :class:`LLMCall` records, fsynced per record.

    Reopening the same file in a new process continues its ledger. A torn last line (a
    crash mid-write) is ignored on reading.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._spent = sum(c.cost_usd or 0.0 for c in self.read())

    def read(self) -> Iterator[LLMCall]:
        """The records in the file, oldest first."""
        if not self.path.exists():
            return
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise StorageError(f"cannot read LLM call log {self.path}: {e}") from e
        for line in lines:
            try:
                yield LLMCall.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError, ValueError):
                continue

    def record(self, call: LLMCall) -> None:
        line = json.dumps(call.to_dict(), ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as e:
                raise StorageError(f"cannot append to LLM call log {self.path}: {e}") from e
            self._spent += call.cost_usd or 0.0

    def spent_usd(self) -> float:
        with self._lock:
            return self._spent
