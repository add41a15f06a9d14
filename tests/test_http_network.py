"""What only real sockets on 127.0.0.1 show about the httpx layer: proxies, international
names, resolver failures, the per-host limit across redirects, the deadline around name
resolution, and the async API inside a caller's own event loop."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer, ScriptedResponse
from threaded_socket import serve_connections

import signal_feeds
from signal_feeds import run_fetch
from signal_feeds.cli.commands import cli

FEED = (FIXTURES / "demo-rss.xml").read_bytes()


class ForwardingProxy:
    """A plain-HTTP forwarding proxy: reads an absolute-form request, records its target,
    sends it on in origin form with ``Connection: close`` and relays the answer."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        self.proxy_auth: list[str] = []  # each request's Proxy-Authorization, '' if none
        self.sock = serve_connections(self._serve)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            request_line, *header_lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
            method, target, version = request_line.decode("latin-1").split(" ")
            self.targets.append(target)
            self.proxy_auth.append(next(
                (line.split(b":", 1)[1].strip().decode("latin-1") for line in header_lines
                 if line.lower().startswith(b"proxy-authorization:")), ""))
            parts = urlsplit(target)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            kept = [line for line in header_lines
                    if not line.lower().startswith((b"connection:", b"proxy-"))]
            upstream_head = b"\r\n".join(
                [f"{method} {path} {version}".encode(), *kept, b"Connection: close"])
            with socket.create_connection((parts.hostname, parts.port or 80)) as upstream:
                upstream.sendall(upstream_head + b"\r\n\r\n")
                while data := upstream.recv(65536):
                    conn.sendall(data)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def proxy() -> Iterator[ForwardingProxy]:
    server = ForwardingProxy()
    yield server
    server.close()


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.usefixtures("no_proxy_env")
def test_http_proxy_from_the_environment(server: ScenarioServer, proxy: ForwardingProxy,
                                         db_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    url = server.url("/feeds/demo-rss.xml")
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    rep = run_fetch(make_config(db_path, {"s": url}), force=True).get("s")
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert proxy.targets == [url]  # absolute form: the proxy was asked for the feed
    assert "signal" in (server.requests_for("/feeds/demo-rss.xml")[0].header("User-Agent")
                        or "").lower()


@pytest.mark.usefixtures("no_proxy_env")
def test_a_proxys_credentials_go_to_the_proxy_only(server: ScenarioServer,
                                                   proxy: ForwardingProxy, db_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The README's one exception to "no credentials are sent": the proxy's own, to it.
    url = server.url("/feeds/demo-rss.xml")
    with_user = proxy.url.replace("http://", "http://feeds:s3cret@")
    monkeypatch.setenv("HTTP_PROXY", with_user)
    rep = run_fetch(make_config(db_path, {"s": url}), force=True).get("s")
    assert rep.status == "fetched" and proxy.targets == [url], rep
    assert proxy.proxy_auth == ["Basic " + base64.b64encode(b"feeds:s3cret").decode()]
    sent = server.requests_for("/feeds/demo-rss.xml")[0]
    assert sent.header("Proxy-Authorization") is None and sent.header("Authorization") is None


@pytest.mark.usefixtures("no_proxy_env")
def test_no_proxy_bypasses_the_proxy(server: ScenarioServer, proxy: ForwardingProxy,
                                     db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "example.org,127.0.0.1")
    rep = run_fetch(make_config(db_path, {"s": server.url("/feeds/demo-rss.xml")}),
                    force=True).get("s")
    assert rep.status == "fetched" and proxy.targets == []


@pytest.mark.usefixtures("no_proxy_env")
def test_proxy_setting_overrides_the_environment(server: ScenarioServer,
                                                 proxy: ForwardingProxy, db_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    url = server.url("/feeds/demo-atom.xml")
    rep = run_fetch(make_config(db_path, {"s": url}, proxy=proxy.url), force=True).get("s")
    assert rep.status == "fetched" and proxy.targets == [url]
    # "direct" turns a proxy in the environment off.
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    rep = run_fetch(make_config(db_path, {"s": url}, proxy="direct"), force=True).get("s")
    assert rep.status in ("fetched", "not_modified") and proxy.targets == [url]


@pytest.mark.usefixtures("no_proxy_env")
def test_a_socks_proxy_in_the_environment_is_refused_by_name(
        server: ScenarioServer, db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ALL_PROXY=socks5://... is common; httpcore's HTTP proxy would speak HTTP to it.
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    try:
        port = listener.getsockname()[1]
        monkeypatch.setenv("ALL_PROXY", f"socks5://someone:secret@127.0.0.1:{port}")
        rep = run_fetch(make_config(db_path, {"s": server.url("/feeds/demo-rss.xml")}),
                        force=True).get("s")
        assert rep.status == "failed"
        assert rep.error == (f"proxy error: proxy socks5://127.0.0.1:{port} is not "
                             "supported: only http:// and https:// proxies are (see the "
                             "proxy setting)"), rep.error
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing was sent to the SOCKS port
    finally:
        listener.close()


@pytest.mark.usefixtures("no_proxy_env")
def test_an_unreachable_proxy_is_named_without_its_credentials(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]  # closed below: nobody listens there
    monkeypatch.setenv("HTTP_PROXY", f"http://someone:secret@127.0.0.1:{port}")
    rep = run_fetch(make_config(db_path, {"s": "http://feeds.example/feed.xml"}),
                    force=True).get("s")
    assert rep.status == "failed"
    assert rep.error.startswith(f"cannot connect: proxy http://127.0.0.1:{port}: "), rep.error
    assert "secret" not in rep.error and "feeds.example" not in rep.error


def test_a_refused_connection_is_said_in_words(db_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]  # closed below: nobody listens there
    rep = run_fetch(make_config(db_path, {"s": f"http://127.0.0.1:{port}/feed.xml"}),
                    force=True).get("s")
    # It was "cannot connect: [Errno 111] Connect call failed ('127.0.0.1', PORT)".
    assert (rep.status, rep.error) == (
        "failed", f"cannot connect: connection refused by 127.0.0.1 port {port} "
                  "(no server listens there)")


@pytest.mark.parametrize(("text", "said"), [
    ("Multiple exceptions: [Errno 111] Connect call failed ('::1', 8080, 0, 0), "
     "[Errno 111] Connect call failed ('127.0.0.1', 8080)",
     "connection refused by ::1 port 8080 and 127.0.0.1 port 8080 (no server listens there)"),
    ("proxy http://127.0.0.1:3128: [Errno 111] Connect call failed ('127.0.0.1', 3128)",
     "proxy http://127.0.0.1:3128: connection refused by 127.0.0.1 port 3128 "
     "(no server listens there)"),
    ("[Errno 113] Connect call failed ('192.0.2.7', 443)", "no route to host 192.0.2.7 port 443"),
    # Different failures, or one without words here: as asyncio said it.
    ("Multiple exceptions: [Errno 101] Connect call failed ('::1', 80, 0, 0), "
     "[Errno 111] Connect call failed ('127.0.0.1', 80)", None),
    ("[Errno 99] Connect call failed ('::1', 80, 0, 0)", None),
    ("All connection attempts failed", None),
])
def test_connect_failures_in_words(text: str, said: str | None) -> None:
    from signal_feeds.http.fetch import _in_words

    assert _in_words(text) == (text if said is None else said)


def test_proxy_setting_is_validated() -> None:
    with pytest.raises(signal_feeds.ConfigError,
                       match=r"\[settings\]: proxy: must be an http:// or https://"):
        signal_feeds.parse_config('[settings]\nproxy = "socks5://127.0.0.1:1080"\n')
    config = signal_feeds.parse_config('[settings]\nproxy = "http://proxy.internal:3128"\n')
    assert config.settings.proxy == "http://proxy.internal:3128"


def test_an_international_name_goes_out_in_idna(server: ScenarioServer, db_path: Path
                                                ) -> None:
    asked: list[str] = []

    async def resolve(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    port = urlsplit(server.base_url).port
    url = f"http://bücher.example:{port}/feeds/demo-rss.xml"
    rep = run_fetch(make_config(db_path, {"idn": url}), force=True, resolver=resolve).get("idn")
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert asked == ["xn--bcher-kva.example"]
    (request,) = server.requests_for("/feeds/demo-rss.xml")
    assert request.header("Host") == f"xn--bcher-kva.example:{port}"


def test_a_move_to_a_location_with_spaces_names_an_address_the_list_accepts(
        server: ScenarioServer, db_path: Path) -> None:
    # A server sent "Location: /actualités/flux été.xml" in raw UTF-8: the feed was
    # fetched, but "moved to .../flux été.xml", pasted into signal.toml as the report
    # asks, was refused there ("URL contains whitespace").
    server.put("/actualit%C3%A9s/flux%20%C3%A9t%C3%A9.xml", FEED)
    server.script("/old.xml", [ScriptedResponse(status=301, headers=(
        ("Location", "actualités/flux été.xml"),))])
    rep = run_fetch(make_config(db_path, {"moved": server.url("/old.xml")}),
                    force=True).get("moved")
    assert (rep.status, rep.created) == ("moved", 3), rep
    assert rep.moved_to == server.url("/actualités/flux%20été.xml")
    signal_feeds.parse_config(f'[[sources]]\nid = "moved"\nurl = "{rep.moved_to}"\n')
    (request,) = server.requests_for("/actualit%C3%A9s/flux%20%C3%A9t%C3%A9.xml")
    assert request.path == "/actualit%C3%A9s/flux%20%C3%A9t%C3%A9.xml"


def test_a_64_character_label_is_a_clear_error(db_path: Path, server: ScenarioServer) -> None:
    host = "a" * 64 + ".example"
    # Found when the list is read now, rather than failing the source on every run.
    with pytest.raises(signal_feeds.ConfigError, match="DNS allows 63"):
        signal_feeds.parse_config(
            f'[settings]\ndatabase = "{db_path}"\n\n[[sources]]\nid = "long"\n'
            f'url = "https://{host}/feed.xml"\n')
    # A redirect can still lead there: the source fails with a clear reason.
    hop = server.url(f"/scenario/redirect-to?status=302&location=http://{host}/feed.xml")
    config = signal_feeds.parse_config(
        f'[settings]\ndatabase = "{db_path}"\n\n[[sources]]\nid = "long"\n'
        f'url = "{hop}"\n')
    rep = run_fetch(config, force=True).get("long")  # the system resolver
    assert rep.status == "failed"
    assert rep.error.startswith(f"cannot connect: cannot resolve host '{host}'"), rep.error
    assert "internal error" not in rep.error


class _CountingHandler(BaseHTTPRequestHandler):
    """``/hop/N`` redirects to ``http://final.example:PORT/feed/N``; ``/feed/N`` answers
    after a pause. Counts requests in flight by ``Host``."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        host = (self.headers.get("Host") or "").split(":")[0]
        cls = type(self)
        with cls.lock:
            cls.in_flight[host] = cls.in_flight.get(host, 0) + 1
            cls.peak[host] = max(cls.peak.get(host, 0), cls.in_flight[host])
        try:
            if self.path.startswith("/hop/"):
                port = self.server.server_address[1]
                target = f"http://final.example:{port}/feed/{self.path.rsplit('/', 1)[1]}"
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            time.sleep(0.3)  # long enough for every source to be waiting at once
            self.send_response(200)
            self.send_header("Content-Type", "application/rss+xml")
            self.send_header("Content-Length", str(len(FEED)))
            self.end_headers()
            self.wfile.write(FEED)
        finally:
            with cls.lock:
                cls.in_flight[host] -= 1

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def _served(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """A threading server of ``handler`` on 127.0.0.1; yields its port."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


async def _loopback(host: str) -> list[str]:
    """A resolver that sends every name to 127.0.0.1."""
    return ["127.0.0.1"]


def _all_fetched(db_path: Path, handler: type[BaseHTTPRequestHandler],
                 sources: dict[str, str], **settings: object) -> None:
    """A forced run over ``sources`` (URLs with ``{port}``), served by ``handler`` with
    every name resolved to it, in which every source is fetched."""
    with _served(handler) as port:
        urls = {sid: url.format(port=port) for sid, url in sources.items()}
        report = run_fetch(make_config(db_path, urls, **settings), force=True,
                           resolver=_loopback)
    assert {r.source: r.status for r in report.sources} == dict.fromkeys(
        urls, "fetched"), report.sources


def test_per_host_counts_every_hop(db_path: Path) -> None:
    sources = {f"s{i}": f"http://h{i}.example:{{port}}/hop/{i}" for i in range(8)}
    _all_fetched(db_path, _CountingHandler, sources, per_host=2, concurrency=8)
    assert _CountingHandler.peak["final.example"] == 2


def test_redirects_never_wait_for_a_host_while_holding_a_run_slot(db_path: Path) -> None:
    # Two sources redirect to final.example and hold both run slots; two sources of
    # final.example itself hold its one slot and wait for a run slot. The redirected
    # requests used to wait for final.example's slot with their run slots held: nothing
    # moved until the deadline failed them ("no complete response within ...").
    _CountingHandler.peak.clear()
    sources = {"r0": "http://h0.example:{port}/hop/0", "r1": "http://h1.example:{port}/hop/1",
               "d0": "http://final.example:{port}/feed/d0",
               "d1": "http://final.example:{port}/feed/d1"}
    _all_fetched(db_path, _CountingHandler, sources, per_host=1, concurrency=2, deadline=8.0)
    assert _CountingHandler.peak["final.example"] == 1


class _QueueHandler(BaseHTTPRequestHandler):
    """``/hop/N`` redirects to ``final.example``'s ``/feed/r``; ``/feed/d`` takes 1 s,
    ``/feed/r`` 1.5 s, ``/slow/N`` 3 s."""

    protocol_version = "HTTP/1.1"
    pauses = {"/feed/d": 1.0, "/feed/r": 1.5}

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if self.path.startswith("/hop/"):
            self.send_response(302)
            self.send_header("Location",
                             f"http://final.example:{self.server.server_address[1]}/feed/r")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        time.sleep(3.0 if self.path.startswith("/slow/") else self.pauses[self.path])
        self.send_response(200)
        self.send_header("Content-Type", "application/rss+xml")
        self.send_header("Content-Length", str(len(FEED)))
        self.end_headers()
        self.wfile.write(FEED)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_taking_the_run_slot_back_after_a_hop_is_not_counted_by_the_deadline(
        db_path: Path) -> None:
    # r's redirect waits for final.example's slot (d holds it for 1 s) and gives its run
    # slot to o0 meanwhile; taking it back, it queues behind o1 until o0's 3 s are
    # over. Counted by its 4 s deadline, that queue failed r, whose own exchange (the
    # wait for the host, both hops) takes about 2.5 s.
    sources = {"d": "http://final.example:{port}/feed/d", "r": "http://h0.example:{port}/hop/0",
               "o0": "http://o0.example:{port}/slow/0", "o1": "http://o1.example:{port}/slow/1"}
    _all_fetched(db_path, _QueueHandler, sources, per_host=1, concurrency=2, deadline=4.0)


class _Besides:
    """A stand-in for what a request holds besides its host slot, with a log."""

    def __init__(self) -> None:
        self.held = True
        self.log: list[str] = []

    def give_back(self) -> None:
        self.held = False
        self.log.append("give back")

    async def take(self) -> None:
        self.held = True
        self.log.append("take")


def test_a_hop_gives_back_what_it_holds_only_while_it_waits() -> None:
    from signal_feeds.http.slots import HostSlots

    async def main() -> None:
        slots = HostSlots(1)
        free, busy = _Besides(), _Besides()
        async with slots.hold("a.example", besides=free) as hold:
            await hold.move_to("b.example")  # b's slot is free: nothing given back
            assert free.log == [] and free.held
        async with slots.hold("busy.example") as holder:
            async with slots.hold("a.example", besides=busy) as hold:
                moving = asyncio.ensure_future(hold.move_to("busy.example"))
                await asyncio.sleep(0.01)
                assert busy.log == ["give back"] and not moving.done()
                await holder.move_to("elsewhere.example")  # busy.example's slot is free
                await moving
                assert busy.log == ["give back", "take"] and busy.held
                assert hold.host == "busy.example"
            cancelled = _Besides()
            async with slots.hold("c.example", besides=cancelled) as hold:
                waiting = asyncio.ensure_future(hold.move_to("elsewhere.example"))
                await asyncio.sleep(0.01)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                # Given back, not taken again: the request's own cleanup finds it free.
                assert cancelled.log == ["give back"] and not cancelled.held

    asyncio.run(main())


def test_a_slow_resolver_is_inside_the_deadline(db_path: Path) -> None:
    events: list[str] = []

    async def slow(host: str) -> list[str]:
        events.append(f"start {host}")
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            events.append(f"cancelled {host}")
            raise
        events.append(f"answered {host}")
        return ["127.0.0.1"]

    sources = {f"s{i}": f"http://slow{i}.example/feed.xml" for i in range(3)}
    report = run_fetch(make_config(db_path, sources, deadline=1.0, concurrency=3),
                       force=True, resolver=slow)
    for rep in report.sources:
        assert rep.status == "failed"
        assert rep.error == "no complete response within the 1 s deadline", rep.error
    # Concurrent, not one after another: every lookup had started before the first was
    # cut off by its deadline, and none ran to its end.
    assert [e.split()[0] for e in events] == ["start"] * 3 + ["cancelled"] * 3, events


def test_the_async_api_runs_in_the_callers_loop(server: ScenarioServer, tmp_path: Path
                                                ) -> None:
    feeds = {"rss": server.url("/feeds/demo-rss.xml"),
             "atom": server.url("/feeds/demo-atom.xml")}

    async def main() -> list[signal_feeds.RunReport]:
        # Two runs at once in one loop: fetch_sources never starts a loop of its own.
        return list(await asyncio.gather(
            signal_feeds.fetch_sources(make_config(tmp_path / "a.db", feeds), force=True),
            signal_feeds.fetch_sources(make_config(tmp_path / "b.db", feeds), force=True)))

    for report in asyncio.run(main()):
        assert {(r.source, r.status, r.created) for r in report.sources} == {
            ("rss", "fetched", 3), ("atom", "fetched", 2)}


@pytest.mark.parametrize("value", ["http://127.0.0.1:99999", "http://someone:secret@[bad:3128",
                                   "http://:3128", "http://proxy.internal:0",
                                   # "#" ends the host part: "se" read as the port.
                                   "http://someone:se#cret@proxy.internal:3128"])
def test_a_malformed_proxy_url_is_a_setup_error_that_names_it(
        value: str, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # HTTP_PROXY=http://127.0.0.1:99999 (a typo) was "internal error: OverflowError:
    # connect(): port must be 0-65535." with a traceback for every source; '[bad' was
    # looked up in DNS as '%5Bbad', an empty host as ''. The proxy setting let them by.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with pytest.raises(signal_feeds.ConfigError, match=r"\[settings\]: proxy: ") as caught:
        signal_feeds.parse_config(f'[settings]\nproxy = "{value}"\n')
    assert "secret" not in str(caught.value) and "cret" not in str(caught.value)

    monkeypatch.setenv("https_proxy", value)
    config = make_config(db_path, {"s": "https://feeds.example/feed.xml"})
    with pytest.raises(signal_feeds.ConfigError) as caught:
        run_fetch(config, force=True)
    message = str(caught.value)
    assert message.startswith("https_proxy="), message
    assert "not a usable proxy URL" in message, message
    assert "secret" not in message and "'se'" not in message and "cret" not in message
    toml = tmp_path / "signal.toml"
    toml.write_text(f'[settings]\ndatabase = "{db_path}"\n[[sources]]\nid = "s"\n'
                    'url = "https://feeds.example/feed.xml"\n')
    result = CliRunner().invoke(cli, ["fetch", "--config", str(toml), "--force"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"signal: error: {message}"


@pytest.mark.usefixtures("no_proxy_env")
def test_what_a_proxy_answers_or_drops_is_said_to_come_from_it(
        db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "proxy error: 407 Proxy Authentication Required" and "network error:
    # RemoteProtocolError: Server disconnected without sending a response." named no
    # proxy: the operator looked at the feed's server, which was never reached.
    def refuse_connect(conn: socket.socket) -> None:
        with conn:
            head = conn.recv(65536)
            if head.startswith(b"CONNECT "):
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                             b"Proxy-Authenticate: Basic realm=\"corp\"\r\n"
                             b"Content-Length: 0\r\n\r\n")
            # A plain request is dropped without an answer.

    proxy = serve_connections(refuse_connect)
    try:
        port = proxy.getsockname()[1]
        monkeypatch.setenv("ALL_PROXY", f"http://someone:secret@127.0.0.1:{port}")
        report = run_fetch(make_config(db_path, {"tls": "https://feeds.example/feed.xml",
                                                 "plain": "http://feeds.example/feed.xml"}),
                           force=True)
    finally:
        proxy.close()
    tls, plain = report.get("tls"), report.get("plain")
    assert (tls.status, tls.error) == (
        "failed", f"proxy error: proxy http://127.0.0.1:{port}: 407 Proxy Authentication "
                  "Required"), tls.error
    assert plain.status == "failed"
    assert plain.error == ("network error: RemoteProtocolError: through proxy "
                           f"http://127.0.0.1:{port}: Server disconnected without sending "
                           "a response."), plain.error


@pytest.mark.usefixtures("no_proxy_env")
def test_no_proxy_names_a_host_in_either_spelling(server: ScenarioServer, proxy: ForwardingProxy,
                                                  db_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # NO_PROXY=xn--bcher-kva.example (the form a shell's ASCII environment holds) did not
    # match the source https://bücher.example/...: its request went through the proxy.
    async def resolve(host: str) -> list[str]:
        return ["127.0.0.1"]

    port = urlsplit(server.base_url).port
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    for no_proxy, url in (("xn--bcher-kva.example", f"http://bücher.example:{port}/feeds/"),
                          ("bücher.example", f"http://xn--bcher-kva.example:{port}/feeds/"),
                          # IDNA 2003 made faß.example fass.example: no match either.
                          ("xn--fa-hia.example", f"http://faß.example:{port}/feeds/")):
        monkeypatch.setenv("NO_PROXY", no_proxy)
        rep = run_fetch(make_config(db_path, {"idn": url + "demo-rss.xml"}), force=True,
                        resolver=resolve).get("idn")
        assert rep.status in ("fetched", "not_modified"), rep
    assert proxy.targets == []


@pytest.mark.usefixtures("no_proxy_env")
def test_no_proxy_names_an_ipv6_address_with_its_port(proxy: ForwardingProxy, db_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # "[::1]:PORT", the way a URL writes it, was taken for the name "::1]:PORT".
    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
                                 b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                                 % (len(FEED), FEED))

    threading.Thread(target=answer, daemon=True).start()
    port = listener.getsockname()[1]
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", f"[::1]:{port}")
        rep = run_fetch(make_config(db_path, {"v6": f"http://[::1]:{port}/feed.xml"}),
                        force=True).get("v6")
    finally:
        listener.close()
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert proxy.targets == []


def test_an_international_name_that_does_not_resolve_is_shown_as_written(
        db_path: Path) -> None:
    # It was "cannot resolve host 'xn--bcher-kva.example'": a name the source list
    # does not hold, so a search of signal.toml for it found nothing.
    async def resolve(host: str) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    rep = run_fetch(make_config(db_path, {"idn": "http://bücher.example/feed.xml"}),
                    force=True, resolver=resolve).get("idn")
    assert (rep.status, rep.error) == (
        "failed", "cannot connect: cannot resolve host 'bücher.example' (sent as "
                  "xn--bcher-kva.example): Name or service not known")
    # A name IDNA 2003 could not read back (it maps ß to ss) was shown as sent only.
    rep = run_fetch(make_config(db_path, {"idn": "http://faß.example/feed.xml"}),
                    force=True, resolver=resolve).get("idn")
    assert rep.error == ("cannot connect: cannot resolve host 'faß.example' (sent as "
                         "xn--fa-hia.example): Name or service not known")
