"""Hostile HTTP over real connections on 127.0.0.1.

One ``signal fetch`` subprocess meets every misbehaving server of this module next to a
healthy source; each test checks one source of that run. Redirects towards private
addresses need an injected resolver, so they run in-process with ``run_fetch``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from _hostile import RSS_LIMIT, CliRun, rows, run_cli_fetch, write_config
from conftest import make_config
from scenario_server import ScenarioServer

from signal_feeds import run_fetch
from signal_feeds.demo.teaching_server import fixtures_dir
from signal_feeds.http.addresses import is_private_address
from signal_feeds.http.transport import SignalTransport

CAP = 2_000_000
DEADLINE = 3.0


class EndlessServer:
    """Answers every connection with a 200 that has no Content-Length and never ends;
    counts the body bytes it managed to send before the client hung up."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sent = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
                         b"Connection: close\r\n\r\n<rss version=\"2.0\"><channel><!--")
            chunk = b"x" * 65536
            try:
                while self.sent < 1 << 30:  # 1 GB: "the end" a full read would need
                    conn.sendall(chunk)
                    self.sent += len(chunk)
            except OSError:
                pass
        self.done.set()

    def close(self) -> None:
        self.sock.close()


@dataclass
class HttpRun:
    run: CliRun
    db: Path
    server: ScenarioServer
    endless: EndlessServer


@pytest.fixture(scope="module")
def http_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpRun]:
    tmp = tmp_path_factory.mktemp("hostile-http")
    endless = EndlessServer()
    with ScenarioServer() as server:
        demo = server.url("/feeds/demo-rss.xml")
        server.put("/as-html/feed.xml", (fixtures_dir() / "demo-rss.xml").read_bytes(),
                   content_type="text/html")
        sources = {
            "good": demo,
            "oversized": server.url("/scenario/oversized?size=50000000"),
            "endless": f"http://127.0.0.1:{endless.port}/feed.xml",
            "gzip-bomb": server.url("/scenario/gzip-bomb?size=32000000"),
            "trickle": server.url("/scenario/trickle?interval=1"),
            "reset": server.url("/scenario/reset"),
            "wrong-length": server.url("/scenario/wrong-length"),
            "redirect-loop": server.url("/scenario/redirect-loop"),
            "to-file": server.url("/scenario/redirect-to?location=file:///etc/passwd"),
            "to-javascript": server.url("/scenario/redirect-to?location=javascript:alert(1)"),
            "to-ftp": server.url("/scenario/redirect-to?location=ftp://127.0.0.1/feed.xml"),
            **{f"to-port-{port}": server.url(
                f"/scenario/redirect-to?location=http://127.0.0.1:{port}/x")
               for port in (65536, 99999, 0)},
            "html-type": server.url("/scenario/html"),
            "feed-as-html": server.url("/as-html/feed.xml"),
        }
        db = tmp / "signal.db"
        config = write_config(tmp / "signal.toml", db, sources, deadline=DEADLINE,
                              max_body_bytes=CAP)
        run = run_cli_fetch(config)
        endless.done.wait(5)
        yield HttpRun(run, db, server, endless)
    endless.close()


def _assert_nothing_written(db: Path, sid: str) -> None:
    assert rows(db, "SELECT count(*) FROM entries WHERE source_id = ?", sid) == [(0,)]
    (state,) = rows(db, "SELECT etag, last_modified, body_digest, error_count, last_error "
                        "FROM sources WHERE id = ?", sid)
    assert state[:3] == ("", "", "") and state[3] == 1 and state[4]


def test_run_is_bounded_and_the_healthy_source_is_stored(http_run: HttpRun) -> None:
    run = http_run.run
    assert run.peak_rss < RSS_LIMIT, f"peak RSS {run.peak_rss / 2**20:.0f} MB"
    assert run.seconds < DEADLINE + 15
    assert run.returncode == 1
    good = run.source("good")
    assert (good["status"], good["created"]) == ("fetched", 3), good
    assert rows(http_run.db, "SELECT count(*) FROM entries WHERE source_id = 'good'") == [(3,)]


@pytest.mark.parametrize(("sid", "reason"), [
    ("oversized", "Content-Length 50000000 is larger than the cap of 2000000 bytes"),
    ("endless", "body larger than the cap of 2000000 bytes"),
    ("gzip-bomb", "body larger than the cap of 2000000 bytes"),
    ("trickle", f"no complete response within the {DEADLINE:g} s deadline"),
    ("reset", "network error"),
    ("redirect-loop", "redirect loop at"),
    ("to-file", "redirect to a non-http(s) URL 'file:///etc/passwd' refused"),
    ("to-javascript", "redirect to a non-http(s) URL 'javascript:alert(1)' refused"),
    ("to-ftp", "redirect to a non-http(s) URL 'ftp://127.0.0.1/feed.xml' refused"),
    # The socket's OverflowError ended these in an internal error; port 0 was reported
    # as "connection refused by 127.0.0.1 port 80".
    ("to-port-65536", "redirect to an invalid URL 'http://127.0.0.1:65536/x'"),
    ("to-port-99999", "redirect to an invalid URL 'http://127.0.0.1:99999/x'"),
    ("to-port-0", "redirect to an invalid URL 'http://127.0.0.1:0/x'"),
])
def test_failure_is_reported_and_nothing_written(http_run: HttpRun, sid: str,
                                                 reason: str) -> None:
    rep = http_run.run.source(sid)
    assert rep["status"] == "failed", rep
    assert reason in rep["error"], rep["error"]
    assert "internal error" not in rep["error"]
    assert rep["duration_ms"] < (DEADLINE + 2) * 1000
    _assert_nothing_written(http_run.db, sid)


def test_a_whole_document_under_a_wrong_length_is_read(http_run: HttpRun) -> None:
    # The server announced 1,000 bytes more than it sent, then closed: what came is the
    # whole document (it failed the source, in httpx's words, before).
    rep = http_run.run.source("wrong-length")
    assert (rep["status"], rep["created"]) == ("fetched", 3), rep
    assert any(w.startswith("the connection closed before the end of the body (")
               for w in rep["warnings"]), rep["warnings"]


def test_download_stops_at_the_cap(http_run: HttpRun) -> None:
    # The endless body was abandoned near the cap (socket buffers add a few MB), not
    # read to its 1 GB end.
    assert http_run.endless.sent < CAP + 16 * 1024 * 1024
    # The declared length was refused before the body was read at all.
    assert http_run.server.bytes_sent("/scenario/oversized") < 50_000_000 // 4
    # A gzip bomb is small on the wire: the cap applies to the inflated bytes.
    (fetch,) = rows(http_run.db, "SELECT bytes FROM fetches WHERE source_id = 'gzip-bomb'")
    assert fetch[0] < CAP


def test_reset_message_says_what_happened(http_run: HttpRun) -> None:
    # A reset carries no text of its own; the report still says what happened.
    error = http_run.run.source("reset")["error"]
    kind, _, detail = error.partition(": ")[2].partition(": ")
    assert kind == "ReadError" and detail.strip(), error


def test_html_content_type(http_run: HttpRun) -> None:
    page = http_run.run.source("html-type")
    assert (page["status"], page["http_status"]) == ("rejected", 200), page
    assert "not an RSS or Atom feed" in page["error"]
    _assert_nothing_written(http_run.db, "html-type")
    # A real feed with a wrong Content-Type is read, with a warning.
    feed = http_run.run.source("feed-as-html")
    assert (feed["status"], feed["created"]) == ("fetched", 3), feed
    assert feed["warnings"]


# -- redirects towards private addresses --------------------------------------------------
#
# Every server here is on 127.0.0.1, so a "public" origin needs two seams: a resolver that
# sends the name "localhost" to the IPv4-mapped form of loopback (::ffff:127.0.0.1, which
# reaches the same server), and a classifier under which that mapped form counts as
# public (everything else keeps the real rule). A literal 127.0.0.1 in a redirect is
# refused before any connection; a name is checked by the network backend on the
# address it resolved, once, before connecting.

PUBLIC_STAND_IN = "::ffff:127.0.0.1"


def _resolver(table: dict[str, list[str]], calls: list[str] | None = None):  # type: ignore[no-untyped-def]
    async def resolve(host: str) -> list[str]:
        if calls is not None:
            calls.append(host)
        return table[host]
    return resolve


def _classify(address: str) -> bool:
    return address != PUBLIC_STAND_IN and is_private_address(address)


def _transport(table: dict[str, list[str]], calls: list[str] | None = None,
               connections: int = 10) -> SignalTransport:
    return SignalTransport(resolver=_resolver(table, calls), is_private=_classify,
                           connections=connections)


def _redirect_config(server: ScenarioServer, db: Path, target: str, **settings: object):  # type: ignore[no-untyped-def]
    origin = server.url(f"/scenario/redirect-to?location={target}").replace(
        "127.0.0.1", "localhost", 1)
    return make_config(db, {"public": origin, "control": server.url("/feeds/demo-atom.xml")},
                       **settings)


def test_redirect_from_public_to_loopback_is_refused(server: ScenarioServer,
                                                     db_path: Path) -> None:
    target = server.url("/feeds/demo-rss.xml")
    report = run_fetch(_redirect_config(server, db_path, target), force=True,
                       transport=_transport({"localhost": [PUBLIC_STAND_IN]}))
    rep = report.get("public")
    assert rep.status == "failed"
    assert "redirect from a public address to a private or loopback one (127.0.0.1)" \
        in rep.error
    assert len(server.requests_for("/scenario/redirect-to")) == 1  # the origin was reached
    assert server.requests_for("/feeds/demo-rss.xml") == []  # never requested
    assert report.get("control").status == "fetched"
    _assert_nothing_written(db_path, "public")


def test_check_is_made_on_the_resolved_address_before_connecting(
        server: ScenarioServer, db_path: Path) -> None:
    # The target's name looks harmless; it resolves (once) to a private address, and no
    # connection is attempted (10.1.2.3 is not routable here: trying would time out).
    target = "http://intranet.example:8080/feed.xml"
    calls: list[str] = []
    transport = _transport({"localhost": [PUBLIC_STAND_IN], "intranet.example": ["10.1.2.3"]},
                           calls)
    report = run_fetch(_redirect_config(server, db_path, target, deadline=5.0), force=True,
                       transport=transport)
    rep = report.get("public")
    assert "private or loopback one (intranet.example)" in rep.error, rep.error
    assert calls.count("intranet.example") == 1


def test_a_kept_alive_private_connection_is_checked_again(server: ScenarioServer,
                                                          db_path: Path) -> None:
    # "control", a private source, leaves a kept-alive connection to 127.0.0.1 under the
    # name "intranet.example"; the public source's redirect to that name must not ride on
    # it (the connection is reused without a new connect, so the check is on each request).
    intranet = server.url("/feeds/demo-atom.xml").replace("127.0.0.1", "intranet.example")
    target = intranet.replace("demo-atom", "demo-rss")
    origin = server.url(f"/scenario/redirect-to?location={target}").replace(
        "127.0.0.1", "localhost", 1)
    config = make_config(db_path, {"control": intranet, "public": origin}, concurrency=1)
    calls: list[str] = []
    transport = _transport({"localhost": [PUBLIC_STAND_IN], "intranet.example": ["127.0.0.1"]},
                           calls)
    report = run_fetch(config, force=True, transport=transport)
    assert report.get("control").status == "fetched"
    rep = report.get("public")
    assert rep.status == "failed" and "(intranet.example)" in rep.error, rep.error
    assert server.requests_for("/feeds/demo-rss.xml") == []
    assert calls.count("intranet.example") == 1  # one connection, kept alive, refused


def test_private_redirect_allowed_by_setting(server: ScenarioServer, db_path: Path) -> None:
    config = _redirect_config(server, db_path, server.url("/feeds/demo-rss.xml"),
                              allow_private_redirects=True)
    report = run_fetch(config, force=True,
                       transport=_transport({"localhost": [PUBLIC_STAND_IN]}))
    assert (report.get("public").status, report.get("public").created) == ("fetched", 3)


def test_private_source_may_redirect_to_private(server: ScenarioServer,
                                                db_path: Path) -> None:
    # The real rule: the source itself is on loopback, so its redirects may stay there.
    config = _redirect_config(server, db_path, server.url("/feeds/demo-rss.xml"))
    report = run_fetch(config, force=True, resolver=_resolver({"localhost": ["127.0.0.1"]}))
    assert report.get("public").status == "fetched"


@pytest.mark.parametrize("address", ["64:ff9b::a00:5", "64:ff9b::a9fe:a9fe", "64:ff9b:1::a00:5",
                                     "fec0::1", "2002:a00:1::1", "::127.0.0.1",
                                     "::ffff:0:10.0.0.1"])
def test_an_ipv6_address_that_leads_to_a_private_one_is_private(
        server: ScenarioServer, db_path: Path, address: str) -> None:
    # NAT64 (to 10.0.0.5, to the cloud metadata address 169.254.169.254), site-local, 6to4,
    # IPv4-compatible and IPv4-translated addresses counted as public: a redirect was let
    # through to them.
    def origin(target: str) -> str:
        return server.url(f"/scenario/redirect-to?location={target}").replace(
            "127.0.0.1", "localhost", 1)

    config = make_config(db_path, {"literal": origin(f"http://[{address}]/feed.xml"),
                                   "named": origin("http://inside.example/feed.xml")},
                         deadline=5.0)
    transport = _transport({"localhost": [PUBLIC_STAND_IN], "inside.example": [address]})
    report = run_fetch(config, force=True, transport=transport)
    for sid, host in (("literal", address), ("named", "inside.example")):
        rep = report.get(sid)
        assert rep.status == "failed", rep
        assert f"to a private or loopback one ({host}) refused" in rep.error, rep.error
    # What those addresses lead to when it is public stays public.
    assert not any(is_private_address(a) for a in (
        "64:ff9b::808:808", "64:ff9b:1::808:808", "2002:808:808::1", "2606:4700::1111",
        "::ffff:0:8.8.8.8"))
