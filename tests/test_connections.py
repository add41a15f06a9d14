"""The httpx layer under the fetcher, against real servers on 127.0.0.1: keep-alive,
a kept-alive connection the server has dropped, chunked and compressed bodies, 1xx
responses, and TLS (certifi by default, a CA of the caller's through ``ssl_context``)."""

from __future__ import annotations

import datetime as dt
import gzip
import socket
import ssl
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, make_config
from scenario_server import ScenarioServer
from threaded_socket import serve_connections

from signal_feeds import Store, run_fetch
from signal_feeds.cli.commands import cli
from signal_feeds.errors import ConfigError

FEED = (FIXTURES / "demo-rss.xml").read_bytes()

Answer = Callable[[bytes], tuple[bytes, bool]]  # request head -> (response, close after)


class RawServer:
    """A threaded server that reads one request head at a time and writes what
    ``answer`` returns, byte for byte; counts connections and requests."""

    def __init__(self, answer: Answer, *, tls: ssl.SSLContext | None = None) -> None:
        self.answer = answer
        self.tls = tls
        self.connections = 0
        self.requests = 0
        self.lock = threading.Lock()
        self.sock = serve_connections(self._serve, accepted=self._accepted)
        self.port = self.sock.getsockname()[1]

    def _accepted(self) -> None:
        with self.lock:
            self.connections += 1

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            buffer = b""
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                with self.lock:
                    self.requests += 1
                response, close = self.answer(head)
                conn.sendall(response)
                if close:
                    return
        except OSError:
            return
        finally:
            conn.close()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{host}:{self.port}{path}"

    def close(self) -> None:
        self.sock.close()


def ok(body: bytes, *extra: str) -> bytes:
    headers = ["HTTP/1.1 200 OK", "Content-Type: application/rss+xml",
               f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body


@pytest.fixture
def raw() -> Iterator[Callable[..., RawServer]]:
    servers: list[RawServer] = []

    def start(answer: Answer, **kwargs: object) -> RawServer:
        server = RawServer(answer, **kwargs)  # type: ignore[arg-type]
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def test_sources_on_one_host_share_kept_alive_connections(raw: Callable[..., RawServer],
                                                          db_path: Path) -> None:
    server = raw(lambda head: (ok(FEED), False))
    sources = {f"s{i}": server.url(f"/feed/{i}.xml") for i in range(12)}
    report = run_fetch(make_config(db_path, sources, per_host=2), force=True)
    assert [s.status for s in report.sources] == ["fetched"] * 12
    assert server.requests == 12 and server.connections <= 2


def test_a_connection_the_server_dropped_while_idle_is_replaced(
        raw: Callable[..., RawServer], db_path: Path) -> None:
    # The server closes every connection after one answer without saying so (as one
    # does when its keep-alive timeout expires): the next GET on it fails at once and
    # goes again on a new connection.
    server = raw(lambda head: (ok(FEED), True))
    sources = {f"s{i}": server.url(f"/feed/{i}.xml") for i in range(5)}
    report = run_fetch(make_config(db_path, sources, per_host=1, concurrency=1), force=True)
    assert [s.status for s in report.sources] == ["fetched"] * 5, report.sources
    assert server.connections >= 5


class _OneAnswerPerConnection:
    """Answers the first request on each connection and keeps it open; a second request
    on the same connection is met by a close (FIN) or a reset (RST) and no answer: a
    server whose keep-alive timeout ran out just as the request went out, every time."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.answered = 0
        self.dropped = 0
        self.lock = threading.Lock()
        self.sock = serve_connections(self._serve)
        self.port = self.sock.getsockname()[1]

    def _read_head(self, conn: socket.socket, buffer: bytes) -> bytes | None:
        while b"\r\n\r\n" not in buffer:
            data = conn.recv(65536)
            if not data:
                return None
            buffer += data
        return buffer.partition(b"\r\n\r\n")[2]

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            rest = self._read_head(conn, b"")
            if rest is None:
                return
            conn.sendall(ok(FEED))
            with self.lock:
                self.answered += 1
            if self._read_head(conn, rest) is None:
                return
            with self.lock:
                self.dropped += 1
            if self.how == "reset":
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("via", ["direct", "proxy"])
@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_kept_alive_connection_closed_as_the_request_goes_out_is_asked_again(
        db_path: Path, how: str, via: str) -> None:
    # The race behind the test above, made certain: the connection looks idle and open
    # when it is reused, and the server drops it on the request. A GET that got no byte
    # of an answer goes again on a new connection instead of failing the source. The
    # same holds for the connection to a proxy (whose idle timeout is often shorter than
    # a server's): the server, taken as the proxy, answers absolute-form requests alike.
    server = _OneAnswerPerConnection(how)
    try:
        here = f"http://127.0.0.1:{server.port}"
        host, proxy = ("http://feeds.invalid", here) if via == "proxy" else (here, "")
        sources = {f"s{i}": f"{host}/feed/{i}.xml" for i in range(3)}
        report = run_fetch(make_config(db_path, sources, per_host=1, concurrency=1,
                                       proxy=proxy), force=True)
        assert [(s.status, s.error) for s in report.sources] == [("fetched", None)] * 3
        assert (server.answered, server.dropped) == (3, 2)
    finally:
        server.close()


def test_chunked_gzip_body_and_informational_responses(raw: Callable[..., RawServer],
                                                       db_path: Path) -> None:
    packed = gzip.compress(FEED)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(packed[i:i + 100]), packed[i:i + 100])
                      for i in range(0, len(packed), 100))
    response = (b"HTTP/1.1 100 Continue\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
                b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
                b"ETag: \"v1\"\r\n\r\n" + chunks + b"0\r\n\r\n")
    server = raw(lambda head: (response, False))
    report = run_fetch(make_config(db_path, {"chunked": server.url("/feed.xml")}), force=True)
    rep = report.get("chunked")
    assert (rep.status, rep.created) == ("fetched", 3), rep


@pytest.mark.parametrize(("header", "body"), [
    # An .xml.gz served as the file itself, or stored compressed without its encoding.
    ("", gzip.compress(FEED)),
    # Compressed twice: once by the application, once more by the server.
    ("Content-Encoding: gzip", gzip.compress(gzip.compress(FEED))),
])
def test_a_body_compressed_once_more_than_it_says_is_read(
        raw: Callable[..., RawServer], db_path: Path, header: str, body: bytes) -> None:
    server = raw(lambda _head: (ok(body, *([header] if header else [])), False))
    rep = run_fetch(make_config(db_path, {"gz": server.url("/feed.xml")}),
                    force=True).get("gz")
    assert (rep.status, rep.created) == ("fetched", 3), rep


@pytest.mark.parametrize(("encoding", "body"), [
    # Codings listed in the order they were applied (RFC 9110 8.4): undone last first.
    ("gzip, gzip", gzip.compress(gzip.compress(FEED))),
    ("deflate, gzip", gzip.compress(zlib.compress(FEED))),
    ("gzip,x-gzip", gzip.compress(gzip.compress(FEED))),
    # Said twice, done once: the inner layer is a document already.
    ("gzip, gzip", gzip.compress(FEED)),
])
def test_a_body_with_several_codings_is_decoded_in_turn(
        raw: Callable[..., RawServer], db_path: Path, encoding: str, body: bytes) -> None:
    # "gzip, gzip" was refused as an unsupported Content-Encoding.
    server = raw(lambda _head: (ok(body, f"Content-Encoding: {encoding}"), False))
    rep = run_fetch(make_config(db_path, {"twice": server.url("/feed.xml")}),
                    force=True).get("twice")
    assert (rep.status, rep.created) == ("fetched", 3), rep


def test_every_coding_of_a_body_is_decoded_under_the_cap() -> None:
    from signal_feeds.errors import FetchError
    from signal_feeds.http.decoding import CappedDecoder

    decoder = CappedDecoder("gzip, gzip", 10_000)
    decoder.feed(gzip.compress(gzip.compress(b"<" * 1_000_000)))  # the outer layer fits
    with pytest.raises(FetchError) as caught:
        decoder.finish()
    assert caught.value.reason == "too_large"


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "br", "utf-8"])
def test_a_body_labelled_compressed_that_is_not_is_read_with_a_warning(
        raw: Callable[..., RawServer], db_path: Path, encoding: str) -> None:
    # A misconfigured server or cache labels a body it never compressed (or names its
    # charset as a coding); it failed with "corrupt compressed body: ... incorrect header
    # check" or "unsupported Content-Encoding".
    server = raw(lambda _head: (ok(FEED, f"Content-Encoding: {encoding}"), False))
    rep = run_fetch(make_config(db_path, {"plain": server.url("/feed.xml")}),
                    force=True).get("plain")
    assert (rep.status, rep.created) == ("fetched", 3), rep
    assert (f"the body was labelled Content-Encoding: {encoding} but was not compressed: "
            "read as it came") in rep.warnings


@pytest.mark.parametrize(("encoding", "error"), [
    ("gzip", "corrupt compressed body: Error -3 while decompressing data: incorrect header "
             "check"),
    ("br", "unsupported Content-Encoding 'br'"),
])
def test_a_labelled_body_that_is_neither_compressed_nor_a_document_still_fails(
        raw: Callable[..., RawServer], db_path: Path, encoding: str, error: str) -> None:
    server = raw(lambda _head: (ok(b"\x00\x01 not a feed", f"Content-Encoding: {encoding}"),
                                False))
    rep = run_fetch(make_config(db_path, {"junk": server.url("/feed.xml")}),
                    force=True).get("junk")
    assert (rep.status, rep.error) == ("failed", error)


def test_the_decoder_sees_the_whole_start_of_the_body_however_it_is_cut() -> None:
    from signal_feeds.http.decoding import CappedDecoder

    raw_deflate = zlib.compressobj(wbits=-15)
    for encoding, body in [("gzip", FEED), ("deflate", FEED), ("gzip", gzip.compress(FEED)),
                           ("deflate", raw_deflate.compress(FEED) + raw_deflate.flush())]:
        decoder = CappedDecoder(encoding, 10_000_000)
        for i in range(0, len(body), 1):  # one byte at a time
            decoder.feed(body[i:i + 1])
        assert bytes(decoder.out) == FEED
        assert decoder.uncompressed == (body is FEED)


#: FEED up to the third entry's description: two whole entries and part of a third.
_CUT_FEED = FEED[:FEED.index("<description>Приглашаем".encode())]


def _gzip_without_its_end(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=31)  # a gzip member, flushed but never finished
    return packer.compress(data) + packer.flush(zlib.Z_SYNC_FLUSH)


_ETAG = 'ETag: "v1"\r\nLast-Modified: Mon, 02 Mar 2026 10:00:00 GMT'


def _cut_then_whole(response: bytes, heads: list[bytes]) -> Answer:
    """``response`` first; then the whole document, or a 304 if asked with the cut one's
    ETag. Every request head goes to ``heads``."""
    def answer(head: bytes) -> tuple[bytes, bool]:
        heads.append(head)
        if len(heads) == 1:
            return response, True
        if b'If-None-Match: "v1"' in head:
            return b'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\n\r\n', False
        return ok(FEED, 'ETag: "v1"'), False

    return answer


@pytest.mark.parametrize("response", [
    # A gzip stream that stops early (a cache kept part of it): the message is whole as
    # HTTP sees it, and httpx gives what the stream held.
    ok(_gzip_without_its_end(_CUT_FEED), "Content-Encoding: gzip", _ETAG),
    # A body delimited by the connection's close, which came early.
    ("HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\nConnection: close\r\n"
     f"{_ETAG}\r\n\r\n").encode() + _CUT_FEED,
    # The connection closed before the length it announced: httpx raised, and the
    # source failed with nothing stored.
    ("HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
     f"Content-Length: {len(FEED)}\r\n{_ETAG}\r\n\r\n").encode() + _CUT_FEED,
    # The same with chunks, the last never sent.
    ("HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
     f"Transfer-Encoding: chunked\r\n{_ETAG}\r\n\r\n").encode()
    + f"{len(_CUT_FEED):x}\r\n".encode() + _CUT_FEED + b"\r\n",
], ids=["gzip-stream-cut", "close-delimited-cut", "shorter-than-its-length", "chunks-cut"])
def test_a_body_cut_short_stores_only_whole_entries(raw: Callable[..., RawServer],
                                                    db_path: Path, response: bytes) -> None:
    heads: list[bytes] = []
    server = raw(_cut_then_whole(response, heads))
    config = make_config(db_path, {"cut": server.url("/feed.xml")})
    rep = run_fetch(config, force=True).get("cut")
    assert (rep.status, rep.created) == ("fetched", 2), rep
    assert ("the document ends early (cut off in transit?): its last entry, cut through, "
            "was not read") in rep.warnings
    with Store(db_path) as store:
        assert sorted(e.remote_id for e in store.entries()) == ["release-1", "release-2"]
    # The cut document is not remembered as the feed's version: its validators would
    # have earned a 304 and the third entry would never have been read.
    again = run_fetch(config, force=True).get("cut")
    assert b"If-None-Match" not in heads[1] and b"If-Modified-Since" not in heads[1]
    assert (again.status, again.created, again.unchanged) == ("fetched", 1, 2), again
    assert run_fetch(config, force=True).get("cut").status == "not_modified"


def test_a_body_cut_between_two_entries_keeps_no_validators(raw: Callable[..., RawServer],
                                                            db_path: Path) -> None:
    # Every entry it held was whole, so it was stored as the feed's version, ETag
    # included: every later run earned a 304 and the rest never came.
    between = FEED[:FEED.rindex(b"<item>")]
    heads: list[bytes] = []
    server = raw(_cut_then_whole(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/rss+xml\r\n"
        + f"Connection: close\r\n{_ETAG}\r\n\r\n".encode() + between, heads))
    config = make_config(db_path, {"cut": server.url("/feed.xml")})
    rep = run_fetch(config, force=True).get("cut")
    assert (rep.status, rep.created) == ("fetched", 2), rep
    assert ("the document ends early (cut off in transit?): the 2 entries it closed were "
            "read") in rep.warnings
    again = run_fetch(config, force=True).get("cut")
    assert b"If-None-Match" not in heads[1]
    assert (again.status, again.created, again.unchanged) == ("fetched", 1, 2), again


def test_an_undeclared_gzip_bomb_meets_the_body_cap(raw: Callable[..., RawServer],
                                                    db_path: Path) -> None:
    body = gzip.compress(b"<rss>" + b" " * 3_000_000)
    server = raw(lambda _head: (ok(body), False))
    rep = run_fetch(make_config(db_path, {"bomb": server.url("/feed.xml")},
                                max_body_bytes=1_000_000), force=True).get("bomb")
    assert (rep.status, rep.error) == (
        "failed", "body larger than the cap of 1000000 bytes (the max_body_bytes setting)")


def test_validators_go_back_byte_for_byte(raw: Callable[..., RawServer],
                                          db_path: Path) -> None:
    # Header values are opaque bytes: a Latin-1 byte in an ETag comes back unchanged.
    seen: list[bytes] = []
    etag = b'W/"caf\xe9-1"'

    def answer(head: bytes) -> tuple[bytes, bool]:
        seen.append(head)
        if b"If-None-Match" in head:
            return b"HTTP/1.1 304 Not Modified\r\nETag: " + etag + b"\r\n\r\n", False
        return ok(FEED, f"ETag: {etag.decode('latin-1')}").replace(
            b"caf\xc3\xa9", b"caf\xe9"), False

    server = raw(answer)
    config = make_config(db_path, {"s": server.url("/feed.xml")})
    assert run_fetch(config, force=True).get("s").status == "fetched"
    assert run_fetch(config, force=True).get("s").status == "not_modified"
    assert b"If-None-Match: " + etag in seen[1].split(b"\r\n")


def test_a_broken_header_line_is_quoted_as_text(raw: Callable[..., RawServer],
                                               db_path: Path) -> None:
    server = raw(lambda head: (b"HTTP/1.1 200 OK\r\nThis is not a header\r\n"
                               b"Content-Length: 0\r\n\r\n", True))
    rep = run_fetch(make_config(db_path, {"odd": server.url("/feed.xml")}),
                    force=True).get("odd")
    # h11's own words, without Python's bytearray(b'...') around the quoted line.
    assert (rep.status, rep.error) == (
        "failed", "network error: RemoteProtocolError: illegal header line: "
                  "'This is not a header'")


def test_headers_too_large_to_read_say_so(raw: Callable[..., RawServer],
                                          db_path: Path) -> None:
    long_line = b"X-Long: " + b"a" * 200_000
    server = raw(lambda head: (b"HTTP/1.1 200 OK\r\n" + long_line
                               + b"\r\nContent-Length: 0\r\n\r\n", True))
    rep = run_fetch(make_config(db_path, {"odd": server.url("/feed.xml")}),
                    force=True).get("odd")
    # It was h11's "RemoteProtocolError: Receive buffer too long".
    assert (rep.status, rep.error) == (
        "failed", "the response's headers are too large (over 100 KiB): not read")


def test_garbage_instead_of_http_is_a_clear_network_error(raw: Callable[..., RawServer],
                                                          db_path: Path) -> None:
    server = raw(lambda head: (b"SSH-2.0-OpenSSH_9.2\r\n\r\n", True))
    rep = run_fetch(make_config(db_path, {"odd": server.url("/feed.xml")}),
                    force=True).get("odd")
    assert rep.status == "failed" and rep.error.startswith("network error: "), rep.error


def test_https_with_a_trusted_certificate(raw: Callable[..., RawServer], db_path: Path,
                                          tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(server_context)
    server = raw(lambda head: (ok(FEED), False), tls=server_context)
    url = server.url("/feed.xml", host="localhost")

    # Without the CA the certificate is refused, and the report says what to do.
    rep = run_fetch(make_config(db_path, {"tls": url}), force=True).get("tls")
    assert rep.status == "failed"
    assert rep.error == (
        "TLS certificate refused: unable to get local issuer certificate (the server may "
        "leave out its intermediate certificate, which browsers fetch for themselves; a "
        "private CA can be trusted through SSL_CERT_FILE naming certifi's bundle with the "
        "CA added)")

    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # OpenSSL's own trust override
    rep = run_fetch(make_config(db_path, {"tls": url}), force=True).get("tls")
    assert (rep.status, rep.created) == ("fetched", 3), rep


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("SSL_CERT_FILE", "missing.pem", "cannot load CA certificates from it: No such file"),
    ("SSL_CERT_FILE", "garbage.pem", "cannot load CA certificates from it: "),
    ("SSL_CERT_DIR", "missing-folder", "not a folder"),
])
def test_ca_certificates_that_cannot_be_loaded_stop_the_run(
        raw: Callable[..., RawServer], db_path: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, said: str) -> None:
    # It was "internal error: FileNotFoundError" and a traceback for every https source,
    # with no fetch row, and exit 1: a mistake of the machine's setup, not the source's.
    (tmp_path / "garbage.pem").write_text("garbage\n")
    monkeypatch.setenv(variable, str(tmp_path / value))
    secure = raw(lambda head: (ok(FEED), False), tls=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    config = make_config(db_path, {"tls": secure.url("/feed.xml", host="localhost")})
    with pytest.raises(ConfigError) as caught:
        run_fetch(config, force=True)
    assert str(caught.value).startswith(f"{variable}={tmp_path / value}: ")
    assert said in str(caught.value) and "certifi's bundle" in str(caught.value)
    assert caught.value.__cause__ is not None or variable == "SSL_CERT_DIR"

    # The command says it in one line, and exits 2 (a setup error), without a traceback.
    toml = tmp_path / "signal.toml"
    toml.write_text(f'[settings]\ndatabase = "{db_path}"\n[[sources]]\nid = "tls"\n'
                    f'url = "{secure.url("/feed.xml", host="localhost")}"\n')
    result = CliRunner().invoke(cli, ["fetch", "--config", str(toml), "--force"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"signal: error: {caught.value}"


@pytest.mark.parametrize(("issued", "host", "said"), [
    ({"not_after": dt.datetime(2021, 1, 1, tzinfo=dt.UTC)}, "localhost",
     "TLS certificate refused: certificate has expired (the site must renew it)"),
    ({}, "127.0.0.1", "TLS certificate refused: IP address mismatch, certificate is not "
     "valid for '127.0.0.1' (it names other addresses: is the address right?)"),
])
def test_a_refused_certificate_says_why_in_words(raw: Callable[..., RawServer], db_path: Path,
                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 issued: dict[str, object], host: str,
                                                 said: str) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost", **issued).configure_cert(server_context)
    server = raw(lambda head: (ok(FEED), False), tls=server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # the CA is trusted: only this fails
    rep = run_fetch(make_config(db_path, {"tls": server.url("/feed.xml", host=host)}),
                    force=True).get("tls")
    assert (rep.status, rep.error) == ("failed", said)


def test_the_teaching_server_sees_one_request_per_source(server: ScenarioServer,
                                                         db_path: Path) -> None:
    sources = {"rss": server.url("/feeds/demo-rss.xml"),
               "atom": server.url("/feeds/demo-atom.xml")}
    report = run_fetch(make_config(db_path, sources), force=True)
    assert {s.status for s in report.sources} == {"fetched"}
    for path in ("/feeds/demo-rss.xml", "/feeds/demo-atom.xml"):
        (record,) = server.requests_for(path)
        assert record.header("Host") == server.base_url.split("://", 1)[1].rstrip("/")
        assert record.header("Accept-Encoding") == "gzip, deflate"
        assert "signal" in (record.header("User-Agent") or "").lower()


def test_https_with_a_callers_ssl_context(raw: Callable[..., RawServer], db_path: Path) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(server_context)
    server = raw(lambda head: (ok(FEED), False), tls=server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    sources = {f"tls{i}": server.url(f"/feed/{i}.xml", host="localhost") for i in range(4)}
    report = run_fetch(make_config(db_path, sources, per_host=1), force=True,
                       ssl_context=client_context)
    assert [(r.status, r.created) for r in report.sources] == [("fetched", 3)] * 4, report
    assert server.connections == 1  # one TLS connection, kept alive for all four


def _old_tls_only() -> ssl.SSLContext:
    """A server context that speaks only TLS 1.0 and 1.1, as an old appliance does."""
    import warnings

    trustme = pytest.importorskip("trustme")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    trustme.CA().issue_cert("localhost").configure_cert(context)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # naming them is deprecated
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    return context


def test_a_handshake_that_fails_says_why_in_words(raw: Callable[..., RawServer],
                                                  db_path: Path) -> None:
    # Both were OpenSSL's own line: "cannot connect: [SSL: WRONG_VERSION_NUMBER] wrong
    # version number (_ssl.c:1006)", "... [SSL: TLSV1_ALERT_PROTOCOL_VERSION] ...".
    def answer_anything(conn: socket.socket) -> None:  # a plain-http server's 400
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    plain = serve_connections(answer_anything)
    old = raw(lambda head: (ok(FEED), False), tls=_old_tls_only())
    fine = raw(lambda head: (ok(FEED), False))
    sources = {"plain-port": f"https://127.0.0.1:{plain.getsockname()[1]}/feed.xml",
               "old-tls": old.url("/feed.xml", host="localhost"),
               "fine": fine.url("/feed.xml")}
    try:
        report = run_fetch(make_config(db_path, sources), force=True)
    finally:
        plain.close()
    assert report.get("fine").status == "fetched"  # the rest of the run goes on
    assert (report.get("plain-port").status, report.get("plain-port").error) == (
        "failed", "TLS handshake failed: wrong version number (the server did not answer "
                  "in TLS: is this a plain-http port? the http:// address may be the one)")
    assert (report.get("old-tls").status, report.get("old-tls").error) == (
        "failed", "TLS handshake failed: tlsv1 alert protocol version (the server offers "
                  "only TLS versions this machine refuses, such as TLS 1.0 or 1.1: the "
                  "site must upgrade)")


def test_a_tls_answer_to_plain_http_says_so(raw: Callable[..., RawServer],
                                            db_path: Path) -> None:
    # A TLS server that answers a plain-http request with a TLS alert record: h11's
    # words for a response that starts with a control byte were "illegal request line",
    # naming what Signal sent rather than what came back.
    alert = b"\x15\x03\x01\x00\x02\x02\x46"
    server = raw(lambda head: (alert, True))
    rep = run_fetch(make_config(db_path, {"tls-port": server.url("/feed.xml")}),
                    force=True).get("tls-port")
    assert (rep.status, rep.error) == (
        "failed", "network error: the answer is not HTTP: it begins with a binary byte, "
                  "as a TLS server's does (is the address https://?)")


def test_a_handshake_no_one_answers_is_named(raw: Callable[..., RawServer],
                                              db_path: Path) -> None:
    # A plain-http server that waits for a request line never answers a ClientHello:
    # the report said "timed out (connect timed out after 1 s)", with no word of TLS.
    plain = raw(lambda head: (ok(FEED), False))
    url = plain.url("/feed.xml").replace("http://", "https://")
    rep = run_fetch(make_config(db_path, {"quiet": url}, connect_timeout=1.0),
                    force=True).get("quiet")
    assert (rep.status, rep.error) == (
        "failed", "timed out (no answer to the TLS handshake within 1 s: is this a "
                  "plain-http port? the http:// address may be the one)")
