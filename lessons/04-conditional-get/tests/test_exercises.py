"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import gzip

import pytest
from signal_lesson.fetch import BodyTooLarge, Limits, fetch, new_client
from signal_lesson.server import TeachingServer


@pytest.fixture
def server():
    with TeachingServer() as running:
        yield running


# Exercise 1: If-Modified-Since one second before and one second after Last-Modified.
def test_exercise_1_dates_around_last_modified(server) -> None:
    path = "/feeds/demo-atom.xml"
    with new_client() as client:
        for since, expected in [("Wed, 25 Mar 2026 11:59:59 GMT", 200),
                                ("Wed, 25 Mar 2026 12:00:01 GMT", 304)]:
            response = client.get(server.url(path), headers={"If-Modified-Since": since})
            assert response.status_code == expected


# Exercise 2: a redirect cap of 3 means four requests reach the server, then an error.
def test_exercise_2_requests_behind_a_redirect_cap(server) -> None:
    limits = Limits(max_redirects=3)
    with new_client(limits) as client:
        seen = len(server.log)
        with pytest.raises(Exception, match="more than 3 redirects"):
            fetch(client, server.url("/scenario/redirect/4"), limits=limits)
    assert [entry.path for entry in server.log[seen:]] == [
        "/scenario/redirect/4", "/scenario/redirect/3",
        "/scenario/redirect/2", "/scenario/redirect/1",
    ]


# Exercise 3: the bomb's Content-Length passes a 64 KiB cap; its decoded size does not.
def test_exercise_3_the_cap_counts_decoded_bytes(server) -> None:
    limits = Limits(max_body_bytes=64 * 1024)
    with new_client(limits) as client:
        with client.stream("GET", server.url("/scenario/gzip-bomb"),
                           headers={"Accept-Encoding": "gzip"}) as raw:
            wire = b"".join(raw.iter_raw())
        assert len(wire) < 10_000 < limits.max_body_bytes  # about 8 KB on the wire
        assert len(gzip.decompress(wire)) == 8 * 1024 * 1024
        with pytest.raises(BodyTooLarge):
            fetch(client, server.url("/scenario/gzip-bomb"), limits=limits)


# Exercise 4: the publisher corrects a title between two requests.
def test_exercise_4_an_edit_between_two_requests(server) -> None:
    with new_client() as client:
        first = fetch(client, server.url("/feeds/demo-rss.xml"))
        corrected = server.document("/feeds/variants/demo-rss-corrected.xml")
        assert corrected is not None
        server.publish("/feeds/demo-rss.xml", corrected.body)
        second = fetch(client, server.url("/feeds/demo-rss.xml"), first.validators)
    assert second.status == 200
    assert second.validators.etag == corrected.etag != first.validators.etag
    assert second.validators.last_modified == "Wed, 25 Mar 2026 13:00:00 GMT"
    assert server.log[-1].headers["If-None-Match"] == first.validators.etag
