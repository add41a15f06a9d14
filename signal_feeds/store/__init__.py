"""Storage behind a narrow, typed interface.

Only this package speaks SQL. The rest of Signal asks a store to apply one response, to
read and update a source's state, and to read entries: the
:class:`~signal_feeds.store.protocol.FeedStore` protocol. SQLite
(:mod:`signal_feeds.store.sqlite`) is the embedded default; another backend implements
the same protocol. :mod:`signal_feeds.store.reading` (entries, history, lookup, export)
and :mod:`signal_feeds.store.change_feed` (what changed after a stored cursor) work over
any of them.

``from signal_feeds.store import Store`` loads the SQLite backend on first use, so that
importing this package stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from signal_feeds.dsn import is_postgres_url, mask_password, not_a_location
from signal_feeds.errors import DatabaseUnavailableError
from signal_feeds.records import (
    ApplyCounts,
    FetchRecord,
    SourceState,
    StoredEntry,
    StoredVersion,
)
from signal_feeds.store.protocol import DedupeReport, FeedStore

if TYPE_CHECKING:
    from signal_feeds.store.sqlite.connection import DEFAULT_BUSY_TIMEOUT
    from signal_feeds.store.sqlite.store import Store

__all__ = [
    "DEFAULT_BUSY_TIMEOUT",
    "ApplyCounts",
    "DedupeReport",
    "FeedStore",
    "FetchRecord",
    "SourceState",
    "Store",
    "StoredEntry",
    "StoredVersion",
    "open_store",
]


def open_store(database: str | Path, *, busy_timeout: float | None = None,
               check_writable: bool = False) -> FeedStore:
    """Open the store at ``database``: a ``postgresql://`` (or ``postgres://``) URL opens
    the PostgreSQL store (the ``postgres`` extra), anything else is a SQLite file path.
    ``busy_timeout`` in seconds (``None``: :data:`DEFAULT_BUSY_TIMEOUT`) bounds waiting
    for locks; one that is negative or not finite is a :class:`ValueError`. With
    ``check_writable`` (a fetch run) the store takes its write lock once while opening,
    so that a database another program holds, or one that cannot be written, fails here,
    before any work is done.

    A backend's URL scheme is listed in :data:`signal_feeds.dsn.URL_SCHEMES` and chosen
    here; its store is given these same three arguments."""
    from signal_feeds.store.sqlite.connection import DEFAULT_BUSY_TIMEOUT

    if reason := not_a_location(database):  # read as a path: "no folder sqlite:"
        raise DatabaseUnavailableError(f"cannot open database {mask_password(str(database))}"
                                       f": {reason}")
    if is_postgres_url(database):
        # Imported only here: psycopg loads when a PostgreSQL URL is used, never before.
        from signal_feeds.store.postgres.store import PostgresStore

        return PostgresStore(str(database), busy_timeout=busy_timeout,
                             check_writable=check_writable)
    from signal_feeds.store.sqlite.store import Store

    timeout = DEFAULT_BUSY_TIMEOUT if busy_timeout is None else busy_timeout
    return Store(database, busy_timeout=timeout, check_writable=check_writable)


def __getattr__(name: str) -> Any:
    if name == "Store":
        from signal_feeds.store.sqlite.store import Store

        return Store
    if name == "DEFAULT_BUSY_TIMEOUT":
        from signal_feeds.store.sqlite.connection import DEFAULT_BUSY_TIMEOUT

        return DEFAULT_BUSY_TIMEOUT
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
