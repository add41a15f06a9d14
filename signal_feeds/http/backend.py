"""Name resolution and the address check, as an httpcore network backend.

httpcore opens every connection through an ``AsyncNetworkBackend``. :class:`CheckedBackend`
resolves the host once (through an injectable resolver), refuses loopback, private,
link-local and unspecified addresses when the current hop may not reach them (the
policy is :mod:`signal_feeds.http.addresses`), and connects to the address it checked,
on asyncio's own transports (:mod:`signal_feeds.http.network`): no second lookup, so no
DNS-rebinding window between the check and the connection. httpcore still sends the
name as SNI and ``Host``. The check runs inside the request, so inside its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import httpcore

from signal_feeds.errors import shown
from signal_feeds.http.addresses import (
    AddressRefused,
    Resolver,
    is_private_address,
    literal_address,
    private_allowed,
    refusal_guard,
    system_resolver,
)
from signal_feeds.http.network import AsyncioStream, open_stream
from signal_feeds.urls import unicode_host

__all__ = ["HAPPY_EYEBALLS_DELAY", "CheckedBackend", "resolve"]

#: How long one address may try to connect before the next one starts too (RFC 8305's
#: recommended "connection attempt delay").
HAPPY_EYEBALLS_DELAY = 0.25


async def resolve(host: str, resolver: Resolver) -> list[str]:
    """``host``'s addresses; every kind of resolver failure becomes a ``ConnectError``
    naming the host (``gaierror``, a label over 63 characters, a name IDNA refuses)."""
    literal = literal_address(host)
    if literal is not None:
        return [literal]
    try:
        addresses = await resolver(host)
    except (OSError, UnicodeError, ValueError) as exc:
        # socket.gaierror is an OSError; the idna codec raises UnicodeError (a
        # ValueError), and the idna package's IDNAError is a UnicodeError too.
        detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        # A name from a Location may be 20 KB long, and the idna codec repeats it.
        raise httpcore.ConnectError(f"cannot resolve host {_as_written(host)}: "
                                    f"{shown(detail, 200)}") from exc
    if not addresses:
        raise httpcore.ConnectError(f"cannot resolve host {_as_written(host)}: no addresses")
    return addresses


def _as_written(host: str) -> str:
    """``'bücher.example' (sent as xn--bcher-kva.example)`` for a name that went out in
    IDNA, as the source list has it; any other name quoted as it is."""
    if "xn--" in host.lower():
        written = unicode_host(host)
        if written != host:
            return f"{shown(written, 200)!r} (sent as {shown(host, 200)})"
    return repr(shown(host, 200))


def _interleaved(addresses: Iterable[str]) -> list[str]:
    # RFC 8305: alternate the families, keeping the resolver's order within each.
    six = [a for a in addresses if ":" in a]
    four = [a for a in addresses if ":" not in a]
    out: list[str] = []
    for pair in zip(six, four, strict=False):
        out.extend(pair)
    longer = six if len(six) > len(four) else four
    out.extend(longer[min(len(six), len(four)):])
    return out


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """Connections on asyncio sockets (:mod:`~signal_feeds.http.network`), behind one
    resolution and the address check.

    ``check=False`` (the connection to a proxy) resolves the same way but checks nothing:
    the proxy, not Signal, connects to the feed's host.
    """

    def __init__(self, resolver: Resolver | None = None, *, check: bool = True,
                 is_private: Callable[[str], bool] = is_private_address) -> None:
        self._resolver = resolver or system_resolver
        self._check = check
        self._is_private = is_private

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await resolve(host, self._resolver)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from exc
        if self._check and not private_allowed():
            # Any private address refuses the name: a record set mixing public and
            # private addresses is how rebinding attacks are set up.
            for address in addresses:
                if self._is_private(address):
                    raise AddressRefused(host, address)
        return await self._connect_any(host, _interleaved(addresses), port, timeout,
                                       local_address, socket_options)

    async def _connect_any(self, host: str, addresses: list[str], port: int,
                           timeout: float | None, local_address: str | None,
                           socket_options: Iterable[Any] | None) -> AsyncioStream:
        """Happy Eyeballs over the checked addresses: each attempt gets a head start of
        :data:`HAPPY_EYEBALLS_DELAY`; the first to connect wins, the others are cancelled."""
        options = list(socket_options or ())

        async def attempt(address: str) -> AsyncioStream:
            if not self._check:
                return await open_stream(address, port, timeout=timeout,
                                         local_address=local_address, socket_options=options)
            # The stream remembers what the check decided for this address: a kept-alive
            # connection to a private address is refused to a request that may not reach
            # one, before each request it would carry.
            private = self._is_private(address)
            return await open_stream(address, port, timeout=timeout,
                                     local_address=local_address, socket_options=options,
                                     private=private,
                                     guard=refusal_guard(host, address) if private else None)

        if len(addresses) == 1:
            return await attempt(addresses[0])
        pending: set[asyncio.Task[AsyncioStream]] = set()
        errors: list[BaseException] = []
        try:
            for index, address in enumerate(addresses):
                pending.add(asyncio.ensure_future(attempt(address)))
                last = index == len(addresses) - 1
                while pending:
                    done, pending = await asyncio.wait(
                        pending, timeout=None if last else HAPPY_EYEBALLS_DELAY,
                        return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if task.exception() is None:
                            return task.result()
                        errors.append(task.exception())  # type: ignore[arg-type]
                    if not last:
                        break  # head start over, or an attempt failed: start the next
        finally:
            for task in pending:
                task.cancel()
            for task in pending:
                with contextlib.suppress(BaseException):
                    stream = await task
                    await stream.aclose()
        raise errors[-1] if errors else httpcore.ConnectError("no address to connect to")

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("Signal does not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
