"""The change log in PostgreSQL: written with each response, read by position.

PostgreSQL transactions commit in any order, so a sequence would let a reader see
position 7 before 6 commits, and a cursor at 7 would skip 6 for ever. Instead each
response's transaction takes :data:`CHANGE_LOCK`, a transaction-level advisory lock
held until it commits, before it writes anything; positions are handed out from
``change_log.last_position`` under it. They are therefore gap-free and increase in
commit order, and a position is never issued twice (a rolled-back transaction gives its
numbers back before anyone could see them). The whole-table rewrites (``signal dedupe``,
``signal search --rebuild``) take it too, so they and the responses' writes never wait
for each other's row locks in opposite orders.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from signal_feeds.errors import StoreError
from signal_feeds.records import Change
from signal_feeds.store.cursor import (
    change_check,
    format_cursor,
    parse_cursor,
    verify_position,
)
from signal_feeds.store.sqlite.change_log import PendingChange
from signal_feeds.store.views import row_limit

__all__ = ["CHANGE_LOCK", "changes", "lock_log", "log_changes"]

#: Advisory lock key serializing writers of the change log (any constant unique to Signal).
CHANGE_LOCK = 0x5167_0002


def lock_log(conn: Any) -> None:
    """Take the change-log lock for the rest of the current transaction."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (CHANGE_LOCK,))


def log_changes(conn: Any, pending: Sequence[PendingChange],
                versions: dict[tuple[int, str, str], int], stamp: str, *,
                marked: bool) -> None:
    """Number and write the changes of one response, in the response's order, after
    duplicate marking (``versions``: version id by (seq, fingerprint, content fp);
    the caller holds :func:`lock_log`)."""
    if not pending:
        return
    keys = [c.key for c in pending if marked or c.kind == "updated"]
    duplicates: dict[str, str] = {}
    if keys:
        duplicates = dict(conn.execute(
            "SELECT id, duplicate_of FROM entries WHERE id = ANY(%s) AND duplicate_of != ''",
            (keys,)).fetchall())
    last = int(conn.execute("UPDATE change_log SET last_position = last_position + %s "
                            "WHERE id = 1 RETURNING last_position",
                            (len(pending),)).fetchone()[0])
    first = last - len(pending) + 1
    conn.execute(
        "INSERT INTO changes (position, version_id, source_id, kind, previous_fingerprint, "
        "duplicate_of, changed_at) SELECT * FROM unnest(%s::bigint[], %s::bigint[], "
        "%s::text[], %s::text[], %s::text[], %s::text[], %s::text[])",
        (list(range(first, last + 1)),
         [versions[(c.seq, c.fingerprint, c.content_fingerprint or "")] for c in pending],
         [c.source_id for c in pending], [c.kind for c in pending],
         [c.previous_fingerprint for c in pending],
         [duplicates.get(c.key, "") for c in pending], [stamp] * len(pending)))


_READ = """
SELECT c.position, c.kind, v.entry_id, c.source_id, v.title, v.url, v.published,
       v.updated, v.fingerprint, c.previous_fingerprint, c.duplicate_of, c.changed_at
FROM changes AS c JOIN entry_versions AS v ON v.id = c.version_id
WHERE c.position > %s {source} ORDER BY c.position LIMIT %s
"""

#: The change at one position: what a cursor's check is taken of.
_HELD = ("SELECT v.entry_id, v.fingerprint, c.changed_at FROM changes AS c "
         "JOIN entry_versions AS v ON v.id = c.version_id WHERE c.position = %s")


def changes(conn: Any, *, after: str | None, limit: int, source_id: str | None,
            where: str) -> list[Change]:
    """At most ``limit`` changes after the cursor ``after`` (``None``: from the start),
    oldest first; ``where`` names the database in errors. The identity is read first:
    a change committed after it is beyond the position checked, never before it."""
    with conn.transaction():
        row = conn.execute("SELECT database_id, last_position FROM change_log "
                           "WHERE id = 1").fetchone()
        if row is None:
            raise StoreError(f"{where} has no change log identity (damaged database?)")
        database_id, last = str(row[0]), int(row[1])
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
        rows = conn.execute(_READ.format(
            source="AND c.source_id = %s" if source_id is not None else ""), args).fetchall()
    return [Change(cursor=format_cursor(database_id, r[0], change_check(r[2], r[8], r[11])),
                   kind=r[1], key=r[2],
                   source_id=r[3], title=r[4] or "", url=r[5] or "", published=r[6] or "",
                   updated=r[7] or "", fingerprint=r[8], previous_fingerprint=r[9],
                   duplicate_of=r[10], changed_at=r[11])
            for r in rows]
