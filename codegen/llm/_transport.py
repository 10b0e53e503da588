"""One HTTP attempt at a chat completion through the ``openai`` package, classified.

This module is the only one that imports ``openai`` (lazily, inside functions) and it never
retries: the client is built with ``max_retries=0`` and the retry loop lives in
:mod:`cutegen.codegen.llm.client`. An attempt reads the response body itself, chunk by
chunk, so that a byte cap applies and the caller's cancel scope (the deadlines) can stop a
server that drips one byte a second. Every way an attempt can end becomes an
:class:`Attempt` value; nothing here raises for the endpoint's behaviour.
"""

from __future__ import annotations

import email.utils
import json
import time
from dataclasses import dataclass
from typing import Any

from cutegen.codegen.llm.config import LLMConfig

#: JSON schema sent as ``response_format`` when structured output is on.
CANDIDATE_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "cute_dsl_candidate",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "code": {"type": "string"},
            },
            "required": ["explanation", "code"],
            "additionalProperties": False,
        },
    },
}

_STRUCTURED_WORDS = ("response_format", "json_schema", "structured output", "guided")


@dataclass(frozen=True, slots=True)
class Attempt:
    """How one HTTP attempt ended.

    Attributes:
        outcome: an :data:`~cutegen.codegen.llm.records.OUTCOMES` value ("ok" means a
            well-formed answer arrived; its text is not parsed yet).
        text: the reply text (choice 0).
        finish_reason / prompt_tokens / completion_tokens: as the server reported them.
        status: the HTTP status, when one arrived.
        retry_after_s: the server's Retry-After (or retry-after-ms), when given.
        error: what went wrong.
        generated: whether the server may have generated (and billed) tokens.
        rejects_schema: a 4xx that complains about ``response_format``.
    """

    outcome: str
    text: str = ""
    finish_reason: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    status: int | None = None
    retry_after_s: float | None = None
    error: str = ""
    generated: bool = True
    rejects_schema: bool = False


def make_async_client(config: LLMConfig) -> Any:
    """An ``openai.AsyncOpenAI`` for this endpoint, with the SDK's own retries off: the one
    retry loop is :mod:`cutegen.codegen.llm.client`'s, which records, charges and
    deadline-checks every attempt (its docstring says what the SDK's retries cannot do)."""
    import openai

    return openai.AsyncOpenAI(api_key=config.api_key, base_url=config.base_url, max_retries=0,
                              timeout=config.attempt_timeout_s)


def request_body(config: LLMConfig, system: str, prompt: str, *, structured: bool) -> dict:
    """Keyword arguments of ``chat.completions.create`` for one call."""
    body: dict[str, Any] = {
        "model": config.model,
        "messages": [{"role": "system", "content": system},
                     {"role": "user", "content": prompt}],
        "stream": config.stream,
    }
    if config.max_tokens_field == "max_tokens":
        body["max_tokens"] = config.max_tokens
    else:
        body["max_completion_tokens"] = config.max_tokens
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.stream:
        body["stream_options"] = {"include_usage": True}
    if structured:
        body["response_format"] = CANDIDATE_SCHEMA
    return body


def parse_retry_after(headers: Any, *, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or HTTP date).

    The SDK has the same parser, but only as a private method of its client
    (``_parse_retry_after_header``), which its retries use; with those off we read the
    header of the error it raises ourselves."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parsed = email.utils.parsedate_tz(value)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


def _decode(body: bytes) -> str:
    # Undecodable bytes survive as lone surrogates; extraction reports them (F7).
    return body.decode("utf-8", errors="surrogateescape")


def _usage(data: dict) -> tuple[int | None, int | None]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None, None
    p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (p if isinstance(p, int) else None), (c if isinstance(c, int) else None)


def _server_error(data: dict) -> str:
    err = data.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def parse_completion(body: bytes, status: int) -> Attempt:
    """Classify a non-streamed ``chat.completion`` body."""
    try:
        data = json.loads(_decode(body))
    except json.JSONDecodeError as e:
        return Attempt("malformed", status=status, error=f"response body is not JSON: {e}")
    if not isinstance(data, dict):
        return Attempt("malformed", status=status, error="response body is not a JSON object")
    if data.get("error"):
        return Attempt("malformed", status=status,
                       error=f"server answered 200 with an error: {_server_error(data)}")
    prompt_tokens, completion_tokens = _usage(data)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Attempt("malformed", status=status, prompt_tokens=prompt_tokens,
                       completion_tokens=completion_tokens, error="response has no choices")
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    return Attempt("ok", text=content if isinstance(content, str) else "",
                   finish_reason=str(choices[0].get("finish_reason") or ""), status=status,
                   prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


class StreamParser:
    """Accumulates a server-sent-event chat stream, one network chunk at a time."""

    def __init__(self) -> None:
        self._buf = b""
        self.parts: list[str] = []
        self.finish_reason = ""
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.error = ""
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        while b"\n" in self._buf and not self.done:
            line, self._buf = self._buf.split(b"\n", 1)
            self._line(line.rstrip(b"\r"))

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # comments, event names, ids, blank separators
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            data = json.loads(_decode(payload))
        except json.JSONDecodeError as e:
            self.error = self.error or f"stream event is not JSON: {e}"
            return
        if not isinstance(data, dict):
            return
        if data.get("error"):
            self.error = f"server sent an error event: {_server_error(data)}"
            self.done = True
            return
        p, c = _usage(data)
        if p is not None and c is not None:
            self.prompt_tokens, self.completion_tokens = p, c
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(piece, str):
                self.parts.append(piece)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def result(self, status: int) -> Attempt:
        if self._buf.strip() and not self.done:
            self._line(self._buf.strip())
        kw = {"status": status, "prompt_tokens": self.prompt_tokens,
              "completion_tokens": self.completion_tokens}
        if self.error:
            return Attempt("malformed", text="".join(self.parts), error=self.error, **kw)
        if not self.done and not self.finish_reason:
            return Attempt("connection_error", text="".join(self.parts),
                           error="stream ended before [DONE] or a finish_reason", **kw)
        return Attempt("ok", text="".join(self.parts), finish_reason=self.finish_reason, **kw)


async def send_once(client: Any, config: LLMConfig, body: dict, *, timeout_s: float) -> Attempt:
    """Send one request and read its answer; every failure becomes an :class:`Attempt`.

    The caller wraps this in a cancel scope for the deadlines; a ``TimeoutError`` from
    that scope propagates.
    """
    import httpx2
    import openai

    timeout = httpx2.Timeout(timeout_s, connect=min(config.connect_timeout_s, timeout_s))
    try:
        async with client.chat.completions.with_streaming_response.create(
                **body, timeout=timeout) as response:
            raw = response.http_response
            status = raw.status_code
            parser = StreamParser() if config.stream else None
            chunks: list[bytes] = []
            size = 0
            async for chunk in raw.aiter_bytes():
                size += len(chunk)
                if size > config.max_response_bytes:
                    return Attempt("too_large", status=status,
                                   error=f"response body passed {config.max_response_bytes:,} "
                                         "bytes and was cut off")
                if parser is not None:
                    parser.feed(chunk)
                    if parser.done:
                        break
                else:
                    chunks.append(chunk)
            return parser.result(status) if parser else parse_completion(b"".join(chunks), status)
    except openai.APIStatusError as e:
        return _status_attempt(e)
    except openai.APITimeoutError as e:
        return Attempt("timeout", error=f"no answer within {timeout_s:.1f} s ({e})")
    except openai.APIConnectionError as e:
        cause = e.__cause__
        sent = not isinstance(cause, httpx2.ConnectError | httpx2.ConnectTimeout)
        return Attempt("connection_error", error=f"{e.message} {_describe(cause)}".strip(),
                       generated=sent)
    except httpx2.TimeoutException as e:  # while reading the body
        return Attempt("timeout", error=f"read timed out after {timeout_s:.1f} s ({_describe(e)})")
    except httpx2.HTTPError as e:  # connection dropped while reading the body
        return Attempt("connection_error", error=f"connection failed mid-answer: {_describe(e)}")


def _describe(e: BaseException | None) -> str:
    if e is None:
        return ""
    text = str(e) or type(e).__name__
    return f"({type(e).__name__}: {text})" if str(e) else f"({text})"


def _status_attempt(e: Any) -> Attempt:
    status = int(e.status_code)
    retry_after = parse_retry_after(e.response.headers)
    message = str(getattr(e, "message", "") or e)
    if status == 429:
        return Attempt("rate_limited", status=status, retry_after_s=retry_after,
                       error=f"HTTP 429 rate limited: {message}", generated=False)
    if status >= 500:
        return Attempt("server_error", status=status, retry_after_s=retry_after,
                       error=f"HTTP {status} from the server: {message}")
    lowered = message.lower()
    return Attempt("http_error", status=status, error=f"HTTP {status}: {message}",
                   generated=False,
                   rejects_schema=status in (400, 422) and any(w in lowered
                                                               for w in _STRUCTURED_WORDS))
