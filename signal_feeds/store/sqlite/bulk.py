"""Whole tables in and out of a SQLite store, for ``signal copy`` (see store/bulk.py)."""

from __future__ import annotations

import datetime as dt
import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from signal_feeds.store.bulk import COPIED
from signal_feeds.store.sqlite import dedupe, search
from signal_feeds.store.sqlite.connection import Connection
from signal_feeds.timeutil import format_time, parse_time

__all__ = ["SqliteBulk"]


_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """Driver errors inside become StoreError naming the database."""
    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.db.errors("cannot copy rows"):
            return method(self, *args, **kwargs)
    return cast(_F, run)


class SqliteBulk:
    """:class:`~signal_feeds.store.bulk.BulkAccess` over one SQLite connection."""

    def __init__(self, db: Connection) -> None:
        self.db = db

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    @_guarded
    def read(self, table: str, after: Any, limit: int) -> list[tuple[Any, ...]]:
        """Rows of ``table`` above the key ``after``, in key order (neutral values)."""
        spec = COPIED[table]
        sql = f"SELECT {', '.join(spec.columns)} FROM {table}"
        args: list[Any] = []
        if after is not None:
            sql += f" WHERE {spec.key} > ?"
            args.append(after)
        sql += f" ORDER BY {spec.key} LIMIT ?"
        args.append(limit)
        rows = []
        for raw in self.conn.execute(sql, args):
            row = list(raw)
            for i, name in enumerate(spec.columns):
                if name in spec.times:
                    row[i] = parse_time(row[i])
                elif name == "gone":
                    row[i] = bool(row[i])
                elif name == "content_fingerprint" and table == "entry_versions":
                    row[i] = row[i] or ""
            rows.append(tuple(row))
        return rows

    @_guarded
    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert neutral rows into ``table``."""
        spec = COPIED[table]

        def stored(value: Any) -> Any:
            if isinstance(value, dt.datetime):
                return format_time(value)
            return int(value) if isinstance(value, bool) else value

        self.conn.executemany(
            f"INSERT INTO {table} ({', '.join(spec.columns)}) "
            f"VALUES ({', '.join('?' for _ in spec.columns)})",
            [tuple(stored(v) for v in row) for row in rows])

    @_guarded
    def identity(self) -> tuple[str, int]:
        """The change log's database id and last position issued."""
        database_id = self.conn.execute("SELECT database_id FROM change_log").fetchone()[0]
        last = self.conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        return str(database_id), int(last[0]) if last else 0

    @_guarded
    def set_identity(self, database_id: str, last_position: int) -> None:
        """Take over another database's change-log identity."""
        self.conn.execute("UPDATE change_log SET database_id = ?", (database_id,))
        if not self.conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'changes'",
                                 (last_position,)).rowcount:
            self.conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('changes', ?)",
                              (last_position,))

    @_guarded
    def clear(self) -> None:
        """Delete every row of every copied table (and the derived indexes)."""
        for table in [*reversed(COPIED), "dedupe_text", search.FTS_TABLE]:
            self.conn.execute(f"DELETE FROM {table}")

    @_guarded
    def finish(self) -> None:
        """Number new rows after the copied keys; rebuild dedupe postings and search."""
        dedupe.post_stored_tokens(self.conn)
        search.rebuild_search_index(self.conn)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around the copy's writes (errors become StoreError)."""
        with self.db.errors("cannot copy rows"), self.db.transaction():
            yield

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction (WAL: writers go on; this sees the data as at its start)."""
        with self.db.errors("cannot copy rows"):
            self.conn.execute("BEGIN")
        try:
            yield
        finally:
            with self.db.errors("cannot copy rows"):
                self.conn.execute("COMMIT")
