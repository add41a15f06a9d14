"""Sockets for httpcore, on asyncio's own transports.

httpcore reads and writes through an ``AsyncNetworkStream`` from its network backend
(its documented extension point). Its default for asyncio goes through anyio, which
wraps every read and write in a cancel scope and rebuilds a dict of attribute lookups on
every keep-alive check; measured here that was about a third of the CPU of a 304
(benchmarks/README.md, "HTTP client layout"). :class:`AsyncioStream` is the same contract
over an ``asyncio.Protocol``: a read returns what the event loop has already received or
waits for the next chunk, a write hands bytes to the transport and waits only when its
buffer is full, and timeouts are one ``call_later`` each. TLS is asyncio's ``start_tls``.

Errors are httpcore's (``ReadError``, ``ReadTimeout``, ``WriteError``, ``ConnectError``…),
as from any network backend; httpx translates them further up.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
from collections.abc import Callable, Iterable
from typing import Any

import httpcore

from signal_feeds.http.addresses import PRIVATE_ADDRESS_INFO

__all__ = ["AsyncioStream", "open_stream"]
#: Received bytes kept before the socket stops being read (until the reader catches up).
_READ_BUFFER_LIMIT = 256 * 1024


def _expire(waiter: asyncio.Future[None], error: type[Exception]) -> None:
    if not waiter.done():
        waiter.set_exception(error())


class _Protocol(asyncio.Protocol):
    """What the event loop delivers for one connection, kept until it is read."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.chunks: collections.deque[bytes] = collections.deque()
        self.buffered = 0
        self.reading_paused = False
        self.eof = False
        self.lost = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.writing_paused = False
        self.drained: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        if self.buffered > _READ_BUFFER_LIMIT and not self.reading_paused:
            assert self.transport is not None
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = self.lost = True
        self.error = exc
        self._wake()
        self._wake_writer()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._wake_writer()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        drained = self.drained
        if drained is not None and not drained.done():
            drained.set_result(None)


async def _wait(waiter: asyncio.Future[None], timeout: float | None,
                error: type[Exception]) -> None:
    if timeout is None:
        await waiter
        return
    handle = asyncio.get_running_loop().call_later(timeout, _expire, waiter, error)
    try:
        await waiter
    finally:
        handle.cancel()


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection. ``guard`` (if any) runs before every write: it is how a connection
    to a private address refuses to carry a request that may not reach one."""

    def __init__(self, transport: asyncio.Transport, protocol: _Protocol, *,
                 private: bool | None = None, guard: Callable[[], None] | None = None
                 ) -> None:
        self._transport = transport
        self._protocol = protocol
        self._private = private
        self._guard = guard

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof:
            protocol.waiter = asyncio.get_running_loop().create_future()
            try:
                await _wait(protocol.waiter, timeout, httpcore.ReadTimeout)
            finally:
                protocol.waiter = None
        if protocol.chunks:
            chunk = protocol.chunks.popleft()
            if len(chunk) > max_bytes:
                protocol.chunks.appendleft(chunk[max_bytes:])
                chunk = chunk[:max_bytes]
            protocol.buffered -= len(chunk)
            if protocol.reading_paused and protocol.buffered <= _READ_BUFFER_LIMIT // 2:
                protocol.reading_paused = False
                self._transport.resume_reading()
            return chunk
        if protocol.error is not None:
            raise httpcore.ReadError(_describe(protocol.error))
        return b""  # the peer closed: httpcore says what that means at this point

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if self._guard is not None:
            self._guard()
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError(_describe(protocol.error) if protocol.error
                                      else "the connection is closed")
        self._transport.write(buffer)
        if protocol.writing_paused:
            protocol.drained = asyncio.get_running_loop().create_future()
            try:
                await _wait(protocol.drained, timeout, httpcore.WriteTimeout)
            finally:
                protocol.drained = None
            if protocol.lost:
                raise httpcore.WriteError(_describe(protocol.error) if protocol.error
                                          else "the connection is closed")

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                tls = await loop.start_tls(self._transport, self._protocol, ssl_context,
                                           server_hostname=server_hostname)
        except TimeoutError as exc:
            self._transport.close()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from exc
        except OSError as exc:  # ssl.SSLError and a reset during the handshake
            self._transport.close()
            raise httpcore.ConnectError(_describe(exc)) from exc
        if tls is None:  # the peer closed during the handshake
            self._transport.close()
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        assert isinstance(tls, asyncio.Transport)
        return AsyncioStream(tls, self._protocol, private=self._private, guard=self._guard)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            # The event loop reads eagerly: an idle connection the server closed (or
            # wrote to out of turn) has its EOF or bytes here, not in the socket.
            return self._protocol.eof or bool(self._protocol.chunks)
        if info == PRIVATE_ADDRESS_INFO:
            return self._private
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    return str(exc) or type(exc).__name__


async def open_stream(address: str, port: int, *, timeout: float | None,
                      local_address: str | None = None,
                      socket_options: Iterable[Any] = (),
                      private: bool | None = None,
                      guard: Callable[[], None] | None = None) -> AsyncioStream:
    """A TCP connection to the IP ``address`` (no name resolution happens here)."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await loop.create_connection(
                _Protocol, host=address, port=port,
                local_addr=(local_address, 0) if local_address else None)
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(f"connecting to {address} timed out") from exc
    except OSError as exc:
        raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
    assert isinstance(transport, asyncio.Transport)
    for option in socket_options:
        transport.get_extra_info("socket").setsockopt(*option)
    return AsyncioStream(transport, protocol, private=private, guard=guard)
