"""Full-text search in SQLite: an FTS5 table over the entries' title, summary and content.

``entries_fts`` is an ordinary FTS5 table (it keeps its own copy of the indexed text)
whose rowid is the entry's ``seq``. Summaries and contents are stored as HTML; the
index holds their text (:func:`~signal_feeds.store.fulltext.searchable_text`), so the
index cannot be an external-content table over ``entries`` (``snippet()`` would read
the HTML back and highlight the wrong words), and triggers cannot fill it (stripping
tags in SQL would need a function registered on every connection, including the
``sqlite3`` shell's). The write path keeps it, in the response's own transaction: a
created entry is indexed, a changed one re-indexed, so the index is never stale. The
rows go in at the end of the transaction (of a batch of responses), not inside each
response's savepoint: FTS5 writes out its pending terms whenever a savepoint opens.

Ranking is FTS5's ``bm25``, with a match in the title worth :data:`TITLE_WEIGHT`
matches in the text. The table's ``rank`` is set to the same (for ``ORDER BY rank`` in
the ``sqlite3`` shell); :func:`search_keys` names ``bm25`` itself, which FTS5 computes
a third faster than its ``rank`` column (see benchmarks/README.md, "Search").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from signal_feeds.errors import QueryError
from signal_feeds.store.fulltext import (
    END_OF_QUERY,
    SNIPPET_CLOSE,
    SNIPPET_ELLIPSIS,
    SNIPPET_OPEN,
    SNIPPET_TOKENS,
    and_beside_groups,
    check_query_text,
    column_hint,
    quote_punctuated_words,
    searchable_text,
    syntax_hint,
    visible_query,
)

__all__ = [
    "FTS_TABLE",
    "TITLE_WEIGHT",
    "IndexChange",
    "checked_query",
    "create_search_index",
    "index_entries",
    "rebuild_search_index",
    "search_keys",
    "snippets",
    "unindex_entries",
]

FTS_TABLE = "entries_fts"
#: bm25 weight of the title column relative to summary and content (1.0 each).
TITLE_WEIGHT = 4.0
# unicode61 with diacritics removed: "cafe" finds "café", "resume" finds "résumé".
_COLUMNS = "title, summary, content, tokenize = 'unicode61 remove_diacritics 2'"
_BATCH = 2000
_PROBE = "signal_query_probe"


def create_search_index(conn: sqlite3.Connection) -> bool:
    """Create and fill the index if the file has none (inside the caller's
    transaction); True if it was created."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)).fetchone():
        return False
    conn.execute(f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5({_COLUMNS})")
    conn.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}, rank) "
                 f"VALUES ('rank', 'bm25({TITLE_WEIGHT}, 1.0, 1.0)')")
    _index_all(conn)
    return True


def _index_all(conn: sqlite3.Connection) -> int:
    """Index every entry, walking the table in ``seq`` order a batch at a time."""
    done, last = 0, -1
    while True:
        batch = conn.execute(
            "SELECT seq, title, summary, content FROM entries WHERE seq > ? "
            "ORDER BY seq LIMIT ?", (last, _BATCH)).fetchall()
        if not batch:
            return done
        index_entries(conn, batch)
        done += len(batch)
        last = batch[-1][0]


def rebuild_search_index(conn: sqlite3.Connection) -> int:
    """Index every entry again from its stored fields (inside the caller's transaction);
    the number of entries indexed. Running it twice gives the same index."""
    if create_search_index(conn):
        return int(conn.execute(f"SELECT count(*) FROM {FTS_TABLE}").fetchone()[0])
    conn.execute(f"DELETE FROM {FTS_TABLE}")
    count = _index_all(conn)
    conn.execute(f"INSERT INTO {FTS_TABLE} ({FTS_TABLE}) VALUES ('optimize')")
    return count


def index_entries(conn: sqlite3.Connection,
                  rows: Iterable[tuple[int, str | None, str | None, str | None]]) -> None:
    """Index (seq, title, summary HTML, content HTML) rows not in the index yet."""
    _insert(conn, [(seq, title or "", searchable_text(summary or ""),
                    searchable_text(content or "")) for seq, title, summary, content in rows])


def _insert(conn: sqlite3.Connection, rows: Sequence[tuple[int, str, str, str]]) -> None:
    # In rowid order: FTS5 writes its pending terms out as a new segment whenever a rowid
    # is not above the last one, and the writer numbers a response's new entries from the
    # end of the document back (a segment per entry, then merges).
    conn.executemany(
        f"INSERT INTO {FTS_TABLE} (rowid, title, summary, content) VALUES (?, ?, ?, ?)",
        sorted(rows))


@dataclass(frozen=True)
class IndexChange:
    """What one response changes in the index: entries (by ``seq``) to remove, then
    (seq, title, summary text, content text) rows to add."""

    removed: Sequence[int]
    added: Sequence[tuple[int, str, str, str]]

    def __bool__(self) -> bool:
        return bool(self.removed or self.added)

    def apply(self, conn: sqlite3.Connection) -> None:
        """Make the change (inside the caller's transaction)."""
        unindex_entries(conn, self.removed)
        _insert(conn, self.added)


def unindex_entries(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Remove entries (by ``seq``) from the index, before they are indexed again."""
    conn.executemany(f"DELETE FROM {FTS_TABLE} WHERE rowid = ?", [(s,) for s in seqs])


def checked_query(conn: sqlite3.Connection, query: str) -> str:
    """The FTS5 expression to run for the user's ``query`` (its words that hold
    punctuation quoted, see :func:`quote_punctuated_words`); :class:`QueryError` unless
    it is valid for the index's columns. Tried first on an empty table of the same
    shape in the connection's ``temp`` schema (writable even when the file is not), so
    that an error here is always the query's, never the database's."""
    query = visible_query(query)
    check_query_text(query)
    expression = quote_punctuated_words(query)
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{_PROBE} USING fts5({_COLUMNS})")
    probe = f"SELECT rowid FROM temp.{_PROBE} WHERE {_PROBE} MATCH ?"
    try:
        conn.execute(probe, (expression,)).fetchall()
    except sqlite3.OperationalError as exc:
        joined = and_beside_groups(expression)  # a group beside a word: all must occur
        if joined != expression:
            try:
                conn.execute(probe, (joined,)).fetchall()
                return joined
            except sqlite3.OperationalError:
                pass
        detail = str(exc).removeprefix("fts5: ")
        if detail == 'syntax error near ""':
            detail = END_OF_QUERY
        raise QueryError(f"search query {query!r} is not valid FTS5 syntax: {detail} "
                         f"({_syntax_hint(query, detail)})", query=query) from exc
    return expression


def _syntax_hint(query: str, detail: str) -> str:
    """What to try instead (:func:`column_hint` for a column FTS5 does not know)."""
    if "no such column" in detail:
        return column_hint(detail.removeprefix("no such column: "), query)
    return syntax_hint(detail, query)


def search_keys(conn: sqlite3.Connection, query: str, *, where: Sequence[str],
                args: Sequence[Any], limit: int) -> list[tuple[int, float]]:
    """(seq, bm25 score) of the best ``limit`` matches whose entry meets every ``where``
    condition (SQL over ``entries`` columns), best first (of equal scores, the one
    stored last first)."""
    # Ranked by bm25() itself: FTS5's ORDER BY rank sorts the matches in a statement of
    # its own and then seeks each one again, a third slower over many matches. Without
    # conditions the index alone answers. With them, CROSS JOIN keeps the index as the
    # outer loop: with a plain JOIN and a source filter, SQLite walks the source's
    # entries and runs the full-text query once for each of them.
    score = f"bm25({FTS_TABLE}, {TITLE_WEIGHT}, 1.0, 1.0)"
    sql = f"SELECT {FTS_TABLE}.rowid, {score} AS score FROM {FTS_TABLE}"
    if where:
        sql += f" CROSS JOIN entries ON entries.seq = {FTS_TABLE}.rowid"
    sql += f" WHERE {FTS_TABLE} MATCH ?"
    for condition in where:
        sql += f" AND {condition}"
    sql += f" ORDER BY score, {FTS_TABLE}.rowid DESC LIMIT ?"
    return [(int(r[0]), float(r[1]))
            for r in conn.execute(sql, [query, *args, max(limit, 0)])]


def snippets(conn: sqlite3.Connection, query: str, seqs: Sequence[int]) -> dict[int, str]:
    """The highlighted snippet of each matching entry (by ``seq``): computed for the
    page of hits only, not for every match."""
    if not seqs:
        return {}
    marks = ",".join("?" * len(seqs))
    sql = (f"SELECT rowid, snippet({FTS_TABLE}, -1, ?, ?, ?, ?) FROM {FTS_TABLE} "
           f"WHERE {FTS_TABLE} MATCH ? AND rowid IN ({marks})")
    params = [SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_TOKENS, query, *seqs]
    return {int(r[0]): str(r[1] or "") for r in conn.execute(sql, params)}
