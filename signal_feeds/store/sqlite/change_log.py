"""The change log in SQLite: written with each response, read by position.

A row is written for every entry a response created and every new version it stored,
after duplicate marking and inside the same transaction, so that a change carries the
duplicate status decided with it and is committed (or undone) with its entry. Writers
take SQLite's write lock for the whole transaction, so positions become visible in
order: a reader that has seen position N will never later find a smaller one appear.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import NamedTuple

from signal_feeds.errors import StoreError
from signal_feeds.records import Change
from signal_feeds.store.cursor import (
    change_check,
    format_cursor,
    parse_cursor,
    verify_position,
)
from signal_feeds.store.views import row_limit

__all__ = ["PendingChange", "changes", "log_changes"]


class PendingChange(NamedTuple):
    """A change of the current transaction, before it is numbered."""

    kind: str
    key: str
    seq: int
    source_id: str
    fingerprint: str
    content_fingerprint: str
    previous_fingerprint: str


_LOG = """
INSERT INTO changes (version_id, source_id, kind, previous_fingerprint, duplicate_of,
                     changed_at)
VALUES (?, ?, ?, ?, ?, ?)
"""
_CHUNK = 500  # bound on SQL variables per IN (...)


def _duplicate_of(conn: sqlite3.Connection, pending: Sequence[PendingChange],
                  marked: bool) -> dict[str, str]:
    """``duplicate_of`` of the entries that may have one now (others: ``""``).

    A created entry is unmarked unless this transaction's marking changed a marker, and
    most responses change none. Reading the column costs a read of the whole row
    (summary and content come first, often on overflow pages): 150 µs per change when
    it was read for every one, in a batch larger than the page cache.
    """
    keys = [c.key for c in pending if marked or c.kind == "updated"]
    found: dict[str, str] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start:start + _CHUNK]
        found.update(conn.execute(
            f"SELECT id, duplicate_of FROM entries WHERE id IN ({','.join('?' * len(chunk))})"
            " AND duplicate_of != ''", chunk).fetchall())
    return found


def _version_ids(conn: sqlite3.Connection, pending: Sequence[PendingChange]
                 ) -> dict[tuple[int, str, str], int]:
    """The id of each change's version row (written just before, in this transaction),
    by (entry seq, fingerprint, content fingerprint): one lookup per chunk of entries
    instead of one ``INSERT ... SELECT`` per change."""
    seqs = sorted({c.seq for c in pending})
    found: dict[tuple[int, str, str], int] = {}
    for start in range(0, len(seqs), _CHUNK):
        chunk = seqs[start:start + _CHUNK]
        for seq, fingerprint, content_fingerprint, version in conn.execute(
                "SELECT entry_seq, fingerprint, coalesce(content_fingerprint, ''), id "
                f"FROM entry_versions WHERE entry_seq IN ({','.join('?' * len(chunk))})",
                chunk):
            found[seq, fingerprint, content_fingerprint] = version
    return found


def log_changes(conn: sqlite3.Connection, pending: Sequence[PendingChange],
                stamp: str, *, marked: bool) -> None:
    """Number and write the changes of one response, in the response's order, after
    duplicate marking (``marked``: it changed some marker in this transaction)."""
    if not pending:
        return
    duplicates = _duplicate_of(conn, pending, marked)
    versions = _version_ids(conn, pending)
    conn.executemany(_LOG, [
        (versions[c.seq, c.fingerprint, c.content_fingerprint or ""], c.source_id, c.kind,
         c.previous_fingerprint, duplicates.get(c.key, ""), stamp) for c in pending])


_READ = """
SELECT c.position, c.kind, v.entry_id, c.source_id, v.title, v.url, v.published,
       v.updated, v.fingerprint, c.previous_fingerprint, c.duplicate_of, c.changed_at
FROM changes AS c JOIN entry_versions AS v ON v.id = c.version_id
WHERE c.position > ? {source} ORDER BY c.position LIMIT ?
"""

#: The change at one position: what a cursor's check is taken of.
_HELD = ("SELECT v.entry_id, v.fingerprint, c.changed_at FROM changes AS c "
         "JOIN entry_versions AS v ON v.id = c.version_id WHERE c.position = ?")


def _identity(conn: sqlite3.Connection, where: str) -> tuple[str, int]:
    """This log's database id and the highest position it ever issued."""
    row = conn.execute("SELECT database_id FROM change_log WHERE id = 1").fetchone()
    if row is None:
        raise StoreError(f"{where} has no change log identity (damaged database?)")
    last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
    return str(row[0]), int(last[0]) if last else 0


def changes(conn: sqlite3.Connection, *, after: str | None, limit: int,
            source_id: str | None, where: str) -> list[Change]:
    """At most ``limit`` changes after the cursor ``after`` (``None``: from the start),
    oldest first; ``where`` names the database in errors."""
    # One read transaction: the identity, the check and the page see one snapshot
    # (inside a caller's open transaction, that one).
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        database_id, last = _identity(conn, where)
        position, check = (0, "") if after is None else parse_cursor(
            after, database_id=database_id, last_position=last, where=where)
        if check:
            held = conn.execute(_HELD, (position,)).fetchone()
            verify_position(str(after), check,
                            (str(held[0]), str(held[1]), str(held[2])) if held else None,
                            position=position, where=where)
        args: list[object] = [position]
        if source_id is not None:
            args.append(source_id)
        args.append(row_limit(limit))
        rows = conn.execute(_READ.format(source="AND c.source_id = ?" if source_id is not None
                                         else ""), args).fetchall()
    finally:
        if own:
            conn.execute("COMMIT")
    return [Change(cursor=format_cursor(database_id, r[0], change_check(r[2], r[8], r[11])),
                   kind=r[1], key=r[2],
                   source_id=r[3], title=r[4] or "", url=r[5] or "", published=r[6] or "",
                   updated=r[7] or "", fingerprint=r[8], previous_fingerprint=r[9],
                   duplicate_of=r[10], changed_at=r[11])
            for r in rows]
