"""Entry identity: the key says *which* entry, the fingerprint says *which version*.

- ``digest(value)``: SHA-256 of canonical JSON. Never Python's ``hash()``, which is salted
  per process.
- key: ``digest([source_id, remote_id or url])``. The JSON array keeps the two parts apart
  (no joiner can be forged) and the source id keeps equal ids of two publishers apart.
- fingerprint: ``digest`` of the metadata fields ``title``, ``url``, ``published``,
  ``updated``; the content fields (author, summary, content) have a digest of their own.
  Neither ever includes fetch times or database ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from signal_feeds.errors import ContradictionError
from signal_feeds.parsed import NORMALIZER_VERSION, ParsedEntry
from signal_feeds.urls import link_form, link_spellings, other_scheme, without_tracking

__all__ = [
    "LINK_KEYED_UNTIL",
    "EntryRow",
    "Outcome",
    "classify_change",
    "Identified",
    "content_fingerprint",
    "digest",
    "entry_key",
    "identify",
    "FindStoredKeys",
    "keep_link_keys",
    "keys_to_keep",
    "under_stored_keys",
    "link_key_candidates",
    "metadata_fingerprint",
    "skip_reason",
    "spelling_key_candidates",
]


#: What ``json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))``
#: builds on each call (about half the cost of encoding a key's short list); it keeps no
#: state between calls.
_CANONICAL_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def digest(value: object) -> str:
    """SHA-256 hex digest of ``value`` as canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = _CANONICAL_JSON.encode(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def entry_key(source_id: str, remote_id: str, url: str) -> str | None:
    """The entry's key, or ``None`` when it has neither a remote id nor a usable link.

    A missing identity is never replaced by a random or date-based one: that would
    create a new row on every read.
    """
    ident = remote_id or url
    if not ident:
        return None
    return digest([source_id, ident])


def metadata_fingerprint(entry: ParsedEntry | EntryRow, *, url: str | None = None) -> str:
    """Digest of the fields a reader sees in a list: title, url, published, updated
    (``url`` in place of the entry's own, if given)."""
    return digest({"title": entry.title, "url": entry.url if url is None else url,
                   "published": entry.published, "updated": entry.updated})


def content_fingerprint(entry: ParsedEntry) -> str:
    """Digest of the body fields: author, summary and content."""
    return digest({"author": entry.author, "summary": entry.summary, "content": entry.content})


@dataclass(frozen=True, slots=True)
class EntryRow:
    """A parsed entry with its identity, ready to store."""

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
    normalizer_version: int = NORMALIZER_VERSION


@dataclass(frozen=True, slots=True)
class Identified:
    """The rows of one response (one per key) and how many entries had no identity."""

    rows: tuple[EntryRow, ...]
    skipped: int
    #: Why entries were skipped: each distinct reason once, in document order, with the
    #: number of entries when more than one (``"no id and no link (3 entries)"``).
    skip_reasons: tuple[str, ...] = ()


#: Distinct skip reasons kept per response: a hostile feed cannot grow a report without end.
MAX_SKIP_REASONS = 10


def skip_reason(entry: ParsedEntry) -> str:
    """Why an entry without a key is skipped, naming what the link policy refused."""
    if entry.link_refused:
        return f"no id and no usable link ({entry.link_refused})"
    return "no id and no link"


def _reason_list(counts: dict[str, int]) -> tuple[str, ...]:
    reasons = [reason if count == 1 else f"{reason} ({count} entries)"
               for reason, count in counts.items()]
    if len(reasons) > MAX_SKIP_REASONS:
        rest = sum(list(counts.values())[MAX_SKIP_REASONS:])
        reasons = reasons[:MAX_SKIP_REASONS] + [f"{rest} more entries for other reasons"]
    return tuple(reasons)


def identify(source_id: str, entries: Iterable[ParsedEntry]) -> Identified:
    """Give each entry its key and fingerprints; collapse identical repeats.

    Raises :class:`ContradictionError` when one key carries two different versions in
    the same response: choosing the first or the last would let XML order decide.
    """
    by_key: dict[str, EntryRow] = {}
    skipped = 0
    reasons: dict[str, int] = {}  # insertion order: the order the feed gave them
    for entry in entries:
        # An entry without an id is known by its link, or by what the parse found tells
        # it apart from others on that page (a changelog's #v2.3, a podcast episode's
        # file): see ParsedEntry.distinct.
        ident = entry.distinct or entry.url
        key = entry_key(source_id, entry.remote_id, ident)
        if key is None:
            skipped += 1
            reason = skip_reason(entry)
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        row = EntryRow(
            key=key, source_id=source_id, remote_id=entry.remote_id, url=entry.url,
            title=entry.title, published=entry.published, updated=entry.updated,
            author=entry.author, summary=entry.summary, content=entry.content,
            fingerprint=metadata_fingerprint(entry),
            content_fingerprint=content_fingerprint(entry),
        )
        seen = by_key.get(key)
        if seen is None:
            by_key[key] = row
        elif (seen.fingerprint, seen.content_fingerprint) != (
            row.fingerprint, row.content_fingerprint
        ):
            if entry.remote_id:
                problem = "two different versions of one entry in one response"
            else:
                # A feed without guids whose items all link to one page (a news or
                # notices page): the operator should know that the feed is at fault.
                problem = (f"two different entries without an id share the link "
                           f"{ident!r} in one response, and neither a fragment of it nor "
                           "a media file tells them apart")
            raise ContradictionError(problem, source_id=source_id, key=key,
                                     remote_id=entry.remote_id)
    return Identified(rows=tuple(by_key.values()), skipped=skipped,
                      skip_reasons=_reason_list(reasons))


#: Up to this normalizer version an entry without an id could be stored under the key of
#: its link alone: the link's fragment and its media file (see ``ParsedEntry.distinct``),
#: which key such an entry today, were left out, in RSS and Atom up to version 12
#: (which used them only while another entry shared the page), in JSON Feed up to 21.
LINK_KEYED_UNTIL = 21


def link_key_candidates(rows: Sequence[EntryRow]) -> dict[str, str]:
    """The key an older Signal gave each row that has no remote id and is keyed by its
    link's fragment or its media file: ``{key of its link alone: row key}``.

    Such a row stored by an older Signal keeps that key (identity is a contract): the
    store uses it instead of the row's own when the row's own is not stored and the old
    one is, stored before :data:`LINK_KEYED_UNTIL` passed (see :func:`keep_link_keys`).
    Left out when the old key is another row's in this response, or two rows of it
    would take it (two anchors of one page: which one the old row was is not known).
    """
    own = {row.key for row in rows}
    claims: dict[str, list[str]] = {}
    for row in rows:
        if row.remote_id or not row.url:
            continue
        old = entry_key(row.source_id, "", row.url)
        if old is not None and old != row.key and old not in own:
            claims.setdefault(old, []).append(row.key)
    return {old: keys[0] for old, keys in claims.items() if len(keys) == 1}


def spelling_key_candidates(rows: Sequence[EntryRow], unstored: Iterable[str]
                            ) -> dict[str, str]:
    """The keys the rows keyed ``unstored`` (rows without a remote id, keyed by their
    link) have under the other spellings of their link: ``{other key: row key}``.

    A feed that changes how it writes its links (``/café`` one day, ``/caf%C3%A9`` the
    next; a host in Unicode, then as IDNA) names the same entries: a stored row under
    such a key is that entry, and the store keeps its key (see :func:`keep_link_keys`).
    So does a site that moved from http to https, or back (the link itself changed, so
    the entry is updated with it).
    Left out as :func:`link_key_candidates` leaves them out: a key another row of this
    response has, or one two rows would take.
    """
    own = {row.key for row in rows}
    wanted = set(unstored)
    claims: dict[str, list[str]] = {}
    for row in rows:
        if row.key not in wanted or row.remote_id or not row.url or (
                row.key != entry_key(row.source_id, "", row.url)):
            continue  # an entry with an id, or keyed by its link's fragment or media
        spellings = link_spellings(row.url)
        moved = {other_scheme(s) for s in spellings}
        for spelling in (spellings | {m for m in moved if m is not None}) - {row.url}:
            other = digest([row.source_id, spelling])
            if other not in own:
                claims.setdefault(other, []).append(row.key)
    return {other: keys[0] for other, keys in claims.items() if len(keys) == 1}


#: How a store finds which of some keys it holds: ``find(candidates, old_rules_only)``
#: with ``{stored key: row key}`` returns ``{row key: stored key}`` for those stored for
#: an entry without a remote id (only those first stored under the link rules before
#: :data:`LINK_KEYED_UNTIL` when ``old_rules_only``).
FindStoredKeys = Callable[[Mapping[str, str], bool], dict[str, str]]


def keys_to_keep(rows: Sequence[EntryRow], stored: Container[str],
                 find: FindStoredKeys) -> dict[str, str]:
    """``{row key: stored key}`` for the rows (none of them in ``stored``) that are
    entries already stored under another key: the key an older Signal gave them (see
    :func:`link_key_candidates`) or that of another spelling of their link (see
    :func:`spelling_key_candidates`). Both backends ask it; ``find`` is their lookup."""
    candidates = {old: key for old, key in link_key_candidates(rows).items()
                  if key not in stored}
    kept = find(candidates, True) if candidates else {}
    unstored = [r.key for r in rows if r.key not in stored and r.key not in kept]
    spelled = {other: key for other, key in spelling_key_candidates(rows, unstored).items()
               if other not in candidates}
    if spelled:
        kept.update(find(spelled, False))
    return kept


def under_stored_keys(rows: Sequence[EntryRow], stored: Container[str],
                      find: FindStoredKeys) -> tuple[list[EntryRow], list[str]]:
    """``rows``, each one that is an entry stored under another key (see
    :func:`keys_to_keep`) under that key, and the stored keys so taken: the store still
    has to read their stored state."""
    kept = keys_to_keep(rows, stored, find)
    return keep_link_keys(rows, kept), list(kept.values())


def keep_link_keys(rows: Sequence[EntryRow], kept: Mapping[str, str]) -> list[EntryRow]:
    """``rows``, each one whose key is in ``kept`` (``{row key: stored old key}``, from
    :func:`link_key_candidates`) under the old key instead."""
    return [replace(row, key=kept[row.key]) if row.key in kept else row for row in rows]


#: What an upsert did to one entry.
Outcome = Literal["created", "updated", "unchanged"]


def classify_change(stored: tuple[str, str] | None, row: EntryRow, *,
                    stored_url: str | None = None) -> Outcome:
    """New, updated or unchanged? ``stored`` is the stored (fingerprint, content
    fingerprint) pair of the row's key, or ``None`` when the key is new; ``stored_url``
    the stored link.

    A link that differs from the stored one only in tracking parameters (a publisher
    adding ``?utm_source=rss`` to every link, or rotating a campaign name) or in its
    spelling (``/café`` and ``/caf%C3%A9``: see :func:`~signal_feeds.urls.link_form`)
    is no new version: the entry is unchanged and keeps its stored link and fingerprint.
    """
    if stored is None:
        return "created"
    if stored == (row.fingerprint, row.content_fingerprint):
        return "unchanged"
    if (stored_url is not None and stored_url != row.url
            and stored[1] == row.content_fingerprint
            and _same_page(stored_url, row.url)
            and metadata_fingerprint(row, url=stored_url) == stored[0]):
        return "unchanged"
    return "updated"


def _same_page(stored_url: str, url: str) -> bool:
    """Two links that name one page: equal but for tracking parameters and spelling."""
    stored_url, url = without_tracking(stored_url), without_tracking(url)
    return stored_url == url or link_form(stored_url) == link_form(url)
