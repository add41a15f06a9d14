"""Signal upgraded while a run is in progress: a newer Signal upgrades the database
between two writes of a run that opened it at the older version. The older run must stop
writing there, not write rows the new schema would misread (columns it does not know
left stale beside the ones it writes).

The newer Signal is faked by raising the file's schema version from another connection,
as an upgrade commits it.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from signal_feeds.errors import DatabaseUnavailableError
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import Store
from signal_feeds.store.sqlite.schema import SCHEMA_VERSION

URL = "https://pub.example/feed.xml"


def _attempt(source_id: str) -> tuple[SourceState, FetchRecord]:
    return (SourceState(source_id=source_id, url=URL, etag='"e1"'),
            FetchRecord(source_id=source_id, url=URL, outcome="not_modified",
                        started_at=dt.datetime.now(dt.UTC), http_status=304))


def _upgraded_by_a_newer_signal(path: Path) -> None:
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")


def _sources(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM sources ORDER BY id")]


def test_a_write_after_a_newer_signal_upgraded_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "signal.db"
    with Store(path) as store:
        store.save_attempt(*_attempt("a"))
        _upgraded_by_a_newer_signal(path)
        # The store looked at the version only when it opened the file, and went on
        # writing into the newer schema.
        with pytest.raises(DatabaseUnavailableError,
                           match=rf"newer Signal made it \(schema version "
                                 rf"{SCHEMA_VERSION + 1}; this one knows up to "
                                 rf"{SCHEMA_VERSION}\)"):
            store.save_attempt(*_attempt("b"))
        with pytest.raises(DatabaseUnavailableError, match="newer Signal made it"), \
                store.batch():
            store.save_attempt(*_attempt("c"))
    assert _sources(path) == ["a"]


def test_a_postgres_write_after_a_newer_signal_upgraded_the_database_is_refused(
        postgres_url: str) -> None:
    import psycopg

    from signal_feeds.store import open_store
    from signal_feeds.store.postgres.schema import SCHEMA_VERSION as PG_VERSION

    with open_store(postgres_url) as store:
        store.save_attempt(*_attempt("a"))
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("UPDATE schema_version SET version = %s", (PG_VERSION + 1,))
        with pytest.raises(DatabaseUnavailableError,
                           match=rf"schema version {PG_VERSION + 1}, newer than this "
                                 rf"Signal supports \({PG_VERSION}\)"):
            store.save_attempt(*_attempt("b"))
        with pytest.raises(DatabaseUnavailableError, match="newer than this Signal"), \
                store.batch():
            store.save_attempt(*_attempt("c"))
    with psycopg.connect(postgres_url) as conn:
        assert [r[0] for r in conn.execute("SELECT id FROM sources ORDER BY id")] == ["a"]
