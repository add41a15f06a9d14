"""Signal's httpx transport: httpcore pools over the checked network backend, proxies.

``httpx.AsyncHTTPTransport`` takes no network backend, so this transport builds the
httpcore pools itself (``AsyncConnectionPool`` or ``AsyncHTTPProxy`` with
``network_backend=``:class:`~signal_feeds.http.backend.CheckedBackend`) and translates
httpcore's exceptions into httpx's, as any httpx transport does. Everything else is
httpx and httpcore as they ship.

Which proxy a request takes is :class:`~signal_feeds.http.proxies.ProxyRoutes`' answer;
the TLS context is :class:`~signal_feeds.http.tls.TlsContext`'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator

import httpcore
import httpx

from signal_feeds.http.addresses import Resolver, is_private_address
from signal_feeds.http.backend import CheckedBackend
from signal_feeds.http.proxies import ProxyRoutes
from signal_feeds.http.tls import TlsContext

__all__ = ["DEFAULT_KEEPALIVE_EXPIRY", "SignalTransport", "SingleConnectionTransport"]

#: Seconds an idle kept-alive connection is kept before it is closed.
DEFAULT_KEEPALIVE_EXPIRY = 30.0

# httpcore's exceptions and the httpx ones a transport raises for them; subclasses come
# first, so the first match is the most precise.
_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _EXCEPTIONS:
            if isinstance(exc, theirs):
                raise ours(str(exc)) from exc
        raise


class SignalTransport(httpx.AsyncBaseTransport):
    """An httpx transport with Signal's network backend, proxies and TLS context.

    ``connections`` bounds each pool (one pool per proxy route and per scheme, created
    when first used). ``resolver`` and ``is_private`` are the address check's seams.
    """

    def __init__(self, *, connections: int = 10, resolver: Resolver | None = None,
                 tls: TlsContext | None = None, proxies: ProxyRoutes | None = None,
                 keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
                 is_private: Callable[[str], bool] = is_private_address) -> None:
        self._connections = connections
        self._backend = CheckedBackend(resolver, is_private=is_private)
        self._proxy_backend = CheckedBackend(resolver, check=False)
        self._tls = tls or TlsContext()
        self._proxies = proxies if proxies is not None else ProxyRoutes.from_setting()
        self._keepalive_expiry = keepalive_expiry
        self._pools: dict[tuple[str | None, bool], httpcore.AsyncConnectionPool] = {}

    def _pool(self, proxy: str | None, https: bool) -> httpcore.AsyncConnectionPool:
        key = (proxy, https)
        pool = self._pools.get(key)
        if pool is not None:
            return pool
        # Pools are split by scheme so a run of plain-http sources never loads a CA bundle.
        context = self._tls.get() if https else None
        if proxy is None:
            pool = httpcore.AsyncConnectionPool(
                ssl_context=context, max_connections=self._connections,
                max_keepalive_connections=self._connections,
                keepalive_expiry=self._keepalive_expiry, network_backend=self._backend)
        else:
            url = httpx.URL(proxy)
            auth = (url.username, url.password) if url.username else None
            pool = httpcore.AsyncHTTPProxy(
                proxy_url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host,
                                       port=url.port, target=url.raw_path),
                proxy_auth=auth, ssl_context=context,
                proxy_ssl_context=self._tls.get() if url.scheme == "https" else None,
                max_connections=self._connections,
                max_keepalive_connections=self._connections,
                keepalive_expiry=self._keepalive_expiry, network_backend=self._proxy_backend)
        self._pools[key] = pool
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on a pooled connection; the body streams as it arrives."""
        url = request.url
        proxy = self._proxies.for_url(url)
        if proxy is not None and not proxy.lower().startswith(_PROXY_SCHEMES):
            # httpcore would speak plain HTTP to a SOCKS port (ALL_PROXY=socks5://...
            # is common): refuse by name rather than fail with a puzzling network error.
            raise httpx.ProxyError(f"proxy {_shown(proxy)} is not supported: only http:// "
                                   "and https:// proxies are (see the proxy setting)")
        pool = self._pool(proxy, url.scheme == "https")
        core_request = _core_request(request)
        origin = core_request.url.origin
        # As in SingleConnectionTransport: a kept-alive connection (to a proxy, most
        # often, whose idle timeout may be short) that the other end closes just as the
        # request goes out fails a GET that got no byte of an answer; it goes once more.
        reused = any(connection.can_handle_request(origin) and connection.is_idle()
                     for connection in pool.connections)
        try:
            with _translated():
                try:
                    response = await pool.handle_async_request(core_request)
                except _STALE_CONNECTION:
                    if not reused or request.method not in _IDEMPOTENT:
                        raise
                    response = await pool.handle_async_request(_core_request(request))
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as exc:
            if proxy is None:
                raise
            # Through a proxy, a connection is only ever made to the proxy: say so, or
            # the message names an address the user never configured.
            raise type(exc)(f"proxy {_shown(proxy)}: {exc}") from exc
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as exc:
            if proxy is None:
                raise
            # The proxy, or the server behind it: either way not a server the user can
            # look at without knowing a proxy was in between.
            raise type(exc)(f"through proxy {_shown(proxy)}: {exc}") from exc
        return _response(response)

    async def aclose(self) -> None:
        """Close every pool and its connections."""
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            with _translated():
                await pool.aclose()


class SingleConnectionTransport(httpx.AsyncBaseTransport):
    """One request at a time over at most one direct connection, kept alive for as long
    as requests go to its origin (a request to another origin closes it and opens one
    there). No pool: httpcore's ``AsyncHTTPConnection`` is used as it is, so a request
    costs no pool bookkeeping (see :mod:`signal_feeds.http.clients`, which keeps many of
    these). Requests that go through a proxy use a one-connection
    :class:`SignalTransport` made on first use.
    """

    def __init__(self, *, backend: CheckedBackend, tls: TlsContext, proxies: ProxyRoutes,
                 resolver: Resolver | None = None,
                 keepalive_expiry: float = DEFAULT_KEEPALIVE_EXPIRY,
                 is_private: Callable[[str], bool] = is_private_address) -> None:
        self._backend = backend
        self._tls = tls
        self._proxies = proxies
        self._resolver = resolver
        self._keepalive_expiry = keepalive_expiry
        self._is_private = is_private
        self._connection: httpcore.AsyncHTTPConnection | None = None
        self._proxied: SignalTransport | None = None
        #: Whether :meth:`_connection_for` last handed out a kept-alive connection.
        self._reused = False

    async def _connection_for(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        connection = self._connection
        self._reused = False
        if connection is not None:
            if not (connection.is_idle() or connection.is_closed()):
                raise RuntimeError("SingleConnectionTransport carries one request at a time")
            if (connection.can_handle_request(origin) and connection.is_available()
                    and not connection.has_expired()):
                self._reused = True
                return connection  # kept alive, still open, same origin
            self._connection = None
            await connection.aclose()
        context = self._tls.get() if origin.scheme == b"https" else None
        connection = self._connection = httpcore.AsyncHTTPConnection(
            origin, ssl_context=context, keepalive_expiry=self._keepalive_expiry,
            network_backend=self._backend)
        return connection

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; the body streams as it arrives (close it before the next)."""
        if self._proxies.proxies and self._proxies.for_url(request.url) is not None:
            if self._proxied is None:
                self._proxied = SignalTransport(
                    connections=1, resolver=self._resolver, tls=self._tls,
                    proxies=self._proxies, keepalive_expiry=self._keepalive_expiry,
                    is_private=self._is_private)
            return await self._proxied.handle_async_request(request)
        core_request = _core_request(request)
        with _translated():
            connection = await self._connection_for(core_request.url.origin)
            try:
                response = await connection.handle_async_request(core_request)
            except _STALE_CONNECTION:
                if not self._reused or request.method not in _IDEMPOTENT:
                    raise
                # A server may close an idle kept-alive connection just as the next
                # request goes out on it (its keep-alive timeout; no way to tell the
                # close from the wire in time). Nothing of a response arrived, so a GET
                # is sent once more, on a new connection, inside the same deadline.
                connection = await self._connection_for(core_request.url.origin)
                response = await connection.handle_async_request(_core_request(request))
        return _response(response)

    async def aclose(self) -> None:
        """Close the connection (and the proxy transport, if one was made)."""
        connection, self._connection = self._connection, None
        proxied, self._proxied = self._proxied, None
        with _translated():
            if connection is not None:
                await connection.aclose()
        if proxied is not None:
            await proxied.aclose()


#: What a request on a kept-alive connection the server has closed fails with, before
#: any byte of a response: "Server disconnected without sending a response", a reset.
_STALE_CONNECTION = (httpcore.RemoteProtocolError, httpcore.ReadError, httpcore.WriteError)
#: Methods sent again on a new connection when a kept-alive one turns out closed.
_IDEMPOTENT = ("GET", "HEAD")

#: The proxy URL schemes httpcore's HTTP proxy speaks.
_PROXY_SCHEMES = ("http://", "https://")


def _shown(proxy: str) -> str:
    """A proxy URL as a message may show it: scheme, host and port, no credentials."""
    try:
        url = httpx.URL(proxy)
    except (httpx.InvalidURL, ValueError):
        return proxy.split("://", 1)[0] + "://…"
    port = f":{url.port}" if url.port else ""
    return f"{url.scheme}://{url.host}{port}"


def _core_request(request: httpx.Request) -> httpcore.Request:
    url = request.url
    assert isinstance(request.stream, httpx.AsyncByteStream)
    return httpcore.Request(
        method=request.method,
        url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port,
                         target=url.raw_path),
        headers=request.headers.raw, content=request.stream, extensions=request.extensions)


def _response(response: httpcore.Response) -> httpx.Response:
    return httpx.Response(status_code=response.status, headers=response.headers,
                          stream=_TranslatedStream(response), extensions=response.extensions)


class _TranslatedStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _translated():
            async for chunk in self._response.aiter_stream():
                yield chunk

    async def aclose(self) -> None:
        with _translated():
            await self._response.aclose()
