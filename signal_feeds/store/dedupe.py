"""Cross-source duplicates: marked on the rows, never deleted, never merged into keys.

The same story often arrives from several sources (the publisher, a mirror, a planet).
Identity keys stay per source; this module marks rows that tell the same story, one
marker column per detection channel:

- ``dup_link``: the same canonical link after aggressive *match* normalization (scheme,
  ``www.``, trailing slash and tracking parameters ignored; the query otherwise sorted).
  This is for matching only: the stored ``url`` keeps the link policy of ``urls.py``.
- ``dup_title``: the same normalized title from another source within a time window.
- ``dup_text``: near-identical title + summary (word-shingle Jaccard at or above 0.9),
  found through a few of each text's smallest shingle hashes (:data:`POSTED_TOKENS`).

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
import functools
import html
import math
import re
import sqlite3
import struct
import unicodedata
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from signal_feeds.timeutil import parse_time

if TYPE_CHECKING:
    from signal_feeds.store import Store

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
    "CommonTokens",
    "DedupeRow",
    "MatchKeys",
    "POSTED_TOKENS",
    "canonical_key",
    "clusters",
    "jaccard",
    "links_match",
    "mark_new_entries",
    "match_keys",
    "match_url",
    "normalize_title",
    "pack_tokens",
    "posted_tokens",
    "prefix_tokens",
    "recompute",
    "refresh_match_keys",
    "shingles",
    "texts_match",
    "titles_match",
    "unpack_tokens",
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
_T = TypeVar("_T")
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


# Characters common in feed text that are not NFKC-normalized, with their NFKC forms.
# NFKC decomposes character by character, so putting the decomposition in first gives
# the same result, and most texts (a WordPress excerpt's "[…]", a "&nbsp;") then pass
# the quick check instead of a full normalization.
_COMPATIBILITY = (("\u2026", "..."), ("\xa0", " "))


def _words(text: str) -> list[str]:
    """The case-folded NFKC words (``\\w+``) of ``text``."""
    if text.isascii():  # NFKC leaves ASCII as it is, and casefold() is lower() there
        text = text.lower()
    else:
        for char, form in _COMPATIBILITY:
            if char in text:
                text = text.replace(char, form)
        if not unicodedata.is_normalized("NFKC", text):
            text = unicodedata.normalize("NFKC", text)
        text = text.casefold()
    # The same list as _WORD.findall(text), faster: whitespace never belongs to a word,
    # and a whitespace-separated chunk of only alphanumerics (str.isalnum() is the
    # regular expression's definition of \\w, less the underscore) is one whole word.
    words: list[str] = []
    for chunk in text.split():
        if chunk.isalnum():
            words.append(chunk)
        else:
            words += _WORD.findall(chunk)
    return words


def normalize_title(title: str, *, min_chars: int = DEFAULT_MIN_TITLE_CHARS) -> str:
    """Case-folded words of a title joined by single spaces; ``""`` when too short to
    identify a story (punctuation, case and spacing never distinguish two titles)."""
    norm = " ".join(_words(html.unescape(title)))
    return norm if len(norm) >= min_chars else ""


_MASK63 = (1 << 63) - 1
_MIX = 0x9E3779B97F4A7C15  # odd 64-bit constant (the golden ratio): a multiplicative hash


def _window_hash(window: Sequence[int], size: int) -> int:
    value = 0
    for word in window:
        value = value << 32 | word
    # The word hashes packed side by side, times the constant: the product's upper bits
    # depend on every word. 63 bits of them fit SQLite's signed INTEGER.
    return (value * _MIX >> max(32 * size - 63, 0)) & _MASK63


def shingles(title: str, summary: str, *, size: int = DEFAULT_SHINGLE_SIZE,
             min_words: int = DEFAULT_MIN_TEXT_WORDS) -> frozenset[int]:
    """Hashes of the word shingles (``size`` consecutive words) of the title and the
    summary's text, as non-negative 63-bit integers.

    Empty when the text has fewer than ``min_words`` words. The hashes are stable across
    processes and Python versions (CRC-32 of each word, then a fixed multiplicative mix
    of each window): they are stored as the text channel's tokens.
    """
    words = _words(html.unescape(title) + " " + html.unescape(_TAG.sub(" ", summary)))
    if len(words) < max(min_words, size):
        return frozenset()
    # CRC-32 of every word, repeats included: hashing a word again is cheaper than
    # looking it up in a table of the text's distinct words.
    hashed = list(map(zlib.crc32, map(str.encode, words)))
    if size == 3:  # the default, unrolled (_window_hash inline): it runs for every entry
        return frozenset([((a << 64 | b << 32 | c) * _MIX >> 33) & _MASK63
                          for a, b, c in zip(hashed, hashed[1:], hashed[2:], strict=False)])
    return frozenset(_window_hash(hashed[i:i + size], size)
                     for i in range(len(words) - size + 1))


def jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """Size of the intersection over size of the union (0.0 for two empty sets)."""
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def prefix_tokens(items: frozenset[int], *,
                  threshold: float = DEFAULT_TEXT_THRESHOLD) -> list[int]:
    """The prefix-filter tokens of a set of shingle hashes: its smallest values.

    In one global order (the hashes' numeric order, which is pseudo-random), two sets
    with Jaccard >= t share a token among their first ``n - ceil(t * n) + 1``. The
    product ``t * n`` is rounded down a hair before the ceiling, so that float error
    (0.9 * 30 is 27.000000000000004) can only lengthen the prefix, never shorten it.
    """
    if not items:
        return []
    count = len(items)
    keep = count - math.ceil(threshold * count - 1e-9) + 1
    # Shingle hashes are spread evenly over [0, 2**63): the ``keep`` smallest nearly
    # always lie below a bound of three times their share of that range. When at least
    # ``keep`` values do, the smallest ``keep`` are among them: sorting only those gives
    # the same list for a fifth of the work. (Any other set still gets the right answer,
    # from the full sort.)
    if 3 * keep < count:
        bound = (_MASK63 + 1) * 3 * keep // count
        low = [item for item in items if item < bound]
        if len(low) >= keep:
            low.sort()
            return low[:keep]
    return sorted(items)[:keep]


#: Text tokens of an entry posted to ``dedupe_text``: the smallest of its prefix. Each
#: posting is one more row at a random place in a table that grows with the database,
#: the costliest write at a million entries. Two texts at or above the threshold differ
#: in few shingles, spread at random over the order: their five smallest values have
#: one in common unless five values one of them lacks come before the first they share,
#: about once in (1 / 0.1) ** 5 = 100,000 pairs at 0.9, less the closer they are,
#: never for identical texts, and never for texts of up to about 40 shingles, whose
#: whole prefix is five tokens or fewer.
POSTED_TOKENS = 5


def posted_tokens(tokens: Sequence[int]) -> Sequence[int]:
    """The tokens (:func:`prefix_tokens`, in order) an entry is found by."""
    return tokens[:POSTED_TOKENS]


def pack_tokens(tokens: Sequence[int]) -> bytes:
    """Tokens as stored in ``entries.text_tokens``: big-endian signed 64-bit integers."""
    return struct.pack(f">{len(tokens)}q", *tokens)


def unpack_tokens(blob: bytes | None) -> tuple[int, ...]:
    """The inverse of :func:`pack_tokens` (``()`` for NULL or an empty blob)."""
    if not blob:
        return ()
    return struct.unpack(f">{len(blob) // 8}q", blob)


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
    #: :func:`shingles` of the title and summary (left empty until the text channel
    #: compares this row: most rows are never compared).
    shingles: frozenset[int] = field(default=frozenset(), repr=False)
    #: The stored markers, by channel name.
    markers: Mapping[str, str] = field(default_factory=dict)
    #: :func:`prefix_tokens` of ``shingles``, as stored in ``entries.text_tokens``.
    tokens: tuple[int, ...] = field(default=(), repr=False)
    #: ``entries.seq``: how ``dedupe_text`` names the row (0 when not stored yet).
    seq: int = 0


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


@dataclass(frozen=True)
class MatchKeys:
    """What an entry is compared by, computed once when it is written."""

    match_url: str
    norm_title: str
    shingles: frozenset[int] = field(repr=False)
    #: :func:`prefix_tokens` of ``shingles``; the first (:func:`posted_tokens`) are the
    #: rows of ``dedupe_text`` for the entry.
    tokens: tuple[int, ...] = field(repr=False)


def match_keys(url: str, title: str, summary: str) -> MatchKeys:
    """The match URL, normalized title, shingles and text tokens of one entry."""
    text = shingles(title, summary)
    return MatchKeys(match_url(url), normalize_title(title), text, tuple(prefix_tokens(text)))


def _chunks(items: Sequence[_T]) -> Iterable[Sequence[_T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


_ROW_SQL = ("SELECT id, source_id, first_seen_at, published, match_url, norm_title, "
            "dup_link, dup_title, dup_text, text_tokens, seq FROM entries "
            "WHERE id IN ({marks})")


class _Rows:
    """The dedupe view of the rows one pass touches, loaded on first use.

    Shingles are computed only for rows the text channel actually compares: hashing a
    summary costs more than everything else a row needs.
    """

    def __init__(self, conn: sqlite3.Connection, given: Iterable[DedupeRow] = ()) -> None:
        self.conn = conn
        self.cache: dict[str, DedupeRow] = {}
        self.texts: dict[str, frozenset[int]] = {}
        for row in given:
            self.cache[row.key] = row
            if row.shingles:  # empty: not computed (hashed again only if compared)
                self.texts[row.key] = row.shingles

    def load(self, keys: Iterable[str]) -> None:
        missing = sorted({k for k in keys if k not in self.cache})
        for chunk in _chunks(missing):
            for r in self.conn.execute(_ROW_SQL.format(marks=",".join("?" * len(chunk))),
                                       chunk):
                self.cache[r[0]] = DedupeRow(
                    key=r[0], source_id=r[1], first_seen_at=r[2], moment=r[3] or r[2],
                    match_url=r[4], norm_title=r[5],
                    markers={"link": r[6], "title": r[7], "text": r[8]},
                    tokens=unpack_tokens(r[9]), seq=r[10] or 0)

    def get(self, key: str) -> DedupeRow:
        if key not in self.cache:
            self.load([key])
        return self.cache[key]

    def exists(self, key: str) -> bool:
        self.load([key])
        return key in self.cache

    def with_text(self, keys: Sequence[str]) -> list[DedupeRow]:
        """The rows with their shingles filled in."""
        missing = sorted({k for k in keys if k not in self.texts})
        for chunk in _chunks(missing):
            marks = ",".join("?" * len(chunk))
            for key, title, summary in self.conn.execute(
                    f"SELECT id, title, summary FROM entries WHERE id IN ({marks})", chunk):
                self.texts[key] = shingles(title or "", summary or "")
        return [replace(self.get(k), shingles=self.texts.get(k, frozenset())) for k in keys]


#: A match key shared by more other rows than this is too common to tell stories apart
#: (a feed's home page as every item's link, "Weekly update", a boilerplate footer's
#: shingles). Skipping it keeps the cost of marking one entry bounded.
MAX_POSTINGS = 50
#: Share of a row's prefix tokens (as stored in ``entries.text_tokens``) a candidate
#: found by a posted token must have before its text is compared.
TOKEN_SHARE = 0.5
#: Token lookups in a statement are padded to a multiple of this, so that few distinct
#: statements are prepared.
_TOKEN_GROUP = 8
_LINK, _TITLE = -2, -1  # labels of the link and title lookups; tokens are 0, 1, ...


@functools.lru_cache(maxsize=64)
def _candidates_sql(tokens: int) -> str:
    # Each lookup keeps its own LIMIT, so one very common key costs at most
    # MAX_POSTINGS + 1 rows; one statement per row instead of one per key.
    # The row itself is left out here, not in Python: it would be one more row per key.
    terms = [f"SELECT {_LINK}, id FROM (SELECT id FROM entries "
             "WHERE match_url = ?1 AND id != ?2 LIMIT ?3)",
             f"SELECT {_TITLE}, id FROM (SELECT id FROM entries "
             "WHERE norm_title = ?4 AND id != ?2 LIMIT ?3)"]
    # Token rows name their entry by seq: keys are looked up later, for the few seqs
    # that share enough tokens.
    terms += [f"SELECT {i}, entry FROM (SELECT entry FROM dedupe_text "
              f"WHERE token = ?{i + 6} AND entry != ?5 LIMIT ?3)" for i in range(tokens)]
    return " UNION ALL ".join(terms)


class CommonTokens:
    """Text tokens already seen with more than :data:`MAX_POSTINGS` rows.

    Rows are never deleted, so such a token stays too common to look up: remembering it
    saves reading its capped postings for every new entry that carries it (boilerplate
    such as "read more" or "appeared first on" is in every entry of a feed), and writing
    more of them. Bounded: forgotten wholesale past ``limit`` tokens, at worst a lookup
    is paid again.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self.limit = limit
        self.tokens: set[int] = set()

    def __contains__(self, token: object) -> bool:
        return token in self.tokens

    def add(self, token: int) -> None:
        if len(self.tokens) >= self.limit:
            self.tokens.clear()
        self.tokens.add(token)


def _candidates(conn: sqlite3.Connection, row: DedupeRow,
                common: CommonTokens) -> dict[str, list[str]]:
    """Rows that share a match key with ``row``, by channel (``row`` itself excluded)."""
    limit = MAX_POSTINGS + 1
    # Lookups go by the row's own posted tokens: for texts at or above the threshold,
    # those meet the other's (see POSTED_TOKENS).
    tokens = [token for token in posted_tokens(row.tokens) if token not in common]
    part: list[int | None] = list(tokens)
    part += [None] * (-len(part) % _TOKEN_GROUP)  # "token = NULL" matches nothing
    args: list[object] = [row.match_url or None, row.key, limit, row.norm_title or None]
    if part:  # ?5, the row's own seq, appears only in the token lookups
        args += [row.seq, *part]
    hits: dict[int, list[Any]] = {}  # keys for the link and title, seqs for tokens
    for label, found in conn.execute(_candidates_sql(len(part)), args):
        hits.setdefault(label, []).append(found)

    def posted(label: int) -> list[Any]:
        found = hits.get(label, [])
        return [] if len(found) > MAX_POSTINGS else found

    seqs: set[int] = set()
    for label, token in enumerate(tokens):
        if len(hits.get(label, ())) > MAX_POSTINGS:
            common.add(token)
        seqs.update(posted(label))
    # One chance common shingle is not worth comparing a row: two texts at or above the
    # threshold share most of their prefixes, which the rows carry. Checking that costs
    # the read of a row; comparing texts costs hashing its summary.
    need = max(1, math.ceil(len(row.tokens) * TOKEN_SHARE))
    mine = set(row.tokens)
    texts = []
    for chunk in _chunks(sorted(seqs)):
        # (A token row whose entry is gone names no key: it is left out here.)
        for key, stored in conn.execute(
                f"SELECT id, text_tokens FROM entries WHERE seq IN "
                f"({','.join('?' * len(chunk))}) ORDER BY seq", chunk):
            if len(mine.intersection(unpack_tokens(stored))) >= need:
                texts.append(key)
    found = {"link": posted(_LINK), "title": posted(_TITLE), "text": texts}
    return {channel: list(dict.fromkeys(keys)) for channel, keys in found.items()}


def _old_cluster(conn: sqlite3.Connection, column: str, row: DedupeRow,
                 channel: str) -> list[str]:
    """Members of the cluster the row belonged to before this pass."""
    canon = row.markers.get(channel) or row.key
    members = [r[0] for r in conn.execute(
        f"SELECT id FROM entries WHERE {column} = ? AND {column} != ''", (canon,))]
    return [canon, *members]


def _mark(conn: sqlite3.Connection, rows: _Rows, keys: Sequence[str], *,
          created: Collection[str], everything: bool,
          common: CommonTokens | None = None) -> DedupeReport:
    known = CommonTokens() if common is None else common
    found: dict[str, dict[str, list[str]]] = {}

    def candidates(key: str, channel: str) -> list[str]:
        if key not in found:
            found[key] = _candidates(conn, rows.get(key), known)
        return found[key][channel]

    changed: dict[str, int] = {}
    touched: set[str] = set()
    for channel, column in CHANNELS.items():
        match = _MATCHERS[channel]
        seeds: list[str] = list(keys)
        if not everything:
            # Rows that shared a cluster with a changed row may now fall apart or join
            # another: their whole old clusters are recomputed too. A row created just
            # now was in no cluster, and no marker can name it yet.
            for key in keys:
                if key not in created and rows.exists(key):
                    seeds.extend(_old_cluster(conn, column, rows.get(key), channel))
        seeds = [k for k in dict.fromkeys(seeds) if rows.exists(k)]

        def neighbours(key: str, channel: str = channel,
                       match: Callable[[DedupeRow, DedupeRow], bool] = match) -> list[str]:
            others = candidates(key, channel)
            rows.load(others)
            # Rows of one source never match each other (every matcher says so): drop
            # them before the text channel pays for their shingles.
            source = rows.get(key).source_id
            others = [k for k in others if k in rows.cache and rows.cache[k].source_id != source]
            if not others:
                return []
            if channel == "text":
                row, *compared = rows.with_text([key, *others])
            else:
                row, compared = rows.get(key), [rows.get(k) for k in others]
            return [other.key for other in compared if match(row, other)]

        count = 0
        for group in clusters(seeds, neighbours):
            if len(group) == 1 and not rows.get(next(iter(group))).markers.get(channel):
                continue  # alone and unmarked: the common case, nothing to write
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


_DERIVED = " ".join(f"WHEN {col} != '' THEN {col}" for col in list(CHANNELS.values())[:-1])
_DUPLICATE_OF = f"CASE {_DERIVED} ELSE {list(CHANNELS.values())[-1]} END"


def _derive_duplicate_of(conn: sqlite3.Connection, keys: Sequence[str]) -> None:
    for chunk in _chunks(keys):
        marks = ",".join("?" * len(chunk))
        conn.execute(f"UPDATE entries SET duplicate_of = {_DUPLICATE_OF} "
                     f"WHERE id IN ({marks}) AND duplicate_of != {_DUPLICATE_OF}", chunk)


def mark_new_entries(conn: sqlite3.Connection, rows: Sequence[DedupeRow], *,
                     created: Collection[str] = (),
                     common: CommonTokens | None = None) -> DedupeReport:
    """Mark the duplicates among the clusters touched by ``rows`` (entries just created
    or updated, as written, shingles included), inside the caller's open transaction.

    ``created`` names the rows that did not exist before this transaction: they belonged
    to no cluster, so no old cluster has to be recomputed for them. ``common`` carries
    the tokens known to be too common from one response to the next.
    """
    given = list({r.key: r for r in rows}.values())
    return _mark(conn, _Rows(conn, given), [r.key for r in given],
                 created=frozenset(created), everything=False, common=common)


_REFRESH_BATCH = 500


def refresh_match_keys(conn: sqlite3.Connection) -> None:
    """Recompute every entry's match keys and text tokens from its stored fields,
    rewrite those that changed, and rebuild ``dedupe_text`` (inside the caller's
    transaction). Walks the table in key order, a batch at a time."""
    # Rows written by other means (an older Signal, by hand) may have no seq yet: number
    # them after every seq in use.
    conn.execute("UPDATE entries SET seq = (SELECT coalesce(max(seq), 0) FROM entries) "
                 "+ rowid WHERE seq IS NULL")
    conn.execute("DELETE FROM dedupe_text")
    last = ""
    while True:
        batch = conn.execute(
            "SELECT id, url, title, summary, match_url, norm_title, text_tokens, seq "
            "FROM entries WHERE id > ? ORDER BY id LIMIT ?", (last, _REFRESH_BATCH)).fetchall()
        if not batch:
            return
        updates: list[tuple[str, str, bytes, str]] = []
        tokens: list[tuple[int, int]] = []
        for key, url, title, summary, old_url, old_title, old_tokens, seq in batch:
            keys = match_keys(url or "", title or "", summary or "")
            packed = pack_tokens(keys.tokens)
            if (keys.match_url, keys.norm_title, packed) != (old_url, old_title,
                                                             old_tokens or b""):
                updates.append((keys.match_url, keys.norm_title, packed, key))
            tokens.extend((token, seq) for token in posted_tokens(keys.tokens))
        conn.executemany("UPDATE entries SET match_url = ?, norm_title = ?, text_tokens = ? "
                         "WHERE id = ?", updates)
        conn.executemany("INSERT OR IGNORE INTO dedupe_text (token, entry) VALUES (?, ?)",
                         tokens)
        last = batch[-1][0]


def recompute(store: Store) -> DedupeReport:
    """Recompute every match key and every cluster (``signal dedupe``) in one
    transaction. Running it again changes nothing."""
    with store.transaction() as conn:
        refresh_match_keys(conn)
        keys = [r[0] for r in conn.execute("SELECT id FROM entries ORDER BY id")]
        return _mark(conn, _Rows(conn), keys, created=(), everything=True)
