"""fetch(): conditional GET with validators sent back verbatim, and every bound enforced."""

from __future__ import annotations

import time

import pytest
from signal_lesson.errors import SignalError
from signal_lesson.fetch import (
    USER_AGENT,
    BodyTooLarge,
    DeadlineExceeded,
    FetchError,
    FetchTimeout,
    Limits,
    NetworkError,
    TooManyRedirects,
    Validators,
    fetch,
    new_client,
)
from signal_lesson.server import TeachingServer

FAST = Limits(connect_timeout=1.0, read_timeout=0.5, deadline=1.0,
              max_body_bytes=64 * 1024, max_redirects=3)


@pytest.fixture
def server():
    with TeachingServer(stall_seconds=3.0, big_bytes=1024 * 1024) as running:
        yield running


@pytest.fixture
def client():
    with new_client(FAST) as running:
        yield running


def test_second_request_sends_validators_byte_equal_and_gets_304(server, client) -> None:
    first = fetch(client, server.url("/feeds/demo-rss.xml"), limits=FAST)
    assert first.status == 200 and len(first.body) == 1525
    sent = server.log[-1]
    assert "If-None-Match" not in sent.headers and "If-Modified-Since" not in sent.headers

    second = fetch(client, server.url("/feeds/demo-rss.xml"), first.validators, FAST)
    received = server.log[-1].headers
    doc = server.document("/feeds/demo-rss.xml")
    assert doc is not None
    assert received["If-None-Match"].encode() == doc.etag.encode()
    assert received["If-Modified-Since"].encode() == doc.last_modified.encode()
    assert server.log[-1].status == 304
    assert second.not_modified and second.body == b""
    assert second.validators == first.validators


def test_odd_validators_travel_unchanged(server, client) -> None:
    # An RFC 850 date and a weak ETag: re-formatting either would change the bytes.
    server.publish("/feeds/odd.xml", b"<rss version='2.0'><channel/></rss>",
                   etag='W/"v1"', last_modified="Wednesday, 25-Mar-26 12:00:00 GMT")
    first = fetch(client, server.url("/feeds/odd.xml"), limits=FAST)
    assert first.validators == Validators('W/"v1"', "Wednesday, 25-Mar-26 12:00:00 GMT")
    second = fetch(client, server.url("/feeds/odd.xml"), first.validators, FAST)
    assert server.log[-1].headers["If-Modified-Since"] == "Wednesday, 25-Mar-26 12:00:00 GMT"
    assert server.log[-1].headers["If-None-Match"] == 'W/"v1"'
    assert second.not_modified


def test_no_validators_means_no_conditional_headers() -> None:
    assert Validators().request_headers() == {}
    assert Validators(last_modified="x").request_headers() == {"If-Modified-Since": "x"}


def test_a_changed_feed_comes_back_with_new_validators(server, client) -> None:
    first = fetch(client, server.url("/feeds/demo-rss.xml"), limits=FAST)
    corrected = server.document("/feeds/variants/demo-rss-corrected.xml")
    assert corrected is not None
    server.publish("/feeds/demo-rss.xml", corrected.body)
    second = fetch(client, server.url("/feeds/demo-rss.xml"), first.validators, FAST)
    assert second.status == 200 and second.body == corrected.body
    assert second.validators.etag != first.validators.etag
    assert second.validators.last_modified == "Wed, 25 Mar 2026 13:00:00 GMT"


def test_user_agent_identifies_the_project(server, client) -> None:
    fetch(client, server.url("/feeds/demo-atom.xml"), limits=FAST)
    assert server.log[-1].headers["User-Agent"] == USER_AGENT
    assert "https://github.com/signal-feeds/signal" in USER_AGENT


def test_body_cap_aborts_a_stream_without_content_length(server, client) -> None:
    with pytest.raises(BodyTooLarge, match="65536"):
        fetch(client, server.url("/scenario/big"), limits=FAST)


def test_body_cap_counts_decoded_bytes_of_a_gzip_bomb(server, client) -> None:
    with pytest.raises(BodyTooLarge):
        fetch(client, server.url("/scenario/gzip-bomb"), limits=FAST)


def test_declared_length_over_the_cap_is_refused_before_reading(server, client) -> None:
    tiny = Limits(max_body_bytes=100)
    with pytest.raises(BodyTooLarge, match="declared"):
        fetch(client, server.url("/feeds/demo-rss.xml"), limits=tiny)


def test_redirects_are_followed_up_to_the_cap(server, client) -> None:
    response = fetch(client, server.url("/scenario/redirect/3"), limits=FAST)
    assert response.status == 200
    assert response.url == server.url("/feeds/demo-rss.xml")
    with pytest.raises(TooManyRedirects):
        fetch(client, server.url("/scenario/redirect/4"), limits=FAST)


def test_read_timeout_on_a_stalled_body(server, client) -> None:
    started = time.monotonic()
    with pytest.raises(FetchTimeout):
        fetch(client, server.url("/scenario/stall"), limits=FAST)
    assert time.monotonic() - started < 2.9


def test_deadline_stops_a_trickle_that_never_times_out(server, client) -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        fetch(client, server.url("/scenario/trickle"), limits=FAST)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 4.0


def test_deadline_uses_the_injected_clock(server, client) -> None:
    ticks = iter([0.0, 100.0])
    with pytest.raises(DeadlineExceeded):
        fetch(client, server.url("/feeds/demo-rss.xml"), limits=FAST, clock=lambda: next(ticks))


def test_connection_refused_is_translated(client) -> None:
    with TeachingServer() as gone:
        url = gone.url("/feeds/demo-rss.xml")
    with pytest.raises(NetworkError):
        fetch(client, url, limits=FAST)


def test_all_fetch_errors_belong_to_the_project_hierarchy() -> None:
    for kind in (BodyTooLarge, DeadlineExceeded, TooManyRedirects, FetchTimeout, NetworkError):
        assert issubclass(kind, FetchError) and issubclass(kind, SignalError)


def test_an_http_error_status_is_a_response_not_an_exception(server, client) -> None:
    response = fetch(client, server.url("/feeds/nothing-here.xml"), limits=FAST)
    assert (response.status, response.body) == (404, b"")


def test_get_command_exit_status(capsys) -> None:
    from signal_lesson.__main__ import main

    assert main(["get", "/feeds/demo-rss.xml", "/feeds/demo-rss.xml"]) == 0
    assert main(["get", "--max-redirects", "1", "/scenario/redirect/2"]) == 1
    assert "TooManyRedirects" in capsys.readouterr().out


def test_a_proxy_in_the_environment_is_not_used(server, monkeypatch) -> None:
    # trust_env=False: a proxy set in the environment does not stand in between
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with new_client(FAST) as client:
        assert fetch(client, server.url("/feeds/demo-rss.xml"), limits=FAST).status == 200
