from __future__ import annotations

import time
from pathlib import Path

import pytest
from signal_lesson.errors import ParseError, SignalError
from signal_lesson.parse import NORMALIZER_VERSION, Entry, parse_feed

LESSON_DIR = Path(__file__).resolve().parents[1]
FIXTURES = LESSON_DIR.parents[1] / "fixtures"


def parse_fixture(name: str, **options: bool) -> list[Entry]:
    return parse_feed((FIXTURES / name).read_bytes(), **options)


def test_rss_rows() -> None:
    assert parse_fixture("demo-rss.xml")[:2] == [
        Entry("release-1", "https://example.org/releases/1", "Заметки о выпуске",
              "2026-03-02T07:00:00Z", ""),
        Entry("release-2", "https://example.org/releases/2", "Заметки о выпуске",
              "2026-03-16T15:30:00Z", ""),
    ]


def test_atom_rows_have_the_same_shape() -> None:
    layout, line_length = parse_fixture("demo-atom.xml")
    assert layout == Entry("urn:signal:layout-1", "https://example.org/layout", "Layout notes",
                           "2026-03-18T14:30:00Z", "2026-03-20T19:00:00Z")
    assert line_length.remote_id == "tag:example.org,2026:line-length"


def test_equal_titles_different_entries() -> None:
    first, second, _ = parse_fixture("demo-rss.xml")
    assert first.title == second.title
    assert first.remote_id != second.remote_id


def test_every_zone_becomes_utc() -> None:
    assert [e.published for e in parse_fixture("variants/zones.xml")] == [
        "2026-03-01T06:00:00Z", "2026-03-01T06:00:00Z",
        "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z",
    ]


def test_missing_dates_stay_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    before = parse_fixture("variants/no-dates.xml")
    assert {(e.published, e.updated) for e in before} == {("", "")}
    # Reading later must give the same rows: the clock is not an input.
    monkeypatch.setattr(time, "time", lambda: 4102444800.0)
    assert parse_fixture("variants/no-dates.xml") == before


def test_rss_has_no_updated_date_even_though_feedparser_offers_one() -> None:
    assert all(e.updated == "" for e in parse_fixture("demo-rss.xml"))


def test_no_id_and_no_link_are_empty_strings() -> None:
    kept, bare = parse_fixture("variants/no-id-no-link.xml")
    assert kept.remote_id == "schedule-2026"
    assert bare == Entry("", "", "Без адреса и без идентификатора", "", "")


def test_link_policy_applied_to_rows() -> None:
    rows = parse_feed((LESSON_DIR / "examples" / "links.xml").read_bytes())
    assert {e.remote_id: e.url for e in rows} == {
        "case-port-fragment": "https://example.org/notes?id=7&lang=ru",
        "plain-http": "",
        "password": "",
        "javascript": "",
        "data": "",
        "file": "",
        "other-port": "https://example.org:8443/notes",
    }
    with_http = parse_feed((LESSON_DIR / "examples" / "links.xml").read_bytes(), allow_http=True)
    assert with_http[1].url == "http://example.org/plain"


def test_malformed_xml_is_read_leniently() -> None:
    # What feedparser recovers from the truncated item has neither id nor link nor title.
    assert parse_fixture("variants/malformed.xml") == [Entry("", "", "", "", "")]


@pytest.mark.parametrize("data", [b"", b"  ", b"<html><body>hi</body></html>", b"/etc/passwd",
                                  b"https://example.org/rss.xml"])
def test_not_a_feed(data: bytes) -> None:
    with pytest.raises(ParseError):
        parse_feed(data)


def test_bytes_that_name_a_file_are_not_opened(tmp_path: Path) -> None:
    feed = tmp_path / "feed.xml"
    feed.write_bytes((FIXTURES / "demo-rss.xml").read_bytes())
    with pytest.raises(ParseError):
        parse_feed(str(feed).encode())


def test_parse_error_is_a_signal_error() -> None:
    assert issubclass(ParseError, SignalError)


def test_encoding_comes_from_the_bytes_and_the_header() -> None:
    body = ('<?xml version="1.0" encoding="windows-1251"?><rss version="2.0"><channel>'
            "<item><guid>w</guid><title>Привет</title></item></channel></rss>")
    assert parse_feed(body.encode("windows-1251"))[0].title == "Привет"
    no_declaration = body.replace(' encoding="windows-1251"', "").encode("windows-1251")
    rows = parse_feed(no_declaration, content_type="text/xml; charset=windows-1251")
    assert rows[0].title == "Привет"


def test_normalizer_version_is_an_int() -> None:
    assert isinstance(NORMALIZER_VERSION, int)
