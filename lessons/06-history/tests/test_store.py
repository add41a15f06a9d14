"""The store: pure decisions, upserts, one transaction per response, validators with entries."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from signal_lesson.fetch import Validators
from signal_lesson.identity import Identified, identify
from signal_lesson.parse import parse_feed
from signal_lesson.store import Counts, Store, decide
from signal_lesson.story import StepClock

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
V1 = Validators('"v1"', "Wed, 25 Mar 2026 12:00:00 GMT")


def rows_of(name: str, source_id: str = "demo-rss") -> Identified:
    return identify(source_id, parse_feed((FIXTURES / name).read_bytes()))


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "signal.db", clock=StepClock()) as opened:
        opened.add_source("demo-rss", "https://example.org/rss.xml")
        yield opened


def test_decide_is_a_pure_function_of_fingerprints() -> None:
    rows = rows_of("demo-rss.xml").rows
    stored = {rows[0].key: rows[0].fingerprint, rows[1].key: "something else"}
    assert [outcome for _, outcome in decide(stored, rows)] == [
        "unchanged", "updated", "created"]
    assert [outcome for _, outcome in decide({}, rows)] == ["created"] * 3


def test_created_then_unchanged_then_updated(store: Store) -> None:
    assert store.apply(rows_of("demo-rss.xml"), V1) == Counts(created=3)
    assert store.apply(rows_of("demo-rss.xml"), V1) == Counts(unchanged=3)
    corrected = rows_of("variants/demo-rss-corrected.xml")
    assert store.apply(corrected, V1) == Counts(updated=1, unchanged=2)
    titles = {e["remote_id"]: e["title"] for e in store.entries("demo-rss")}
    assert titles["release-1"] == "Заметки о выпуске 1.0"
    assert len(titles) == 3


def test_rows_match_the_identity_module(store: Store) -> None:
    identified = rows_of("demo-rss.xml")
    store.apply(identified, V1)
    stored = {e["id"]: e for e in store.entries("demo-rss")}
    for row in identified.rows:
        entry = stored[row.key]
        assert (entry["fingerprint"], entry["url"], entry["published"]) == (
            row.fingerprint, row.url, row.published)
        assert entry["normalizer_version"] == row.normalizer_version


def test_validators_are_saved_with_the_entries(store: Store) -> None:
    assert store.validators("demo-rss") == Validators()
    store.apply(rows_of("demo-rss.xml"), V1, size=1525)
    assert store.validators("demo-rss") == V1
    fetch = store.fetches("demo-rss")[-1]
    assert (fetch["outcome"], fetch["created"], fetch["bytes"]) == ("fetched", 3, 1525)


def test_a_failure_inside_the_transaction_leaves_nothing_behind(store: Store, monkeypatch) -> None:
    def broken(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error (simulated)")

    monkeypatch.setattr(store, "_log_fetch", broken)  # the last write of the transaction
    with pytest.raises(sqlite3.OperationalError):
        store.apply(rows_of("demo-rss.xml"), V1)
    assert store.entries("demo-rss") == []
    assert store.validators("demo-rss") == Validators()


def test_primary_key_is_the_last_line_of_defence(store: Store, monkeypatch) -> None:
    store.apply(rows_of("demo-rss.xml"), V1)
    # A stale read (say, another writer got there first) makes every row look new...
    monkeypatch.setattr(store, "stored_fingerprints", lambda source_id: {})
    assert store.apply(rows_of("variants/demo-rss-corrected.xml"), V1).created == 3
    # ...yet ON CONFLICT turns the inserts into updates: still one row per key.
    entries = store.entries("demo-rss")
    assert len(entries) == 3
    assert {e["title"] for e in entries} >= {"Заметки о выпуске 1.0"}
    count = store.db.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert count == 3


def test_not_modified_keeps_entries_and_refreshes_validators(store: Store) -> None:
    store.apply(rows_of("demo-rss.xml"), V1)
    store.not_modified("demo-rss", Validators())  # a 304 without validators keeps the old
    assert store.validators("demo-rss") == V1
    v2 = Validators('"v2"', V1.last_modified)
    store.not_modified("demo-rss", v2)
    assert store.validators("demo-rss") == v2
    assert [f["outcome"] for f in store.fetches("demo-rss")] == [
        "fetched", "not_modified", "not_modified"]


def test_a_304_keeps_a_stored_validator_it_does_not_carry(store: Store) -> None:
    store.apply(rows_of("demo-rss.xml"), V1)
    store.not_modified("demo-rss", Validators(etag='"v2"'))  # no Last-Modified this time
    assert store.validators("demo-rss") == Validators('"v2"', V1.last_modified)
    later = "Wed, 25 Mar 2026 13:00:00 GMT"
    store.not_modified("demo-rss", Validators(last_modified=later))  # and now no ETag
    assert store.validators("demo-rss") == Validators('"v2"', later)


def test_a_second_connection_sees_only_committed_data(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with Store(path) as one, Store(path) as two:
        one.add_source("demo-rss", "https://example.org/rss.xml")
        with one.transaction() as conn:
            conn.execute("UPDATE sources SET etag = 'pending' WHERE id = 'demo-rss'")
            assert two.validators("demo-rss") == Validators()
        assert two.validators("demo-rss").etag == "pending"


def test_wal_mode_and_busy_timeout(store: Store) -> None:
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
