"""What carries a request: the HTTP client layout of a run.

httpcore's pool walks all its connections and queued requests on every assignment
(encode/httpx#3215), so one client with 50 connections spends more CPU on bookkeeping
than on HTTP. Signal's default layout, :class:`TransportPool`, is many one-connection
transports (:class:`~signal_feeds.http.transport.SingleConnectionTransport`, no httpcore
pool at all) sharing one TLS context, one network backend and one proxy table: a request
leases an idle transport whose connection already goes to its origin (keep-alive), else
a new one up to ``size``, else the least recently used idle one (whose old connection is
closed). Every step is constant time. Requests go to the transport's public
``handle_async_request``: Signal follows redirects itself, so a client's redirect
handling has nothing to add (and it would parse every ``Location`` eagerly, failing on
``javascript:`` before Signal could refuse it by name). The figures behind the choice
are in benchmarks/README.md, "HTTP client layout" (``benchmarks/http_layout.py``).

:class:`SharedClient` is the other layout: every request through one client, the
caller's own (an ``httpx.AsyncClient``, perhaps around an ``httpx.MockTransport``).
:class:`DirectTransport` carries a caller's transport the way :class:`TransportPool`
carries Signal's own, so a test with ``httpx.MockTransport`` sees the outcomes a real
run gives (a client would reject a ``javascript:`` Location before Signal sees it).
"""

from __future__ import annotations

import contextlib
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from signal_feeds.errors import FetchError
from signal_feeds.http.addresses import Resolver, is_private_address
from signal_feeds.http.tls import TlsContext

if TYPE_CHECKING:
    # Imported with the first transport, not with this module (see fetch.py).
    import httpx

    from signal_feeds.http.backend import CheckedBackend
    from signal_feeds.http.proxies import ProxyRoutes
    from signal_feeds.http.transport import SingleConnectionTransport

__all__ = ["Clients", "DirectTransport", "Send", "SharedClient", "TransportPool",
           "new_client"]

_Origin = tuple[str, str, int | None]
#: Sends one request; the response's body is streamed (read it, then ``aclose()``).
Send = Callable[["httpx.Request"], Awaitable["httpx.Response"]]


def new_client(transport: httpx.AsyncBaseTransport) -> httpx.AsyncClient:
    """A client as Signal uses one: no redirects followed (Signal follows them itself),
    nothing taken from the environment (proxies are the transport's business; no
    ``.netrc`` credentials for a reviewed feed host)."""
    import httpx

    return httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False)


class Clients(Protocol):
    """Hands out what sends one request."""

    def lease(self, url: httpx.URL) -> contextlib.AbstractAsyncContextManager[Send]:
        """``async with clients.lease(url) as send:`` for one request to ``url``."""
        ...

    async def aclose(self) -> None:
        """Close what this object opened."""
        ...


class SharedClient:
    """Every request through one client. ``owned``: close it in :meth:`aclose`."""

    def __init__(self, client: httpx.AsyncClient, *, owned: bool = False) -> None:
        self.client = client
        self._owned = owned

    @contextlib.asynccontextmanager
    async def lease(self, url: httpx.URL) -> AsyncIterator[Send]:
        """The shared client's ``send``, streaming."""
        yield self._send

    async def _send(self, request: httpx.Request) -> httpx.Response:
        import httpx

        try:
            return await self.client.send(request, stream=True, follow_redirects=False)
        except httpx.InvalidURL as exc:
            # A client builds the next request of a redirect even when it does not
            # follow it, and fails on a Location such as ``javascript:...`` before Signal
            # can read it. The request itself was valid: the redirect is what is refused.
            raise FetchError(f"redirect to a URL that cannot be followed refused ({exc})",
                             reason="redirect") from exc
        except httpx.RemoteProtocolError as exc:
            if "location header" not in str(exc).lower():
                raise
            raise FetchError(f"redirect to an invalid URL refused ({exc})",
                             reason="redirect") from exc

    async def aclose(self) -> None:
        """Close the client if this object made it."""
        if self._owned:
            await self.client.aclose()


class DirectTransport:
    """Every request straight to one transport (the caller's, e.g. an
    ``httpx.MockTransport``), as :class:`TransportPool` sends to its own: no client in
    between, so redirects reach Signal's own rules whatever their ``Location``.
    ``owned``: close the transport in :meth:`aclose`."""

    def __init__(self, transport: httpx.AsyncBaseTransport, *, owned: bool = False) -> None:
        self.transport = transport
        self._owned = owned

    @contextlib.asynccontextmanager
    async def lease(self, url: httpx.URL) -> AsyncIterator[Send]:
        """The transport's ``handle_async_request``; the body streams."""
        yield self.transport.handle_async_request

    async def aclose(self) -> None:
        """Close the transport if this object was given it to own."""
        if self._owned:
            await self.transport.aclose()


class TransportPool:
    """One-connection transports, kept per origin while idle (see the module docstring).

    ``size`` is the number of transports kept (the run's concurrency): more are made
    only if more requests than that are in flight at once.
    """

    def __init__(self, size: int, *, resolver: Resolver | None = None,
                 ssl_context: ssl.SSLContext | None = None, proxy: str = "",
                 is_private: Callable[[str], bool] = is_private_address) -> None:
        self.size = size
        self._resolver = resolver
        self._ssl_context = ssl_context
        self._proxy = proxy
        self._is_private = is_private
        # Made with the first transport, shared by all: the network backend (stateless),
        # the proxy table (read from the environment then) and the TLS context (built
        # on the first https connection).
        self._shared: tuple[CheckedBackend, TlsContext, ProxyRoutes] | None = None
        self._idle: dict[_Origin, list[SingleConnectionTransport]] = {}
        # Idle clients, least recently used first, with the origin they are kept for.
        self._lru: OrderedDict[SingleConnectionTransport, _Origin] = OrderedDict()
        self._all: list[SingleConnectionTransport] = []

    def _new(self) -> SingleConnectionTransport:
        from signal_feeds.http.backend import CheckedBackend
        from signal_feeds.http.proxies import ProxyRoutes
        from signal_feeds.http.transport import SingleConnectionTransport

        if self._shared is None:
            self._shared = (CheckedBackend(self._resolver, is_private=self._is_private),
                            TlsContext(self._ssl_context), ProxyRoutes.from_setting(self._proxy))
        backend, tls, proxies = self._shared
        client = SingleConnectionTransport(
            backend=backend, tls=tls, proxies=proxies, resolver=self._resolver,
            is_private=self._is_private)
        self._all.append(client)
        return client

    def _take(self, origin: _Origin) -> SingleConnectionTransport:
        same = self._idle.get(origin)
        if same:
            client = same.pop()
            if not same:
                del self._idle[origin]
            del self._lru[client]
            return client
        if len(self._all) < self.size or not self._lru:
            return self._new()
        client, old = self._lru.popitem(last=False)
        kept = self._idle[old]
        kept.remove(client)
        if not kept:
            del self._idle[old]
        return client

    @contextlib.asynccontextmanager
    async def lease(self, url: httpx.URL) -> AsyncIterator[Send]:
        """A transport for one request to ``url``; back to the idle set afterwards."""
        origin = (url.scheme, url.host, url.port)
        client = self._take(origin)
        try:
            yield client.handle_async_request
        finally:
            self._idle.setdefault(origin, []).append(client)
            self._lru[client] = origin

    async def aclose(self) -> None:
        """Close every transport and its connection."""
        clients, self._all = self._all, []
        self._idle.clear()
        self._lru.clear()
        for client in clients:
            await client.aclose()
