"""The PostgreSQL store: :class:`~signal_feeds.store.protocol.FeedStore` on a server.

The same behaviour as the SQLite store, method for method: every response is applied in
one transaction (or one savepoint of a :meth:`PostgresStore.batch`), validators with
the entries, all or nothing. Every public method raises only
:class:`~signal_feeds.errors.StoreError` (its subclass
:class:`~signal_feeds.errors.DatabaseUnavailableError` when the server cannot be reached
or went away), naming the database without its password.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from signal_feeds.errors import StoreError
from signal_feeds.records import (
    ApplyCounts,
    Change,
    FetchRecord,
    SourceState,
    StoredEntry,
    StoredVersion,
)
from signal_feeds.store.fulltext import DEFAULT_SEARCH_LIMIT
from signal_feeds.store.leases import DEFAULT_LEASE_SECONDS, HostGate, Lease
from signal_feeds.store.marking import CommonKeys
from signal_feeds.store.postgres import change_log, dedupe, queries, writing
from signal_feeds.store.postgres import leases as lease_rows
from signal_feeds.store.postgres.bulk import PostgresBulk, reindex
from signal_feeds.store.postgres.connection import Connection
from signal_feeds.store.postgres.schema import (
    SCHEMA_LOCK,
    SCHEMA_VERSION,
    check_version,
    create_schema,
    schema_version,
)
from signal_feeds.store.protocol import (
    TABLES,
    DedupeReport,
    DuplicateLink,
    Table,
    checked_busy_timeout,
)
from signal_feeds.store.sqlite.connection import DEFAULT_BUSY_TIMEOUT
from signal_feeds.store.sqlite.queries import state_for_url
from signal_feeds.store.views import searched, stored_since

log = logging.getLogger("signal_feeds.store")
_T = TypeVar("_T")
#: Times a whole-table rewrite is tried when the server ends it for a deadlock.
_REWRITE_TRIES = 3

if TYPE_CHECKING:
    from types import TracebackType

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.identity.matching import MatchKeys
    from signal_feeds.identity.search_text import SearchText
    from signal_feeds.store.views import EntryView, SearchHit

__all__ = ["PostgresStore"]


class PostgresStore:
    """A Signal database on a PostgreSQL server. Use as a context manager or call close().

    ``url`` is a ``postgresql://`` URL; the password may be in it or come from libpq
    (``PGPASSWORD``, ``~/.pgpass``). ``busy_timeout`` (seconds) bounds each wait for a
    lock another writer holds. The schema is created or upgraded on opening; a database
    built by a newer Signal is refused.
    """

    def __init__(self, url: str, *, busy_timeout: float | None = None,
                 check_writable: bool = False) -> None:
        self.busy_timeout = checked_busy_timeout(
            DEFAULT_BUSY_TIMEOUT if busy_timeout is None else busy_timeout)
        self._db = Connection(url, busy_timeout=self.busy_timeout)
        #: The database as messages name it (the URL without its password).
        self.path = self._db.name
        self._common_keys = CommonKeys()
        try:
            with self._db.errors("cannot use database"):
                found = schema_version(self._db.ready())
                check_version(found, self.path)
                if check_writable or found < SCHEMA_VERSION:
                    with self._db.transaction() as conn:
                        create_schema(conn, self.path)
                        if check_writable:
                            self._db.write_probe(conn)
            # Not in the upgrade's own transaction: two openers holding the shared lock
            # and both waiting for the exclusive one would deadlock.
            self._db.on_begin = self._check_schema
        except BaseException:
            self._db.close()
            raise

    def _check_schema(self, conn: Any) -> None:
        """Refuse to write once a newer Signal has upgraded the database: a run that
        opened it at the older version (a host not yet upgraded, or a package replaced
        while it ran) would write rows without the columns it does not know. The shared
        schema lock makes an upgrade wait for the writes under way, and this write wait
        for an upgrade under way, so none commits between the look and the write."""
        conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", (SCHEMA_LOCK,))
        row = conn.execute("SELECT version FROM schema_version").fetchone()
        check_version(int(row[0]) if row else 0, self.path)

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r})"

    def _bulk(self) -> PostgresBulk:
        """Whole tables in and out, for :mod:`signal_feeds.store.copy` (not part of the
        protocol: only a copy between stores needs rows as stored)."""
        return PostgresBulk(self._db)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes made inside into one transaction, committed at the end; each
        write keeps its own savepoint, so a failing one is undone alone."""
        with self._db.errors("cannot commit the batch"), self._db.batch():
            yield

    # -- sources ---------------------------------------------------------------------

    def source_state(self, source_id: str, url: str) -> SourceState:
        """The stored state of a source (a fresh one if never fetched or its URL changed)."""
        with self._db.errors("cannot read source state", source_id):
            stored = queries.stored_source_state(self._db.ready(), source_id)
        return state_for_url(stored, source_id, url)

    def source_states_for(self, urls: Mapping[str, str]) -> dict[str, SourceState]:
        """:meth:`source_state` of many sources (source id -> configured url) at once."""
        stored = {state.source_id: state for state in self.source_states()}
        return {sid: state_for_url(stored.get(sid), sid, url) for sid, url in urls.items()}

    def source_states(self) -> list[SourceState]:
        """Every stored source state, ordered by id."""
        with self._db.errors("cannot read sources"):
            return queries.source_states(self._db.ready())

    def set_source_order(self, source_ids: Sequence[str]) -> bool:
        """Remember the config's order of the sources; True if it changed."""
        with self._db.errors("cannot save the source order"), \
                self._db.transaction() as conn:
            return writing.set_source_order(conn, source_ids)

    def save_attempt(self, state: SourceState, fetch: FetchRecord) -> None:
        """Store a source's new state and the fetch row of a response without entries."""
        with self._db.errors("cannot save fetch state", state.source_id), \
                self._db.transaction() as conn:
            writing.save_attempt(conn, state, fetch)

    def reset_source(self, source_id: str) -> bool:
        """Clear gone, moved, backoff and schedule state; True if the source was known."""
        with self._db.errors("cannot reset source", source_id), \
                self._db.transaction() as conn:
            return writing.reset_source(conn, source_id)

    # -- entries ---------------------------------------------------------------------

    def apply_response(self, state: SourceState, rows: Sequence[EntryRow],
                       fetch: FetchRecord, now: dt.datetime, *,
                       match_keys: Mapping[str, MatchKeys] | None = None,
                       search_texts: Mapping[str, SearchText] | None = None,
                       seen_at: dt.datetime | None = None) -> ApplyCounts:
        """Store one response's entries, versions, the source's new state and the fetch
        row in one transaction; mark cross-source duplicates of what changed."""
        with self._db.errors("cannot store response", state.source_id), \
                self._db.transaction() as conn:
            return writing.apply_response(conn, state, rows, fetch, now,
                                          given=match_keys or {}, texts=search_texts or {},
                                          common=self._common_keys, seen_at=seen_at)

    # -- work sharing (store/postgres/leases.py) ---------------------------------------

    def claim_sources(self, urls: Mapping[str, str], *, owner: str, now: dt.datetime,
                      limit: int, force: bool = False,
                      lease_seconds: float = DEFAULT_LEASE_SECONDS
                      ) -> dict[str, SourceState]:
        """Lease due sources to ``owner``, by the server's clock (see the protocol)."""
        with self._db.errors("cannot claim sources"), self._db.transaction() as conn:
            return lease_rows.claim(conn, urls, owner=owner, now=now,
                                    lease_seconds=lease_seconds, limit=limit, force=force)

    def release_sources(self, source_ids: Sequence[str] | None, *, owner: str,
                        not_before: dt.datetime | None = None) -> int:
        """Give back ``owner``'s leases on ``source_ids`` (``None``: all), see the
        protocol for ``not_before``."""
        only = source_ids[0] if source_ids is not None and len(source_ids) == 1 else None
        with self._db.errors("cannot release leases", only), \
                self._db.transaction() as conn:
            return lease_rows.release(conn, source_ids, owner=owner, not_before=not_before)

    def renew_leases(self, *, owner: str,
                     lease_seconds: float = DEFAULT_LEASE_SECONDS) -> int:
        """Extend every lease ``owner`` holds."""
        with self._db.errors("cannot renew leases"), self._db.transaction() as conn:
            return lease_rows.renew(conn, owner=owner, lease_seconds=lease_seconds)

    def leases(self) -> dict[str, Lease]:
        """Every lease on record, by source id."""
        with self._db.errors("cannot read leases"):
            return lease_rows.leases(self._db.ready())

    def host_gate(self) -> HostGate:
        """Host slots as advisory locks on a connection of their own."""
        return lease_rows.AdvisoryHostGate(self._db.url, busy_timeout=self.busy_timeout)

    def entries(self, *, source_id: str | None = None, limit: int | None = None,
                include_duplicates: bool = False) -> list[StoredEntry]:
        """Stored entries, newest first (see the protocol)."""
        with self._db.errors("cannot read entries", source_id):
            return queries.entries(self._db.ready(), source_id=source_id, limit=limit,
                                   include_duplicates=include_duplicates)

    def entry(self, key: str) -> StoredEntry | None:
        """The entry with this key, if stored."""
        with self._db.errors("cannot read entry"):
            return queries.entry(self._db.ready(), key)

    def versions(self, key: str) -> list[StoredVersion]:
        """Every version an entry has had, oldest first."""
        with self._db.errors("cannot read versions"):
            return queries.versions(self._db.ready(), key)

    def entry_views(self, *, source_id: str | None, since: str | None,
                    limit: int | None, include_duplicates: bool,
                    after: str | None = None) -> list[EntryView]:
        """Entries newest first, as readers see them (see the protocol)."""
        with self._db.errors("cannot read entries", source_id):
            return queries.entry_views(self._db.ready(), source_id=source_id,
                                       since=stored_since(since), limit=limit,
                                       include_duplicates=include_duplicates, after=after)

    def search(self, query: str, *, source_id: str | None = None,
               since: str | None = None, limit: int = DEFAULT_SEARCH_LIMIT,
               include_duplicates: bool = False) -> list[SearchHit]:
        """Entries matching an FTS5-syntax ``query``, best first (see the protocol)."""
        with self._db.errors("cannot search entries", source_id):
            return searched(queries.search, queries.entry_view, self._db.ready(), query,
                            source_id=source_id, since=stored_since(since), limit=limit,
                            include_duplicates=include_duplicates)

    def rebuild_search_index(self) -> int:
        """Index every entry again (one transaction); the number indexed."""
        return self._rewrite_all("cannot rebuild the search index", reindex)

    def entry_view(self, key: str) -> EntryView | None:
        """One entry as readers see it."""
        with self._db.errors("cannot read entry"):
            return queries.entry_view(self._db.ready(), key)

    def duplicates_of(self, keys: Sequence[str]) -> list[DuplicateLink]:
        """The rows whose ``duplicate_of`` is one of ``keys``."""
        with self._db.errors("cannot read duplicates"):
            return queries.duplicates_of(self._db.ready(), keys)

    def keys_starting_with(self, prefix: str, *, limit: int) -> list[str]:
        """At most ``limit`` entry keys that start with ``prefix``, in order."""
        with self._db.errors("cannot read entry keys"):
            return queries.keys_starting_with(self._db.ready(), prefix, limit=limit)

    def entries_with_link(self, match_url: str, url: str) -> list[EntryView]:
        """Entries with this match URL (when not empty) or exactly this link."""
        with self._db.errors("cannot look up link"):
            return queries.entries_with_link(self._db.ready(), match_url, url)

    # -- the change log --------------------------------------------------------------

    def changes(self, *, after: str | None = None, limit: int,
                source_id: str | None = None) -> list[Change]:
        """At most ``limit`` changes after the cursor ``after``, oldest first."""
        with self._db.errors("cannot read changes", source_id):
            return change_log.changes(self._db.ready(), after=after, limit=limit,
                                      source_id=source_id, where=self.path)

    # -- maintenance -----------------------------------------------------------------

    def recompute_duplicates(self, *,
                             source_order: Sequence[str] | None = None) -> DedupeReport:
        """Recompute every match key and every cluster in one transaction, after storing
        ``source_order`` if given (see the protocol)."""
        def rewrite(conn: Any) -> DedupeReport:
            if source_order is not None:
                writing.set_source_order(conn, source_order)
            return dedupe.recompute(conn)

        return self._rewrite_all("cannot recompute duplicates", rewrite)

    def _rewrite_all(self, what: str, rewrite: Callable[[Any], _T]) -> _T:
        """``rewrite`` (of every entry, in one transaction) under the change-log lock.

        It locks every entry (and token posting) in an order of its own, while a
        worker's batch holds the rows of the responses it wrote and goes on to write
        others: beside two workers most rewrites met a deadlock, and a retry took the
        same locks in the same order again. Every response write takes the change-log
        lock first, so with it a rewrite waits for the batch under way to commit and
        the workers' writes wait for the rewrite (each at most ``busy_timeout``).
        A deadlock the server still reports (with some other program) is tried again."""
        for attempt in range(1, _REWRITE_TRIES + 1):
            try:
                with self._db.errors(what), self._db.transaction() as conn:
                    change_log.lock_log(conn)
                    return rewrite(conn)
            except StoreError as exc:
                deadlocked = getattr(exc.__cause__, "sqlstate", None) in ("40P01", "40001")
                if not deadlocked or attempt == _REWRITE_TRIES:
                    raise
                log.info("%s; trying again (%d of %d)", exc, attempt + 1, _REWRITE_TRIES)
        raise AssertionError("not reached")

    def count(self, table: Table) -> int:
        """Number of rows in one of the store's tables."""
        with self._db.errors(f"cannot count {table}"):
            return queries.count(self._db.ready(), table)

    def table_counts(self) -> dict[Table, int]:
        """Number of rows in each of the store's tables."""
        with self._db.errors("cannot count rows"):
            return {table: queries.count(self._db.ready(), table) for table in TABLES}
