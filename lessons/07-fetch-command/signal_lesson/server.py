"""A small teaching server: the fixtures on 127.0.0.1, with validators and honest 304s.

Standard library only. Every document has a strong ETag (derived from its bytes) and a
Last-Modified date (a fixed date for the first version, one hour later for each new
version), so what the server sends is the same on every run. A few scenario paths
misbehave on purpose: they stall, trickle, send too much, or redirect too often.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
#: Last-Modified of the first version of every document: a fixed date, not our clock.
FIRST_MODIFIED = datetime(2026, 3, 25, 12, 0, tzinfo=UTC)
XML = "application/xml; charset=utf-8"


@dataclass(frozen=True)
class Document:
    body: bytes
    etag: str  # "" means: send no ETag
    last_modified: str  # "" means: send no Last-Modified
    content_type: str = XML


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the server received it, and the status it answered."""

    method: str
    path: str
    headers: dict[str, str]
    status: int


def strong_etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def _parse_http_date(value: str) -> datetime | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def is_not_modified(doc: Document, if_none_match: str | None,
                    if_modified_since: str | None) -> bool:
    """The 304 decision (RFC 9110, 13.1): If-None-Match wins; the date is a fallback."""
    if if_none_match is not None:
        if not doc.etag:
            return False
        wanted = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return "*" in wanted or doc.etag.removeprefix("W/") in wanted
    if if_modified_since is not None and doc.last_modified:
        since = _parse_http_date(if_modified_since)
        modified = _parse_http_date(doc.last_modified)
        return since is not None and modified is not None and modified <= since
    return False


class TeachingServer:
    """``with TeachingServer() as server: server.url("/feeds/demo-rss.xml")``."""

    def __init__(self, fixtures: Path = FIXTURES, *, stall_seconds: float = 30.0,
                 big_bytes: int = 4 * 1024 * 1024) -> None:
        self.stall_seconds = stall_seconds
        self.big_bytes = big_bytes
        self.log: list[LoggedRequest] = []
        self._docs: dict[str, Document] = {}
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        for file in sorted(fixtures.rglob("*.xml")):
            self.publish("/feeds/" + file.relative_to(fixtures).as_posix(), file.read_bytes())
        gzip_bomb()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.teaching = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def publish(self, path: str, body: bytes, *, etag: str | None = None,
                last_modified: str | None = None, content_type: str = XML) -> Document:
        """Put a (new version of a) document at ``path``, as a publisher would."""
        with self._lock:
            version = self._versions.get(path, 0)
            self._versions[path] = version + 1
            if last_modified is None:
                when = FIRST_MODIFIED + timedelta(hours=version)
                last_modified = format_datetime(when, usegmt=True)
            doc = Document(body, strong_etag(body) if etag is None else etag,
                           last_modified, content_type)
            self._docs[path] = doc
            return doc

    def document(self, path: str) -> Document | None:
        with self._lock:
            return self._docs.get(path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{path}"

    def record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.log.append(entry)

    def __enter__(self) -> TeachingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


@functools.cache
def gzip_bomb() -> bytes:
    """8 MiB of zeros that travel as about 8 KiB (made once, before anyone asks)."""
    return gzip.compress(b"\0" * (8 * 1024 * 1024), compresslevel=9, mtime=0)


class _Handler(BaseHTTPRequestHandler):
    server_version = "SignalTeachingServer/1"

    def log_message(self, format: str, *args: object) -> None:
        """Silence stderr: the server keeps its own log."""

    def do_GET(self) -> None:
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up, as a bounded client should

    def _start(self, status: int, headers: dict[str, str]) -> None:
        teaching: TeachingServer = self.server.teaching  # type: ignore[attr-defined]
        teaching.record(LoggedRequest(self.command, urlsplit(self.path).path,
                                      dict(self.headers.items()), status))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _route(self) -> None:
        teaching: TeachingServer = self.server.teaching  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        if path.startswith("/scenario/redirect/"):
            hops = int(path.rsplit("/", 1)[1])  # how many redirects until the feed
            target = f"/scenario/redirect/{hops - 1}" if hops > 1 else "/feeds/demo-rss.xml"
            self._start(302, {"Location": target, "Content-Length": "0"})
        elif path == "/scenario/stall":  # headers, a few bytes, then silence
            self._start(200, {"Content-Type": XML, "Content-Length": "1000"})
            self.wfile.write(b"<?xml")
            self.wfile.flush()
            teaching._stop.wait(teaching.stall_seconds)
        elif path == "/scenario/trickle":  # one byte at a time, never quite silent
            self._start(200, {"Content-Type": XML})
            while not teaching._stop.wait(0.05):
                self.wfile.write(b" ")
                self.wfile.flush()
        elif path == "/scenario/big":  # no Content-Length: only counting can stop it
            self._start(200, {"Content-Type": XML})
            chunk = b" " * 65536
            for _ in range(teaching.big_bytes // len(chunk)):
                self.wfile.write(chunk)
        elif path == "/scenario/gzip-bomb":
            bomb = gzip_bomb()
            self._start(200, {"Content-Type": XML, "Content-Encoding": "gzip",
                              "Content-Length": str(len(bomb))})
            self.wfile.write(bomb)
        elif (doc := teaching.document(path)) is None:
            self._start(404, {"Content-Length": "0"})
        else:
            validators = {"ETag": doc.etag, "Last-Modified": doc.last_modified}
            validators = {name: value for name, value in validators.items() if value}
            if is_not_modified(doc, self.headers.get("If-None-Match"),
                               self.headers.get("If-Modified-Since")):
                self._start(304, validators)  # validators again, and no body at all
            else:
                self._start(200, {"Content-Type": doc.content_type,
                                  "Content-Length": str(len(doc.body)), **validators})
                self.wfile.write(doc.body)
