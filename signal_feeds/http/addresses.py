"""The private-address policy: what counts as private, and whether a request may reach it.

The check itself is made by :class:`~signal_feeds.http.backend.CheckedBackend`, which
resolves the host once (through an injectable :data:`Resolver`), refuses loopback,
private, link-local and unspecified addresses when the current hop may not reach them,
and connects to the address it checked: there is no second lookup, so no DNS-rebinding
window between the check and the connection. httpcore still sends the name as SNI and
``Host``. The check runs inside the request, so inside the fetch's deadline.

Whether a hop may reach a private address is a property of the request, not of the
connection: it is set with :func:`private_addresses` around the request (a context
variable, so concurrent requests do not see each other's setting). A kept-alive
connection to a private address carries a guard that checks the setting again before
each request it would send.
"""

from __future__ import annotations

import contextlib
import contextvars
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterator

from signal_feeds.offload import in_thread

__all__ = ["PRIVATE_ADDRESS_INFO", "AddressRefused", "Resolver", "is_private_address",
           "literal_address", "private_addresses", "private_allowed", "refusal_guard",
           "system_resolver"]

#: ``get_extra_info`` key of a connection: whether the address it went to is private.
PRIVATE_ADDRESS_INFO = "signal_private_address"

#: Resolves a host name to IP address strings (injected in tests).
Resolver = Callable[[str], Awaitable[list[str]]]

_PRIVATE_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "signal_private_allowed", default=True)


class AddressRefused(Exception):
    """A hop that may not reach private addresses was about to connect to one."""

    def __init__(self, host: str, address: str) -> None:
        super().__init__(f"{host} resolves to the private or loopback address {address}")
        self.host = host
        self.address = address


#: IPv6 blocks whose last 32 bits are an IPv4 address that the packets reach: NAT64's
#: well-known prefix and its local-use block (RFC 6052, RFC 8215: a /96 inside it, as
#: deployed), and the deprecated IPv4-compatible addresses (``::10.0.0.5``).
_IPV4_IN_LAST_32_BITS = tuple(ipaddress.IPv6Network(block) for block in (
    "64:ff9b::/96", "64:ff9b:1::/48", "::/96",
    "::ffff:0:0:0/96"))  # IPv4-translated (RFC 2765: ::ffff:0:a.b.c.d)


def literal_address(host: str) -> str | None:
    """The address a URL's host writes literally (``[::1]`` as ``::1``), in its usual
    form; ``None`` for a name."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to (mapped, 6to4, NAT64, compatible), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:  # 2002::/16
        return ip.sixtofour
    if any(ip in block for block in _IPV4_IN_LAST_32_BITS):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_private_address(address: str) -> bool:
    """True for loopback, private, link-local, unspecified and other non-public addresses,
    and for an IPv6 address that leads to such an IPv4 address: ``ipaddress`` counts
    ``64:ff9b::a00:5`` (NAT64 to 10.0.0.5) and ``2002:a00:1::1`` (6to4) as global."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.is_site_local:  # fec0::/10, deprecated but still routed inside some sites
            return True
        # Decided by the IPv4 address alone: NAT64 to a public address is public, and
        # Python versions differ on whether the IPv6 blocks themselves are global.
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            return not embedded.is_global
    return not ip.is_global


@contextlib.contextmanager
def private_addresses(allowed: bool) -> Iterator[None]:
    """Within this block, requests of the current task may (or may not) reach private
    addresses."""
    token = _PRIVATE_ALLOWED.set(allowed)
    try:
        yield
    finally:
        _PRIVATE_ALLOWED.reset(token)


def private_allowed() -> bool:
    """Whether the current task's request may reach a private address."""
    return _PRIVATE_ALLOWED.get()


def refusal_guard(host: str, address: str) -> Callable[[], None]:
    """What a connection to the private ``address`` runs before each request it would
    carry: it raises :class:`AddressRefused` when that request may not reach it."""
    def guard() -> None:
        if not _PRIVATE_ALLOWED.get():
            raise AddressRefused(host, address)
    return guard


async def system_resolver(host: str) -> list[str]:
    """The system's resolver (``getaddrinfo``), IPv6 and IPv4 addresses in its order."""
    # On Signal's own threads: the loop's getaddrinfo runs on its default executor,
    # which in an embedding program is the program's, and may be busy with its work.
    infos = await in_thread(socket.getaddrinfo, host, None, 0, socket.SOCK_STREAM,
                            lane="lookup")
    return [str(info[4][0]) for info in infos]
