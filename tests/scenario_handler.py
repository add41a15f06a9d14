"""Requests to the scenario server: scripts, the request log, and the hostile scenarios.

Paths under ``/scenario/`` (query parameters in brackets):

- ``slow`` [delay], ``trickle`` [interval, size]: late or dripping answers;
- ``oversized`` [size], ``gzip-bomb`` [size]: bodies past any sane cap;
- ``status/NNN`` [retry_after, cache_control, expires, age, location]: any status;
- ``redirect`` [status, to], ``redirect-chain`` [statuses, to], ``redirect-loop``,
  ``redirect-to`` [status, location]: 3xx of every kind, the Location sent verbatim;
- ``flaky`` [fail, status, retry_after]: fails ``fail`` times per target, then 200;
- ``rotating-etag``, ``etag-only``, ``last-modified-only``, ``no-validators``,
  ``cache`` [max_age, age], ``expires`` [in]: validator and freshness variants;
- ``malformed``, ``html``, ``empty``, ``reset``, ``wrong-length``: broken answers.

Not a test module; scenario_server imports it.
"""

from __future__ import annotations

import dataclasses
import html
import math
import select
import socket
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, cast
from urllib.parse import parse_qs, quote, urlsplit

from signal_feeds.demo.teaching_server import (
    RSS_TYPE,
    SERVER_NAME,
    FeedRequestHandler,
    Resource,
    http_date,
    is_not_modified,
)

if TYPE_CHECKING:
    from scenario_server import ScenarioServer, Slot

CHUNK_SIZE = 64 * 1024
TEXT_TYPE = "text/plain; charset=utf-8"

# Used only when the fixtures directory has no demo-rss.xml / variants/malformed.xml.
FALLBACK_DEMO = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<rss version="2.0"><channel><title>Signal demo (RSS)</title>'
    "<link>https://example.org/</link><description>Fallback demo feed.</description>"
    "<item><title>Заметки о выпуске</title><link>https://example.org/releases/1</link>"
    '<guid isPermaLink="false">release-1</guid>'
    "<pubDate>Mon, 02 Mar 2026 10:00:00 +0300</pubDate></item>"
    "</channel></rss>\n"
).encode()
FALLBACK_MALFORMED = (
    b'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
    b"<title>Signal demo (broken)</title><item><title>never closed"
)
_HTML_PAGE = (
    b"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    b"<title>Signal demo</title></head>\n<body><h1>This is a web page, not a feed</h1>"
    b"<p>A feed reader pointed at a home page gets HTML like this.</p></body></html>\n"
)
_OVERSIZED_PREFIX = (
    b'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0"><channel>'
    b"<title>Signal demo (oversized)</title><link>https://example.org/</link>"
    b"<description>Padding follows.</description><!--"
)
_OVERSIZED_SUFFIX = b"--></channel></rss>\n"


class BadRequest(Exception):
    """A scenario's parameters make no sense: answered with 400."""


class Stopping(Exception):
    """The server is stopping: abandon the request."""


def padded_feed_chunks(size: int, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Exactly ``size`` bytes: an RSS opening, a comment full of spaces, the closing tags."""
    frame = len(_OVERSIZED_PREFIX) + len(_OVERSIZED_SUFFIX)
    if size <= frame:
        data = (_OVERSIZED_PREFIX + _OVERSIZED_SUFFIX)[:size]
        if data:
            yield data
        return
    remaining_pad = size - frame
    first_pad = min(remaining_pad, max(chunk_size - len(_OVERSIZED_PREFIX), 0))
    yield _OVERSIZED_PREFIX + b" " * first_pad
    remaining_pad -= first_pad
    full = b" " * chunk_size
    while remaining_pad >= chunk_size:
        yield full
        remaining_pad -= chunk_size
    yield b" " * remaining_pad + _OVERSIZED_SUFFIX


def gzip_of(chunks: Iterable[bytes]) -> bytes:
    """One gzip member holding ``chunks`` (at level 9, so padding shrinks ~1000 times)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [compressor.compress(piece) for piece in chunks]
    out.append(compressor.flush())
    return b"".join(out)


def _header_bytes(value: str) -> bytes:
    if "\r" in value or "\n" in value:
        raise BadRequest("header values must not contain CR or LF")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    if name not in params:
        return default
    try:
        value = int(params[name])
    except ValueError:
        raise BadRequest(f"{name} must be an integer") from None
    if value < 0:
        raise BadRequest(f"{name} must not be negative")
    return value


def _float_param(params: Mapping[str, str], name: str, default: float) -> float:
    if name not in params:
        return default
    try:
        value = float(params[name])
    except ValueError:
        raise BadRequest(f"{name} must be a number") from None
    if not math.isfinite(value) or value < 0:
        raise BadRequest(f"{name} must be a finite, non-negative number")
    return value


def _redirect_status(params: Mapping[str, str], default: int) -> int:
    status = _int_param(params, "status", default)
    if not 300 <= status <= 399:
        raise BadRequest("status must be a 3xx code")
    return status


class ScenarioHandler(FeedRequestHandler):
    """The teaching server's handler plus logging, scripts and ``/scenario/`` paths.

    Responses are written head and body in one piece, with the head built by hand, so
    that scripts can send any header verbatim and broken scenarios can lie on purpose.
    """

    _slot: Slot | None = None
    _arrived: float = 0.0

    @property
    def scenarios(self) -> ScenarioServer:
        return cast("ScenarioServer", self.teaching)

    def log_message(self, format: str, *args: object) -> None:
        pass  # the request log is the record; stderr stays quiet under pytest

    def parse_request(self) -> bool:
        self._arrived = time.monotonic()
        return super().parse_request()

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch(allowed=False)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST

    def _dispatch(self, *, allowed: bool = True) -> None:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        slot = self.scenarios.begin(self.command, self.path, headers, self._arrived)
        self._slot = slot
        try:
            if not allowed:
                self.close_connection = True
                self.respond(405, [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")],
                             b"Only GET and HEAD are supported.\n")
            else:
                try:
                    self.handle_feed_request()
                except BadRequest as exc:
                    self.respond(400, [("Content-Type", TEXT_TYPE)], f"{exc}\n".encode())
        except (Stopping, OSError):
            # Stopping, or the client went away (broken pipe, reset), or we cut it on purpose.
            self.close_connection = True
        finally:
            self.scenarios.end(slot, time.monotonic())

    # -- writing --------------------------------------------------------------------------

    def _mark_closing(self) -> None:
        if self._slot is not None:
            self.scenarios.mark_closing(self._slot)

    def _write(self, data: bytes, *, body_bytes: int) -> None:
        self.wfile.write(data)
        if body_bytes:
            self.scenarios.count_sent(self.path, body_bytes)

    def _head(self, status: int, headers: Sequence[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_reason(status)}".encode("latin-1")]
        given = {name.lower() for name, _ in headers}
        base = [(name, value)
                for name, value in (("Server", SERVER_NAME), ("Date", http_date(time.time())))
                if name.lower() not in given]
        for name, value in [*base, *headers]:
            lines.append(name.encode("latin-1") + b": " + _header_bytes(value))
        if self.close_connection and "connection" not in given:
            lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def respond(self, status: int, headers: Sequence[tuple[str, str]], body: bytes = b"") -> None:
        """Send a complete response in one write (headers only for HEAD, 204, 304, 1xx)."""
        all_headers = list(headers)
        no_body = status in (204, 304) or 100 <= status < 200
        if not no_body and not any(n.lower() == "content-length" for n, _ in all_headers):
            all_headers.append(("Content-Length", str(len(body))))
        head = self._head(status, all_headers)
        self._mark_closing()
        if not no_body and self.command != "HEAD":
            self._write(head + body, body_bytes=len(body))
        else:
            self._write(head, body_bytes=0)

    def _stream(self, status: int, headers: Sequence[tuple[str, str]], length: int,
                chunks: Iterable[bytes], *, interval: float = 0.0) -> None:
        head = self._head(status, [*headers, ("Content-Length", str(length))])
        if self.command == "HEAD":
            self._mark_closing()
            self._write(head, body_bytes=0)
            return
        self._write(head, body_bytes=0)
        sent = 0
        for piece in chunks:
            if interval > 0:
                self._sleep(interval)
                if self._peer_closed():
                    raise ConnectionAbortedError("the client closed the connection")
            if sent + len(piece) >= length:
                self._mark_closing()
            self._write(piece, body_bytes=len(piece))
            sent += len(piece)

    def _sleep(self, seconds: float) -> None:
        if self.scenarios.sleep(seconds):
            raise Stopping

    def _peer_closed(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # -- routing --------------------------------------------------------------------------

    def handle_feed_request(self) -> None:
        """Scripts first, then put() resources, then scenarios, then the index page."""
        path = urlsplit(self.path).path or "/"
        script = self.scenarios.next_scripted(self.path)
        if script is not None:
            if script.delay > 0:
                self._sleep(script.delay)
            self.respond(script.status, script.headers, script.body)
            return
        resource = self.scenarios.resource(self.path)
        if resource is not None:
            self.serve(resource)
        elif path.startswith("/scenario/"):
            query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
            self._scenario(path[len("/scenario/"):], {k: v[0] for k, v in query.items()})
        elif path == "/":
            self._index()
        else:
            self.respond(404, [("Content-Type", TEXT_TYPE)], b"Not found.\n")

    def serve(self, resource: Resource, extra: Sequence[tuple[str, str]] = ()) -> None:
        """As the teaching server, with put()'s headers and rotating ETags."""
        options = self.scenarios.options_for(self.path)
        extra = [*options.headers, *extra]
        if not (options.rotate_etag and resource.etag):
            super().serve(resource, extra)
            return
        # A rotating ETag changes on every 200, so only "*" can match it.
        if_none_match = self.headers.get_all("If-None-Match")
        if if_none_match:
            not_modified = ", ".join(str(v) for v in if_none_match).strip() == "*"
        else:
            not_modified = is_not_modified(resource, self.headers)
        with self.scenarios.state.cond:
            if not not_modified:
                options.rotations += 1
            rotations = options.rotations
        if rotations:
            resource = dataclasses.replace(resource, etag=f'{resource.etag[:-1]}-{rotations}"')
        self.send_resource(resource, not_modified, extra)

    def _index(self) -> None:
        items = "".join(f'<li><a href="{html.escape(p)}">{html.escape(p)}</a></li>'
                        for p in self.scenarios.paths())
        page = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>Signal scenario '
                f"server</title></head><body><ul>{items}</ul></body></html>\n").encode()
        self.respond(200, [("Content-Type", "text/html; charset=utf-8")], page)

    def _scenario(self, name: str, params: dict[str, str]) -> None:
        server = self.scenarios
        if name == "slow":
            self._sleep(_float_param(params, "delay", 1.0))
            self.serve(server.demo)
        elif name == "trickle":
            body = server.demo_body
            if "size" in params:
                size = _int_param(params, "size", len(body))
                body = body[:size] + b" " * max(size - len(body), 0)
            self._stream(200, [("Content-Type", RSS_TYPE)], len(body),
                         (body[i:i + 1] for i in range(len(body))),
                         interval=_float_param(params, "interval", 1.0))
        elif name == "oversized":
            size = _int_param(params, "size", 8 * 1024 * 1024)
            self._stream(200, [("Content-Type", RSS_TYPE)], size, padded_feed_chunks(size))
        elif name == "gzip-bomb":
            body = self._gzip_bomb(_int_param(params, "size", 64 * 1024 * 1024))
            self.respond(200, [("Content-Type", RSS_TYPE), ("Content-Encoding", "gzip")], body)
        elif name.startswith("status/"):
            self._status(name[len("status/"):], params)
        elif name == "redirect":
            self._redirect(_redirect_status(params, 301), params.get("to", "/feeds/demo-rss.xml"))
        elif name == "redirect-chain":
            self._redirect_chain(params)
        elif name in ("redirect-loop", "redirect-loop/b"):
            status = _redirect_status(params, 302)
            other = ("/scenario/redirect-loop/b" if name == "redirect-loop"
                     else "/scenario/redirect-loop")
            if "status" in params:
                other += "?status=" + str(status)
            self._redirect(status, other)
        elif name == "redirect-to":
            self._redirect(_redirect_status(params, 302), params.get("location", ""))
        elif name == "flaky":
            self._flaky(params)
        elif name == "cache":
            extra = [("Cache-Control", f"max-age={_int_param(params, 'max_age', 600)}")]
            if "age" in params:
                extra.append(("Age", str(_int_param(params, "age", 0))))
            self.serve(server.demo, extra)
        elif name == "expires":
            seconds = _float_param(params, "in", 3600.0)
            self.serve(server.demo, [("Expires", http_date(time.time() + seconds))])
        elif name == "malformed":
            self.respond(200, [("Content-Type", RSS_TYPE)], server.malformed_body)
        elif name == "html":
            self.respond(200, [("Content-Type", "text/html; charset=utf-8")], _HTML_PAGE)
        elif name == "empty":
            self.respond(200, [("Content-Type", RSS_TYPE)], b"")
        elif name == "reset":
            self._reset(server.demo_body)
        elif name == "wrong-length":
            self._wrong_length(server.demo_body)
        else:
            self.respond(404, [("Content-Type", TEXT_TYPE)], b"Unknown scenario.\n")

    # -- scenarios ------------------------------------------------------------------------

    def _status(self, code_text: str, params: dict[str, str]) -> None:
        if not code_text.isdigit() or not 200 <= int(code_text) <= 599:
            raise BadRequest("status must be a number from 200 to 599")
        status = int(code_text)
        headers = [(header, params[param]) for param, header in (
            ("retry_after", "Retry-After"), ("cache_control", "Cache-Control"),
            ("expires", "Expires"), ("age", "Age"), ("location", "Location"),
        ) if param in params]
        if status == 200:
            self.respond(200, [("Content-Type", RSS_TYPE), *headers], self.scenarios.demo_body)
        else:
            body = f"{status} {_reason(status)}\n".encode()
            self.respond(status, [("Content-Type", TEXT_TYPE), *headers], body)

    def _flaky(self, params: dict[str, str]) -> None:
        status = _int_param(params, "status", 503)
        if self.scenarios.count_flaky(self.path) <= _int_param(params, "fail", 1):
            headers = [("Content-Type", TEXT_TYPE)]
            if "retry_after" in params:
                headers.append(("Retry-After", params["retry_after"]))
            self.respond(status, headers, f"{_reason(status)} (flaky)\n".encode())
        else:
            self.serve(self.scenarios.demo)

    def _redirect(self, status: int, location: str) -> None:
        self.respond(status, [("Location", location), ("Content-Type", TEXT_TYPE)],
                     f"Moved to {location}\n".encode())

    def _redirect_chain(self, params: dict[str, str]) -> None:
        try:
            statuses = [int(p) for p in params.get("statuses", "301,308").split(",") if p.strip()]
        except ValueError:
            raise BadRequest("statuses must be a comma-separated list of 3xx codes") from None
        if not statuses or any(not 300 <= s <= 399 for s in statuses):
            raise BadRequest("statuses must be a comma-separated list of 3xx codes")
        to = params.get("to", "/feeds/demo-rss.xml")
        rest = statuses[1:]
        nxt = to if not rest else (
            "/scenario/redirect-chain?statuses=" + ",".join(str(s) for s in rest)
            + "&to=" + quote(to, safe=""))
        self._redirect(statuses[0], nxt)

    def _gzip_bomb(self, size: int) -> bytes:
        state = self.scenarios.state
        with state.cond:
            cached = state.gzip_bombs.get(size)
        if cached is None:
            cached = gzip_of(padded_feed_chunks(size, 1024 * 1024))
            with state.cond:
                state.gzip_bombs[size] = cached
        return cached

    def _reset(self, body: bytes) -> None:
        """Half the body, then a TCP reset."""
        self.close_connection = True
        head = self._head(200, [("Content-Type", RSS_TYPE), ("Content-Length", str(len(body)))])
        self._mark_closing()
        part = body[: len(body) // 2] if self.command != "HEAD" else b""
        self._write(head + part, body_bytes=len(part))
        conn = self.connection
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The read file holds a reference to the socket; drop it so close() really closes
        # (and, with SO_LINGER 0, sends RST instead of FIN).
        self.rfile.close()
        conn.close()

    def _wrong_length(self, body: bytes) -> None:
        """A Content-Length 1000 bytes longer than the body, then the connection closes."""
        self.close_connection = True
        head = self._head(200, [("Content-Type", RSS_TYPE),
                                ("Content-Length", str(len(body) + 1000))])
        self._mark_closing()
        if self.command == "HEAD":
            self._write(head, body_bytes=0)
        else:
            self._write(head + body, body_bytes=len(body))
