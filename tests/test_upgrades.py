"""Opening a database an older Signal wrote: the upgrade is one transaction, and when it
cannot run the error says that it was the upgrade, not the read, that needed to write.

The old databases are built here, as the other migration tests build theirs: today's
schema taken back to what the older version wrote.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import sqlite_read_only

from signal_feeds.cli.commands import cli
from signal_feeds.errors import StoreError
from signal_feeds.identity.keys import EntryRow, digest, identify, link_key_candidates
from signal_feeds.parse.feed import parse_feed
from signal_feeds.records import ApplyCounts, FetchRecord, SourceState
from signal_feeds.store import Store, open_store
from signal_feeds.store.sqlite.schema import SCHEMA_VERSION, create_schema, schema_version


def _version_13(path: Path) -> Path:
    """A database as schema version 13 left it: no ``sources.cache_headers``."""
    url = "https://pub.example/feed.xml"
    with Store(path) as store:
        store.save_attempt(SourceState(source_id="pub", url=url, etag='"e1"'),
                           FetchRecord(source_id="pub", url=url, outcome="not_modified",
                                       started_at=dt.datetime.now(dt.UTC),
                                       http_status=304))
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("ALTER TABLE sources DROP COLUMN cache_headers")
        conn.execute("PRAGMA user_version = 13")
    return path


def _dump(path: Path) -> tuple[int, list[str], list[tuple[Any, ...]]]:
    with closing(sqlite3.connect(path)) as conn:
        return (conn.execute("PRAGMA user_version").fetchone()[0],
                [r[1] for r in conn.execute("PRAGMA table_info(sources)")],
                conn.execute("SELECT id, etag FROM sources").fetchall())


def test_an_old_database_on_read_only_storage_says_it_needs_its_upgrade(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reading command said "cannot use database in ...: attempt to write a readonly
    # database": nothing told the user why listing entries had to write.
    db = _version_13(tmp_path / "old.db")
    before = _dump(db)
    sqlite_read_only(monkeypatch)
    expected = (f"cannot upgrade the database from schema version 13 to {SCHEMA_VERSION} "
                f"in {db}: attempt to write a readonly database (the file or its folder is "
                "read-only for this user)")
    with pytest.raises(StoreError) as raised:
        Store(db)
    assert str(raised.value) == expected
    result = CliRunner().invoke(cli, ["entries", "--db", str(db)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr == f"signal: error: {expected}\n"
    monkeypatch.undo()
    assert _dump(db) == before


def test_an_old_database_another_program_holds_says_the_upgrade_waited(
        tmp_path: Path) -> None:
    db = _version_13(tmp_path / "old.db")
    before = _dump(db)
    code = ("import sqlite3, sys\n"
            "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "conn.execute('BEGIN EXCLUSIVE')\nprint('locked', flush=True)\n"
            "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(StoreError) as raised:
            Store(db, busy_timeout=0.2)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    assert str(raised.value) == (
        f"cannot upgrade the database from schema version 13 to {SCHEMA_VERSION} in {db}: "
        "database is locked (another program holds it; waited 0.2 s)")
    assert _dump(db) == before
    with Store(db) as store:  # once the lock is gone, the upgrade runs
        assert store.source_state("pub", "https://pub.example/feed.xml").etag == '"e1"'
    version, columns, rows = _dump(db)
    assert version == SCHEMA_VERSION and "cache_headers" in columns and rows == before[2]


#: The tables the first Signal made (schema version 1, as sqlite-utils wrote them),
#: without the columns this test leaves empty.
_VERSION_1 = """
CREATE TABLE sources (id TEXT PRIMARY KEY, url TEXT NOT NULL, fetch_url TEXT, etag TEXT,
    last_modified TEXT, body_digest TEXT, body_normalizer_version INTEGER,
    body_entries INTEGER, status TEXT DEFAULT 'new', http_status INTEGER,
    last_fetch_at TEXT, last_success_at TEXT, next_due_at TEXT, retry_after TEXT,
    error_count INTEGER DEFAULT 0, last_error TEXT, moved_to TEXT, gone INTEGER DEFAULT 0);
CREATE TABLE entries (id TEXT PRIMARY KEY, source_id TEXT NOT NULL, remote_id TEXT,
    url TEXT, title TEXT, published TEXT, updated TEXT, author TEXT, summary TEXT,
    content TEXT, fingerprint TEXT NOT NULL, content_fingerprint TEXT,
    first_seen_at TEXT NOT NULL, last_seen_at TEXT NOT NULL, normalizer_version INTEGER);
CREATE TABLE entry_versions (id INTEGER PRIMARY KEY, entry_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL, content_fingerprint TEXT, title TEXT, url TEXT,
    published TEXT, updated TEXT, first_seen_at TEXT, last_seen_at TEXT,
    normalizer_version INTEGER);
CREATE TABLE fetches (id INTEGER PRIMARY KEY, source_id TEXT, started_at TEXT, url TEXT,
    outcome TEXT, http_status INTEGER, created INTEGER, updated INTEGER,
    unchanged INTEGER, skipped INTEGER, error TEXT, duration_ms REAL, bytes INTEGER);
CREATE UNIQUE INDEX entry_versions_entry_fp
    ON entry_versions (entry_id, fingerprint, content_fingerprint);
CREATE INDEX entries_source_published ON entries (source_id, published);
CREATE INDEX entries_first_seen ON entries (first_seen_at);
CREATE INDEX entries_url ON entries (url);
CREATE INDEX fetches_source_started ON fetches (source_id, started_at);
PRAGMA user_version = 1;
"""


def test_a_version_1_database_has_its_duplicates_marked_when_upgraded(
        tmp_path: Path) -> None:
    # Versions 2 to 5 are re-marked on upgrade; version 1 was left out ("it had no match
    # keys", though the version-4 step computes them), so the two copies of a story an
    # aggregator and its publisher gave were listed apart, and the change log the
    # upgrade starts called the report an original, until someone ran `signal dedupe`.
    db = tmp_path / "v1.db"
    story = {"title": "Harvest festival draws record crowds to the harbour",
             "summary": "Thousands of visitors came to the harbour for the annual harvest "
                        "festival, with boat races, a fish market and music until midnight."}
    rows = [  # the aggregator's copy was stored first, a day after the post
        ("agg", "a-1", "https://www.news.example/harvest/", "2026-11-30T12:00:00Z",
         "2026-12-01T08:00:00Z"),
        ("news", "n-1", "https://news.example/harvest", "2026-11-30T08:00:00Z",
         "2026-12-01T09:00:00Z")]
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executescript(_VERSION_1)
        for number, (source, remote_id, url, published, seen) in enumerate(rows, 1):
            key = f"{source}-key"
            conn.execute("INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, '', '', ?, '', ?, ?, "
                         "?, ?, 1)", (key, source, remote_id, url, story["title"], published,
                                      story["summary"], f"fp{number}", f"cfp{number}", seen,
                                      seen))
            conn.execute("INSERT INTO entry_versions VALUES (?, ?, ?, ?, ?, ?, ?, '', ?, ?, 1)",
                         (number, key, f"fp{number}", f"cfp{number}", story["title"], url,
                          published, seen, seen))
    with Store(db) as store:
        assert [e.key for e in store.entries()] == ["news-key"]
        assert [c.duplicate_of for c in store.changes(limit=10)] == ["news-key", ""]
        assert store.recompute_duplicates().total_changed == 0


_CHANGELOG = b"""<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>App changelog</title><link>https://app.example/</link>
<item><title>Version 2.3 released with offline mode</title>
<link>https://app.example/releases/2-3#notes</link>
<pubDate>Tue, 01 Dec 2026 10:00:00 GMT</pubDate></item>
<item><title>Version 2.2 released with a dark theme</title>
<link>https://app.example/releases/2-2#notes</link>
<pubDate>Tue, 24 Nov 2026 10:00:00 GMT</pubDate></item>
</channel></rss>"""
_NOW = dt.datetime(2026, 12, 2, 12, tzinfo=dt.UTC)


def _apply(database: Path | str, rows: list[EntryRow]) -> ApplyCounts:
    state = SourceState(source_id="app", url="https://app.example/feed.xml")
    with open_store(database) as store:
        return store.apply_response(state, rows, FetchRecord(
            source_id="app", started_at=_NOW, url=state.url, outcome="fetched"), _NOW)


def _stored_keys(database: Path | str) -> tuple[set[str], int]:
    with open_store(database) as store:
        return ({e.key for e in store.entries(include_duplicates=True)},
                len(store.changes(limit=100)))


@pytest.mark.parametrize("version", [1, 12, 21])
def test_an_entry_an_older_signal_keyed_by_its_link_alone_keeps_its_key(
        database: Path | str, version: int) -> None:
    # Up to normalizer version 12 (JSON Feed: 21) an entry without a guid whose link has
    # a fragment (a changelog's #notes) was keyed by its link without it; it is keyed by
    # the link with its fragment now. An upgraded database's first parse of the unchanged
    # feed stored every such entry again under the new key: duplicate rows, "+2 created"
    # and two "created" changes for nothing the publisher did.
    today = identify("app", parse_feed(_CHANGELOG).entries).rows
    old = [replace(row, key=digest(["app", row.url]), normalizer_version=version)
           for row in today]
    assert {r.key for r in old}.isdisjoint(r.key for r in today)
    assert _apply(database, old).created == 2
    counts = _apply(database, list(today))
    assert (counts.created, counts.updated, counts.unchanged) == (0, 0, 2)
    assert _stored_keys(database) == ({r.key for r in old}, 2)
    edited = [replace(today[0], title="Version 2.3 released with offline sync",
                      fingerprint="edited"), today[1]]
    counts = _apply(database, edited)  # an edit is an update of the entry it always was
    assert (counts.created, counts.updated, counts.unchanged) == (0, 1, 1)
    counts = _apply(database, edited)  # and stays so, written by this version
    assert (counts.created, counts.updated, counts.unchanged) == (0, 0, 2)
    assert _stored_keys(database) == ({r.key for r in old}, 3)


def test_an_entry_this_signal_keyed_by_its_link_is_another_entry(
        database: Path | str) -> None:
    # The page itself, stored by today's rules (no fragment), is not taken for the
    # entries its anchors name; nor is an old row that two anchors of one page share.
    today = identify("app", parse_feed(_CHANGELOG).entries).rows
    page = replace(today[0], key=digest(["app", today[0].url]))
    assert _apply(database, [page]).created == 1
    assert _apply(database, list(today)).created == 2
    assert link_key_candidates([today[0], replace(today[1], url=today[0].url)]) == {}


def test_a_new_file_is_built_in_the_callers_transaction_with_any_sqlite_utils(
        tmp_path: Path) -> None:
    # sqlite-utils before 4.0 committed the caller's transaction in Table.create (a
    # `with conn:`), so with the lowest version pyproject allowed every first run failed
    # ("cannot commit - no transaction is active") on a half-built file; 4.x opens a
    # savepoint there instead. Only Signal's own statements may steer the transaction.
    control = ("BEGIN", "COMMIT", "END", "SAVEPOINT", "RELEASE", "ROLLBACK")
    with closing(sqlite3.connect(tmp_path / "new.db", isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        steering: list[str] = []
        conn.set_trace_callback(
            lambda sql: steering.append(sql) if sql.lstrip().upper().startswith(control)
            else None)
        create_schema(conn)
        conn.set_trace_callback(None)
        assert steering == []
        assert conn.in_transaction
        conn.execute("ROLLBACK")
        # Rolled back whole: not one table of the half-built schema stays.
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        assert schema_version(conn) == 0
