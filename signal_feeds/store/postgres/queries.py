"""The PostgreSQL reads: source states, entries, versions, and the reading commands'
queries, with the same selection and order as the SQLite store's."""

from __future__ import annotations

import json
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
from signal_feeds.store.fulltext import searchable_text
from signal_feeds.store.postgres.schema import ENTRY_ORDER_EXPR
from signal_feeds.store.postgres.search import RANK_WEIGHTS, to_tsquery
from signal_feeds.store.postgres.snippets import snippet
from signal_feeds.store.protocol import TABLES, DuplicateLink, Table
from signal_feeds.store.views import MOST_ROWS, VIEW_FIELDS, EntryView, SearchHit, row_limit

__all__ = ["count", "duplicates_of", "entries", "entries_with_link", "entry", "entry_view",
           "entry_views", "keys_starting_with", "search", "source_states",
           "stored_source_state", "versions"]

_ENTRY_FIELDS = [f.name for f in fields(StoredEntry)]
_VERSION_FIELDS = [f.name for f in fields(StoredVersion)]
_ENTRY_SELECT = "SELECT " + ", ".join("id" if n == "key" else n for n in _ENTRY_FIELDS)
_VIEW_SELECT = "SELECT " + ", ".join("id" if n == "key" else n for n in VIEW_FIELDS
                                     if n not in ("duplicates", "also_in"))
_VIEW_NAMES = [n for n in VIEW_FIELDS if n not in ("duplicates", "also_in")]
_STATE_SELECT = ("SELECT id, url, fetch_url, etag, last_modified, body_digest, "
                 "body_normalizer_version, body_entries, ttl_seconds, status, http_status, "
                 "last_fetch_at, last_success_at, next_due_at, retry_after, error_count, "
                 "last_error, moved_to, gone, feed_title, body_skipped, body_skip_reasons, "
                 "retry_host, cache_headers FROM sources")


def _state(r: Sequence[Any]) -> SourceState:
    return SourceState(
        source_id=r[0], url=r[1], fetch_url=r[2] or "", etag=r[3] or "",
        last_modified=r[4] or "", body_digest=r[5] or "", body_normalizer_version=r[6] or 0,
        body_entries=r[7] or 0, ttl_seconds=r[8], status=r[9] or "new", http_status=r[10],
        last_fetch_at=r[11], last_success_at=r[12], next_due_at=r[13], retry_after=r[14],
        error_count=r[15] or 0, last_error=r[16] or "", moved_to=r[17] or "",
        gone=bool(r[18]), feed_title=r[19] or "", body_skipped=r[20] or 0,
        body_skip_reasons=tuple(json.loads(r[21] or "[]")), retry_host=r[22] or "",
        cache_headers=cache_headers_from_json(r[23]))


def stored_source_state(conn: Any, source_id: str) -> SourceState | None:
    """The stored state of one source, if any."""
    row = conn.execute(_STATE_SELECT + " WHERE id = %s", (source_id,)).fetchone()
    return _state(row) if row else None


def source_states(conn: Any) -> list[SourceState]:
    """Every stored source state, ordered by id."""
    return [_state(r) for r in conn.execute(_STATE_SELECT + " ORDER BY id COLLATE \"C\"")]


def _entry(r: Sequence[Any]) -> StoredEntry:
    return StoredEntry(**dict(zip(_ENTRY_FIELDS, r, strict=True)))


def _view(r: Sequence[Any]) -> EntryView:
    values: dict[str, Any] = {n: v or "" for n, v in zip(_VIEW_NAMES, r, strict=True)}
    return EntryView(**values)


def _selection(*, source_id: str | None, since: str | None,
               include_duplicates: bool) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    args: list[Any] = []
    if source_id is not None:
        where.append("source_id = %s")
        args.append(source_id)
        if not include_duplicates:
            where.append("(duplicate_of = '' OR duplicate_of NOT IN "
                         "(SELECT id FROM entries WHERE source_id = %s))")
            args.append(source_id)
    elif not include_duplicates:
        where.append("duplicate_of = ''")
    if since is not None:
        where.append(f"{ENTRY_ORDER_EXPR} >= %s")
        args.append(since)
    return where, args


# Text compared byte by byte, as SQLite does: the same order whatever the server's locale.
# Entries of one date in the feed's order (see the schema's version 5).
_DATE = f"({ENTRY_ORDER_EXPR}) COLLATE \"C\""
_ORDER = f"ORDER BY {_DATE} DESC, seq DESC"


def _listing(select: str, *, source_id: str | None, since: str | None, limit: int | None,
             include_duplicates: bool) -> tuple[str, list[Any]]:
    where, args = _selection(source_id=source_id, since=since,
                             include_duplicates=include_duplicates)
    sql = f"{select} FROM entries"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += f" {_ORDER}"
    if limit is not None:
        sql += " LIMIT %s"
        args.append(row_limit(limit))
    return sql, args


def entries(conn: Any, *, source_id: str | None, limit: int | None,
            include_duplicates: bool) -> list[StoredEntry]:
    """Stored entries, newest first (see the protocol)."""
    sql, args = _listing(_ENTRY_SELECT, source_id=source_id, since=None, limit=limit,
                         include_duplicates=include_duplicates)
    return [_entry(r) for r in conn.execute(sql, args)]


def entry(conn: Any, key: str) -> StoredEntry | None:
    """The entry with this key, if stored."""
    row = conn.execute(f"{_ENTRY_SELECT} FROM entries WHERE id = %s", (key,)).fetchone()
    return _entry(row) if row else None


def versions(conn: Any, key: str) -> list[StoredVersion]:
    """Every version an entry has had, oldest first."""
    columns = ", ".join("entry_id" if n == "key" else n for n in _VERSION_FIELDS)
    rows = conn.execute(
        f"SELECT {columns} FROM entry_versions WHERE entry_seq = "
        "(SELECT seq FROM entries WHERE id = %s) ORDER BY first_seen_at COLLATE \"C\", id",
        (key,)).fetchall()
    return [StoredVersion(**dict(zip(_VERSION_FIELDS, r, strict=True))) for r in rows]


def count(conn: Any, table: Table) -> int:
    """Number of rows in one of the store's tables."""
    if table not in TABLES:  # the name goes into the SQL text: only known names
        raise StoreError(f"cannot count {table!r}: not one of the store's tables "
                         f"({', '.join(TABLES)})")
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def entry_views(conn: Any, *, source_id: str | None, since: str | None, limit: int | None,
                include_duplicates: bool, after: str | None = None) -> list[EntryView]:
    """Entries newest first, as readers see them (see the protocol)."""
    if after is None:
        sql, args = _listing(_VIEW_SELECT, source_id=source_id, since=since, limit=limit,
                             include_duplicates=include_duplicates)
        return [_view(r) for r in conn.execute(sql, args)]
    where = conn.execute(f"SELECT {_DATE}, seq FROM entries WHERE id = %s",
                         (after,)).fetchone()
    if where is None:
        raise QueryError(f"no entry {after!r} to list after", query=after)
    selection, args = _selection(source_id=source_id, since=since,
                                 include_duplicates=include_duplicates)
    head = f"{_VIEW_SELECT} FROM entries WHERE " + " AND ".join([*selection, ""])
    left = MOST_ROWS if limit is None else row_limit(limit)
    # The rest of the entry's date, then the older dates: each a seek in the order's
    # index, as in SQLite (see its after_queries).
    views = [_view(r) for r in conn.execute(
        f"{head}{_DATE} = %s AND seq < %s ORDER BY seq DESC LIMIT %s",
        [*args, where[0], where[1], left])]
    if len(views) < left:
        views.extend(_view(r) for r in conn.execute(
            f"{head}{_DATE} < %s {_ORDER} LIMIT %s", [*args, where[0], left - len(views)]))
    return views


def search(conn: Any, query: str, *, source_id: str | None, since: str | None, limit: int,
           include_duplicates: bool) -> list[SearchHit]:
    """Entries matching an FTS5 query, best first (see the protocol)."""
    translated = to_tsquery(query)
    if translated.tsquery is None:
        return []
    where, args = _selection(source_id=source_id, since=since,
                             include_duplicates=include_duplicates)
    sql = (f"{_VIEW_SELECT}, ts_rank(%s::real[], search_vector, q, 1) AS score "
           "FROM entries, CAST(%s AS tsquery) AS q WHERE search_vector @@ q")
    for condition in where:
        sql += f" AND {condition}"
    sql += " ORDER BY score DESC, seq DESC LIMIT %s"
    rows = conn.execute(sql, [RANK_WEIGHTS, translated.tsquery, *args, row_limit(limit)])
    hits = []
    for r in rows:
        view = _view(r[:-1])
        text = snippet([view.title, searchable_text(view.summary),
                        searchable_text(view.content)], translated.terms)
        # Negated, as SQLite's bm25: lower is better on both backends.
        hits.append(SearchHit(entry=view, snippet=text, score=-float(r[-1])))
    return hits


def entry_view(conn: Any, key: str) -> EntryView | None:
    """One entry as readers see it."""
    row = conn.execute(f"{_VIEW_SELECT} FROM entries WHERE id = %s", (key,)).fetchone()
    return _view(row) if row else None


def duplicates_of(conn: Any, keys: Sequence[str]) -> list[DuplicateLink]:
    """The rows whose ``duplicate_of`` is one of ``keys``."""
    if not keys:
        return []
    return [DuplicateLink(*r) for r in conn.execute(
        "SELECT id, source_id, duplicate_of FROM entries WHERE duplicate_of = ANY(%s)",
        (list(keys),))]


def keys_starting_with(conn: Any, prefix: str, *, limit: int) -> list[str]:
    """Entry keys that start with ``prefix`` (lower-case hex), in order."""
    return [str(r[0]) for r in conn.execute(
        "SELECT id FROM entries WHERE id COLLATE \"C\" >= %s AND id COLLATE \"C\" < %s "
        "ORDER BY id COLLATE \"C\" LIMIT %s", (prefix, prefix + "g", row_limit(limit)))]


def entries_with_link(conn: Any, match_url: str, url: str) -> list[EntryView]:
    """Entries with this match URL (when not empty) or exactly this link, oldest first."""
    return [_view(r) for r in conn.execute(
        f"{_VIEW_SELECT} FROM entries WHERE (match_url = %s AND match_url != '') OR url = %s "
        "ORDER BY first_seen_at COLLATE \"C\", id COLLATE \"C\"", (match_url, url))]
