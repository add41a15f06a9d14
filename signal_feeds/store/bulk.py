"""Whole tables in and out of a store, backend-neutral: what ``signal copy`` moves.

Each backend reads and writes the rows of :data:`COPIED` in one neutral form (times as
timezone-aware datetimes, flags as bool, blobs as bytes, a missing content fingerprint
as ``""``), so a row read from one backend can be written to the other, and both sides
of a copy can be digested the same way. Keys (entry ``seq``, version and fetch ids,
change positions) are copied as they are: a change-feed cursor issued by the source
database resumes on the copy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["COPIED", "BulkAccess", "Spec"]


@dataclass(frozen=True)
class Spec:
    """One copied table: its columns in copy order, the key it is walked by, and which
    columns are times (``TIMESTAMPTZ`` in PostgreSQL, UTC text in SQLite)."""

    columns: tuple[str, ...]
    key: str
    times: frozenset[str] = frozenset()


_SOURCE_TIMES = frozenset({"last_fetch_at", "last_success_at", "next_due_at", "retry_after"})

#: The tables a copy moves, in an order that satisfies every reference.
COPIED: dict[str, Spec] = {
    "sources": Spec(("id", "url", "fetch_url", "etag", "last_modified", "body_digest",
                     "body_normalizer_version", "body_entries", "ttl_seconds", "status",
                     "http_status", "last_fetch_at", "last_success_at", "next_due_at",
                     "retry_after", "error_count", "last_error", "moved_to", "gone",
                     "feed_title", "body_skipped", "body_skip_reasons", "retry_host",
                     "cache_headers"), "id",
                    _SOURCE_TIMES),
    "source_order": Spec(("source_id", "position"), "source_id"),
    "entries": Spec(("id", "seq", "source_id", "remote_id", "url", "title", "published",
                     "updated", "author", "summary", "content", "fingerprint",
                     "content_fingerprint", "first_seen_at", "last_seen_at",
                     "normalizer_version", "match_url", "norm_title", "dup_link",
                     "dup_title", "dup_text", "duplicate_of", "text_tokens"), "id"),
    "entry_versions": Spec(("id", "entry_id", "entry_seq", "fingerprint",
                            "content_fingerprint", "title", "url", "published", "updated",
                            "first_seen_at", "last_seen_at", "normalizer_version"), "id"),
    "fetches": Spec(("id", "source_id", "started_at", "url", "outcome", "http_status",
                     "created", "updated", "unchanged", "skipped", "error", "duration_ms",
                     "bytes", "skip_reasons"), "id", frozenset({"started_at"})),
    "changes": Spec(("position", "version_id", "source_id", "kind", "previous_fingerprint",
                     "duplicate_of", "changed_at"), "position"),
}


class BulkAccess(Protocol):
    """What a backend offers ``signal copy`` (see :meth:`~.sqlite.store.Store._bulk`)."""

    def read(self, table: str, after: Any, limit: int) -> list[tuple[Any, ...]]:
        """Up to ``limit`` rows of ``table`` whose key is above ``after`` (``None``: from
        the first), in key order (byte order for text), as neutral values."""
        ...

    def write(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert neutral rows into ``table`` (in the open transaction)."""
        ...

    def identity(self) -> tuple[str, int]:
        """The change log's database id and the last position it issued."""
        ...

    def set_identity(self, database_id: str, last_position: int) -> None:
        """Take over another database's change-log identity."""
        ...

    def clear(self) -> None:
        """Delete every row of every copied table."""
        ...

    def finish(self) -> None:
        """After the rows are in: number new rows after the copied keys, rebuild the
        derived indexes (dedupe postings, full text)."""
        ...

    def transaction(self) -> Any:
        """A context manager: one transaction around the copy's writes."""
        ...

    def snapshot(self) -> Any:
        """A context manager: one read-only view of the database for the copy's reads,
        so that a fetch writing meanwhile cannot make the tables disagree."""
        ...
