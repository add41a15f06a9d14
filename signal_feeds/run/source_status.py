"""Reading and resetting source state for ``signal sources``."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from signal_feeds.config.source_list import Config
from signal_feeds.decide.schedule import scheduled_due
from signal_feeds.dsn import as_database
from signal_feeds.errors import ConfigError
from signal_feeds.records import SourceState
from signal_feeds.run.host_pauses import HostPauses
from signal_feeds.store import open_store
from signal_feeds.store.leases import Lease
from signal_feeds.timeutil import format_time, utcnow

__all__ = ["reset_source", "source_table"]


def _database(config: Config | None, database: str | Path | None) -> str | Path:
    """``database`` if given, else the config's."""
    if database is not None:
        return as_database(database)
    if config is None:
        raise ValueError("give a config or a database")
    return config.settings.database


def source_table(config: Config | None, *,
                 database: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per configured source: status, last fetch, HTTP status, next due time,
    consecutive errors, where it moved or that it is gone or expired, and which worker
    holds its lease since when (``leased_by``/``leased_at``/``lease_expires``, ``None``
    when no worker does; an expired lease is a dead worker's, until another takes it).

    Without a ``config``, one row per source that ``database`` holds (a copy of someone
    else's database, say): there are no review dates to expire then.
    """
    db = _database(config, database)
    now = utcnow()
    today = now.date()
    rows: list[dict[str, Any]] = []
    with open_store(db, busy_timeout=config.settings.busy_timeout if config else None) as store:
        leases = store.leases()
        # With the config, the next due time is the one a run would go by (a
        # min_interval raised since the stored one was worked out holds already).
        listed: list[tuple[SourceState, str, float | None]]
        if config is None:
            listed = [(st, "", None) for st in store.source_states()]
        else:
            # One read of them all: a read per source was a round trip each on PostgreSQL.
            states = store.source_states_for({src.id: src.url for src in config.sources})
            listed = [(states[src.id],
                       f"expired (review by {src.review_by})" if src.is_expired(today) else "",
                       config.effective(src).min_interval)
                      for src in config.sources]
        # A host's pause (a 429 or 503 with Retry-After to one of its sources) holds its
        # other sources too: said here, or they would look due and never be asked.
        pauses = HostPauses.from_states([st for st, _, _ in listed], now)
        for st, expired, min_interval in listed:
            due = st.next_due_at if min_interval is None else scheduled_due(
                next_due_at=st.next_due_at, last_fetch_at=st.last_fetch_at,
                min_interval=min_interval)
            host = urlsplit(st.request_url).hostname or ""
            paused = pauses.pause(host, now)
            if paused is not None and (paused.source_id == st.source_id
                                       or paused.until is None):
                # The told source: its own Retry-After says it. (Pauses read from the
                # stored states always have a time; one without lasts a run only.)
                paused = None
            note = expired or (
                f"waiting: {host} answered {paused.status} to {paused.source_id} with "
                f"Retry-After until {format_time(paused.until)[:19]}Z"
                if paused and paused.until
                else _state_note(st))
            rows.append({
                "id": st.source_id, "url": st.url, "status": st.status,
                "http_status": st.http_status,
                "last_fetch_at": format_time(st.last_fetch_at) if st.last_fetch_at else None,
                "next_due_at": format_time(due) if due else None,
                "retry_after": format_time(st.retry_after) if st.retry_after else None,
                "error_count": st.error_count, "moved_to": st.moved_to or None,
                "gone": st.gone, "expired": bool(expired), "note": note,
                "host_paused_until": (format_time(paused.until)
                                      if paused and paused.until else None),
                **_lease_columns(leases.get(st.source_id)),
            })
    return rows


def _state_note(st: SourceState) -> str:
    """What the table's note says of a source's state: gone, moved, or its last error."""
    if st.gone:
        return "gone (410): reset to poll again"
    if st.moved_to:
        return f"moved to {st.moved_to}"
    return st.last_error or ""


def _lease_columns(lease: Lease | None) -> dict[str, str | None]:
    if lease is None:
        return {"leased_by": None, "leased_at": None, "lease_expires": None}
    return {"leased_by": lease.owner, "leased_at": format_time(lease.leased_at),
            "lease_expires": format_time(lease.expires)}


def reset_source(config: Config | None, source_id: str, *,
                 database: str | Path | None = None) -> None:
    """Clear a source's gone, moved, backoff and schedule state. Without a ``config``,
    in ``database`` alone (a source it holds)."""
    if config is not None:
        config.source(source_id)  # raises ConfigError for an unknown id
    db = _database(config, database)
    with open_store(db, busy_timeout=config.settings.busy_timeout if config else None) as store:
        if not store.reset_source(source_id):
            where = "has never been fetched" if config is not None else \
                f"is not in the database {db}"
            raise ConfigError(f"source {source_id!r} {where}; nothing to reset",
                              path=str(config.path) if config and config.path else None)
