"""Whole tables in and out of a PostgreSQL store, for ``signal copy`` (see store/bulk.py).

Rows go in with ``COPY ... FROM STDIN``: one stream per table, not one statement per row.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from signal_feeds.errors import StoreError
from signal_feeds.store.bulk import COPIED
from signal_feeds.store.postgres import dedupe
from signal_feeds.store.postgres.connection import Connection
from signal_feeds.store.postgres.search import search_vector

__all__ = ["PostgresBulk", "reindex"]

_REINDEX_BATCH = 1000
#: Identity columns numbered by the server: moved past the copied keys at the end.
_IDENTITIES = (("entry_versions", "id"), ("fetches", "id"))


def reindex(conn: Any) -> int:
    """Rebuild every entry's search vector from its stored fields (inside the caller's
    transaction); the number of entries indexed."""
    done, last = 0, -1
    while True:
        batch = conn.execute("SELECT seq, title, summary, content FROM entries WHERE seq > %s "
                             "ORDER BY seq LIMIT %s", (last, _REINDEX_BATCH)).fetchall()
        if not batch:
            return done
        conn.execute("UPDATE entries AS e SET search_vector = v.vector::tsvector "
                     "FROM unnest(%s::bigint[], %s::text[]) AS v(seq, vector) "
                     "WHERE e.seq = v.seq",
                     ([r[0] for r in batch], [search_vector(r[1], r[2], r[3]) for r in batch]))
        done += len(batch)
        last = batch[-1][0]


_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """Driver errors inside become StoreError naming the database."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.db.errors("cannot copy rows"):
            return method(self, *args, **kwargs)
    return cast(_F, run)


class PostgresBulk:
    """:class:`~signal_feeds.store.bulk.BulkAccess` over one PostgreSQL connection."""

    def __init__(self, db: Connection) -> None:
        self.db = db
        self.conn = db.conn

    @_guarded
    def read(self, table: str, after: Any, limit: int) -> list[tuple[Any, ...]]:
        """Rows of ``table`` above the key ``after``, in key order (neutral values)."""
        spec = COPIED[table]
        sql = f"SELECT {', '.join(spec.columns)} FROM {table}"
        args: list[Any] = []
        if after is not None:
            sql += f" WHERE {spec.key} > %s"
            args.append(after)
        sql += f" ORDER BY {spec.key} LIMIT %s"
        args.append(limit)
        index = spec.columns.index("text_tokens") if "text_tokens" in spec.columns else -1
        rows = []
        for raw in self.conn.execute(sql, args):
            if index >= 0 and raw[index] is not None:
                raw = (*raw[:index], bytes(raw[index]), *raw[index + 1:])
            rows.append(tuple(raw))
        return rows

    @_guarded
    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert neutral rows into ``table``."""
        spec = COPIED[table]
        with self.conn.cursor() as cur, cur.copy(
                f"COPY {table} ({', '.join(spec.columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)

    @_guarded
    def identity(self) -> tuple[str, int]:
        """The change log's database id and last position issued."""
        row = self.conn.execute(
            "SELECT database_id, last_position FROM change_log WHERE id = 1").fetchone()
        if row is None:
            raise StoreError(f"{self.db.name} has no change log identity (damaged database?)")
        return str(row[0]), int(row[1])

    @_guarded
    def set_identity(self, database_id: str, last_position: int) -> None:
        """Take over another database's change-log identity."""
        self.conn.execute("UPDATE change_log SET database_id = %s, last_position = %s "
                          "WHERE id = 1", (database_id, last_position))

    @_guarded
    def clear(self) -> None:
        """Delete every row of every copied table (and the derived indexes)."""
        self.conn.execute(f"TRUNCATE {', '.join(COPIED)}, dedupe_text")

    @_guarded
    def finish(self) -> None:
        """Number new rows after the copied keys; rebuild dedupe postings and search."""
        self.conn.execute("SELECT setval('entries_seq', "
                          "greatest((SELECT max(seq) FROM entries), 1))")
        for table, column in _IDENTITIES:
            self.conn.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                f"greatest((SELECT max({column}) FROM {table}), 1))")
        dedupe.post_stored_tokens(self.conn)
        reindex(self.conn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around the copy's writes (errors become StoreError)."""
        with self.db.errors("cannot copy rows"), self.db.transaction():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A REPEATABLE READ transaction: every read sees the data as at its start."""
        with self.db.errors("cannot copy rows"), self.db.transaction(checked=False) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield
