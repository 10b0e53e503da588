"""The record of every LLM call attempt, and the seam records go through.

Every HTTP attempt the client makes (retries included) becomes one frozen :class:`LLMCall`
handed to a :class:`CallRecorder` right after the attempt ends, before anything else
happens with its reply. The dollars a run has spent are *derived* from these records
(:meth:`CallRecorder.spent_usd`), so the cost ledger survives a restart: a resumed run sees
what the killed one spent.

:class:`LLMCall` is the one record of an attempt: the client makes it, the store keeps it
(one row of ``llm_calls``, keyed by the run) and gives the same record back. The recorder is
the store's (:class:`cutegen.search.storage.StoreCallRecorder`); tests use
:class:`cutegen.testing.InMemoryCallRecorder`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol, runtime_checkable

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
    "unrecorded",  # read from a store row written before the store kept the basis (m004)
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
