"""Leases on sources and host slots on a PostgreSQL server: workers on many hosts.

Claims (see :mod:`signal_feeds.store.leases` for the protocol) run inside the caller's
transaction. The candidate rows are read ``FOR UPDATE SKIP LOCKED``: a row another
worker is claiming or writing right now is skipped, never waited for, and counts as
not claimable. The choice is :func:`~signal_feeds.store.leases.choose_claims`; the
leases are written by an ``UPDATE … RETURNING`` that checks the lease again, so a
source that had no row yet and that two workers chose at once goes to one of them. Lease
times are the server's ``now()``, the one clock every worker host shares.

:class:`AdvisoryHostGate` holds host slots as session-level advisory locks
(``pg_try_advisory_lock(host key, slot)``) on a connection of its own: the server drops
them when the connection ends, also when the worker dies without closing it. A process
with requests waiting for a slot of a host holds ``(host key, IN_LINE)`` shared; a
request's first ask sees it (an exclusive try that fails) and waits in line too.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from signal_feeds.errors import StoreError, log_level_of
from signal_feeds.records import SourceState
from signal_feeds.store.leases import (
    MAX_SLOTS_PER_HOST,
    Candidate,
    Lease,
    choose_claims,
    host_key,
    owners_gone,
)
from signal_feeds.store.postgres.connection import Connection
from signal_feeds.store.postgres.queries import stored_source_state
from signal_feeds.store.sqlite.queries import state_for_url

__all__ = ["CLAIM_ROUNDS", "IN_LINE", "AdvisoryHostGate", "claim", "leases", "release",
           "renew"]

log = logging.getLogger("signal_feeds.store")

#: A claim that lost sources to another worker's simultaneous claim looks again (the
#: winner's leases are visible then) at most this many times.
CLAIM_ROUNDS = 3
#: The second key of the lock a process holds shared while it has requests waiting for
#: a slot of the host (past every slot number).
IN_LINE = MAX_SLOTS_PER_HOST
#: A slot's lock, taken only when no other session is in the host's line (the server
#: never counts a session's own shared lock against its exclusive one): NULL when one
#: is, in the same round trip as the slot.
_TAKE_IF_NOBODY_IN_LINE = (
    "SELECT CASE WHEN NOT pg_try_advisory_lock(%(key)s, %(line)s) THEN NULL "
    "WHEN pg_advisory_unlock(%(key)s, %(line)s) THEN pg_try_advisory_lock(%(key)s, %(slot)s) "
    "END")

_CLEAR = "lease_owner = NULL, leased_at = NULL, lease_expires = NULL"
_CANDIDATES = ("SELECT id, url, next_due_at, retry_after, gone, lease_owner, leased_at, "
               "lease_expires FROM sources WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED")
_INSERT_NEW = ("INSERT INTO sources (id, url) SELECT * FROM unnest(%s::text[], %s::text[]) "
               "ON CONFLICT (id) DO NOTHING")
_TAKE = ("UPDATE sources SET lease_owner = %(owner)s, leased_at = now(), "
         "lease_expires = now() + make_interval(secs => %(seconds)s) "
         "WHERE id = ANY(%(ids)s) AND (lease_owner IS NULL OR lease_owner = %(owner)s "
         "OR lease_expires <= now() OR lease_owner = ANY(%(gone)s)) RETURNING id")


def _lease(owner: str | None, since: dt.datetime | None,
           until: dt.datetime | None) -> Lease | None:
    if not owner or since is None or until is None:
        return None
    return Lease(owner=owner, leased_at=since, expires=until)


def _candidates(conn: Any, ids: Sequence[str]) -> list[Candidate]:
    """The candidates nobody else is busy with: rows locked by another transaction are
    left out (absent, not "never stored")."""
    existing = {r[0] for r in conn.execute("SELECT id FROM sources WHERE id = ANY(%s)",
                                           (list(ids),))}
    unlocked = {r[0]: Candidate(source_id=r[0], stored_url=r[1], next_due_at=r[2],
                                retry_after=r[3], gone=bool(r[4]),
                                lease=_lease(r[5], r[6], r[7]))
                for r in conn.execute(_CANDIDATES, (list(ids),))}
    return [unlocked[sid] if sid in unlocked else Candidate(source_id=sid)
            for sid in ids if sid in unlocked or sid not in existing]


def claim(conn: Any, urls: Mapping[str, str], *, owner: str, now: dt.datetime,
          lease_seconds: float, limit: int, force: bool) -> dict[str, SourceState]:
    """Lease at most ``limit`` of ``urls`` (id -> configured URL) to ``owner``; their
    stored states by id, in the order of ``urls``."""
    lease_now: dt.datetime = conn.execute("SELECT now()").fetchone()[0]
    claimed: set[str] = set()
    waiting = list(urls)
    for _round in range(CLAIM_ROUNDS):
        candidates = _candidates(conn, waiting)
        gone = owners_gone(candidates)
        chosen = choose_claims(candidates, urls, owner=owner, now=now, lease_now=lease_now,
                               force=force, limit=limit - len(claimed), gone=gone)
        if not chosen:
            break
        new = sorted(chosen)  # one order for every worker: inserts never deadlock
        conn.execute(_INSERT_NEW, (new, [urls[sid] for sid in new]))
        got = {r[0] for r in conn.execute(
            _TAKE, {"owner": owner, "seconds": lease_seconds, "ids": chosen,
                    "gone": list(gone)})}
        claimed |= got
        if len(got) == len(chosen) or len(claimed) >= limit:
            break
        waiting = [sid for sid in waiting if sid not in claimed]
    return {sid: state_for_url(stored_source_state(conn, sid), sid, urls[sid])
            for sid in urls if sid in claimed}


def release(conn: Any, source_ids: Sequence[str] | None, *, owner: str,
            not_before: dt.datetime | None = None) -> int:
    """Give back ``owner``'s leases on ``source_ids`` (``None``: all of them);
    ``not_before``: their next poll and ``retry_after`` are no earlier."""
    clear, args = _CLEAR, tuple[dt.datetime, ...]()
    if not_before is not None:
        # GREATEST skips a NULL.
        clear += (", next_due_at = GREATEST(next_due_at, %s), "
                  "retry_after = GREATEST(retry_after, %s)")
        args = (not_before, not_before)
    if source_ids is None:
        cur = conn.execute(f"UPDATE sources SET {clear} WHERE lease_owner = %s",
                           (*args, owner))
    else:
        cur = conn.execute(f"UPDATE sources SET {clear} WHERE lease_owner = %s "
                           "AND id = ANY(%s)", (*args, owner, list(source_ids)))
    return int(cur.rowcount)


def renew(conn: Any, *, owner: str, lease_seconds: float) -> int:
    """Extend every lease ``owner`` holds to ``lease_seconds`` from the server's now."""
    cur = conn.execute("UPDATE sources SET lease_expires = now() + make_interval(secs => %s) "
                       "WHERE lease_owner = %s", (lease_seconds, owner))
    return int(cur.rowcount)


def leases(conn: Any) -> dict[str, Lease]:
    """Every lease on record (expired ones included), by source id."""
    found: dict[str, Lease] = {}
    for sid, owner, since, until in conn.execute(
            "SELECT id, lease_owner, leased_at, lease_expires FROM sources "
            "WHERE lease_owner IS NOT NULL"):
        lease = _lease(owner, since, until)
        if lease is not None:
            found[sid] = lease
    return found


class AdvisoryHostGate:
    """Host slots as session-level advisory locks, keyed (host key, slot), on a
    connection of its own, opened on first use."""

    #: Every call is a round trip to the server.
    instant = False

    def __init__(self, url: str, *, busy_timeout: float) -> None:
        self._url = url
        self._busy_timeout = busy_timeout
        self._db: Connection | None = None
        #: The slots this process's requests hold, each with the session that took it:
        #: after a lost session its numbers stay in use here until given back, and no
        #: unlock is sent for them on a later session (it would free another's lock).
        self._held: dict[tuple[str, int], int] = {}
        #: Per host: this process's requests in line, and the session holding its place.
        self._line: dict[str, tuple[int, int]] = {}
        self._session = 0
        self._lock = threading.Lock()

    def _conn(self) -> Connection:
        if self._db is None:
            self._db = Connection(self._url, busy_timeout=self._busy_timeout)
            self._session += 1
        return self._db

    def take(self, host: str, per_host: int, *, in_line: bool = False) -> int | None:
        """Lock a free slot of ``host``; ``None`` when all ``per_host`` are held, or
        when not ``in_line`` and another process has a request in the host's line."""
        host, key = host.lower(), host_key(host)
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._take(self._conn(), host, key, per_host, in_line)
                except StoreError:
                    # The session is gone (a restart, a proxy or an idle timeout ended
                    # it), and its locks with it: connect again, once. The database
                    # itself gone is the second failure's to say.
                    self._drop()
                    if attempt == 2:
                        raise
        return None  # (not reached)

    def _take(self, db: Connection, host: str, key: int, per_host: int,
              in_line: bool) -> int | None:
        # Session locks are reentrant: a slot this process holds is never asked for
        # again, or two of its requests would share it.
        for slot in range(min(per_host, MAX_SLOTS_PER_HOST)):
            if (host, slot) in self._held:
                continue
            with db.errors("cannot take a host slot on"):
                row = db.conn.execute(
                    "SELECT pg_try_advisory_lock(%(key)s, %(slot)s)" if in_line
                    else _TAKE_IF_NOBODY_IN_LINE,
                    {"key": key, "slot": slot, "line": IN_LINE}).fetchone()
            if row is None or row[0] is None:
                return None  # another process's request is in line: this one waits too
            in_line = True  # (asked once)
            if row[0]:
                self._held[host, slot] = self._session
                return slot
        return None

    def give_back(self, host: str, slot: int) -> None:
        """Unlock a slot :meth:`take` returned (never raises: on an error the
        connection is closed, which unlocks every slot it held)."""
        host = host.lower()
        with self._lock:
            session = self._held.pop((host, slot), None)
            if self._db is None or session != self._session:
                return  # its session is gone, and the lock with it
            self._unlock(self._db, "cannot give back a host slot",
                         "SELECT pg_advisory_unlock(%s, %s)", host_key(host), slot)

    def join_line(self, host: str) -> None:
        """Stand one more request of this process in the host's line."""
        host = host.lower()
        with self._lock:
            count, session = self._line.get(host, (0, 0))
            if count and session == self._session and self._db is not None:
                self._line[host] = (count + 1, session)
                return
            try:
                db = self._conn()
                with db.errors("cannot wait in line for a host slot on"):
                    # Waits only for a first ask's exclusive try, held for one statement.
                    db.conn.execute("SELECT pg_advisory_lock_shared(%s, %s)",
                                    (host_key(host), IN_LINE))
            except StoreError as exc:  # not in line: the wait is only less fair
                log.log(log_level_of(exc), "%s; closing the host slot connection", exc)
                self._drop()
                return
            self._line[host] = (count + 1, self._session)

    def leave_line(self, host: str) -> None:
        """One request of this process no longer waits; the last leaves the line."""
        host = host.lower()
        with self._lock:
            count, session = self._line.pop(host, (0, 0))
            if count > 1:
                self._line[host] = (count - 1, session)
                return
            if count == 0 or self._db is None or session != self._session:
                return  # its session is gone, and its place with it
            self._unlock(self._db, "cannot leave the line for a host slot on",
                         "SELECT pg_advisory_unlock_shared(%s, %s)", host_key(host), IN_LINE)

    def _unlock(self, db: Connection, what: str, sql: str, key: int, second: int) -> None:
        """Run one unlock on the live session ``db`` (with the lock held); never raises."""
        try:
            with db.errors(what):
                db.conn.execute(sql, (key, second))
        except StoreError as exc:
            # The server lost the session or will drop it: its locks go with it.
            log.log(log_level_of(exc), "%s; closing the host slot connection", exc)
            self._drop()

    def _drop(self) -> None:
        """Close the connection (with the lock held): its session's slots are gone;
        the requests that held them give their numbers back as they end."""
        if self._db is not None:
            with contextlib.suppress(StoreError):
                self._db.close()
            self._db = None

    def close(self) -> None:
        """Close the connection: the server drops every slot it held."""
        with self._lock:
            self._held.clear()
            self._line.clear()
            if self._db is not None:
                self._db.close()
                self._db = None
