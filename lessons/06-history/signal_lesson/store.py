"""The SQLite store: sources, entries, their versions and fetches.

Nothing outside this module speaks SQL. What to do with each entry is decided by a pure
function (``decide``); this module only carries the decision out, and the primary key
stays the last line of defence if two writers ever disagree. Every fingerprint an entry
has had is kept in ``entry_versions``, with when it was first and last seen, and the
normalizer version that produced it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import sqlite_utils

from .fetch import Validators
from .identity import Identified, Row

Outcome = Literal["created", "updated", "unchanged"]
Clock = Callable[[], datetime]


def decide(stored: Mapping[str, str], rows: Iterable[Row]) -> list[tuple[Row, Outcome]]:
    """Pure: compare each row's fingerprint with the stored one (key -> fingerprint)."""
    decisions: list[tuple[Row, Outcome]] = []
    for row in rows:
        if row.key not in stored:
            decisions.append((row, "created"))
        elif stored[row.key] != row.fingerprint:
            decisions.append((row, "updated"))
        else:
            decisions.append((row, "unchanged"))
    return decisions


@dataclass(frozen=True)
class Counts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0


def utc_now() -> datetime:
    return datetime.now(UTC)


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


UPSERT = """
INSERT INTO entries (id, source_id, remote_id, url, title, published, updated,
                     fingerprint, normalizer_version, first_seen_at, last_seen_at)
VALUES (:key, :source_id, :remote_id, :url, :title, :published, :updated,
        :fingerprint, :normalizer_version, :now, :now)
ON CONFLICT (id) DO UPDATE SET
    remote_id = excluded.remote_id, url = excluded.url, title = excluded.title,
    published = excluded.published, updated = excluded.updated,
    fingerprint = excluded.fingerprint, normalizer_version = excluded.normalizer_version,
    last_seen_at = excluded.last_seen_at
"""

ADD_VERSION = """
INSERT INTO entry_versions (entry_id, fingerprint, normalizer_version, title, url,
                            published, updated, first_seen_at, last_seen_at)
VALUES (:key, :fingerprint, :normalizer_version, :title, :url, :published, :updated,
        :now, :now)
ON CONFLICT (entry_id, fingerprint) DO UPDATE SET last_seen_at = excluded.last_seen_at
"""


class Store:
    """``with Store("signal.db") as store: ...`` (closes the connection on exit)."""

    def __init__(self, path: str | Path, *, clock: Clock = utc_now) -> None:
        self.clock = clock
        self.db = sqlite_utils.Database(sqlite3.connect(path, isolation_level=None))
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA busy_timeout = 5000")
        self.db["sources"].create(
            {"id": str, "url": str, "etag": str, "last_modified": str,
             "last_status": int, "last_fetched_at": str},
            pk="id", if_not_exists=True,
            defaults={"etag": "", "last_modified": ""},
        )
        self.db["entries"].create(
            {"id": str, "source_id": str, "remote_id": str, "url": str, "title": str,
             "published": str, "updated": str, "fingerprint": str,
             "normalizer_version": int, "first_seen_at": str, "last_seen_at": str},
            pk="id", if_not_exists=True, foreign_keys=[("source_id", "sources", "id")],
        )
        self.db["entry_versions"].create(
            {"entry_id": str, "fingerprint": str, "normalizer_version": int, "title": str,
             "url": str, "published": str, "updated": str, "first_seen_at": str,
             "last_seen_at": str},
            pk=("entry_id", "fingerprint"), if_not_exists=True,
            foreign_keys=[("entry_id", "entries", "id")],
        )
        self.db["fetches"].create(
            {"id": int, "source_id": str, "fetched_at": str, "http_status": int,
             "outcome": str, "created": int, "updated": int, "unchanged": int,
             "skipped": int, "bytes": int, "error": str},
            pk="id", if_not_exists=True,
        )

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Everything inside commits together, or not at all."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")  # take the write lock before reading
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- source state -------------------------------------------------------------------

    def add_source(self, source_id: str, url: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT INTO sources (id, url) VALUES (?, ?) "
                         "ON CONFLICT (id) DO UPDATE SET url = excluded.url", (source_id, url))

    def validators(self, source_id: str) -> Validators:
        for row in self.db.query("SELECT etag, last_modified FROM sources WHERE id = ?",
                                 [source_id]):
            return Validators(row["etag"] or "", row["last_modified"] or "")
        return Validators()

    def stored_fingerprints(self, source_id: str) -> dict[str, str]:
        return {row["id"]: row["fingerprint"] for row in self.db.query(
            "SELECT id, fingerprint FROM entries WHERE source_id = ?", [source_id])}

    # -- one response, one transaction ---------------------------------------------------

    def apply(self, identified: Identified, validators: Validators, *,
              http_status: int = 200, size: int = 0) -> Counts:
        """Store the entries of one response, its validators and its fetch row together."""
        source_id = identified.source_id
        now = stamp(self.clock())  # one instant for the whole response
        with self.transaction() as conn:
            decisions = decide(self.stored_fingerprints(source_id), identified.rows)
            for row, outcome in decisions:
                values = {**vars(row), "now": now}
                if outcome != "unchanged":
                    conn.execute(UPSERT, values)
                    conn.execute(ADD_VERSION, values)
                else:  # the same fingerprint again: only "when last seen" moves
                    conn.execute("UPDATE entries SET last_seen_at = ?, normalizer_version = ? "
                                 "WHERE id = ?", (now, row.normalizer_version, row.key))
                    conn.execute("UPDATE entry_versions SET last_seen_at = ? "
                                 "WHERE entry_id = ? AND fingerprint = ?",
                                 (now, row.key, row.fingerprint))
            tally = [outcome for _row, outcome in decisions]
            counts = Counts(tally.count("created"), tally.count("updated"),
                            tally.count("unchanged"), identified.skipped)
            self._save_validators(conn, source_id, validators, http_status, now)
            self._log_fetch(conn, source_id, http_status, "fetched", counts, size, "", now)
        return counts

    def not_modified(self, source_id: str, validators: Validators) -> None:
        """A 304: nothing new to store. A validator it carries replaces the stored one;
        one it does not carry is kept (RFC 9111, 4.3.4)."""
        now = stamp(self.clock())
        with self.transaction() as conn:
            if validators.etag or validators.last_modified:
                stored = self.validators(source_id)
                merged = Validators(validators.etag or stored.etag,
                                    validators.last_modified or stored.last_modified)
                self._save_validators(conn, source_id, merged, 304, now)
            self._log_fetch(conn, source_id, 304, "not_modified", Counts(), 0, "", now)

    def failed(self, source_id: str, http_status: int, outcome: str, error: str) -> None:
        """A rejected or failed request: log it, advance nothing (validators stay put)."""
        now = stamp(self.clock())
        with self.transaction() as conn:
            self._log_fetch(conn, source_id, http_status, outcome, Counts(), 0, error, now)

    def _save_validators(self, conn: sqlite3.Connection, source_id: str,
                         validators: Validators, http_status: int, now: str) -> None:
        conn.execute(
            "UPDATE sources SET etag = ?, last_modified = ?, last_status = ?, "
            "last_fetched_at = ? WHERE id = ?",
            (validators.etag, validators.last_modified, http_status, now, source_id),
        )

    def _log_fetch(self, conn: sqlite3.Connection, source_id: str, http_status: int,
                   outcome: str, counts: Counts, size: int, error: str, now: str) -> None:
        conn.execute(
            "INSERT INTO fetches (source_id, fetched_at, http_status, outcome, created, "
            "updated, unchanged, skipped, bytes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (source_id, now, http_status, outcome, counts.created,
             counts.updated, counts.unchanged, counts.skipped, size, error),
        )

    # -- reading ------------------------------------------------------------------------

    def entries(self, source_id: str) -> list[dict[str, object]]:
        return list(self.db.query(
            "SELECT * FROM entries WHERE source_id = ? ORDER BY published, remote_id",
            [source_id]))

    def versions(self, entry_id: str) -> list[dict[str, object]]:
        """Every fingerprint the entry has had, oldest first."""
        return list(self.db.query(
            "SELECT * FROM entry_versions WHERE entry_id = ? ORDER BY first_seen_at, rowid",
            [entry_id]))

    def fetches(self, source_id: str) -> list[dict[str, object]]:
        return list(self.db.query(
            "SELECT * FROM fetches WHERE source_id = ? ORDER BY id", [source_id]))
