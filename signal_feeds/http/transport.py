"""Signal's httpx transport: httpcore pools over the checked network backend, proxies.

``httpx.AsyncHTTPTransport`` takes no network backend, so this transport builds the
httpcore pools itself (``AsyncConnectionPool`` or ``AsyncHTTPProxy`` with
``network_backend=``:class:`~signal_feeds.http.addresses.CheckedBackend`) and translates
httpcore's exceptions into httpx's, as any httpx transport does. Everything else is
httpx and httpcore as they ship.

Proxies: ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` (either case)
are honoured; the ``proxy`` setting replaces the first three (``"direct"``: no proxy).
Nothing else is read from the environment, ``.netrc`` included (see README).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import httpcore
import httpx

from signal_feeds.http.addresses import CheckedBackend, Resolver, is_private_address

__all__ = ["DEFAULT_KEEPALIVE_EXPIRY", "DIRECT", "ProxyRoutes", "SignalTransport",
           "SingleConnectionTransport", "TlsContext", "default_tls_context"]

#: Seconds an idle kept-alive connection is kept before it is closed.
DEFAULT_KEEPALIVE_EXPIRY = 30.0
#: The ``proxy`` setting that turns proxies off whatever the environment says.
DIRECT = "direct"

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


def default_tls_context() -> ssl.SSLContext:
    """certifi's CA bundle, or OpenSSL's ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi  # only when an https source exists

    return ssl.create_default_context(cafile=certifi.where())


class TlsContext:
    """One ``ssl.SSLContext`` for a run, built on first use: loading a CA bundle takes
    tens of milliseconds, and a run of plain-http sources never needs one."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self._context = context

    def get(self) -> ssl.SSLContext:
        """The context (built now if this is the first https connection)."""
        if self._context is None:
            self._context = default_tls_context()
        return self._context


@dataclass(frozen=True)
class ProxyRoutes:
    """Which proxy (if any) a URL goes through."""

    #: Proxy URL by scheme (``http``, ``https``, ``all``).
    proxies: tuple[tuple[str, str], ...] = ()
    #: ``NO_PROXY`` entries: host names (suffix match), addresses, networks, ``*``.
    bypass: tuple[str, ...] = ()

    @classmethod
    def from_setting(cls, setting: str = "") -> ProxyRoutes:
        """Routes from the environment, with the ``proxy`` setting (if any) replacing
        its proxy variables; ``"direct"`` turns proxies off."""
        if setting == DIRECT:
            return cls()
        found = urllib.request.getproxies_environment()
        bypass = tuple(h.strip().lower() for h in found.get("no", "").split(",") if h.strip())
        if setting:
            return cls((("all", setting),), bypass)
        proxies = tuple((scheme, found[scheme]) for scheme in ("http", "https", "all")
                        if found.get(scheme))
        return cls(proxies, bypass)

    def for_url(self, url: httpx.URL) -> str | None:
        """The proxy URL for ``url``, or ``None`` to connect directly."""
        if not self.proxies or self._bypassed(url.host.lower(), url.port):
            return None
        table = dict(self.proxies)
        proxy = table.get(url.scheme) or table.get("all")
        if proxy and "://" not in proxy:
            proxy = f"http://{proxy}"
        return proxy

    def _bypassed(self, host: str, port: int | None) -> bool:
        for entry in self.bypass:
            if entry == "*":
                return True
            name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (
                entry, "", "")
            if entry_port and port is not None and entry_port != str(port):
                continue
            name = name.strip("[]").lstrip("*")
            if "/" in name:
                with contextlib.suppress(ValueError):
                    if ipaddress.ip_address(host) in ipaddress.ip_network(name, strict=False):
                        return True
                continue
            if host == name.lstrip(".") or host.endswith("." + name.lstrip(".")):
                return True
        return False


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
        pool = self._pool(self._proxies.for_url(url), url.scheme == "https")
        with _translated():
            response = await pool.handle_async_request(_core_request(request))
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

    async def _connection_for(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        connection = self._connection
        if connection is not None:
            if not (connection.is_idle() or connection.is_closed()):
                raise RuntimeError("SingleConnectionTransport carries one request at a time")
            if (connection.can_handle_request(origin) and connection.is_available()
                    and not connection.has_expired()):
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
            response = await connection.handle_async_request(core_request)
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
