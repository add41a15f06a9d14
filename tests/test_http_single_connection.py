"""SingleConnectionTransport: one connection, kept alive per origin, no pool (real sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx
import pytest

from signal_feeds.http.backend import CheckedBackend
from signal_feeds.http.proxies import ProxyRoutes
from signal_feeds.http.tls import TlsContext
from signal_feeds.http.transport import SingleConnectionTransport

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Origin:
    """A keep-alive server that counts connections opened and closed by the client."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = asyncio.Event()
        self.requests = 0
        self.port = 0
        self._server: asyncio.Server | None = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                      ) -> None:
        self.opened += 1
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                writer.write(ANSWER)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed.set()
        finally:
            writer.close()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/feed"


def _transport() -> SingleConnectionTransport:
    return SingleConnectionTransport(backend=CheckedBackend(), tls=TlsContext(),
                                     proxies=ProxyRoutes())


async def _get(transport: SingleConnectionTransport, url: str) -> bytes:
    response = await transport.handle_async_request(httpx.Request("GET", url))
    try:
        return b"".join([chunk async for chunk in response.aiter_raw()])
    finally:
        await response.aclose()


def _run(body: Callable[[Origin, Origin], Awaitable[None]]) -> None:
    async def main() -> None:
        a, b = Origin(), Origin()
        await a.start()
        await b.start()
        try:
            await body(a, b)
        finally:
            await a.stop()
            await b.stop()
    asyncio.run(main())


def test_requests_to_one_origin_share_the_connection_and_another_origin_replaces_it() -> None:
    async def body(a: Origin, b: Origin) -> None:
        transport = _transport()
        assert [await _get(transport, a.url()) for _ in range(3)] == [b"ok"] * 3
        assert (a.opened, a.requests) == (1, 3)
        assert await _get(transport, b.url()) == b"ok"
        await asyncio.wait_for(a.closed.wait(), 10)  # the old origin's connection is closed
        assert (b.opened, b.requests) == (1, 1)
        await transport.aclose()
        await asyncio.wait_for(b.closed.wait(), 10)

    _run(body)


def test_a_second_request_while_a_response_is_open_is_refused() -> None:
    async def body(a: Origin, b: Origin) -> None:
        transport = _transport()
        response = await transport.handle_async_request(httpx.Request("GET", a.url()))
        with pytest.raises(RuntimeError, match="one request at a time"):
            await transport.handle_async_request(httpx.Request("GET", b.url()))
        assert b"".join([chunk async for chunk in response.aiter_raw()]) == b"ok"
        await response.aclose()
        assert await _get(transport, a.url()) == b"ok"  # the connection survived
        assert a.opened == 1 and b.opened == 0
        await transport.aclose()

    _run(body)
