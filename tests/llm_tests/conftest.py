"""Fixtures of the LLM tests: a scripted loopback server, a fast sleep, and the F10 guard.

F10 (RELIABILITY.md): these tests talk to 127.0.0.1 only. The autouse ``network_guard``
fixture replaces ``socket.socket.connect`` and ``socket.getaddrinfo`` for the duration of
every test: a connection to anything but a loopback address, or a name lookup of anything
but a loopback name, is refused and remembered, and the test fails at teardown unless it
expected (and cleared) the attempt.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from cutegen._loopback_llm import LoopbackLLMServer
from cutegen.codegen.llm import LLMClient, LLMConfig, ModelPrice
from cutegen.testing import InMemoryCallRecorder

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}

def _is_loopback(host: Any) -> bool:
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def network_guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    blocked: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
            blocked.append(address)
            raise ConnectionRefusedError(f"F10 guard: non-loopback connection to {address}")

    def connect(self: socket.socket, address: Any) -> Any:
        check(self, address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> Any:
        check(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, bytes):
            host = host.decode()
        if host is not None and not _is_loopback(host):
            blocked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, f"F10 guard: lookup of {host!r} refused")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield blocked
    assert not blocked, f"F10: non-loopback network access attempted: {blocked}"


@pytest.fixture
def server() -> Iterator[LoopbackLLMServer]:
    with LoopbackLLMServer() as srv:
        yield srv


class FastSleep:
    """An async sleep that records the delays asked for and does not wait."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        import asyncio

        self.delays.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def fast_sleep() -> FastSleep:
    return FastSleep()


@pytest.fixture
def make_client(server: LoopbackLLMServer, fast_sleep: FastSleep):
    """``make_client(**config_overrides) -> (client, recorder)`` against the server."""
    import random

    def make(recorder: Any = None, *, real_sleep: bool = False, **overrides: Any):
        kw: dict[str, Any] = {"model": "fake-model", "base_url": server.base_url,
                              "api_key": "test-key", "price": ModelPrice(1.0, 2.0),
                              "backoff_base_s": 0.5, "backoff_max_s": 4.0,
                              "attempt_timeout_s": 20.0, "total_timeout_s": 30.0}
        kw.update(overrides)
        rec = recorder if recorder is not None else InMemoryCallRecorder()
        client = LLMClient(LLMConfig(**kw), rec, sleep=None if real_sleep else fast_sleep,
                           rng=random.Random(0))
        return client, rec

    return make
