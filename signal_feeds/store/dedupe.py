"""Cross-source duplicates: marked on the rows, never deleted, never merged into keys.

The same story often arrives from several sources (the publisher, a mirror, a planet).
Identity keys stay per source; this module marks rows that tell the same story, one
marker column per detection channel:

- ``dup_link``: the same canonical link after aggressive *match* normalization (scheme,
  ``www.``, trailing slash and tracking parameters ignored; the query otherwise sorted).
  This is for matching only: the stored ``url`` keeps the link policy of ``urls.py``.
- ``dup_title``: the same normalized title from another source within a time window.
- ``dup_text``: near-identical title + summary (word-shingle Jaccard at or above 0.9).

Within a channel, rows from different sources that match are linked; a cluster is a
connected group of linked rows and its canonical row is the oldest (earliest
``first_seen_at``, then smallest key). Every other member's marker names the canonical
row, so a marker always points at an older row and chains always end. ``duplicate_of``
takes the first non-empty marker in :data:`CHANNELS` order. A channel only ever writes
its own column.

:func:`mark_new_entries` runs inside the store's transaction for the rows one response
created or changed; :func:`recompute` (``signal dedupe``) recomputes every cluster with
the same code, so both converge on the same markers.
"""

from __future__ import annotations

import datetime as dt
import html
import math
import re
import sqlite3
import unicodedata
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..timeutil import parse_time

if TYPE_CHECKING:
    from . import Store

__all__ = [
    "CHANNELS",
    "DEFAULT_MIN_TEXT_WORDS",
    "DEFAULT_MIN_TITLE_CHARS",
    "DEFAULT_SHINGLE_SIZE",
    "DEFAULT_TEXT_THRESHOLD",
    "DEFAULT_TITLE_WINDOW",
    "TRACKING_PARAMETERS",
    "DedupeReport",
    "MAX_POSTINGS",
    "DedupeRow",
    "canonical_key",
    "clusters",
    "jaccard",
    "links_match",
    "mark_new_entries",
    "match_url",
    "normalize_title",
    "prefix_tokens",
    "recompute",
    "shingles",
    "texts_match",
    "titles_match",
]

#: Detection channels in ``duplicate_of`` priority order, with their marker columns.
CHANNELS: Mapping[str, str] = {"link": "dup_link", "title": "dup_title", "text": "dup_text"}
#: Two equal titles count only if their dates are at most this far apart.
DEFAULT_TITLE_WINDOW = dt.timedelta(hours=48)
#: Shorter normalized titles ("News", "Update 3") are too generic to match on.
DEFAULT_MIN_TITLE_CHARS = 12
DEFAULT_SHINGLE_SIZE = 3
#: Texts with fewer words have too few shingles for the overlap to mean anything.
DEFAULT_MIN_TEXT_WORDS = 8
DEFAULT_TEXT_THRESHOLD = 0.9
#: Query parameters that say how a reader arrived, not which page it is.
TRACKING_PARAMETERS = frozenset({
    "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "igshid",
    "mc_cid", "mc_eid", "_ga", "_gl",
})
_TRACKING_PREFIXES = ("utm_",)
_CHUNK = 500  # bound on SQL variables per IN (...)
_WORD = re.compile(r"\w+")
_TAG = re.compile(r"<[^>]*>")


# -- match keys (pure) --------------------------------------------------------------------


def match_url(url: str) -> str:
    """The link as compared for duplicates, or ``""`` when there is nothing to compare.

    Scheme, ``www.``, default ports, a trailing slash, the fragment and tracking
    parameters (``utm_*``, ``fbclid``, ``gclid``, ...) are dropped; the remaining query
    parameters are sorted. ``https://www.Example.org/a/?utm_source=x&b=2&a=1#top`` and
    ``http://example.org/a?a=1&b=2`` give the same ``example.org/a?a=1&b=2``.
    """
    text = url.strip()
    if not text:
        return ""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme.lower() not in ("http", "https"):
        return ""
    host = (parts.hostname or "").lower().rstrip(".")
    host = host.removeprefix("www.")
    if not host:
        return ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is not None and port not in (80, 443):
        host = f"{host}:{port}"
    query = sorted(
        (name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if name.lower() not in TRACKING_PARAMETERS
        and not name.lower().startswith(_TRACKING_PREFIXES)
    )
    encoded = urlencode(query)
    return host + parts.path.rstrip("/") + (f"?{encoded}" if encoded else "")


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


def normalize_title(title: str, *, min_chars: int = DEFAULT_MIN_TITLE_CHARS) -> str:
    """Case-folded words of a title joined by single spaces; ``""`` when too short to
    identify a story (punctuation, case and spacing never distinguish two titles)."""
    norm = " ".join(_words(html.unescape(title)))
    return norm if len(norm) >= min_chars else ""


def shingles(title: str, summary: str, *, size: int = DEFAULT_SHINGLE_SIZE,
             min_words: int = DEFAULT_MIN_TEXT_WORDS) -> frozenset[str]:
    """Word shingles (``size`` consecutive words) of the title and the summary's text.

    Empty when the text has fewer than ``min_words`` words.
    """
    words = _words(html.unescape(title) + " " + html.unescape(_TAG.sub(" ", summary)))
    if len(words) < max(min_words, size):
        return frozenset()
    return frozenset(" ".join(words[i:i + size]) for i in range(len(words) - size + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Size of the intersection over size of the union (0.0 for two empty sets)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def prefix_tokens(items: frozenset[str], *,
                  threshold: float = DEFAULT_TEXT_THRESHOLD) -> list[str]:
    """The prefix-filter tokens of a shingle set.

    Shingles are hashed and sorted in one global order; two sets with Jaccard >= t
    must share a token among their first ``n - ceil(t * n) + 1``. We keep one more
    than that (floor instead of ceil), so float rounding can only add candidates.
    """
    # crc32 is stable across processes and ~20 times cheaper than a cryptographic hash;
    # a collision only adds a candidate, which the exact comparison then rejects.
    tokens = sorted({f"{zlib.crc32(s.encode('utf-8')):08x}" for s in items})
    if not tokens:
        return []
    keep = len(tokens) - math.floor(threshold * len(tokens)) + 1
    return tokens[:keep]


# -- clustering decisions (pure) ----------------------------------------------------------


@dataclass(frozen=True)
class DedupeRow:
    """What the channels compare about one stored entry."""

    key: str
    source_id: str
    first_seen_at: str
    #: ``published`` if the feed gave one, otherwise ``first_seen_at``.
    moment: str
    match_url: str
    norm_title: str
    shingles: frozenset[str] = field(repr=False)
    #: The stored markers, by channel name.
    markers: Mapping[str, str] = field(default_factory=dict)
    #: :func:`prefix_tokens` of ``shingles`` (computed once per pass: hashing dominates).
    tokens: tuple[str, ...] = field(default=(), repr=False)


def links_match(a: DedupeRow, b: DedupeRow) -> bool:
    """Same match URL, different sources."""
    return a.source_id != b.source_id and bool(a.match_url) and a.match_url == b.match_url


def titles_match(a: DedupeRow, b: DedupeRow, *,
                 window: dt.timedelta = DEFAULT_TITLE_WINDOW) -> bool:
    """Same normalized title, different sources, dates at most ``window`` apart."""
    if a.source_id == b.source_id or not a.norm_title or a.norm_title != b.norm_title:
        return False
    ta, tb = parse_time(a.moment), parse_time(b.moment)
    return ta is not None and tb is not None and abs(ta - tb) <= window


def texts_match(a: DedupeRow, b: DedupeRow, *,
                threshold: float = DEFAULT_TEXT_THRESHOLD) -> bool:
    """Near-identical text (shingle Jaccard >= ``threshold``), different sources."""
    return a.source_id != b.source_id and jaccard(a.shingles, b.shingles) >= threshold


_MATCHERS: Mapping[str, Callable[[DedupeRow, DedupeRow], bool]] = {
    "link": links_match, "title": titles_match, "text": texts_match,
}


def canonical_key(rows: Iterable[DedupeRow]) -> str:
    """The cluster's canonical row: earliest first seen, then smallest key."""
    return min(rows, key=lambda r: (r.first_seen_at, r.key)).key


def clusters(seeds: Iterable[str], neighbours: Callable[[str], Iterable[str]]
             ) -> list[frozenset[str]]:
    """Connected groups of ``seeds`` under ``neighbours`` (each seed in exactly one)."""
    seen: set[str] = set()
    found: list[frozenset[str]] = []
    for seed in seeds:
        if seed in seen:
            continue
        seen.add(seed)
        group, stack = {seed}, [seed]
        while stack:
            for other in neighbours(stack.pop()):
                if other not in seen:
                    seen.add(other)
                    group.add(other)
                    stack.append(other)
        found.append(frozenset(group))
    return found


def markers_for(group: Iterable[DedupeRow]) -> dict[str, str]:
    """Marker per member: ``""`` for the canonical row, its key for every other row."""
    members = list(group)
    canon = canonical_key(members)
    return {r.key: "" if r.key == canon else canon for r in members}


# -- database side ------------------------------------------------------------------------


@dataclass(frozen=True)
class DedupeReport:
    """What a marking pass did: rows examined and markers changed per channel."""

    rows: int
    changed: Mapping[str, int]
    #: Rows marked as a duplicate after the pass, in the whole database (counted by
    #: :func:`recompute` only; ``None`` after marking one response).
    duplicates: int | None = None

    @property
    def total_changed(self) -> int:
        """Markers changed over all channels."""
        return sum(self.changed.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"rows": self.rows, "changed": dict(self.changed),
                "total_changed": self.total_changed, "duplicates": self.duplicates}


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


class _Rows:
    """Loads and caches the dedupe view of rows for one pass."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.cache: dict[str, DedupeRow] = {}

    def load(self, keys: Iterable[str], *, refresh: bool = False) -> None:
        """Load rows not yet cached. With ``refresh`` their match keys are recomputed
        from the stored fields and written back (with their text tokens)."""
        missing = sorted({k for k in keys if k not in self.cache})
        for chunk in _chunks(missing):
            marks = ",".join("?" * len(chunk))
            tokens: list[tuple[str, str]] = []
            updates: list[tuple[str, str, str]] = []
            for r in self.conn.execute(
                "SELECT id, source_id, first_seen_at, published, title, summary, match_url, "
                "norm_title, dup_link, dup_title, dup_text, url FROM entries "
                f"WHERE id IN ({marks})", chunk,
            ):
                text = shingles(r[4] or "", r[5] or "")
                row = DedupeRow(
                    key=r[0], source_id=r[1], first_seen_at=r[2], moment=r[3] or r[2],
                    match_url=r[6], norm_title=r[7], shingles=text,
                    markers={"link": r[8], "title": r[9], "text": r[10]},
                    tokens=tuple(prefix_tokens(text)))
                if refresh:
                    fresh = (match_url(r[11] or ""), normalize_title(r[4] or ""))
                    if fresh != (row.match_url, row.norm_title):
                        updates.append((*fresh, row.key))
                        row = replace(row, match_url=fresh[0], norm_title=fresh[1])
                    tokens.extend((row.key, t) for t in row.tokens)
                self.cache[row.key] = row
            if refresh:
                self.conn.executemany("UPDATE entries SET match_url = ?, norm_title = ? "
                                      "WHERE id = ?", updates)
                self.conn.execute(f"DELETE FROM dedupe_tokens WHERE entry_id IN ({marks})",
                                  chunk)
                self.conn.executemany("INSERT INTO dedupe_tokens (entry_id, token) "
                                      "VALUES (?, ?)", tokens)

    def get(self, key: str) -> DedupeRow:
        if key not in self.cache:
            self.load([key])
        return self.cache[key]


#: A match key shared by more rows than this is too common to tell stories apart
#: (a feed's home page as every item's link, "Weekly update", a boilerplate footer's
#: shingles). Skipping it keeps the cost of marking one entry bounded.
MAX_POSTINGS = 50
#: Share of a row's prefix tokens a candidate must have before its text is compared.
TOKEN_SHARE = 0.5


def _postings(conn: sqlite3.Connection, sql: str, value: str) -> list[str]:
    ids = [r[0] for r in conn.execute(sql, (value, MAX_POSTINGS + 1))]
    return [] if len(ids) > MAX_POSTINGS else ids


def _candidates(conn: sqlite3.Connection, channel: str, row: DedupeRow) -> list[str]:
    if channel == "link":
        found = _postings(conn, "SELECT id FROM entries WHERE match_url = ? LIMIT ?",
                          row.match_url) if row.match_url else []
    elif channel == "title":
        found = _postings(conn, "SELECT id FROM entries WHERE norm_title = ? LIMIT ?",
                          row.norm_title) if row.norm_title else []
    else:
        shared: dict[str, int] = {}
        for token in row.tokens:
            for key in _postings(conn, "SELECT entry_id FROM dedupe_tokens WHERE token = ? "
                                 "LIMIT ?", token):
                shared[key] = shared.get(key, 0) + 1
        # Two texts at or above the threshold share most of their smallest shingle
        # hashes; one chance common shingle is not worth loading and comparing a row.
        need = max(1, math.ceil(len(row.tokens) * TOKEN_SHARE))
        found = [key for key, count in shared.items() if count >= need]
    return [k for k in dict.fromkeys(found) if k != row.key]


def _old_cluster(conn: sqlite3.Connection, column: str, row: DedupeRow,
                 channel: str) -> list[str]:
    """Members of the cluster the row belonged to before this pass."""
    canon = row.markers.get(channel) or row.key
    members = [r[0] for r in conn.execute(
        f"SELECT id FROM entries WHERE {column} = ?", (canon,))]
    return [canon, *members]


def _mark(conn: sqlite3.Connection, keys: Sequence[str], *, everything: bool) -> DedupeReport:
    rows = _Rows(conn)
    rows.load(keys, refresh=True)  # first: the candidates queries read these columns
    changed: dict[str, int] = {}
    touched: set[str] = set()
    for channel, column in CHANNELS.items():
        match = _MATCHERS[channel]
        seeds: list[str] = list(keys)
        if not everything:
            # Rows that shared a cluster with a changed row may now fall apart or join
            # another: their whole old clusters are recomputed too.
            for key in keys:
                if key in rows.cache:
                    seeds.extend(_old_cluster(conn, column, rows.cache[key], channel))
        seeds = [k for k in dict.fromkeys(seeds) if k in rows.cache or _exists(rows, k)]

        def neighbours(key: str, channel: str = channel,
                       match: Callable[[DedupeRow, DedupeRow], bool] = match) -> list[str]:
            row = rows.get(key)
            found = _candidates(conn, channel, row)
            rows.load(found)
            return [k for k in found if match(row, rows.cache[k])]

        count = 0
        for group in clusters(seeds, neighbours):
            for key, marker in markers_for(rows.get(k) for k in group).items():
                if rows.get(key).markers.get(channel, "") != marker:
                    conn.execute(f"UPDATE entries SET {column} = ? WHERE id = ?", (marker, key))
                    touched.add(key)
                    count += 1
        changed[channel] = count
    _derive_duplicate_of(conn, sorted(touched))
    duplicates = None
    if everything:  # a whole-table count is worth it for `signal dedupe`, not per response
        duplicates = int(conn.execute("SELECT count(*) FROM entries WHERE duplicate_of != ''"
                                      ).fetchone()[0])
    return DedupeReport(rows=len(keys), changed=changed, duplicates=duplicates)


def _exists(rows: _Rows, key: str) -> bool:
    rows.load([key])
    return key in rows.cache


_DERIVED = " ".join(f"WHEN {col} != '' THEN {col}" for col in list(CHANNELS.values())[:-1])
_DUPLICATE_OF = f"CASE {_DERIVED} ELSE {list(CHANNELS.values())[-1]} END"


def _derive_duplicate_of(conn: sqlite3.Connection, keys: Sequence[str]) -> None:
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        conn.execute(f"UPDATE entries SET duplicate_of = {_DUPLICATE_OF} "
                     f"WHERE id IN ({marks}) AND duplicate_of != {_DUPLICATE_OF}", chunk)


def mark_new_entries(conn: sqlite3.Connection, keys: Sequence[str],
                     now: dt.datetime | None = None) -> DedupeReport:
    """Mark the duplicates among the clusters touched by ``keys`` (rows just created or
    updated), inside the caller's open transaction.

    ``now`` is the transaction's time (the ``first_seen_at`` of created rows); it is not
    needed for the decisions, which use only stored values, and is accepted so callers
    pass what they have.
    """
    del now  # decisions depend on stored data only, so incremental == recompute
    return _mark(conn, list(dict.fromkeys(keys)), everything=False)


def recompute(store: Store) -> DedupeReport:
    """Recompute every match key and every cluster (``signal dedupe``) in one
    transaction. Running it again changes nothing."""
    with store.transaction() as conn:
        keys = [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY id")]
        return _mark(conn, keys, everything=True)
