"""SQLite storage behind a narrow interface.

Only this package speaks SQL: this module writes responses and source state, and its
``dedupe`` (duplicate markers) and ``reading`` (entries, history, lookup, export) modules
query through the connection it holds. The rest of Signal asks it to apply one response,
to read and update a source's state, and to read entries, so that another store
(PostgreSQL, for deployments that outgrow one machine) can take its place.

Every response is applied in one ``BEGIN IMMEDIATE`` transaction: entries, versions,
validators and the fetch row commit together or not at all. WAL mode lets readers
continue while a writer works, and the busy timeout lets two ``signal fetch`` runs take
turns instead of failing with "database is locked".
"""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from signal_feeds.errors import StoreError
from signal_feeds.identity.keys import EntryRow, Outcome, classify_change
from signal_feeds.records import (
    ApplyCounts,
    FetchRecord,
    SourceState,
    StoredEntry,
    StoredVersion,
)
from signal_feeds.store import dedupe
from signal_feeds.timeutil import format_time, parse_time

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "ApplyCounts",
    "FetchRecord",
    "SourceState",
    "Store",
    "StoredEntry",
    "StoredVersion",
]

#: Seconds a writer waits for another writer before giving up.
DEFAULT_BUSY_TIMEOUT = 60.0
SCHEMA_VERSION = 5
_KEY_CHUNK = 500  # bound on SQL variables per SELECT ... IN (...)


@dataclass(frozen=True)
class _Stored:
    """What the writer needs to know about an entry already stored."""

    fingerprints: tuple[str, str]
    first_seen_at: str
    markers: dict[str, str]
    tokens: bytes | None
    seq: int | None

log = logging.getLogger("signal_feeds")


_ENTRY_COLUMNS = ("id", "source_id", "remote_id", "url", "title", "published", "updated",
                  "author", "summary", "content", "fingerprint", "content_fingerprint",
                  "first_seen_at", "last_seen_at", "normalizer_version", "match_url",
                  "norm_title", "text_tokens", "seq")

_UPSERT_ENTRY = f"""
INSERT INTO entries ({", ".join(_ENTRY_COLUMNS)})
VALUES ({", ".join("?" for _ in _ENTRY_COLUMNS)})
ON CONFLICT(id) DO UPDATE SET
  remote_id = excluded.remote_id, url = excluded.url, title = excluded.title,
  published = excluded.published, updated = excluded.updated, author = excluded.author,
  summary = excluded.summary, content = excluded.content,
  fingerprint = excluded.fingerprint, content_fingerprint = excluded.content_fingerprint,
  last_seen_at = excluded.last_seen_at, normalizer_version = excluded.normalizer_version,
  match_url = excluded.match_url, norm_title = excluded.norm_title,
  text_tokens = excluded.text_tokens, seq = coalesce(seq, excluded.seq)
"""
_UPSERT_VERSION = """
INSERT INTO entry_versions (entry_id, entry_seq, fingerprint, content_fingerprint, title, url,
                            published, updated, first_seen_at, last_seen_at,
                            normalizer_version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(entry_seq, fingerprint, content_fingerprint)
DO UPDATE SET last_seen_at = excluded.last_seen_at
"""
_TOUCH_ENTRY = "UPDATE entries SET last_seen_at = ? WHERE id = ?"

_SOURCE_COLUMNS = ("id", "url", "fetch_url", "etag", "last_modified", "body_digest",
                   "body_normalizer_version", "body_entries", "ttl_seconds", "status",
                   "http_status", "last_fetch_at", "last_success_at", "next_due_at",
                   "retry_after", "error_count", "last_error", "moved_to", "gone")


def _create_schema(conn: sqlite3.Connection) -> None:
    # sqlite-utils builds the schema (only on first use: it is slow to import).
    import sqlite_utils

    db = sqlite_utils.Database(conn)
    db.table("sources").create(
        {"id": str, "url": str, "fetch_url": str, "etag": str, "last_modified": str,
         "body_digest": str, "body_normalizer_version": int, "body_entries": int,
         "ttl_seconds": int, "status": str,
         "http_status": int, "last_fetch_at": str, "last_success_at": str,
         "next_due_at": str, "retry_after": str, "error_count": int, "last_error": str,
         "moved_to": str, "gone": int},
        pk="id", not_null={"url"}, defaults={"error_count": 0, "gone": 0, "status": "new"},
        if_not_exists=True,
    )
    db.table("entries").create(
        {"id": str, "source_id": str, "remote_id": str, "url": str, "title": str,
         "published": str, "updated": str, "author": str, "summary": str, "content": str,
         "fingerprint": str, "content_fingerprint": str, "first_seen_at": str,
         "last_seen_at": str, "normalizer_version": int},
        pk="id", not_null={"source_id", "fingerprint", "first_seen_at", "last_seen_at"},
        if_not_exists=True,
    )
    db.table("entry_versions").create(
        {"id": int, "entry_id": str, "fingerprint": str, "content_fingerprint": str,
         "title": str, "url": str, "published": str, "updated": str,
         "first_seen_at": str, "last_seen_at": str, "normalizer_version": int},
        pk="id", not_null={"entry_id", "fingerprint"}, if_not_exists=True,
    )
    db.table("fetches").create(
        {"id": int, "source_id": str, "started_at": str, "url": str, "outcome": str,
         "http_status": int, "created": int, "updated": int, "unchanged": int,
         "skipped": int, "error": str, "duration_ms": float, "bytes": int},
        pk="id", if_not_exists=True,
    )
    conn.execute("CREATE INDEX IF NOT EXISTS entries_url ON entries (url)")
    conn.execute("CREATE INDEX IF NOT EXISTS fetches_source_started "
                 "ON fetches (source_id, started_at)")
    _upgrade_to_v2(conn)
    _upgrade_to_v3(conn)
    _upgrade_to_v4(conn)
    _upgrade_to_v5(conn)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


#: Newest-first order of the reading commands; the indexes below are built on exactly
#: this expression so that SQLite can walk them instead of sorting.
ENTRY_ORDER_EXPR = "COALESCE(NULLIF(published, ''), first_seen_at)"

# Version 2: cross-source duplicate markers (one per detection channel), the derived
# duplicate_of, the match keys they are computed from, and the indexes reads rely on.
_V2_ENTRY_COLUMNS = ("match_url", "norm_title", "dup_link", "dup_title", "dup_text",
                     "duplicate_of")
_V2_INDEXES = {
    "entries_match_url": "entries (match_url)",
    "entries_norm_title": "entries (norm_title)",
    # In the reading order itself (newest first, then key), so a page is an index walk.
    "entries_shown_order": f"entries (duplicate_of, {ENTRY_ORDER_EXPR} DESC, id)",
    "entries_source_order": f"entries (source_id, {ENTRY_ORDER_EXPR} DESC, id)",
    "entries_order": f"entries ({ENTRY_ORDER_EXPR} DESC, id)",
}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    """Column names of ``table`` (empty if there is no such table)."""
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _upgrade_to_v2(conn: sqlite3.Connection) -> None:
    """Add the version-2 columns, table and indexes; safe on a new or a version-1 file."""
    if "ttl_seconds" not in _columns(conn, "sources"):
        conn.execute("ALTER TABLE sources ADD COLUMN ttl_seconds INTEGER")
    have = _columns(conn, "entries")
    for column in _V2_ENTRY_COLUMNS:
        if column not in have:
            # NOT NULL DEFAULT '': existing rows read as "not a duplicate" until
            # `signal dedupe` computes their markers.
            conn.execute(f"ALTER TABLE entries ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    for name, target in _V2_INDEXES.items():
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


# Version 3: cheaper writes. Text tokens are 63-bit integers in a WITHOUT ROWID table
# (one B-tree, no rowid index) and are kept on the entry too, so an edit deletes exactly
# its old tokens; the marker indexes hold only marked rows (most rows are not
# duplicates); two indexes no query used are gone.
_V3_DROPPED = ("entries_source_published", "entries_first_seen", "entries_dup_link",
               "entries_dup_title", "entries_dup_text", "dedupe_tokens_token",
               "dedupe_tokens_entry")


def _upgrade_to_v3(conn: sqlite3.Connection) -> None:
    for name in _V3_DROPPED:
        conn.execute(f"DROP INDEX IF EXISTS {name}")
    conn.execute("DROP TABLE IF EXISTS dedupe_tokens")
    for column in ("dup_link", "dup_title", "dup_text"):
        conn.execute(f"CREATE INDEX IF NOT EXISTS entries_{column} ON entries ({column}) "
                     f"WHERE {column} != ''")
    if "text_tokens" not in _columns(conn, "entries"):
        conn.execute("ALTER TABLE entries ADD COLUMN text_tokens BLOB")


# Version 4: the token table names an entry by a small integer (``entries.seq``) instead
# of its 64-character key. Every new entry adds token rows at random places in that
# table; at a fifth of the size it stays in the page cache, and a commit rewrites a
# fifth as many pages. ``seq`` is a real column, not the rowid, because VACUUM
# may renumber rowids.
def _upgrade_to_v4(conn: sqlite3.Connection) -> None:
    has_seq = "seq" in _columns(conn, "entries")
    if has_seq and "entry" in _columns(conn, "dedupe_text"):
        return  # a version-4 file: its tokens are in place (rebuilding them costs minutes)
    if not has_seq:
        conn.execute("ALTER TABLE entries ADD COLUMN seq INTEGER")  # numbered below
    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS entries_seq ON entries (seq)")
    # Prefix tokens of each entry's text shingles (see dedupe.py): an index lookup finds
    # every candidate for a near-identical text without comparing all pairs.
    conn.execute("DROP TABLE IF EXISTS dedupe_text")  # version 3 named entries by key
    conn.execute("CREATE TABLE dedupe_text (token INTEGER NOT NULL, "
                 "entry INTEGER NOT NULL, PRIMARY KEY (token, entry)) WITHOUT ROWID")
    dedupe.refresh_match_keys(conn)


# Version 5: versions name their entry by ``seq`` too, and are unique on (seq, fingerprints)
# instead of (key, fingerprints). A new entry's first version then goes to the end of
# that index, not to a random place in it: with keys of three 64-character digests its
# inner pages alone outgrew the page cache at 1,000,000 entries, and every new entry
# read and rewrote two of its pages.
def _upgrade_to_v5(conn: sqlite3.Connection) -> None:
    if "entry_seq" not in _columns(conn, "entry_versions"):
        conn.execute("ALTER TABLE entry_versions ADD COLUMN entry_seq INTEGER")
        conn.execute("UPDATE entry_versions SET entry_seq = "
                     "(SELECT seq FROM entries WHERE entries.id = entry_versions.entry_id)")
    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS entry_versions_seq_fp "
                 "ON entry_versions (entry_seq, fingerprint, content_fingerprint)")
    conn.execute("DROP INDEX IF EXISTS entry_versions_entry_fp")


def _use_wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Switch a new database to WAL. The switch needs an exclusive lock and SQLite may
    report "locked" at once, without waiting, when two processes open a new file
    together: retry until the busy timeout."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _state_from_row(row: sqlite3.Row) -> SourceState:
    return SourceState(
        source_id=row["id"], url=row["url"], fetch_url=row["fetch_url"] or "",
        etag=row["etag"] or "", last_modified=row["last_modified"] or "",
        body_digest=row["body_digest"] or "",
        body_normalizer_version=row["body_normalizer_version"] or 0,
        body_entries=row["body_entries"] or 0, ttl_seconds=row["ttl_seconds"],
        status=row["status"] or "new", http_status=row["http_status"],
        last_fetch_at=parse_time(row["last_fetch_at"]),
        last_success_at=parse_time(row["last_success_at"]),
        next_due_at=parse_time(row["next_due_at"]),
        retry_after=parse_time(row["retry_after"]),
        error_count=row["error_count"] or 0, last_error=row["last_error"] or "",
        moved_to=row["moved_to"] or "", gone=bool(row["gone"]),
    )


def _for_url(stored: SourceState | None, source_id: str, url: str) -> SourceState:
    if stored is None or stored.url != url:
        return SourceState(source_id=source_id, url=url)
    return stored


def _state_values(state: SourceState) -> tuple[Any, ...]:
    def t(moment: dt.datetime | None) -> str | None:
        return format_time(moment) if moment else None

    return (state.source_id, state.url, state.fetch_url, state.etag, state.last_modified,
            state.body_digest, state.body_normalizer_version, state.body_entries,
            state.ttl_seconds, state.status,
            state.http_status, t(state.last_fetch_at), t(state.last_success_at),
            t(state.next_due_at), t(state.retry_after), state.error_count,
            state.last_error, state.moved_to, int(state.gone))


_SAVE_STATE = (
    f"INSERT INTO sources ({', '.join(_SOURCE_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _SOURCE_COLUMNS)}) ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _SOURCE_COLUMNS[1:])
)
_INSERT_FETCH = ("INSERT INTO fetches (source_id, started_at, url, outcome, http_status, "
                 "created, updated, unchanged, skipped, error, duration_ms, bytes) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


#: SQLite page cache of the writing connection, in KiB. New rows land at random places
#: in large indexes, so beyond the interior pages a bigger cache saves little: a cold
#: ingest of 20,000 entries took as long at 8 MB as at 16 MB and 64 MB, into an empty
#: database and into one of 1,000,000 entries, and the run's peak RSS fell by 8 MB.
CACHE_KIB = 8 * 1024
#: WAL size, in bytes, at which a commit asks for a checkpoint (SQLite's own default is
#: 1000 pages of 4 KiB).
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024
#: WAL content past which the checkpoint waits for the writer and starts the log over;
#: also the size the file is cut back to when it does.
WAL_LIMIT_BYTES = 32 * 1024 * 1024
#: In a large database the limit is this share of the file instead. Each such restart
#: copies what the background checkpoint has not yet, on the writer's time, and in a
#: large file new rows land on pages all over it: into 1,000,000 entries, restarting
#: every 32 MB took a quarter of a cold run.
WAL_LIMIT_SHARE = 1 / 32


class _Checkpointer:
    """Runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own connection and thread when the
    WAL has grown past :data:`CHECKPOINT_WAL_BYTES`.

    SQLite releases the GIL while it copies and syncs, so the checkpoint overlaps with the
    writer's next responses instead of stalling one commit. PASSIVE never blocks a
    writer or a reader; what it cannot copy now, the next one does.
    """

    def __init__(self, path: Path, busy_timeout: float) -> None:
        self._wal = Path(f"{path}-wal")
        self._path = path
        self._busy_timeout = busy_timeout
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: WAL content at the last background checkpoint.
        self.wal_bytes = 0

    def committed(self, conn: sqlite3.Connection) -> None:
        """After a commit, on the writer's connection (outside any transaction)."""
        # (The first test spares most commits the stat of the database file.)
        if self.wal_bytes >= WAL_LIMIT_BYTES and self.wal_bytes >= self._limit():
            # A writer that never pauses keeps a PASSIVE checkpoint from ever reaching
            # the end of the log, and the WAL grew without end (800 MB in one cold run).
            # Between two transactions the writer itself copies what is left and makes
            # the next transaction start the log over.
            self.wal_bytes = 0
            try:
                conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            except sqlite3.Error as exc:
                log.debug("checkpoint of %s failed: %s", self._path, exc)
        try:
            size = self._wal.stat().st_size
        except OSError:
            return
        if size < CHECKPOINT_WAL_BYTES:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="signal-checkpoint",
                                            daemon=True)
            self._thread.start()
        self._wake.set()

    def _limit(self) -> int:
        try:
            size = self._path.stat().st_size
        except OSError:
            size = 0
        return max(WAL_LIMIT_BYTES, int(size * WAL_LIMIT_SHARE))

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, timeout=self._busy_timeout, isolation_level=None)
        try:
            page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])  # per file
            while True:
                self._wake.wait()
                self._wake.clear()
                if self._stopping:
                    return
                try:
                    _busy, frames, _copied = conn.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    self.wal_bytes = frames * page_size
                except sqlite3.Error as exc:  # the file is still consistent: try next time
                    log.debug("background checkpoint of %s failed: %s", self._path, exc)
        finally:
            conn.close()

    def close(self) -> None:
        if self._thread is not None:
            self._stopping = True
            self._wake.set()
            self._thread.join()
            self._thread = None


class Store:
    """A Signal database in one SQLite file. Use as a context manager or call close()."""

    def __init__(self, path: str | Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT) -> None:
        self.path = Path(path)
        self._batch_depth = 0
        self._common_tokens = dedupe.CommonTokens()
        try:
            self._conn = sqlite3.connect(self.path, timeout=busy_timeout,
                                         isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        try:
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            _use_wal(self._conn, busy_timeout)
            # WAL + NORMAL: a crash can lose the last commits, never corrupt the file.
            self._conn.execute("PRAGMA synchronous = NORMAL")
            # Each response is a savepoint inside a batch: SQLite keeps the pages a
            # savepoint may roll back in a sub-journal, by default a temporary file,
            # one pwrite per page. In memory, it costs no system calls.
            self._conn.execute("PRAGMA temp_store = MEMORY")
            # Index pages are touched at random; SQLite's default 2 MB cache re-reads
            # them from the file. A fixed cap keeps memory independent of the file size.
            self._conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            # Checkpoints (copying the WAL into the file, with its fsyncs) happen on a
            # thread of their own, not inside whichever commit crosses the threshold.
            self._conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            self._checkpointer = _Checkpointer(self.path, busy_timeout)
            if self._conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                with self._transaction():
                    if self._conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                        _create_schema(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise StoreError(f"cannot use database {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (closing the last one folds the WAL into the file)."""
        self._checkpointer.close()
        self._conn.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The open connection, for the reading and dedupe modules (the only other
        modules that speak SQL); rows are :class:`sqlite3.Row`."""
        return self._conn

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction on :attr:`connection`, committed on exit."""
        return self._transaction()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes made inside into one transaction, committed at the end.

        Each write (:meth:`apply_response`, :meth:`save_attempt`, ...) keeps its own
        savepoint, so a failing write is undone alone and the others still commit. One
        commit for many responses writes each shared page once instead of once per
        response. If the commit fails, none of the batch is stored.
        """
        with self._transaction():
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1
            if not self._conn.in_transaction:  # SQLite rolled everything back itself
                raise StoreError("the batch's transaction was rolled back by SQLite")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self._batch_depth:
            yield from self._savepoint()
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
            self._checkpointer.committed(self._conn)
        except BaseException:
            # A failed COMMIT (disk full, I/O error) can leave the transaction open; an
            # error SQLite already rolled back leaves none. Either way: no transaction
            # survives, and the original error is the one raised.
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("SAVEPOINT signal_write")
        try:
            yield self._conn
            self._conn.execute("RELEASE signal_write")
        except BaseException:
            # Undo this write alone; the batch's other writes stay. (If SQLite has rolled
            # back the whole transaction, there is nothing left to undo.)
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK TO signal_write")
                self._conn.execute("RELEASE signal_write")
            raise

    # -- sources ---------------------------------------------------------------------

    def source_state(self, source_id: str, url: str) -> SourceState:
        """The stored state of a source (a fresh one if it was never fetched).

        When the configured ``url`` differs from the stored one the user has edited the
        source list: the state starts over for the new URL (validators of another URL
        must not be sent to this one).
        """
        try:
            row = self._conn.execute("SELECT * FROM sources WHERE id = ?",
                                     (source_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read source state: {exc}", source_id=source_id) from exc
        return _for_url(_state_from_row(row) if row else None, source_id, url)

    def source_states_for(self, urls: Mapping[str, str]) -> dict[str, SourceState]:
        """:meth:`source_state` of many sources (source id -> configured url) at once."""
        stored = {state.source_id: state for state in self.source_states()}
        return {sid: _for_url(stored.get(sid), sid, url) for sid, url in urls.items()}

    def source_states(self) -> list[SourceState]:
        """Every stored source state, ordered by id."""
        try:
            rows = self._conn.execute("SELECT * FROM sources ORDER BY id").fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read sources: {exc}") from exc
        return [_state_from_row(r) for r in rows]

    def save_attempt(self, state: SourceState, fetch: FetchRecord) -> None:
        """Store a source's new state and the fetch row of a response without entries
        (304, error, redirect, skip)."""
        try:
            with self._transaction() as conn:
                conn.execute(_SAVE_STATE, _state_values(state))
                conn.execute(_INSERT_FETCH, self._fetch_values(fetch))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot save fetch state: {exc}",
                             source_id=state.source_id) from exc

    def reset_source(self, source_id: str) -> bool:
        """Clear gone, moved, backoff and schedule state; True if the source was known."""
        try:
            with self._transaction() as conn:
                cur = conn.execute(
                    "UPDATE sources SET gone = 0, status = 'reset', error_count = 0, "
                    "last_error = '', next_due_at = NULL, retry_after = NULL, moved_to = '', "
                    "fetch_url = '' WHERE id = ?", (source_id,))
                return cur.rowcount > 0
        except sqlite3.Error as exc:
            raise StoreError(f"cannot reset source: {exc}", source_id=source_id) from exc

    # -- entries ---------------------------------------------------------------------

    def apply_response(self, state: SourceState, rows: Sequence[EntryRow],
                       fetch: FetchRecord, now: dt.datetime, *,
                       match_keys: Mapping[str, dedupe.MatchKeys] | None = None
                       ) -> ApplyCounts:
        """Store one response's entries, their versions, the source's new state
        (validators, body digest) and the fetch row, in one transaction.

        Each entry is ``created``, ``updated`` (fingerprint changed: fields replaced,
        a version added) or ``unchanged`` (only ``last_seen_at`` refreshed).
        ``match_keys`` (by entry key) are used where given, computed where not.
        """
        stamp = format_time(now)
        try:
            with self._transaction() as conn:
                counts, written = self._write_entries(conn, rows, stamp, match_keys or {})
                self._mark_duplicates(conn, counts, written, state.source_id)
                conn.execute(_SAVE_STATE, _state_values(state))
                conn.execute(_INSERT_FETCH, self._fetch_values(replace(
                    fetch, created=counts.created, updated=counts.updated,
                    unchanged=counts.unchanged)))
        except sqlite3.Error as exc:
            raise StoreError(f"cannot store response: {exc}",
                             source_id=state.source_id) from exc
        return counts

    def _mark_duplicates(self, conn: sqlite3.Connection, counts: ApplyCounts,
                         written: Sequence[dedupe.DedupeRow], source_id: str) -> None:
        """Mark cross-source duplicates of the created and updated entries.

        Runs inside the response's transaction under a savepoint: if marking fails only
        the marking is rolled back. Deduplication is an optimization, never a reason to
        lose an entry; ``signal dedupe`` recomputes the markers later.
        """
        if not written:
            return
        created = [key for key, outcome in counts.keys.items() if outcome == "created"]
        conn.execute("SAVEPOINT signal_dedupe")
        try:
            dedupe.mark_new_entries(conn, written, created=created,
                                    common=self._common_tokens)
        except Exception as exc:
            conn.execute("ROLLBACK TO signal_dedupe")
            log.warning("duplicate marking failed for %s (entries stored unmarked; "
                        "run 'signal dedupe'): %s: %s", source_id, type(exc).__name__, exc)
        conn.execute("RELEASE signal_dedupe")

    def _stored(self, conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, _Stored]:
        found: dict[str, _Stored] = {}
        for start in range(0, len(keys), _KEY_CHUNK):
            chunk = keys[start:start + _KEY_CHUNK]
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(
                "SELECT id, fingerprint, content_fingerprint, first_seen_at, dup_link, "
                f"dup_title, dup_text, text_tokens, seq FROM entries WHERE id IN ({marks})",
                chunk,
            ):
                found[r[0]] = _Stored((r[1], r[2]), r[3], {"link": r[4], "title": r[5],
                                                            "text": r[6]}, r[7], r[8])
        return found

    def _write_entries(self, conn: sqlite3.Connection, rows: Sequence[EntryRow], stamp: str,
                       given: Mapping[str, dedupe.MatchKeys]
                       ) -> tuple[ApplyCounts, list[dedupe.DedupeRow]]:
        """Write the rows; return the counts and the dedupe view of what changed."""
        stored = self._stored(conn, [r.key for r in rows])
        upserts: list[tuple[Any, ...]] = []
        versions: list[tuple[Any, ...]] = []
        touches: list[tuple[str, str]] = []
        outcomes: dict[str, Outcome] = {}
        written: list[dedupe.DedupeRow] = []
        old_tokens: list[tuple[int, int]] = []
        new_tokens: list[tuple[int, int]] = []
        last_seq: int | None = None
        for row in rows:
            before = stored.get(row.key)
            outcome = classify_change(before.fingerprints if before else None, row)
            outcomes[row.key] = outcome
            if outcome == "unchanged":
                touches.append((stamp, row.key))
                continue
            keys = given.get(row.key) or dedupe.match_keys(row.url, row.title, row.summary)
            packed = dedupe.pack_tokens(keys.tokens)
            if before and before.seq is not None:
                seq = before.seq
            else:  # numbered here, so that its tokens can be written with it
                if last_seq is None:
                    last_seq = int(conn.execute(
                        "SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0])
                last_seq += 1
                seq = last_seq
            upserts.append((row.key, row.source_id, row.remote_id, row.url, row.title,
                            row.published, row.updated, row.author, row.summary, row.content,
                            row.fingerprint, row.content_fingerprint, stamp, stamp,
                            row.normalizer_version, keys.match_url, keys.norm_title, packed,
                            seq))
            versions.append((row.key, seq, row.fingerprint, row.content_fingerprint, row.title,
                             row.url, row.published, row.updated, stamp, stamp,
                             row.normalizer_version))
            had_tokens = dedupe.unpack_tokens(before.tokens) if before else ()
            posted = dedupe.posted_tokens(keys.tokens)
            # Rows written before postings were capped have every stored token posted:
            # all of them that are no longer posted go.
            old_tokens.extend((t, seq) for t in set(had_tokens).difference(posted))
            had = dedupe.posted_tokens(had_tokens)
            # A token already too common to look up gains nothing from more postings.
            new_tokens.extend((t, seq) for t in posted
                              if t not in had and t not in self._common_tokens)
            first_seen = before.first_seen_at if before else stamp
            written.append(dedupe.DedupeRow(
                key=row.key, seq=seq, source_id=row.source_id, first_seen_at=first_seen,
                moment=row.published or first_seen, match_url=keys.match_url,
                norm_title=keys.norm_title, shingles=keys.shingles,
                markers=before.markers if before else {}, tokens=keys.tokens))
        conn.executemany(_UPSERT_ENTRY, upserts)
        conn.executemany(_UPSERT_VERSION, versions)
        conn.executemany(_TOUCH_ENTRY, touches)
        conn.executemany("DELETE FROM dedupe_text WHERE token = ? AND entry = ?", old_tokens)
        new_tokens.sort()  # neighbouring inserts land on the same pages
        conn.executemany("INSERT OR IGNORE INTO dedupe_text (token, entry) VALUES (?, ?)",
                         new_tokens)
        values = list(outcomes.values())
        counts = ApplyCounts(created=values.count("created"),
                             updated=values.count("updated"),
                             unchanged=values.count("unchanged"), keys=outcomes)
        return counts, written

    @staticmethod
    def _fetch_values(fetch: FetchRecord) -> tuple[Any, ...]:
        return (fetch.source_id, format_time(fetch.started_at), fetch.url, fetch.outcome,
                fetch.http_status, fetch.created, fetch.updated, fetch.unchanged,
                fetch.skipped, fetch.error, round(fetch.duration_ms, 3), fetch.bytes)

    def entries(self, *, source_id: str | None = None, limit: int | None = None
                ) -> list[StoredEntry]:
        """Stored entries, newest first (by published, then first seen)."""
        sql = "SELECT * FROM entries"
        args: list[Any] = []
        if source_id is not None:
            sql += " WHERE source_id = ?"
            args.append(source_id)
        sql += " ORDER BY COALESCE(NULLIF(published, ''), first_seen_at) DESC, id"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        try:
            rows = self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read entries: {exc}", source_id=source_id) from exc
        return [_entry_from_row(r) for r in rows]

    def entry(self, key: str) -> StoredEntry | None:
        """The entry with this key, if stored."""
        row = self._conn.execute("SELECT * FROM entries WHERE id = ?", (key,)).fetchone()
        return _entry_from_row(row) if row else None

    def versions(self, key: str) -> list[StoredVersion]:
        """Every version an entry has had, oldest first."""
        rows = self._conn.execute(
            "SELECT * FROM entry_versions WHERE entry_seq = "
            "(SELECT seq FROM entries WHERE id = ?) ORDER BY first_seen_at, id",
            (key,)).fetchall()
        names = [f.name for f in fields(StoredVersion)]
        return [StoredVersion(**{n: r["entry_id" if n == "key" else n] for n in names})
                for r in rows]

    def count(self, table: str) -> int:
        """Number of rows in one of the store's tables."""
        if table not in ("sources", "entries", "entry_versions", "fetches"):
            raise ValueError(f"unknown table {table!r}")
        return int(self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _entry_from_row(row: sqlite3.Row) -> StoredEntry:
    names = [f.name for f in fields(StoredEntry)]
    return StoredEntry(**{n: row["id" if n == "key" else n] for n in names})
