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
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import signal_feeds.store.sqlite.connection
from signal_feeds.cli.commands import cli
from signal_feeds.errors import StoreError
from signal_feeds.records import FetchRecord, SourceState
from signal_feeds.store import Store
from signal_feeds.store.sqlite.schema import SCHEMA_VERSION


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
    real_connect = sqlite3.connect

    def read_only(path: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        if kwargs.get("uri"):  # already a URI (the check that a file is Signal's)
            return real_connect(path, *args, **kwargs)
        return real_connect(f"file:{path}?mode=ro", *args, uri=True, **kwargs)

    monkeypatch.setattr(signal_feeds.store.sqlite.connection.sqlite3, "connect", read_only)
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
