"""A large export is read a page at a time: ``signal export`` of a database of
1,000,000 entries held every entry (2 GB of memory) and printed nothing for 40 s, even
to ``| head``. The pages must give the same bytes as one listing, and each page must
be a seek in the reading order's index, not a walk from the top."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
import tracemalloc
from contextlib import closing
from pathlib import Path

import pytest

from signal_feeds.errors import QueryError
from signal_feeds.identity.keys import identify
from signal_feeds.parse.feed import parse_feed
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import Store, open_store, reading

NOW = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
EXPORTED = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)
DATES = ["Sun, 01 Feb 2026 10:00:00 GMT", "Mon, 02 Feb 2026 10:00:00 GMT", "",
         "Tue, 03 Feb 2026 10:00:00 GMT"]


def _rss(items: list[tuple[str, str, str, str]]) -> bytes:
    body = "".join(f"<item><guid>{guid}</guid><title>{title}</title><link>{link}</link>"
                   + (f"<pubDate>{date}</pubDate>" if date else "")
                   + f"<description>{title} in a few words more</description></item>"
                   for guid, title, link, date in items)
    return (f'<?xml version="1.0"?><rss version="2.0"><channel><title>c</title>'
            f"<link>https://x.example/</link>{body}</channel></rss>").encode()


def _stories(database: Path | str) -> None:
    """Four sources carrying some of the same stories (duplicates), on a few dates
    (many entries of one date, whose order is the feed's)."""
    rnd = random.Random(7)
    with open_store(database) as store:
        for n, source in enumerate(["alpha", "beta", "gamma", "delta"]):
            items = []
            for i in range(30):
                story = rnd.randrange(40)
                link = (f"https://news.example/s/{story}" if rnd.random() < 0.7
                        else f"https://{source}.example/{i}")
                items.append((f"{source}-{i}", f"Story number {story} about {story * 7}",
                              link, rnd.choice(DATES)))
            state = SourceState(source_id=source, url=f"https://{source}.example/feed")
            store.apply_response(
                state, identify(source, parse_feed(_rss(items)).entries).rows,
                FetchRecord(source_id=source, started_at=NOW, url=state.url,
                            outcome="fetched"), NOW + dt.timedelta(minutes=n))


def _chain(database: Path | str) -> None:
    """Markers that form a chain through another source: alpha <- beta <- alpha. The
    last alpha row is listed under --source alpha and collects its own duplicates, on
    whatever page it falls."""
    if isinstance(database, Path):
        with closing(sqlite3.connect(database)) as conn, conn:
            _link(conn, "?")
        return
    import psycopg

    with psycopg.connect(database) as conn:
        _link(conn, "%s")


def _link(conn: object, mark: str) -> None:
    run = conn.execute  # type: ignore[attr-defined]
    alpha = [r[0] for r in run("SELECT id FROM entries WHERE source_id = 'alpha' AND "
                               "duplicate_of = '' ORDER BY seq LIMIT 3").fetchall()]
    beta = run("SELECT id FROM entries WHERE source_id = 'beta' AND duplicate_of = '' "
               "ORDER BY seq LIMIT 1").fetchone()[0]
    for row, parent in ((beta, alpha[0]), (alpha[1], beta), (alpha[2], alpha[1])):
        run(f"UPDATE entries SET duplicate_of = {mark} WHERE id = {mark}", (parent, row))


def _exports(database: Path | str) -> list[str]:
    with open_store(database) as store:
        return [reading.export_entries(store, format=fmt, source_id=source, since=since,
                                       include_duplicates=every, now=EXPORTED)
                for fmt in ("json", "atom") for source in (None, "alpha", "beta", "none")
                for since in (None, "2026-02-02") for every in (False, True)]


def test_an_export_read_a_page_at_a_time_is_the_same_text(
        database: Path | str, monkeypatch: pytest.MonkeyPatch) -> None:
    _stories(database)
    _chain(database)
    monkeypatch.setattr(reading, "EXPORT_PAGE", 10_000)  # the whole listing at once
    whole = _exports(database)
    assert any('"also_in": [\n' in text for text in whole)  # duplicates were collapsed
    for page in (1, 2, 7):
        monkeypatch.setattr(reading, "EXPORT_PAGE", page)
        assert _exports(database) == whole, page


def test_a_large_export_holds_a_page_of_entries_not_the_whole_database(
        db_path: Path) -> None:
    # 6,000 entries of 4 KB of text each: 24 MB in the rows alone, and more as views.
    Store(db_path).close()
    text = "<p>" + "words of an entry " * 220 + "</p>"
    with closing(sqlite3.connect(db_path)) as conn, conn:
        conn.execute("INSERT INTO sources (id, url) VALUES ('big', 'https://big.example/')")
        conn.executemany(
            "INSERT INTO entries (id, seq, source_id, remote_id, url, title, published, "
            "content, fingerprint, first_seen_at, last_seen_at) "
            "VALUES (?, ?, 'big', ?, ?, ?, ?, ?, 'f', '2026-03-01T00:00:00Z', "
            "'2026-03-01T00:00:00Z')",
            [(f"{n:064x}", n, f"r{n}", f"https://big.example/{n}", f"Entry {n}",
              f"2026-02-{1 + n % 20:02d}T00:00:00Z", text) for n in range(1, 6001)])
    with Store(db_path) as store:
        for fmt in ("json", "atom"):
            tracemalloc.start()
            try:
                written = sum(len(piece) for piece in reading.iter_export(
                    store, format=fmt, now=EXPORTED))  # type: ignore[arg-type]
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert written > 6000 * len(text)
            assert peak < 8_000_000, (fmt, peak)


def test_a_page_after_an_entry_is_a_seek_in_the_order_index(db_path: Path) -> None:
    from signal_feeds.store.sqlite.queries import after_queries

    Store(db_path).close()
    with closing(sqlite3.connect(db_path)) as conn:
        for source_id in (None, "s"):
            for since in (None, "2026-01-01"):
                for every in (False, True):
                    for sql, args in after_queries("2026-02-01T00:00:00Z", 7,
                                                   source_id=source_id, since=since,
                                                   limit=500, include_duplicates=every):
                        plan = " | ".join(r[3] for r in conn.execute(
                            "EXPLAIN QUERY PLAN " + sql, args))
                        # The date and seq bound the index range: never a walk from
                        # the newest entry (quadratic over a whole export), nor a sort.
                        assert "<expr>=? AND seq<?" in plan or "<expr><?" in plan, plan
                        assert "SCAN" not in plan.split("LIST SUBQUERY")[0], plan
                        assert "TEMP B-TREE" not in plan, plan


def test_listing_after_an_unknown_entry_is_an_error(database: Path | str) -> None:
    _stories(database)
    with open_store(database) as store:
        first = store.entry_views(source_id=None, since=None, limit=3,
                                  include_duplicates=True)
        rest = store.entry_views(source_id=None, since=None, limit=None,
                                 include_duplicates=True, after=first[-1].key)
        every = store.entry_views(source_id=None, since=None, limit=None,
                                  include_duplicates=True)
        assert first + rest == every
        with pytest.raises(QueryError, match="no entry 'ffff' to list after"):
            store.entry_views(source_id=None, since=None, limit=5,
                              include_duplicates=False, after="ffff")
