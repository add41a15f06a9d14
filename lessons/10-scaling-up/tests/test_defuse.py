"""defuse(): declarations gone, references kept harmless, authors short, all in linear time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from signal_lesson.defuse import MAX_AUTHOR, DefuseStats, defuse
from signal_lesson.parse import MAX_TITLE, parse_feed
from signal_lesson.server import FIXTURES

FEEDS = Path(__file__).resolve().parents[1] / "feeds"


@pytest.mark.parametrize("path", sorted(FIXTURES.rglob("*.xml")), ids=lambda p: p.name)
def test_ordinary_feeds_pass_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    stats = DefuseStats()
    assert defuse(data, stats) == data
    assert stats == DefuseStats()


def test_the_prolog_goes_with_every_declaration_in_it() -> None:
    stats = DefuseStats()
    data = (FEEDS / "billion-laughs.xml").read_bytes()
    out = defuse(data, stats)
    assert b"<!DOCTYPE" not in out and b"<!ENTITY" not in out
    assert out.startswith(b'<?xml version="1.0" encoding="utf-8"?>\n<rss version="2.0">')
    assert (stats.doctypes, stats.entities) == (1, 10)


def test_html_named_references_become_numeric_the_rest_stays() -> None:
    stats = DefuseStats()
    out = defuse(b"<rss><title>caf&eacute;&nbsp;&amp; &lt;b&gt; &unknown;</title></rss>", stats)
    assert out == b"<rss><title>caf&#233;&#160;&amp; &lt;b&gt; &unknown;</title></rss>"
    assert stats.references == 2


def test_author_like_text_is_cut() -> None:
    data = b"<rss><item><author>" + b"q" * 5000 + b"</author><dc:creator x='1'>" + \
        b"z" * 300 + b"</dc:creator><title>" + b"w" * 5000 + b"</title></item></rss>"
    stats = DefuseStats()
    out = defuse(data, stats)
    assert out.count(b"q") == MAX_AUTHOR and out.count(b"z") == MAX_AUTHOR
    assert out.count(b"w") == 5000  # titles are capped later, after parsing
    assert stats.authors_cut == 2


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_wide_encodings_cannot_hide_a_doctype(encoding: str) -> None:
    text = ('<?xml version="1.0"?>\n<!DOCTYPE rss [\n<!ENTITY a "x">\n]>\n'
            "<rss><title>&a;</title></rss>")
    out = defuse(text.encode(encoding))
    assert "DOCTYPE" not in out.decode(encoding)
    assert out.decode(encoding).endswith("<rss><title>&a;</title></rss>")


@pytest.mark.parametrize(
    "probe",
    [b'<!ENTITY"' * 200_000, b"<!DOCTYPE [" + b"<!---->" * 200_000,
     b"<author " * 200_000, b"&a" * 1_000_000, b"<" * 2_000_000],
    ids=["entity", "doctype", "author", "references", "brackets"],
)
def test_no_input_makes_defuse_slow(probe: bytes) -> None:
    started = time.perf_counter()
    defuse(probe)
    assert time.perf_counter() - started < 2.0  # linear: well under a second in practice


def test_parse_feed_defuses_and_caps_titles() -> None:
    blowup = parse_feed((FEEDS / "quadratic-blowup.xml").read_bytes())
    assert blowup[0].title == "&ha;" * 200  # the references stay text; nothing expands
    huge = b"<rss version='2.0'><channel><item><guid>g</guid><title>" + b"x" * 5000 + \
        b"</title></item></channel></rss>"
    assert len(parse_feed(huge)[0].title) == MAX_TITLE


def test_what_the_defence_costs_in_time() -> None:
    """defuse is a few linear passes; feedparser does far more with the same bytes."""
    import feedparser

    data = (FIXTURES / "demo-rss.xml").read_bytes()

    def best(action, rounds: int = 30) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
        return min(times)

    cost = best(lambda: defuse(data)) / best(lambda: feedparser.parse(data))
    assert cost < 0.1  # under a tenth of the parser's own time (about 1% when measured)
