"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from signal_lesson.fetch import fetch, new_client
from signal_lesson.identity import identify
from signal_lesson.parse import parse_feed
from signal_lesson.server import FIXTURES, TeachingServer
from signal_lesson.store import Counts, Store

PATH = "/publisher/demo-rss.xml"


@pytest.fixture
def world(tmp_path: Path):
    with (TeachingServer() as server, new_client() as client,
          Store(tmp_path / "signal.db") as store):
        store.add_source("demo-rss", server.url(PATH))
        yield server, client, store


# Exercise 1: the same guid from two sources gives two rows.
def test_exercise_1_two_sources_one_guid(tmp_path: Path) -> None:
    with Store(tmp_path / "signal.db") as store:
        for source_id, name in [("demo-rss", "demo-rss.xml"),
                                ("harbour-tools", "variants/other-source-same-id.xml")]:
            store.add_source(source_id, f"https://example.org/{source_id}")
            store.apply(identify(source_id, parse_feed((FIXTURES / name).read_bytes())),
                        store.validators(source_id))
        rows = store.db.execute(
            "SELECT source_id FROM entries WHERE remote_id = 'release-1' ORDER BY source_id"
        ).fetchall()
    assert rows == [("demo-rss",), ("harbour-tools",)]


# Exercise 2: identical repeats store one row and are not an error.
def test_exercise_2_identical_repeats(tmp_path: Path) -> None:
    with Store(tmp_path / "signal.db") as store:
        store.add_source("demo-rss", "https://example.org/rss.xml")
        data = (FIXTURES / "variants/demo-rss-repeat.xml").read_bytes()
        counts = store.apply(identify("demo-rss", parse_feed(data)), store.validators("demo-rss"))
    assert counts == Counts(created=2)


# Exercise 3: save validators first, and a rejected body is never asked for again.
def validators_first(store: Store, client: httpx.Client, url: str) -> str:
    response = fetch(client, url, store.validators("demo-rss"))
    if response.not_modified:
        return "not_modified"
    with store.transaction() as conn:  # the mistake: validators committed on their own
        store._save_validators(conn, "demo-rss", response.validators, response.status)
    try:
        store.apply(identify("demo-rss", parse_feed(response.body)), response.validators)
    except Exception:
        return "rejected"
    return "fetched"


def test_exercise_3_validators_first_loses_the_body(world) -> None:
    server, client, store = world
    server.publish(PATH, (FIXTURES / "variants/demo-rss-contradiction.xml").read_bytes())
    assert validators_first(store, client, server.url(PATH)) == "rejected"
    # The server has nothing new to say, and the reader never hears the problem again:
    assert validators_first(store, client, server.url(PATH)) == "not_modified"
    assert store.entries("demo-rss") == []
