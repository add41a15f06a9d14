"""Leases on sources in a SQLite file: several processes on one host share its sources.

Each function runs inside the caller's transaction (``BEGIN IMMEDIATE`` or a batch's
savepoint): SQLite has one writer at a time, so a claim reads the candidates and writes
its leases with no other claim in between. Lease times are the worker's wall clock: the
processes sharing a file share a host, and so a clock. What may be claimed is decided by
:func:`signal_feeds.store.leases.choose_claims`.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterable, Mapping, Sequence

from signal_feeds.records import SourceState
from signal_feeds.store.leases import Candidate, Lease, choose_claims, owners_gone
from signal_feeds.store.sqlite import queries
from signal_feeds.timeutil import format_time, parse_time

__all__ = ["claim", "leases", "release", "renew"]

_CHUNK = 500  # bound on SQL variables per IN (...)
_CLEAR = "lease_owner = NULL, leased_at = NULL, lease_expires = NULL"


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _lease(owner: str | None, leased_at: str | None, expires: str | None) -> Lease | None:
    since, until = parse_time(leased_at), parse_time(expires)
    if not owner or since is None or until is None:
        return None
    return Lease(owner=owner, leased_at=since, expires=until)


def _candidates(conn: sqlite3.Connection, ids: Sequence[str]) -> list[Candidate]:
    found: dict[str, Candidate] = {}
    for part in _chunks(ids):
        marks = ", ".join("?" for _ in part)
        for row in conn.execute(
                "SELECT id, url, next_due_at, retry_after, gone, lease_owner, leased_at, "
                f"lease_expires FROM sources WHERE id IN ({marks})", tuple(part)):
            found[row[0]] = Candidate(
                source_id=row[0], stored_url=row[1], next_due_at=parse_time(row[2]),
                retry_after=parse_time(row[3]), gone=bool(row[4]),
                lease=_lease(row[5], row[6], row[7]))
    return [found.get(sid) or Candidate(source_id=sid) for sid in ids]


def claim(conn: sqlite3.Connection, urls: Mapping[str, str], *, owner: str,
          now: dt.datetime, lease_now: dt.datetime, lease_seconds: float, limit: int,
          force: bool) -> dict[str, SourceState]:
    """Lease at most ``limit`` of the sources in ``urls`` (id -> configured URL, in the
    order to prefer) to ``owner``; their stored states (fresh ones for a new source or a
    changed URL), by id. A source without a row gets one (its state as never fetched),
    so that the lease has a place."""
    candidates = _candidates(conn, list(urls))
    chosen = choose_claims(candidates, urls, owner=owner, now=now, lease_now=lease_now,
                           force=force, limit=limit, gone=owners_gone(candidates))
    if not chosen:
        return {}
    conn.executemany("INSERT OR IGNORE INTO sources (id, url) VALUES (?, ?)",
                     [(sid, urls[sid]) for sid in chosen])
    expires = lease_now + dt.timedelta(seconds=lease_seconds)
    conn.executemany(
        "UPDATE sources SET lease_owner = ?, leased_at = ?, lease_expires = ? WHERE id = ?",
        [(owner, format_time(lease_now), format_time(expires), sid) for sid in chosen])
    return {sid: queries.state_for_url(queries.stored_source_state(conn, sid), sid,
                                       urls[sid])
            for sid in chosen}


def release(conn: sqlite3.Connection, source_ids: Sequence[str] | None, *,
            owner: str, not_before: dt.datetime | None = None) -> int:
    """Give back ``owner``'s leases on ``source_ids`` (``None``: all of them); the
    number given back. Another worker's lease is never touched. ``not_before``: their
    next poll and ``retry_after`` are no earlier (ISO 8601 UTC text sorts as time)."""
    clear, args = _CLEAR, tuple[str, ...]()
    if not_before is not None:
        until = format_time(not_before)
        clear += "".join(f", {column} = CASE WHEN {column} IS NULL OR {column} < ? "
                         f"THEN ? ELSE {column} END" for column in ("next_due_at",
                                                                    "retry_after"))
        args = (until,) * 4
    if source_ids is None:
        return conn.execute(f"UPDATE sources SET {clear} WHERE lease_owner = ?",
                            (*args, owner)).rowcount
    released = 0
    for part in _chunks(list(source_ids)):
        marks = ", ".join("?" for _ in part)
        released += conn.execute(
            f"UPDATE sources SET {clear} WHERE lease_owner = ? AND id IN ({marks})",
            (*args, owner, *part)).rowcount
    return released


def renew(conn: sqlite3.Connection, *, owner: str, lease_now: dt.datetime,
          lease_seconds: float) -> int:
    """Extend every lease ``owner`` holds to ``lease_seconds`` from ``lease_now``."""
    expires = format_time(lease_now + dt.timedelta(seconds=lease_seconds))
    return conn.execute("UPDATE sources SET lease_expires = ? WHERE lease_owner = ?",
                        (expires, owner)).rowcount


def leases(conn: sqlite3.Connection) -> dict[str, Lease]:
    """Every lease held (expired ones included), by source id."""
    found: dict[str, Lease] = {}
    for sid, owner, since, until in conn.execute(
            "SELECT id, lease_owner, leased_at, lease_expires FROM sources "
            "WHERE lease_owner IS NOT NULL"):
        lease = _lease(owner, since, until)
        if lease is not None:
            found[sid] = lease
    return found
