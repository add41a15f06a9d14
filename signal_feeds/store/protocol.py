"""What the rest of Signal needs from a store: the contract every backend implements.

The pipeline reads and updates source state and applies one response at a time
(entries, versions, validators and the fetch row, all or nothing); the reading commands
(:mod:`signal_feeds.store.reading`) list, look up and export entries through the
queries below. Nothing outside the store package sees a connection, a cursor or SQL.

SQLite (:class:`signal_feeds.store.sqlite.store.Store`) is the embedded default. A
second backend (PostgreSQL, for several fetch hosts) implements the same methods with
the same rules:

- every write (:meth:`FeedStore.apply_response`, :meth:`FeedStore.save_attempt`,
  :meth:`FeedStore.reset_source`, :meth:`FeedStore.set_source_order`, the lease calls,
  :meth:`FeedStore.rebuild_search_index`, :meth:`FeedStore.recompute_duplicates`) is
  atomic on its own, also inside a :meth:`FeedStore.batch`, where a failing write is
  undone alone and the others commit together at the end;
- every failure raises :class:`~signal_feeds.errors.StoreError` (never a driver's
  exception), naming the database without its password;
- a locked or busy database gives up after the store's busy timeout;
- a ``limit`` is any ``int``: below 1 gives nothing, one past what the database can
  count gives every row (the reading functions refuse below 1 with a ``ValueError``).

A backend is opened by :func:`signal_feeds.store.open_store` with the location,
``busy_timeout`` and ``check_writable``, and has two public attributes besides these
methods: ``path`` (the database as messages name it) and ``busy_timeout``.
docs/architecture.md, "Adding a store backend", lists what else a backend provides.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

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
from signal_feeds.timeutil import format_time

if TYPE_CHECKING:
    from types import TracebackType

    from signal_feeds.identity.keys import EntryRow
    from signal_feeds.identity.matching import MatchKeys
    from signal_feeds.identity.search_text import SearchText
    from signal_feeds.store.views import EntryView, SearchHit

__all__ = ["TABLES", "DedupeReport", "DuplicateLink", "FeedStore", "Table", "checked_busy_timeout",
           "first_seen_stamp"]

#: The tables every backend keeps, as counted by :meth:`FeedStore.table_counts`.
Table = Literal["sources", "entries", "entry_versions", "fetches"]
TABLES: tuple[Table, ...] = ("sources", "entries", "entry_versions", "fetches")


def checked_busy_timeout(value: float) -> float:
    """A backend's ``busy_timeout``: a finite number of seconds, at least 0. ``inf`` (as
    "wait for ever") was an OverflowError from deep inside opening the store."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"busy_timeout is a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"busy_timeout must be a finite number of seconds, at least 0, "
                         f"not {value!r}")
    return float(value)


def first_seen_stamp(now: dt.datetime, seen_at: dt.datetime | None) -> str:
    """The stored first-seen time of what a response creates: when the pass that fetched
    it began (``seen_at``, never after ``now``), else ``now``.

    One run stamps every new entry with its own start, so copies of an undated story
    that one run finds in several sources tie on that time, and the order of the
    sources in the config chooses the canonical copy, not which response was written
    first.
    """
    return format_time(now if seen_at is None else min(now, seen_at))


@dataclass(frozen=True)
class DedupeReport:
    """What a marking pass did: rows examined and markers changed per channel."""

    rows: int
    changed: Mapping[str, int]
    #: Rows marked as a duplicate after the pass, in the whole database (counted by
    #: a full recompute only; ``None`` after marking one response).
    duplicates: int | None = None

    @property
    def total_changed(self) -> int:
        """Markers changed over all channels."""
        return sum(self.changed.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"rows": self.rows, "changed": dict(self.changed),
                "total_changed": self.total_changed, "duplicates": self.duplicates}


class DuplicateLink(NamedTuple):
    """One row marked as a duplicate: its key, its source, and the row it duplicates."""

    key: str
    source_id: str
    duplicate_of: str


@runtime_checkable
class FeedStore(Protocol):
    """A Signal database, open until :meth:`close` (or the end of a ``with`` block).

    Closing twice is fine; any other call on a closed store (but :meth:`host_gate`,
    whose gate has its own connection) raises
    :class:`~signal_feeds.errors.StoreError`, never opening the database again."""

    def __enter__(self) -> FeedStore: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    def close(self) -> None:
        """Release the connection(s)."""
        ...

    # -- source state (the pipeline) ------------------------------------------------

    def source_state(self, source_id: str, url: str) -> SourceState:
        """The stored state of a source, or a fresh one if it was never fetched or its
        configured ``url`` is not the stored one."""
        ...

    def source_states_for(self, urls: Mapping[str, str]) -> dict[str, SourceState]:
        """:meth:`source_state` of many sources (source id -> configured url)."""
        ...

    def source_states(self) -> list[SourceState]:
        """Every stored source state, ordered by id (byte order), a source claimed but
        never fetched included (see :meth:`claim_sources`)."""
        ...

    def set_source_order(self, source_ids: Sequence[str]) -> bool:
        """Remember each listed source's position in the config (``source_ids`` in the
        config's order: the whole list, not a ``--source`` selection); True if a stored
        position changed. A source not listed keeps the position it had (one database
        may be fed from several source lists); a source never listed ranks after every
        listed one.

        The positions break ties in the choice of a story's canonical copy (see
        :func:`~signal_feeds.identity.matching.canonical_order`): among rows of the same
        date, the one from the source listed first is canonical. A run calls this once,
        before its first :meth:`apply_response`; markers already stored follow a
        changed order after :meth:`recompute_duplicates`.
        """
        ...

    def reset_source(self, source_id: str) -> bool:
        """Clear gone, moved, backoff and schedule state; True if the source was known.

        A pause this source's host asked for ends for the host's other sources too:
        :meth:`release_sources` gave them the same instant as their own ``retry_after``,
        and every source whose ``retry_after`` is that instant loses it and its next
        poll time."""
        ...

    def save_attempt(self, state: SourceState, fetch: FetchRecord) -> None:
        """Store a source's new state and the fetch row of a response without entries."""
        ...

    def apply_response(self, state: SourceState, rows: Sequence[EntryRow],
                       fetch: FetchRecord, now: dt.datetime, *,
                       match_keys: Mapping[str, MatchKeys] | None = None,
                       search_texts: Mapping[str, SearchText] | None = None,
                       seen_at: dt.datetime | None = None) -> ApplyCounts:
        """Store one response's entries, versions, the source's new state and the fetch
        row in one transaction; mark cross-source duplicates of what changed.

        Each row is ``created``, ``updated`` or ``unchanged`` by
        :func:`~signal_feeds.identity.keys.classify_change` against what its key holds
        (an unchanged entry has only its ``last_seen_at`` set to ``now``), after
        :func:`~signal_feeds.identity.keys.under_stored_keys` has moved a row that is
        an entry stored under another key (an older Signal's key, or another spelling
        of its link) to that key. The returned counts, with each key's outcome in
        ``keys``, are also the fetch row's ``created``/``updated``/``unchanged``: the
        run passes a ``fetch`` whose counts are 0, as only the store knows them. A
        failure of duplicate marking is undone alone and logged: the response is
        stored unmarked, never lost (``signal dedupe`` marks it later).

        ``match_keys`` and ``search_texts`` (by entry key) are what the parser process
        already derived from the rows; a store uses them where given and derives them
        itself where not, with the same result either way. ``seen_at`` (a run's start)
        is when the entries and versions it creates were first seen: see
        :func:`first_seen_stamp`.
        """
        ...

    def batch(self) -> AbstractContextManager[None]:
        """A context in which the writes commit together at its end, each write still
        atomic on its own."""
        ...

    # -- work sharing: several workers on one database (see store/leases.py) ---------

    def claim_sources(self, urls: Mapping[str, str], *, owner: str, now: dt.datetime,
                      limit: int, force: bool = False,
                      lease_seconds: float = DEFAULT_LEASE_SECONDS
                      ) -> dict[str, SourceState]:
        """Lease at most ``limit`` of the sources in ``urls`` (id -> configured URL, in
        the order to prefer) to the worker ``owner``, in one transaction, and return
        their stored states by id (fresh ones for a source never stored or stored for
        another URL).

        A source is claimed only if no other worker's lease on it is active and it is
        due by ``now`` (the worker's clock; ``force`` ignores the schedule, never a
        pending ``Retry-After`` or a gone source): see
        :func:`~signal_feeds.store.leases.choose_claims`. The lease expires
        ``lease_seconds`` later by the database's clock. Sources another worker is
        claiming at the same moment are skipped, never waited for. A claimed source
        without a stored row gets one (its state as never fetched) to hold the lease:
        it is then among :meth:`source_states`.
        """
        ...

    def release_sources(self, source_ids: Sequence[str] | None, *, owner: str,
                        not_before: dt.datetime | None = None) -> int:
        """Give back ``owner``'s leases on ``source_ids`` (``None``: all it holds);
        how many. Atomic; inside a :meth:`batch`, committed with it, so that the lease
        and the response's new state (its next poll time) change together. With
        ``not_before`` (sources not requested because their host asked for a pause),
        their next poll and ``retry_after`` move to that time if they were earlier, so
        that another worker does not fetch them meanwhile, ``--force`` or not."""
        ...

    def renew_leases(self, *, owner: str,
                     lease_seconds: float = DEFAULT_LEASE_SECONDS) -> int:
        """Push every lease ``owner`` still holds to ``lease_seconds`` from now; how
        many. A lease that expired and was taken by another worker is not ``owner``'s
        any more and stays as it is."""
        ...

    def leases(self) -> dict[str, Lease]:
        """Every lease on record, by source id (expired ones included: a dead
        worker's, until another takes the source)."""
        ...

    def host_gate(self) -> HostGate:
        """The per-host slots shared by every worker on this database (a new gate;
        the caller closes it)."""
        ...

    # -- entries (the reading commands) ---------------------------------------------

    def entries(self, *, source_id: str | None = None, limit: int | None = None,
                include_duplicates: bool = False) -> list[StoredEntry]:
        """Stored entries, newest first (by :attr:`EntryView.date
        <signal_feeds.store.views.EntryView.date>`; entries of one date in the feed's own
        order, a later response's first), with the same selection
        as :meth:`entry_views`: without ``include_duplicates`` only canonical rows, as
        ``signal entries`` shows."""
        ...

    def entry(self, key: str) -> StoredEntry | None:
        """The entry with this key, if stored."""
        ...

    def versions(self, key: str) -> list[StoredVersion]:
        """Every version an entry has had, oldest first (by ``first_seen_at``): one per
        distinct (fingerprint, content fingerprint). A response that brings back an
        earlier version sets that version's ``last_seen_at`` and adds none; one that
        finds the entry unchanged touches only the entry (the reading functions take
        the version last seen as the current one, and give it the entry's
        ``last_seen_at``)."""
        ...

    def entry_views(self, *, source_id: str | None, since: str | None,
                    limit: int | None, include_duplicates: bool,
                    after: str | None = None) -> list[EntryView]:
        """Entries newest first, as readers see them: ordered by the entry's date
        (``published``, else ``updated``, else ``first_seen_at``, the earliest of it and
        ``first_seen_at``: :attr:`EntryView.date
        <signal_feeds.store.views.EntryView.date>`), newest first; entries of one date
        in the feed's own order, a later response's first, as :meth:`entries`.
        Without ``include_duplicates`` only canonical rows (with ``source_id``: rows
        not duplicating a row of that same source); ``since`` is an ISO 8601 date or
        time, compared as text with that same date.

        ``after`` (the key of an entry) starts the listing after that entry's place in
        the order: a long listing is read a page at a time, each page a seek in the
        order's index (:class:`~signal_feeds.errors.QueryError` if no entry has it)."""
        ...

    def search(self, query: str, *, source_id: str | None = None,
               since: str | None = None, limit: int = DEFAULT_SEARCH_LIMIT,
               include_duplicates: bool = False) -> list[SearchHit]:
        """Entries whose title, summary or content match ``query``, best first.

        ``query`` is in SQLite FTS5's query syntax, what ``signal search`` takes:
        words (all must occur: implicit AND), ``"a phrase"``, ``AND``/``OR``/``NOT``,
        parentheses, ``prefix*``, ``NEAR(a b, 5)``, and column filters
        ``title:word`` / ``summary:`` / ``content:``. Words are matched case-insensitively
        and without diacritics (``cafe`` finds ``café``). Summary and content are
        indexed as text (:func:`~signal_feeds.store.fulltext.searchable_text` of the
        stored HTML), never their markup. A backend with another engine (PostgreSQL:
        ``tsvector``/``tsquery``) translates this syntax and must give the same hits
        for words, phrases, AND/OR/NOT and prefixes.

        Ranking: BM25 with a title match weighted 4 times a match in the text; of
        equal scores, the entry stored last comes first. ``source_id``, ``since`` and
        ``include_duplicates`` select as in :meth:`entry_views`. By default each story
        is one hit: every row is searched, and a duplicate's hit is its canonical
        entry's (see
        :func:`~signal_feeds.store.views.collapsed_hits`). At most ``limit`` hits,
        each with a snippet: up to 16 words of the best-matching field with every
        matched term between ``[`` and ``]`` and ``…`` where the text is cut.

        The index is written in the same transaction as the entries
        (:meth:`apply_response`), so a committed entry is always searchable as stored.
        Raises :class:`~signal_feeds.errors.QueryError` (a usage error) for a query
        that is empty or not valid syntax, naming the query; never a driver error.
        """
        ...

    def rebuild_search_index(self) -> int:
        """Index every entry again from its stored fields, in one transaction, and
        return how many were indexed. Idempotent: the same entries give the same
        index (for repair, or after the text extraction changed)."""
        ...

    def entry_view(self, key: str) -> EntryView | None:
        """One entry as readers see it."""
        ...

    def duplicates_of(self, keys: Sequence[str]) -> list[DuplicateLink]:
        """The rows whose ``duplicate_of`` is one of ``keys``."""
        ...

    def keys_starting_with(self, prefix: str, *, limit: int) -> list[str]:
        """At most ``limit`` entry keys that start with ``prefix``, in byte order."""
        ...

    def entries_with_link(self, match_url: str, url: str) -> list[EntryView]:
        """Entries whose match URL is ``match_url`` (when not empty) or whose stored link
        is exactly ``url``, oldest first (by ``first_seen_at``, then key)."""
        ...

    # -- the change log (programs downstream) ---------------------------------------

    def changes(self, *, after: str | None = None, limit: int,
                source_id: str | None = None) -> list[Change]:
        """At most ``limit`` changes after the position ``after`` names (``None``: from
        the first), oldest first; with ``source_id``, only that source's.

        The log holds one change per created entry and one per stored new version
        (fingerprint or content fingerprint changed), written in the transaction of
        :meth:`apply_response` that wrote the entry, after duplicate marking: its
        ``duplicate_of`` is the marker decided then (a later
        :meth:`recompute_duplicates` re-marks entries, never changes). Responses that
        are rejected write none; ``unchanged`` entries write none. Entries stored
        before the log existed are logged as ``created`` when the log is made.

        Positions increase in the order changes commit, and a committed position is
        never issued again: once a reader has seen a position, no change with a smaller
        one can appear later (a backend whose transactions commit out of order, such as
        PostgreSQL with concurrent writers, must serialize the numbering with the
        commit). ``cursor`` is an opaque string naming a position of this database.

        Raises :class:`~signal_feeds.errors.CursorError` for a malformed cursor, a cursor
        of another database, or one beyond the last position issued (a database restored
        from an older copy).
        """
        ...

    # -- maintenance ----------------------------------------------------------------

    def recompute_duplicates(self, *,
                             source_order: Sequence[str] | None = None) -> DedupeReport:
        """Recompute every match key and duplicate marker (idempotent). ``source_order``
        (the config's source ids, in order) is stored first, in the same transaction, as
        :meth:`set_source_order` would: the markers then follow a reordered config."""
        ...

    def count(self, table: Table) -> int:
        """Number of rows in one of :data:`TABLES`."""
        ...

    def table_counts(self) -> dict[Table, int]:
        """Number of rows in each of :data:`TABLES`."""
        ...


def require_store(store: object, caller: str) -> None:
    """Refuse what is not an open store, at the call: a database path given to a reading
    function was "'str' object has no attribute 'entry_views'"."""
    # Looked up as a call would look it up, not with isinstance(store, FeedStore): from
    # Python 3.12 that reads the type's attributes only, and refuses a wrapper that
    # passes calls on through __getattr__ (a recorder, a proxy), which serves as well.
    if not callable(getattr(store, "entry_views", None)):
        raise TypeError(f"{caller} takes an open store (signal_feeds.open_store(path)), "
                        f"not {type(store).__name__}")
