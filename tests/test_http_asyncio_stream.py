"""The asyncio network stream under httpcore (signal_feeds.http.network), on real sockets.

Each test starts an asyncio server on 127.0.0.1 inside its own event loop and talks to
it through :func:`open_stream`, the way httpcore does: bytes in, bytes out, httpcore's
exceptions for the failures.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct
from collections.abc import Awaitable, Callable

import httpcore
import pytest

from signal_feeds.http.addresses import PRIVATE_ADDRESS_INFO
from signal_feeds.http.network import AsyncioStream, open_stream

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _with_server(handler: Handler,
                       body: Callable[[int], Awaitable[None]]) -> None:
    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    try:
        await body(server.sockets[0].getsockname()[1])
    finally:
        server.close()
        await server.wait_closed()


async def _read_all(stream: AsyncioStream) -> bytes:
    out = bytearray()
    while chunk := await stream.read(65536, timeout=10):
        out += chunk
    return bytes(out)


def test_a_body_larger_than_the_read_buffer_arrives_whole_and_in_order() -> None:
    # 3 MB is well past the 256 KB at which the stream stops reading the socket: reading
    # it slowly exercises the pause and the resume.
    payload = bytes(range(256)) * (3 * 4096)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)
        writer.write(payload)
        await writer.drain()

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10)
        await stream.write(b"send", timeout=10)
        await asyncio.sleep(0.2)  # let the server fill the buffers
        got = bytearray()
        while chunk := await stream.read(1000, timeout=10):  # small reads: slow reader
            assert len(chunk) <= 1000
            got += chunk
        await stream.aclose()
        assert hashlib.sha256(got).digest() == hashlib.sha256(payload).digest()

    asyncio.run(_with_server(handler, body))


def test_a_silent_server_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; waits for the client to go

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10)
        await stream.write(b"GET / HTTP/1.1\r\n\r\n", timeout=10)
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(100, timeout=0.2)
        await stream.aclose()

    asyncio.run(_with_server(handler, body))


def test_a_closed_peer_reads_as_end_of_stream_and_an_idle_stream_says_readable() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        await writer.drain()

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10)
        assert await _read_all(stream) == b"bye"
        # What httpcore asks before reusing a kept-alive connection.
        assert stream.get_extra_info("is_readable") is True
        with pytest.raises(httpcore.WriteError):
            await stream.write(b"more", timeout=1)
        await stream.aclose()

    asyncio.run(_with_server(handler, body))


def test_a_reset_is_a_read_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(4)
        sock = writer.get_extra_info("socket")
        # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10)
        await stream.write(b"ping", timeout=10)
        with pytest.raises(httpcore.ReadError, match="reset"):
            await _read_all(stream)
        await stream.aclose()

    asyncio.run(_with_server(handler, body))


def test_an_unused_kept_alive_stream_is_not_readable() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10)
        await asyncio.sleep(0.05)
        assert stream.get_extra_info("is_readable") is False
        assert stream.get_extra_info("server_addr")[:2] == ("127.0.0.1", port)
        assert stream.get_extra_info("ssl_object") is None
        await stream.aclose()

    asyncio.run(_with_server(handler, body))


def test_a_refused_port_is_a_connect_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def body() -> None:
        with pytest.raises(httpcore.ConnectError):
            await open_stream("127.0.0.1", port, timeout=10)

    asyncio.run(body())


def test_the_guard_runs_before_every_write_and_the_stream_says_what_was_checked() -> None:
    class Refused(Exception):
        pass

    allowed = [True]

    def guard() -> None:
        if not allowed[0]:
            raise Refused

    received: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read())

    async def body(port: int) -> None:
        stream = await open_stream("127.0.0.1", port, timeout=10, private=True, guard=guard)
        assert stream.get_extra_info(PRIVATE_ADDRESS_INFO) is True
        await stream.write(b"first", timeout=10)
        allowed[0] = False
        with pytest.raises(Refused):
            await stream.write(b"second", timeout=10)
        await stream.aclose()
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.02)

    asyncio.run(_with_server(handler, body))
    assert received == [b"first"]
