"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests (RELIABILITY F10).

It binds an ephemeral loopback port, answers ``POST /v1/chat/completions`` from a queue
of scripted :class:`Answer` values (streamed as server-sent events when the request asks
for ``stream``), and records every request it receives. Shipped in the package, like
:mod:`cutegen.testing`, so that plugin authors and the lead's integration tests can drive
the real ``openai`` client without any network::

    with LoopbackLLMServer() as srv:
        srv.push(reply("```python\\nclass ModelNew: ...\\n```"), error(503), ...)
        config = LLMConfig(model="fake", base_url=srv.base_url, api_key="x")

An empty queue answers HTTP 500 "script exhausted", so a test that makes more calls than
it scripted fails loudly.
"""

from __future__ import annotations

import json
import queue
import socket
import struct
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: A small candidate-shaped file (not a real kernel) for scripted replies.
SAMPLE_CANDIDATE = '''import torch
import cutlass
import cutlass.cute as cute

TUNABLES = {"threads": 256}
TUNABLE_CHOICES = {"threads": [128, 256]}


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


def fenced(code: str = SAMPLE_CANDIDATE, *, note: str = "Here is the kernel.") -> str:
    """A reply the way a model writes it: a sentence, then one ```python block."""
    return f"{note}\n\n```python\n{code.rstrip()}\n```\n"


@dataclass(frozen=True, slots=True)
class Answer:
    """One scripted answer. Build these with :func:`reply`, :func:`error`, :func:`raw`,
    :func:`drip`, :func:`reset` and :func:`stall`."""

    kind: str
    status: int = 200
    content: str = ""
    finish_reason: str = "stop"
    usage: tuple[int, int] | None = (100, 50)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    interval_s: float = 0.0
    chunks: int = 3


def reply(content: str, *, finish_reason: str = "stop", usage: tuple[int, int] | None = (100, 50),
          headers: Mapping[str, str] | None = None, chunks: int = 3) -> Answer:
    """A normal completion (JSON, or ``chunks`` SSE deltas when the request streams)."""
    return Answer("reply", content=content, finish_reason=finish_reason, usage=usage,
                  headers=dict(headers or {}), chunks=chunks)


def error(status: int, message: str = "scripted error", *,
          headers: Mapping[str, str] | None = None) -> Answer:
    """An HTTP error with an OpenAI-style JSON error body."""
    return Answer("error", status=status, content=message, headers=dict(headers or {}))


def raw(body: bytes, *, status: int = 200, content_type: str = "application/json") -> Answer:
    """Exactly these bytes as the response body."""
    return Answer("raw", status=status, body=body, headers={"Content-Type": content_type})


def drip(body: bytes, *, interval_s: float = 1.0) -> Answer:
    """Send the headers, then ``body`` one byte every ``interval_s`` seconds."""
    return Answer("drip", body=body, interval_s=interval_s)


def stall(seconds: float) -> Answer:
    """Accept the request and say nothing for ``seconds``, then close."""
    return Answer("stall", interval_s=seconds)


def reset() -> Answer:
    """Read the request, then reset the connection without answering."""
    return Answer("reset")


def completion_json(content: str | bytes, *, finish_reason: str = "stop",
                    usage: tuple[int, int] | None = (100, 50), model: str = "loopback") -> bytes:
    """A ``chat.completion`` body; bytes content is spliced in raw (e.g. invalid UTF-8)."""
    marker = "\u0000CONTENT\u0000"
    doc: dict[str, Any] = {
        "id": "chatcmpl-loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason,
                     "message": {"role": "assistant",
                                 "content": marker if isinstance(content, bytes) else content}}],
    }
    if usage is not None:
        doc["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                        "total_tokens": usage[0] + usage[1]}
    out = json.dumps(doc).encode("utf-8")
    if isinstance(content, bytes):
        out = out.replace(json.dumps(marker).encode()[1:-1], content)
    return out


def _sse_events(a: Answer) -> list[bytes]:
    n = max(1, a.chunks)
    step = max(1, -(-len(a.content) // n))
    pieces = [a.content[i:i + step] for i in range(0, len(a.content), step)] or [""]
    events = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        chunk: dict[str, Any] = {
            "id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 0,
            "model": "loopback",
            "choices": [{"index": 0, "delta": {"content": piece},
                         "finish_reason": a.finish_reason if last else None}]}
        events.append(b"data: " + json.dumps(chunk).encode("utf-8") + b"\n\n")
    if a.usage is not None:
        usage = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": 0,
                 "model": "loopback", "choices": [],
                 "usage": {"prompt_tokens": a.usage[0], "completion_tokens": a.usage[1],
                           "total_tokens": sum(a.usage)}}
        events.append(b"data: " + json.dumps(usage).encode("utf-8") + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # clients hanging up are expected


@dataclass(frozen=True, slots=True)
class ReceivedRequest:
    """What the server saw."""

    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]


class LoopbackLLMServer:
    """The scripted server (a context manager). See the module docstring."""

    def __init__(self) -> None:
        self._answers: queue.Queue[Answer] = queue.Queue()
        self._stop = threading.Event()
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                try:
                    body = json.loads(data or b"{}")
                except json.JSONDecodeError:
                    body = {}
                with server._lock:
                    server.requests.append(ReceivedRequest(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                try:
                    answer = server._answers.get_nowait()
                except queue.Empty:
                    answer = error(500, "loopback script exhausted")
                try:
                    server._answer(self, answer, bool(body.get("stream")))
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True, name="loopback-llm")

    # -- lifecycle --------------------------------------------------------------------
    def __enter__(self) -> LoopbackLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *answers: Answer) -> None:
        """Queue answers, served in order, one per request."""
        for a in answers:
            self._answers.put(a)

    def pending(self) -> int:
        return self._answers.qsize()

    # -- answering --------------------------------------------------------------------
    def _answer(self, h: BaseHTTPRequestHandler, a: Answer, stream: bool) -> None:
        if a.kind == "reset":
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            h.close_connection = True
            h.connection.close()
            return
        if a.kind == "stall":
            self._stop.wait(a.interval_s)
            h.close_connection = True
            return
        if a.kind == "error":
            body = json.dumps({"error": {"message": a.content, "type": "scripted",
                                         "code": a.status}}).encode()
            return self._send(h, a.status, body, "application/json", a.headers)
        if a.kind == "raw":
            return self._send(h, a.status, a.body, a.headers.get("Content-Type", ""), {})
        if a.kind == "drip":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(a.body)))
            h.end_headers()
            h.wfile.flush()
            for i in range(len(a.body)):
                if self._stop.wait(a.interval_s):
                    break
                h.wfile.write(a.body[i:i + 1])
                h.wfile.flush()
            h.close_connection = True
            return
        if stream:
            h.send_response(a.status)
            h.send_header("Content-Type", "text/event-stream")
            for k, v in a.headers.items():
                h.send_header(k, v)
            h.end_headers()
            for event in _sse_events(a):
                h.wfile.write(event)
                h.wfile.flush()
            h.close_connection = True
            return
        body = completion_json(a.content, finish_reason=a.finish_reason, usage=a.usage)
        self._send(h, a.status, body, "application/json", a.headers)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str,
              headers: Mapping[str, str]) -> None:
        h.send_response(status)
        if ctype:
            h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()
