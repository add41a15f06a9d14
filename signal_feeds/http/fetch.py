"""Bounded conditional GET over the pool of :mod:`signal_feeds.connections`.

One request per call: validators are sent back exactly as the server gave them,
redirects are followed by hand (so each hop is checked and counted), the body is decoded
here with a hard cap (so a gzip bomb stops at the cap), and the whole exchange runs
under one deadline (so a server that trickles a byte a second cannot hold a run).
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import socket
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import SplitResult, quote, urljoin, urlsplit

from signal_feeds.config.source_list import Settings
from signal_feeds.errors import FetchError
from signal_feeds.http.connections import (
    Connection,
    ConnectionPool,
    HTTPError,
    Origin,
    ResponseHead,
)

__all__ = ["FetchLimits", "FetchResponse", "Resolver", "fetch", "is_private_address"]

#: Resolves a host name to IP address strings (injected in tests).
Resolver = Callable[[str], Awaitable[list[str]]]

_REDIRECTS = {301, 302, 303, 307, 308}
_PERMANENT = {301, 308}


@dataclass(frozen=True)
class FetchLimits:
    """The bounds of one request."""

    user_agent: str
    connect_timeout: float
    read_timeout: float
    deadline: float
    max_body_bytes: int
    max_redirects: int
    allow_private_redirects: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> FetchLimits:
        """The limits the settings ask for."""
        return cls(user_agent=settings.user_agent, connect_timeout=settings.connect_timeout,
                   read_timeout=settings.read_timeout, deadline=settings.deadline,
                   max_body_bytes=settings.max_body_bytes,
                   max_redirects=settings.max_redirects,
                   allow_private_redirects=settings.allow_private_redirects)


@dataclass(frozen=True)
class FetchResponse:
    """The final response of one request (after redirects)."""

    status: int
    url: str
    #: Header names lower-cased; repeated headers joined with ", ".
    headers: Mapping[str, str]
    body: bytes = b""
    #: Each redirect followed: (status, target URL).
    redirects: tuple[tuple[int, str], ...] = ()
    elapsed: float = 0.0
    #: Bytes received on the wire (before decoding).
    wire_bytes: int = 0
    body_digest: str = field(default="")

    @property
    def etag(self) -> str:
        """The ``ETag`` exactly as sent, or ``""``."""
        return self.headers.get("etag", "")

    @property
    def last_modified(self) -> str:
        """The ``Last-Modified`` exactly as sent, or ``""``."""
        return self.headers.get("last-modified", "")

    @property
    def permanent_url(self) -> str:
        """Where the source now lives if the first hops were permanent redirects, else ``""``.

        Only the unbroken run of 301/308 from the start counts: after a temporary
        redirect the old URL stays the right one to ask.
        """
        moved = ""
        for status, target in self.redirects:
            if status not in _PERMANENT:
                break
            moved = target
        return moved


def is_private_address(address: str) -> bool:
    """True for loopback, private, link-local and other non-public addresses."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global


async def _system_resolver(host: str) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def _host_is_private(host: str, resolver: Resolver) -> bool:
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        addresses = [host]
    except ValueError:
        try:
            addresses = await resolver(host)
        except OSError:
            return False  # unresolvable: the request itself will fail with a clear error
    return any(is_private_address(a) for a in addresses)


class _Decoder:
    """Content-Encoding decoding with an output cap (gzip bombs stop at the cap)."""

    def __init__(self, encoding: str, cap: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise FetchError(f"unsupported Content-Encoding {encoding!r}", reason="encoding")
        self._zlib: zlib._Decompress | None = None
        if codings:
            # wbits 47 accepts gzip and zlib headers; raw deflate is tried on failure.
            self._zlib = zlib.decompressobj(47)
            self._raw_fallback = codings[0] == "deflate"
        self.cap = cap
        self.out = bytearray()

    def feed(self, chunk: bytes) -> None:
        if self._zlib is None:
            self._append(chunk)
            return
        data = chunk
        while data:
            room = self.cap - len(self.out) + 1
            try:
                piece = self._zlib.decompress(data, room)
            except zlib.error as exc:
                if self._raw_fallback and not self.out:
                    self._raw_fallback = False
                    self._zlib = zlib.decompressobj(-15)
                    continue
                raise FetchError(f"corrupt compressed body: {exc}", reason="encoding") from exc
            self._append(piece)
            data = self._zlib.unconsumed_tail
            if self._zlib.eof:
                break

    def _append(self, piece: bytes) -> None:
        self.out += piece
        if len(self.out) > self.cap:
            raise FetchError(f"body larger than the cap of {self.cap} bytes",
                             reason="too_large")


async def _read_body(conn: Connection, head: ResponseHead, limits: FetchLimits
                     ) -> tuple[bytes, int]:
    cap = limits.max_body_bytes
    declared = head.get("content-length")
    encoding = head.get("content-encoding")
    if declared.isdigit() and not encoding and int(declared) > cap:
        raise FetchError(f"Content-Length {declared} is larger than the cap of {cap} bytes",
                         reason="too_large")
    decoder = _Decoder(encoding, cap)
    wire = 0
    async for chunk in conn.body(limits.read_timeout):
        wire += len(chunk)
        decoder.feed(chunk)
    return bytes(decoder.out), wire


#: A redirect's own body is read and dropped up to this size (then the connection can
#: be reused); beyond it the connection is closed instead.
_REDIRECT_BODY_LIMIT = 64 * 1024


async def _drain(conn: Connection, limits: FetchLimits) -> bool:
    seen = 0
    async for chunk in conn.body(limits.read_timeout):
        seen += len(chunk)
        if seen > _REDIRECT_BODY_LIMIT:
            return False
    return True


def _origin(parts: SplitResult) -> Origin:
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {parts.geturl()!r}")
    return Origin(scheme, parts.hostname, parts.port or (443 if scheme == "https" else 80))


# Characters a request target may carry as they are; anything else (a space or a
# non-ASCII letter in a Location header) is percent-encoded. "%" stays: escapes already
# in the URL are kept.
_TARGET_SAFE = "/?#[]@!$&'()*+,;=:-._~%"


def _target(parts: SplitResult) -> str:
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return quote(target, safe=_TARGET_SAFE)


async def _exchange(pool: ConnectionPool, parts: SplitResult,
                    headers: Sequence[tuple[str, str]], limits: FetchLimits
                    ) -> tuple[Connection, ResponseHead]:
    """Send the GET and read the response head, on a kept-alive connection if possible."""
    origin = _origin(parts)
    while True:
        conn = await pool.connect(origin, timeout=limits.connect_timeout)
        reused = conn.requests > 0
        try:
            await conn.send_get(_target(parts), headers)
            return conn, await conn.read_head(limits.read_timeout)
        except HTTPError as exc:
            conn.close()
            # A kept-alive connection the server closed while it sat idle fails at once;
            # a GET can safely go again, once, on a fresh connection.
            if reused and exc.kind in ("read", "write"):
                continue
            raise
        except BaseException:
            conn.close()
            raise


async def fetch(
    pool: ConnectionPool,
    url: str,
    *,
    limits: FetchLimits,
    etag: str = "",
    last_modified: str = "",
    source_id: str | None = None,
    resolver: Resolver | None = None,
) -> FetchResponse:
    """GET ``url`` conditionally and return the final response.

    The caller holds one of the pool's slots (``async with pool.slot()``). Raises
    :class:`FetchError` (with a ``reason``) on network errors, timeouts, the deadline,
    the body cap, and refused or too many redirects. HTTP error statuses are returned,
    not raised: deciding what a 429 or a 410 means is the caller's job.
    """
    started = time.monotonic()
    headers = [("User-Agent", limits.user_agent), ("Accept-Encoding", "gzip, deflate"),
               ("Accept", "application/atom+xml, application/rss+xml, application/xml;q=0.9, "
                          "text/xml;q=0.8, */*;q=0.1")]
    if etag:
        headers.append(("If-None-Match", etag))
    if last_modified:
        headers.append(("If-Modified-Since", last_modified))
    origin_private = await _host_is_private(urlsplit(url).hostname or "",
                                            resolver or _system_resolver)
    redirects: list[tuple[int, str]] = []
    current = url
    try:
        async with asyncio.timeout(limits.deadline):
            while True:
                conn, head = await _exchange(pool, urlsplit(current), headers, limits)
                keep = False
                try:
                    location = head.get("location").strip()
                    if head.status in _REDIRECTS and location:
                        target = await _next_hop(current, location, redirects, limits,
                                                 origin_private, resolver)
                        keep = await _drain(conn, limits)
                        redirects.append((head.status, target))
                        current = target
                        continue
                    body, wire = await _read_body(conn, head, limits)
                    keep = True
                    return FetchResponse(
                        status=head.status, url=current, headers=_joined(head.headers),
                        body=body, redirects=tuple(redirects),
                        elapsed=time.monotonic() - started, wire_bytes=wire,
                        body_digest=hashlib.sha256(body).hexdigest() if body else "",
                    )
                finally:
                    if keep:
                        pool.release(conn)
                    else:
                        conn.close()
    except FetchError as exc:
        exc.source_id = source_id
        raise
    except TimeoutError as exc:
        raise FetchError(f"no complete response within the {limits.deadline:g} s deadline",
                         source_id=source_id, reason="deadline") from exc
    except HTTPError as exc:
        if exc.kind == "timeout":
            raise FetchError(f"timed out ({exc.message})", source_id=source_id,
                             reason="timeout") from exc
        if exc.kind == "connect":
            raise FetchError(f"cannot connect: {exc.message}", source_id=source_id,
                             reason="connect") from exc
        kind = {"read": "ReadError", "write": "WriteError"}.get(exc.kind,
                                                               "RemoteProtocolError")
        raise FetchError(f"network error: {kind}: {exc.message}", source_id=source_id,
                         reason="network") from exc
    except (OSError, ValueError) as exc:
        raise FetchError(f"request failed: {exc}", source_id=source_id,
                         reason="network") from exc


async def _next_hop(current: str, location: str, redirects: list[tuple[int, str]],
                    limits: FetchLimits, origin_private: bool, resolver: Resolver | None) -> str:
    if len(redirects) >= limits.max_redirects:
        raise FetchError(f"more than {limits.max_redirects} redirects", reason="redirect")
    try:
        target = urljoin(current, location)
        parts = urlsplit(target)
    except ValueError as exc:
        raise FetchError(f"redirect to an invalid URL {location!r}", reason="redirect") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FetchError(f"redirect to a non-http(s) URL {location!r} refused",
                         reason="redirect")
    if parts.username or parts.password:
        raise FetchError("redirect to a URL with credentials refused", reason="redirect")
    target = target.split("#", 1)[0]
    if target == current or any(t == target for _, t in redirects):
        raise FetchError(f"redirect loop at {target}", reason="redirect")
    if (not origin_private and not limits.allow_private_redirects
            and await _host_is_private(parts.hostname, resolver or _system_resolver)):
        raise FetchError(f"redirect from a public address to a private or loopback one "
                         f"({parts.hostname}) refused", reason="redirect")
    return target


def _joined(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for key, value in headers:
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return joined
