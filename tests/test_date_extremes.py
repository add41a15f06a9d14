"""Dates at and past the calendar's ends (year 1, year 9999): one such date costs that
date alone, never the feed, and a date the text places before the year 1000 or past
9999 is left unread rather than stored as another."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import make_config
from scenario_server import ScenarioServer

from signal_feeds import parse_feed, run_fetch
from signal_feeds.store import Store

#: Each raised OverflowError out of the date readers: "rejected ... parser failed".
PAST_THE_ENDS = [
    "Fri, 31 Dec 9999 23:59:59 -2359",
    "9999-12-31 23:30 EST",
    "0001-01-01 00:10 CET",
    "0001-01-01T00:00:00+23:59",
    "31.12.9999 23:59 -2359",
    "December 31, 9999 11:59 PM -2359",
    "Sa, 31 Dez 9999 23:59:59 -2359",
    "99991231T235959-2359",
]
#: Each was stored as another date: 2000-01-01, 1978-01-11, 2010-12-01, 2359-01-01,
#: 2026-07-21, 9999-12-01, 9999-12-31 read as UTC for want of its zone, and 1733-02-16
#: (microseconds).
MISREAD = [
    "-0001-01-01T00:00:00Z",
    "253402300800",
    "10000-01-01",
    "Sat, 01 Jan 0001 00:00:00 +2359",
    "-2026-12-01",
    "99999999999",
    "Fri, 31 Dec 9999 23:59:59 America/New_York",
    "1733047200000000",
]
#: Offsets no zone has (past 14 hours, or 60 minutes), applied as written: 2026-11-27
#: 05:21, 2026-12-02 10:00, 2026-11-30 09:00, 2026-11-30 11:00, 2026-12-01 08:20.
NO_SUCH_OFFSET = [
    "Tue, 01 Dec 2026 10:00:00 +9999",
    "Tue, 01 Dec 2026 10:00:00 -2400",
    "2026-12-01T10:00:00+25:00",
    "2026-12-01T10:00:00+23:00",
    "2026-12-01 10:00 +0160",
]
GOOD = ("Thu, 03 Dec 2026 10:00:00 GMT", "2026-12-03T10:00:00Z")


def _rss(date: str) -> bytes:
    items = "".join(f"<item><guid>{guid}</guid><title>{guid}</title><pubDate>{when}</pubDate>"
                    "</item>" for guid, when in (("a", GOOD[0]), ("b", date), ("c", GOOD[0])))
    return f'<rss version="2.0"><channel><title>t</title>{items}</channel></rss>'.encode()


def _atom(date: str) -> bytes:
    entries = "".join(f"<entry><id>urn:x:{guid}</id><title>{guid}</title>"
                      f"<updated>{when}</updated></entry>"
                      for guid, when in (("a", GOOD[1]), ("b", date), ("c", GOOD[1])))
    return (f'<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><id>urn:x</id>'
            f"<updated>{GOOD[1]}</updated>{entries}</feed>").encode()


def _json(date: str) -> bytes:
    items = [{"id": guid, "content_text": guid, "date_published": when}
             for guid, when in (("a", GOOD[1]), ("b", date), ("c", GOOD[1]))]
    return json.dumps({"version": "https://jsonfeed.org/version/1.1", "title": "t",
                       "items": items}).encode()


@pytest.mark.parametrize("form", [_rss, _atom, _json], ids=["rss", "atom", "json"])
@pytest.mark.parametrize("date", PAST_THE_ENDS + MISREAD + NO_SUCH_OFFSET)
def test_one_date_past_the_calendar_costs_that_date_alone(form, date: str) -> None:  # type: ignore[no-untyped-def]
    feed = parse_feed(form(date))
    dates = [(e.remote_id.rpartition(":")[2], e.published or e.updated) for e in feed.entries]
    assert dates == [("a", GOOD[1]), ("b", ""), ("c", GOOD[1])]
    assert len(feed.warnings) == 1 and repr(date[:40]) in feed.warnings[0], feed.warnings
    assert "left empty" in feed.warnings[0]


def test_a_feed_with_such_a_date_is_stored(server: ScenarioServer, db_path: Path) -> None:
    # Through the parser processes and the store, as `signal fetch` meets it.
    server.put("/far.xml", _rss(PAST_THE_ENDS[0]), content_type="application/rss+xml")
    report = run_fetch(make_config(db_path, {"far": server.url("/far.xml")}), force=True)
    rep = report.get("far")
    assert (rep.status, rep.created, rep.error) == ("fetched", 3, None), rep
    assert any("not understood; left empty" in w for w in rep.warnings), rep.warnings
    with Store(db_path) as store:
        stored = {e.title: e.published for e in store.entries(source_id="far")}
    assert stored == {"a": GOOD[1], "b": "", "c": GOOD[1]}
