"""The frozen records the stages hand each other: what Signal remembers about a source,
what one request did, and entries as stored.

Plain data with no I/O, so that the pure decisions (:mod:`signal_feeds.decide`), the
run and every store backend share one definition.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from signal_feeds.identity.keys import Outcome

__all__ = ["SOURCE_STATUSES", "ApplyCounts", "Change", "ChangeKind", "FetchRecord",
           "SourceState", "StoredEntry", "StoredVersion", "cache_headers_from_json"]

#: The states a stored source is in (``SourceState.status``, ``signal sources
#: --status``): never fetched, its last answer a feed, redirected for good, gone (410),
#: asked to wait (Retry-After), its last request failed, its last body rejected.
SOURCE_STATUSES = ("new", "ok", "moved", "gone", "retry_later", "failed", "rejected")

#: What a change did to its entry: the key was new, or its fingerprints changed.
ChangeKind = Literal["created", "updated"]


def cache_headers_from_json(text: str | None) -> tuple[tuple[str, str], ...]:
    """:attr:`SourceState.cache_headers` as a store keeps it: a JSON list of pairs."""
    return tuple((str(name), str(value)) for name, value in json.loads(text or "[]"))


@dataclass(frozen=True)
class SourceState:
    """What Signal remembers about one source between runs."""

    source_id: str
    url: str
    #: Where requests go now: ``url``, or the target of a permanent redirect.
    fetch_url: str = ""
    etag: str = ""
    last_modified: str = ""
    #: SHA-256 of the last stored body, and the normalizer version that parsed it.
    body_digest: str = ""
    body_normalizer_version: int = 0
    #: Entries (with a key) in that body: what a byte-identical body counts as unchanged.
    body_entries: int = 0
    #: Entries of that body skipped, and why: what a byte-identical body reports again.
    body_skipped: int = 0
    body_skip_reasons: tuple[str, ...] = ()
    #: The host that asked for ``retry_after`` (the one that answered, after redirects):
    #: its other sources wait it out too, in later runs (see run/host_pauses.py).
    retry_host: str = ""
    #: The feed's own ``<ttl>`` in seconds, remembered for 304s (which carry no body).
    ttl_seconds: int | None = None
    #: The stored response's ``Cache-Control`` and ``Expires`` (lower-case names), as
    #: the 304s since have freshened them (RFC 9111 §4.3.4): a 304 that repeats
    #: neither keeps the lifetime its 200 gave.
    cache_headers: tuple[tuple[str, str], ...] = ()
    status: str = "new"
    http_status: int | None = None
    last_fetch_at: dt.datetime | None = None
    last_success_at: dt.datetime | None = None
    next_due_at: dt.datetime | None = None
    retry_after: dt.datetime | None = None
    error_count: int = 0
    last_error: str = ""
    moved_to: str = ""
    gone: bool = False
    #: The feed's own title (``<channel><title>`` / ``<feed><title>``) from the last
    #: parsed body; what an export calls the source when the config gives no title.
    feed_title: str = ""

    @property
    def request_url(self) -> str:
        """The URL the next request goes to."""
        return self.fetch_url or self.url


@dataclass(frozen=True)
class FetchRecord:
    """One row of the ``fetches`` table: what one request did."""

    source_id: str
    started_at: dt.datetime
    url: str
    outcome: str
    http_status: int | None = None
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0
    error: str = ""
    duration_ms: float = 0.0
    bytes: int = 0
    #: Why entries were skipped (:attr:`Identified.skip_reasons`); empty when none were.
    #: Stored in ``fetches.skip_reasons`` as a JSON array of strings (``[]``: none).
    skip_reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApplyCounts:
    """How many entries of one response were created, updated or unchanged."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    keys: dict[str, Outcome] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class StoredEntry:
    """An entry as stored."""

    key: str
    source_id: str
    remote_id: str
    url: str
    title: str
    published: str
    updated: str
    author: str
    summary: str
    content: str
    fingerprint: str
    content_fingerprint: str
    first_seen_at: str
    last_seen_at: str
    normalizer_version: int


@dataclass(frozen=True)
class StoredVersion:
    """One version (fingerprint) an entry has had."""

    key: str
    fingerprint: str
    content_fingerprint: str
    title: str
    url: str
    published: str
    updated: str
    first_seen_at: str
    last_seen_at: str
    normalizer_version: int


@dataclass(frozen=True)
class Change:
    """One position of the change log: an entry created, or a new version of it stored.

    The entry fields are those of the version this change wrote (not the entry as it is
    now: a later edit is a later change). ``cursor`` is opaque: store it, and pass it back
    as ``after`` to read what came next.
    """

    cursor: str
    kind: ChangeKind
    key: str
    source_id: str
    title: str
    url: str
    published: str
    updated: str
    #: The metadata fingerprint this change wrote, and the one it replaced (for an
    #: ``updated`` change; ``""`` for ``created``). They are equal when only the content
    #: (summary, content) changed.
    fingerprint: str
    previous_fingerprint: str
    #: The canonical row this entry duplicated when the change was written (``""``: it
    #: was canonical then). ``signal dedupe`` may re-mark it later; that is not a change.
    duplicate_of: str
    #: When the change was stored (ISO 8601, UTC).
    changed_at: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``key`` also given as ``id``, as elsewhere)."""
        return {"cursor": self.cursor, "kind": self.kind, "id": self.key, **{
            k: v for k, v in asdict(self).items() if k not in ("cursor", "kind")}}
