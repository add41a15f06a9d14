"""The library's teaching server (what ``signal demo`` runs on), over real HTTP on 127.0.0.1."""

from __future__ import annotations

import hashlib
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest
from conftest import FIXTURES

from signal_feeds.demo.teaching_server import TeachingServer, fixtures_dir


@pytest.fixture
def server() -> Iterator[TeachingServer]:
    """The library's server itself, not the tests' scenario server built on it."""
    with TeachingServer() as srv:
        yield srv


@pytest.fixture
def client(server: TeachingServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=10.0) as c:
        yield c


# -- fixtures and binding -------------------------------------------------------------------


def test_fixtures_dir_holds_the_demo_feeds() -> None:
    assert (FIXTURES / "demo-rss.xml").is_file()
    assert (FIXTURES / "demo-atom.xml").is_file()
    assert (FIXTURES / "variants" / "no-dates.xml").is_file()


def test_every_fixture_file_is_served_byte_for_byte(
    server: TeachingServer, client: httpx.Client
) -> None:
    files = [p for p in FIXTURES.rglob("*") if p.is_file()]
    assert len(files) >= 10
    for file in files:
        rel = file.relative_to(FIXTURES).as_posix()
        response = client.get(f"/feeds/{rel}")
        assert response.status_code == 200, rel
        assert response.content == file.read_bytes(), rel
    assert "/feeds/variants/zones.xml" in server.paths()


def test_content_types_and_validators(client: httpx.Client) -> None:
    rss = client.get("/feeds/demo-rss.xml")
    body = (FIXTURES / "demo-rss.xml").read_bytes()
    assert rss.headers["content-type"] == "application/rss+xml; charset=utf-8"
    assert rss.headers["etag"] == '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
    assert rss.headers["last-modified"].endswith(" GMT")
    assert rss.headers["content-length"] == str(len(body))
    atom = client.get("/feeds/demo-atom.xml")
    assert atom.headers["content-type"] == "application/atom+xml; charset=utf-8"


def test_head_has_headers_and_no_body(client: httpx.Client) -> None:
    response = client.head("/feeds/demo-atom.xml")
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == len(
        (FIXTURES / "demo-atom.xml").read_bytes()
    )
    assert "etag" in response.headers


def test_bound_to_loopback_only(server: TeachingServer) -> None:
    assert server.base_url.startswith("http://127.0.0.1:")
    assert FIXTURES == fixtures_dir() == server.fixtures


def test_unknown_path_is_404_also_for_head(client: httpx.Client) -> None:
    assert client.get("/feeds/nope.xml").status_code == 404
    missing = client.head("/nope")
    assert (missing.status_code, missing.content) == (404, b"")


# -- conditional GET ------------------------------------------------------------------------


def test_if_none_match_gives_304_with_validators(client: httpx.Client) -> None:
    first = client.get("/feeds/demo-rss.xml")
    etag = first.headers["etag"]
    for value in (etag, f"W/{etag}", f'"nope", {etag}', "*"):
        again = client.get("/feeds/demo-rss.xml", headers={"If-None-Match": value})
        assert again.status_code == 304, value
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["last-modified"] == first.headers["last-modified"]
    other = client.get("/feeds/demo-rss.xml", headers={"If-None-Match": '"something-else"'})
    assert other.status_code == 200


def test_if_modified_since_gives_304(client: httpx.Client) -> None:
    first = client.get("/feeds/demo-rss.xml")
    last_modified = first.headers["last-modified"]
    same = client.get("/feeds/demo-rss.xml", headers={"If-Modified-Since": last_modified})
    assert same.status_code == 304
    assert same.headers["last-modified"] == last_modified
    later = formatdate(time.time() + 3600, usegmt=True)
    newer = client.get("/feeds/demo-rss.xml", headers={"If-Modified-Since": later})
    assert newer.status_code == 304
    earlier = "Thu, 01 Jan 2015 00:00:00 GMT"
    older = client.get("/feeds/demo-rss.xml", headers={"If-Modified-Since": earlier})
    assert older.status_code == 200
    junk = client.get("/feeds/demo-rss.xml", headers={"If-Modified-Since": "yesterday-ish"})
    assert junk.status_code == 200


def test_if_none_match_takes_precedence_over_if_modified_since(client: httpx.Client) -> None:
    first = client.get("/feeds/demo-rss.xml")
    response = client.get(
        "/feeds/demo-rss.xml",
        headers={
            "If-None-Match": '"stale"',
            "If-Modified-Since": first.headers["last-modified"],
        },
    )
    assert response.status_code == 200


def test_put_changes_etag_and_last_modified(server: TeachingServer, client: httpx.Client) -> None:
    server.put("/custom.xml", b"<rss><channel><title>one</title></channel></rss>")
    first = client.get("/custom.xml")
    assert first.headers["content-type"] == "application/rss+xml; charset=utf-8"
    server.put("/custom.xml", b"<rss><channel><title>one</title></channel></rss>")
    same = client.get("/custom.xml", headers={"If-None-Match": first.headers["etag"]})
    assert same.status_code == 304  # same body, same validators

    server.put("/custom.xml", b"<rss><channel><title>two</title></channel></rss>")
    second = client.get(
        "/custom.xml",
        headers={
            "If-None-Match": first.headers["etag"],
        },
    )
    assert second.status_code == 200
    assert second.content.endswith(b"<title>two</title></channel></rss>")
    assert second.headers["etag"] != first.headers["etag"]
    assert second.headers["last-modified"] != first.headers["last-modified"]
    by_date = client.get(
        "/custom.xml", headers={"If-Modified-Since": first.headers["last-modified"]}
    )
    assert by_date.status_code == 200


def test_quick_edits_get_distinct_dates(server: TeachingServer, client: httpx.Client) -> None:
    # Last-Modified has one-second resolution; three edits within a second must still
    # give three different dates, or a client asking If-Modified-Since would miss one.
    dates = []
    for title in ("one", "two", "three"):
        server.put("/quick.xml", f"<rss><channel><title>{title}</title></channel></rss>".encode())
        dates.append(client.get("/quick.xml").headers["last-modified"])
    assert len(set(dates)) == 3
    stale = client.get("/quick.xml", headers={"If-Modified-Since": dates[1]})
    assert stale.status_code == 200


def test_put_without_validators(server: TeachingServer, client: httpx.Client) -> None:
    # The benchmarks' fallback serves its corpus this way too.
    server.put("/plain.txt", b"hello", content_type="text/plain", etag=False,
               last_modified=False)
    response = client.get("/plain.txt")
    assert (response.status_code, response.content) == (200, b"hello")
    assert response.headers["content-type"] == "text/plain"
    assert "etag" not in response.headers and "last-modified" not in response.headers
    assert client.get("/plain.txt", headers={"If-None-Match": '"x"'}).status_code == 200
    server.put("/lm-only.xml", b"<feed/>", etag=False)
    lm_only = client.get("/lm-only.xml")
    assert lm_only.headers["content-type"] == "application/atom+xml; charset=utf-8"
    assert client.get("/lm-only.xml", headers={
        "If-Modified-Since": lm_only.headers["last-modified"]}).status_code == 304
    with pytest.raises(ValueError, match="must start with '/'"):
        server.put("relative.xml", b"<rss/>")


# -- lifecycle, logging and the command -----------------------------------------------------


def test_stop_closes_kept_alive_connections() -> None:
    server = TeachingServer().start()
    with httpx.Client(timeout=10.0) as c:
        assert c.get(server.url("/feeds/demo-rss.xml")).status_code == 200
        server.stop()
        with pytest.raises(httpx.TransportError):
            c.get(server.url("/feeds/demo-rss.xml"))
    with pytest.raises(RuntimeError, match="only be started once"):
        server.start()


def test_requests_are_logged_not_printed(client: httpx.Client, caplog: pytest.LogCaptureFixture,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with caplog.at_level(logging.INFO, logger="signal_feeds.demo.teaching_server"):
        client.get("/feeds/demo-atom.xml")
    assert any('"GET /feeds/demo-atom.xml HTTP/1.1" 200' in r.getMessage()
               for r in caplog.records)
    assert capsys.readouterr() == ("", "")


def test_command_line_prints_the_base_url(tmp_path: Path) -> None:
    (tmp_path / "one.xml").write_bytes(b"<rss/>")
    proc = subprocess.Popen(
        [sys.executable, "-m", "signal_feeds.demo.teaching_server", "--fixtures", str(tmp_path),
         "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Signal teaching server at http://127.0.0.1:")
        base = line.rsplit(" ", 1)[1].strip()
        with httpx.Client(timeout=5.0) as c:
            assert c.get(base + "/feeds/one.xml").content == b"<rss/>"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


# The kernel hands a process-directed signal to any thread that does not block it; the
# command must stop even when that is one of the server's threads, not the main one.
_SIGNAL_FROM_ANOTHER_THREAD = """
import signal, sys, threading
from signal_feeds.demo import teaching_server

def send() -> None:
    signal.pthread_kill(threading.get_ident(), getattr(signal, sys.argv[1]))

threading.Timer(0.3, send).start()
sys.exit(teaching_server.main(["--fixtures", sys.argv[2], "--quiet"]))
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX threads only")
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_command_line_stops_on_a_signal_another_thread_received(tmp_path: Path,
                                                               name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNAL_FROM_ANOTHER_THREAD, name, str(tmp_path)],
        capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Signal teaching server at http://127.0.0.1:")
