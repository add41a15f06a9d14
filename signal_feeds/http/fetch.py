"""Bounded conditional GET over httpx, with Signal's own policy on top.

One request per call: validators are sent back exactly as the server gave them;
redirects are followed here, not by httpx (``follow_redirects`` stays off), so each hop
is checked, counted and takes a slot of its own host; the body is read raw and decoded
with a hard cap (so a gzip bomb stops at the cap); and the whole exchange, name
resolution included, runs under one deadline (so neither a slow resolver nor a server
that trickles a byte a second can hold a run).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import hashlib
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from signal_feeds.config.source_list import Settings
from signal_feeds.errors import FetchError, shown
from signal_feeds.http.addresses import (
    PRIVATE_ADDRESS_INFO,
    AddressRefused,
    Resolver,
    is_private_address,
    literal_address,
    private_addresses,
)
from signal_feeds.http.decoding import CappedDecoder, body_too_large, gunzipped_again
from signal_feeds.http.slots import HostHold
from signal_feeds.http.tls import PLAIN_PORT, certificate_problem, handshake_problem
from signal_feeds.urls import escaped_whitespace, shown_url

if TYPE_CHECKING:
    # httpx (with httpcore, certifi, its CLI's imports where installed) is imported by
    # the first request, not with this module: a run where no source is due, and every
    # command that does not fetch, never loads it.
    import httpx

    from signal_feeds.http.clients import Clients

__all__ = ["FetchLimits", "FetchResponse", "Resolver", "fetch", "is_private_address"]

_REDIRECTS = {301, 302, 303, 307, 308}
_PERMANENT = {301, 308}
# Every format Signal parses, JSON Feed's own type included (a server that negotiates
# would otherwise choose its HTML page); plain application/json is left to */*, since
# at a feed's address that is more often an API than a feed.
_ACCEPT = ("application/atom+xml, application/rss+xml, application/feed+json, "
           "application/xml;q=0.9, text/xml;q=0.8, */*;q=0.1")
#: A redirect's own body is read and dropped up to this size (then the connection can
#: be reused); beyond it the connection is closed instead.
_REDIRECT_BODY_LIMIT = 64 * 1024
#: Characters of a URL a server sent (a Location) that an error or warning shows.
_URL_SHOWN = 200


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
    #: The URL the request was made for (before any redirect).
    requested: str = ""
    #: What the response got wrong that Signal worked around (a body labelled
    #: compressed that was not), for the source's report.
    warnings: tuple[str, ...] = ()

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
        redirect the old URL stays the right one to ask. A run that ends where it began
        (a cookie check that answers 301) moved nothing. Nor does a hop from https to
        plain http: the reviewed https address stays the one asked, so that every poll
        starts encrypted and the downgrade is seen (and warned of) each time.
        """
        moved = ""
        previous = self.requested
        for status, target in self.redirects:
            if status not in _PERMANENT or _downgrades(previous, target):
                break
            moved = previous = target
        return "" if moved == self.requested else moved


def _downgrades(before: str, after: str) -> bool:
    """True for a redirect from https to plain http."""
    return before[:8].lower() == "https://" and after[:7].lower() == "http://"


@functools.lru_cache(maxsize=4096)
def _parsed(url: str) -> httpx.URL:
    # A run asks for the same source URLs again and again: parse each once (an
    # ``httpx.URL`` is immutable). Bounded, since redirect targets come from servers.
    import httpx

    return httpx.URL(url)


def _bytes(value: str) -> bytes:
    # Validators are stored as latin-1 text of the bytes the server sent: encoding them
    # back the same way returns those bytes exactly.
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _request_headers(limits: FetchLimits, etag: str, last_modified: str
                     ) -> list[tuple[bytes, bytes]]:
    headers = [(b"User-Agent", _bytes(limits.user_agent)),
               (b"Accept-Encoding", b"gzip, deflate"), (b"Accept", _ACCEPT.encode())]
    if etag:
        headers.append((b"If-None-Match", _bytes(etag)))
    if last_modified:
        headers.append((b"If-Modified-Since", _bytes(last_modified)))
    return headers


def _joined(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    joined: dict[str, str] = {}
    for key_bytes, value_bytes in raw:
        key, value = key_bytes.decode("latin-1").lower(), value_bytes.decode("latin-1")
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return joined


def _literal_is_private(host: str) -> bool | None:
    """For an IP literal, whether it is private; ``None`` for a name."""
    literal = literal_address(host)
    return None if literal is None else is_private_address(literal)


def _connected_to_private(response: httpx.Response, host: str) -> bool:
    """Whether the first hop reached a private address: the address Signal's backend
    checked if it made the connection, else what the URL's literal address says."""
    stream = response.extensions.get("network_stream")
    private = stream.get_extra_info(PRIVATE_ADDRESS_INFO) if stream is not None else None
    if isinstance(private, bool):
        return private
    return bool(_literal_is_private(host))


async def _read_body(response: httpx.Response, limits: FetchLimits
                     ) -> tuple[bytes, int, tuple[str, ...]]:
    cap = limits.max_body_bytes
    declared = response.headers.get("content-length", "")
    encoding = response.headers.get("content-encoding", "")
    if declared.isdecimal() and not encoding and int(declared) > cap:
        raise body_too_large(cap, declared=declared)
    if response.is_stream_consumed:
        # A response built in memory (``httpx.Response(content=...)`` in a MockTransport)
        # was read and decoded by httpx already: only the cap is left to apply.
        body = response.content
        if len(body) > cap:
            raise body_too_large(cap)
        return gunzipped_again(body, cap), len(body), ()
    import httpx

    decoder = CappedDecoder(encoding, cap)
    wire = 0
    warnings: tuple[str, ...] = ()
    try:
        async for chunk in response.aiter_raw():
            wire += len(chunk)
            decoder.feed(chunk)
    except httpx.RemoteProtocolError:
        if not wire:
            raise
        # The connection closed before the length it announced (or the last chunk)
        # came: read as a document cut short, whose whole entries are kept and whose
        # validators are not (the parser finds where it stops).
        of = f" of the {declared} announced" if declared.isdecimal() else ""
        warnings += (f"the connection closed before the end of the body ({wire} bytes "
                     f"received{of})",)
    if decoder.uncompressed:
        warnings += (f"the body was labelled Content-Encoding: {shown(encoding, 40)} but was not "
                     "compressed: read as it came",)
    body = decoder.finish()
    if decoder.trailing:
        warnings += (f"{decoder.trailing} bytes after the end of the compressed body are "
                     "not compressed data: left out",)
    return gunzipped_again(body, cap), wire, warnings


async def _drain(response: httpx.Response) -> None:
    if response.is_stream_consumed:
        return
    seen = 0
    async for chunk in response.aiter_raw():
        seen += len(chunk)
        if seen > _REDIRECT_BODY_LIMIT:
            return  # closing the response closes the connection


def _next_hop(start: str, current: str, location: str, redirects: list[tuple[int, str]],
              limits: FetchLimits, private_allowed: bool, *, cookie_set: bool = False) -> str:
    if len(redirects) >= limits.max_redirects:
        raise FetchError(f"more than {limits.max_redirects} redirects", reason="redirect")
    try:
        target = urljoin(current, location)
        parts = urlsplit(target)
        hostname = parts.hostname
        # Read here, where a port past 65535 raises ValueError (the socket raised
        # OverflowError); port 0 is no port, and httpx would connect to port 80 instead.
        if parts.port == 0:
            raise ValueError("port 0")
    except ValueError as exc:
        raise FetchError(f"redirect to an invalid URL {shown_url(location, _URL_SHOWN)!r}",
                         reason="redirect") from exc
    if parts.scheme not in ("http", "https") or not hostname:
        raise FetchError(f"redirect to a non-http(s) URL {shown_url(location, _URL_SHOWN)!r} "
                         "refused", reason="redirect")
    if parts.username or parts.password:
        raise FetchError("redirect to a URL with credentials refused", reason="redirect")
    # A space in a Location (servers send them raw) goes out as %20: so it is written
    # where a moved source is reported, an address the source list accepts.
    target = escaped_whitespace(target.split("#", 1)[0])
    # A redirect that sets a cookie may come back to an address already asked: a site
    # that checks for its cookie first. Only the redirect limit bounds such a chain.
    if not cookie_set and (target in (start, current)
                           or any(t == target for _, t in redirects)):
        raise FetchError(f"redirect loop at {shown_url(target, _URL_SHOWN)}", reason="redirect")
    # A literal address is refused here, before any client sees it (a MockTransport
    # included); a name is checked by the network backend on the address it resolves to.
    if not private_allowed and _literal_is_private(hostname):
        raise _private_refused(hostname)
    return target


def _private_refused(host: str) -> FetchError:
    return FetchError(f"redirect from a public address to a private or loopback one "
                      f"({host}) refused", reason="redirect")


async def fetch(
    clients: Clients,
    url: str,
    *,
    limits: FetchLimits,
    etag: str = "",
    last_modified: str = "",
    source_id: str | None = None,
    host_hold: HostHold | None = None,
) -> FetchResponse:
    """GET ``url`` conditionally and return the final response.

    ``host_hold`` (from :class:`~signal_feeds.http.slots.HostSlots`) is moved to each
    hop's host before that hop is sent. Raises :class:`FetchError` (with a ``reason``)
    on network errors, timeouts, the deadline, the body cap, and refused or too many
    redirects. HTTP error statuses are returned, not raised: deciding what a 429 or a
    410 means is the caller's job.
    """
    import httpx

    started = time.monotonic()
    headers = _request_headers(limits, etag, last_modified)
    timeout = httpx.Timeout(connect=limits.connect_timeout, read=limits.read_timeout,
                            write=limits.read_timeout, pool=limits.deadline).as_dict()
    redirects: list[tuple[int, str]] = []
    current = url
    # The first hop is the reviewed source itself, private or not; later hops may reach
    # a private address only from a private source, or when the settings allow it.
    private_allowed = True
    host = ""
    # Cookies set along the redirects, sent on the later hops of this request and then
    # forgotten: nothing is stored between requests or shared between sources.
    cookies: httpx.Cookies | None = None
    try:
        async with asyncio.timeout(limits.deadline) as deadline:
            while True:
                target = _parsed(current)
                host = target.host
                if host_hold is not None and (queued := await host_hold.move_to(host)) \
                        and (ends := deadline.when()) is not None:
                    deadline.reschedule(ends + queued)
                with private_addresses(private_allowed):
                    async with clients.lease(target) as send:
                        request = httpx.Request("GET", target, headers=headers,
                                                extensions={"timeout": timeout})
                        if cookies:
                            cookies.set_cookie_header(request)
                        response = await send(request)
                        try:
                            if not redirects:
                                private_allowed = (limits.allow_private_redirects
                                                   or _connected_to_private(response, host))
                            location = response.headers.get("location", "").strip()
                            if response.status_code in _REDIRECTS and location:
                                cookie_set = "set-cookie" in response.headers
                                if cookie_set:
                                    response.request = request  # a transport's answer has none
                                    cookies = cookies if cookies is not None else httpx.Cookies()
                                    cookies.extract_cookies(response)
                                following = _next_hop(url, current, location, redirects, limits,
                                                      private_allowed, cookie_set=cookie_set)
                                await _drain(response)
                                redirects.append((response.status_code, following))
                                current = following
                                continue
                            body, wire, warnings = await _read_body(response, limits)
                            if _downgrades(url, current):
                                warnings = (f"redirected from https to plain http "
                                            f"({shown_url(current, _URL_SHOWN)}): the feed came "
                                            "unencrypted",
                                            *warnings)
                        finally:
                            await response.aclose()
                return FetchResponse(
                    status=response.status_code, url=current,
                    headers=_joined(response.headers.raw), body=body,
                    redirects=tuple(redirects), elapsed=time.monotonic() - started,
                    wire_bytes=wire, requested=url, warnings=warnings,
                    body_digest=hashlib.sha256(body).hexdigest() if body else "")
    except FetchError as exc:
        exc.source_id = source_id
        raise
    except AddressRefused as exc:
        raise FetchError(_private_refused(host).message, source_id=source_id,
                         reason="redirect") from exc
    except TimeoutError as exc:
        raise FetchError(f"no complete response within the {limits.deadline:g} s deadline",
                         source_id=source_id, reason="deadline") from exc
    except httpx.TransportError as exc:
        raise _translated(exc, limits, source_id, current) from exc
    except (httpx.InvalidURL, ValueError) as exc:  # UnicodeError (IDNA) is a ValueError
        raise FetchError(f"request failed: invalid URL {shown_url(current, _URL_SHOWN)!r}: "
                         f"{shown(str(exc), _URL_SHOWN)}",
                         source_id=source_id, reason="network") from exc


def _translated(exc: httpx.TransportError, limits: FetchLimits,
                source_id: str | None, url: str = "") -> FetchError:
    import httpx

    text = str(exc)
    if isinstance(exc, httpx.ConnectTimeout) and "TLS handshake" in text:
        return FetchError(f"timed out (no answer to the TLS handshake within "
                          f"{limits.connect_timeout:g} s: {PLAIN_PORT})", source_id=source_id,
                          reason="timeout")
    if isinstance(exc, httpx.ConnectTimeout):
        return FetchError(f"timed out (connect timed out after {limits.connect_timeout:g} s)",
                          source_id=source_id, reason="timeout")
    if isinstance(exc, httpx.ReadTimeout):
        return FetchError(f"timed out (no data for {limits.read_timeout:g} s)",
                          source_id=source_id, reason="timeout")
    if isinstance(exc, httpx.TimeoutException):
        return FetchError(f"timed out ({type(exc).__name__})", source_id=source_id,
                          reason="timeout")
    if isinstance(exc, httpx.ProxyError):
        return FetchError(f"proxy error: {text}", source_id=source_id, reason="proxy")
    if isinstance(exc, httpx.ConnectError):
        if refused := certificate_problem(exc) or handshake_problem(
                exc, urlsplit(url).hostname or ""):
            return FetchError(refused, source_id=source_id, reason="connect")
        return FetchError(f"cannot connect: {_in_words(text) or 'connection failed'}",
                          source_id=source_id, reason="connect")
    if isinstance(exc, httpx.RemoteProtocolError) and "receive buffer too long" in text.lower():
        # h11's words for a status line and headers past httpcore's limit (100 KiB).
        return FetchError("the response's headers are too large (over 100 KiB): not read",
                          source_id=source_id, reason="network")
    if isinstance(exc, httpx.RemoteProtocolError) and text.endswith("illegal request line"):
        # h11's words (meant for a server reading requests) for an answer whose first
        # byte is a control character: a TLS record, when a plain request went out.
        hint = " (is the address https://?)" if url.lower().startswith("http:") else ""
        return FetchError("network error: the answer is not HTTP: it begins with a binary "
                          f"byte, as a TLS server's does{hint}", source_id=source_id,
                          reason="network")
    detail = _BYTES_SHOWN.sub(lambda m: m[1] or m[2], text) if text else _describe(exc)
    return FetchError(f"network error: {type(exc).__name__}: {detail}", source_id=source_id,
                      reason="network")


#: What the socket said, in words, when it could not connect.
_CONNECT_ERRNOS = {errno.ECONNREFUSED: "connection refused by {} (no server listens there)",
                   errno.ENETUNREACH: "network unreachable for {}",
                   errno.EHOSTUNREACH: "no route to host {}"}
# asyncio's "[Errno 111] Connect call failed ('127.0.0.1', 8080)", once per address tried.
_CONNECT_CALL = re.compile(r"\[Errno (\d+)\] Connect call failed \('?([^',)]*)'?, (\d+)[^)]*\)")


def _in_words(text: str) -> str:
    """``connection refused by ::1 port 8080 and 127.0.0.1 port 8080 (...)`` instead of
    asyncio's ``Multiple exceptions: [Errno 111] Connect call failed ('::1', 8080, 0,
    0), ...``, when every address failed alike; else ``text`` as it is. What precedes
    the first address (``proxy http://...: ``) is kept."""
    found = _CONNECT_CALL.findall(text)
    codes = {int(code) for code, _, _ in found}
    if len(codes) != 1 or (code := codes.pop()) not in _CONNECT_ERRNOS:
        return text
    where = " and ".join(dict.fromkeys(f"{host} port {port}" for _, host, port in found))
    lead = text[:text.index("[Errno")].removesuffix("Multiple exceptions: ")
    return lead + _CONNECT_ERRNOS[code].format(where)


# h11 quotes the offending bytes as Python shows them: "illegal header line:
# bytearray(b'Server Name')" reads better as "illegal header line: 'Server Name'".
_BYTES_SHOWN = re.compile(r"""\bbytearray\(b('[^'\n]*'|"[^"\n]*")\)|\bb('[^'\n]*'|"[^"\n]*")""")


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__
    while cause is not None:
        if str(cause):
            return str(cause)
        if isinstance(cause, ConnectionResetError):
            return "connection reset by peer"
        cause = cause.__cause__
    return "the connection failed"
