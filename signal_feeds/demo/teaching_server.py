"""The teaching server: the demo feeds over HTTP on 127.0.0.1 (standard library only).

It serves every file of a fixtures directory under ``/feeds/`` with a strong ETag,
Last-Modified and correct 304 answers to conditional requests, and :meth:`TeachingServer.put`
changes what a path serves (the demo corrects a title that way). ``signal demo`` runs on
it; so does the benchmarks' fallback when nginx is missing.

Run it by hand with ``python -m signal_feeds.demo.teaching_server [--port P] [--fixtures DIR]``.
"""

from __future__ import annotations

import argparse
import calendar
import contextlib
import hashlib
import logging
import mimetypes
import re
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LOOPBACK", "FeedRequestHandler", "Resource", "TeachingServer", "fixtures_dir", "main"]

logger = logging.getLogger(__name__)

#: The only address the server binds: it is for this machine, never for the network.
LOOPBACK = "127.0.0.1"
SERVER_NAME = "signal-teaching-server/1"
RSS_TYPE = "application/rss+xml; charset=utf-8"
ATOM_TYPE = "application/atom+xml; charset=utf-8"
XML_TYPE = "application/xml"
#: How long :meth:`TeachingServer.stop` waits for handler threads to end, in seconds.
DEFAULT_STOP_WAIT = 5.0
#: How often ``main`` wakes to run signal handlers, in seconds.
_SIGNAL_POLL_SECONDS = 0.2

_ETAG_RE = re.compile(r'(W/)?"([^"]*)"')


def fixtures_dir() -> Path:
    """Where the fixture feeds are: the wheel's ``_fixtures`` or the checkout's ``fixtures``."""
    packaged = Path(__file__).resolve().parent.parent / "_fixtures"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "fixtures"


@dataclass(frozen=True)
class Resource:
    """What one path serves: the body, its type and the validators it was given."""

    body: bytes
    content_type: str
    etag: str | None
    last_modified: str | None
    last_modified_ts: int | None


def guess_content_type(body: bytes) -> str:
    """RSS, Atom or plain XML, from a look at the document."""
    if b"<rss" in body:
        return RSS_TYPE
    if b"<feed" in body:
        return ATOM_TYPE
    return XML_TYPE


def http_date(ts: float) -> str:
    """An IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``) for a POSIX timestamp."""
    return formatdate(ts, usegmt=True)


def _parse_http_date(value: str) -> float | None:
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed.tzinfo is None:  # "-0000": UTC without a stated zone
        return float(calendar.timegm(parsed.timetuple()))
    return parsed.timestamp()


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Weak comparison (RFC 9110 §8.8.3.2) of ``etag`` against an If-None-Match list."""
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(f'"{tag}"' == opaque for _weak, tag in _ETAG_RE.findall(if_none_match))


def is_not_modified(resource: Resource, request_headers: Message) -> bool:
    """Answer 304? If-None-Match decides when present (RFC 9110 §13.2.2); otherwise
    If-Modified-Since, where an unreadable date counts as absent."""
    if_none_match = request_headers.get_all("If-None-Match")
    if if_none_match:
        joined = ", ".join(str(v) for v in if_none_match)
        if joined.strip() == "*":
            return True
        return resource.etag is not None and etag_matches(joined, resource.etag)
    since_text = request_headers.get("If-Modified-Since")
    if resource.last_modified_ts is None or not since_text:
        return False
    since = _parse_http_date(str(since_text))
    return since is not None and resource.last_modified_ts <= since


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # bursts of concurrent connects must not hit the backlog
    teaching: TeachingServer

    def server_bind(self) -> None:
        # HTTPServer.server_bind() does a reverse DNS lookup (getfqdn): skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up early is not the server's error; anything else is a bug.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FeedRequestHandler(BaseHTTPRequestHandler):
    """GET and HEAD of the resources a :class:`TeachingServer` holds, with conditional GET."""

    protocol_version = "HTTP/1.1"
    server_version = SERVER_NAME
    sys_version = ""
    disable_nagle_algorithm = True
    timeout = 60
    server: _HTTPServer

    @property
    def teaching(self) -> TeachingServer:
        """The server object this request belongs to."""
        return self.server.teaching

    def setup(self) -> None:
        super().setup()
        self.teaching._track(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.teaching._untrack(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s - %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self.handle_feed_request()

    def do_HEAD(self) -> None:
        self.handle_feed_request()

    def handle_feed_request(self) -> None:
        """Serve the resource at the request target (exact, then without the query)."""
        resource = self.teaching.resource(self.path)
        if resource is None:
            self.respond(404, [("Content-Type", "text/plain; charset=utf-8")], b"Not found.\n")
        else:
            self.serve(resource)

    def serve(self, resource: Resource, extra: Sequence[tuple[str, str]] = ()) -> None:
        """200 with the body, or 304 when the request's validators still match."""
        self.send_resource(resource, is_not_modified(resource, self.headers), extra)

    def send_resource(self, resource: Resource, not_modified: bool,
                      extra: Sequence[tuple[str, str]] = ()) -> None:
        """A 304 (validators and ``extra`` only) or a 200 with the body."""
        validators = [(name, value) for name, value in (("ETag", resource.etag),
                                                        ("Last-Modified", resource.last_modified))
                      if value is not None]
        if not_modified:
            self.respond(304, [*validators, *extra])
        else:
            self.respond(200, [("Content-Type", resource.content_type), *validators, *extra],
                         resource.body)

    def respond(self, status: int, headers: Sequence[tuple[str, str]], body: bytes = b"") -> None:
        """Send a whole response; HEAD and 304 get the headers only."""
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        has_body = status != 304
        if has_body:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if has_body and self.command != "HEAD":
            self.wfile.write(body)


class TeachingServer:
    """A threaded HTTP/1.1 server on 127.0.0.1 for the fixture feeds.

    ``with TeachingServer() as server: server.url("/feeds/demo-rss.xml")``. Every file of
    ``directory`` (default: :func:`fixtures_dir`) is served under ``/feeds/``. Port 0 (the
    default) takes any free port, so two servers never collide. A subclass can answer more
    paths by setting :attr:`handler_class` to a subclass of :class:`FeedRequestHandler`.
    """

    handler_class: type[FeedRequestHandler] = FeedRequestHandler

    def __init__(self, directory: Path | None = None, *, port: int = 0) -> None:
        self._port = port
        self._lock = threading.Lock()
        self._resources: dict[str, Resource] = {}
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._address: tuple[str, int] | None = None
        if directory is not None and not directory.is_dir():
            raise FileNotFoundError(f"fixtures directory not found: {directory}")
        #: The directory served under ``/feeds/``.
        self.fixtures = directory if directory is not None else fixtures_dir()
        self._load(self.fixtures)

    def _load(self, directory: Path) -> None:
        if not directory.is_dir():
            return
        for file in sorted(directory.rglob("*")):
            rel = file.relative_to(directory)
            if not file.is_file() or any(p.startswith(".") or p == "__pycache__"
                                         for p in rel.parts):
                continue
            body = file.read_bytes()
            content_type = None
            if file.suffix != ".xml" and guess_content_type(body) == XML_TYPE:
                guessed, _encoding = mimetypes.guess_type(file.name)
                if guessed is not None and guessed.startswith("text/"):
                    guessed += "; charset=utf-8"
                content_type = guessed
            self.put("/feeds/" + rel.as_posix(), body, content_type=content_type)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> TeachingServer:
        """Bind 127.0.0.1 and serve in a background thread. Returns ``self``."""
        if self._address is not None:
            raise RuntimeError("a TeachingServer can only be started once")
        httpd = _HTTPServer((LOOPBACK, self._port), self.handler_class)
        httpd.teaching = self
        host, port = httpd.server_address[:2]
        self._httpd, self._address = httpd, (str(host), int(port))
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"teaching-server-{port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open (kept-alive) connections, close the listening socket."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections.items())
        for conn, _thread in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + DEFAULT_STOP_WAIT
        for _conn, thread in connections:
            thread.join(max(deadline - time.monotonic(), 0.0))
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(DEFAULT_STOP_WAIT)

    def __enter__(self) -> TeachingServer:
        if self._address is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (once started; still valid after :meth:`stop`)."""
        if self._address is None:
            raise RuntimeError("the server has not been started; call start() first")
        return f"http://{self._address[0]}:{self._address[1]}"

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` (which must start with ``/``) on this server."""
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        return self.base_url + path

    # -- content --------------------------------------------------------------------------

    def put(self, path: str, body: bytes, *, content_type: str | None = None,
            etag: bool = True, last_modified: bool = True) -> None:
        """Serve ``body`` at ``path`` (from now on), with the validators asked for.

        A new body gets a new ETag and a later Last-Modified (never a date already used
        for this path); putting the same body again keeps both.
        """
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r}")
        with self._lock:
            self._resources[path] = self.make_resource(
                body, previous=self._resources.get(path), content_type=content_type,
                etag=etag, last_modified=last_modified)

    @staticmethod
    def make_resource(body: bytes, *, previous: Resource | None = None,
                      content_type: str | None = None, etag: bool = True,
                      last_modified: bool = True) -> Resource:
        """A resource for ``body``; ``previous`` (what the path served before) keeps its
        date when the body is unchanged and is the date a new body must come after."""
        lm_ts: int | None = None
        if last_modified:
            before = previous.last_modified_ts if previous is not None else None
            if previous is not None and previous.body == body and before is not None:
                lm_ts = before
            else:
                # One-second resolution: two quick edits must still get distinct dates.
                lm_ts = max(int(time.time()), before + 1 if before is not None else 0)
        return Resource(
            body=body,
            content_type=content_type or guess_content_type(body),
            etag='"' + hashlib.sha256(body).hexdigest()[:16] + '"' if etag else None,
            last_modified=http_date(lm_ts) if lm_ts is not None else None,
            last_modified_ts=lm_ts,
        )

    def resource(self, target: str) -> Resource | None:
        """What a request target gets: an exact match (query included) first, then the path."""
        with self._lock:
            return self._resources.get(target) or self._resources.get(urlsplit(target).path)

    def paths(self) -> list[str]:
        """The paths served (sorted)."""
        with self._lock:
            return sorted(self._resources)

    def _track(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections[conn] = threading.current_thread()

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.pop(conn, None)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m signal_feeds.demo.teaching_server``: serve until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m signal_feeds.demo.teaching_server",
        description="Serve Signal's demo feeds on 127.0.0.1 with ETag, Last-Modified and 304s.")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--fixtures", type=Path, default=None, help="fixtures directory")
    parser.add_argument("--quiet", action="store_true", help="do not log requests to stderr")
    args = parser.parse_args(argv)
    if not args.quiet:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    server = TeachingServer(args.fixtures, port=args.port).start()
    print(f"Signal teaching server at {server.base_url}", flush=True)
    print(f"  try {server.url('/feeds/demo-rss.xml')}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
    try:
        # The kernel may deliver Ctrl-C or SIGTERM to a server thread; Python then runs
        # the handler only when the main thread next wakes, so it must wake often.
        while not stop.wait(_SIGNAL_POLL_SECONDS):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
