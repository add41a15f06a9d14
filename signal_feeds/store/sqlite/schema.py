"""The SQLite schema and its numbered migrations.

``PRAGMA user_version`` holds the schema version. :func:`create_schema` builds a new
file and upgrades an older one in place, one numbered step at a time; every step is
safe to run on a file that already has it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from signal_feeds.store.sqlite.connection import (
    foreign_reason,
    foreign_tables,
    not_a_file,
    user_tables,
)
from signal_feeds.store.sqlite.dedupe import refresh_match_keys, remark
from signal_feeds.store.sqlite.search import create_search_index

__all__ = ["ENTRY_ORDER", "ENTRY_ORDER_EXPR", "SCHEMA_VERSION", "create_schema",
           "is_signal_database", "not_signals", "schema_version"]

SCHEMA_VERSION = 14


def is_signal_database(path: Path) -> bool:
    """True unless the file at ``path`` is known not to be Signal's: empty, another kind
    of file, or another program's database (see :func:`not_signals`). A file that
    cannot be looked into now (locked) counts as Signal's: opening it as a store then
    waits for it as long as ``busy_timeout`` allows, and says so."""
    return not not_signals(path, empty_ok=False)


#: The first 16 bytes of every SQLite database file.
_SQLITE_HEADER = b"SQLite format 3\x00"


def not_signals(path: Path, *, empty_ok: bool = True) -> str:
    """Why the file at ``path`` is not a database Signal may use, or ``""`` when it is:
    missing (it would be made), Signal's own, or empty (a file of no bytes, or a SQLite
    database without tables; ``empty_ok=False`` refuses that too, for a read). Opening a
    store would write Signal's tables into another program's database. Reads the file
    and changes nothing."""
    if not_a_file(path):
        return ""  # a named pipe would wait for a writer here; opening it says why
    try:
        with open(path, "rb") as file:
            head = file.read(len(_SQLITE_HEADER))
    except OSError:  # missing, or unreadable: opening it says why
        return ""
    if head and head != _SQLITE_HEADER:
        return "not a SQLite database (another kind of file, or a damaged one)"
    tables: set[str] = set()
    if head:
        try:
            # No wait (timeout 0): a check before opening must not add its own wait to
            # the store's busy_timeout, on a file another program holds locked.
            with contextlib.closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro",
                                                    uri=True, timeout=0)) as conn:
                tables = user_tables(conn)
        except sqlite3.Error:
            # Locked, or it needs its -shm made: the store looks again when it opens
            # the file, waiting as busy_timeout allows (Connection, Store).
            return ""
    if not tables:
        return "" if empty_ok else "empty: it holds no Signal database yet"
    foreign = foreign_tables(tables)
    return foreign_reason(foreign) if foreign else ""


def schema_version(conn: sqlite3.Connection) -> int:
    """The version a file was built or last upgraded to (0 for a new file)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the tables of a new file, or upgrade an older one to SCHEMA_VERSION
    (inside the caller's transaction)."""
    # sqlite-utils writes the tables' SQL (only on first use: it is slow to import). Only
    # the text: its Table.create commits the connection's transaction before 4.0 (a `with
    # conn:`), which left a new file half built and the caller's COMMIT failing.
    import sqlite_utils

    before = schema_version(conn)

    db = sqlite_utils.Database(conn)

    def create(table: str, columns: dict[str, type], not_null: Iterable[str] = (),
               defaults: dict[str, object] | None = None) -> None:
        conn.execute(db.create_table_sql(table, columns, pk="id", not_null=not_null,
                                         defaults=defaults, if_not_exists=True))

    create("sources",
           {"id": str, "url": str, "fetch_url": str, "etag": str, "last_modified": str,
            "body_digest": str, "body_normalizer_version": int, "body_entries": int,
            "ttl_seconds": int, "status": str,
            "http_status": int, "last_fetch_at": str, "last_success_at": str,
            "next_due_at": str, "retry_after": str, "error_count": int, "last_error": str,
            "moved_to": str, "gone": int},
           not_null={"url"}, defaults={"error_count": 0, "gone": 0, "status": "new"})
    create("entries",
           {"id": str, "source_id": str, "remote_id": str, "url": str, "title": str,
            "published": str, "updated": str, "author": str, "summary": str, "content": str,
            "fingerprint": str, "content_fingerprint": str, "first_seen_at": str,
            "last_seen_at": str, "normalizer_version": int},
           not_null={"source_id", "fingerprint", "first_seen_at", "last_seen_at"})
    create("entry_versions",
           {"id": int, "entry_id": str, "fingerprint": str, "content_fingerprint": str,
            "title": str, "url": str, "published": str, "updated": str,
            "first_seen_at": str, "last_seen_at": str, "normalizer_version": int},
           not_null={"entry_id", "fingerprint"})
    create("fetches",
           {"id": int, "source_id": str, "started_at": str, "url": str, "outcome": str,
            "http_status": int, "created": int, "updated": int, "unchanged": int,
            "skipped": int, "error": str, "duration_ms": float, "bytes": int})
    conn.execute("CREATE INDEX IF NOT EXISTS entries_url ON entries (url)")
    conn.execute("CREATE INDEX IF NOT EXISTS fetches_source_started "
                 "ON fetches (source_id, started_at)")
    _upgrade_to_v2(conn)
    _upgrade_to_v3(conn)
    _upgrade_to_v4(conn)
    _upgrade_to_v5(conn)
    _upgrade_to_v6(conn)
    if 0 < before < 6:
        # Up to version 5 a story's canonical copy was the one stored first, so a later
        # report could stand for the original post; stored stories follow today's rule
        # (earliest by its own date, see identity.matching.canonical_order) at once, not
        # after a `signal dedupe` nobody knew to run. Version 1 had no markers at all:
        # the version-4 step has just computed its match keys, so it is marked here too.
        # Before the change log is started (version 7), which records the markers.
        remark(conn)
    _upgrade_to_v7(conn)
    _upgrade_to_v8(conn)
    _rebuild_order_indexes(conn)  # versions 9 and 10
    for name, target in _MARKED_KEY_INDEXES.items():  # version 11
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")
    _upgrade_to_v12(conn)
    _upgrade_to_v13(conn)
    if "cache_headers" not in _columns(conn, "sources"):  # version 14
        conn.execute(f"ALTER TABLE sources ADD COLUMN {_V14_CACHE_HEADERS}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


#: Newest-first order of the reading commands: an entry's own date (published, else
#: updated), else when Signal first saw it; a date later than when Signal first saw the
#: entry (a typo such as 2099, a wrong time zone) counts as that moment, so it cannot
#: hold the top of the list. Both are ISO 8601 UTC text, which sorts as time. The
#: indexes below are built on exactly this expression so that SQLite can walk them
#: instead of sorting.
ENTRY_ORDER_EXPR = ("min(COALESCE(NULLIF(published, ''), NULLIF(updated, ''), first_seen_at), "
                    "first_seen_at)")
#: The whole reading order: among entries of one date (an undated feed's, first seen
#: together; a feed dated by the day) the feed's own order, first item first, and a
#: later response's entries before an earlier one's (the writer numbers ``seq`` so).
ENTRY_ORDER = f"{ENTRY_ORDER_EXPR} DESC, seq DESC"

# Version 2: cross-source duplicate markers (one per detection channel), the derived
# duplicate_of, the match keys they are computed from, and the indexes reads rely on.
_V2_ENTRY_COLUMNS = ("match_url", "norm_title", "dup_link", "dup_title", "dup_text",
                     "duplicate_of")
_V2_INDEXES = {
    "entries_match_url": "entries (match_url)",
    "entries_norm_title": "entries (norm_title)",
    # In the reading order of version 2 (newest first, then key), so that a page was an
    # index walk; today's order is _ORDER_INDEXES.
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
    # Prefix tokens of each entry's text shingles (see identity/matching.py): an index
    # lookup finds every candidate for a near-identical text without comparing all pairs.
    conn.execute("DROP TABLE IF EXISTS dedupe_text")  # version 3 named entries by key
    conn.execute("CREATE TABLE dedupe_text (token INTEGER NOT NULL, "
                 "entry INTEGER NOT NULL, PRIMARY KEY (token, entry)) WITHOUT ROWID")
    refresh_match_keys(conn)


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


# Version 6: why entries were skipped, on each fetch row (a JSON array of strings, ``[]``
# for none); the feed's own title and the config's order of the sources (the tie-break
# of the canonical copy of a story); the reading order by published, then updated, then
# first seen (the indexes on the order expression are rebuilt); the full-text index.
def _upgrade_to_v6(conn: sqlite3.Connection) -> None:
    if "skip_reasons" not in _columns(conn, "fetches"):
        conn.execute("ALTER TABLE fetches ADD COLUMN skip_reasons TEXT NOT NULL DEFAULT '[]'")
    if "feed_title" not in _columns(conn, "sources"):
        conn.execute("ALTER TABLE sources ADD COLUMN feed_title TEXT NOT NULL DEFAULT ''")
    conn.execute("CREATE TABLE IF NOT EXISTS source_order (source_id TEXT PRIMARY KEY, "
                 "position INTEGER NOT NULL) WITHOUT ROWID")
    _rebuild_order_indexes(conn)
    # A search checks each full-text match against the reading filters: from this
    # index alone, without reading the entry's row (its summary and content).
    conn.execute("CREATE INDEX IF NOT EXISTS entries_search_filter "
                 "ON entries (seq, duplicate_of, source_id)")
    create_search_index(conn)


# Version 7: the change log (see change_log.py). One row per created entry and per new
# version, numbered by AUTOINCREMENT: a committed position is never handed out again,
# even after its row is gone. A row names its version by ``entry_versions.id`` (an
# INTEGER PRIMARY KEY, kept by VACUUM) instead of copying the title, link and dates.
# Self-contained: it needs only the version-5 tables, and it runs once (the table's
# presence says whether it already ran, on a version-5 or a version-6 file).
def _upgrade_to_v7(conn: sqlite3.Connection) -> None:
    if _columns(conn, "changes"):
        return
    from signal_feeds.store.cursor import new_database_id
    from signal_feeds.timeutil import format_time, utcnow

    conn.execute("CREATE TABLE changes (position INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "version_id INTEGER NOT NULL, source_id TEXT NOT NULL, "
                 "kind TEXT NOT NULL CHECK (kind IN ('created', 'updated')), "
                 "previous_fingerprint TEXT NOT NULL DEFAULT '', "
                 "duplicate_of TEXT NOT NULL DEFAULT '', changed_at TEXT NOT NULL)")
    # `signal changes --source ID` walks one source's positions, not the whole log.
    conn.execute("CREATE INDEX changes_source ON changes (source_id, position)")
    conn.execute("CREATE TABLE change_log (id INTEGER PRIMARY KEY CHECK (id = 1), "
                 "database_id TEXT NOT NULL, created_at TEXT NOT NULL)")
    conn.execute("INSERT INTO change_log (id, database_id, created_at) VALUES (1, ?, ?)",
                 (new_database_id(), format_time(utcnow())))
    # Entries stored before the log existed are in it too, as created, in the order
    # they were first stored (with their current version): a consumer starting at the
    # beginning sees everything the database holds. Their earlier versions are not.
    conn.execute(
        "INSERT INTO changes (version_id, source_id, kind, duplicate_of, changed_at) "
        "SELECT v.id, e.source_id, 'created', e.duplicate_of, e.first_seen_at "
        "FROM entries AS e JOIN entry_versions AS v ON v.entry_seq = e.seq "
        "AND v.fingerprint = e.fingerprint "
        "AND v.content_fingerprint IS e.content_fingerprint "
        "ORDER BY e.first_seen_at, e.seq")


# Version 8: leases, for several `signal fetch` processes sharing one file (see
# signal_feeds/store/leases.py): who holds a source, since when, until when. NULL when
# nobody does; the state upsert never touches them.
_V8_LEASE_COLUMNS = ("lease_owner", "leased_at", "lease_expires")


def _upgrade_to_v8(conn: sqlite3.Connection) -> None:
    have = _columns(conn, "sources")
    for column in _V8_LEASE_COLUMNS:
        if column not in have:
            conn.execute(f"ALTER TABLE sources ADD COLUMN {column} TEXT")


# Version 9: a date later than when the entry was first seen no longer sorts as itself
# (see ENTRY_ORDER_EXPR); versions 2 and 6 had other orders. Version 10: entries of one
# date in the feed's order (see ENTRY_ORDER), no longer by key. Indexes already built
# on today's order are kept, so the step is cheap to repeat.
_ORDER_INDEXES = {
    "entries_shown_order": f"entries (duplicate_of, {ENTRY_ORDER})",
    "entries_source_order": f"entries (source_id, {ENTRY_ORDER})",
    "entries_order": f"entries ({ENTRY_ORDER})",
}


def _rebuild_order_indexes(conn: sqlite3.Connection) -> None:
    for name, target in _ORDER_INDEXES.items():
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?",
                           (name,)).fetchone()
        if sql is not None and not sql[0].endswith(f"ON {target}"):
            conn.execute(f"DROP INDEX {name}")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {target}")


# Version 11: a link or title found too common to match on still links the rows it
# linked while it was rarer (see store/marking.py). They are found among the marked rows
# only, which these hold: not by reading every row that shares the key, which for a
# site's home page given as every item's link grows with each run.
_MARKED_KEY_INDEXES = {
    "entries_link_marked": "entries (match_url) WHERE dup_link != ''",
    "entries_title_marked": "entries (norm_title) WHERE dup_title != ''",
}


# Version 12: what the last stored body skipped, and why, so that a byte-identical body
# (not parsed again) reports it again.
def _upgrade_to_v12(conn: sqlite3.Connection) -> None:
    have = _columns(conn, "sources")
    if "body_skipped" not in have:
        conn.execute("ALTER TABLE sources ADD COLUMN body_skipped INTEGER NOT NULL DEFAULT 0")
    if "body_skip_reasons" not in have:
        conn.execute("ALTER TABLE sources ADD COLUMN body_skip_reasons TEXT NOT NULL "
                     "DEFAULT '[]'")


# Version 13: the host that asked for the Retry-After (the one that answered, after
# redirects): in later runs its other sources wait the pause out too.
def _upgrade_to_v13(conn: sqlite3.Connection) -> None:
    if "retry_host" in _columns(conn, "sources"):
        return
    conn.execute("ALTER TABLE sources ADD COLUMN retry_host TEXT NOT NULL DEFAULT ''")
    # A pause already running was told by the host of the last fetch row's address.
    told = conn.execute(
        "SELECT s.id, (SELECT f.url FROM fetches AS f WHERE f.source_id = s.id "
        "ORDER BY f.id DESC LIMIT 1) FROM sources AS s WHERE s.status = 'retry_later' "
        "AND s.retry_after IS NOT NULL").fetchall()
    conn.executemany("UPDATE sources SET retry_host = ? WHERE id = ?",
                     [((urlsplit(url).hostname or "") if url else "", sid)
                      for sid, url in told])


# Version 14: the stored response's Cache-Control and Expires, which a 304 without them
# keeps in force (RFC 9111 §4.3.4). Empty for a source until its next 200.
_V14_CACHE_HEADERS = "cache_headers TEXT NOT NULL DEFAULT '[]'"
