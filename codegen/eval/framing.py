"""Framed JSON messages between the evaluator and its worker processes.

A frame is ``b"CGEN"`` + a 4-byte big-endian length + UTF-8 JSON. Frames travel on a
dedicated pipe (not stdout), so a candidate that prints does not disturb them; a
candidate that writes garbage into the pipe corrupts the stream, which the reader reports
as a protocol error (the evaluation then ends as a crash, never as a success).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator
from typing import Any

MAGIC = b"CGEN"
MAX_FRAME = 16 * 1024 * 1024


class ProtocolError(Exception):
    """The byte stream is not a sequence of valid frames."""


def encode(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, separators=(",", ":"), allow_nan=True).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise ValueError(f"message of {len(body)} bytes exceeds the frame limit")
    return MAGIC + struct.pack(">I", len(body)) + body


def send(fd: int, msg: dict[str, Any]) -> None:
    """Write one frame to ``fd`` (blocking, complete)."""
    data = encode(msg)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        b = os.read(fd, n)
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def frames(fd: int) -> Iterator[dict[str, Any]]:
    """Yield messages from ``fd`` until EOF.

    Raises:
        ProtocolError: bad magic, oversize frame, truncated frame or invalid JSON.
    """
    while True:
        head = _read_exact(fd, 8)
        if head is None:
            return
        if head[:4] != MAGIC:
            raise ProtocolError(f"bad frame header {head[:4]!r}")
        (n,) = struct.unpack(">I", head[4:])
        if n > MAX_FRAME:
            raise ProtocolError(f"frame of {n} bytes exceeds the limit")
        body = _read_exact(fd, n)
        if body is None:
            raise ProtocolError("stream ended inside a frame")
        try:
            msg = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ProtocolError(f"invalid frame body: {e}") from e
        if not isinstance(msg, dict) or "t" not in msg:
            raise ProtocolError("frame is not a message object")
        yield msg
