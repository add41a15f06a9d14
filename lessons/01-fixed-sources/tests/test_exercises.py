"""Answers to the exercises at the end of README.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from signal_lesson.config import Config, Source, is_slug, load_config, parse_config
from signal_lesson.errors import ConfigError
from signal_lesson.urls import UrlRejected, canonical_source_url

LESSON_DIR = Path(__file__).resolve().parents[1]

# Exercise 1: which spellings name the same feed as https://example.org/rss.xml?
SAME_FEED = {
    "HTTPS://EXAMPLE.ORG/rss.xml": True,
    "https://example.org:443/rss.xml#latest": True,
    "https://example.org/rss.xml?format=full": False,  # the query may select another feed
    "https://example.org/RSS.xml": False,  # paths are case-sensitive
    "http://example.org/rss.xml": False,  # another scheme is another address
}


@pytest.mark.parametrize(("url", "same"), SAME_FEED.items())
def test_exercise_1_duplicate_spellings(url: str, same: bool) -> None:
    text = (
        '[[sources]]\nid = "demo-rss"\nurl = "https://example.org/rss.xml"\n'
        f'[[sources]]\nid = "candidate"\nurl = "{url}"\n'
    )
    if same:
        with pytest.raises(ConfigError, match="duplicate url"):
            parse_config(text)
    else:
        assert len(parse_config(text).sources) == 2


# Exercise 2: find the reviewed source behind a URL, however it is spelled.
def source_for_url(config: Config, url: str) -> Source | None:
    try:
        wanted = canonical_source_url(url)
    except UrlRejected:
        return None
    for source in config.sources:
        if canonical_source_url(source.url) == wanted:
            return source
    return None


def test_exercise_2_source_for_url() -> None:
    config = load_config(LESSON_DIR / "signal.toml")
    assert source_for_url(config, "HTTPS://Example.org:443/atom.xml#top") == config.source(
        "demo-atom"
    )
    assert source_for_url(config, "https://example.org/unknown.xml") is None
    assert source_for_url(config, "javascript:alert(1)") is None


# Exercise 3: which of these are valid source ids?
SLUGS = {
    "python-insider": True,
    "Python-Insider": False,
    "news_2026": False,
    "-draft": False,
    "2026": True,
    "lwn": True,
}


@pytest.mark.parametrize(("text", "valid"), SLUGS.items())
def test_exercise_3_slugs(text: str, valid: bool) -> None:
    assert is_slug(text) is valid
