"""The PostgreSQL write path: one response's entries, versions, search vectors, dedupe
postings, change-log rows, source state and fetch row, inside the caller's transaction.

Rows go to the server as arrays, one statement per kind of row (``INSERT ... SELECT FROM
unnest(...)``), so a response of 100 entries costs about ten round trips, not hundreds.
The primary keys and unique constraints are the last line of defence against a second
writer: ``INSERT ... ON CONFLICT``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from signal_feeds.identity.keys import (
    LINK_KEYED_UNTIL,
    EntryRow,
    Outcome,
    classify_change,
    under_stored_keys,
)
from signal_feeds.identity.matching import (
    UNLISTED_RANK,
    DedupeRow,
    MatchKeys,
    match_keys,
    pack_tokens,
    posted_tokens,
    unpack_tokens,
)
from signal_feeds.identity.search_text import SearchText
from signal_feeds.records import ApplyCounts, FetchRecord, SourceState
from signal_feeds.store.marking import CommonKeys
from signal_feeds.store.postgres import dedupe
from signal_feeds.store.postgres.change_log import lock_log, log_changes
from signal_feeds.store.postgres.search import search_vector
from signal_feeds.store.protocol import first_seen_stamp
from signal_feeds.store.sqlite.change_log import PendingChange
from signal_feeds.timeutil import format_time

__all__ = ["SOURCE_COLUMNS", "apply_response", "reset_source", "save_attempt",
           "set_source_order"]

log = logging.getLogger("signal_feeds.store")


@dataclass(frozen=True)
class _Stored:
    """What the writer needs to know about an entry already stored."""

    fingerprints: tuple[str, str]
    first_seen_at: str
    markers: dict[str, str]
    tokens: bytes | None
    seq: int
    url: str = ""
    #: The stored match keys (``link``: match URL, ``title``: normalized title).
    keys: dict[str, str] = field(default_factory=dict)


_ENTRY_COLUMNS = (("id", "text"), ("source_id", "text"), ("remote_id", "text"),
                  ("url", "text"), ("title", "text"), ("published", "text"),
                  ("updated", "text"), ("author", "text"), ("summary", "text"),
                  ("content", "text"), ("fingerprint", "text"),
                  ("content_fingerprint", "text"), ("first_seen_at", "text"),
                  ("last_seen_at", "text"), ("normalizer_version", "integer"),
                  ("match_url", "text"), ("norm_title", "text"), ("text_tokens", "bytea"),
                  ("seq", "bigint"), ("search_vector", "text"))
_UPSERT_ENTRIES = (
    f"INSERT INTO entries ({', '.join(c for c, _ in _ENTRY_COLUMNS)}) "
    f"SELECT {', '.join(c if c != 'search_vector' else 'search_vector::tsvector' for c, _ in _ENTRY_COLUMNS)} "  # noqa: E501
    f"FROM unnest({', '.join(f'%s::{t}[]' for _, t in _ENTRY_COLUMNS)}) "
    f"AS r({', '.join(c for c, _ in _ENTRY_COLUMNS)}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c, _ in _ENTRY_COLUMNS
                if c not in ("id", "source_id", "first_seen_at", "seq"))
)
_VERSION_COLUMNS = (("entry_id", "text"), ("entry_seq", "bigint"), ("fingerprint", "text"),
                    ("content_fingerprint", "text"), ("title", "text"), ("url", "text"),
                    ("published", "text"), ("updated", "text"), ("first_seen_at", "text"),
                    ("last_seen_at", "text"), ("normalizer_version", "integer"))
_UPSERT_VERSIONS = (
    f"INSERT INTO entry_versions ({', '.join(c for c, _ in _VERSION_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%s::{t}[]' for _, t in _VERSION_COLUMNS)}) "
    "ON CONFLICT (entry_seq, fingerprint, content_fingerprint) "
    "DO UPDATE SET last_seen_at = excluded.last_seen_at "
    "RETURNING id, entry_seq, fingerprint, content_fingerprint"
)

SOURCE_COLUMNS = ("id", "url", "fetch_url", "etag", "last_modified", "body_digest",
                  "body_normalizer_version", "body_entries", "ttl_seconds", "status",
                  "http_status", "last_fetch_at", "last_success_at", "next_due_at",
                  "retry_after", "error_count", "last_error", "moved_to", "gone",
                  "feed_title", "body_skipped", "body_skip_reasons", "retry_host",
                  "cache_headers")
# The lease columns are left alone: they belong to the workers sharing the sources.
_SAVE_STATE = (
    f"INSERT INTO sources ({', '.join(SOURCE_COLUMNS)}) "
    f"VALUES ({', '.join('%s' for _ in SOURCE_COLUMNS)}) ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in SOURCE_COLUMNS[1:])
)
_INSERT_FETCH = ("INSERT INTO fetches (source_id, started_at, url, outcome, http_status, "
                 "created, updated, unchanged, skipped, error, duration_ms, bytes, "
                 "skip_reasons) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)")


def _state_values(state: SourceState) -> tuple[Any, ...]:
    return (state.source_id, state.url, state.fetch_url, state.etag, state.last_modified,
            state.body_digest, state.body_normalizer_version, state.body_entries,
            state.ttl_seconds, state.status, state.http_status, state.last_fetch_at,
            state.last_success_at, state.next_due_at, state.retry_after, state.error_count,
            state.last_error, state.moved_to, state.gone, state.feed_title,
            state.body_skipped, json.dumps(list(state.body_skip_reasons), ensure_ascii=False),
            state.retry_host, json.dumps(state.cache_headers, ensure_ascii=False))


def _fetch_values(fetch: FetchRecord) -> tuple[Any, ...]:
    return (fetch.source_id, fetch.started_at, fetch.url, fetch.outcome,
            fetch.http_status, fetch.created, fetch.updated, fetch.unchanged,
            fetch.skipped, fetch.error, round(fetch.duration_ms, 3), fetch.bytes,
            json.dumps(list(fetch.skip_reasons), ensure_ascii=False))


def _columns(rows: Sequence[Sequence[Any]], width: int) -> list[list[Any]]:
    """Rows -> one list per column (the arrays ``unnest`` takes)."""
    return [[row[i] for row in rows] for i in range(width)]


def _left(before: _Stored | None, keys: MatchKeys) -> dict[str, str]:
    """The link and title keys an updated row no longer has (see DedupeRow.left)."""
    if before is None:
        return {}
    now = {"link": keys.match_url, "title": keys.norm_title}
    return {channel: old for channel, old in before.keys.items() if old and old != now[channel]}


def _stored(conn: Any, keys: Sequence[str]) -> dict[str, _Stored]:
    found: dict[str, _Stored] = {}
    for r in conn.execute(
            "SELECT id, fingerprint, content_fingerprint, first_seen_at, dup_link, url, "
            "dup_title, dup_text, text_tokens, seq, match_url, norm_title "
            "FROM entries WHERE id = ANY(%s)",
            (list(keys),)):
        found[r[0]] = _Stored((r[1], r[2]), r[3], {"link": r[4], "title": r[6], "text": r[7]},
                              bytes(r[8]) if r[8] is not None else None, int(r[9]), r[5] or "",
                              {"link": r[10] or "", "title": r[11] or ""})
    return found


def _stored_keys(conn: Any, candidates: Mapping[str, str],
                 old_rules_only: bool) -> dict[str, str]:
    """The lookup of :func:`~signal_feeds.identity.keys.under_stored_keys`."""
    condition, values = ((" AND (SELECT min(v.normalizer_version) FROM entry_versions AS v"
                          " WHERE v.entry_seq = e.seq) <= %s", [LINK_KEYED_UNTIL])
                         if old_rules_only else ("", []))
    return {candidates[r[0]]: r[0] for r in conn.execute(
        "SELECT e.id FROM entries AS e WHERE e.id = ANY(%s) "
        f"AND coalesce(e.remote_id, '') = ''{condition}", (list(candidates), *values))}


def _source_rank(conn: Any, source_id: str) -> int:
    row = conn.execute("SELECT position FROM source_order WHERE source_id = %s",
                       (source_id,)).fetchone()
    return int(row[0]) if row else UNLISTED_RANK


def _write_entries(conn: Any, rows: Sequence[EntryRow], stamp: str, seen: str,
                   given: Mapping[str, MatchKeys], texts: Mapping[str, SearchText],
                   common: CommonKeys
                   ) -> tuple[ApplyCounts, list[DedupeRow], list[PendingChange],
                              dict[tuple[int, str, str], int]]:
    """Write the rows; return the counts, the dedupe view of what changed, the changes
    to log once duplicates are marked, and the version ids they name."""
    rows = list({r.key: r for r in rows}.values())  # one row per key (repeats collapsed)
    stored = _stored(conn, [r.key for r in rows])
    rows, taken = under_stored_keys(rows, stored, functools.partial(_stored_keys, conn))
    if taken:
        stored.update(_stored(conn, taken))
    rank = _source_rank(conn, rows[0].source_id) if rows else UNLISTED_RANK
    new = sum(1 for r in rows if r.key not in stored)
    fresh: list[int] = []
    if new:
        # Handed out from the highest down: among entries of one date the reading order
        # (seq DESC) is then the feed's own, first item first (as on SQLite).
        fresh = sorted((int(r[0]) for r in conn.execute(
            "SELECT nextval('entries_seq') FROM generate_series(1, %s)", (new,))),
            reverse=True)
    upserts: list[tuple[Any, ...]] = []
    versions: list[tuple[Any, ...]] = []
    touches: list[str] = []
    outcomes: dict[str, Outcome] = {}
    written: list[DedupeRow] = []
    pending: list[PendingChange] = []
    old_tokens: list[tuple[int, int]] = []
    new_tokens: list[tuple[int, int]] = []
    common_tokens = common.known["text"]
    for row in rows:
        before = stored.get(row.key)
        outcome = classify_change(before.fingerprints if before else None, row,
                                  stored_url=before.url if before else None)
        outcomes[row.key] = outcome
        if outcome == "unchanged":
            touches.append(row.key)
            continue
        keys = given.get(row.key) or match_keys(row.url, row.title, row.summary)
        seq = before.seq if before else fresh.pop(0)
        upserts.append((row.key, row.source_id, row.remote_id, row.url, row.title,
                        row.published, row.updated, row.author, row.summary, row.content,
                        row.fingerprint, row.content_fingerprint, seen, stamp,
                        row.normalizer_version, keys.match_url, keys.norm_title,
                        pack_tokens(keys.tokens), seq,
                        search_vector(row.title, row.summary, row.content,
                                      text=texts.get(row.key))))
        versions.append((row.key, seq, row.fingerprint, row.content_fingerprint or "",
                         row.title, row.url, row.published, row.updated, seen, stamp,
                         row.normalizer_version))
        had_tokens = unpack_tokens(before.tokens) if before else ()
        posted = posted_tokens(keys.tokens)
        old_tokens.extend((t, seq) for t in set(had_tokens).difference(posted))
        had = posted_tokens(had_tokens)
        new_tokens.extend((t, seq) for t in posted
                          if t not in had and t not in common_tokens)
        first_seen = before.first_seen_at if before else seen
        pending.append(PendingChange(outcome, row.key, seq, row.source_id, row.fingerprint,
                                     row.content_fingerprint,
                                     before.fingerprints[0] if before else ""))
        written.append(DedupeRow(
            key=row.key, seq=seq, source_id=row.source_id, first_seen_at=first_seen,
            moment=row.published or row.updated or first_seen, rank=rank,
            match_url=keys.match_url, norm_title=keys.norm_title, shingles=keys.shingles,
            markers=before.markers if before else {}, tokens=keys.tokens,
            left=_left(before, keys)))
    version_ids: dict[tuple[int, str, str], int] = {}
    if upserts:
        conn.execute(_UPSERT_ENTRIES, _columns(upserts, len(_ENTRY_COLUMNS)))
        for vid, seq, fp, cfp in conn.execute(
                _UPSERT_VERSIONS, _columns(versions, len(_VERSION_COLUMNS))):
            version_ids[(int(seq), fp, cfp)] = int(vid)
    if touches:
        conn.execute("UPDATE entries SET last_seen_at = %s WHERE id = ANY(%s)",
                     (stamp, touches))
    if old_tokens:
        conn.execute("DELETE FROM dedupe_text AS d USING unnest(%s::bigint[], %s::bigint[]) "
                     "AS o(token, entry) WHERE d.token = o.token AND d.entry = o.entry",
                     _columns(old_tokens, 2))
    if new_tokens:
        new_tokens.sort()
        conn.execute("INSERT INTO dedupe_text (token, entry) SELECT * FROM "
                     "unnest(%s::bigint[], %s::bigint[]) ON CONFLICT DO NOTHING",
                     _columns(new_tokens, 2))
    values = list(outcomes.values())
    counts = ApplyCounts(created=values.count("created"), updated=values.count("updated"),
                         unchanged=values.count("unchanged"), keys=outcomes)
    return counts, written, pending, version_ids


def _mark_duplicates(conn: Any, counts: ApplyCounts, written: Sequence[DedupeRow],
                     source_id: str, common: CommonKeys) -> bool:
    """Mark cross-source duplicates of what was written, under a savepoint: if marking
    fails only the marking is undone (``signal dedupe`` recomputes it later)."""
    if not written:
        return False
    created = [key for key, outcome in counts.keys.items() if outcome == "created"]
    try:
        with conn.transaction():
            report = dedupe.mark_new_entries(conn, written, created=created, common=common)
        return report.total_changed > 0
    except Exception as exc:
        if conn.closed or conn.broken:
            raise  # the server is gone: nothing of this response can commit
        log.warning("duplicate marking failed for %s (entries stored unmarked; "
                    "run 'signal dedupe'): %s: %s", source_id, type(exc).__name__, exc)
        return False


def set_source_order(conn: Any, source_ids: Sequence[str]) -> bool:
    """Store the positions of the sources a config lists; True if one changed."""
    wanted = {sid: position for position, sid in enumerate(dict.fromkeys(source_ids))}
    stored = dict(conn.execute("SELECT source_id, position FROM source_order").fetchall())
    changed = [(sid, p) for sid, p in wanted.items() if stored.get(sid) != p]
    if changed:
        conn.execute("INSERT INTO source_order (source_id, position) SELECT * FROM "
                     "unnest(%s::text[], %s::integer[]) ON CONFLICT (source_id) "
                     "DO UPDATE SET position = excluded.position", _columns(changed, 2))
    return bool(changed)


def save_attempt(conn: Any, state: SourceState, fetch: FetchRecord) -> None:
    """Write a source's new state and the fetch row of a response without entries."""
    conn.execute(_SAVE_STATE, _state_values(state))
    conn.execute(_INSERT_FETCH, _fetch_values(fetch))


def reset_source(conn: Any, source_id: str) -> bool:
    """Clear gone, moved, backoff and schedule state; True if the source was known. A
    pause its host asked for ends for the host's other sources too: they were given it as
    their own ``retry_after`` (see ``release_sources``), to the same instant."""
    conn.execute("UPDATE sources AS o SET retry_after = NULL, next_due_at = NULL "
                 "FROM sources AS t WHERE t.id = %s AND o.id != t.id "
                 "AND o.retry_after = t.retry_after", (source_id,))
    cur = conn.execute(
        "UPDATE sources SET gone = false, status = 'reset', error_count = 0, "
        "last_error = '', next_due_at = NULL, retry_after = NULL, retry_host = '', moved_to = '', "
        "fetch_url = '' WHERE id = %s", (source_id,))
    return bool(cur.rowcount > 0)


def apply_response(conn: Any, state: SourceState, rows: Sequence[EntryRow],
                   fetch: FetchRecord, now: dt.datetime, *, given: Mapping[str, MatchKeys],
                   texts: Mapping[str, SearchText], common: CommonKeys,
                   seen_at: dt.datetime | None = None) -> ApplyCounts:
    """Write one response inside the caller's transaction; what happened to each entry."""
    stamp = format_time(now)
    # First, before any row lock: every writer takes the locks in the same order.
    lock_log(conn)
    counts, written, pending, version_ids = _write_entries(
        conn, rows, stamp, first_seen_stamp(now, seen_at), given, texts, common)
    marked = _mark_duplicates(conn, counts, written, state.source_id, common)
    log_changes(conn, pending, version_ids, stamp, marked=marked)
    conn.execute(_SAVE_STATE, _state_values(state))
    conn.execute(_INSERT_FETCH, _fetch_values(replace(
        fetch, created=counts.created, updated=counts.updated, unchanged=counts.unchanged)))
    return counts
