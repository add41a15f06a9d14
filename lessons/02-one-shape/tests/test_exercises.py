"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

import io
from pathlib import Path

import feedparser
import pytest
from signal_lesson.parse import parse_feed
from signal_lesson.urls import normalize_link

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"


# Exercise 1: the four dates of variants/zones.xml in UTC.
def test_exercise_1_zones() -> None:
    rows = parse_feed((FIXTURES / "variants" / "zones.xml").read_bytes())
    assert {row.remote_id: row.published for row in rows} == {
        "zone-plus-0300": "2026-03-01T06:00:00Z",
        "zone-minus-0800": "2026-03-01T06:00:00Z",
        "zone-gmt": "2026-03-01T12:00:00Z",
        "zone-plus-0530": "2026-03-01T12:00:00Z",
    }


# Exercise 2: what the policy makes of each link (None: refused).
LINKS = {
    "HTTPS://News.Example.ORG:443/?page=2#top": "https://news.example.org/?page=2",
    "https://example.org/a?utm_source=feed": "https://example.org/a?utm_source=feed",
    "https://example.org:443@evil.example/": None,
    "urn:isbn:9780262033848": None,
    "http://example.org/a": None,
}


@pytest.mark.parametrize(("link", "answer"), LINKS.items())
def test_exercise_2_link_policy(link: str, answer: str | None) -> None:
    assert normalize_link(link) == answer


# Exercise 3: feedparser's own .get() answers "updated" with the published date.
def test_exercise_3_why_dict_get() -> None:
    data = (FIXTURES / "demo-rss.xml").read_bytes()
    entry = feedparser.parse(io.BytesIO(data)).entries[0]
    with pytest.warns(DeprecationWarning):
        borrowed = entry.get("updated_parsed")
    assert borrowed == entry["published_parsed"]
    assert dict.get(entry, "updated_parsed") is None
    assert parse_feed(data)[0].updated == ""
