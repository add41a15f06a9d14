"""HTTP/1.1 connections for the fetcher: asyncio streams and h11, kept alive per origin.

Measured on the 2-core machine this project runs on, a request through one long-lived
``httpx.AsyncClient`` costs 1.1–1.5 ms of CPU and the same request through h11 on an
asyncio stream 0.35 ms. A run is one event loop over hundreds of sources, so that
difference decides how close a latency-bound run gets to its ideal and how fast a warm
run of 304s is (benchmarks/README.md). h11 is the HTTP/1.1 state machine httpx itself
uses underneath; what this module adds is only what Signal needs: GET, keep-alive per
origin, timeouts, TLS with one shared context, and a global limit on requests in flight.

Errors are :class:`HTTPError` with a ``kind`` (``connect``, ``timeout``, ``read``,
``write``, ``protocol``); :mod:`signal_feeds.fetch` turns them into ``FetchError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import h11

__all__ = ["DEFAULT_MAX_IDLE", "Connection", "ConnectionPool", "HTTPError", "Origin",
           "ResponseHead"]

#: Idle keep-alive connections kept per pool (the oldest is closed beyond this).
DEFAULT_MAX_IDLE = 100
_READ_SIZE = 65536
#: Largest response head (status line and headers) accepted.
MAX_HEAD_BYTES = 64 * 1024


class HTTPError(Exception):
    """A request that did not get a complete, well-formed response."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port: what a connection is bound to."""

    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True)
class ResponseHead:
    """Status and headers (names lower-cased, values as sent) of one response."""

    status: int
    headers: tuple[tuple[str, str], ...]

    def get(self, name: str, default: str = "") -> str:
        """The first value of header ``name`` (lower-case), or ``default``."""
        for key, value in self.headers:
            if key == name:
                return value
        return default


def _text(value: bytes) -> str:
    # Header values are opaque bytes; latin-1 maps each byte to one character, so a
    # validator is sent back byte for byte.
    return value.decode("latin-1")


def _bytes(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


class Connection:
    """One HTTP/1.1 connection; one request at a time."""

    def __init__(self, origin: Origin, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        self.origin = origin
        self._reader = reader
        self._writer = writer
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        #: Requests this connection has carried (a reused one may have gone stale).
        self.requests = 0

    @classmethod
    async def open(cls, origin: Origin, *, ssl_context: ssl.SSLContext | None,
                   timeout: float) -> Connection:
        """Connect to ``origin`` (TLS for https) within ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    origin.host, origin.port, ssl=ssl_context,
                    server_hostname=origin.host if ssl_context else None,
                    limit=_READ_SIZE)
        except TimeoutError as exc:
            raise HTTPError("timeout", f"connect timed out after {timeout:g} s") from exc
        except ssl.SSLError as exc:
            raise HTTPError("connect", f"TLS handshake failed: {exc}") from exc
        except OSError as exc:
            raise HTTPError("connect", exc.strerror or str(exc)) from exc
        return cls(origin, reader, writer)

    @property
    def reusable(self) -> bool:
        """Idle, both sides done with the last exchange, and not closed by the server."""
        return (self._h11.our_state is h11.IDLE and self._h11.their_state is h11.IDLE
                and not self._reader.at_eof() and not self._writer.is_closing())

    async def send_get(self, target: str, headers: Sequence[tuple[str, str]]) -> None:
        """Send ``GET target`` with ``headers`` (Host is added)."""
        self.requests += 1
        try:
            data = self._h11.send(h11.Request(
                method="GET", target=_bytes(target),
                headers=[(b"Host", _bytes(self.origin.host_header)),
                         *((_bytes(k), _bytes(v)) for k, v in headers)]))
            data += self._h11.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError as exc:
            raise HTTPError("protocol", f"cannot send the request: {exc}") from exc
        try:
            self._writer.write(data or b"")
            await self._writer.drain()
        except OSError as exc:
            raise HTTPError("write", _describe(exc)) from exc

    async def _event(self, timeout: float) -> h11.Event | type[h11.PAUSED]:
        while True:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise HTTPError("protocol", str(exc)) from exc
            if event is not h11.NEED_DATA:
                return event  # type: ignore[return-value]
            try:
                async with asyncio.timeout(timeout):
                    data = await self._reader.read(_READ_SIZE)
            except TimeoutError as exc:
                raise HTTPError("timeout", f"no data for {timeout:g} s") from exc
            except OSError as exc:
                raise HTTPError("read", _describe(exc)) from exc
            if not data and self._h11.their_state is h11.SEND_RESPONSE:
                # Closed before a byte of the answer: on a kept-alive connection this is
                # the server's idle timeout, and the request can go again.
                raise HTTPError("read", "the server closed the connection without answering")
            self._h11.receive_data(data)  # b"" tells h11 the peer closed

    async def read_head(self, timeout: float) -> ResponseHead:
        """The final response's status and headers (1xx responses are skipped)."""
        while True:
            event = await self._event(timeout)
            if isinstance(event, h11.Response):
                return ResponseHead(event.status_code, tuple(
                    (_text(k), _text(v)) for k, v in event.headers))
            if isinstance(event, h11.ConnectionClosed):
                raise HTTPError("read", "the server closed the connection without answering")
            if not isinstance(event, h11.InformationalResponse):
                raise HTTPError("protocol", f"unexpected {type(event).__name__}")

    async def body(self, timeout: float) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (after :meth:`read_head`)."""
        while True:
            event = await self._event(timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
                    self._h11.start_next_cycle()
                return
            else:
                raise HTTPError("protocol", f"unexpected {type(event).__name__} in a body")

    def close(self) -> None:
        """Close the connection now (no waiting for the peer)."""
        with contextlib.suppress(Exception):
            self._writer.close()


def _describe(exc: OSError) -> str:
    if isinstance(exc, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(exc, BrokenPipeError):
        return "broken pipe"
    return exc.strerror or str(exc) or type(exc).__name__


class ConnectionPool:
    """Keep-alive connections by origin, and the global limit on requests in flight.

    One pool serves a run: ``async with pool.slot():`` around a request (with its
    redirects) takes one of ``size`` slots; :meth:`connect` reuses an idle connection to
    the same origin or opens one; :meth:`release` keeps it for the next request to that
    origin. Every step is constant time: there is no scan over all connections.
    """

    def __init__(self, size: int, *, max_idle: int = DEFAULT_MAX_IDLE) -> None:
        self.size = size
        self.max_idle = max_idle
        self._slots = asyncio.Semaphore(size)
        self._idle: dict[Origin, list[Connection]] = {}
        self._idle_count = 0
        self._ssl_context: ssl.SSLContext | None = None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the pool's ``size`` slots."""
        async with self._slots:
            yield

    def _context(self) -> ssl.SSLContext:
        if self._ssl_context is None:  # loading the CA store is slow: once, when needed
            self._ssl_context = ssl.create_default_context()
        return self._ssl_context

    async def connect(self, origin: Origin, *, timeout: float) -> Connection:
        """An idle connection to ``origin`` if one is usable, else a new one."""
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if not idle:
                del self._idle[origin]
            if conn.reusable:
                return conn
            conn.close()
        context = self._context() if origin.scheme == "https" else None
        return await Connection.open(origin, ssl_context=context, timeout=timeout)

    def release(self, conn: Connection) -> None:
        """Keep ``conn`` for reuse if it can be reused, else close it."""
        if not conn.reusable:
            conn.close()
            return
        self._idle.setdefault(conn.origin, []).append(conn)
        self._idle_count += 1
        if self._idle_count > self.max_idle:
            oldest = next(o for o, conns in self._idle.items() if conns)
            self._idle[oldest].pop(0).close()
            self._idle_count -= 1
            if not self._idle[oldest]:
                del self._idle[oldest]

    async def aclose(self) -> None:
        """Close every idle connection."""
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()
        self._idle_count = 0
