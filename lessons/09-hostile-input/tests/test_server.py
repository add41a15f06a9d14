"""The teaching server answers like a careful origin server: validators, 304s, no body."""

from __future__ import annotations

import http.client

import pytest
from signal_lesson.server import FIXTURES, Document, TeachingServer, is_not_modified, strong_etag


@pytest.fixture
def server():
    with TeachingServer(stall_seconds=2.0) as running:
        yield running


def raw_get(server: TeachingServer, path: str, headers: dict[str, str] | None = None):
    port = int(server.url("").rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def test_fixtures_are_served_with_deterministic_validators(server: TeachingServer) -> None:
    body = (FIXTURES / "demo-rss.xml").read_bytes()
    status, headers, got = raw_get(server, "/feeds/demo-rss.xml")
    assert (status, got) == (200, body)
    assert headers["ETag"] == strong_etag(body) == '"e95483fcbefaf5ea"'
    assert headers["Last-Modified"] == "Wed, 25 Mar 2026 12:00:00 GMT"
    assert raw_get(server, "/feeds/variants/no-dates.xml")[0] == 200
    assert raw_get(server, "/feeds/nothing-here.xml")[0] == 404


def test_304_for_matching_etag_has_no_body_and_repeats_validators(server: TeachingServer) -> None:
    _, first, _ = raw_get(server, "/feeds/demo-rss.xml")
    status, headers, body = raw_get(server, "/feeds/demo-rss.xml",
                                    {"If-None-Match": first["ETag"]})
    assert status == 304
    assert body == b""
    assert "Content-Length" not in headers
    assert headers["ETag"] == first["ETag"]


def test_304_for_if_modified_since_only(server: TeachingServer) -> None:
    _, first, _ = raw_get(server, "/feeds/demo-atom.xml")
    status, _, _ = raw_get(server, "/feeds/demo-atom.xml",
                           {"If-Modified-Since": first["Last-Modified"]})
    assert status == 304
    earlier = "Tue, 24 Mar 2026 12:00:00 GMT"
    assert raw_get(server, "/feeds/demo-atom.xml", {"If-Modified-Since": earlier})[0] == 200


def test_a_new_version_gets_a_new_etag_and_a_later_date(server: TeachingServer) -> None:
    old = server.document("/feeds/demo-rss.xml")
    new = server.publish("/feeds/demo-rss.xml", b"<rss version='2.0'><channel/></rss>")
    assert old is not None and new.etag != old.etag
    assert new.last_modified == "Wed, 25 Mar 2026 13:00:00 GMT"
    status, _, body = raw_get(server, "/feeds/demo-rss.xml", {"If-None-Match": old.etag})
    assert (status, body) == (200, new.body)


def test_if_none_match_wins_over_if_modified_since() -> None:
    doc = Document(b"x", '"a"', "Wed, 25 Mar 2026 12:00:00 GMT")
    recent = "Thu, 26 Mar 2026 12:00:00 GMT"
    assert is_not_modified(doc, '"a"', None)
    assert is_not_modified(doc, 'W/"a", "b"', None)  # weak comparison for If-None-Match
    assert is_not_modified(doc, "*", None)
    assert not is_not_modified(doc, '"b"', recent)  # the ETag says changed: the date is ignored
    assert is_not_modified(doc, None, recent)
    assert not is_not_modified(doc, None, "not a date")
    assert not is_not_modified(Document(b"x", "", ""), '"a"', recent)


def test_the_log_records_what_the_server_received(server: TeachingServer) -> None:
    raw_get(server, "/feeds/demo-rss.xml", {"If-None-Match": '"zzz"', "User-Agent": "probe/1"})
    entry = server.log[-1]
    assert (entry.method, entry.path, entry.status) == ("GET", "/feeds/demo-rss.xml", 200)
    assert entry.headers["If-None-Match"] == '"zzz"'
    assert entry.headers["User-Agent"] == "probe/1"


def test_redirect_chain_ends_at_the_demo_feed(server: TeachingServer) -> None:
    status, headers, _ = raw_get(server, "/scenario/redirect/2")
    assert (status, headers["Location"]) == (302, "/scenario/redirect/1")
    assert raw_get(server, "/scenario/redirect/1")[1]["Location"] == "/feeds/demo-rss.xml"
