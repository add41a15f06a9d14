"""update_source over real HTTP: fetched, not_modified, rejected, failed."""

from __future__ import annotations

from pathlib import Path

import pytest
from signal_lesson.fetch import Limits, new_client
from signal_lesson.pipeline import update_source
from signal_lesson.server import FIXTURES, TeachingServer
from signal_lesson.store import Counts, Store
from signal_lesson.story import StepClock, run_story

PATH = "/publisher/demo-rss.xml"


@pytest.fixture
def world(tmp_path: Path):
    with (TeachingServer(stall_seconds=2.0) as server, new_client() as client,
          Store(tmp_path / "signal.db", clock=StepClock()) as store):
        yield server, client, store


def publish(server: TeachingServer, name: str) -> None:
    server.publish(PATH, (FIXTURES / name).read_bytes())


def test_fetched_then_not_modified(world) -> None:
    server, client, store = world
    publish(server, "demo-rss.xml")
    first = update_source(store, client, "demo-rss", server.url(PATH))
    assert (first.outcome, first.http_status, first.counts) == ("fetched", 200, Counts(3))
    second = update_source(store, client, "demo-rss", server.url(PATH))
    assert (second.outcome, second.http_status) == ("not_modified", 304)
    assert server.log[-1].headers["If-None-Match"] == server.document(PATH).etag


def test_a_304_with_only_an_etag_keeps_the_stored_last_modified(world) -> None:
    server, client, store = world
    publish(server, "demo-rss.xml")
    update_source(store, client, "demo-rss", server.url(PATH))
    saved = store.validators("demo-rss")
    assert saved.etag and saved.last_modified
    # The same bytes (so the same ETag), now served without a Last-Modified header.
    server.publish(PATH, (FIXTURES / "demo-rss.xml").read_bytes(), last_modified="")
    again = update_source(store, client, "demo-rss", server.url(PATH))
    assert (again.outcome, server.log[-1].status) == ("not_modified", 304)
    assert store.validators("demo-rss") == saved


def test_rejected_response_leaves_validators_unmoved(world) -> None:
    server, client, store = world
    publish(server, "demo-rss.xml")
    update_source(store, client, "demo-rss", server.url(PATH))
    before = store.validators("demo-rss")
    publish(server, "variants/demo-rss-contradiction.xml")
    rejected = update_source(store, client, "demo-rss", server.url(PATH))
    assert rejected.outcome == "rejected" and "release-1" in rejected.error
    assert store.validators("demo-rss") == before
    # The next request still carries the old validators, so the body comes again (200).
    again = update_source(store, client, "demo-rss", server.url(PATH))
    assert server.log[-1].headers["If-None-Match"] == before.etag
    assert (again.outcome, server.log[-1].status) == ("rejected", 200)
    assert [e["title"] for e in store.entries("demo-rss")].count("Заметки о выпуске") == 2


def test_truncated_feed_is_read_leniently_for_now(world) -> None:
    # feedparser recovers what it can; lesson 09 decides what Signal accepts.
    server, client, store = world
    publish(server, "variants/malformed.xml")
    update = update_source(store, client, "demo-rss", server.url(PATH))
    assert (update.outcome, update.counts) == ("fetched", Counts(skipped=1))


def test_skipped_entries_are_counted(world) -> None:
    server, client, store = world
    publish(server, "variants/no-id-no-link.xml")
    update = update_source(store, client, "demo-rss", server.url(PATH))
    assert update.counts == Counts(created=1, skipped=1)


def test_failed_fetch_and_http_errors_advance_nothing(world) -> None:
    server, client, store = world
    missing = update_source(store, client, "demo-rss", server.url("/feeds/missing.xml"))
    assert (missing.outcome, missing.http_status, missing.error) == ("failed", 404, "HTTP 404")
    stalled = update_source(store, client, "demo-rss", server.url("/scenario/stall"),
                            Limits(read_timeout=0.3))
    assert stalled.outcome == "failed" and "ReadTimeout" in stalled.error
    assert store.entries("demo-rss") == []
    assert [f["outcome"] for f in store.fetches("demo-rss")] == ["failed", "failed"]


def test_story_runs(capsys) -> None:
    run_story()
    out = capsys.readouterr().out
    assert out.count("not_modified, HTTP 304") == 2
    assert "    n2 " in out
