"""``signal copy``: move a whole Signal database to another store, then prove it.

Rows are read from the source in key order, a batch at a time, and written to the
target in one transaction (PostgreSQL: ``COPY``). Before that transaction commits, the
copy checks itself: every table of :data:`~signal_feeds.store.bulk.COPIED` is read back
from the target and must have as many rows as the source, with the same digest over
every column in the neutral form (keys, fingerprints, validators, times included). A
mismatch raises and nothing is committed. The change log's identity moves too, so a
consumer's cursor resumes on the copy.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from signal_feeds.dsn import Database, display_database
from signal_feeds.errors import ConfigError, StoreError
from signal_feeds.store.bulk import COPIED, BulkAccess
from signal_feeds.store.protocol import TABLES, FeedStore
from signal_feeds.timeutil import format_time

__all__ = ["DEFAULT_COPY_BATCH", "CopyReport", "TableCopy", "copy_store", "table_digest"]

log = logging.getLogger("signal_feeds.store")

#: Rows read and written per batch.
DEFAULT_COPY_BATCH = 2000


@dataclass(frozen=True)
class TableCopy:
    """One table's rows and digest on both sides of a copy."""

    table: str
    source_rows: int
    target_rows: int
    source_digest: str
    target_digest: str

    @property
    def ok(self) -> bool:
        """Equal counts and digests."""
        return (self.source_rows, self.source_digest) == (self.target_rows, self.target_digest)


@dataclass(frozen=True)
class CopyReport:
    """What a copy moved, table by table, and that it checked out."""

    source: str
    target: str
    tables: tuple[TableCopy, ...]

    @property
    def ok(self) -> bool:
        """Every table checked out."""
        return all(t.ok for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"source": self.source, "target": self.target, "ok": self.ok,
                "tables": [{"table": t.table, "rows": t.target_rows,
                            "source_rows": t.source_rows, "digest": t.target_digest,
                            "ok": t.ok} for t in self.tables]}

    def lines(self) -> list[str]:
        """One line per table, then a summary."""
        out = [f"{t.table}: {t.target_rows} rows" + ("" if t.ok else
               f" (source: {t.source_rows}; digests differ)") for t in self.tables]
        verdict = "checked: equal counts and digests" if self.ok else "CHECK FAILED"
        return [*out, f"copied {self.source} -> {self.target}; {verdict}"]


def _neutral(value: Any) -> Any:
    if hasattr(value, "tzinfo"):
        return format_time(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return value


def _rows(bulk: BulkAccess, table: str, batch: int) -> Iterator[list[tuple[Any, ...]]]:
    key = COPIED[table].columns.index(COPIED[table].key)
    after = None
    while rows := bulk.read(table, after, batch):
        yield rows
        after = rows[-1][key]


class _Digest:
    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.rows = 0

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            self.hash.update(json.dumps([_neutral(v) for v in row], ensure_ascii=False,
                                        separators=(",", ":")).encode("utf-8") + b"\n")
        self.rows += len(rows)


def table_digest(store: FeedStore, table: str, *, batch: int = DEFAULT_COPY_BATCH
                 ) -> tuple[int, str]:
    """(rows, sha256) of a table of :data:`COPIED`, computed the same way on every backend."""
    digest = _Digest()
    for rows in _rows(_bulk(store, repr(store)), table, batch):
        digest.add(rows)
    return digest.rows, digest.hash.hexdigest()


def _bulk(store: FeedStore, name: str) -> BulkAccess:
    """The store's bulk access; ``name`` is the database as messages name it (a
    backend without the hook was named by its object's repr, "<... at 0x7f...>")."""
    bulk = getattr(store, "_bulk", None)
    if bulk is None:
        raise StoreError(f"{name} cannot take part in a copy: its store backend offers no "
                         "bulk access (a private _bulk(), see docs/architecture.md)")
    access: BulkAccess = bulk()
    return access


def copy_store(source: Database, target: Database, *, replace: bool = False,
               batch: int = DEFAULT_COPY_BATCH, busy_timeout: float | None = None
               ) -> CopyReport:
    """Copy every row of the database ``source`` into ``target`` (a file path or a
    ``postgresql://`` URL; created if new) and check the copy (see the module).

    A target holding entries, sources or fetches is refused (:class:`ConfigError`)
    unless ``replace`` (its rows are deleted first, in the copy's transaction).
    Raises :class:`StoreError` if the check fails; nothing is then committed.
    """
    from signal_feeds.store import open_store

    names = display_database(source), display_database(target)
    if str(source) == str(target):
        raise ConfigError(f"cannot copy {names[0]} onto itself")
    with open_store(source, busy_timeout=busy_timeout) as src, \
            open_store(target, busy_timeout=busy_timeout, check_writable=True) as dst:
        held = {t: n for t, n in dst.table_counts().items() if n}
        if held and not replace:
            counts = ", ".join(f"{n} {t}" for t, n in held.items())
            raise ConfigError(f"{names[1]} is not empty ({counts}); copy into an empty "
                              "database, or pass --replace to delete its rows first")
        read, write = _bulk(src, names[0]), _bulk(dst, names[1])
        copied: list[TableCopy] = []
        with read.snapshot(), write.transaction():
            if replace:
                write.clear()
            sums: dict[str, _Digest] = {}
            for table in COPIED:
                sums[table] = _Digest()
                for rows in _rows(read, table, batch):
                    sums[table].add(rows)
                    write.write(table, rows)
                log.info("copied %s: %d rows", table, sums[table].rows)
            write.set_identity(*read.identity())
            write.finish()
            for table in COPIED:  # read back inside the transaction: checked, then committed
                check = _Digest()
                for rows in _rows(write, table, batch):
                    check.add(rows)
                copied.append(TableCopy(table, sums[table].rows, check.rows,
                                        sums[table].hash.hexdigest(), check.hash.hexdigest()))
            report = CopyReport(*names, tables=tuple(copied))
            if not report.ok:
                bad = ", ".join(t.table for t in copied if not t.ok)
                raise StoreError(f"copy to {names[1]} failed its check ({bad}); nothing "
                                 "was committed")
    assert {t.table for t in copied} >= set(TABLES)
    return report
