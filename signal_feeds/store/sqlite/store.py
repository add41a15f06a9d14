"""The SQLite store: :class:`~signal_feeds.store.protocol.FeedStore` over one file.

Every response is applied in one ``BEGIN IMMEDIATE`` transaction (or one savepoint of a
:meth:`Store.batch`): entries, versions, validators and the fetch row commit together or
not at all. WAL mode lets readers continue while a writer works, and the busy timeout
lets two ``signal fetch`` runs take turns instead of failing with "database is locked".
Every public method raises only :class:`~signal_feeds.errors.StoreError` for what
SQLite reports (see :mod:`.connection`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from signal_feeds.dsn import display_database, is_database_url
from signal_feeds.errors import ConfigError, StoreError
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
from signal_feeds.store.protocol import (
    TABLES,
    DedupeReport,
    DuplicateLink,
    Table,
    checked_busy_timeout,
)
from signal_feeds.store.sqlite import change_log, dedupe, queries, search, writing
from signal_feeds.store.sqlite import leases as lease_rows
from signal_feeds.store.sqlite.bulk import SqliteBulk
from signal_feeds.store.sqlite.connection import (
    DEFAULT_BUSY_TIMEOUT,
    Connection,
    newer_schema_error,
    write_probe,
)
from signal_feeds.store.sqlite.host_locks import FileHostGate
from signal_feeds.store.sqlite.schema import SCHEMA_VERSION, create_schema, schema_version
from signal_feeds.store.views import searched, stored_since
from signal_feeds.timeutil import utcnow

if TYPE_CHECKING:
    from types import TracebackType

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.identity.matching import MatchKeys
    from signal_feeds.identity.search_text import SearchText
    from signal_feeds.store.views import EntryView, SearchHit

__all__ = ["Store"]


class Store:
    """A Signal database in one SQLite file. Use as a context manager or call close().

    ``busy_timeout`` is how long (seconds) a write waits for another program's lock
    before it fails with :class:`~signal_feeds.errors.StoreError`. With
    ``check_writable`` the store takes the write lock once while opening, so that a
    database another program holds fails here, before any work is done.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
                 check_writable: bool = False) -> None:
        if is_database_url(path):
            # Read as a file path it named a folder "postgresql:" and showed the password.
            raise ConfigError(f"Store is the SQLite store; open {display_database(str(path))}"
                              " with signal_feeds.open_store(url)")
        if "\0" in str(path):  # sqlite3 raises ValueError for it
            raise StoreError(f"cannot open database {str(path)!r}: a path cannot hold a "
                             "NUL character")
        self.path = Path(path)
        self.busy_timeout = busy_timeout = checked_busy_timeout(busy_timeout)
        self._common_keys = CommonKeys()
        # A newer Signal keeps tables this one does not know (the change log was one):
        # writing would leave them silently stale. The connection refuses such a file
        # before it changes anything in it (its journal mode, say).
        self._db = Connection(self.path, busy_timeout=busy_timeout,
                              newest_schema=SCHEMA_VERSION)
        try:
            with self._db.errors("cannot use database"):
                found = schema_version(self._db.conn)
            # An older Signal's file is upgraded even to be read: an error says so ("cannot
            # use" did not tell why a reading command had to write, or wait for a lock).
            what = (f"cannot upgrade the database from schema version {found} to "
                    f"{SCHEMA_VERSION}" if 0 < found < SCHEMA_VERSION else
                    "cannot use database")
            if check_writable or found < SCHEMA_VERSION:
                with self._db.errors(what), self._db.transaction() as conn:
                    if (found := schema_version(conn)) > SCHEMA_VERSION:
                        # Upgraded by a newer Signal since the connection looked.
                        raise newer_schema_error(self.path, found, SCHEMA_VERSION)
                    if found < SCHEMA_VERSION:
                        create_schema(conn)
                    if check_writable:
                        write_probe(conn)
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        """Close the connection (closing the last one folds the WAL into the file)."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def _bulk(self) -> SqliteBulk:
        """Whole tables in and out, for :mod:`signal_feeds.store.copy` (not part of the
        protocol: only a copy between stores needs rows as stored)."""
        return SqliteBulk(self._db)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes made inside into one transaction, committed at the end.

        Each write (:meth:`apply_response`, :meth:`save_attempt`, ...) keeps its own
        savepoint, so a failing write is undone alone and the others still commit. One
        commit for many responses writes each shared page once instead of once per
        response. If the commit fails, none of the batch is stored.
        """
        with self._db.errors("cannot commit the batch"), self._db.batch():
            yield

    # -- sources ---------------------------------------------------------------------

    def source_state(self, source_id: str, url: str) -> SourceState:
        """The stored state of a source (a fresh one if it was never fetched).

        When the configured ``url`` differs from the stored one the user has edited the
        source list: the state starts over for the new URL (validators of another URL
        must not be sent to this one).
        """
        with self._db.errors("cannot read source state", source_id):
            stored = queries.stored_source_state(self._db.conn, source_id)
        return queries.state_for_url(stored, source_id, url)

    def source_states_for(self, urls: Mapping[str, str]) -> dict[str, SourceState]:
        """:meth:`source_state` of many sources (source id -> configured url) at once."""
        stored = {state.source_id: state for state in self.source_states()}
        return {sid: queries.state_for_url(stored.get(sid), sid, url)
                for sid, url in urls.items()}

    def source_states(self) -> list[SourceState]:
        """Every stored source state, ordered by id."""
        with self._db.errors("cannot read sources"):
            return queries.source_states(self._db.conn)

    def set_source_order(self, source_ids: Sequence[str]) -> bool:
        """Remember the config's order of the sources, the tie-break of the canonical
        copy of a story (see the protocol); True if it changed."""
        with self._db.errors("cannot save the source order"), \
                self._db.transaction() as conn:
            return writing.set_source_order(conn, source_ids)

    def save_attempt(self, state: SourceState, fetch: FetchRecord) -> None:
        """Store a source's new state and the fetch row of a response without entries
        (304, error, redirect, skip)."""
        with self._db.errors("cannot save fetch state", state.source_id), \
                self._db.transaction() as conn:
            writing.save_attempt(conn, state, fetch)

    def reset_source(self, source_id: str) -> bool:
        """Clear gone, moved, backoff and schedule state; True if the source was known."""
        with self._db.errors("cannot reset source", source_id), \
                self._db.transaction() as conn:
            return writing.reset_source(conn, source_id)

    # -- work sharing ----------------------------------------------------------------

    def claim_sources(self, urls: Mapping[str, str], *, owner: str, now: dt.datetime,
                      limit: int, force: bool = False,
                      lease_seconds: float = DEFAULT_LEASE_SECONDS
                      ) -> dict[str, SourceState]:
        """Lease due sources to ``owner`` (see the protocol). The processes sharing a
        file share a host: lease times are its wall clock."""
        with self._db.errors("cannot claim sources"), self._db.transaction() as conn:
            return lease_rows.claim(conn, urls, owner=owner, now=now, lease_now=utcnow(),
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
            return lease_rows.renew(conn, owner=owner, lease_now=utcnow(),
                                    lease_seconds=lease_seconds)

    def leases(self) -> dict[str, Lease]:
        """Every lease on record, by source id."""
        with self._db.errors("cannot read leases"):
            return lease_rows.leases(self._db.conn)

    def host_gate(self) -> HostGate:
        """Host slots as byte-range locks on ``<database>-hosts``."""
        return FileHostGate(self.path)

    # -- entries ---------------------------------------------------------------------

    def apply_response(self, state: SourceState, rows: Sequence[EntryRow],
                       fetch: FetchRecord, now: dt.datetime, *,
                       match_keys: Mapping[str, MatchKeys] | None = None,
                       search_texts: Mapping[str, SearchText] | None = None,
                       seen_at: dt.datetime | None = None) -> ApplyCounts:
        """Store one response's entries, their versions, the source's new state
        (validators, body digest) and the fetch row, in one transaction.

        Each entry is ``created``, ``updated`` (fingerprint changed: fields replaced,
        a version added) or ``unchanged`` (only ``last_seen_at`` refreshed).
        ``match_keys`` and ``search_texts`` (by entry key) are used where given,
        computed where not. The full-text index is written at the end of the
        transaction (of the batch, inside :meth:`batch`), with the entries. ``seen_at``
        (a run's start) is when what it creates was first seen; ``now`` if not given.
        """
        with self._db.errors("cannot store response", state.source_id), \
                self._db.transaction() as conn:
            return writing.apply_response(conn, state, rows, fetch, now,
                                          given=match_keys or {},
                                          texts=search_texts or {},
                                          common=self._common_keys,
                                          before_commit=self._db.before_commit,
                                          seen_at=seen_at)

    def entries(self, *, source_id: str | None = None, limit: int | None = None,
                include_duplicates: bool = False) -> list[StoredEntry]:
        """Stored entries, newest first (by
        :attr:`EntryView.date <signal_feeds.store.views.EntryView.date>`);
        cross-source duplicates only with ``include_duplicates``, as ``signal
        entries`` and ``signal entries --all``."""
        with self._db.errors("cannot read entries", source_id):
            return queries.entries(self._db.conn, source_id=source_id, limit=limit,
                                   include_duplicates=include_duplicates)

    def entry(self, key: str) -> StoredEntry | None:
        """The entry with this key, if stored."""
        with self._db.errors("cannot read entry"):
            return queries.entry(self._db.conn, key)

    def versions(self, key: str) -> list[StoredVersion]:
        """Every version an entry has had, oldest first."""
        with self._db.errors("cannot read versions"):
            return queries.versions(self._db.conn, key)

    def entry_views(self, *, source_id: str | None, since: str | None,
                    limit: int | None, include_duplicates: bool,
                    after: str | None = None) -> list[EntryView]:
        """Entries newest first, as readers see them (see the protocol)."""
        with self._db.errors("cannot read entries", source_id):
            return queries.entry_views(self._db.conn, source_id=source_id,
                                       since=stored_since(since), limit=limit,
                                       include_duplicates=include_duplicates, after=after)

    def search(self, query: str, *, source_id: str | None = None,
               since: str | None = None, limit: int = DEFAULT_SEARCH_LIMIT,
               include_duplicates: bool = False) -> list[SearchHit]:
        """Entries matching an FTS5 ``query``, best (bm25) first, each with a
        snippet; :class:`~signal_feeds.errors.QueryError` for bad syntax (see the
        protocol)."""
        with self._db.errors("cannot search entries", source_id):
            return searched(queries.search, queries.entry_view, self._db.conn, query,
                            source_id=source_id, since=stored_since(since), limit=limit,
                            include_duplicates=include_duplicates)

    def rebuild_search_index(self) -> int:
        """Index every entry again (one transaction); the number indexed."""
        with self._db.errors("cannot rebuild the search index"), \
                self._db.transaction() as conn:
            return search.rebuild_search_index(conn)

    def entry_view(self, key: str) -> EntryView | None:
        """One entry as readers see it."""
        with self._db.errors("cannot read entry"):
            return queries.entry_view(self._db.conn, key)

    def duplicates_of(self, keys: Sequence[str]) -> list[DuplicateLink]:
        """The rows whose ``duplicate_of`` is one of ``keys``."""
        with self._db.errors("cannot read duplicates"):
            return queries.duplicates_of(self._db.conn, keys)

    def keys_starting_with(self, prefix: str, *, limit: int) -> list[str]:
        """At most ``limit`` entry keys that start with ``prefix``, in order."""
        with self._db.errors("cannot read entry keys"):
            return queries.keys_starting_with(self._db.conn, prefix, limit=limit)

    def entries_with_link(self, match_url: str, url: str) -> list[EntryView]:
        """Entries with this match URL (when not empty) or exactly this link."""
        with self._db.errors("cannot look up link"):
            return queries.entries_with_link(self._db.conn, match_url, url)

    # -- the change log --------------------------------------------------------------

    def changes(self, *, after: str | None = None, limit: int,
                source_id: str | None = None) -> list[Change]:
        """At most ``limit`` changes after the cursor ``after`` (``None``: from the
        first), oldest first (see :meth:`FeedStore.changes`)."""
        with self._db.errors("cannot read changes", source_id):
            return change_log.changes(self._db.conn, after=after, limit=limit,
                                      source_id=source_id, where=str(self.path))

    # -- maintenance -----------------------------------------------------------------

    def recompute_duplicates(self, *,
                             source_order: Sequence[str] | None = None) -> DedupeReport:
        """Recompute every match key and every cluster (``signal dedupe``) in one
        transaction, after storing ``source_order`` if given (see the protocol).
        Running it again changes nothing."""
        with self._db.errors("cannot recompute duplicates"), \
                self._db.transaction() as conn:
            if source_order is not None:
                writing.set_source_order(conn, source_order)
            return dedupe.recompute(conn)

    def count(self, table: Table) -> int:
        """Number of rows in one of the store's tables."""
        with self._db.errors(f"cannot count {table}"):
            return queries.count(self._db.conn, table)

    def table_counts(self) -> dict[Table, int]:
        """Number of rows in each of the store's tables."""
        with self._db.errors("cannot count rows"):
            return {table: queries.count(self._db.conn, table) for table in TABLES}
