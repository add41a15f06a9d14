"""A small HTTP/1.1 server for tests and lessons (standard library only).

It serves the fixture feeds under ``/feeds/`` with strong ETags, Last-Modified and correct
304 responses, and a set of scenario paths under ``/scenario/`` (slow, trickling, oversized,
gzip bombs, arbitrary statuses with Retry-After, redirects, flaky 5xx, validator variants,
malformed bodies, aborted connections). Tests use it as a real server on 127.0.0.1.

Run it by hand with ``python -m signal_feeds.demo.teaching_server [--port P] [--fixtures DIR]``.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import hashlib
import html
import math
import mimetypes
import re
import select
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from email.message import Message
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import parse_qs, quote, urlsplit

__all__ = [
    "RequestRecord",
    "ScriptedResponse",
    "TeachingServer",
    "fixtures_dir",
    "main",
]

SERVER_NAME = "signal-teaching-server/1"
CHUNK_SIZE = 64 * 1024
RSS_TYPE = "application/rss+xml; charset=utf-8"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
XML_TYPE = "application/xml"

# Used only when the fixtures directory has no demo-rss.xml / variants/malformed.xml.
_FALLBACK_DEMO = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<rss version="2.0"><channel><title>Signal demo (RSS)</title>'
    "<link>https://example.org/</link><description>Fallback demo feed.</description>"
    "<item><title>Заметки о выпуске</title><link>https://example.org/releases/1</link>"
    '<guid isPermaLink="false">release-1</guid>'
    "<pubDate>Mon, 02 Mar 2026 10:00:00 +0300</pubDate></item>"
    "</channel></rss>\n"
).encode()
_FALLBACK_MALFORMED = (
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

_ETAG_RE = re.compile(r'(W/)?"([^"]*)"')
_NO_BODY_STATUSES = frozenset({204, 304})


def fixtures_dir() -> Path:
    """Where the fixture feeds are: the wheel's ``_fixtures`` or the checkout's ``fixtures``."""
    packaged = Path(__file__).resolve().parent.parent / "_fixtures"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "fixtures"


_default_fixtures_dir = fixtures_dir


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server saw it.

    ``finished`` is ``math.inf`` while the request is still being handled.
    """

    method: str
    path: str
    headers: dict[str, str]
    started: float
    finished: float

    def header(self, name: str) -> str | None:
        """The value of a request header, looked up case-insensitively (None if absent)."""
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


@dataclass(frozen=True)
class ScriptedResponse:
    """One canned response for :meth:`TeachingServer.script`.

    ``Content-Length`` is added unless ``headers`` already has one (sent verbatim then).
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    delay: float = 0.0


@dataclass
class _Static:
    body: bytes
    content_type: str
    etag: str | None
    last_modified: str | None
    last_modified_ts: int | None
    rotate_etag: bool
    extra: tuple[tuple[str, str], ...]
    rotations: int = 0


@dataclass
class _Slot:
    method: str
    path: str
    headers: dict[str, str]
    started: float
    finished: float | None = None
    closing: bool = False

    def record(self) -> RequestRecord:
        finished = math.inf if self.finished is None else self.finished
        return RequestRecord(self.method, self.path, dict(self.headers), self.started, finished)


@dataclass
class _Script:
    responses: tuple[ScriptedResponse, ...]
    index: int = 0


class _BadRequest(Exception):
    pass


class _Stopping(Exception):
    pass


def _guess_content_type(body: bytes) -> str:
    if b"<rss" in body:
        return RSS_TYPE
    if b"<feed" in body:
        return ATOM_TYPE
    return XML_TYPE


def _strong_etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def _http_date(ts: float) -> str:
    return formatdate(ts, usegmt=True)


def _etag_matches(header_value: str, current: str) -> bool:
    """Weak comparison (RFC 9110 §8.8.3.2) of ``current`` against an If-None-Match list."""
    if header_value.strip() == "*":
        return True
    current_opaque = current[2:] if current.startswith("W/") else current
    return any(f'"{tag}"' == current_opaque for _weak, tag in _ETAG_RE.findall(header_value))


def _parse_http_date(value: str) -> float | None:
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:  # "-0000": UTC without a stated zone
        return float(calendar.timegm(parsed.timetuple()))
    return parsed.timestamp()


def _padded_feed_chunks(size: int, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
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


def _gzip_of_stream(chunks: Iterable[bytes]) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = [compressor.compress(piece) for piece in chunks]
    out.append(compressor.flush())
    return b"".join(out)


def _header_bytes(value: str) -> bytes:
    if "\r" in value or "\n" in value:
        raise _BadRequest("header values must not contain CR or LF")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # bursts of concurrent connects must not hit the backlog
    teaching: TeachingServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind() does a reverse DNS lookup (getfqdn); skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients closing connections early is the point of several scenarios: stay quiet
        # about network errors, but do not hide bugs in the server itself.
        exc = sys.exc_info()[1]
        if not isinstance(exc, OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = SERVER_NAME
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = 60

    _slot: _Slot | None = None
    _arrived: float = 0.0
    _sent_status: int = 0

    # -- plumbing -----------------------------------------------------------------------

    @property
    def ts(self) -> TeachingServer:
        return cast(_HTTPServer, self.server).teaching

    def setup(self) -> None:
        super().setup()
        self.ts._register_connection(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.ts._unregister_connection(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        if self.ts.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    def parse_request(self) -> bool:
        self._arrived = time.monotonic()
        return super().parse_request()

    def do_GET(self) -> None:
        self._dispatch()

    def do_HEAD(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch(allowed=False)

    def do_PUT(self) -> None:
        self._dispatch(allowed=False)

    def do_DELETE(self) -> None:
        self._dispatch(allowed=False)

    def do_PATCH(self) -> None:
        self._dispatch(allowed=False)

    def do_OPTIONS(self) -> None:
        self._dispatch(allowed=False)

    def _dispatch(self, *, allowed: bool = True) -> None:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        slot = _Slot(self.command, self.path, headers, self._arrived)
        self._slot = slot
        self._sent_status = 0
        self.ts._begin(slot)
        try:
            if not allowed:
                self.close_connection = True
                self._respond(405, [("Allow", "GET, HEAD"), ("Content-Type", "text/plain")],
                              b"Only GET and HEAD are supported.\n")
            else:
                try:
                    self._route()
                except _BadRequest as exc:
                    self._respond(400, [("Content-Type", "text/plain; charset=utf-8")],
                                  f"{exc}\n".encode())
        except _Stopping:
            self.close_connection = True
        except OSError:
            # The client went away (broken pipe, reset) or we aborted the socket on purpose.
            self.close_connection = True
        finally:
            finished = time.monotonic()
            self.ts._end(slot, finished)
            if self.ts.verbose:
                status = str(self._sent_status) if self._sent_status else "aborted"
                self.log_message(
                    '"%s %s" %s %.3fs', self.command, self.path, status, finished - slot.started
                )

    def _mark_closing(self) -> None:
        if self._slot is not None:
            self.ts._mark_closing(self._slot)

    def _write(self, data: bytes, *, body_bytes: int) -> None:
        self.wfile.write(data)
        if body_bytes:
            self.ts._count_sent(self.path, body_bytes)

    def _head(self, status: int, headers: Sequence[tuple[str, str]]) -> bytes:
        self._sent_status = status
        lines = [f"HTTP/1.1 {status} {_reason(status)}".encode("latin-1")]
        given = {name.lower() for name, _ in headers}
        base = [
            (name, value)
            for name, value in (("Server", SERVER_NAME), ("Date", _http_date(time.time())))
            if name.lower() not in given
        ]
        for name, value in [*base, *headers]:
            lines.append(name.encode("latin-1") + b": " + _header_bytes(value))
        if self.close_connection and not any(n.lower() == "connection" for n, _ in headers):
            lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def _respond(
        self,
        status: int,
        headers: Sequence[tuple[str, str]],
        body: bytes = b"",
        *,
        add_length: bool = True,
    ) -> None:
        """Send a complete response in one write (headers only for HEAD, 204 and 304)."""
        all_headers = list(headers)
        no_body = status in _NO_BODY_STATUSES or 100 <= status < 200
        if (
            add_length
            and not no_body
            and not any(n.lower() == "content-length" for n, _ in all_headers)
        ):
            all_headers.append(("Content-Length", str(len(body))))
        head = self._head(status, all_headers)
        send_body = not no_body and self.command != "HEAD"
        self._mark_closing()
        if send_body:
            self._write(head + body, body_bytes=len(body))
        else:
            self._write(head, body_bytes=0)

    def _stream(
        self,
        status: int,
        headers: Sequence[tuple[str, str]],
        length: int,
        chunks: Iterable[bytes],
        *,
        interval: float = 0.0,
    ) -> None:
        head = self._head(status, [*headers, ("Content-Length", str(length))])
        if self.command == "HEAD":
            self._mark_closing()
            self._write(head, body_bytes=0)
            return
        self._write(head, body_bytes=0)
        sent = 0
        for piece in chunks:
            if interval > 0:
                self.ts._sleep(interval)
                if self._peer_closed():
                    raise ConnectionAbortedError("the client closed the connection")
            if sent + len(piece) >= length:
                self._mark_closing()
            self._write(piece, body_bytes=len(piece))
            sent += len(piece)

    def _peer_closed(self) -> bool:
        conn = self.connection
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # -- routing ------------------------------------------------------------------------

    def _route(self) -> None:
        target = urlsplit(self.path)
        path = target.path or "/"
        params = {k: v[0] for k, v in parse_qs(target.query, keep_blank_values=True).items()}
        ts = self.ts

        script = ts._next_scripted(self.path, path)
        if script is not None:
            if script.delay > 0:
                ts._sleep(script.delay)
            self._respond(script.status, script.headers, script.body)
            return

        static = ts._static_for(self.path, path)
        if static is not None:
            self._serve_static(static)
            return

        if path.startswith("/scenario/"):
            self._scenario(path[len("/scenario/"):], params)
            return
        if path == "/":
            self._index()
            return
        self._respond(404, [("Content-Type", "text/plain; charset=utf-8")], b"Not found.\n")

    def _index(self) -> None:
        items = "".join(
            f'<li><a href="{html.escape(p)}">{html.escape(p)}</a></li>' for p in self.ts.paths()
        )
        page = (
            '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Signal teaching server'
            f"</title></head><body><h1>Signal teaching server</h1><ul>{items}</ul></body></html>\n"
        ).encode()
        self._respond(200, [("Content-Type", "text/html; charset=utf-8")], page)

    def _serve_static(self, res: _Static, extra: Sequence[tuple[str, str]] = ()) -> None:
        etag, last_modified, not_modified = self.ts._evaluate(res, self.headers)
        validators: list[tuple[str, str]] = []
        if etag is not None:
            validators.append(("ETag", etag))
        if last_modified is not None:
            validators.append(("Last-Modified", last_modified))
        if not_modified:
            self._respond(304, [*validators, *res.extra, *extra])
            return
        self._respond(
            200,
            [("Content-Type", res.content_type), *validators, *res.extra, *extra],
            res.body,
        )

    def _scenario(self, name: str, params: dict[str, str]) -> None:
        ts = self.ts
        demo = ts._demo
        if name == "slow":
            ts._sleep(_float_param(params, "delay", 1.0))
            self._serve_static(demo)
        elif name == "trickle":
            interval = _float_param(params, "interval", 1.0)
            body = demo.body
            if "size" in params:
                size = _int_param(params, "size", len(body))
                body = body[:size] + b" " * max(size - len(body), 0)
            self._stream(
                200,
                [("Content-Type", RSS_TYPE)],
                len(body),
                (body[i : i + 1] for i in range(len(body))),
                interval=interval,
            )
        elif name == "oversized":
            size = _int_param(params, "size", 8 * 1024 * 1024)
            self._stream(200, [("Content-Type", RSS_TYPE)], size, _padded_feed_chunks(size))
        elif name == "gzip-bomb":
            size = _int_param(params, "size", 64 * 1024 * 1024)
            body = ts._gzip_bomb(size)
            self._respond(
                200, [("Content-Type", RSS_TYPE), ("Content-Encoding", "gzip")], body
            )
        elif name.startswith("status/"):
            self._status(name[len("status/"):], params)
        elif name == "redirect":
            status = _redirect_status(params, 301)
            self._redirect(status, params.get("to", "/feeds/demo-rss.xml"))
        elif name == "redirect-chain":
            self._redirect_chain(params)
        elif name in ("redirect-loop", "redirect-loop/b"):
            status = _redirect_status(params, 302)
            other = "/scenario/redirect-loop/b" if name == "redirect-loop" else (
                "/scenario/redirect-loop"
            )
            if "status" in params:
                other += "?status=" + str(status)
            self._redirect(status, other)
        elif name == "redirect-to":
            self._redirect(_redirect_status(params, 302), params.get("location", ""))
        elif name == "flaky":
            fail = _int_param(params, "fail", 1)
            status = _int_param(params, "status", 503)
            if ts._flaky_count(self.path) <= fail:
                headers = [("Content-Type", "text/plain; charset=utf-8")]
                if "retry_after" in params:
                    headers.append(("Retry-After", params["retry_after"]))
                self._respond(status, headers, f"{_reason(status)} (flaky)\n".encode())
            else:
                self._serve_static(demo)
        elif name in ts._variants:
            self._serve_static(ts._variants[name])
        elif name == "cache":
            extra = [("Cache-Control", f"max-age={_int_param(params, 'max_age', 600)}")]
            if "age" in params:
                extra.append(("Age", str(_int_param(params, "age", 0))))
            self._serve_static(demo, extra)
        elif name == "expires":
            seconds = _float_param(params, "in", 3600.0)
            self._serve_static(demo, [("Expires", _http_date(time.time() + seconds))])
        elif name == "malformed":
            self._respond(200, [("Content-Type", RSS_TYPE)], ts._malformed)
        elif name == "html":
            self._respond(200, [("Content-Type", "text/html; charset=utf-8")], _HTML_PAGE)
        elif name == "empty":
            self._respond(200, [("Content-Type", RSS_TYPE)], b"")
        elif name == "reset":
            self._reset(demo.body)
        elif name == "wrong-length":
            self.close_connection = True
            body = demo.body
            head = self._head(
                200, [("Content-Type", RSS_TYPE), ("Content-Length", str(len(body) + 1000))]
            )
            self._mark_closing()
            if self.command == "HEAD":
                self._write(head, body_bytes=0)
            else:
                self._write(head + body, body_bytes=len(body))
        else:
            self._respond(404, [("Content-Type", "text/plain; charset=utf-8")],
                          b"Unknown scenario.\n")

    def _status(self, code_text: str, params: dict[str, str]) -> None:
        if not code_text.isdigit() or not 200 <= int(code_text) <= 599:
            raise _BadRequest("status must be a number from 200 to 599")
        status = int(code_text)
        headers: list[tuple[str, str]] = []
        for param, header in (
            ("retry_after", "Retry-After"),
            ("cache_control", "Cache-Control"),
            ("expires", "Expires"),
            ("age", "Age"),
            ("location", "Location"),
        ):
            if param in params:
                headers.append((header, params[param]))
        if status == 200:
            self._respond(200, [("Content-Type", RSS_TYPE), *headers], self.ts._demo.body)
        else:
            body = f"{status} {_reason(status)}\n".encode()
            self._respond(status, [("Content-Type", "text/plain; charset=utf-8"), *headers], body)

    def _redirect(self, status: int, location: str) -> None:
        body = f"Moved to {location}\n".encode()
        headers = [("Location", location), ("Content-Type", "text/plain; charset=utf-8")]
        self._respond(status, headers, body)

    def _redirect_chain(self, params: dict[str, str]) -> None:
        raw = params.get("statuses", "301,308")
        try:
            statuses = [int(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            raise _BadRequest("statuses must be a comma-separated list of 3xx codes") from None
        if not statuses or any(not 300 <= s <= 399 for s in statuses):
            raise _BadRequest("statuses must be a comma-separated list of 3xx codes")
        to = params.get("to", "/feeds/demo-rss.xml")
        rest = statuses[1:]
        if rest:
            nxt = (
                "/scenario/redirect-chain?statuses="
                + ",".join(str(s) for s in rest)
                + "&to="
                + quote(to, safe="")
            )
        else:
            nxt = to
        self._redirect(statuses[0], nxt)

    def _reset(self, body: bytes) -> None:
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


def _int_param(params: Mapping[str, str], name: str, default: int) -> int:
    if name not in params:
        return default
    try:
        value = int(params[name])
    except ValueError:
        raise _BadRequest(f"{name} must be an integer") from None
    if value < 0:
        raise _BadRequest(f"{name} must not be negative")
    return value


def _float_param(params: Mapping[str, str], name: str, default: float) -> float:
    if name not in params:
        return default
    try:
        value = float(params[name])
    except ValueError:
        raise _BadRequest(f"{name} must be a number") from None
    if not math.isfinite(value) or value < 0:
        raise _BadRequest(f"{name} must be a finite, non-negative number")
    return value


def _redirect_status(params: Mapping[str, str], default: int) -> int:
    status = _int_param(params, "status", default)
    if not 300 <= status <= 399:
        raise _BadRequest("status must be a 3xx code")
    return status


@dataclass
class _State:
    """Everything the handler threads share, guarded by ``cond``'s lock."""

    cond: threading.Condition = field(default_factory=threading.Condition)
    log: list[_Slot] = field(default_factory=list)
    active: list[_Slot] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    flaky: dict[str, int] = field(default_factory=dict)
    connections: dict[socket.socket, threading.Thread] = field(default_factory=dict)


class TeachingServer:
    """A threaded HTTP/1.1 server for fixtures and scenarios, bound to 127.0.0.1.

    Use it as a context manager::

        with TeachingServer() as server:
            httpx.get(server.url("/feeds/demo-rss.xml"))
    """

    def __init__(
        self,
        fixtures_dir: Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        self._fixtures_dir = fixtures_dir
        self._host = host
        self._port = port
        self.verbose = verbose
        self._state = _State()
        self._static: dict[str, _Static] = {}
        self._scripts: dict[str, _Script] = {}
        self._gzip_cache: dict[int, bytes] = {}
        self._last_modified_ts: dict[str, int] = {}
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._address: tuple[str, int] | None = None
        self._thread: threading.Thread | None = None
        self._started = False

        directory = fixtures_dir if fixtures_dir is not None else _default_fixtures_dir()
        if fixtures_dir is not None and not directory.is_dir():
            raise FileNotFoundError(f"fixtures directory not found: {directory}")
        self._load_fixtures(directory)
        demo_file = directory / "demo-rss.xml"
        demo_body = demo_file.read_bytes() if demo_file.is_file() else _FALLBACK_DEMO
        malformed_file = directory / "variants" / "malformed.xml"
        self._malformed = (
            malformed_file.read_bytes() if malformed_file.is_file() else _FALLBACK_MALFORMED
        )
        self._demo = self._make_static("/scenario/", demo_body, None, True, True, False, None)
        self._variants: dict[str, _Static] = {
            "rotating-etag": self._make_static(
                "/scenario/rotating-etag", demo_body, None, True, True, True, None
            ),
            "etag-only": self._make_static(
                "/scenario/etag-only", demo_body, None, True, False, False, None
            ),
            "last-modified-only": self._make_static(
                "/scenario/last-modified-only", demo_body, None, False, True, False, None
            ),
            "no-validators": self._make_static(
                "/scenario/no-validators", demo_body, None, False, False, False, None
            ),
        }

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> TeachingServer:
        """Bind and serve in a background thread. Returns ``self``."""
        if self._started:
            raise RuntimeError("TeachingServer can only be started once")
        self._started = True
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.teaching = self
        self._httpd = httpd
        host, port = httpd.server_address[:2]
        self._address = (str(host), int(port))
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"teaching-server-{self.base_url}",
            daemon=True,
        )
        self._thread = thread
        with self._state.cond:
            self._state.peak = self._state.in_flight
        thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open connections and close the listening socket."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._state.cond:
            connections = list(self._state.connections.items())
        for conn, _thread in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + 5.0
        for _conn, thread in connections:
            thread.join(max(deadline - time.monotonic(), 0.0))
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(5.0)
        self._httpd = None

    def __enter__(self) -> TeachingServer:
        if not self._started:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (after :meth:`start`; still valid after :meth:`stop`)."""
        if self._address is None:
            raise RuntimeError("the server has not been started; call start() first")
        host, port = self._address
        host_text = host
        if ":" in host_text:
            host_text = f"[{host_text}]"
        return f"http://{host_text}:{port}"

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (which must start with ``/``) on this server."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        return self.base_url + path

    # -- content ------------------------------------------------------------------------

    def put(
        self,
        path: str,
        body: bytes,
        *,
        content_type: str | None = None,
        etag: bool = True,
        last_modified: bool = True,
        rotate_etag: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Serve ``body`` at ``path`` with validators and conditional GET.

        Replacing the body changes the ETag and moves Last-Modified forward; putting the
        same body again keeps both.
        """
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        extra = tuple((headers or {}).items())
        for name, value in extra:
            if any(c in name + value for c in "\r\n"):
                raise ValueError(f"header {name!r} contains CR or LF")
        res = self._make_static(
            path, body, content_type, etag, last_modified, rotate_etag, extra
        )
        with self._state.cond:
            self._static[path] = res

    def script(self, path: str, responses: Sequence[ScriptedResponse]) -> None:
        """Answer requests to ``path`` with ``responses`` in turn; the last one repeats.

        ``path`` may include a query string (matched exactly first), otherwise it matches
        any query. Scripts take precedence over :meth:`put` resources and scenarios.
        """
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        if not responses:
            raise ValueError("script() needs at least one response")
        with self._state.cond:
            self._scripts[path] = _Script(tuple(responses))

    def paths(self) -> list[str]:
        """The paths of the static resources currently served (sorted)."""
        with self._state.cond:
            return sorted(self._static)

    # -- observation --------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the request log in arrival order.

        Requests whose response is being written are waited for (briefly) so that a
        request the client has already seen answered shows its ``finished`` time;
        requests still in progress (sleeping, trickling) have ``finished == math.inf``.
        """
        state = self._state
        with state.cond:
            self._settle()
            return [slot.record() for slot in state.log]

    def requests_for(self, path: str) -> list[RequestRecord]:
        """Logged requests for ``path``: exact target if it has a query, else by path."""
        if "?" in path:
            return [r for r in self.requests if r.path == path]
        return [r for r in self.requests if urlsplit(r.path).path == path]

    def clear_log(self) -> None:
        """Forget logged requests and reset :attr:`peak_in_flight`."""
        with self._state.cond:
            self._settle()
            self._state.log.clear()
            self._state.peak = self._state.in_flight

    @property
    def peak_in_flight(self) -> int:
        """Most requests handled at the same moment since start / clear_log / reset_peak."""
        with self._state.cond:
            return self._state.peak

    @property
    def in_flight(self) -> int:
        """Requests being handled right now (not counting ones whose answer is written)."""
        with self._state.cond:
            self._settle()
            return self._state.in_flight

    def reset_peak(self) -> None:
        """Start counting :attr:`peak_in_flight` again from the requests in progress now."""
        with self._state.cond:
            self._settle()
            self._state.peak = self._state.in_flight

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being handled; False if ``timeout`` passed first."""
        with self._state.cond:
            return self._state.cond.wait_for(lambda: self._state.in_flight == 0, timeout)

    def bytes_sent(self, path_prefix: str = "/") -> int:
        """Body bytes written so far for requests whose target starts with ``path_prefix``."""
        with self._state.cond:
            return sum(n for p, n in self._state.sent.items() if p.startswith(path_prefix))

    def _settle(self) -> None:
        """Wait (with the lock held) for requests whose response is being written.

        A client can read the last byte before the handler thread returns from the write;
        without this, a request the client has seen answered could still look in flight.
        """
        state = self._state
        state.cond.wait_for(lambda: not any(s.closing for s in state.active), timeout=5.0)

    # -- internals used by the handler --------------------------------------------------

    def _load_fixtures(self, directory: Path) -> None:
        if not directory.is_dir():
            return
        for file in sorted(directory.rglob("*")):
            rel = file.relative_to(directory)
            if not file.is_file() or any(
                part.startswith(".") or part == "__pycache__" for part in rel.parts
            ):
                continue
            body = file.read_bytes()
            content_type = None
            if file.suffix != ".xml" and _guess_content_type(body) == XML_TYPE:
                guessed, _encoding = mimetypes.guess_type(file.name)
                if guessed is not None and guessed.startswith("text/"):
                    guessed += "; charset=utf-8"
                content_type = guessed
            self.put("/feeds/" + rel.as_posix(), body, content_type=content_type)

    def _make_static(
        self,
        path: str,
        body: bytes,
        content_type: str | None,
        etag: bool,
        last_modified: bool,
        rotate_etag: bool,
        extra: tuple[tuple[str, str], ...] | None,
    ) -> _Static:
        with self._state.cond:
            previous = self._static.get(path)
            lm_ts: int | None = None
            if last_modified:
                if previous is not None and previous.body == body and (
                    previous.last_modified_ts is not None
                ):
                    lm_ts = previous.last_modified_ts
                else:
                    lm_ts = int(time.time())
                    earlier = self._last_modified_ts.get(path)
                    if earlier is not None and lm_ts <= earlier:
                        # Never reuse a date for a different body (second resolution).
                        lm_ts = earlier + 1
                self._last_modified_ts[path] = lm_ts
        return _Static(
            body=body,
            content_type=content_type or _guess_content_type(body),
            etag=_strong_etag(body) if etag else None,
            last_modified=_http_date(lm_ts) if lm_ts is not None else None,
            last_modified_ts=lm_ts,
            rotate_etag=rotate_etag and etag,
            extra=extra or (),
        )

    def _static_for(self, target: str, path: str) -> _Static | None:
        with self._state.cond:
            return self._static.get(target) or self._static.get(path)

    def _next_scripted(self, target: str, path: str) -> ScriptedResponse | None:
        with self._state.cond:
            script = self._scripts.get(target) or self._scripts.get(path)
            if script is None:
                return None
            response = script.responses[min(script.index, len(script.responses) - 1)]
            script.index += 1
            return response

    def _evaluate(
        self, res: _Static, headers: Message
    ) -> tuple[str | None, str | None, bool]:
        """(ETag to send, Last-Modified to send, answer 304?) per RFC 9110 §13.2.2.

        If-None-Match (weak comparison, lists, ``*``) takes precedence; If-Modified-Since
        is only consulted without it, and an unparseable date is ignored. A rotating ETag
        changes on every 200, so only ``*`` can match it.
        """
        inm_values = headers.get_all("If-None-Match")
        with self._state.cond:
            etag = res.etag
            if etag is not None and res.rotate_etag and res.rotations:
                etag = f'{etag[:-1]}-{res.rotations}"'
            if inm_values:
                inm = ", ".join(str(v) for v in inm_values)
                if inm.strip() == "*":
                    matched = True
                else:
                    matched = etag is not None and not res.rotate_etag and _etag_matches(inm, etag)
            elif res.last_modified_ts is not None and headers.get("If-Modified-Since"):
                since = _parse_http_date(str(headers.get("If-Modified-Since")))
                matched = since is not None and res.last_modified_ts <= since
            else:
                matched = False
            if not matched and res.etag is not None and res.rotate_etag:
                res.rotations += 1
                etag = f'{res.etag[:-1]}-{res.rotations}"'
        return etag, res.last_modified, matched

    def _gzip_bomb(self, size: int) -> bytes:
        with self._state.cond:
            cached = self._gzip_cache.get(size)
        if cached is None:
            cached = _gzip_of_stream(_padded_feed_chunks(size, 1024 * 1024))
            with self._state.cond:
                self._gzip_cache[size] = cached
        return cached

    def _flaky_count(self, target: str) -> int:
        with self._state.cond:
            count = self._state.flaky.get(target, 0) + 1
            self._state.flaky[target] = count
            return count

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise _Stopping

    def _register_connection(self, conn: socket.socket) -> None:
        with self._state.cond:
            self._state.connections[conn] = threading.current_thread()

    def _unregister_connection(self, conn: socket.socket) -> None:
        with self._state.cond:
            self._state.connections.pop(conn, None)

    def _begin(self, slot: _Slot) -> None:
        state = self._state
        with state.cond:
            state.log.append(slot)
            state.active.append(slot)
            state.in_flight += 1
            state.peak = max(state.peak, state.in_flight)

    def _mark_closing(self, slot: _Slot) -> None:
        with self._state.cond:
            slot.closing = True

    def _end(self, slot: _Slot, finished: float) -> None:
        state = self._state
        with state.cond:
            slot.finished = finished
            slot.closing = True
            state.active.remove(slot)
            state.in_flight -= 1
            state.cond.notify_all()

    def _count_sent(self, target: str, n: int) -> None:
        with self._state.cond:
            self._state.sent[target] = self._state.sent.get(target, 0) + n


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m signal_feeds.demo.teaching_server``: serve until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m signal_feeds.demo.teaching_server",
        description="Serve Signal's demo feeds and HTTP scenarios on 127.0.0.1.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--fixtures", type=Path, default=None, help="fixtures directory")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)
    server = TeachingServer(args.fixtures, host=args.host, port=args.port, verbose=not args.quiet)
    server.start()
    print(f"Signal teaching server at {server.base_url}", flush=True)
    print(f"  try {server.url('/feeds/demo-rss.xml')}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        while not stop.wait(3600):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
