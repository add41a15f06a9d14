"""The SQLite reads: source states, entries, versions, and the reading commands' queries.

Listings are ordered by :data:`~signal_feeds.store.sqlite.schema.ENTRY_ORDER`,
the order the reading indexes are built on, so a page is an index walk, never a
sort.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from signal_feeds.errors import QueryError, StoreError
from signal_feeds.records import (
    SourceState,
    StoredEntry,
    StoredVersion,
    cache_headers_from_json,
)
from signal_feeds.store.protocol import TABLES, DuplicateLink, Table
from signal_feeds.store.sqlite import search as fulltext
from signal_feeds.store.sqlite.schema import ENTRY_ORDER, ENTRY_ORDER_EXPR
from signal_feeds.store.views import MOST_ROWS, VIEW_FIELDS, EntryView, SearchHit, row_limit
from signal_feeds.timeutil import parse_time

__all__ = [
    "LOOKUP_SQL",
    "after_queries",
    "count",
    "duplicates_of",
    "entries",
    "entries_query",
    "entries_with_link",
    "entry",
    "entry_view",
    "entry_views",
    "keys_starting_with",
    "search",
    "source_states",
    "state_for_url",
    "stored_source_state",
    "versions",
]

_CHUNK = 500  # bound on SQL variables per IN (...)
_ENTRY_FIELDS = [f.name for f in fields(StoredEntry)]
_VERSION_FIELDS = [f.name for f in fields(StoredVersion)]


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
        feed_title=row["feed_title"] or "", body_skipped=row["body_skipped"] or 0,
        body_skip_reasons=tuple(json.loads(row["body_skip_reasons"] or "[]")),
        retry_host=row["retry_host"] or "",
        cache_headers=cache_headers_from_json(row["cache_headers"]),
    )


def state_for_url(stored: SourceState | None, source_id: str, url: str) -> SourceState:
    """The stored state if it is for ``url``; otherwise a fresh one (validators of
    another URL must not be sent to this one)."""
    if stored is None or stored.url != url:
        return SourceState(source_id=source_id, url=url)
    return stored


def stored_source_state(conn: sqlite3.Connection, source_id: str) -> SourceState | None:
    """The stored state of one source, if any."""
    row = conn.execute("SELECT * FROM sources WHERE id = ?", (source_id,)).fetchone()
    return _state_from_row(row) if row else None


def source_states(conn: sqlite3.Connection) -> list[SourceState]:
    """Every stored source state, ordered by id."""
    return [_state_from_row(r)
            for r in conn.execute("SELECT * FROM sources ORDER BY id").fetchall()]


def _entry_from_row(row: sqlite3.Row) -> StoredEntry:
    return StoredEntry(**{n: row["id" if n == "key" else n] for n in _ENTRY_FIELDS})


def entries(conn: sqlite3.Connection, *, source_id: str | None, limit: int | None,
            include_duplicates: bool) -> list[StoredEntry]:
    """Stored entries, newest first (see the protocol)."""
    sql, args = entries_query(source_id=source_id, since=None, limit=limit,
                              include_duplicates=include_duplicates)
    return [_entry_from_row(r) for r in conn.execute(sql, args).fetchall()]


def entry(conn: sqlite3.Connection, key: str) -> StoredEntry | None:
    """The entry with this key, if stored."""
    row = conn.execute("SELECT * FROM entries WHERE id = ?", (key,)).fetchone()
    return _entry_from_row(row) if row else None


def versions(conn: sqlite3.Connection, key: str) -> list[StoredVersion]:
    """Every version an entry has had, oldest first."""
    rows = conn.execute(
        "SELECT * FROM entry_versions WHERE entry_seq = "
        "(SELECT seq FROM entries WHERE id = ?) ORDER BY first_seen_at, id",
        (key,)).fetchall()
    return [StoredVersion(**{n: r["entry_id" if n == "key" else n] for n in _VERSION_FIELDS})
            for r in rows]


def count(conn: sqlite3.Connection, table: Table) -> int:
    """Number of rows in one of the store's tables."""
    if table not in TABLES:  # the name goes into the SQL text: only known names
        raise StoreError(f"cannot count {table!r}: not one of the store's tables "
                         f"({', '.join(TABLES)})")
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


# -- the reading commands ------------------------------------------------------------


def _view(row: sqlite3.Row) -> EntryView:
    values: dict[str, Any] = {n: row["id" if n == "key" else n] or "" for n in VIEW_FIELDS}
    return EntryView(**values)


def _selection(*, source_id: str | None, since: str | None,
               include_duplicates: bool) -> tuple[list[str], list[Any]]:
    """The conditions (over ``entries``) and arguments of a reading selection."""
    where: list[str] = []
    args: list[Any] = []
    if source_id is not None:
        where.append("source_id = ?")
        args.append(source_id)
        if not include_duplicates:
            where.append("(duplicate_of = '' OR duplicate_of NOT IN "
                         "(SELECT id FROM entries WHERE source_id = ?))")
            args.append(source_id)
    elif not include_duplicates:
        where.append("duplicate_of = ''")
    if since is not None:
        where.append(f"{ENTRY_ORDER_EXPR} >= ?")
        args.append(since)
    return where, args


def entries_query(*, source_id: str | None, since: str | None, limit: int | None,
                  include_duplicates: bool) -> tuple[str, list[Any]]:
    """The SQL of :func:`entry_views` (kept apart so tests can check its query plan)."""
    where, args = _selection(source_id=source_id, since=since,
                             include_duplicates=include_duplicates)
    sql = "SELECT * FROM entries"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" ORDER BY {ENTRY_ORDER}"
    if limit is not None:
        sql += " LIMIT ?"
        args.append(row_limit(limit))
    return sql, args


def after_queries(date: str, seq: int, *, source_id: str | None, since: str | None,
                  limit: int, include_duplicates: bool) -> list[tuple[str, list[Any]]]:
    """The SQL of :func:`entry_views` after the entry of ``date`` (its
    :data:`ENTRY_ORDER_EXPR`) and ``seq``: the rest of that date, then the older dates.
    Each is a seek in the order's index; one row-value comparison would walk the index
    from the top at every page (SQLite does not seek on it over an expression)."""
    where, args = _selection(source_id=source_id, since=since,
                             include_duplicates=include_duplicates)
    head = "SELECT * FROM entries WHERE " + " AND ".join([*where, ""])
    return [(f"{head}{ENTRY_ORDER_EXPR} = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
             [*args, date, seq, limit]),
            (f"{head}{ENTRY_ORDER_EXPR} < ? ORDER BY {ENTRY_ORDER} LIMIT ?",
             [*args, date, limit])]


def entry_views(conn: sqlite3.Connection, *, source_id: str | None, since: str | None,
                limit: int | None, include_duplicates: bool,
                after: str | None = None) -> list[EntryView]:
    """Entries newest first, as readers see them (see the protocol)."""
    if after is None:
        sql, args = entries_query(source_id=source_id, since=since, limit=limit,
                                  include_duplicates=include_duplicates)
        return [_view(r) for r in conn.execute(sql, args).fetchall()]
    where = conn.execute(f"SELECT {ENTRY_ORDER_EXPR}, seq FROM entries WHERE id = ?",
                         (after,)).fetchone()
    if where is None:
        raise QueryError(f"no entry {after!r} to list after", query=after)
    left = MOST_ROWS if limit is None else row_limit(limit)
    views: list[EntryView] = []
    for sql, args in after_queries(where[0], where[1], source_id=source_id, since=since,
                                   limit=left, include_duplicates=include_duplicates):
        if len(views) < left:
            args[-1] = left - len(views)
            views.extend(_view(r) for r in conn.execute(sql, args).fetchall())
    return views


def search(conn: sqlite3.Connection, query: str, *, source_id: str | None,
           since: str | None, limit: int, include_duplicates: bool) -> list[SearchHit]:
    """Entries matching an FTS5 query, best first (see the protocol)."""
    query = fulltext.checked_query(conn, query)
    where, args = _selection(source_id=source_id, since=since,
                             include_duplicates=include_duplicates)
    ranked = fulltext.search_keys(conn, query, where=where, args=args, limit=row_limit(limit))
    if not ranked:
        return []
    seqs = [seq for seq, _ in ranked]
    found = fulltext.snippets(conn, query, seqs)
    marks = ",".join("?" * len(seqs))
    views = {int(r["seq"]): _view(r) for r in conn.execute(
        f"SELECT * FROM entries WHERE seq IN ({marks})", seqs)}
    return [SearchHit(entry=views[seq], snippet=found.get(seq, ""), score=score)
            for seq, score in ranked if seq in views]


def entry_view(conn: sqlite3.Connection, key: str) -> EntryView | None:
    """One entry as readers see it."""
    row = conn.execute("SELECT * FROM entries WHERE id = ?", (key,)).fetchone()
    return _view(row) if row else None


def duplicates_of(conn: sqlite3.Connection, keys: Sequence[str]) -> list[DuplicateLink]:
    """The rows whose ``duplicate_of`` is one of ``keys``."""
    found: list[DuplicateLink] = []
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start:start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found.extend(DuplicateLink(*r) for r in conn.execute(
            f"SELECT id, source_id, duplicate_of FROM entries WHERE duplicate_of IN ({marks})",
            chunk))
    return found


def keys_starting_with(conn: sqlite3.Connection, prefix: str, *, limit: int) -> list[str]:
    """Entry keys that start with ``prefix`` (lower-case hex), in order."""
    # Hex digits sort below "g": [prefix, prefix + "g") is exactly the keys it starts.
    return [str(r[0]) for r in conn.execute(
        "SELECT id FROM entries WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (prefix, prefix + "g", row_limit(limit)))]


LOOKUP_SQL = ("SELECT * FROM entries WHERE (match_url = ? AND match_url != '') OR url = ? "
              "ORDER BY first_seen_at, id")


def entries_with_link(conn: sqlite3.Connection, match_url: str, url: str
                      ) -> list[EntryView]:
    """Entries with this match URL (when not empty) or exactly this link, oldest first."""
    return [_view(r) for r in conn.execute(LOOKUP_SQL, (match_url, url)).fetchall()]
