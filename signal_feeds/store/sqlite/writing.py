"""The SQLite write path: one response's entries, versions, dedupe postings, source
state and fetch row, inside the caller's transaction.

Rows are written with a few ``executemany`` calls per response (upserts, versions,
last-seen touches, token postings), in sorted order where that keeps neighbouring
inserts on the same pages. The primary key is the last line of defence against two
writers: ``INSERT ... ON CONFLICT``.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
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
from signal_feeds.store.protocol import first_seen_stamp
from signal_feeds.store.sqlite import dedupe, search
from signal_feeds.store.sqlite.change_log import PendingChange, log_changes
from signal_feeds.timeutil import format_time

__all__ = ["SOURCE_COLUMNS", "apply_response", "reset_source", "save_attempt",
           "set_source_order"]

log = logging.getLogger("signal_feeds.store")

_KEY_CHUNK = 500  # bound on SQL variables per SELECT ... IN (...)


@dataclass(frozen=True)
class _Stored:
    """What the writer needs to know about an entry already stored."""

    fingerprints: tuple[str, str]
    first_seen_at: str
    markers: dict[str, str]
    tokens: bytes | None
    seq: int | None
    url: str = ""
    #: The stored match keys (``link``: match URL, ``title``: normalized title).
    keys: dict[str, str] = field(default_factory=dict)


_ENTRY_COLUMNS = ("id", "source_id", "remote_id", "url", "title", "published", "updated",
                  "author", "summary", "content", "fingerprint", "content_fingerprint",
                  "first_seen_at", "last_seen_at", "normalizer_version", "match_url",
                  "norm_title", "text_tokens", "seq")

_UPSERT_ENTRY = f"""
INSERT INTO entries ({", ".join(_ENTRY_COLUMNS)})
VALUES ({", ".join("?" for _ in _ENTRY_COLUMNS)})
ON CONFLICT(id) DO UPDATE SET
  remote_id = excluded.remote_id, url = excluded.url, title = excluded.title,
  published = excluded.published, updated = excluded.updated, author = excluded.author,
  summary = excluded.summary, content = excluded.content,
  fingerprint = excluded.fingerprint, content_fingerprint = excluded.content_fingerprint,
  last_seen_at = excluded.last_seen_at, normalizer_version = excluded.normalizer_version,
  match_url = excluded.match_url, norm_title = excluded.norm_title,
  text_tokens = excluded.text_tokens, seq = coalesce(seq, excluded.seq)
"""
_UPSERT_VERSION = """
INSERT INTO entry_versions (entry_id, entry_seq, fingerprint, content_fingerprint, title, url,
                            published, updated, first_seen_at, last_seen_at,
                            normalizer_version)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(entry_seq, fingerprint, content_fingerprint)
DO UPDATE SET last_seen_at = excluded.last_seen_at
"""
_TOUCH_ENTRY = "UPDATE entries SET last_seen_at = ? WHERE id = ?"

SOURCE_COLUMNS = ("id", "url", "fetch_url", "etag", "last_modified", "body_digest",
                   "body_normalizer_version", "body_entries", "ttl_seconds", "status",
                   "http_status", "last_fetch_at", "last_success_at", "next_due_at",
                   "retry_after", "error_count", "last_error", "moved_to", "gone",
                   "feed_title", "body_skipped", "body_skip_reasons", "retry_host",
                  "cache_headers")


def _state_values(state: SourceState) -> tuple[Any, ...]:
    def t(moment: dt.datetime | None) -> str | None:
        return format_time(moment) if moment else None

    return (state.source_id, state.url, state.fetch_url, state.etag, state.last_modified,
            state.body_digest, state.body_normalizer_version, state.body_entries,
            state.ttl_seconds, state.status,
            state.http_status, t(state.last_fetch_at), t(state.last_success_at),
            t(state.next_due_at), t(state.retry_after), state.error_count,
            state.last_error, state.moved_to, int(state.gone), state.feed_title,
            state.body_skipped, json.dumps(list(state.body_skip_reasons), ensure_ascii=False),
            state.retry_host, json.dumps(state.cache_headers, ensure_ascii=False))


_SAVE_STATE = (
    f"INSERT INTO sources ({', '.join(SOURCE_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in SOURCE_COLUMNS)}) ON CONFLICT(id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in SOURCE_COLUMNS[1:])
)
_INSERT_FETCH = ("INSERT INTO fetches (source_id, started_at, url, outcome, http_status, "
                 "created, updated, unchanged, skipped, error, duration_ms, bytes, "
                 "skip_reasons) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")


def _mark_duplicates(conn: sqlite3.Connection, counts: ApplyCounts,
                     written: Sequence[DedupeRow], source_id: str,
                     common: CommonKeys) -> bool:
    """Mark cross-source duplicates of the created and updated entries; True if some
    marker changed.

    Runs inside the response's transaction under a savepoint: if marking fails only
    the marking is rolled back. Deduplication is an optimization, never a reason to
    lose an entry; ``signal dedupe`` recomputes the markers later.
    """
    if not written:
        return False
    created = [key for key, outcome in counts.keys.items() if outcome == "created"]
    changed = False
    conn.execute("SAVEPOINT signal_dedupe")
    try:
        report = dedupe.mark_new_entries(conn, written, created=created,
                                         common=common)
        changed = report.total_changed > 0
    except Exception as exc:
        if not conn.in_transaction:  # SQLite rolled the whole write back (a full disk)
            raise
        conn.execute("ROLLBACK TO signal_dedupe")
        log.warning("duplicate marking failed for %s (entries stored unmarked; "
                    "run 'signal dedupe'): %s: %s", source_id, type(exc).__name__, exc)
    conn.execute("RELEASE signal_dedupe")
    return changed


def _left(before: _Stored | None, keys: MatchKeys) -> dict[str, str]:
    """The link and title keys an updated row no longer has (see DedupeRow.left)."""
    if before is None:
        return {}
    now = {"link": keys.match_url, "title": keys.norm_title}
    return {channel: old for channel, old in before.keys.items() if old and old != now[channel]}


def _stored(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, _Stored]:
    found: dict[str, _Stored] = {}
    for start in range(0, len(keys), _KEY_CHUNK):
        chunk = keys[start:start + _KEY_CHUNK]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(
            "SELECT id, fingerprint, content_fingerprint, first_seen_at, dup_link, url, "
            f"dup_title, dup_text, text_tokens, seq, match_url, norm_title "
            f"FROM entries WHERE id IN ({marks})",
            chunk,
        ):
            found[r[0]] = _Stored((r[1], r[2]), r[3], {"link": r[4], "title": r[6],
                                                        "text": r[7]}, r[8], r[9], r[5] or "",
                                    {"link": r[10] or "", "title": r[11] or ""})
    return found


def _stored_keys(conn: sqlite3.Connection, candidates: Mapping[str, str],
                 old_rules_only: bool) -> dict[str, str]:
    """The lookup of :func:`~signal_feeds.identity.keys.under_stored_keys`."""
    olds = list(candidates)
    condition, values = ((" AND (SELECT min(v.normalizer_version) FROM entry_versions AS v"
                          " WHERE v.entry_seq = e.seq) <= ?", [LINK_KEYED_UNTIL])
                         if old_rules_only else ("", []))
    kept: dict[str, str] = {}
    for start in range(0, len(olds), _KEY_CHUNK):
        chunk = olds[start:start + _KEY_CHUNK]
        marks = ",".join("?" * len(chunk))
        for (old,) in conn.execute(
                f"SELECT e.id FROM entries AS e WHERE e.id IN ({marks}) "
                f"AND coalesce(e.remote_id, '') = ''{condition}", [*chunk, *values]):
            kept[candidates[old]] = old
    return kept


def _write_entries(conn: sqlite3.Connection, rows: Sequence[EntryRow], stamp: str,
                   seen: str,
                   given: Mapping[str, MatchKeys], texts: Mapping[str, SearchText],
                   common: CommonKeys
                   ) -> tuple[ApplyCounts, list[DedupeRow], list[PendingChange],
                              search.IndexChange]:
    """Write the rows; return the counts, the dedupe view of what changed, the changes
    to log once duplicates are marked, and the change to the full-text index."""
    stored = _stored(conn, [r.key for r in rows])
    rows, taken = under_stored_keys(rows, stored, functools.partial(_stored_keys, conn))
    if taken:
        stored.update(_stored(conn, taken))
    rank = _source_rank(conn, rows[0].source_id) if rows else UNLISTED_RANK
    upserts: list[tuple[Any, ...]] = []
    versions: list[tuple[Any, ...]] = []
    touches: list[tuple[str, str]] = []
    outcomes: dict[str, Outcome] = {}
    written: list[DedupeRow] = []
    reindexed: list[int] = []
    indexed: list[tuple[int, str, str, str]] = []  # seq, title, summary and content text
    pending: list[PendingChange] = []
    old_tokens: list[tuple[int, int]] = []
    new_tokens: list[tuple[int, int]] = []
    # New entries are numbered from the end of the document back: among entries of one
    # date the reading order (seq DESC) is then the feed's own, first item first, and a
    # later response's new entries come before an earlier one's.
    unnumbered = sum(1 for r in rows if (s := stored.get(r.key)) is None or s.seq is None)
    next_seq = 0
    if unnumbered:
        next_seq = unnumbered + int(conn.execute(
            "SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0])
    common_tokens = common.known["text"]
    for row in rows:
        before = stored.get(row.key)
        outcome = classify_change(before.fingerprints if before else None, row,
                                  stored_url=before.url if before else None)
        outcomes[row.key] = outcome
        if outcome == "unchanged":
            touches.append((stamp, row.key))
            continue
        keys = given.get(row.key) or match_keys(row.url, row.title, row.summary)
        packed = pack_tokens(keys.tokens)
        if before and before.seq is not None:
            seq = before.seq
        else:  # numbered here, so that its tokens can be written with it
            seq = next_seq
            next_seq -= 1
        upserts.append((row.key, row.source_id, row.remote_id, row.url, row.title,
                        row.published, row.updated, row.author, row.summary, row.content,
                        row.fingerprint, row.content_fingerprint, seen, stamp,
                        row.normalizer_version, keys.match_url, keys.norm_title, packed,
                        seq))
        if before:
            reindexed.append(seq)
        text = texts.get(row.key) or SearchText.of(row.summary, row.content)
        indexed.append((seq, row.title or "", text.summary, text.content))
        versions.append((row.key, seq, row.fingerprint, row.content_fingerprint, row.title,
                         row.url, row.published, row.updated, seen, stamp,
                         row.normalizer_version))
        had_tokens = unpack_tokens(before.tokens) if before else ()
        posted = posted_tokens(keys.tokens)
        # Rows written before postings were capped have every stored token posted:
        # all of them that are no longer posted go.
        old_tokens.extend((t, seq) for t in set(had_tokens).difference(posted))
        had = posted_tokens(had_tokens)
        # A token already too common to look up gains nothing from more postings.
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
    conn.executemany(_UPSERT_ENTRY, upserts)
    conn.executemany(_UPSERT_VERSION, versions)
    conn.executemany(_TOUCH_ENTRY, touches)
    conn.executemany("DELETE FROM dedupe_text WHERE token = ? AND entry = ?", old_tokens)
    new_tokens.sort()  # neighbouring inserts land on the same pages
    conn.executemany("INSERT OR IGNORE INTO dedupe_text (token, entry) VALUES (?, ?)",
                     new_tokens)
    values = list(outcomes.values())
    counts = ApplyCounts(created=values.count("created"),
                         updated=values.count("updated"),
                         unchanged=values.count("unchanged"), keys=outcomes)
    return counts, written, pending, search.IndexChange(reindexed, indexed)


def _source_rank(conn: sqlite3.Connection, source_id: str) -> int:
    """The source's place in the config (see :meth:`Store.set_source_order`)."""
    row = conn.execute("SELECT position FROM source_order WHERE source_id = ?",
                       (source_id,)).fetchone()
    return int(row[0]) if row else UNLISTED_RANK


def set_source_order(conn: sqlite3.Connection, source_ids: Sequence[str]) -> bool:
    """Store the positions of the sources a config lists; True if one changed."""
    wanted = {sid: position for position, sid in enumerate(dict.fromkeys(source_ids))}
    stored = dict(conn.execute("SELECT source_id, position FROM source_order").fetchall())
    changed = [(sid, p) for sid, p in wanted.items() if stored.get(sid) != p]
    conn.executemany("INSERT INTO source_order (source_id, position) VALUES (?, ?) "
                     "ON CONFLICT(source_id) DO UPDATE SET position = excluded.position",
                     changed)
    return bool(changed)


def _fetch_values(fetch: FetchRecord) -> tuple[Any, ...]:
    return (fetch.source_id, format_time(fetch.started_at), fetch.url, fetch.outcome,
            fetch.http_status, fetch.created, fetch.updated, fetch.unchanged,
            fetch.skipped, fetch.error, round(fetch.duration_ms, 3), fetch.bytes,
            json.dumps(list(fetch.skip_reasons), ensure_ascii=False))


def save_attempt(conn: sqlite3.Connection, state: SourceState, fetch: FetchRecord) -> None:
    """Write a source's new state and the fetch row of a response without entries."""
    conn.execute(_SAVE_STATE, _state_values(state))
    conn.execute(_INSERT_FETCH, _fetch_values(fetch))


def reset_source(conn: sqlite3.Connection, source_id: str) -> bool:
    """Clear gone, moved, backoff and schedule state; True if the source was known. A
    pause its host asked for ends for the host's other sources too: they were given it as
    their own ``retry_after`` (see ``release_sources``), to the same instant."""
    told = conn.execute("SELECT retry_after FROM sources WHERE id = ?",
                        (source_id,)).fetchone()
    if told is not None and told[0] is not None:
        conn.execute("UPDATE sources SET retry_after = NULL, next_due_at = NULL "
                     "WHERE retry_after = ? AND id != ?", (told[0], source_id))
    cur = conn.execute(
        "UPDATE sources SET gone = 0, status = 'reset', error_count = 0, "
        "last_error = '', next_due_at = NULL, retry_after = NULL, retry_host = '', moved_to = '', "
        "fetch_url = '' WHERE id = ?", (source_id,))
    return cur.rowcount > 0


def apply_response(conn: sqlite3.Connection, state: SourceState, rows: Sequence[EntryRow],
                   fetch: FetchRecord, now: dt.datetime, *,
                   given: Mapping[str, MatchKeys], texts: Mapping[str, SearchText],
                   common: CommonKeys,
                   before_commit: Callable[[Callable[[sqlite3.Connection], None]], None],
                   seen_at: dt.datetime | None = None) -> ApplyCounts:
    """Write one response (entries, versions, postings, duplicate markers, change-log rows,
    source state, fetch row) inside the caller's transaction; return what happened to each entry.

    ``given`` match keys and search ``texts`` (by entry key) are used where given,
    computed where not; ``common`` carries the match keys known to be too common from
    one response to the next. The full-text index change is handed to ``before_commit``,
    which applies it in the same transaction, before it commits. ``seen_at`` is when
    the entries and versions it creates were first seen (see :func:`first_seen_stamp`).
    """
    stamp = format_time(now)
    counts, written, pending, index = _write_entries(conn, rows, stamp,
                                                     first_seen_stamp(now, seen_at), given, texts,
                                                     common)
    if index:
        before_commit(index.apply)
    marked = _mark_duplicates(conn, counts, written, state.source_id, common)
    log_changes(conn, pending, stamp, marked=marked)  # after marking: with its status
    conn.execute(_SAVE_STATE, _state_values(state))
    conn.execute(_INSERT_FETCH, _fetch_values(replace(
        fetch, created=counts.created, updated=counts.updated, unchanged=counts.unchanged)))
    return counts
