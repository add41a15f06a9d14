"""HTTP servers for the benchmark: nginx (preferred), the teaching server, a delaying server.

Every server serves the corpus under two prefixes with the same bytes:

* ``/feeds/<name>`` with validators (ETag and Last-Modified) and 304 answers;
* ``/nv/<name>`` with no validators at all, so every request is a full 200.

The corpus the server shows can be switched between directories (``base`` and
``changed``) without changing URLs: nginx serves through a symlink that is swapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "DelayServer",
    "FeedServer",
    "NginxServer",
    "TeachingFeedServer",
    "free_port",
    "nginx_path",
    "wait_for_port",
]

VALIDATED_PREFIX = "/feeds/"
NO_VALIDATORS_PREFIX = "/nv/"


class FeedServer(Protocol):
    """What the scenarios need from a server."""

    description: str

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def url(self, name: str, *, validators: bool = True) -> str: ...
    def show(self, directory: Path) -> None: ...


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing is listening on 127.0.0.1:{port}") from None
            time.sleep(0.02)


def nginx_path() -> str | None:
    for candidate in ("nginx", "/usr/sbin/nginx", "/usr/local/sbin/nginx"):
        found = shutil.which(candidate)
        if found:
            return found
    return None


_NGINX_CONF = """\
{user}daemon off;
master_process on;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    types {{ }}
    default_type application/xml;
    charset utf-8;
    charset_types application/xml;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 10000;
    gzip off;
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        location /feeds/ {{
            alias {www}/;
            etag on;
        }}
        location /nv/ {{
            alias {www}/;
            # No validators: no ETag, conditional requests ignored, and Last-Modified
            # cleared by running the body through a substitution that never matches
            # (sub_filter drops Last-Modified unless sub_filter_last_modified is on).
            etag off;
            if_modified_since off;
            sub_filter_types *;
            sub_filter "\\x00never-in-a-feed\\x00" "";
        }}
    }}
}}
"""


class NginxServer:
    """nginx run in the foreground from its own config in ``tmp`` (no root needed)."""

    def __init__(self, tmp: Path, binary: str) -> None:
        self.tmp = tmp
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.binary = binary
        self.port = free_port()
        self.www = tmp / "www"
        self._proc: subprocess.Popen[bytes] | None = None
        version = subprocess.run([binary, "-v"], capture_output=True, text=True).stderr.strip()
        self.description = f"{version.split(':', 1)[-1].strip()} (127.0.0.1, 1 worker)"

    def start(self) -> None:
        conf = self.tmp / "nginx.conf"
        # Started as root, nginx would drop its workers to "nobody", who cannot read a private
        # temp dir: keep the workers as the current user.
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf.write_text(
            _NGINX_CONF.format(user=user, tmp=self.tmp, port=self.port, www=self.www)
        )
        self._proc = subprocess.Popen(
            [self.binary, "-p", str(self.tmp), "-c", str(conf), "-e", str(self.tmp / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(self.port)
        except RuntimeError:
            self.stop()
            log = (self.tmp / "error.log").read_text(errors="replace")
            raise RuntimeError(f"nginx did not start:\n{log}") from None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def url(self, name: str, *, validators: bool = True) -> str:
        prefix = VALIDATED_PREFIX if validators else NO_VALIDATORS_PREFIX
        return f"http://127.0.0.1:{self.port}{prefix}{name}"

    def show(self, directory: Path) -> None:
        """Serve ``directory`` from now on (atomic symlink swap; URLs stay the same)."""
        staging = self.www.with_name("www.next")
        staging.unlink(missing_ok=True)
        staging.symlink_to(directory.resolve(), target_is_directory=True)
        staging.replace(self.www)


class TeachingFeedServer:
    """The project's teaching server, used when nginx is not installed."""

    description = "signal_feeds.demo.teaching_server.TeachingServer (fallback: nginx not found)"

    def __init__(self, directory: Path) -> None:
        from signal_feeds.demo.teaching_server import TeachingServer

        # Loaded from an empty folder: the corpus is put() explicitly (and can be switched).
        self._empty = directory.parent / "teaching-empty"
        self._empty.mkdir(parents=True, exist_ok=True)
        self._server = TeachingServer(self._empty)
        self._initial = directory

    def start(self) -> None:
        self._server.start()
        self.show(self._initial)

    def stop(self) -> None:
        self._server.stop()

    def url(self, name: str, *, validators: bool = True) -> str:
        prefix = VALIDATED_PREFIX if validators else NO_VALIDATORS_PREFIX
        return self._server.url(prefix + name)

    def show(self, directory: Path) -> None:
        # Putting the same body again keeps its ETag and Last-Modified.
        for file in sorted(directory.glob("*.xml")):
            body = file.read_bytes()
            self._server.put(VALIDATED_PREFIX + file.name, body)
            self._server.put(
                NO_VALIDATORS_PREFIX + file.name, body, etag=False, last_modified=False
            )


class _DelayHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512
    bodies: Mapping[str, bytes]
    delay: float

    def server_bind(self) -> None:
        # HTTPServer.server_bind() does a reverse DNS lookup (getfqdn): skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _DelayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _DelayHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        time.sleep(self.server.delay)
        body = self.server.bodies.get(self.path.split("?", 1)[0])
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/xml; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)


class DelayServer:
    """Answers every GET after ``delay`` seconds, one thread per connection."""

    def __init__(self, bodies: Mapping[str, bytes], delay: float) -> None:
        self._httpd = _DelayHTTPServer(("127.0.0.1", 0), _DelayHandler)
        self._httpd.bodies = dict(bodies)
        self._httpd.delay = delay
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self.description = f"threaded delaying server ({delay * 1000:.0f} ms per answer)"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def floor(self, paths: Sequence[str], concurrency: int) -> float:
        """Seconds a minimal asyncio client takes to GET ``paths`` at ``concurrency``.

        What this server and machine allow at best, next to the theoretical ideal.
        """
        return asyncio.run(self._floor(paths, concurrency))

    async def _floor(self, paths: Sequence[str], concurrency: int) -> float:
        gate = asyncio.Semaphore(concurrency)

        async def get(path: str) -> None:
            async with gate:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                writer.write(request.encode("ascii"))
                await writer.drain()
                await reader.read()  # until the server closes the connection
                writer.close()

        started = time.perf_counter()
        await asyncio.gather(*(get(path) for path in paths))
        return time.perf_counter() - started


def make_server(choice: str, work: Path, base: Path) -> FeedServer:
    """nginx in a process of its own when installed (``choice`` "auto" or "nginx"),
    else the teaching server, serving ``base``."""
    binary = nginx_path()
    if choice == "nginx" and binary is None:
        raise SystemExit("--server nginx: nginx is not installed")
    if choice != "teaching" and binary is not None:
        server: FeedServer = NginxServer(work / "nginx", binary)
    else:
        server = TeachingFeedServer(base)
    server.show(base)
    return server
