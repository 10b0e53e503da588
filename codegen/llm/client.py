"""The LLM client: deadlines, the one retry loop, the budget check and the call record.

Per logical call (one prompt, one wanted reply) the client:

1. reserves the worst case of the attempt with the :class:`~.ledger.CostLedger`, which
   refuses it (:class:`~cutegen.errors.BudgetExceededError`) before anything is sent when
   the cap could be passed;
2. sends it through :mod:`._transport` inside a cancel scope that ends at the earlier of
   the attempt's limit and the call's overall deadline, so a server dripping one byte a
   second is cut off at the deadline, not at a read timeout;
3. records the attempt (:class:`~.records.LLMCall`), charged with the real usage when the
   server reported one, else the reservation (nothing when the request never left or was
   refused with a 4xx);
4. retries, in this loop only (the SDK's ``max_retries`` is 0), at most
   ``max_attempts`` attempts in all: 5xx, connection failures and attempt timeouts after a
   capped exponential backoff with jitter; 429 after its ``Retry-After`` when that is at
   most ``max_retry_after_s`` and fits the deadline, else
   :class:`LLMRateLimitError` goes to the scheduler at once; other 4xx never.

A reply that arrives but is unusable (cut off at ``max_tokens``, no candidate in it, a
malformed body) is *data*: recorded, returned, never retried. Only the endpoint being
unusable raises (:class:`~cutegen.errors.LLMError` and subclasses).

Why this loop and not the ``openai`` client's own retries (``max_retries``, which also
honours Retry-After): the SDK retries inside one ``create()``, out of our sight, so it
cannot (a) record and charge each attempt before the next one is sent (retries are charged,
and a kill between attempts loses no spending), (b) reserve each attempt's worst case
against the dollar cap first, so that a retry which could pass the cap is never sent,
(c) keep every wait inside the call's overall deadline (it waits up to 120 s of
Retry-After, or 8 s of backoff, whatever is left), (d) hand a long Retry-After to the
scheduler as :class:`LLMRateLimitError` instead of sleeping on it, or (e) drop the JSON
schema and try again when a server rejects structured output. So the SDK makes exactly one
HTTP attempt per call of :func:`._transport.send_once` (``max_retries=0``: one retry layer,
never stacked), and keeps what it does well: requests, auth, connection pooling and the
per-attempt timeouts.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cutegen.codegen.candidate import sha256_text
from cutegen.codegen.llm import _transport
from cutegen.codegen.llm.config import LLMConfig
from cutegen.codegen.llm.extract import Extraction
from cutegen.codegen.llm.ledger import CostLedger, estimate_tokens
from cutegen.codegen.llm.records import CallRecorder, LLMCall
from cutegen.errors import BudgetExceededError, LLMError, RateLimitError

AsyncSleep = Callable[[float], Awaitable[None]]
Extractor = Callable[[str], Extraction]


class LLMRateLimitError(RateLimitError):
    """The endpoint rate-limits us for longer than we wait; retry after ``retry_after_s``."""

    def __init__(self, message: str, *, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class LLMDeadlineError(LLMError):
    """A call did not finish within its overall deadline (``total_timeout_s``)."""


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One prompt to send.

    Attributes:
        system / prompt: the system and user messages.
        purpose: "initial", "rewrite" or "repair" (recorded).
        parent_sha256: the candidate the prompt is about, if any (recorded).
    """

    system: str
    prompt: str
    purpose: str = "rewrite"
    parent_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class LLMResult:
    """The last attempt of a call that got an answer, and what was read from it.

    ``extraction`` is None when the answer was unusable before parsing (cut off, malformed,
    too large); ``call.outcome`` and ``call.error`` say why.
    """

    call: LLMCall
    extraction: Extraction | None

    @property
    def ok(self) -> bool:
        return self.extraction is not None and self.extraction.ok

    @property
    def code(self) -> str | None:
        return self.extraction.code if self.extraction is not None else None


#: Attempt outcomes that are an answer (usable or not): returned, never retried.
_ANSWERED = ("ok", "malformed", "too_large")


class LLMClient:
    """Sends prompts to one OpenAI-compatible endpoint under hard limits.

    Args:
        config: the endpoint and its limits.
        recorder: where every attempt is recorded; also the ledger's memory.
        sleep: async sleep used between attempts (tests inject a fast one).
        clock: monotonic clock for the deadlines.
        rng: source of backoff jitter.
        client_factory: builds the SDK client (tests may wrap it); default
            :func:`._transport.make_async_client`.
    """

    def __init__(self, config: LLMConfig, recorder: CallRecorder, *,
                 sleep: AsyncSleep | None = None, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None,
                 client_factory: Callable[[LLMConfig], Any] | None = None) -> None:
        self.config = config
        self.recorder = recorder
        self.ledger = CostLedger(recorder, price=config.price, max_usd=config.max_dollars)
        self._sleep = sleep or asyncio.sleep
        self._clock = clock
        self._rng = rng or random.Random()
        self._factory = client_factory or _transport.make_async_client
        self._structured = config.structured != "off"

    # -- public, synchronous ----------------------------------------------------------
    def complete(self, request: LLMRequest, *, extract: Extractor | None = None) -> LLMResult:
        """Send one prompt (retrying as configured) and return its answer.

        Args:
            request: the prompt.
            extract: reads a candidate from the reply text; its verdict is recorded.

        Raises:
            BudgetExceededError: an attempt could pass the dollar cap (nothing was sent).
            LLMRateLimitError: rate-limited for longer than ``max_retry_after_s``.
            LLMDeadlineError: the overall deadline passed.
            LLMError: the endpoint failed after the allowed attempts, or refused the
                request (4xx other than 429).
        """
        return _run(self.acomplete_many([request], extract=extract))[0]  # type: ignore[return-value]

    def complete_many(self, requests: Sequence[LLMRequest], *,
                      extract: Extractor | None = None) -> list[LLMResult | Exception]:
        """Send several prompts concurrently (at most ``config.concurrency`` in flight).

        Returns one entry per request, in order: its result, or the exception that ended
        it (the same exceptions :meth:`complete` raises).
        """
        return _run(self.acomplete_many(requests, extract=extract, return_exceptions=True))

    # -- async core -------------------------------------------------------------------
    async def acomplete_many(self, requests: Sequence[LLMRequest], *,
                             extract: Extractor | None = None,
                             return_exceptions: bool = False) -> list[Any]:
        gate = asyncio.Semaphore(self.config.concurrency)
        client = self._factory(self.config)
        try:
            async def one(req: LLMRequest) -> LLMResult:
                async with gate:
                    return await self._call(client, req, extract)
            return list(await asyncio.gather(*(one(r) for r in requests),
                                             return_exceptions=return_exceptions))
        finally:
            await client.close()

    async def _call(self, client: Any, req: LLMRequest, extract: Extractor | None) -> LLMResult:
        """One logical call: attempts, records and retries (see the module docstring)."""
        cfg = self.config
        call_id = uuid.uuid4().hex
        deadline = self._clock() + cfg.total_timeout_s
        last = ""
        for attempt_no in range(1, cfg.max_attempts + 1):
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise LLMDeadlineError(self._where(f"no answer within the overall deadline of "
                                                   f"{cfg.total_timeout_s:g} s; last: {last}"))
            structured = self._structured
            attempt, result = await self._attempt(client, req, call_id, attempt_no,
                                                  structured=structured,
                                                  limit=min(cfg.attempt_timeout_s, remaining),
                                                  extract=extract)
            last = attempt.error
            if attempt.outcome in _ANSWERED:
                return result  # usable or not, an answer is data: never retried
            if attempt.outcome == "deadline":
                raise LLMDeadlineError(self._where(
                    f"no answer within the overall deadline of {cfg.total_timeout_s:g} s "
                    f"(attempt {attempt_no}): {attempt.error}"))
            if attempt.outcome == "http_error":
                if attempt.rejects_schema and structured and cfg.structured == "auto":
                    self._structured = False  # this server has no structured output
                    continue
                raise LLMError(self._where(_explain_4xx(attempt)))
            if attempt_no < cfg.max_attempts:
                await self._wait_before_retry(attempt, attempt_no, deadline)
        if attempt.outcome == "rate_limited":
            raise LLMRateLimitError(self._where(f"still rate-limited after {attempt_no} attempts: "
                                                f"{attempt.error}"),
                                    retry_after_s=attempt.retry_after_s)
        raise LLMError(self._where(f"gave up after {attempt_no} attempt(s): {last}"))

    async def _attempt(self, client: Any, req: LLMRequest, call_id: str, attempt_no: int, *,
                       structured: bool, limit: float, extract: Extractor | None
                       ) -> tuple[_transport.Attempt, LLMResult]:
        """Reserve, send within ``limit`` seconds, record, release. Raises only for the
        budget (before sending) or when interrupted (after recording)."""
        cfg = self.config
        body = _transport.request_body(cfg, req.system, req.prompt, structured=structured)
        reservation = self.ledger.reserve(estimate_tokens(req.system, req.prompt), cfg.max_tokens)
        started, t0 = time.time(), self._clock()
        attempt: _transport.Attempt | None = None
        try:
            try:
                attempt = await _bounded(_transport.send_once(client, cfg, body, timeout_s=limit),
                                         limit)
            except TimeoutError:
                overall = limit < cfg.attempt_timeout_s
                attempt = _transport.Attempt(
                    "deadline" if overall else "timeout",
                    error=f"no complete answer within {limit:.1f} s "
                          f"({'overall deadline' if overall else 'attempt limit'})")
        finally:
            if attempt is None:  # cancelled or interrupted mid-attempt: still charged
                attempt = _transport.Attempt("interrupted", error="interrupted")
            result = self._record(call_id, attempt_no, req, attempt, reservation, started,
                                  self._clock() - t0, structured, extract)
            self.ledger.release(reservation)
        return attempt, result

    async def _wait_before_retry(self, attempt: _transport.Attempt, attempt_no: int,
                                 deadline: float) -> float:
        """Sleep before the next attempt, or raise when the wait would pass the deadline."""
        cfg = self.config
        retry_after = attempt.retry_after_s
        if retry_after is not None and retry_after > cfg.max_retry_after_s:
            if attempt.outcome == "rate_limited":
                raise LLMRateLimitError(self._where(
                    f"rate-limited: the server asks to wait {retry_after:g} s, more than "
                    f"max_retry_after_s={cfg.max_retry_after_s:g}; not retrying blindly"),
                    retry_after_s=retry_after)
            retry_after = None
        delay = retry_after if retry_after is not None else self._backoff(attempt_no)
        if delay >= deadline - self._clock():
            why = (f"waiting {delay:.1f} s for attempt {attempt_no + 1} would pass the overall "
                   f"deadline of {cfg.total_timeout_s:g} s; last: {attempt.error}")
            if attempt.outcome == "rate_limited":
                raise LLMRateLimitError(self._where(f"rate-limited: {why}"),
                                        retry_after_s=retry_after)
            raise LLMDeadlineError(self._where(why))
        await self._sleep(delay)
        return delay

    def _backoff(self, attempt_no: int) -> float:
        cap = min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (attempt_no - 1))
        return cap / 2 + self._rng.uniform(0, cap / 2)

    def _where(self, text: str) -> str:
        return f"LLM {self.config.model} at {self.config.base_url}: {text}"

    def _record(self, call_id: str, attempt_no: int, req: LLMRequest,
                attempt: _transport.Attempt, reservation: Any, started: float, latency: float,
                structured: bool, extract: Extractor | None) -> LLMResult:
        outcome, error, extraction = attempt.outcome, attempt.error, None
        if outcome == "ok":
            if attempt.finish_reason == "length":
                outcome = "length"
                error = (f"reply cut off at max_tokens={self.config.max_tokens} "
                         "(finish_reason=length); nothing was compiled")
            elif extract is not None:
                extraction = extract(attempt.text)
                if not extraction.ok:
                    outcome, error = "parse_error", extraction.error
        cost, basis = self.ledger.charge(reservation, prompt_tokens=attempt.prompt_tokens,
                                         completion_tokens=attempt.completion_tokens,
                                         generated=attempt.generated)
        call = LLMCall(
            call_id=call_id, attempt=attempt_no, purpose=req.purpose, model=self.config.model,
            base_url=self.config.base_url, system=req.system, prompt=req.prompt,
            response=_storable(attempt.text, self.config.max_reply_chars),
            finish_reason=attempt.finish_reason,
            prompt_tokens=attempt.prompt_tokens, completion_tokens=attempt.completion_tokens,
            cost_usd=cost, cost_basis=basis, latency_s=latency, outcome=outcome, error=error,
            http_status=attempt.status, parent_sha256=req.parent_sha256,
            candidate_sha256=(sha256_text(extraction.code)
                              if extraction is not None and extraction.code else None),
            started_at=started, streamed=self.config.stream, structured=structured)
        self.recorder.record(call)
        return LLMResult(call, extraction)


async def _bounded(coro: Awaitable[_transport.Attempt], limit: float) -> _transport.Attempt:
    import anyio

    with anyio.fail_after(limit):
        return await coro


def _storable(text: str, limit: int) -> str:
    """The reply as stored: undecodable bytes shown as U+FFFD, cut at ``limit`` characters
    (a longer reply was rejected unread; its head is enough to see what it was)."""
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... cut by cutegen: {len(text) - limit:,} more characters]"


def _explain_4xx(attempt: _transport.Attempt) -> str:
    hint = {401: "check OPENAI_API_KEY", 403: "the key may lack access to this model",
            404: "check --model and --base-url (the URL usually ends in /v1)",
            400: "the server rejected the request"}.get(attempt.status or 0, "")
    return f"{attempt.error} (not retried{'; ' + hint if hint else ''})"


def _run(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to completion from synchronous code, even inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="cutegen-llm")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["BudgetExceededError", "LLMClient", "LLMDeadlineError", "LLMRateLimitError",
           "LLMRequest", "LLMResult"]
